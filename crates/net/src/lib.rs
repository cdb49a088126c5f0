#![warn(missing_docs)]
//! fatpipe's data path: the movers (MODE S, MODE E; one [`Mover`] trait) and the byte pumps
//! under them, the socket set-up they need, and the [`Conductor`] that drives each transfer's
//! laws on its live sockets (the laws themselves live in `fatpipe-tune`).

pub mod admission;
pub mod at_most;
pub mod buffers;
pub mod checksum;
pub mod conductor;
pub mod congestion;
pub mod interface;
pub mod link;
pub mod live;
pub mod mode_e;
pub mod mover;
pub mod pacing;
pub mod partial;
pub mod pump;
pub mod rate_budget;
pub mod reload;
pub mod sandbox;
pub mod socket;
mod sockopt;
pub mod splice;
pub mod stall;
pub mod tcpinfo;
pub mod telemetry;
pub mod thread_clock;
pub mod tls;
pub mod tuner;
pub mod udp;
pub mod wake;

pub use conductor::Conductor;
pub use mover::{Moved, Mover};
pub use pump::{Pump, PumpError};
pub use tuner::{TuneSummary, TunerConfig};
