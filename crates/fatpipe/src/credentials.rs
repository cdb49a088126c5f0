//! Opening a client session: the options every command that talks to a server shares
//! (`--timeout`, `--tls`, `--ca`, the HTTPS client's token and certificate), the endpoint an
//! argument names and the session it opens (the login found as `fatpipe_ftp::client::login`
//! says).

use anyhow::bail;
pub use fatpipe_ftp::client::login::{for_url, PASSWORD_ENV};
use fatpipe_ftp::client::{Connection, Location, RemoteUrl, TlsMode, TlsPolicy};
use fatpipe_net::tls::grid::ClientCert;
use std::path::PathBuf;
use std::time::Duration;

/// How a command reaches a server: the options `cp`, `ls`, `mkdir`, `rm` and `mv` share.
#[derive(clap::Args, Debug, Clone)]
pub struct SessionArgs {
    /// Give up on a connection silent for this long.
    #[arg(long, default_value = "60s", value_parser = humantime::parse_duration)]
    pub timeout: Duration,
    /// FTPS (RFC 4217): `auto` secures the login and the data with TLS when the server accepts
    /// AUTH TLS and stays in clear with servers that refuse it; `require` fails with those;
    /// `off` never asks. A certificate that is not trusted is always an error.
    #[arg(long, default_value = "auto", value_name = "off|auto|require")]
    pub tls: TlsMode,
    /// PEM certificates (a CA, or a server's own) trusted beside the system's roots.
    #[arg(long, value_name = "FILE")]
    pub ca: Option<PathBuf>,
    /// https:// and davs:// URLs: the bearer token in FILE (else the WLCG discovery:
    /// BEARER_TOKEN, BEARER_TOKEN_FILE, $XDG_RUNTIME_DIR/bt_u$UID, /tmp/bt_u$UID); a URL with
    /// a user name logs in with Basic instead.
    #[arg(long, value_name = "FILE")]
    pub bearer_token: Option<PathBuf>,
    /// https:// and davs:// URLs: a client certificate shown to servers that ask for one, PEM:
    /// a grid proxy (certificate, key and chain in one file, as voms-proxy-init writes it) or
    /// a certificate (default: $X509_USER_PROXY, else /tmp/x509up_u$UID, when present and
    /// valid).
    #[arg(long, value_name = "FILE")]
    pub cert: Option<PathBuf>,
    /// The key of --cert when it is not in the same file.
    #[arg(long, value_name = "FILE", requires = "cert")]
    pub key: Option<PathBuf>,
}

impl SessionArgs {
    /// The TLS policy these options ask for.
    pub fn tls(&self) -> TlsPolicy {
        TlsPolicy::new(self.tls, self.ca.clone())
    }

    /// The client certificate for HTTPS servers that ask: `--cert`, else the grid proxy found
    /// where the grid's tools look (left out when it has expired); an expired `--cert` is an
    /// error.
    pub fn client_cert(&self) -> anyhow::Result<Option<ClientCert>> {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let Some(path) = &self.cert else {
            return Ok(ClientCert::discover(nix::unistd::getuid().as_raw(), now));
        };
        let cert = ClientCert::load(path, self.key.as_deref()).map_err(anyhow::Error::msg)?;
        if cert.expired(now) {
            bail!("--cert {}: the certificate has expired", path.display());
        }
        Ok(Some(cert))
    }
}

/// Whether `arg` names an HTTPS (WebDAV) endpoint: `https://` or `davs://`.
pub fn is_https(arg: &str) -> bool {
    let lower = arg.to_ascii_lowercase();
    lower.starts_with("https://") || lower.starts_with("davs://")
}

/// The HTTPS endpoint `arg` names, with its authorization (`fatpipe_http::client`'s auth:
/// Basic for a URL's user, else a bearer token, else the netrc).
pub fn https_endpoint(
    arg: &str,
    how: &SessionArgs,
) -> anyhow::Result<fatpipe_http::client::Endpoint> {
    let url = url::Url::parse(arg).map_err(|e| anyhow::anyhow!("{arg}: {e}"))?;
    fatpipe_http::client::Endpoint::logged_in(url, how.bearer_token.as_deref())
}

/// The server and path an `ftp://` URL argument names.
pub fn remote(arg: &str) -> anyhow::Result<RemoteUrl> {
    match Location::parse(arg)? {
        Location::Remote(u) => Ok(u),
        _ => bail!("{arg}: not an ftp:// URL"),
    }
}

/// A session with the server `url` names, logged in as `fatpipe_ftp::client::login` says.
pub fn open(url: &RemoteUrl, how: &SessionArgs) -> anyhow::Result<Connection> {
    url.open(&for_url(url)?, how.timeout, &how.tls(), None)
}
