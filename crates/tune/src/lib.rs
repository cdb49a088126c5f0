//! Control laws for the data channel's socket buffers, free of I/O: a law is fed [`Sample`]s
//! (what one end observed, with the time as a value) and answers with a [`Decision`]. The
//! drivers that read `TCP_INFO` and call `setsockopt` live in `fatpipe-net`.
#![warn(missing_docs)]

pub mod law;
pub mod mode;
pub mod sample;
pub mod size;
pub mod streams;

pub use law::{Decision, Law, Setup};
pub use mode::{Params, Tuning};
pub use sample::{Role, Sample, TcpStats};
