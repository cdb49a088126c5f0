//! A data connection as the movers use it: plain TCP, or TCP under TLS (`PROT P`). Bytes go
//! through `Read`/`Write`; [`Link::socket`] is the TCP socket under it for the laws, for
//! cancelling and for timeouts; file ranges go out with `sendfile` on a plain connection and
//! through a buffer under TLS.

use crate::admission::Proof;
use crate::tls::{Secure, TlsLink};
use crate::{Pump, PumpError};
use std::fs::File;
use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::os::unix::fs::FileExt;
use std::time::{Duration, Instant};

/// One data connection.
#[derive(Debug)]
pub enum Link {
    /// Plain TCP.
    Plain(TcpStream),
    /// TCP under TLS.
    Tls(Box<TlsLink>),
}

/// Bytes read from the file per write under TLS (rustls cuts records of 16 KiB from it).
const TLS_CHUNK: usize = 256 << 10;

impl Link {
    /// `sock` as it is, or secured first (the handshake) as `secure` says; then, with a
    /// `proof`, the session's data token shown or checked as its first bytes.
    pub fn new(sock: TcpStream, secure: Option<&Secure>, proof: Option<Proof>) -> io::Result<Link> {
        let mut link = match secure {
            None => Link::Plain(sock),
            Some(s) => Link::Tls(Box::new(s.wrap(sock)?)),
        };
        if let Some(p) = proof {
            let sock = link.socket().try_clone()?;
            p.exchange(&mut link, &sock)?;
        }
        Ok(link)
    }

    /// The TCP connection under it.
    pub fn socket(&self) -> &TcpStream {
        match self {
            Link::Plain(s) => s,
            Link::Tls(t) => t.socket(),
        }
    }

    /// Sends `count` bytes of `file` from `offset` without moving the file's position.
    pub fn send_range(
        &mut self,
        pump: &Pump,
        file: &File,
        offset: u64,
        count: u64,
    ) -> Result<u64, PumpError> {
        let tls = match self {
            Link::Plain(s) => return pump.send_range(file, offset, count, s),
            Link::Tls(t) => t,
        };
        let mut buf = vec![0u8; TLS_CHUNK.min(count as usize)];
        let (mut at, end) = (offset, offset.saturating_add(count));
        while at < end {
            pump.check()?;
            let want = ((end - at) as usize).min(buf.len());
            file.read_exact_at(&mut buf[..want], at)
                .map_err(PumpError::Read)?;
            tls.write_all(&buf[..want])
                .map_err(|e| pump.classify(PumpError::Write(e)))?;
            pump.add(want);
            at += want as u64;
        }
        Ok(count)
    }

    /// Ends this end's sending: TLS's `close_notify`, then TCP's FIN.
    pub fn close_write(&mut self) -> io::Result<()> {
        match self {
            Link::Plain(s) => s.shutdown(Shutdown::Write),
            Link::Tls(t) => t.close(),
        }
    }

    /// After [`Link::close_write`]: waits (at most `wait`) for the peer to close too, reading
    /// and dropping what it still sends, so that closing does not reset the connection while
    /// the peer still reads the last bytes.
    pub fn await_close(&self, wait: Duration) {
        let sock = self.socket();
        let deadline = Instant::now() + wait;
        let mut sink = [0u8; 4096];
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() || sock.set_read_timeout(Some(left)).is_err() {
                break;
            }
            match (&*sock).read(&mut sink) {
                Ok(n) if n > 0 => continue,
                _ => break,
            }
        }
        let _ = sock.shutdown(Shutdown::Both);
    }
}

impl Read for Link {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Link::Plain(s) => s.read(buf),
            Link::Tls(t) => t.read(buf),
        }
    }
}

impl Write for Link {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Link::Plain(s) => s.write(buf),
            Link::Tls(t) => t.write(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            Link::Plain(s) => s.flush(),
            Link::Tls(t) => t.flush(),
        }
    }
}
