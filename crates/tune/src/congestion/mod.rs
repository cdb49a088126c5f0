//! Which congestion control a transfer's senders run when the user did not choose one: the
//! system's (cubic, a loss-based control) until segments are lost while the RTT stays at the
//! path's minimum. Such loss is random (a lossy link), not congestion; a loss-based control
//! reads every one as congestion and collapses under it (1 % loss at 100 ms: about 1 Mbit/s
//! per stream), while a model-based one (bbr) holds the path's rate through it. Losses that
//! come with a queue (the RTT above the minimum, see `path::QUEUE`) are congestion and change
//! nothing: on a clean path the system's control stays.

pub mod control;

pub use control::CongestionControl;

use crate::path;
use crate::streams::Observation;
/// Segments lost without a queue, over the transfer, before the switch (a lone loss may be a
/// tail drop the queue had drained from by the time it was seen).
const LOSSES: u64 = 8;
/// Looks that saw them, at least: random loss goes on, while the overflow that ends slow
/// start is one event (three streams starting together on a 100 Mbit/s path lost 260
/// segments in one look, counted as they were resent after the queue had drained).
const LOOKS: u32 = 3;

/// What the policy decided: the control to run from now on, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CcChange {
    /// The congestion control from now on.
    pub cc: CongestionControl,
    /// Why, for the summary and telemetry.
    pub reason: String,
}

/// The congestion-control policy of one sending transfer.
#[derive(Debug, Clone, Default)]
pub struct CongestionPolicy {
    /// Retransmissions of every stream at the previous look.
    last: Vec<u64>,
    /// Segments lost without a queue so far.
    random: u64,
    /// Looks that saw such losses.
    looks: u32,
    switched: bool,
}

impl CongestionPolicy {
    /// Takes a look at the streams; answers a change once random loss is established.
    pub fn observe(&mut self, o: &Observation<'_>) -> Option<CcChange> {
        if self.switched || o.streams.is_empty() {
            return None;
        }
        let now: Vec<u64> = o.streams.iter().map(|s| s.total_retrans.into()).collect();
        let lost: u64 = now
            .iter()
            .enumerate()
            .map(|(i, &r)| r.saturating_sub(self.last.get(i).copied().unwrap_or(0)))
            .sum();
        self.last = now;
        if lost == 0 {
            return None;
        }
        // A queue at the bottleneck delays every stream; one stream's RTT a little above the
        // minimum (its receiver's delayed acknowledgements, a burst of its own) is not one, so
        // the stream that shows the least says whether there is a queue (one that has no RTT
        // yet, just opened, says nothing).
        let quietest = o
            .streams
            .iter()
            .filter(|s| s.rtt_us > 0)
            .min_by_key(|s| s.rtt_us);
        let judged = quietest.map_or(o.streams, std::slice::from_ref);
        let stretch = path::queue_of(o.streams, judged);
        if stretch > path::QUEUE {
            return None;
        }
        self.random += lost;
        self.looks += 1;
        if self.random < LOSSES || self.looks < LOOKS {
            return None;
        }
        self.switched = true;
        let cc = CongestionControl::FOR_RANDOM_LOSS;
        Some(CcChange {
            reason: format!(
                "{} segments lost with the RTT at its minimum ({:.0} % above it): random loss, \
                 not congestion; congestion control {cc} from now on",
                self.random,
                (stretch - 1.0) * 100.0
            ),
            cc,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sample::TcpStats;
    use std::time::Duration;

    fn look(p: &mut CongestionPolicy, rtt_us: u32, retrans: u32) -> Option<CcChange> {
        let s = TcpStats {
            rtt_us,
            min_rtt_us: 100_000,
            total_retrans: retrans,
            ..TcpStats::default()
        };
        p.observe(&Observation {
            now: Duration::ZERO,
            streams: &[s, s],
            memory: 0,
            ..Observation::default()
        })
    }

    #[test]
    fn losses_at_the_minimum_rtt_switch_to_bbr_once() {
        let mut p = CongestionPolicy::default();
        assert_eq!(look(&mut p, 100_000, 0), None);
        // Two streams, two segments each: 4 of the 8 needed.
        assert_eq!(look(&mut p, 101_000, 2), None);
        // 8, but seen in two looks: one burst may be the end of slow start.
        assert_eq!(look(&mut p, 102_000, 4), None);
        let c = look(&mut p, 102_000, 5).expect("a switch");
        assert_eq!(c.cc, CongestionControl::Bbr);
        assert!(c.reason.contains("10 segments lost"), "{}", c.reason);
        assert_eq!(look(&mut p, 100_000, 40), None, "only once");
    }

    #[test]
    fn one_stream_a_little_slower_than_the_others_is_not_a_queue() {
        let mut p = CongestionPolicy::default();
        let stream = |rtt_us, retrans| TcpStats {
            rtt_us,
            min_rtt_us: 20_000,
            total_retrans: retrans,
            ..TcpStats::default()
        };
        let mut look = |retrans| {
            p.observe(&Observation {
                now: Duration::ZERO,
                // 20 ms path: one stream 8 % above the minimum, its siblings at it.
                streams: &[stream(21_600, retrans), stream(20_300, retrans)],
                memory: 0,
                ..Observation::default()
            })
        };
        assert_eq!(look(0), None);
        assert_eq!(look(4), None);
        assert_eq!(look(8), None);
        assert!(
            look(12).is_some(),
            "24 segments lost without a queue in three looks"
        );
        // A stream just opened (no RTT yet) does not hide a queue the others show.
        let mut p = CongestionPolicy::default();
        for retrans in [0, 4, 8] {
            let o = Observation {
                now: Duration::ZERO,
                streams: &[stream(30_000, retrans), stream(0, 0)],
                memory: 0,
                ..Observation::default()
            };
            assert_eq!(p.observe(&o), None);
        }
    }

    #[test]
    fn a_lone_stream_with_late_acknowledgements_still_sees_random_loss() {
        // A lone stream on a lossy 20 ms path, its smoothed RTT 11 % above the minimum with
        // samples that stray by 3 ms (delayed acknowledgements, a busy host): no queue.
        let mut p = CongestionPolicy::default();
        let mut look = |rttvar_us, retrans| {
            let s = TcpStats {
                rtt_us: 22_200,
                rttvar_us,
                min_rtt_us: 20_000,
                total_retrans: retrans,
                ..TcpStats::default()
            };
            p.observe(&Observation {
                streams: &[s],
                ..Observation::default()
            })
        };
        for retrans in [0, 4, 8] {
            assert_eq!(look(3_000, retrans), None);
        }
        assert!(look(3_000, 12).is_some(), "12 lost in three looks");
        // Samples close together: a queue, and losses beside it are congestion.
        let mut p = CongestionPolicy::default();
        for retrans in [0, 5, 10, 20, 40] {
            let s = TcpStats {
                rtt_us: 22_200,
                rttvar_us: 300,
                min_rtt_us: 20_000,
                total_retrans: retrans,
                ..TcpStats::default()
            };
            let o = Observation {
                streams: &[s],
                ..Observation::default()
            };
            assert_eq!(p.observe(&o), None);
        }
    }

    #[test]
    fn one_burst_of_losses_is_no_random_loss() {
        let mut p = CongestionPolicy::default();
        assert_eq!(look(&mut p, 100_000, 0), None);
        assert_eq!(look(&mut p, 101_000, 130), None, "260 segments in one look");
        for _ in 0..20 {
            assert_eq!(look(&mut p, 100_000, 130), None, "none lost since");
        }
    }

    #[test]
    fn losses_with_a_queue_are_congestion() {
        let mut p = CongestionPolicy::default();
        for (i, rtt) in [150_000, 190_000, 130_000, 160_000].into_iter().enumerate() {
            assert_eq!(look(&mut p, rtt, 10 * (i as u32 + 1)), None);
        }
    }
}
