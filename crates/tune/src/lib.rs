//! Control laws for the data channel, free of I/O: a law is fed [`Sample`]s (what one end
//! observed, with the time as a value) and answers with a [`Decision`]. Per connection a
//! [`Plan`] runs a buffer law ([`law`]) beside a pacing law ([`pacing`]); per transfer a policy
//! chooses the stream count ([`streams`]); all read one [`path`] estimate. One [`transfer`]
//! core per transfer holds them all (inputs in, actions and timeouts out); its driver, which
//! reads `TCP_INFO` and calls `setsockopt`, is `fatpipe-net`'s conductor.
#![warn(missing_docs)]

pub mod congestion;
pub mod law;
pub mod mode;
pub mod pacing;
pub mod path;
pub mod plan;
pub mod rate;
pub mod sample;
pub mod size;
pub mod streams;
pub mod telemetry;
#[cfg(test)]
mod testing;
pub mod transfer;

pub use congestion::{CongestionControl, PacedBy};
pub use law::Params;
pub use law::{Decision, Law, Setup};
pub use mode::Tuning;
pub use pacing::{Pace, Pacing};
pub use plan::Plan;
pub use sample::{Role, Sample, TcpStats};
