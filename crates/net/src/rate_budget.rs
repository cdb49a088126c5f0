//! A rate several transfers share: `--limit-rate` holds a whole copy (every file, every stream,
//! every session at once) to one rate, as rclone's `--bwlimit` and lftp's
//! `net:limit-total-rate` do. A token bucket: bytes taken beyond what the rate refilled make
//! the taker wait; a quarter second's worth may go at once (after an idle spell, listings and
//! checksums between files, no more than that bursts).

use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The share of a second's bytes that may go at once.
const BURST_S: f64 = 0.25;

/// A rate in bit/s that the pumps given it share.
#[derive(Debug)]
pub struct RateBudget {
    bytes_per_s: f64,
    bucket: Mutex<Bucket>,
}

#[derive(Debug)]
struct Bucket {
    /// Bytes that may go now (negative: owed).
    tokens: f64,
    /// When it was last refilled.
    at: Option<Instant>,
}

impl RateBudget {
    /// A budget of `bits_per_s`.
    pub fn new(bits_per_s: u64) -> RateBudget {
        let bytes_per_s = bits_per_s as f64 / 8.0;
        RateBudget {
            bytes_per_s,
            bucket: Mutex::new(Bucket {
                tokens: bytes_per_s * BURST_S,
                at: None,
            }),
        }
    }

    /// Takes `n` bytes moved at `now`; returns how long their mover waits before moving more.
    pub fn take(&self, n: u64, now: Instant) -> Duration {
        if self.bytes_per_s <= 0.0 {
            return Duration::ZERO;
        }
        let Ok(mut b) = self.bucket.lock() else {
            return Duration::ZERO;
        };
        let burst = self.bytes_per_s * BURST_S;
        let refill = b.at.map_or(0.0, |at| {
            now.saturating_duration_since(at).as_secs_f64() * self.bytes_per_s
        });
        b.tokens = (b.tokens + refill).min(burst) - n as f64;
        b.at = Some(now);
        match b.tokens < 0.0 {
            true => Duration::from_secs_f64(-b.tokens / self.bytes_per_s),
            false => Duration::ZERO,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn movers_together_keep_to_the_rate_and_an_idle_spell_buys_only_a_burst() {
        // 80 Mbit/s: 10 MB/s, a burst of 2.5 MB.
        let budget = RateBudget::new(80_000_000);
        let t0 = Instant::now();
        let ms = |m: u64| t0 + Duration::from_millis(m);
        assert_eq!(budget.take(2_500_000, ms(0)), Duration::ZERO);
        // Two movers at once, 1 MB each: the second owes 0.1 s after the first's 1 MB.
        assert_eq!(budget.take(1_000_000, ms(0)), Duration::from_millis(100));
        assert_eq!(budget.take(1_000_000, ms(0)), Duration::from_millis(200));
        // They waited: 2 MB refilled by 200 ms, nothing owed.
        assert_eq!(budget.take(0, ms(200)), Duration::ZERO);
        // Ten idle seconds refill a quarter second's worth, not ten seconds'.
        assert_eq!(budget.take(2_500_000, ms(10_200)), Duration::ZERO);
        assert_eq!(
            budget.take(1_000_000, ms(10_200)),
            Duration::from_millis(100)
        );
    }
}
