//! What a request's handlers see: the state the server's requests share and the connection
//! the request came on.

use crate::auth::{Certified, Gate};
use crate::config::HttpsConfig;
use crate::tuned::Tunable;
use fatpipe_net::sandbox::Sandbox;
use fatpipe_net::tls::Identity;
use std::net::SocketAddr;
use std::sync::Arc;

/// What every request of one server shares.
pub struct State {
    /// The configuration.
    pub config: HttpsConfig,
    /// The served tree.
    pub sandbox: Sandbox,
    /// Who may do what.
    pub gate: Gate,
    /// The TLS configuration of outgoing third-party connections.
    pub client_tls: Arc<rustls::ClientConfig>,
    /// The server's TLS identity (asking clients for certificates when they are taken).
    pub(crate) tls: Arc<Identity>,
}

/// One client connection, as requests on it see it.
pub struct Conn {
    /// The client's address.
    pub peer: SocketAddr,
    /// Its tuning, when the socket could be taken for it.
    pub tunable: Option<Tunable>,
    /// What its client certificate showed, if it showed one and they are taken.
    pub certified: Option<Certified>,
}
