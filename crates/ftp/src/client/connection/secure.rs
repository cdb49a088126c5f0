//! FTPS for the client (RFC 4217): the control connection as plain TCP or TLS, `AUTH TLS`
//! before the login (`--tls auto|require|off`), then `PBSZ 0` and `PROT P` so that every data
//! connection is TLS too, resuming the control connection's session.

use super::Connection;
use anyhow::{anyhow, bail};
use fatpipe_net::tls::{client_config, Secure};
use fatpipe_proto::{Command, Reply};
use rustls::pki_types::ServerName;
use rustls::{ClientConfig, ClientConnection, StreamOwned};
use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::sync::{Arc, OnceLock};
use std::time::Instant;

/// Whether a client secures its sessions (`--tls`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TlsMode {
    /// Never: credentials and data in clear.
    Off,
    /// When the server accepts `AUTH TLS`; in clear with servers that refuse it. A server
    /// that accepts it but shows a certificate this end does not trust is an error.
    #[default]
    Auto,
    /// Always: a server that refuses TLS is an error.
    Require,
}

impl std::str::FromStr for TlsMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "off" => Ok(TlsMode::Off),
            "auto" => Ok(TlsMode::Auto),
            "require" => Ok(TlsMode::Require),
            _ => Err(format!("--tls takes off, auto or require, not {s:?}")),
        }
    }
}

/// How a client's sessions use TLS: the mode, the extra trusted certificates, and the
/// configuration made from them once and shared by every session of the process (so that
/// each resumes the others' TLS sessions).
#[derive(Debug, Clone, Default)]
pub struct TlsPolicy {
    /// `--tls`.
    pub mode: TlsMode,
    /// `--ca`: certificates trusted beside the system's.
    pub ca: Option<PathBuf>,
    config: Arc<OnceLock<Result<Arc<ClientConfig>, String>>>,
}

impl TlsPolicy {
    /// A policy with `mode`, trusting `ca` beside the system's roots.
    pub fn new(mode: TlsMode, ca: Option<PathBuf>) -> TlsPolicy {
        TlsPolicy {
            mode,
            ca,
            config: Arc::default(),
        }
    }

    fn config(&self) -> anyhow::Result<Arc<ClientConfig>> {
        self.config
            .get_or_init(|| client_config(self.ca.as_deref()))
            .clone()
            .map_err(|e| anyhow!(e))
    }
}

/// The control connection's bytes: plain, or through TLS after `AUTH TLS`.
#[derive(Debug)]
pub(super) enum ControlStream {
    Plain(TcpStream),
    Tls(Box<StreamOwned<ClientConnection, TcpStream>>),
}

impl ControlStream {
    /// The TCP connection under it (waited on for replies during transfers, timeouts set).
    pub(super) fn tcp(&self) -> &TcpStream {
        match self {
            ControlStream::Plain(s) => s,
            ControlStream::Tls(s) => &s.sock,
        }
    }

    /// Whether TLS holds reply bytes already decrypted or received (the socket would not
    /// show them as readable).
    pub(super) fn holds_input(&mut self) -> bool {
        match self {
            ControlStream::Plain(_) => false,
            ControlStream::Tls(s) => s
                .conn
                .process_new_packets()
                .map_or(true, |st| st.plaintext_bytes_to_read() > 0),
        }
    }
}

impl Read for ControlStream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            ControlStream::Plain(s) => s.read(buf),
            ControlStream::Tls(s) => s.read(buf),
        }
    }
}

impl Write for ControlStream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            ControlStream::Plain(s) => s.write(buf),
            ControlStream::Tls(s) => s.write(buf),
        }
    }
    fn flush(&mut self) -> io::Result<()> {
        match self {
            ControlStream::Plain(s) => s.flush(),
            ControlStream::Tls(s) => s.flush(),
        }
    }
}

impl Connection {
    /// Sends `AUTH TLS`; when it was sent. Before the greeting has come, it leaves with the
    /// connection's first segment and its answer comes right after the greeting, one round
    /// trip sooner than after it (a server reads commands only once greeted, in order).
    /// Alone: a server may read what follows it as the handshake, and globus-gridftp-server
    /// drops the commands before it.
    pub(super) fn ask_tls(&mut self) -> anyhow::Result<Instant> {
        self.send_alone(&Command::Auth("TLS".into()))
    }

    /// Whether the server lists TLS among its `AUTH` mechanisms.
    pub(super) fn lists_tls(&self) -> bool {
        lists_tls(&self.features)
    }

    /// The answer to `AUTH TLS` (sent at `asked`, by [`Connection::ask_tls`]) and the
    /// handshake. Returns whether the session is now secured.
    pub(super) fn secure_control(
        &mut self,
        host: &str,
        policy: &TlsPolicy,
        asked: Option<Instant>,
    ) -> anyhow::Result<bool> {
        let Some(sent) = asked else {
            return Ok(false);
        };
        let config = policy.config()?;
        let name = ServerName::try_from(host.to_string())
            .map_err(|e| anyhow!("{host} cannot be checked against a certificate: {e}"))?;
        let r = self.read_reply()?;
        self.timed(sent.elapsed());
        tracing::debug!("AUTH TLS -> {r}");
        if r.code != 234 {
            if policy.mode == TlsMode::Require {
                bail!(
                    "{} refused TLS ({r}); --tls require allows no login in clear",
                    self.peer
                );
            }
            tracing::debug!(
                "{} refused AUTH TLS ({r}): the session is in clear",
                self.peer
            );
            return Ok(false);
        }
        let ControlStream::Plain(tcp) = self.control.get_ref() else {
            bail!("the control connection is already secured");
        };
        let conn = ClientConnection::new(config.clone(), name.clone())?;
        let mut tls = StreamOwned::new(conn, tcp.try_clone()?);
        while tls.conn.is_handshaking() {
            tls.conn
                .complete_io(&mut tls.sock)
                .map_err(|e| untrusted(&self.peer.to_string(), host, e))?;
        }
        *self.control.get_mut() = ControlStream::Tls(Box::new(tls));
        self.secure = Some(Secure::Client { config, name });
        Ok(true)
    }

    /// After the login: the answer to `PROT P` (or to `PBSZ 0`, refused), sent with it, so
    /// that data connections are TLS too. A server that refuses them moves data in clear (an
    /// error under `--tls require`).
    pub(super) fn protect_data(&mut self, policy: &TlsPolicy, said: &Reply) -> anyhow::Result<()> {
        if said.is_success() {
            return Ok(());
        }
        self.secure = None;
        if policy.mode == TlsMode::Require {
            bail!("{} refused to protect data connections: {said}", self.peer);
        }
        tracing::warn!(
            "{} refused to protect data connections ({said}): data moves in clear",
            self.peer
        );
        Ok(())
    }

    /// Whether data connections are TLS (`PROT P` in effect).
    pub fn data_secured(&self) -> bool {
        self.secure.is_some()
    }
}

/// Whether `features` list TLS among the `AUTH` mechanisms.
pub(super) fn lists_tls(features: &[String]) -> bool {
    features
        .iter()
        .any(|f| f.starts_with("AUTH ") && f.contains("TLS"))
}

/// A failed handshake, said so that the user knows what to do.
fn untrusted(peer: &str, host: &str, e: io::Error) -> anyhow::Error {
    let text = fatpipe_net::tls::explain(&e);
    let fix = if text.contains("certificate") {
        format!(
            ": the certificate {peer} showed is not trusted for {host}; \
             give its CA with --ca FILE (or --tls off to stay in clear)"
        )
    } else {
        String::new()
    };
    anyhow!("TLS handshake with {peer} failed: {text}{fix}")
}

#[cfg(test)]
mod tests {
    use super::super::fake_server::{fake_server, take};
    use super::super::{Connection, Credentials};
    use super::{TlsMode, TlsPolicy};
    use std::time::Duration;

    /// The lines a server read from a client with `creds` under `--tls auto`: it greets only
    /// once the first command is in (a client that waited for the greeting first would wait
    /// here until the timeout), answering it with `first`; then each of `rounds`. The client
    /// confirms its login.
    fn auto(
        creds: Credentials,
        first: &'static str,
        rounds: Vec<(usize, &'static str)>,
    ) -> Vec<String> {
        let (port, server) = fake_server(move |r, w| {
            let mut lines = take(r, w, 1, &format!("220 hi\r\n{first}"));
            lines.extend(super::super::fake_server::rounds(r, w, &rounds));
            lines
        });
        let auto = TlsPolicy::new(TlsMode::Auto, None);
        let c = Connection::open("127.0.0.1", port, &creds, Duration::from_secs(5), &auto);
        let mut c = c.unwrap();
        assert!(!c.data_secured(), "the session is in clear");
        assert!(c.has_feature("MDTM"));
        c.confirm_login().unwrap();
        server.join().unwrap()
    }

    #[test]
    fn an_anonymous_login_reads_the_features_first_and_asks_for_tls_where_listed() {
        let feat = "211-Features:\r\n MDTM\r\n211 End\r\n";
        let login = "230 in\r\n503 already in\r\n211 No features\r\n";
        let got = auto(Credentials::anonymous(), feat, vec![(3, login)]);
        assert_eq!(got, ["FEAT", "USER anonymous", "PASS fatpipe@", "FEAT"]);
        let feat = "211-Features:\r\n AUTH TLS\r\n MDTM\r\n211 End\r\n";
        let rounds = vec![(1, "534 no certificate\r\n"), (3, login)];
        let got = auto(Credentials::anonymous(), feat, rounds);
        let login = ["USER anonymous", "PASS fatpipe@", "FEAT"];
        assert_eq!(got, [&["FEAT", "AUTH TLS"][..], &login].concat());
    }

    #[test]
    fn features_known_to_list_tls_are_read_again_and_tls_asked_for() {
        let feat = "211-Features:\r\n AUTH TLS\r\n MDTM\r\n211 End\r\n";
        let (port, server) = fake_server(move |r, w| {
            let mut lines = take(r, w, 1, &format!("220 hi\r\n{feat}"));
            lines.extend(take(r, w, 1, "534 no certificate\r\n"));
            lines
        });
        let auto = TlsPolicy::new(TlsMode::Auto, None);
        let creds = Credentials::anonymous();
        let known = ["AUTH TLS".to_string(), "MDTM".to_string()];
        let t = Duration::from_secs(5);
        let c = Connection::open_known("127.0.0.1", port, &creds, t, &auto, Some(&known));
        assert!(!c.unwrap().data_secured());
        assert_eq!(server.join().unwrap(), ["FEAT", "AUTH TLS"]);
    }

    #[test]
    fn a_named_login_asks_for_tls_before_the_greeting_comes() {
        let creds = Credentials {
            user: "bob".into(),
            password: "pw".into(),
            in_url: false,
        };
        let login = "331 pass\r\n230 in\r\n211-Features:\r\n MDTM\r\n211 End\r\n";
        let got = auto(creds, "534 no certificate\r\n", vec![(3, login)]);
        assert_eq!(got, ["AUTH TLS", "USER bob", "PASS pw", "FEAT"]);
    }
}
