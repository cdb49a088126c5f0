//! A transfer that moves no byte for too long is stalled: a peer that stops reading (or
//! sending) holds a blocked send or read forever otherwise. One watch serves the server's
//! transfers (`--data-timeout`) and the client's (`--timeout`); the caller cancels the pump.
//! Pure: the caller passes the time and the byte count.

use std::time::{Duration, Instant};

/// Watches a transfer's byte count for progress.
#[derive(Debug, Clone, Copy)]
pub struct StallWatch {
    limit: Duration,
    last: Instant,
    bytes: u64,
}

impl StallWatch {
    /// A watch started at `now` that calls a transfer stalled after `limit` without progress.
    pub fn new(limit: Duration, now: Instant) -> StallWatch {
        StallWatch {
            limit,
            last: now,
            bytes: 0,
        }
    }

    /// Whether the transfer, having moved `bytes` in all by `now`, moved none for longer than
    /// the limit.
    pub fn stalled(&mut self, now: Instant, bytes: u64) -> bool {
        if bytes != self.bytes {
            self.bytes = bytes;
            self.last = now;
            return false;
        }
        now.saturating_duration_since(self.last) > self.limit
    }

    /// The limit, for messages.
    pub fn limit(&self) -> Duration {
        self.limit
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_transfer_without_progress_for_the_limit_is_stalled() {
        let t0 = Instant::now();
        let s = |secs: u64| t0 + Duration::from_secs(secs);
        let mut w = StallWatch::new(Duration::from_secs(10), t0);
        assert!(!w.stalled(s(5), 0));
        assert!(!w.stalled(s(9), 100), "progress");
        assert!(
            !w.stalled(s(19), 100),
            "10 s without progress is the limit, not past it"
        );
        assert!(w.stalled(s(20), 100));
        assert!(!w.stalled(s(21), 101), "progress again");
        assert!(!w.stalled(s(30), 101));
        assert!(w.stalled(s(32), 101));
    }
}
