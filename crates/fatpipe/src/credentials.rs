//! Where the client's login comes from: the URL, `FATPIPE_PASSWORD`, or a prompt.

use anyhow::bail;
use fatpipe_ftp::client::{Credentials, RemoteUrl};
use std::io::IsTerminal;

/// The environment variable holding the password, so it never has to be on a command line.
pub const PASSWORD_ENV: &str = "FATPIPE_PASSWORD";

/// Credentials for `url`: anonymous without a user; otherwise the URL's password, the
/// environment's, or one typed at a prompt.
pub fn for_url(url: &RemoteUrl) -> anyhow::Result<Credentials> {
    let Some(user) = url.user.clone() else {
        return Ok(Credentials::anonymous());
    };
    let password = if let Some(p) = url.password.clone() {
        p
    } else if let Ok(p) = std::env::var(PASSWORD_ENV) {
        p
    } else if std::io::stdin().is_terminal() {
        rpassword::prompt_password(format!("Password for {user}@{}: ", url.host))?
    } else {
        bail!("no password for {user}: set {PASSWORD_ENV} or run on a terminal to be asked");
    };
    Ok(Credentials { user, password })
}
