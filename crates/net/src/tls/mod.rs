//! TLS on data connections (FTPS, RFC 4217 `PROT P`): a [`TlsLink`] is a TCP data connection
//! whose bytes pass through rustls, while the tuner keeps reading and setting the TCP socket
//! under it. [`Secure`] says how this end secures each data connection it makes or accepts:
//! the FTP client is always the TLS client, whichever side connected. The configurations
//! (certificates, trusted roots, session resumption) are config.rs's.

mod config;
pub mod grid;

pub use config::{client_config, client_config_showing, Identity, ServerTls, TlsReuse};

use rustls::pki_types::ServerName;
use rustls::{ClientConfig, ClientConnection, Connection, ServerConfig, ServerConnection};
use std::io::{self, ErrorKind, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::sync::Arc;

/// How this end secures its data connections: as the TLS client of a named server (reusing the
/// control connection's session through the shared config's cache), or as the TLS server.
#[derive(Debug, Clone)]
pub enum Secure {
    /// The FTP client's side.
    Client {
        /// Trusted roots and the session cache shared with the control connection.
        config: Arc<ClientConfig>,
        /// The name the server's certificate must carry.
        name: ServerName<'static>,
    },
    /// The FTP server's side.
    Server {
        /// The session's data configuration (its own session cache and ticket key).
        config: Arc<ServerConfig>,
        /// A connection that does not resume the control connection's session is refused
        /// (`--tls-reuse required`, for a session whose connections carry no data token).
        must_resume: bool,
    },
}

impl Secure {
    /// Runs the handshake on `sock` and returns the secured connection.
    pub fn wrap(&self, sock: TcpStream) -> io::Result<TlsLink> {
        let conn: Connection = match self {
            Secure::Client { config, name } => ClientConnection::new(config.clone(), name.clone())
                .map_err(io::Error::other)?
                .into(),
            Secure::Server { config, .. } => ServerConnection::new(config.clone())
                .map_err(io::Error::other)?
                .into(),
        };
        let mut link = TlsLink { conn, sock };
        // A peer that stalls the handshake holds nothing for long; the socket's own timeouts
        // (a client's --timeout) are back once it is done.
        let before = (link.sock.read_timeout()?, link.sock.write_timeout()?);
        let wait = |t: Option<std::time::Duration>| {
            Some(t.map_or(HANDSHAKE_WAIT, |t| t.min(HANDSHAKE_WAIT)))
        };
        link.sock.set_read_timeout(wait(before.0))?;
        link.sock.set_write_timeout(wait(before.1))?;
        while link.conn.is_handshaking() {
            link.conn
                .complete_io(&mut link.sock)
                .map_err(|e| handshake_error(&e))?;
        }
        link.sock.set_read_timeout(before.0)?;
        link.sock.set_write_timeout(before.1)?;
        if matches!(
            self,
            Secure::Server {
                must_resume: true,
                ..
            }
        ) && !link.resumed()
        {
            return Err(io::Error::new(
                ErrorKind::PermissionDenied,
                "the data connection did not resume the control connection's TLS session \
                 (this server requires it: --tls-reuse required); it is not this session's",
            ));
        }
        Ok(link)
    }
}

/// Longest a data connection's TLS handshake may take.
const HANDSHAKE_WAIT: std::time::Duration = std::time::Duration::from_secs(30);

/// Says a failed handshake is one (the bare rustls error names only the alert or the check).
fn handshake_error(e: &io::Error) -> io::Error {
    io::Error::new(e.kind(), format!("TLS handshake failed: {}", explain(e)))
}

/// A handshake error in words: what is wrong with the certificate when that is the cause.
pub fn explain(e: &io::Error) -> String {
    use rustls::{CertificateError as C, Error as E};
    let why = match e.get_ref().and_then(|x| x.downcast_ref::<E>()) {
        Some(E::InvalidCertificate(c)) => match c {
            C::UnknownIssuer => "the certificate is signed by an authority this end does not trust",
            C::NotValidForName | C::NotValidForNameContext { .. } => {
                "the certificate is issued for another name"
            }
            C::Expired | C::ExpiredContext { .. } => "the certificate has expired",
            C::NotValidYet | C::NotValidYetContext { .. } => "the certificate is not valid yet",
            C::Revoked => "the certificate is revoked",
            C::BadSignature => "the certificate's signature is wrong",
            C::Other(o) if o.to_string().contains("CaUsedAsEndEntity") => {
                "the server shows a CA certificate as its own (self-signed with CA:TRUE)"
            }
            _ => "the certificate is not acceptable",
        },
        _ => return e.to_string(),
    };
    format!("{why} ({e})")
}

/// A TCP connection under TLS: `Read` and `Write` carry plaintext; [`TlsLink::socket`] is the
/// TCP socket for the laws and for cancelling.
#[derive(Debug)]
pub struct TlsLink {
    conn: Connection,
    sock: TcpStream,
}

/// Runs `$f` on a rustls `Stream` over the link, whichever side it is.
macro_rules! with_stream {
    ($link:expr, $s:ident => $f:expr) => {
        match &mut $link.conn {
            Connection::Client(c) => {
                let mut $s = rustls::Stream::new(c, &mut $link.sock);
                $f
            }
            Connection::Server(c) => {
                let mut $s = rustls::Stream::new(c, &mut $link.sock);
                $f
            }
        }
    };
}

impl TlsLink {
    /// The TCP connection under the TLS one.
    pub fn socket(&self) -> &TcpStream {
        &self.sock
    }

    /// Whether the handshake resumed an earlier session (the control connection's, for a data
    /// connection) instead of a full one.
    pub fn resumed(&self) -> bool {
        self.conn.handshake_kind() == Some(rustls::HandshakeKind::Resumed)
    }

    /// Ends the sending direction: TLS's `close_notify` (which tells the peer the data is
    /// complete, not cut), then TCP's FIN.
    pub fn close(&mut self) -> io::Result<()> {
        self.conn.send_close_notify();
        while self.conn.wants_write() {
            self.conn.write_tls(&mut self.sock)?;
        }
        self.sock.shutdown(Shutdown::Write)
    }
}

impl Read for TlsLink {
    /// Reads plaintext; `Ok(0)` at the peer's `close_notify`. A TCP end without one is taken
    /// as the end too, as plain FTP takes it (curl and lftp close data connections so, and
    /// the final reply and the end-to-end checksum judge the file).
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match with_stream!(self, s => s.read(buf)) {
            Err(e) if e.kind() == ErrorKind::UnexpectedEof => {
                tracing::debug!("TLS data connection ended without close_notify");
                Ok(0)
            }
            r => r,
        }
    }
}

impl Write for TlsLink {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        with_stream!(self, s => s.write(buf))
    }

    fn flush(&mut self) -> io::Result<()> {
        with_stream!(self, s => s.flush())
    }
}

#[cfg(any(test, feature = "test-identity"))]
pub mod testing;
#[cfg(test)]
mod tests;
