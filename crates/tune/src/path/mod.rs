//! The path estimate that every law and policy reads: the path's base RTT (the lowest of the
//! last ten seconds), its delivery rate (the highest of the last second), their product (the
//! BDP), and whether a standing queue stretches the RTT. Defined once so that the buffer laws
//! and the stream policy agree on what "a queue" is; its thresholds are in [`queue`].

use crate::law::window::Extreme;
use crate::sample::{Sample, TcpStats};
use std::time::Duration;

pub mod queue;

pub use queue::QUEUE;

/// How long the lowest RTT is remembered: long enough to span the queue's drain after a
/// growth, short enough to follow a route change.
const BASE_SPAN: Duration = Duration::from_secs(10);
/// How long the highest rate is remembered: a second of bursts and lulls.
const PEAK_SPAN: Duration = Duration::from_secs(1);

/// Base RTT and peak delivery rate of one path, fed with observations and their time.
#[derive(Debug, Clone)]
pub struct PathEstimate {
    base_rtt: Extreme,
    peak_rate: Extreme,
}

impl Default for PathEstimate {
    fn default() -> Self {
        PathEstimate {
            base_rtt: Extreme::min(BASE_SPAN),
            peak_rate: Extreme::max(PEAK_SPAN),
        }
    }
}

impl PathEstimate {
    /// Takes an RTT seen at `now`; returns the base RTT.
    pub fn observe_rtt(&mut self, now: Duration, rtt: Duration) -> Duration {
        Duration::from_secs_f64(self.base_rtt.push(now, rtt.as_secs_f64()))
    }

    /// Takes a delivery rate (bytes/s) seen at `now`; returns the peak rate.
    pub fn observe_rate(&mut self, now: Duration, bytes_per_s: f64) -> f64 {
        self.peak_rate.push(now, bytes_per_s)
    }

    /// The bandwidth-delay product, bytes: peak rate × base RTT, once both were seen.
    pub fn bdp(&self) -> Option<f64> {
        Some(self.peak_rate.get()? * self.base_rtt.get()?)
    }
}

/// How far `rtt` is stretched over `base` (1.0: no queue; 1.0 too without a base).
pub fn stretch(rtt: Duration, base: Duration) -> f64 {
    if base.is_zero() {
        1.0
    } else {
        rtt.as_secs_f64() / base.as_secs_f64()
    }
}

/// Whether `rtt` over `base` shows a standing queue.
pub fn queued(rtt: Duration, base: Duration) -> bool {
    stretch(rtt, base) > QUEUE
}

/// The smallest minimum RTT any of `all` saw, µs: the path's own round trip.
pub fn min_rtt_us(all: &[TcpStats]) -> Option<u32> {
    all.iter().map(|s| s.min_rtt_us).filter(|&r| r > 0).min()
}

/// The RTT below which a stream's samples seldom fall, µs: its smoothed RTT less their mean
/// deviation (never below its minimum). A standing queue delays every sample, so the
/// deviation stays small beside the stretch; a busy host's late acknowledgements, or a
/// receiver's delayed ones, delay a few samples by much, which lifts the smoothed RTT and the
/// deviation together: no queue on the path. On a short path ([`queue::SHORT_PATH_US`]) the
/// host's timing is all the RTT there is and strays as much as it stands: the smoothed RTT as
/// it is (there a receiver that falls behind drops segments, and its backlog must not pass
/// for a path at its minimum with random loss). Nor is anything discounted where the
/// deviation is over [`queue::SCATTERED`] of the smoothed RTT: samples scattered by a
/// timeout's backoff (after a link outage: RTT 150 times the minimum, deviation twice that)
/// say nothing of the path, and the discount would read them as its minimum.
pub fn standing_rtt_us(s: &TcpStats) -> u32 {
    let scattered = f64::from(s.rttvar_us) > f64::from(s.rtt_us) * queue::SCATTERED;
    if s.min_rtt_us < queue::SHORT_PATH_US || scattered {
        return s.rtt_us;
    }
    s.rtt_us.saturating_sub(s.rttvar_us).max(s.min_rtt_us)
}

/// How far the standing RTT ([`standing_rtt_us`]) of the `judged` streams (the largest) is
/// stretched over the smallest minimum RTT any of `all` saw: a transfer's queue on its path
/// (1.0 without data).
pub fn queue_of(all: &[TcpStats], judged: &[TcpStats]) -> f64 {
    min_rtt_us(all).map_or(1.0, |floor| {
        stretch_over(judged, Duration::from_micros(floor.into()))
    })
}

/// How far the standing RTT ([`standing_rtt_us`]) of the `judged` streams (the largest) is
/// stretched over `floor`, a round trip known from elsewhere (1.0 without data).
pub fn stretch_over(judged: &[TcpStats], floor: Duration) -> f64 {
    let srtt = judged.iter().map(standing_rtt_us).max().unwrap_or(0);
    stretch(Duration::from_micros(srtt.into()), floor)
}

/// The lowest RTT one sample shows: the kernel's minimum, the receiver's estimate, or a
/// control-channel probe.
pub fn lowest_rtt(s: &Sample) -> Option<Duration> {
    let tcp = s.tcp.unwrap_or_default();
    [tcp.min_rtt_us, tcp.rcv_rtt_us]
        .into_iter()
        .filter(|&us| us > 0)
        .map(|us| Duration::from_micros(us.into()))
        .chain(s.probe_rtt)
        .min()
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: fn(u64) -> Duration = Duration::from_millis;

    #[test]
    fn the_bdp_is_the_peak_rate_times_the_base_rtt() {
        let mut p = PathEstimate::default();
        assert_eq!(p.bdp(), None);
        assert_eq!(p.observe_rtt(MS(0), MS(120)), MS(120));
        assert_eq!(p.observe_rtt(MS(100), MS(100)), MS(100));
        // A queue stretches later RTTs: the base stays.
        assert_eq!(p.observe_rtt(MS(200), MS(150)), MS(100));
        p.observe_rate(MS(200), 50e6);
        assert_eq!(p.observe_rate(MS(300), 10e6), 50e6);
        assert_eq!(p.bdp(), Some(5e6));
        // A second later the peak is the newer rate; ten seconds later the base has moved on.
        assert_eq!(p.observe_rate(MS(1400), 20e6), 20e6);
        assert_eq!(p.observe_rtt(MS(10_300), MS(140)), MS(140));
    }

    #[test]
    fn a_queue_stands_only_where_the_rtt_strays_less_than_it_is_stretched() {
        let stream = |rtt_us, rttvar_us| TcpStats {
            rtt_us,
            rttvar_us,
            min_rtt_us: 20_000,
            ..TcpStats::default()
        };
        // A standing queue: every sample 15 % late, each within half a millisecond.
        let standing = [stream(23_000, 500)];
        assert!((queue_of(&standing, &standing) - 1.125).abs() < 1e-9);
        // Late acknowledgements: a few samples far above the minimum lift the smoothed RTT as
        // much, and the deviation with it.
        let spiky = [stream(23_000, 4_000)];
        assert_eq!(queue_of(&spiky, &spiky), 1.0);
        // Several streams: the most delayed one's standing RTT over the lowest minimum.
        let two = [stream(21_000, 0), stream(26_000, 1_000)];
        assert!((queue_of(&two, &two) - 1.25).abs() < 1e-9);
        assert!((queue_of(&two, &two[..1]) - 1.05).abs() < 1e-9);
        // Loopback: the host's backlog, deviation or not, is what the RTT shows.
        let lo = TcpStats {
            rtt_us: 60,
            rttvar_us: 50,
            min_rtt_us: 15,
            ..TcpStats::default()
        };
        assert_eq!(queue_of(&[lo], &[lo]), 4.0);
        // After an outage: timeouts' backoff leaves an estimate far above the minimum and a
        // deviation twice that; no reading of a path at its minimum.
        let after_outage = [stream(2_900_000, 5_800_000)];
        assert_eq!(queue_of(&after_outage, &after_outage), 145.0);
    }

    #[test]
    fn a_queue_is_a_stretch_beyond_six_percent() {
        assert!(!queued(MS(106), MS(100)));
        assert!(queued(MS(107), MS(100)));
        assert_eq!(stretch(MS(50), Duration::ZERO), 1.0);
    }
}
