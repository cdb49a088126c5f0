//! The data channel of a session: how the next data connection will be made (passive listener
//! or active address) and making it.

use fatpipe_net::admission::Admission;
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;
use tokio::net::TcpListener;

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
    /// (the control connection's peer; other hosts only for a third-party copy); an active one
    /// leaves from `local_ip`, the address the client knows this server by.
    /// `prepare` runs on an active socket before it connects (buffers that fix the window scale).
    pub async fn connect(
        self,
        admission: &Admission,
        local_ip: IpAddr,
        timeout: Duration,
        prepare: impl FnOnce(&tokio::net::TcpSocket) -> std::io::Result<()> + Send,
    ) -> std::io::Result<std::net::TcpStream> {
        let stream = tokio::time::timeout(timeout, async move {
            match self {
                DataSpec::None => Err(std::io::Error::other("no data connection was set up")),
                DataSpec::Passive(listener) => loop {
                    let (s, from) = listener.accept().await?;
                    if admission.admits(from.ip()) {
                        break Ok(s);
                    }
                },
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

/// Whether two addresses are the same host, seeing through IPv4-mapped IPv6.
pub fn same_host(a: IpAddr, b: IpAddr) -> bool {
    a.to_canonical() == b.to_canonical()
}

/// Wraps a listener bound by `fatpipe_net::socket` for use on the runtime.
pub fn passive(listener: std::net::TcpListener) -> std::io::Result<DataSpec> {
    listener.set_nonblocking(true)?;
    Ok(DataSpec::Passive(TcpListener::from_std(listener)?))
}
