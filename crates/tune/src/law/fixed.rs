//! Fixed buffers (`stock`, `static:SIZE`) or none at all (`kernel`): set before connect, then
//! only watched.

use super::{Buffers, Decision, Law, Setup};
use crate::sample::Sample;
use std::time::Duration;

/// How often a fixed law samples (only for telemetry).
const EVERY: Duration = Duration::from_millis(100);

/// Sets both buffers to one size before connect (or leaves them to the kernel) and never again.
#[derive(Debug, Clone)]
pub struct Fixed {
    size: Option<u64>,
}

impl Fixed {
    /// `None` leaves the buffers to the kernel's autotuning.
    pub fn new(size: Option<u64>) -> Fixed {
        Fixed { size }
    }
}

impl Law for Fixed {
    fn setup(&self) -> Setup {
        Setup {
            before_connect: self.size.map(Buffers::both).unwrap_or_default(),
            ..Setup::default()
        }
    }

    fn on_sample(&mut self, _: &Sample) -> Decision {
        Decision {
            next: EVERY,
            ..Decision::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn static_sets_both_before_connect_and_nothing_after() {
        let mut law = Fixed::new(Some(1 << 20));
        assert_eq!(law.setup().before_connect, Buffers::both(1 << 20));
        let d = law.on_sample(&Sample::default());
        assert_eq!(d.set, Buffers::default());
        assert_eq!(Fixed::new(None).setup(), Setup::default());
    }
}
