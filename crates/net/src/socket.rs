//! Socket set-up for data connections: sockets bound in a port range (passive listeners, the
//! UDP channel's receiver), bounded connects.

use socket2::{Domain, Protocol, Socket, Type};
use std::io;
use std::net::{IpAddr, SocketAddr, TcpStream};
use std::ops::RangeInclusive;
use std::time::Duration;

/// Binds a socket with `bind` (a TCP listener's, a UDP socket's) on `ip` at a free port of
/// `ports` (any port when `None`), starting the search at `hint` so that concurrent sessions
/// spread over the range.
pub fn bind_in_range<S>(
    ip: IpAddr,
    ports: Option<&RangeInclusive<u16>>,
    hint: u64,
    bind: impl Fn(SocketAddr) -> io::Result<S>,
) -> io::Result<S> {
    let Some(range) = ports else {
        return bind(SocketAddr::new(ip, 0));
    };
    let (lo, hi) = (u64::from(*range.start()), u64::from(*range.end()));
    let span = hi.saturating_sub(lo) + 1;
    let mut last = io::Error::new(io::ErrorKind::AddrInUse, "the port range is empty");
    for i in 0..span.min(65536) {
        let port = lo + (hint + i) % span;
        let Ok(port) = u16::try_from(port) else {
            continue;
        };
        match bind(SocketAddr::new(ip, port)) {
            Ok(l) => return Ok(l),
            Err(e) => last = e,
        }
    }
    Err(io::Error::new(
        last.kind(),
        format!("no free port in {}-{}: {last}", range.start(), range.end()),
    ))
}

/// Connects with a time limit.
pub fn connect(addr: SocketAddr, timeout: Duration) -> io::Result<TcpStream> {
    connect_prepared(addr, None, timeout, |_| Ok(()))
}

/// Connects with a time limit, from `from` (a multi-homed host's address the peer knows it
/// by) when given, after `prepare` has set options on the unconnected socket (buffers set
/// before the SYN fix the window scale).
pub fn connect_prepared(
    addr: SocketAddr,
    from: Option<IpAddr>,
    timeout: Duration,
    prepare: impl FnOnce(&Socket) -> io::Result<()>,
) -> io::Result<TcpStream> {
    let sock = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
    if let Some(ip) = from {
        sock.bind(&SocketAddr::new(ip, 0).into())?;
    }
    prepare(&sock)?;
    sock.connect_timeout(&addr.into(), timeout)?;
    sock.set_nodelay(true)?;
    Ok(sock.into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn binds_inside_the_range_and_skips_busy_ports() {
        use std::net::{TcpListener, UdpSocket};
        let ip: IpAddr = "127.0.0.1".parse().unwrap();
        let first = bind_in_range(ip, None, 0, TcpListener::bind).unwrap();
        let p = first.local_addr().unwrap().port();
        let range = p..=p.saturating_add(20);
        let second = bind_in_range(ip, Some(&range), 0, TcpListener::bind).unwrap();
        let q = second.local_addr().unwrap().port();
        assert!(range.contains(&q) && q != p);
        let full = p..=p;
        assert!(bind_in_range(ip, Some(&full), 0, TcpListener::bind).is_err());
        // UDP ports are their own: a UDP socket binds where the TCP listener is.
        let udp = bind_in_range(ip, Some(&full), 0, UdpSocket::bind).unwrap();
        assert_eq!(udp.local_addr().unwrap().port(), p);
    }
}
