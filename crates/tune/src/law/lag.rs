//! A receiver's reading lag: bytes that arrived but were not yet read, seen as the window the
//! kernel advertises falling short of the one it would offer (`tcpi_rcv_wnd` under
//! `tcpi_rcv_ssthresh`). A reader on a busy host leaves such bytes now and then (an HTTPS
//! body decrypted on two cores beside its sender and the path's emulator: 3–7 MB at
//! 1 Gbit/s, 100 ms), and a window of the BDP alone then held its sender back for a third of
//! the transfer: what the reader leaves unread is room the sender does not get.

use std::time::Duration;

/// How long a lag counts: the highest of the last one to two of these spans.
const SPAN: Duration = Duration::from_secs(1);

/// The most a receiver left unread lately.
#[derive(Debug, Default, Clone)]
pub struct Lag {
    /// The highest lag of the span under way, and of the one before.
    current: u64,
    previous: u64,
    /// When the span under way began.
    since: Duration,
}

impl Lag {
    /// One look at `now`: the kernel would offer a window of `offered` bytes (its receive
    /// threshold, at most the law's window) and advertises `advertised`; returns the most
    /// left unread over the last one to two spans.
    pub fn observe(&mut self, now: Duration, offered: u64, advertised: u64) -> u64 {
        if now.saturating_sub(self.since) >= SPAN {
            self.previous = if now.saturating_sub(self.since) >= 2 * SPAN {
                0
            } else {
                self.current
            };
            self.current = 0;
            self.since = now;
        }
        self.current = self.current.max(offered.saturating_sub(advertised));
        self.current.max(self.previous)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn the_most_left_unread_counts_for_one_to_two_spans() {
        let mut lag = Lag::default();
        assert_eq!(lag.observe(ms(0), 10_000, 10_000), 0);
        assert_eq!(lag.observe(ms(100), 10_000, 7_000), 3_000);
        assert_eq!(lag.observe(ms(200), 10_000, 9_000), 3_000);
        // The next span still remembers it ...
        assert_eq!(lag.observe(ms(1_100), 10_000, 10_000), 3_000);
        assert_eq!(lag.observe(ms(1_900), 10_000, 9_500), 3_000);
        // ... the one after that no longer.
        assert_eq!(lag.observe(ms(2_150), 10_000, 9_500), 500);
        // A reader that stays on time for two spans has no lag.
        assert_eq!(lag.observe(ms(4_500), 10_000, 10_000), 0);
    }

    #[test]
    fn an_advertised_window_above_the_offered_one_is_no_lag() {
        let mut lag = Lag::default();
        assert_eq!(lag.observe(ms(0), 8_000, 12_000), 0);
    }
}
