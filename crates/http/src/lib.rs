//! fatpipe's HTTPS front-end: the WebDAV subset that transfer clients use (curl, davix,
//! rclone, gfal2), the WLCG HTTP third-party copy (`COPY` with `Source:` or `Destination:`,
//! performance markers), and authorisation by password (Basic) or bearer token (WLCG JWT
//! profile, SciTokens), over the same served tree and tuning as the FTP server.
//!
//! Map: [`server`] accepts connections and routes requests; [`auth`] and [`token`] decide
//! who may do what where; [`dav`] answers the WebDAV methods; [`tpc`] runs third-party
//! copies; [`client`] is `fatpipe cp`'s side; `connect` makes the outgoing connections of
//! both and `ranged` fetches a file over one or several of them; [`range`], [`digest`], [`markers`], [`multistatus`] and
//! [`paths`] are the pure protocol pieces.

mod answer;
pub mod auth;
mod body;
pub mod client;
mod config;
mod connect;
pub mod dav;
pub mod digest;
pub mod gridmap;
pub mod markers;
pub mod multistatus;
mod op;
pub mod paths;
mod pending;
pub mod range;
mod ranged;
mod request;
pub mod runtime;
pub mod server;
pub mod token;
pub mod tpc;
mod tuned;

pub use config::{ClientCerts, HttpsConfig};
pub use server::HttpsServer;

#[cfg(any(test, feature = "test-issuer"))]
pub mod testing;
