//! TCP's own pacing for a data connection: the kernel spreads each window over the round trip
//! (twice the window's rate in slow start, 1.2 × after) instead of sending it in line-rate
//! bursts. Parallel streams need it: one stream's slow-start burst queues at the bottleneck for
//! tens of milliseconds, and the delay check of cubic's HyStart in every sibling then ends its
//! slow start early, leaving it to crawl at congestion-avoidance pace (measured at 200 ms:
//! half of the streams opened together stuck near 0.5 MB windows for seconds).

use std::io;
use std::os::fd::BorrowedFd;

/// A pacing ceiling that limits nothing: any value but "unlimited" (`~0`) switches internal
/// pacing on (Linux ≥ 4.13, no `fq` qdisc needed); the kernel then paces at its own rate.
const NO_CEILING: u64 = u64::MAX - 1;

/// Switches TCP's internal pacing on for `fd`, without capping its rate.
pub fn pace(fd: BorrowedFd<'_>) -> io::Result<()> {
    crate::sockopt::set(fd, libc::SOL_SOCKET, libc::SO_MAX_PACING_RATE, NO_CEILING)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsFd;

    fn max_pacing_rate(fd: BorrowedFd<'_>) -> u64 {
        crate::sockopt::get(fd, libc::SOL_SOCKET, libc::SO_MAX_PACING_RATE).unwrap()
    }

    #[test]
    fn a_paced_socket_carries_the_ceiling_that_switches_pacing_on() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let s = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        assert_eq!(max_pacing_rate(s.as_fd()), u64::MAX, "unpaced at first");
        pace(s.as_fd()).unwrap();
        assert_eq!(max_pacing_rate(s.as_fd()), NO_CEILING);
    }
}
