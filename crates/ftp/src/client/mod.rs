//! The FTP client: a control connection ([`Connection`]), locations given on the command line
//! ([`Location`]), and whole copies of files and trees ([`copy_command`], each session's
//! files in [`copy`]).

pub mod auto;
pub mod check;
mod connection;
pub mod copy;
pub mod copy_command;
mod copy_options;
pub mod failure;
mod file_result;
pub mod filter;
mod location;
pub mod login;
mod mirror;
pub mod part;
pub mod path_memory;
pub mod plan;
mod pool;
pub mod relay;
pub mod retry;
mod room;
pub mod sync;
pub mod transport;
mod uploads_ahead;
mod verify;

pub use connection::{Connection, Credentials, Streams, StreamsReport, TlsMode, TlsPolicy};
pub use location::{Location, RemoteUrl};
