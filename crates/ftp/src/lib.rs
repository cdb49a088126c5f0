#![warn(missing_docs)]
//! fatpipe's FTP sessions: the server (`server`) and the client (`client`), built on the pure
//! codec of `fatpipe-proto` and the data movers of `fatpipe-net`.

pub mod client;
pub mod inband;
pub mod server;
