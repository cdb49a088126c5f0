#![warn(missing_docs)]
//! fatpipe's data movers: blocking byte pumps between files and sockets, and the socket set-up
//! they need. Control logic lives elsewhere; this crate only moves bytes fast and reports them.

pub mod pump;
pub mod socket;

pub use pump::{Pump, PumpError};
