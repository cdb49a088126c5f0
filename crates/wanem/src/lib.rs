#![warn(missing_docs)]
//! fatpipe's WAN emulator: two network namespaces joined by a userspace delay line (TUN devices),
//! with per-direction rate, delay, drop-tail queue, random loss and time schedules.
//!
//! `link` and `schedule` are pure (time injected); `tun`, `netns`, `engine` and `testbed` do the I/O.

pub mod daemon;
pub mod engine;
pub mod link;
pub mod netns;
pub mod schedule;
pub mod testbed;
pub mod tun;
pub mod units;

pub use testbed::{Profile, Side, Testbed, TestbedConfig};
