//! A receiver's reading lag: bytes that arrived but were not yet read, seen as the window the
//! kernel advertises falling short of the one it would offer (`tcpi_rcv_wnd` under
//! `tcpi_rcv_ssthresh`). A reader on a busy host leaves such bytes now and then (an HTTPS
//! body decrypted on two cores beside its sender and the path's emulator: 3–7 MB at
//! 1 Gbit/s, 100 ms), and a window of the BDP alone then held its sender back for a third of
//! the transfer: what the reader leaves unread is room the sender does not get.

use std::time::Duration;

/// How long a lag counts: the highest of the last one to two of these spans.
const SPAN: Duration = Duration::from_secs(1);
/// A lag counts once lags past [`SEEN`] were seen this far apart within the last
/// [`RECUR_MEMORY`] (one lasting, or several): a reader put aside once for 40 ms (this 2-core
/// host's emulator beside it) left 3.6 MB unread, and the window that then held it for seconds
/// made a clean path's buffers 3.9 x its BDP; an HTTPS reader that lags every few seconds
/// still gets its window.
const RECUR: Duration = Duration::from_millis(250);
const RECUR_MEMORY: Duration = Duration::from_secs(5);
/// A lag is seen when this share of the window offered is unread (the steady window's spare
/// holds less).
const SEEN: f64 = 0.1;

/// The most a receiver left unread lately, where it lags again and again.
#[derive(Debug, Default, Clone)]
pub struct Lag {
    /// The highest lag of the span under way, and of the one before.
    current: u64,
    previous: u64,
    /// When a lag was first and last seen within the last [`RECUR_MEMORY`].
    seen: Option<(Duration, Duration)>,
    /// When the span under way began.
    since: Duration,
}

impl Lag {
    /// One look at `now`: the kernel would offer a window of `offered` bytes (its receive
    /// threshold, at most the law's window) and advertises `advertised`; returns the most
    /// left unread over the last one to two spans, if lags recur.
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
        let unread = offered.saturating_sub(advertised);
        self.current = self.current.max(unread);
        if self
            .seen
            .is_some_and(|(_, last)| now.saturating_sub(last) > RECUR_MEMORY)
        {
            self.seen = None;
        }
        if unread as f64 > SEEN * offered as f64 {
            self.seen = Some(self.seen.map_or((now, now), |(first, _)| (first, now)));
        }
        match self.seen {
            Some((first, last)) if last.saturating_sub(first) >= RECUR => {
                self.current.max(self.previous)
            }
            _ => 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn the_most_left_unread_counts_for_one_to_two_spans_once_lags_recur() {
        let mut lag = Lag::default();
        assert_eq!(lag.observe(ms(0), 10_000, 10_000), 0);
        // Seen once: not yet.
        assert_eq!(lag.observe(ms(100), 10_000, 7_000), 0);
        assert_eq!(lag.observe(ms(200), 10_000, 9_500), 0);
        // Seen again 250 ms after: the most of the span counts.
        assert_eq!(lag.observe(ms(350), 10_000, 8_500), 3_000);
        // The next span still remembers it ...
        assert_eq!(lag.observe(ms(1_100), 10_000, 10_000), 3_000);
        assert_eq!(lag.observe(ms(1_900), 10_000, 9_500), 3_000);
        // ... the one after that no longer: the small lags of these two spans remain.
        assert_eq!(lag.observe(ms(2_150), 10_000, 9_500), 500);
        // A reader that stays on time for two spans has no lag.
        assert_eq!(lag.observe(ms(4_500), 10_000, 10_000), 0);
    }

    #[test]
    fn lags_seconds_apart_recur() {
        let mut lag = Lag::default();
        assert_eq!(lag.observe(ms(0), 10_000, 6_000), 0);
        assert_eq!(lag.observe(ms(100), 10_000, 10_000), 0);
        // Another, 3 s later: the reader lags again and again.
        assert_eq!(lag.observe(ms(3_000), 10_000, 5_000), 5_000);
        // One more than 5 s after the last is a first again.
        assert_eq!(lag.observe(ms(9_000), 10_000, 5_000), 0);
    }

    #[test]
    fn a_reader_put_aside_once_has_no_lag() {
        let mut lag = Lag::default();
        for k in 0..30u64 {
            let unread = if k == 10 || k == 11 { 3_600_000 } else { 0 };
            assert_eq!(lag.observe(ms(10 * k), 13_000_000, 13_000_000 - unread), 0);
        }
    }

    #[test]
    fn an_advertised_window_above_the_offered_one_is_no_lag() {
        let mut lag = Lag::default();
        assert_eq!(lag.observe(ms(0), 8_000, 12_000), 0);
    }
}
