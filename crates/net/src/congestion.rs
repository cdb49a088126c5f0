//! The congestion control of a sending data connection (`--cc`): set with `TCP_CONGESTION`,
//! read back so that the summary and telemetry say what each connection really ran.

use nix::sys::socket::{getsockopt, setsockopt, sockopt::TcpCongestion};
use std::ffi::OsString;
use std::os::fd::BorrowedFd;

/// Sets `wanted` (if any) on `fd`; returns the congestion control the socket runs. A refusal
/// (not built in, or not allowed to an unprivileged process) is added to `problems` and the
/// system's default stays.
pub fn choose(
    fd: BorrowedFd<'_>,
    wanted: Option<&str>,
    problems: &mut impl Extend<String>,
) -> Option<String> {
    if let Some(name) = wanted {
        if let Err(e) = setsockopt(&fd, TcpCongestion, &OsString::from(name)) {
            problems.extend([format!(
                "congestion control {name} refused ({e}); the system's default runs (see \
                 net.ipv4.tcp_allowed_congestion_control)"
            )]);
        }
    }
    // The kernel fills the whole name buffer: the name ends at the first NUL.
    getsockopt(&fd, TcpCongestion).ok().map(|n| {
        let name = n.to_string_lossy();
        name.trim_end_matches('\0').to_string()
    })
}

/// The congestion controls this kernel offers (`tcp_available_congestion_control`).
pub fn available() -> Vec<String> {
    std::fs::read_to_string("/proc/sys/net/ipv4/tcp_available_congestion_control")
        .map(|t| t.split_whitespace().map(str::to_string).collect())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsFd;

    #[test]
    fn a_socket_runs_the_control_asked_for_or_says_why_not() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let s = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let mut problems: Vec<String> = Vec::new();
        // reno is built into every Linux and allowed to every process.
        assert_eq!(
            choose(s.as_fd(), Some("reno"), &mut problems).as_deref(),
            Some("reno")
        );
        assert!(problems.is_empty(), "{problems:?}");
        assert!(available().iter().any(|c| c == "reno"));
        let before = choose(s.as_fd(), None, &mut problems);
        assert_eq!(before.as_deref(), Some("reno"));
        choose(s.as_fd(), Some("no-such-control"), &mut problems);
        assert_eq!(problems.len(), 1, "{problems:?}");
    }
}
