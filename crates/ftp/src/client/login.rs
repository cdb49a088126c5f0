//! Where a client's login comes from: the URL's user, else the netrc's (`~/.netrc`, or the
//! file `$NETRC` names) for the host, else anonymous; the password from the URL,
//! `FATPIPE_PASSWORD`, the netrc (for that user), or a prompt on a terminal. An HTTPS client
//! logs in with Basic the same way.

use super::{Credentials, RemoteUrl};
use anyhow::bail;
use std::io::IsTerminal;

/// The environment variable holding the password, so it never has to be on a command line.
pub const PASSWORD_ENV: &str = "FATPIPE_PASSWORD";

/// Credentials for `url` (see the module's text).
pub fn for_url(url: &RemoteUrl) -> anyhow::Result<Credentials> {
    login(&url.host, url.user.clone(), url.password.clone())
}

/// Credentials for `host` from a URL's `user` and `password` (see the module's text).
pub fn login(
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
