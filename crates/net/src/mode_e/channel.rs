//! How a transfer's data connections are made (connect or accept, from the peer only) and the
//! channel that keeps the connections a transfer left open for the next one.

use super::{lock, Prepare};
use crate::admission::{is_not_proved, Admission, Proof, Token};
use crate::link::Link;
use crate::tls::Secure;
use crate::wake::Wake;
use crate::{Pump, PumpError};
use socket2::Socket;
use std::io::{self, ErrorKind};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsFd;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How the data connections of a transfer are made.
pub enum Links {
    /// This end connects to `target` (GridFTP: the sender does).
    Connect {
        /// The peer's data address (PORT/EPRT or PASV/EPSV reply).
        target: SocketAddr,
        /// The address connections leave from (the control connection's: a multi-homed peer
        /// takes data only from the address it knows); `None`: the system's choice.
        from: Option<IpAddr>,
        /// Run on each socket before it connects.
        prepare: Prepare,
        /// Limit for each connect.
        timeout: Duration,
        /// A second attempt for a connection that had no answer this long
        /// ([`crate::socket::hedge_after`]); only where the peer checks the data token, so
        /// that the spare is never taken for a transfer's connection.
        hedge: Option<Duration>,
    },
    /// This end accepts connections, as `admission` says.
    Accept {
        /// The listening socket (PASV/EPSV, or this client's PORT/EPRT).
        listener: TcpListener,
        /// Whose connections are taken.
        admission: Admission,
        /// Longest wait for a connection while no data moves.
        timeout: Duration,
    },
}

impl Links {
    pub(super) fn open(&self) -> io::Result<TcpStream> {
        match self {
            Links::Connect {
                target,
                from,
                prepare,
                timeout,
                hedge,
            } => crate::socket::connect_prepared(*target, *from, *timeout, *hedge, |s: &Socket| {
                prepare(s.as_fd())
            }),
            Links::Accept {
                listener,
                admission,
                timeout,
            } => accept_within(listener, admission, Instant::now() + *timeout, None).map_err(|e| {
                match e {
                    PumpError::Read(e) | PumpError::Write(e) => e,
                    PumpError::Cancelled => io::Error::from(ErrorKind::Interrupted),
                }
            }),
        }
    }
}

/// The data channel of a session's MODE E transfers in one direction: how new connections are
/// made, and the connections the previous transfer left open (its EODs without the close bit),
/// which the next transfer uses first: warm windows instead of a new handshake and slow start.
pub struct Channel {
    pub(super) links: Links,
    /// `PROT P`: how each new connection is secured.
    secure: Option<Secure>,
    /// The session's data token, which each new connection shows or is checked for.
    token: Option<Token>,
    idle: Mutex<Vec<Link>>,
    /// New connections made before the transfer began ([`Channel::prime`]).
    fresh: Mutex<Vec<Link>>,
}

impl std::fmt::Debug for Channel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Channel")
            .field("idle", &self.idle())
            .finish()
    }
}

impl Channel {
    /// A channel with no connections yet.
    pub fn new(links: Links) -> Channel {
        Channel {
            links,
            secure: None,
            token: None,
            idle: Mutex::default(),
            fresh: Mutex::default(),
        }
    }

    /// The channel with its new connections secured as `secure` says (`PROT P`).
    pub fn secured(self, secure: Option<Secure>) -> Channel {
        Channel { secure, ..self }
    }

    /// The channel with its new connections proved by the session's data token.
    pub fn proved(self, token: Option<Token>) -> Channel {
        Channel { token, ..self }
    }

    /// A new connection made secure, if the channel is (the handshake), and proved, if the
    /// session has a token. A connection that is not this session's fails with an error that
    /// [`is_not_proved`] knows.
    pub(super) fn link(&self, sock: TcpStream) -> io::Result<Link> {
        let connected = matches!(self.links, Links::Connect { .. });
        Link::new(sock, self.secure.as_ref(), Proof::of(self.token, connected))
    }

    /// Connections kept open by the previous transfer.
    pub fn idle(&self) -> usize {
        lock(&self.idle).len()
    }

    /// Hands every kept connection that is still open to a transfer (one the peer or the
    /// network closed meanwhile would fail it); the others are dropped. Not a warning: a
    /// server closes them on purpose (idle, or after refusing an upload sent ahead), and the
    /// transfer goes on without them.
    pub(super) fn take_idle(&self) -> Vec<Link> {
        let all = std::mem::take(&mut *lock(&self.idle));
        let (open, gone): (Vec<_>, Vec<_>) = all.into_iter().partition(|l| still_open(l.socket()));
        if !gone.is_empty() {
            tracing::debug!(
                closed = gone.len(),
                "kept data connections were closed since the last transfer"
            );
        }
        open
    }

    pub(super) fn keep(&self, link: Link) {
        lock(&self.idle).push(link);
    }

    /// Makes sure the channel has a connection before the transfer begins: a kept one, or a
    /// new one made (and secured) now, which the transfer then starts on. A receiver calls
    /// it before touching its file, so that nothing changes when no connection comes.
    /// Waits while `pump` is not cancelled, at most the channel's timeout.
    pub fn prime(&self, pump: &Pump) -> Result<(), PumpError> {
        if !lock(&self.idle).is_empty() || !lock(&self.fresh).is_empty() {
            return Ok(());
        }
        let link = match &self.links {
            Links::Accept {
                listener,
                admission,
                timeout,
            } => {
                let deadline = Instant::now() + *timeout;
                loop {
                    let sock = accept_within(listener, admission, deadline, Some(pump))?;
                    match self.link(sock) {
                        Ok(link) => break link,
                        // Not this session's: the wait goes on for its own.
                        Err(e) if is_not_proved(&e) => {
                            tracing::warn!("refused a data connection: {e}")
                        }
                        Err(e) => return Err(PumpError::Read(e)),
                    }
                }
            }
            Links::Connect { .. } => self
                .links
                .open()
                .and_then(|s| self.link(s))
                .map_err(PumpError::Read)?,
        };
        lock(&self.fresh).push(link);
        Ok(())
    }

    /// The connections [`Channel::prime`] made.
    pub(super) fn take_fresh(&self) -> Vec<Link> {
        std::mem::take(&mut *lock(&self.fresh))
    }
}

/// Waits for a connection `admission` takes, until `deadline` (and while `pump`, if given, is
/// not cancelled).
fn accept_within(
    listener: &TcpListener,
    admission: &Admission,
    deadline: Instant,
    pump: Option<&Pump>,
) -> Result<TcpStream, PumpError> {
    loop {
        if let Some(p) = pump {
            p.check()?;
        }
        if let Some(s) =
            accept_from(listener, admission, deadline, None).map_err(PumpError::Read)?
        {
            return Ok(s);
        }
        if Instant::now() >= deadline {
            return Err(PumpError::Read(io::Error::new(
                ErrorKind::TimedOut,
                "timed out waiting for a data connection",
            )));
        }
    }
}

/// Whether a connection is neither closed by its peer nor broken: a peek without waiting
/// finds data or nothing yet.
fn still_open(sock: &TcpStream) -> bool {
    if sock.set_nonblocking(true).is_err() {
        return false;
    }
    let open = match sock.peek(&mut [0u8; 1]) {
        Ok(n) => n > 0,
        Err(e) => e.kind() == ErrorKind::WouldBlock,
    };
    sock.set_nonblocking(false).is_ok() && open
}

/// A channel a session's last MODE E transfer left open, and which way that data went: the
/// next transfer in the same direction uses it, unless a new data address (PASV, PORT, …) or
/// anything else comes first (GridFTP data-channel caching; both ends keep one alike).
#[derive(Debug)]
pub struct Kept {
    /// Whether this end sent the data.
    pub sending: bool,
    /// The connections, and how to make more (the same listener or address).
    pub channel: Channel,
}

/// Waits up to 100 ms (and never past `deadline`) for a connection `admission` takes.
pub(super) fn accept_from(
    listener: &TcpListener,
    admission: &Admission,
    deadline: Instant,
    wake: Option<&Wake>,
) -> io::Result<Option<TcpStream>> {
    listener.set_nonblocking(true)?;
    let wait = deadline
        .saturating_duration_since(Instant::now())
        .min(Duration::from_millis(100));
    if !crate::wake::readable(listener.as_fd(), wait, wake)? {
        return Ok(None);
    }
    match listener.accept() {
        Ok((s, from)) => {
            s.set_nonblocking(false)?;
            if !admission.admits(from.ip()) {
                return Ok(None);
            }
            s.set_nodelay(true)?;
            Ok(Some(s))
        }
        Err(e) if e.kind() == ErrorKind::WouldBlock || e.kind() == ErrorKind::Interrupted => {
            Ok(None)
        }
        Err(e) => Err(e),
    }
}
