//! A session's control connection: plain TCP until `AUTH TLS`, TLS after it, read as command
//! lines and written as replies.

use fatpipe_proto::line::{Frame, LineFramer};
use std::collections::VecDeque;
use std::io;
use std::os::fd::{AsFd, BorrowedFd};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::server::TlsStream;
use tokio_rustls::TlsAcceptor;

enum Stream {
    Plain(TcpStream),
    Tls(Box<TlsStream<TcpStream>>),
    /// Only while the connection is being secured (a failed handshake ends the session).
    Upgrading,
}

/// The control connection, framed into lines.
pub(super) struct Control {
    stream: Stream,
    framer: LineFramer,
    pending: VecDeque<Frame>,
    buf: Vec<u8>,
    max_line: usize,
}

impl Control {
    /// A plain connection whose lines may be `max_line` bytes long.
    pub(super) fn new(stream: TcpStream, max_line: usize) -> Control {
        Control {
            stream: Stream::Plain(stream),
            framer: LineFramer::new(max_line),
            pending: VecDeque::new(),
            buf: vec![0; 8192],
            max_line,
        }
    }

    /// The next frame, or `None` at end of stream. Cancel-safe: the only await is a read (TLS
    /// keeps what it decrypted until the next call).
    pub(super) async fn next_frame(&mut self) -> io::Result<Option<Frame>> {
        loop {
            if let Some(f) = self.pending.pop_front() {
                return Ok(Some(f));
            }
            let n = match &mut self.stream {
                Stream::Plain(s) => s.read(&mut self.buf).await?,
                Stream::Tls(s) => s.read(&mut self.buf).await?,
                Stream::Upgrading => 0,
            };
            if n == 0 {
                return Ok(None);
            }
            self.pending.extend(self.framer.push(&self.buf[..n]));
        }
    }

    /// Writes (and, under TLS, sends) `bytes`.
    pub(super) async fn write_all(&mut self, bytes: &[u8]) -> io::Result<()> {
        match &mut self.stream {
            Stream::Plain(s) => s.write_all(bytes).await,
            Stream::Tls(s) => {
                s.write_all(bytes).await?;
                s.flush().await
            }
            Stream::Upgrading => Err(io::Error::from(io::ErrorKind::NotConnected)),
        }
    }

    /// Whether the client's commands already read hold another line: its replies can wait to go
    /// out with that line's (commands sent together are answered in one write).
    pub(super) fn has_pending(&self) -> bool {
        !self.pending.is_empty()
    }

    /// Whether `AUTH TLS` has secured the connection.
    pub(super) fn is_tls(&self) -> bool {
        matches!(self.stream, Stream::Tls(_))
    }

    /// The TCP socket (the transfer watches it for a client that goes away).
    pub(super) fn socket(&self) -> Option<BorrowedFd<'_>> {
        match &self.stream {
            Stream::Plain(s) => Some(s.as_fd()),
            Stream::Tls(s) => Some(s.get_ref().0.as_fd()),
            Stream::Upgrading => None,
        }
    }

    /// Runs the TLS handshake (after the `234` reply went out), within `patience`. Anything the
    /// client sent after `AUTH` in clear is dropped unread: it must not pass for a command sent
    /// under TLS (the STARTTLS command-injection attack).
    pub(super) async fn secure(
        &mut self,
        config: Arc<rustls::ServerConfig>,
        patience: Duration,
    ) -> io::Result<()> {
        let Stream::Plain(tcp) = std::mem::replace(&mut self.stream, Stream::Upgrading) else {
            return Err(io::Error::other("the control connection is not plain TCP"));
        };
        self.pending.clear();
        self.framer = LineFramer::new(self.max_line);
        let tls = tokio::time::timeout(patience, TlsAcceptor::from(config).accept(tcp))
            .await
            .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "TLS handshake timed out"))??;
        self.stream = Stream::Tls(Box::new(tls));
        Ok(())
    }
}
