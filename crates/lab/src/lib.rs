#![warn(missing_docs)]
//! The lab: runs a transfer tool across an emulated path several times and measures each run
//! the same way whatever the tool: throughput over the data phase (seen by the emulator),
//! retransmissions (the sender's TCP counters) and peak socket-buffer memory (`ss -tm`).

pub mod demo;
pub mod measure;
pub mod plot;
pub mod report;
pub mod runner;
pub mod tools;
