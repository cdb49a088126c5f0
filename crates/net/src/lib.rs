#![warn(missing_docs)]
//! fatpipe's data movers: blocking byte pumps between files and sockets, and the socket set-up
//! they need, and the driver that applies a tuning law to a live socket (the laws themselves
//! live in `fatpipe-tune`).

pub mod buffers;
pub mod checksum;
pub mod mode_e;
pub mod pacing;
pub mod partial;
pub mod pump;
pub mod socket;
mod sockopt;
pub mod tcpinfo;
pub mod telemetry;
pub mod tuner;
pub mod tuners;

pub use pump::{Pump, PumpError};
pub use tuner::{TuneSummary, Tuner, TunerConfig};
pub use tuners::Tuners;
