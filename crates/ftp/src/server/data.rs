//! The data channel of a session: how the next data connection will be made (passive listener
//! or active address) and making it.

use fatpipe_net::admission::{Admission, Token, TOKEN_LEN, TOKEN_WAIT};
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;
use tokio::io::AsyncReadExt;
use tokio::net::{TcpListener, TcpStream};

/// How the next data connection is made, as set by PASV/EPSV or PORT/EPRT.
#[derive(Debug, Default)]
pub enum DataSpec {
    /// No PASV/EPSV/PORT/EPRT since the last transfer.
    #[default]
    None,
    /// We listen; the client connects.
    Passive(TcpListener),
    /// We connect to the client.
    Active(SocketAddr),
}

impl DataSpec {
    /// Makes the connection. Passive connections are accepted from whom `admission` takes
    /// (the control connection's peer; other hosts only for a third-party copy) and, with
    /// `token`, that show it first (its bytes are read here): one that shows nothing or
    /// another is dropped and the next taken (a client's spare connect attempt, closed
    /// unused, or someone else's connection). An active one leaves from `local_ip`, the
    /// address the client knows this server by. `prepare` runs on an active socket before it
    /// connects (buffers that fix the window scale).
    pub async fn connect(
        self,
        admission: &Admission,
        local_ip: IpAddr,
        timeout: Duration,
        token: Option<Token>,
        prepare: impl FnOnce(&tokio::net::TcpSocket) -> std::io::Result<()> + Send,
    ) -> std::io::Result<std::net::TcpStream> {
        let stream = tokio::time::timeout(timeout, async move {
            match self {
                DataSpec::None => Err(std::io::Error::other("no data connection was set up")),
                DataSpec::Passive(listener) => accept(&listener, admission, token).await,
                DataSpec::Active(addr) => {
                    let sock = if local_ip.is_ipv4() {
                        tokio::net::TcpSocket::new_v4()?
                    } else {
                        tokio::net::TcpSocket::new_v6()?
                    };
                    sock.bind(SocketAddr::new(local_ip, 0))?;
                    prepare(&sock)?;
                    sock.connect(addr).await
                }
            }
        })
        .await
        .map_err(|_| {
            std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                "timed out waiting for the data connection",
            )
        })??;
        stream.set_nodelay(true)?;
        let std = stream.into_std()?;
        std.set_nonblocking(false)?;
        Ok(std)
    }
}

/// The first connection `listener` gets that `admission` takes and, with `token`, that shows
/// it: connections are checked side by side, so that one that shows nothing does not hold up
/// the one that does (the others are dropped).
async fn accept(
    listener: &TcpListener,
    admission: &Admission,
    token: Option<Token>,
) -> std::io::Result<TcpStream> {
    let mut checking = tokio::task::JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let (s, from) = accepted?;
                if !admission.admits(from.ip()) {
                    continue;
                }
                let Some(t) = token else {
                    return Ok(s);
                };
                checking.spawn(async move { shows(s, &t).await.ok_or(from) });
            }
            Some(checked) = checking.join_next() => match checked {
                Ok(Ok(s)) => return Ok(s),
                Ok(Err(from)) => {
                    tracing::debug!(%from, "a data connection without the session's token: not taken");
                }
                Err(e) => tracing::debug!("checking a data connection's token: {e}"),
            }
        }
    }
}

/// `s`, if it shows `token` as its first bytes within [`TOKEN_WAIT`].
async fn shows(mut s: TcpStream, token: &Token) -> Option<TcpStream> {
    let mut shown = [0u8; TOKEN_LEN];
    let read = tokio::time::timeout(TOKEN_WAIT, s.read_exact(&mut shown)).await;
    (matches!(read, Ok(Ok(_))) && token.shown_in(&shown)).then_some(s)
}

/// Whether two addresses are the same host, seeing through IPv4-mapped IPv6.
pub fn same_host(a: IpAddr, b: IpAddr) -> bool {
    a.to_canonical() == b.to_canonical()
}

/// Wraps a listener bound by `fatpipe_net::socket` for use on the runtime.
pub fn passive(listener: std::net::TcpListener) -> std::io::Result<DataSpec> {
    listener.set_nonblocking(true)?;
    Ok(DataSpec::Passive(TcpListener::from_std(listener)?))
}
