//! The path's capacity as packet trains show it to a receiver: bytes that arrived over spans of
//! a tenth of an RTT. What `drs` caps its start-up and judges room for a larger window by.

use super::rate;
use std::collections::VecDeque;
use std::time::Duration;

/// Packet trains are timed over a tenth of the base RTT, and not at all below this (the
/// driver's clock is too coarse for shorter spans).
const SHORTEST_TRAIN: Duration = Duration::from_millis(2);
/// Spans at the top that may be bursts, not trains, when telling which spans are in trains.
const SPIKES: usize = 2;
/// How long timed spans are remembered.
const TRAIN_MEMORY: Duration = Duration::from_secs(1);

/// The arrival rate of packet trains: bytes that arrived over spans of a tenth of an RTT. A
/// sender that is not paced sends each round of slow start (and every window it is held to)
/// back to back, so the bottleneck spaces the train at its own rate: the path's capacity shows
/// while the window is still a fraction of the BDP.
#[derive(Debug, Clone, Default)]
pub(crate) struct Trains {
    mark: Option<(Duration, u64)>,
    spans: VecDeque<(Duration, f64)>,
}

/// What the trains of the last second show: the capacity, bytes/s.
#[derive(Debug, Clone, Copy)]
pub(crate) struct TrainRates {
    /// Of the spans at least half as fast as the third fastest (those inside trains), the rate
    /// a fifth of them reach: the fastest while slow start's trains fill a span or two, and on
    /// a full path not the burst that follows a dip when a late reader or a busy router catches
    /// up (about one span in ten on the emulator), nor one huge burst.
    pub(crate) capacity: f64,
}

impl Trains {
    /// Takes the arrival count at `now`; returns what the trains of the last second show once
    /// a span of `span` has passed.
    pub(crate) fn observe(
        &mut self,
        now: Duration,
        arrived: u64,
        span: Duration,
    ) -> Option<TrainRates> {
        let &mut (t0, b0) = self.mark.get_or_insert((now, arrived));
        let dt = now.saturating_sub(t0);
        if dt >= span {
            self.mark = Some((now, arrived));
            self.spans
                .push_back((now, rate(arrived.saturating_sub(b0), dt)));
        }
        while self
            .spans
            .front()
            .is_some_and(|&(t, _)| now.saturating_sub(t) > TRAIN_MEMORY)
        {
            self.spans.pop_front();
        }
        let mut rates: Vec<f64> = self.spans.iter().map(|&(_, r)| r).collect();
        rates.sort_by(f64::total_cmp);
        // The spans inside trains: at least half as fast as the third fastest (one or two
        // spans may hold what a stalled reader or router released at once).
        let reference = *rates.iter().rev().nth(SPIKES).or(rates.first())?;
        let inside: Vec<f64> = rates
            .into_iter()
            .filter(|&r| r > 0.0 && r >= reference / 2.0)
            .collect();
        Some(TrainRates {
            capacity: *inside.get(inside.len() * 4 / 5)?,
        })
    }
}

/// Whether a flight of `in_flight` bytes arriving at `rate` lasts two spans of `span` or more:
/// only then is a whole span inside the train, showing its rate (a shorter train shows only
/// its length per span).
pub(crate) fn outlasts_two_spans(rate: f64, span: Duration, in_flight: f64) -> bool {
    rate * 2.0 * span.as_secs_f64() <= in_flight
}

/// The span trains are timed over at base RTT `base`, if timing them is meaningful there.
pub(crate) fn train_span(base: Duration) -> Option<Duration> {
    Some(base / 10).filter(|&s| s >= SHORTEST_TRAIN)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trains_show_the_bottleneck_rate_through_gaps_dips_and_bursts() {
        let span = Duration::from_millis(10);
        // 100 ms rounds: a 50 ms train at 100 MB/s, then nothing; one burst at twice that.
        let mut trains = Trains::default();
        let (mut bytes, mut rates) = (0, None);
        for ms in (0..1000u64).step_by(10) {
            if ms % 100 < 50 {
                bytes += if ms == 520 { 2_000_000 } else { 1_000_000 };
            }
            rates = trains.observe(Duration::from_millis(ms), bytes, span);
        }
        assert_eq!(rates.map(|r| r.capacity), Some(100e6));
        // A full path whose router pauses every tenth span and catches up in the next.
        let mut trains = Trains::default();
        let (mut bytes, mut rates) = (0, None);
        for ms in (0..1000u64).step_by(10) {
            bytes += match ms % 100 {
                40 => 700_000,
                50 => 1_300_000,
                _ => 1_000_000,
            };
            rates = trains.observe(Duration::from_millis(ms), bytes, span);
        }
        assert_eq!(rates.map(|r| r.capacity), Some(100e6));
        // One span that releases 25 ms of data at once (a stalled reader at the end).
        let mut trains = Trains::default();
        let (mut bytes, mut rates) = (0, None);
        for ms in (0..1000u64).step_by(10) {
            bytes += if ms == 900 { 2_500_000 } else { 1_000_000 };
            rates = trains.observe(Duration::from_millis(ms), bytes, span);
        }
        assert_eq!(rates.map(|r| r.capacity), Some(100e6));
        assert!(Trains::default().observe(Duration::ZERO, 0, span).is_none());
    }
}
