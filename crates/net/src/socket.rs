//! Socket set-up for data connections: sockets bound in a port range (passive listeners, the
//! UDP channel's receiver), bounded connects, connects hedged against a lost handshake, and
//! a quicker resend of a lost segment on connections that carry a conversation.

use socket2::{Domain, Protocol, Socket, Type};
use std::io;
use std::net::{IpAddr, SocketAddr, TcpStream};
use std::ops::RangeInclusive;
use std::os::fd::AsFd;
use std::time::{Duration, Instant};

/// A hedged connect's second attempt waits this many round trips for the first's answer.
const HEDGE_RTTS: u32 = 3;
/// ... but at least this long (a busy host answers late) ...
const HEDGE_MIN: Duration = Duration::from_millis(200);
/// ... and at most this long: past it the kernel's own resend (1 s) is as near.
const HEDGE_MAX: Duration = Duration::from_millis(700);

/// The floor of the retransmission timeout on a connection that carries a conversation. The
/// kernel's (200 ms, over the round trip) suits bulk data, where most losses are found by the
/// segments behind them; a command or a report has none behind it, and its loss is found by
/// the timeout alone: about 300 ms on a 100 ms path, 150 ms with this floor. Above the peer's
/// delayed acknowledgement (40 ms), so that an answer that takes its time costs no resend.
const CONVERSATION_RTO_MIN: Duration = Duration::from_millis(50);
/// `TCP_RTO_MIN_US` (Linux 6.15 and later; not in the libc crate yet).
const TCP_RTO_MIN_US: libc::c_int = 45;

/// Lowers the retransmission timeout's floor of `sock`, a connection that carries short
/// messages one at a time (a control connection, the UDP channel's reports), to
/// [`CONVERSATION_RTO_MIN`]. A kernel without the option keeps its own: nothing fails.
pub fn for_conversation(sock: &impl AsFd) {
    let us = CONVERSATION_RTO_MIN.as_micros() as libc::c_int;
    if let Err(e) = crate::sockopt::set(sock.as_fd(), libc::IPPROTO_TCP, TCP_RTO_MIN_US, us) {
        tracing::debug!("cannot lower the retransmission timeout's floor: {e}");
    }
}

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
    connect_prepared(addr, None, timeout, None, |_| Ok(()))
}

/// When a data connection's second connect attempt starts, on a path whose round trip (the
/// control connection's) is `rtt`: a lost SYN or SYN-ACK costs the kernel's initial timeout
/// (1 s, and the second loss another second), on a lossy long path the whole transfer's start
/// (a cold download at 5 % loss waited 2.1 s for its first data connection); a second attempt
/// after a few round trips without an answer crosses it.
pub fn hedge_after(rtt: Duration) -> Duration {
    (rtt * HEDGE_RTTS).clamp(HEDGE_MIN, HEDGE_MAX)
}

/// Connects with a time limit, from `from` (a multi-homed host's address the peer knows it
/// by) when given, after `prepare` has set options on the unconnected socket (buffers set
/// before the SYN fix the window scale). With `hedge`, a second attempt on a new socket starts
/// when the first has had no answer for that long, and the first connected is kept (the other
/// is closed before it carries a byte): only towards a peer that ignores a connection that
/// shows no data token (a fatpipe with `DTOK`), since a stock server may take the spare for
/// the transfer's.
pub fn connect_prepared(
    addr: SocketAddr,
    from: Option<IpAddr>,
    timeout: Duration,
    hedge: Option<Duration>,
    prepare: impl Fn(&Socket) -> io::Result<()>,
) -> io::Result<TcpStream> {
    let open = || -> io::Result<Socket> {
        let sock = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
        if let Some(ip) = from {
            sock.bind(&SocketAddr::new(ip, 0).into())?;
        }
        prepare(&sock)?;
        Ok(sock)
    };
    let sock = match hedge {
        None => {
            let sock = open()?;
            sock.connect_timeout(&addr.into(), timeout)?;
            sock
        }
        Some(after) => hedged(addr, timeout, after, open)?,
    };
    sock.set_nodelay(true)?;
    Ok(sock.into())
}

/// The connect of [`connect_prepared`] with a second attempt `after` without an answer.
fn hedged(
    addr: SocketAddr,
    timeout: Duration,
    after: Duration,
    open: impl Fn() -> io::Result<Socket>,
) -> io::Result<Socket> {
    let start = |sock: Socket| -> io::Result<Socket> {
        sock.set_nonblocking(true)?;
        match sock.connect(&addr.into()) {
            Ok(()) => {}
            Err(e) if e.raw_os_error() == Some(libc::EINPROGRESS) => {}
            Err(e) => return Err(e),
        }
        Ok(sock)
    };
    let begun = Instant::now();
    let deadline = begun + timeout;
    let mut tries = vec![start(open()?)?];
    let mut second = Some(begun + after);
    loop {
        let now = Instant::now();
        if now >= deadline {
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!("no answer from {addr} within {timeout:?}"),
            ));
        }
        if second.is_some_and(|at| now >= at) {
            second = None;
            tracing::debug!("no answer from {addr} after {after:?}: a second connect attempt");
            // A spare that cannot be made leaves the first attempt to go on alone.
            match open().and_then(start) {
                Ok(sock) => tries.push(sock),
                Err(e) => tracing::debug!("no second connect attempt: {e}"),
            }
        }
        let until = second.map_or(deadline, |at| at.min(deadline));
        let fds: Vec<_> = tries.iter().map(|s| s.as_fd()).collect();
        let ready = crate::wake::ready(&fds, true, until.saturating_duration_since(now))?;
        let mut failed = None;
        for i in (0..tries.len()).rev() {
            if !ready.get(i).copied().unwrap_or(false) {
                continue;
            }
            match tries[i].take_error()? {
                None => {
                    let sock = tries.swap_remove(i);
                    sock.set_nonblocking(false)?;
                    return Ok(sock);
                }
                Some(e) => {
                    tries.swap_remove(i);
                    failed = Some(e);
                }
            }
        }
        // A refusal is the peer's answer: no second attempt changes it.
        if let (Some(e), true) = (failed, tries.is_empty()) {
            return Err(e);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The retransmission timeout's floor of `sock`, µs; `None` where the kernel lacks the
    /// option.
    fn rto_min(sock: &TcpStream) -> Option<i64> {
        let fd = sock.as_fd();
        let v: libc::c_int = crate::sockopt::get(fd, libc::IPPROTO_TCP, TCP_RTO_MIN_US).ok()?;
        Some(i64::from(v))
    }

    #[test]
    fn a_conversation_s_lost_segment_is_resent_sooner_where_the_kernel_allows() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let s = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let Some(before) = rto_min(&s) else {
            return; // A kernel before 6.15 keeps its 200 ms: nothing to see.
        };
        assert_eq!(before, 200_000, "the kernel's own floor");
        for_conversation(&s);
        let after = rto_min(&s).unwrap();
        // Kept in jiffies: within one of 50 ms (HZ 100 to 1000).
        let asked = CONVERSATION_RTO_MIN.as_micros() as i64;
        assert!((asked..=asked + 10_000).contains(&after), "{after} µs");
    }

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

    #[test]
    fn a_connect_whose_first_syn_is_dropped_gets_through_on_its_second_attempt() {
        use std::io::{Read, Write};
        // A listener whose accept queue is full drops SYNs: the first attempt's is lost, and
        // the kernel sends it again only after its initial timeout (1 s).
        let l = Socket::new(Domain::IPV4, Type::STREAM, None).unwrap();
        l.bind(&"127.0.0.1:0".parse::<SocketAddr>().unwrap().into())
            .unwrap();
        l.listen(0).unwrap();
        let l: std::net::TcpListener = l.into();
        let at = l.local_addr().unwrap();
        let filler = TcpStream::connect(at).unwrap();
        let l = std::sync::Arc::new(l);
        let room = {
            let l = l.clone();
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(100));
                l.accept().unwrap()
            })
        };
        let begun = Instant::now();
        let hedge = Some(Duration::from_millis(250));
        let mut s = connect_prepared(at, None, Duration::from_secs(5), hedge, |_| Ok(())).unwrap();
        let took = begun.elapsed();
        assert!(
            took < Duration::from_millis(900),
            "connected after {took:?}: the second attempt did not cross the lost SYN"
        );
        // The connection kept is a working one.
        drop((room.join().unwrap(), filler));
        s.write_all(b"x").unwrap();
        let (mut got, _) = l.accept().unwrap();
        let mut b = [0u8; 1];
        got.read_exact(&mut b).unwrap();
        assert_eq!(&b, b"x");
    }

    #[test]
    fn a_refused_connect_fails_at_once_hedged_or_not() {
        let at = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap()
        };
        for hedge in [None, Some(Duration::from_millis(250))] {
            let e = connect_prepared(at, None, Duration::from_secs(5), hedge, |_| Ok(()));
            assert_eq!(
                e.map(|_| ()).unwrap_err().kind(),
                io::ErrorKind::ConnectionRefused
            );
        }
    }

    #[test]
    fn the_second_attempt_waits_three_round_trips_within_bounds() {
        let ms = Duration::from_millis;
        assert_eq!(hedge_after(ms(100)), ms(300));
        assert_eq!(hedge_after(ms(1)), HEDGE_MIN);
        assert_eq!(hedge_after(ms(600)), HEDGE_MAX);
    }
}
