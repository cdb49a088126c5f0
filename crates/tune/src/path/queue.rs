//! Every threshold by which a law or policy reads a queue on the path, named once: how far
//! the RTT is stretched over the path's base RTT (a ratio), or how much delay above the least
//! RTT (the delay test that `fatpipe_bic`'s slow-start exit and the adaptive pacing law share;
//! the BPF header `bic_law.h` holds the same numbers, and a test in `crates/bpf` ties them).

use std::time::Duration;

/// No queue: an RTT within this factor of the base, so a full window is what limits the rate.
pub const UNQUEUED: f64 = 1.04;
/// A standing queue: `drs`'s steady window (1.1 × BDP) keeps one of a tenth of the RTT, the
/// sign that the path is full.
pub const QUEUE: f64 = 1.06;
/// During start-up a smaller stretch than a steady window's ends the doubling (each RTT of
/// delay doubles the overshoot).
pub const STARTUP_QUEUE: f64 = 1.08;
/// The queue a model-based sender (bbr) keeps by itself: its probing sends a quarter above the
/// rate it measured.
pub const MODEL_QUEUE: f64 = 1.25;
/// Beside holes (lost segments), a queue full enough to drop: a model-based sender's probing
/// adds up to [`MODEL_QUEUE`], and random loss goes on under it.
pub const DROPPING_QUEUE: f64 = MODEL_QUEUE;
/// A queue that stood before a transfer's streams opened (a neighbour's, or uploads filling the
/// way their acknowledgements come back), read over the control connection's lowest RTT: the
/// streams' own minimum holds it. The control's small segments cross a slow link sooner than
/// full ones, so only more than a model-based sender's queue counts.
pub const HIDDEN_QUEUE: f64 = MODEL_QUEUE;
/// A longer route rather than a queue: the steady window's queue and a trial's add at most
/// 1.1 × 1.25.
pub const LONGER_ROUTE: f64 = 1.5;

/// A path whose minimum RTT is below this (µs) is loopback or a LAN: the host, not a queue on
/// the path, sets how its RTT strays (a queue its streams show while the peer's window holds
/// them is the receiving host's backlog).
pub const SHORT_PATH_US: u32 = 1_000;

/// An RTT estimate whose mean deviation is more than this share of it is scattered (a
/// timeout's backoff, an outage's end), not a reading of the path: the kernel starts a
/// connection's deviation at half its first sample.
pub const SCATTERED: f64 = 0.5;

/// The delay test's share of the least RTT: a queue once the RTT lies an eighth above it
/// (HyStart's delay increase) ...
pub const DELAY_SHARE: u32 = 8;
/// ... but never less than this ...
pub const DELAY_MIN: Duration = Duration::from_millis(4);
/// ... nor more than this.
pub const DELAY_MAX: Duration = Duration::from_millis(16);

/// How far above the least RTT `min_rtt` the RTT lies once a window reached the bottleneck's
/// queue (the delay test).
pub fn queue_delay(min_rtt: Duration) -> Duration {
    (min_rtt / DELAY_SHARE).clamp(DELAY_MIN, DELAY_MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_delay_test_is_an_eighth_of_the_least_rtt_within_4_to_16_ms() {
        let ms = Duration::from_millis;
        assert_eq!(queue_delay(ms(10)), ms(4));
        assert_eq!(queue_delay(ms(80)), ms(10));
        assert_eq!(queue_delay(ms(200)), ms(16));
    }

    #[test]
    fn the_thresholds_are_ordered() {
        let order = [UNQUEUED, QUEUE, STARTUP_QUEUE, MODEL_QUEUE, LONGER_ROUTE];
        assert!(order.windows(2).all(|w| w[0] < w[1]), "{order:?}");
    }
}
