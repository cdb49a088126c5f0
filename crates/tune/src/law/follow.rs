//! The seeds' sender: it cannot see the receiver's window, so it sets its send buffer to
//! whatever the receiver announces over the control channel.

use super::STOCK_BUFFER;
use super::{Buffers, Decision, Law, Setup};
use crate::sample::Sample;
use std::time::Duration;

/// How often the follower looks for a new announcement.
const EVERY: Duration = Duration::from_millis(50);

/// A sender whose send buffer follows the receiver's announcements.
#[derive(Debug, Clone)]
pub struct Follow {
    preconnect: Option<u64>,
    applied: Option<u64>,
}

impl Follow {
    /// `preconnect`: large buffers to set before connecting (drsFTP's window-scale trick),
    /// reset to the stock size once connected.
    pub fn new(preconnect: Option<u64>) -> Follow {
        Follow {
            preconnect,
            applied: None,
        }
    }
}

impl Law for Follow {
    fn setup(&self) -> Setup {
        match self.preconnect {
            Some(n) => Setup {
                before_connect: Buffers::both(n),
                after_connect: Buffers::both(STOCK_BUFFER),
                ..Setup::default()
            },
            None => Setup::default(),
        }
    }

    fn on_sample(&mut self, s: &Sample) -> Decision {
        let mut d = Decision {
            next: EVERY,
            ..Decision::default()
        };
        if let Some(n) = s.peer_buffer.filter(|&n| Some(n) != self.applied) {
            self.applied = Some(n);
            d.set.sndbuf = Some(n);
            d.note = Some(format!(
                "follow the receiver's announced buffer of {n} bytes"
            ));
        }
        d
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn applies_each_new_announcement_once() {
        let mut law = Follow::new(Some(16 << 20));
        assert_eq!(law.setup().after_connect, Buffers::both(STOCK_BUFFER));
        let mut s = Sample::default();
        assert_eq!(law.on_sample(&s).set, Buffers::default());
        s.peer_buffer = Some(1 << 20);
        assert_eq!(law.on_sample(&s).set.sndbuf, Some(1 << 20));
        assert_eq!(law.on_sample(&s).set.sndbuf, None);
        s.peer_buffer = Some(4 << 20);
        assert_eq!(law.on_sample(&s).set.sndbuf, Some(4 << 20));
    }
}
