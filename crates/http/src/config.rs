//! What the HTTPS front-end serves and how: `fatpipe serve --https`'s settings, and those it
//! takes from the FTP server beside it.

use crate::token::Issuers;
use fatpipe_ftp::server::auth::{Anonymous, Users};
use fatpipe_ftp::server::ServerConfig;
use fatpipe_net::admission::ThirdPartyNetworks;
use fatpipe_net::tls::grid::CaStore;
use fatpipe_net::tls::Identity;
use fatpipe_net::TunerConfig;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// Everything the HTTPS front-end needs, with `fatpipe serve --https`'s defaults.
#[derive(Debug, Clone)]
pub struct HttpsConfig {
    /// The directory served as `/` (the FTP server's).
    pub root: PathBuf,
    /// Where to listen.
    pub listen: SocketAddr,
    /// The certificate and key (the FTPS identity).
    pub tls: Arc<Identity>,
    /// Named accounts (HTTP Basic).
    pub users: Users,
    /// What requests without credentials may do.
    pub anonymous: Anonymous,
    /// Token issuers trusted, and the audiences accepted.
    pub issuers: Issuers,
    /// Whether `COPY` may reach another server (pull or push).
    pub allow_third_party: bool,
    /// Networks third-party copies may reach beside public addresses.
    pub third_party_networks: ThirdPartyNetworks,
    /// Largest file a PUT or a pull may make.
    pub max_file_size: Option<u64>,
    /// Connections served at once; more wait in the kernel's queue.
    pub max_connections: usize,
    /// How long a connection may take to send a request's headers (and to sit idle between
    /// requests).
    pub header_timeout: Duration,
    /// How connections moving bodies are tuned.
    pub tune: TunerConfig,
    /// A third-party copy whose remote moves no byte this long fails (`--data-timeout`).
    pub stall_timeout: Duration,
    /// Certificates trusted for the server's own outgoing third-party connections besides the
    /// system's (`--ca`, else `SSL_CERT_FILE`).
    pub ca: Option<PathBuf>,
    /// Client certificates (and proxies) taken as credentials, when they are.
    pub client_certs: Option<ClientCerts>,
}

/// Client certificates as credentials: the CAs that vouch for them, and the grid-mapfile that
/// maps their subjects to accounts.
#[derive(Debug, Clone)]
pub struct ClientCerts {
    /// The CAs (read again when they change), and the judge of a chain.
    pub cas: Arc<CaStore>,
    /// The grid-mapfile.
    pub gridmap: PathBuf,
}

impl HttpsConfig {
    /// A configuration serving `root` on `listen` with `tls`, no account, the defaults.
    pub fn new(root: PathBuf, listen: SocketAddr, tls: Arc<Identity>) -> HttpsConfig {
        HttpsConfig {
            root,
            listen,
            tls,
            users: Users::default(),
            anonymous: Anonymous::Off,
            issuers: Issuers::default(),
            allow_third_party: false,
            third_party_networks: ThirdPartyNetworks::default(),
            max_file_size: None,
            max_connections: 256,
            header_timeout: Duration::from_secs(60),
            tune: TunerConfig::untuned(),
            stall_timeout: Duration::from_secs(60),
            ca: None,
            client_certs: None,
        }
    }

    /// The front-end beside the FTP server `ftp`, on `listen`: its tree, accounts, TLS
    /// identity, third-party rules, file size limit and tuning; `None` where `ftp` has no
    /// identity (HTTPS needs one).
    pub fn beside(ftp: &ServerConfig, listen: SocketAddr) -> Option<HttpsConfig> {
        let mut c = HttpsConfig::new(ftp.root.clone(), listen, ftp.tls.clone()?);
        c.users = ftp.users.clone();
        c.anonymous = ftp.anonymous;
        c.allow_third_party = ftp.allow_third_party;
        c.third_party_networks = ftp.third_party_networks.clone();
        c.max_file_size = ftp.max_file_size;
        c.tune = ftp.tune.clone();
        c.stall_timeout = ftp.data_timeout;
        Some(c)
    }
}
