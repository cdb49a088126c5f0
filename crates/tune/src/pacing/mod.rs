//! Pacing laws: how a connection's sending is spread over time, decided per connection beside
//! its buffer law: none, TCP's internal pacing (the streams of a transfer whose count grows), or
//! rates set from `TCP_INFO` ([`adaptive`]: CWP, and CWP with EABP).

pub mod adaptive;

use crate::sample::Sample;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::time::Duration;

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

/// A pacing law's decision, and why when its state changed.
#[derive(Debug, Clone, PartialEq)]
pub struct Paced {
    /// The pacing to set.
    pub pace: Pace,
    /// Why, when the law's state changed (telemetry, logs).
    pub note: Option<String>,
}

/// A pacing law for the sending end of one connection: events in, a pacing out.
pub trait PacingLaw: Send {
    /// The pacing to set once the connection is made, if any.
    fn setup(&self) -> Option<Pace>;
    /// Takes one sample; a new pacing, if it changes.
    fn on_sample(&mut self, _s: &Sample) -> Option<Paced> {
        None
    }
    /// When the law wants its next sample, if it has a wish (about an RTT).
    fn next(&self) -> Option<Duration> {
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

/// Which pacing law the connections of a transfer run (`--pacing`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Pacing {
    /// No pacing.
    #[default]
    Off,
    /// TCP's internal pacing at its own rate.
    Tcp,
    /// Congestion-window pacing: cwnd/RTT.
    Cwp,
    /// CWP with EABP (the seed's adaptive pacing).
    Adaptive,
}

impl Pacing {
    /// Every name, for help texts.
    pub const NAMES: &'static str = "off, tcp, cwp, adaptive";

    /// Parses a name as written on the command line or in `OPTS DRS`.
    pub fn parse(s: &str) -> Result<Pacing, String> {
        match s.trim().to_ascii_lowercase().as_str() {
            "off" => Ok(Pacing::Off),
            "tcp" => Ok(Pacing::Tcp),
            "cwp" => Ok(Pacing::Cwp),
            "adaptive" => Ok(Pacing::Adaptive),
            _ => Err(format!("unknown pacing {s:?}; use {}", Self::NAMES)),
        }
    }

    /// A fresh law of this kind for one connection.
    pub fn law(self) -> Box<dyn PacingLaw> {
        match self {
            Pacing::Off => Box::new(Unpaced),
            Pacing::Tcp => Box::new(TcpPacing),
            Pacing::Cwp => Box::new(adaptive::Adaptive::new(false)),
            Pacing::Adaptive => Box::new(adaptive::Adaptive::new(true)),
        }
    }

    /// Why the transfer's streams are paced so, for its summary; `None` when unpaced.
    pub fn why(self) -> Option<&'static str> {
        match self {
            Pacing::Off => None,
            Pacing::Tcp => Some(
                "streams paced by TCP (internal pacing), with uncapped buffers once there are \
                 several: a stream's slow-start bursts would otherwise end its siblings' slow \
                 start early (a lone stream's bursts show the receiver the path's capacity)",
            ),
            Pacing::Cwp => Some("every stream paced at its congestion window per RTT (CWP)"),
            Pacing::Adaptive => Some(
                "every stream paced adaptively: at its congestion window per RTT (CWP), and at \
                 the rate of its last loss for a while once it gets near it (EABP)",
            ),
        }
    }
}

impl fmt::Display for Pacing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Pacing::Off => "off",
            Pacing::Tcp => "tcp",
            Pacing::Cwp => "cwp",
            Pacing::Adaptive => "adaptive",
        })
    }
}
