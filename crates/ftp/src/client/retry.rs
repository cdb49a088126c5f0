//! Riding through failure: a file that failed because a connection broke (reset, refused while
//! the server restarts, silent past `--timeout`, a `421`/`425`/`426`) is tried again over a new
//! session after a pause that doubles (1 s up to 30 s), continuing from what arrived as
//! `--resume` does, until `--retry-for` has passed since its first failure. A refusal (a missing
//! file, a login, a full disk, a checksum) is never retried (`Failure::transient` tells them
//! apart).

use std::time::Duration;

/// The pause before the first new attempt; it doubles after each.
pub const FIRST_PAUSE: Duration = Duration::from_secs(1);
/// The longest pause between attempts.
pub const MAX_PAUSE: Duration = Duration::from_secs(30);

/// The pause after `previous` (none: the first).
pub fn next_pause(previous: Option<Duration>) -> Duration {
    previous.map_or(FIRST_PAUSE, |p| (p * 2).min(MAX_PAUSE))
}

#[cfg(test)]
mod tests {
    use super::*;

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
