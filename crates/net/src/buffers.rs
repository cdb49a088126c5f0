//! Setting a socket's buffers and window clamp as a law decided, and saying when a system limit
//! (`net.core.rmem_max`/`wmem_max` for unprivileged processes) kept it from happening.

use fatpipe_tune::law::Buffers;
use std::io;
use std::os::fd::BorrowedFd;

/// How buffer sizes are set on this host.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BufferControl {
    force: bool,
}

/// The buffers as the kernel accounts them (`ss -tm` `rb`/`tb`), bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Accounted {
    /// Receive buffer.
    pub rcvbuf: u64,
    /// Send buffer.
    pub sndbuf: u64,
}

impl BufferControl {
    /// `allow_force`: use `SO_RCVBUFFORCE`/`SO_SNDBUFFORCE` when the process may (root), so the
    /// global `rmem_max`/`wmem_max` caps do not bind; `false` behaves like an unprivileged user.
    pub fn new(allow_force: bool) -> BufferControl {
        // SAFETY: geteuid has no preconditions.
        let root = unsafe { libc::geteuid() } == 0;
        BufferControl {
            force: allow_force && root,
        }
    }

    /// Whether the caps are bypassed.
    pub fn forced(&self) -> bool {
        self.force
    }

    /// The most receive-buffer memory one socket can take here, as the kernel accounts it
    /// (twice `net.core.rmem_max` when not forcing); `None` when forcing (no cap but memory).
    pub fn receive_cap(&self) -> Option<u64> {
        if self.force {
            return None;
        }
        let text = std::fs::read_to_string("/proc/sys/net/core/rmem_max").ok()?;
        text.trim().parse::<u64>().ok().map(|n| 2 * n)
    }

    /// Sets the sizes in `b` (`setsockopt` values; Linux doubles them). Returns a description
    /// of each cap that held a buffer below what was asked.
    pub fn apply(&self, fd: BorrowedFd<'_>, b: &Buffers) -> io::Result<Vec<String>> {
        let asks = [
            (b.rcvbuf, libc::SO_RCVBUF, libc::SO_RCVBUFFORCE),
            (b.sndbuf, libc::SO_SNDBUF, libc::SO_SNDBUFFORCE),
        ];
        for (ask, plain, forced) in asks {
            let Some(ask) = ask else { continue };
            let opt = if self.force { forced } else { plain };
            crate::sockopt::set::<i32>(fd, libc::SOL_SOCKET, opt, setsockopt_value(ask))?;
        }
        Ok(shortfalls(b, accounted(fd)?))
    }

    /// Sets `TCP_WINDOW_CLAMP`: the largest window the socket will advertise.
    pub fn clamp(&self, fd: BorrowedFd<'_>, bytes: u64) -> io::Result<()> {
        let v = i32::try_from(bytes).unwrap_or(i32::MAX);
        crate::sockopt::set::<i32>(fd, libc::IPPROTO_TCP, libc::TCP_WINDOW_CLAMP, v)
    }
}

/// The `setsockopt` argument for a size (Linux doubles it; it must fit an int doubled).
fn setsockopt_value(ask: u64) -> i32 {
    i32::try_from(ask.min(i32::MAX as u64 / 2)).unwrap_or(i32::MAX / 2)
}

/// Each buffer of `asked` that the kernel holds below twice the asked size, as a sentence naming
/// the sysctl that capped it. The sentence leaves the ask out: a law asks anew as it grows, and
/// one cap met by many asks and streams is one fact for the user.
pub fn shortfalls(asked: &Buffers, have: Accounted) -> Vec<String> {
    [
        (asked.rcvbuf, have.rcvbuf, "receive", "rmem_max"),
        (asked.sndbuf, have.sndbuf, "send", "wmem_max"),
    ]
    .into_iter()
    .filter_map(|(ask, got, what, sysctl)| {
        let want = 2 * u64::try_from(setsockopt_value(ask?)).ok()?;
        (got < want).then(|| {
            format!("{what} buffer capped at {got} bytes by net.core.{sysctl} (more was asked)")
        })
    })
    .collect()
}

/// Reads both buffers as the kernel accounts them.
pub fn accounted(fd: BorrowedFd<'_>) -> io::Result<Accounted> {
    let r = crate::sockopt::get::<i32>(fd, libc::SOL_SOCKET, libc::SO_RCVBUF)?;
    let s = crate::sockopt::get::<i32>(fd, libc::SOL_SOCKET, libc::SO_SNDBUF)?;
    Ok(Accounted {
        rcvbuf: u64::try_from(r).unwrap_or(0),
        sndbuf: u64::try_from(s).unwrap_or(0),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsFd;

    #[test]
    fn shortfalls_name_each_capped_buffer() {
        let asked = Buffers {
            rcvbuf: Some(1 << 20),
            sndbuf: None,
        };
        let have = Accounted {
            rcvbuf: 1 << 20,
            sndbuf: 0,
        };
        assert_eq!(
            shortfalls(&asked, have),
            vec!["receive buffer capped at 1048576 bytes by net.core.rmem_max (more was asked)"]
        );
        let larger = Buffers {
            rcvbuf: Some(3 << 20),
            sndbuf: None,
        };
        assert_eq!(
            shortfalls(&larger, have),
            shortfalls(&asked, have),
            "a larger ask against the same cap is the same fact"
        );
        let full = Accounted {
            rcvbuf: 2 << 20,
            sndbuf: 0,
        };
        assert!(shortfalls(&asked, full).is_empty());
        assert!(shortfalls(&Buffers::default(), have).is_empty());
    }

    #[test]
    fn sets_and_reads_back_doubled_sizes_and_the_clamp() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let s = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let ctl = BufferControl::new(false);
        let capped = ctl.apply(s.as_fd(), &Buffers::both(100_000)).unwrap();
        assert!(capped.is_empty(), "{capped:?}");
        assert_eq!(
            accounted(s.as_fd()).unwrap(),
            Accounted {
                rcvbuf: 200_000,
                sndbuf: 200_000
            }
        );
        ctl.clamp(s.as_fd(), 50_000).unwrap();
        // Beyond rmem_max an unprivileged process is capped, and told so.
        let capped = ctl.apply(s.as_fd(), &Buffers::both(1 << 30)).unwrap();
        assert_eq!(capped.len(), 2, "{capped:?}");
    }
}
