//! How an HTTPS client authenticates to a server: Basic when the URL names a user (the
//! password found as for FTP: `fatpipe_ftp::client::login`); else a bearer token
//! (`--bearer-token FILE`, then the WLCG Bearer Token Discovery: `BEARER_TOKEN`,
//! `BEARER_TOKEN_FILE`, `$XDG_RUNTIME_DIR/bt_u$UID`, `/tmp/bt_u$UID`); else Basic from the
//! netrc; else nothing.

use super::Endpoint;
use fatpipe_ftp::client::login::login;
use fatpipe_ftp::client::Credentials;
use std::path::{Path, PathBuf};

impl Endpoint {
    /// The endpoint `url` names, with its authorization (see the module's text), the bearer
    /// token read from `token_file` when given.
    pub fn logged_in(url: url::Url, token_file: Option<&Path>) -> anyhow::Result<Endpoint> {
        let authorization = authorization(&url, token_file)?;
        Ok(Endpoint { url, authorization })
    }
}

/// The `Authorization` header value for `url` (see the module's text).
pub fn authorization(url: &url::Url, token_file: Option<&Path>) -> anyhow::Result<Option<String>> {
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
fn bearer_token(file: Option<&Path>) -> anyhow::Result<Option<String>> {
    let read = |p: &Path| -> anyhow::Result<String> {
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
        return read(Path::new(&f)).map(Some);
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
