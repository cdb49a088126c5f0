//! Opening a client session: where the login comes from (the URL, `FATPIPE_PASSWORD`,
//! `~/.netrc` or the file `$NETRC` names, or a prompt) and the options every command that
//! talks to a server shares (`--timeout`, `--tls`, `--ca`).

use anyhow::bail;
use fatpipe_ftp::client::{Connection, Credentials, Location, RemoteUrl, TlsMode, TlsPolicy};
use fatpipe_net::tls::grid::ClientCert;
use std::io::IsTerminal;
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

/// The HTTPS endpoint `arg` names, with its authorization (see [`http_authorization`]).
pub fn https_endpoint(
    arg: &str,
    how: &SessionArgs,
) -> anyhow::Result<fatpipe_http::client::Endpoint> {
    let url = url::Url::parse(arg).map_err(|e| anyhow::anyhow!("{arg}: {e}"))?;
    let authorization = http_authorization(&url, how.bearer_token.as_deref())?;
    Ok(fatpipe_http::client::Endpoint { url, authorization })
}

/// The environment variable holding the password, so it never has to be on a command line.
pub const PASSWORD_ENV: &str = "FATPIPE_PASSWORD";

/// Credentials for `url`: the URL's user, or the netrc's for its host, or anonymous; the
/// password from the URL, the environment, the netrc (for that user), or a prompt.
pub fn for_url(url: &RemoteUrl) -> anyhow::Result<Credentials> {
    login(&url.host, url.user.clone(), url.password.clone())
}

/// Credentials for `host` from a URL's `user` and `password` (see [`for_url`]).
fn login(
    host: &str,
    user: Option<String>,
    password: Option<String>,
) -> anyhow::Result<Credentials> {
    let entry = netrc_entry(host);
    let Some(user) = user.or_else(|| entry.as_ref().map(|n| n.login.clone())) else {
        return Ok(Credentials::anonymous());
    };
    let from_netrc = entry
        .filter(|n| n.login == user)
        .map(|n| n.password)
        .filter(|p| !p.is_empty());
    let in_url = password.is_some();
    let password = if let Some(p) = password {
        p
    } else if let Ok(p) = std::env::var(PASSWORD_ENV) {
        p
    } else if let Some(p) = from_netrc {
        p
    } else if std::io::stdin().is_terminal() {
        rpassword::prompt_password(format!("Password for {user}@{host}: "))?
    } else {
        bail!("no password for {user}: set {PASSWORD_ENV}, add it to ~/.netrc, or run on a terminal to be asked");
    };
    Ok(Credentials {
        user,
        password,
        in_url,
    })
}

/// The `Authorization` for an `https://`/`davs://` URL: Basic when the URL names a user
/// (password as for FTP: the URL, `FATPIPE_PASSWORD`, the netrc, a prompt); else a bearer token
/// (`--bearer-token FILE`, then WLCG token discovery: `BEARER_TOKEN`, `BEARER_TOKEN_FILE`,
/// `$XDG_RUNTIME_DIR/bt_u$UID`, `/tmp/bt_u$UID`); else Basic from the netrc; else none.
pub fn http_authorization(
    url: &url::Url,
    token_file: Option<&std::path::Path>,
) -> anyhow::Result<Option<String>> {
    use base64::Engine;
    let decode = |s: &str| {
        percent_encoding::percent_decode_str(s)
            .decode_utf8_lossy()
            .into_owned()
    };
    let user = (!url.username().is_empty()).then(|| decode(url.username()));
    if user.is_none() {
        if let Some(t) = bearer_token(token_file)? {
            return Ok(Some(format!("Bearer {t}")));
        }
    }
    let host = url.host_str().unwrap_or_default();
    let c = login(host, user, url.password().map(decode))?;
    if c.user == Credentials::anonymous().user {
        return Ok(None);
    }
    let pair = format!("{}:{}", c.user, c.password);
    Ok(Some(format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode(pair)
    )))
}

/// A bearer token from `file`, or found as the WLCG Bearer Token Discovery says.
fn bearer_token(file: Option<&std::path::Path>) -> anyhow::Result<Option<String>> {
    let read = |p: &std::path::Path| -> anyhow::Result<String> {
        let t = std::fs::read_to_string(p)
            .map_err(|e| anyhow::anyhow!("cannot read the token in {}: {e}", p.display()))?;
        Ok(t.trim().to_string())
    };
    if let Some(f) = file {
        return read(f).map(Some);
    }
    if let Ok(t) = std::env::var("BEARER_TOKEN") {
        return Ok(Some(t.trim().to_string()));
    }
    if let Some(f) = std::env::var_os("BEARER_TOKEN_FILE") {
        return read(std::path::Path::new(&f)).map(Some);
    }
    let uid = nix::unistd::Uid::current();
    let dirs = [
        std::env::var_os("XDG_RUNTIME_DIR").map(PathBuf::from),
        Some(PathBuf::from("/tmp")),
    ];
    for dir in dirs.into_iter().flatten() {
        let p = dir.join(format!("bt_u{uid}"));
        if p.is_file() {
            return read(&p).map(Some);
        }
    }
    Ok(None)
}

/// The server and path an `ftp://` URL argument names.
pub fn remote(arg: &str) -> anyhow::Result<RemoteUrl> {
    match Location::parse(arg)? {
        Location::Remote(u) => Ok(u),
        _ => bail!("{arg}: not an ftp:// URL"),
    }
}

/// A session with the server `url` names, logged in as [`for_url`] says.
pub fn open(url: &RemoteUrl, how: &SessionArgs) -> anyhow::Result<Connection> {
    url.open(&for_url(url)?, how.timeout, &how.tls())
}

/// The netrc's `machine` entry for `host` (its `default` entry is not used: it would turn
/// every anonymous copy into a login); a netrc that cannot be read is warned about and skipped.
fn netrc_entry(host: &str) -> Option<netrc::Authenticator> {
    let path = netrc::Netrc::get_file()?;
    warn_if_readable_by_others(&path);
    match netrc::Netrc::from_file(&path) {
        Ok(mut n) => n.hosts.remove(host).filter(|a| !a.login.is_empty()),
        Err(e) => {
            tracing::warn!("ignoring {}: {e}", path.display());
            None
        }
    }
}

/// A netrc holds passwords: one that other users may read is worth a warning.
fn warn_if_readable_by_others(path: &std::path::Path) {
    use std::os::unix::fs::PermissionsExt;
    if let Ok(m) = std::fs::metadata(path) {
        if m.is_file() && m.permissions().mode() & 0o044 != 0 {
            tracing::warn!(
                "{} can be read by other users and holds passwords: chmod 600 it",
                path.display()
            );
        }
    }
}
