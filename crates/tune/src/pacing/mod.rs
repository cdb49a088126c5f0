//! Pacing laws: how a connection's sending is spread over time, decided per connection beside
//! its buffer law. Today's one law switches TCP's internal pacing on for the streams of a
//! transfer whose stream count grows; rate-setting laws (CWP, EABP) slot in beside it.

use crate::sample::Sample;
use serde::{Deserialize, Serialize};

/// The pacing a connection's sender applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Pace {
    /// TCP paces the socket itself at its own rate (internal pacing, no ceiling): each window
    /// is spread over the round trip instead of leaving in line-rate bursts.
    Tcp,
    /// At most this many bytes per second.
    Rate(u64),
}

/// A pacing law for the sending end of one connection: events in, a pacing out.
pub trait PacingLaw: Send {
    /// The pacing to set once the connection is made, if any.
    fn setup(&self) -> Option<Pace>;
    /// Takes one sample; a new pacing, if it changes.
    fn on_sample(&mut self, _s: &Sample) -> Option<Pace> {
        None
    }
}

/// Sends as the kernel does by default: no pacing set.
#[derive(Debug, Clone, Copy, Default)]
pub struct Unpaced;

impl PacingLaw for Unpaced {
    fn setup(&self) -> Option<Pace> {
        None
    }
}

/// TCP's internal pacing from the start. Parallel streams need it: one stream's slow-start
/// burst queues at the bottleneck for tens of milliseconds, and the delay check of cubic's
/// HyStart in every sibling then ends its slow start early (measured at 200 ms: half of the
/// streams opened together stuck near 0.5 MB windows for seconds).
#[derive(Debug, Clone, Copy, Default)]
pub struct TcpPacing;

impl PacingLaw for TcpPacing {
    fn setup(&self) -> Option<Pace> {
        Some(Pace::Tcp)
    }
}

/// Which pacing law the connections of a transfer run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Pacing {
    /// No pacing (one stream, or a fixed count).
    #[default]
    Off,
    /// TCP's internal pacing (streams whose count grows).
    Tcp,
}

impl Pacing {
    /// A fresh law of this kind for one connection.
    pub fn law(self) -> Box<dyn PacingLaw> {
        match self {
            Pacing::Off => Box::new(Unpaced),
            Pacing::Tcp => Box::new(TcpPacing),
        }
    }

    /// Why the transfer's streams are paced so, for its summary; `None` when unpaced.
    pub fn why(self) -> Option<&'static str> {
        match self {
            Pacing::Off => None,
            Pacing::Tcp => Some(
                "every stream paced by TCP (internal pacing): a stream's slow-start bursts \
                 would otherwise end its siblings' slow start early",
            ),
        }
    }
}
