//! Source and destination names of `fatpipe cp`/`ls`: a local path, standard output, or an
//! `ftp://[user[:password]@]host[:port]/path` URL.

use anyhow::{bail, Context};
use percent_encoding::percent_decode_str;
use std::path::PathBuf;

/// A remote file or directory named by an `ftp://` URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RemoteUrl {
    /// Host name or address (IPv6 without brackets).
    pub host: String,
    /// Control port (21 when the URL has none, as RFC 1738 says).
    pub port: u16,
    /// Whether the URL named the port (else 21 was taken).
    pub port_given: bool,
    /// User name, if the URL has one.
    pub user: Option<String>,
    /// Password, if the URL has one (prefer `FATPIPE_PASSWORD` or the prompt).
    pub password: Option<String>,
    /// Path on the server, decoded; always starts with `/`.
    pub path: String,
}

impl RemoteUrl {
    /// The server as path memory names it: `host:port`.
    pub fn server(&self) -> String {
        format!("{}:{}", self.host, self.port)
    }

    /// Logs in to the server the URL names (whose features may be `known` from an earlier
    /// session: see [`super::Connection::open_known`]). A refused connection on the port
    /// taken by default says so, and where `fatpipe serve` listens.
    pub fn open(
        &self,
        creds: &super::Credentials,
        timeout: std::time::Duration,
        tls: &super::TlsPolicy,
        known: Option<&[String]>,
    ) -> anyhow::Result<super::Connection> {
        let c = super::Connection::open_known(&self.host, self.port, creds, timeout, tls, known);
        c.map_err(|e| {
            let refused = e.chain().any(|c| {
                c.downcast_ref::<std::io::Error>()
                    .is_some_and(|io| io.kind() == std::io::ErrorKind::ConnectionRefused)
            });
            if refused && !self.port_given {
                e.context(format!(
                    "nothing listens on {}:21, FTP's port, which a URL without one means; \
                     `fatpipe serve` listens on 2811 by default: ftp://{}:2811{}",
                    self.host, self.host, self.path
                ))
            } else {
                e.context(format!(
                    "cannot open a session with {}:{}",
                    self.host, self.port
                ))
            }
        })
    }
}

/// Where `fatpipe cp` reads from or writes to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Location {
    /// A local file or directory.
    Local(PathBuf),
    /// Standard output (`-`, destination only).
    Stdout,
    /// A file or directory on an FTP server.
    Remote(RemoteUrl),
}

impl Location {
    /// Parses a command-line argument.
    pub fn parse(arg: &str) -> anyhow::Result<Location> {
        if arg == "-" {
            return Ok(Location::Stdout);
        }
        let Some((scheme, _)) = arg.split_once("://") else {
            return Ok(Location::Local(PathBuf::from(arg)));
        };
        if !scheme.eq_ignore_ascii_case("ftp") {
            bail!("unsupported URL scheme {scheme:?} in {arg:?}: fatpipe speaks ftp://");
        }
        let url = url::Url::parse(arg).with_context(|| format!("invalid URL {arg:?}"))?;
        let host = url
            .host_str()
            .filter(|h| !h.is_empty())
            .with_context(|| format!("no host in {arg:?}"))?
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_string();
        let decode = |s: &str| -> anyhow::Result<String> {
            Ok(percent_decode_str(s)
                .decode_utf8()
                .with_context(|| format!("URL {arg:?} is not valid UTF-8 once decoded"))?
                .into_owned())
        };
        let user = match url.username() {
            "" => None,
            u => Some(decode(u)?),
        };
        let password = url.password().map(decode).transpose()?;
        let path = decode(url.path())?;
        Ok(Location::Remote(RemoteUrl {
            host,
            port: url.port().unwrap_or(21),
            port_given: url.port().is_some(),
            user,
            password,
            path: if path.is_empty() { "/".into() } else { path },
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_and_paths() {
        let Location::Remote(r) =
            Location::parse("ftp://al%40x:p%3Aw@[::1]:2811/dir/a%20b").unwrap()
        else {
            panic!("not remote")
        };
        assert_eq!(r.host, "::1");
        assert_eq!(r.port, 2811);
        assert_eq!(r.user.as_deref(), Some("al@x"));
        assert_eq!(r.password.as_deref(), Some("p:w"));
        assert_eq!(r.path, "/dir/a b");
        let Location::Remote(r) = Location::parse("ftp://host").unwrap() else {
            panic!()
        };
        assert_eq!((r.port, r.path.as_str(), r.user), (21, "/", None));
        assert_eq!(Location::parse("-").unwrap(), Location::Stdout);
        assert_eq!(
            Location::parse("a/b").unwrap(),
            Location::Local("a/b".into())
        );
        assert!(Location::parse("http://x/y").is_err());
        assert!(Location::parse("ftp://").is_err());
        assert!(Location::parse("ftp://user@/x").is_err());
    }
}
