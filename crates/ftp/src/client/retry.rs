//! Riding through failure: a file that failed because a connection broke (reset, refused while
//! the server restarts, silent past `--timeout`, a `421`/`425`/`426`) is tried again over a new
//! session after a pause that doubles (1 s up to 30 s), continuing from what arrived as
//! `--resume` does, until `--retry-for` has passed since its first failure. A refusal (a missing
//! file, a login, a full disk, a checksum) is never retried.

use std::time::Duration;

/// The pause before the first new attempt; it doubles after each.
pub(super) const FIRST_PAUSE: Duration = Duration::from_secs(1);
/// The longest pause between attempts.
pub(super) const MAX_PAUSE: Duration = Duration::from_secs(30);

/// What a lost connection says somewhere in an error's text (the client's messages, the
/// system's, a server's `421`/`425`/`426`).
const LOST: &[&str] = &[
    "(os error 32)",  // broken pipe
    "(os error 101)", // network unreachable
    "(os error 103)", // connection aborted
    "(os error 104)", // connection reset
    "(os error 110)", // timed out
    "(os error 111)", // connection refused: a server restarting
    "(os error 113)", // no route to host
    "closed the control connection",
    "no reply from",
    "within the --timeout",
    "timed out",
    "stalled",
    "closed before its EOD",
    "closed inside a block",
    "said 421",
    "said 425",
    "said 426",
];

/// What a failure of this end's own disk or of the server's storage or policy says: those
/// are not cured by trying again.
const REFUSED: &[&str] = &[
    "writing the local copy",
    "reading local file",
    "checksum",
    "said 45",
    "said 5",
    "login as",
    "interrupted",
];

/// Whether a file's error (as its result records it) is a lost connection worth a new session.
pub(super) fn transient(error: &str) -> bool {
    LOST.iter().any(|m| error.contains(m)) && !REFUSED.iter().any(|m| error.contains(m))
}

/// The pause after `previous` (none: the first).
pub(super) fn next_pause(previous: Option<Duration>) -> Duration {
    previous.map_or(FIRST_PAUSE, |p| (p * 2).min(MAX_PAUSE))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lost_connections_are_retried_refusals_are_not() {
        for lost in [
            "receiving /x: read failed: Connection reset by peer (os error 104)",
            "cannot open a session with h:2811: cannot connect to 10.0.0.1:2811: Connection refused (os error 111)",
            "no reply from 10.0.0.1:2811 within 1m (--timeout)",
            "10.0.0.1:2811 closed the control connection",
            "RETR /x: server said 426 Data connection broken, transfer aborted",
            "receiving /x: MODE E transfer stalled: no data and no connection",
        ] {
            assert!(transient(lost), "{lost}");
        }
        for refused in [
            "RETR /x: server said 550 No such file",
            "writing the local copy of /x: No space left on device (os error 28)",
            "STOR /x: server said 452 Insufficient storage space (os error 104)",
            "login as bob failed: 10.0.0.1:2811 said 530 Login incorrect",
            "checksums differ after the copy",
            "interrupted before it began",
        ] {
            assert!(!transient(refused), "{refused}");
        }
    }

    #[test]
    fn pauses_double_up_to_thirty_seconds() {
        let mut p = None;
        let mut seen = Vec::new();
        for _ in 0..8 {
            let next = next_pause(p);
            seen.push(next.as_secs());
            p = Some(next);
        }
        assert_eq!(seen, [1, 2, 4, 8, 16, 30, 30, 30]);
    }
}
