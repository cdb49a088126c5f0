//! `fatpipe serve`: run the FTP server until interrupted.

use crate::tuning::TuneArgs;
use anyhow::Context;
use fatpipe_ftp::server::auth::{Anonymous, Users};
use fatpipe_ftp::server::{Server, ServerConfig};
use fatpipe_net::admission::ThirdPartyNetworks;
use fatpipe_net::tls::TlsReuse;
use std::io::Write;
use std::net::SocketAddr;
use std::ops::RangeInclusive;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

/// Options of `fatpipe serve`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Directory served as `/`.
    #[arg(long)]
    root: PathBuf,
    /// Control-channel address (port 0 picks a free port; the chosen address is printed).
    #[arg(long, default_value = "0.0.0.0:2811")]
    listen: SocketAddr,
    /// An account as NAME:PASSWORD (repeatable). Prefer --users: command lines are visible to others.
    #[arg(long = "user", value_name = "NAME:PASSWORD")]
    users: Vec<String>,
    /// File of NAME:HASH lines written by `fatpipe passwd`.
    #[arg(long = "users", value_name = "FILE")]
    users_file: Option<PathBuf>,
    /// Allow anonymous logins (user `anonymous` or `ftp`), read-only.
    #[arg(long, conflicts_with = "anonymous_write")]
    anonymous: bool,
    /// Allow anonymous logins with write access.
    #[arg(long)]
    anonymous_write: bool,
    /// Port range for passive data connections, e.g. 50000-50100 (default: any free port).
    #[arg(long, value_name = "LOW-HIGH", value_parser = parse_range)]
    passive_ports: Option<RangeInclusive<u16>>,
    /// Port range the UDP data channel receives uploads on (clients that ask for
    /// `--transport udp`), e.g. 50200-50300 (default: any free port).
    #[arg(long, value_name = "LOW-HIGH", value_parser = parse_range)]
    udp_ports: Option<RangeInclusive<u16>>,
    /// Most concurrent logged-in sessions; a login past it is refused with 421.
    #[arg(long, default_value_t = 64)]
    max_sessions: usize,
    /// Most connections waiting to log in (apart from --max-sessions); a newcomer closes the
    /// oldest when all are taken, so idle connections cannot lock real clients out.
    #[arg(long, default_value_t = 32, value_parser = clap::value_parser!(u64).range(1..))]
    max_waiting_logins: u64,
    /// Close a session idle for this long (e.g. 300s, 5m).
    #[arg(long, default_value = "5m", value_parser = humantime::parse_duration)]
    idle_timeout: Duration,
    /// Close a session after this many failed logins.
    #[arg(long, default_value_t = 3)]
    max_login_failures: u32,
    /// Most concurrent sessions from one address (an IPv6 /64); more are refused with 421.
    #[arg(long, default_value_t = 16)]
    max_sessions_per_host: usize,
    /// Close a session that has not logged in this long after connecting (commands do not extend it).
    #[arg(long, default_value = "30s", value_parser = humantime::parse_duration)]
    login_timeout: Duration,
    /// Failed logins one address may make per minute; then its logins are refused until the minute has passed.
    #[arg(long, default_value_t = 10)]
    max_host_login_failures: u32,
    /// Most data connections one MODE E transfer may open to this server; more are closed at once.
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u32).range(1..=1024))]
    max_streams: u32,
    /// Largest file an upload may make (e.g. 2T); uploads are always bounded by the free space.
    #[arg(long, value_parser = fatpipe_tune::size::parse_size)]
    max_file_size: Option<u64>,
    /// Wait this long for a data connection, and fail a transfer that moves no byte this long (a shorter link outage is ridden through).
    #[arg(long, default_value = "60s", value_parser = humantime::parse_duration)]
    data_timeout: Duration,
    /// FTPS: the certificate chain (PEM, leaf first) offered to clients that send AUTH TLS;
    /// read again when the file changes (a renewed certificate needs no restart).
    #[arg(long, value_name = "FILE", requires = "tls_key")]
    tls_cert: Option<PathBuf>,
    /// FTPS: the certificate's private key (PEM).
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    tls_key: Option<PathBuf>,
    /// Refuse logins and data connections in clear: clients must send AUTH TLS, PBSZ 0, PROT P.
    #[arg(long, requires = "tls_cert")]
    require_tls: bool,
    /// Let named users (not anonymous) send data to or take it from another host than their
    /// own: third-party copies between servers (fatpipe cp ftp://A ftp://B, globus-url-copy,
    /// FTS3/gfal2). Still never to a privileged port.
    #[arg(long)]
    allow_third_party: bool,
    /// Networks a third-party copy may reach beside public addresses (CIDR[,CIDR…], e.g. the
    /// site's data-transfer nodes on 10.1.0.0/16); loopback, private and link-local addresses
    /// are refused otherwise.
    #[arg(long, value_name = "CIDR,...", requires = "allow_third_party", value_parser = ThirdPartyNetworks::parse)]
    third_party_networks: Option<ThirdPartyNetworks>,
    /// Under PROT P, a data connection that carries no data token (fatpipe's DTOK) must resume
    /// the control connection's TLS session (required), or may make a full handshake
    /// (optional: for clients that cannot resume, such as Python's ftplib).
    #[arg(
        long,
        value_name = "required|optional",
        default_value = "required",
        requires = "tls_cert"
    )]
    tls_reuse: TlsReuse,
    /// Log each file moved to FILE in the xferlog format (wu-ftpd, ProFTPD, vsftpd), times UTC.
    #[arg(long, value_name = "FILE")]
    transfer_log: Option<PathBuf>,
    /// The server's own log on standard error: text, or json (one object a line).
    #[arg(long, value_name = "text|json", default_value = "text", value_parser = ["text", "json"])]
    log_format: String,
    /// Read options from a TOML file, one key per long option (root = "/srv/data",
    /// anonymous = true, user = ["a:b"]); options on the command line win. SIGHUP reads the
    /// --users file again (other options need a restart).
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// The HTTPS/WebDAV front-end.
    #[command(flatten)]
    web: HttpsArgs,
    /// Tuning of data connections unless a client picks another mode (OPTS DRS, SBUF).
    #[command(flatten)]
    tune: TuneArgs,
}

/// Options of the HTTPS front-end (`--https` and what goes with it).
#[derive(clap::Args, Debug)]
pub struct HttpsArgs {
    /// Also serve the tree over HTTPS/WebDAV at ADDR (e.g. 0.0.0.0:8443), with the same
    /// accounts, TLS identity and tuning: GET/PUT/PROPFIND/MKCOL/DELETE/MOVE/COPY, and HTTP
    /// third-party copies (COPY with Source or Destination) with --allow-third-party.
    #[arg(long, value_name = "ADDR", requires = "tls_cert")]
    https: Option<SocketAddr>,
    /// HTTPS: trust bearer tokens (WLCG JWT profile, SciTokens) from ISSUER, checked with the
    /// public keys in JWKS_FILE (repeatable; nothing is fetched).
    #[arg(long, value_name = "ISSUER=JWKS_FILE", requires = "https")]
    token_issuer: Vec<String>,
    /// HTTPS: an audience tokens may name besides the WLCG "any" audience (repeatable),
    /// typically this endpoint's URL, https://host:port.
    #[arg(long, value_name = "AUD", requires = "https")]
    token_audience: Vec<String>,
    /// HTTPS: certificates (PEM) the server trusts when it connects to another endpoint for a
    /// third-party copy, beside the system's (default: $SSL_CERT_FILE when set).
    #[arg(long, value_name = "FILE", requires = "https")]
    ca: Option<PathBuf>,
    /// HTTPS: take client certificates as credentials (X.509, and RFC 3820 proxies as
    /// voms-proxy-init makes them), each mapped to an account by its subject in FILE, a
    /// grid-mapfile (`"/DC=org/DC=example/CN=Alice" alice`), read again when it changes.
    #[arg(long, value_name = "FILE", requires = "https")]
    gridmap: Option<PathBuf>,
    /// HTTPS: the CAs that vouch for client certificates, a PEM file or a directory of them
    /// (default: $X509_CERT_DIR, else /etc/grid-security/certificates).
    #[arg(long, value_name = "PATH", requires = "gridmap")]
    x509_ca: Option<PathBuf>,
}

/// Where the CAs of client certificates are: `--x509-ca`, else `$X509_CERT_DIR`, else the grid's
/// usual directory.
fn x509_ca(given: Option<PathBuf>) -> PathBuf {
    given
        .or_else(|| std::env::var_os("X509_CERT_DIR").map(PathBuf::from))
        .unwrap_or_else(|| PathBuf::from("/etc/grid-security/certificates"))
}

impl Args {
    /// `--log-format json`.
    pub fn json_log(&self) -> bool {
        self.log_format == "json"
    }
}

/// The accounts `--user` and `--users` give (read again on SIGHUP).
fn accounts(plain: &[String], file: Option<&std::path::Path>) -> anyhow::Result<Users> {
    let mut users = Users::default();
    for u in plain {
        users.add_plain(u)?;
    }
    if let Some(f) = file {
        users.load_file(f)?;
    }
    Ok(users)
}

fn parse_range(s: &str) -> Result<RangeInclusive<u16>, String> {
    let (lo, hi) = s.split_once('-').ok_or("expected LOW-HIGH")?;
    let lo: u16 = lo.trim().parse().map_err(|e| format!("bad LOW: {e}"))?;
    let hi: u16 = hi.trim().parse().map_err(|e| format!("bad HIGH: {e}"))?;
    if lo == 0 || lo > hi {
        return Err("need 0 < LOW <= HIGH".into());
    }
    Ok(lo..=hi)
}

/// The HTTPS front-end's configuration, when `--https` asks for one: the FTP server's tree,
/// accounts, identity, third-party rules and tuning.
fn https_config(
    a: HttpsArgs,
    ftp: &ServerConfig,
) -> anyhow::Result<Option<fatpipe_http::HttpsConfig>> {
    let Some(mut c) = a
        .https
        .and_then(|listen| fatpipe_http::HttpsConfig::beside(ftp, listen))
    else {
        return Ok(None);
    };
    for spec in &a.token_issuer {
        c.issuers
            .add_spec(spec)
            .map_err(|e| anyhow::anyhow!("--token-issuer {spec}: {e}"))?;
    }
    for aud in &a.token_audience {
        c.issuers.add_audience(aud);
    }
    c.ca = a.ca;
    if let Some(gridmap) = a.gridmap {
        let path = x509_ca(a.x509_ca);
        let cas = fatpipe_net::tls::grid::CaStore::load(&path, std::time::Instant::now())
            .map_err(|e| anyhow::anyhow!("client certificates (--x509-ca): {e}"))?;
        c.client_certs = Some(fatpipe_http::ClientCerts {
            cas: Arc::new(cas),
            gridmap,
        });
    }
    Ok(Some(c))
}

/// Runs the server until Ctrl-C or SIGTERM.
pub fn run(a: Args) -> anyhow::Result<ExitCode> {
    let mut config = ServerConfig::new(a.root);
    config.listen = a.listen;
    config.users = accounts(&a.users, a.users_file.as_deref())?;
    config.transfer_log = a.transfer_log;
    config.anonymous = match (a.anonymous, a.anonymous_write) {
        (_, true) => Anonymous::ReadWrite,
        (true, false) => Anonymous::ReadOnly,
        _ => Anonymous::Off,
    };
    config.passive_ports = a.passive_ports;
    config.udp_ports = a.udp_ports;
    config.max_sessions = a.max_sessions;
    config.max_waiting_logins = a.max_waiting_logins as usize;
    config.idle_timeout = a.idle_timeout;
    config.max_login_failures = a.max_login_failures;
    config.max_sessions_per_host = a.max_sessions_per_host;
    config.login_timeout = a.login_timeout;
    config.max_host_login_failures = a.max_host_login_failures;
    config.max_streams = a.max_streams;
    config.max_file_size = a.max_file_size;
    config.data_timeout = a.data_timeout;
    config.tune = a.tune.config("server")?;
    if let (Some(cert), Some(key)) = (&a.tls_cert, &a.tls_key) {
        let id = fatpipe_net::tls::Identity::load(cert, key).map_err(anyhow::Error::msg)?;
        config.tls = Some(Arc::new(id));
    }
    config.require_tls = a.require_tls;
    config.allow_third_party = a.allow_third_party;
    config.third_party_networks = a.third_party_networks.unwrap_or_default();
    config.tls_reuse = a.tls_reuse;
    let https = https_config(a.web, &config)?;
    let rt = tokio::runtime::Runtime::new().context("cannot start the runtime")?;
    rt.block_on(async move {
        let root = config.root.display().to_string();
        let server = Server::bind(config).await?;
        let addr = server.local_addr()?;
        let web = match https {
            Some(h) => Some(fatpipe_http::HttpsServer::bind(h).await?),
            None => None,
        };
        // Scripts and tests read this line to learn the port (see `announced_addr`).
        out!("{}", fatpipe_ftp::server::announcement(addr, &root));
        if let Some(w) = &web {
            out!(
                "{}",
                fatpipe_http::server::announcement(w.local_addr()?, &root)
            );
        }
        std::io::stdout().flush()?;
        let web_accounts = web.as_ref().map(|w| w.accounts());
        let web_run = async move {
            match web {
                Some(w) => w.run().await,
                None => std::future::pending().await,
            }
        };
        use tokio::signal::unix::{signal, SignalKind};
        let mut term = signal(SignalKind::terminate())?;
        let mut hangup = signal(SignalKind::hangup())?;
        let accounts_now = server.accounts();
        let reload = async move {
            while hangup.recv().await.is_some() {
                let again = accounts(&a.users, a.users_file.as_deref()).and_then(|u| {
                    if let Some(set) = &web_accounts {
                        set(u.clone());
                    }
                    accounts_now.replace(u)
                });
                match again {
                    Ok(()) => tracing::info!("SIGHUP: accounts read again"),
                    Err(e) => tracing::warn!("SIGHUP: {e:#}; the accounts stay as they were"),
                }
            }
        };
        tokio::select! {
            r = server.run() => r?,
            r = web_run => r?,
            _ = reload => {}
            _ = tokio::signal::ctrl_c() => tracing::info!("interrupted, stopping"),
            _ = term.recv() => tracing::info!("terminated, stopping"),
        }
        Ok(ExitCode::SUCCESS)
    })
}
