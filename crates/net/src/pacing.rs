//! Applies a pacing law's decision to a live socket: TCP's internal pacing (Linux ≥ 4.13, no
//! `fq` qdisc needed) with no ceiling, or a ceiling in bytes per second.

use fatpipe_tune::Pace;
use std::io;
use std::os::fd::BorrowedFd;

/// A pacing ceiling that limits nothing: any value but "unlimited" (`~0`) switches internal
/// pacing on; the kernel then paces at its own rate.
const NO_CEILING: u64 = u64::MAX - 1;

/// Sets `pace` on `fd` (`SO_MAX_PACING_RATE`).
pub fn apply(fd: BorrowedFd<'_>, pace: Pace) -> io::Result<()> {
    let ceiling = match pace {
        Pace::Tcp => NO_CEILING,
        Pace::Rate(r) => r.min(NO_CEILING),
    };
    crate::sockopt::set(fd, libc::SOL_SOCKET, libc::SO_MAX_PACING_RATE, ceiling)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsFd;

    fn max_pacing_rate(fd: BorrowedFd<'_>) -> u64 {
        crate::sockopt::get(fd, libc::SOL_SOCKET, libc::SO_MAX_PACING_RATE).unwrap()
    }

    #[test]
    fn a_paced_socket_carries_the_ceiling_its_law_chose() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let s = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        assert_eq!(max_pacing_rate(s.as_fd()), u64::MAX, "unpaced at first");
        apply(s.as_fd(), Pace::Tcp).unwrap();
        assert_eq!(max_pacing_rate(s.as_fd()), NO_CEILING);
        apply(s.as_fd(), Pace::Rate(12_500_000)).unwrap();
        assert_eq!(max_pacing_rate(s.as_fd()), 12_500_000);
    }
}
