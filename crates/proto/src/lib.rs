#![warn(missing_docs)]
//! Wire formats of the fatpipe control channel (FTP, RFC 959 and its extensions), free of I/O.
//!
//! Everything here takes bytes or strings and returns values, so the server, the client and the
//! fuzz targets share one definition of the protocol and each piece is testable in isolation.

pub mod addr;
pub mod ascii;
pub mod command;
pub mod drs;
pub mod gridftp;
pub mod line;
pub mod listing;
pub mod mode_e;
pub mod ranges;
pub mod reply;
pub mod udp;
pub mod vpath;

pub use command::{Command, CommandError, TransferType};
pub use reply::Reply;
pub use vpath::VPath;
