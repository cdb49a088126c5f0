//! Waiting for a socket with a way to be woken early: a thread that waits on a connection (a
//! listener for the next data connection, the client's control connection) also wakes when
//! another thread rings its [`Wake`] (a stream ended, a law has a size to announce), instead
//! of at its next periodic look.

use nix::sys::eventfd::{EfdFlags, EventFd};
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd};
use std::time::Duration;

/// A bell one thread rings and another waits for beside its socket (an eventfd).
pub struct Wake(EventFd);

impl Wake {
    /// A new bell, not ringing.
    pub fn new() -> io::Result<Wake> {
        EventFd::from_value_and_flags(0, EfdFlags::EFD_NONBLOCK | EfdFlags::EFD_CLOEXEC)
            .map(Wake)
            .map_err(io::Error::from)
    }

    /// Wakes the waiter.
    pub fn ring(&self) {
        let _ = self.0.write(1);
    }
}

/// Waits up to `wait` for `fd` to have something to read, or for `wake` to ring (which it
/// silences); returns whether `fd` has.
pub fn readable(fd: BorrowedFd<'_>, wait: Duration, wake: Option<&Wake>) -> io::Result<bool> {
    let mut fds = vec![fd];
    fds.extend(wake.map(|w| w.0.as_fd()));
    let got = ready(&fds, false, wait)?;
    if let (Some(true), Some(w)) = (got.get(1), wake) {
        let _ = w.0.read();
    }
    Ok(got.first() == Some(&true))
}

/// Waits up to `wait` (to the microsecond: `ppoll`) until one of `fds` can be read (or, with
/// `write`, written); returns which can.
pub fn ready(fds: &[BorrowedFd<'_>], write: bool, wait: Duration) -> io::Result<Vec<bool>> {
    let events = if write { libc::POLLOUT } else { libc::POLLIN };
    let mut pfds: Vec<libc::pollfd> = fds
        .iter()
        .map(|fd| libc::pollfd {
            fd: fd.as_raw_fd(),
            events,
            revents: 0,
        })
        .collect();
    let ts = libc::timespec {
        tv_sec: libc::time_t::try_from(wait.as_secs()).unwrap_or(libc::time_t::MAX),
        tv_nsec: libc::c_long::from(wait.subsec_nanos() as i32),
    };
    // SAFETY: valid pollfds for descriptors that outlive the call, a valid timespec, no mask.
    let n = unsafe {
        libc::ppoll(
            pfds.as_mut_ptr(),
            pfds.len() as libc::nfds_t,
            &ts,
            std::ptr::null(),
        )
    };
    if n < 0 {
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
    Ok(pfds.iter().map(|p| p.revents != 0).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::os::fd::AsFd;
    use std::time::Instant;

    #[test]
    fn a_ring_ends_the_wait_and_data_is_seen() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let mut a = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (b, _) = l.accept().unwrap();
        let wake = Wake::new().unwrap();
        wake.ring();
        let t = Instant::now();
        assert!(!readable(b.as_fd(), Duration::from_secs(5), Some(&wake)).unwrap());
        assert!(t.elapsed() < Duration::from_secs(4));
        // Silenced: the next wait runs its course.
        assert!(!readable(b.as_fd(), Duration::from_millis(20), Some(&wake)).unwrap());
        a.write_all(b"x").unwrap();
        assert!(readable(b.as_fd(), Duration::from_secs(5), None).unwrap());
    }
}
