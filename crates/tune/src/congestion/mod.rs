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
use crate::sample::TcpStats;
use crate::streams::Observation;
use std::collections::VecDeque;

/// Segments lost without a queue, over the recent looks, before the switch (a lone loss may
/// be a tail drop the queue had drained from by the time it was seen).
const LOSSES: u64 = 8;
/// Looks that saw them, at least, of the last [`RECENT`]: random loss goes on, while the
/// overflow that ends slow start is one event (three streams starting together on a 100
/// Mbit/s path lost 260 segments in one look, counted as they were resent after the queue
/// had drained).
const LOOKS: usize = 3;
/// The looks the evidence must lie within: random loss shows in most of them, while events
/// apart (a start-up's overflow, a link's outage and its end, a second later) are no pattern.
/// Counted over a whole transfer, such events switched 4 of 10 downloads through a 28 s
/// outage on a clean 20 ms path to bbr (`outage_wan.rs`).
const RECENT: usize = 6;
/// Segments the path must have delivered per segment lost for a look to count: random loss
/// leaves most of the data through (at 10 % loss nine of ten), while a link outage delivers
/// nothing and every timeout's resend counts as lost (a 28 s outage read as random loss
/// moved copies to the UDP channel), and the recovery after it resends what it acknowledges.
const DELIVERED_PER_LOST: u64 = 2;
/// The segment size assumed where the kernel gave none.
const SEGMENT: u64 = 1448;
/// The slow-start threshold of a stream that has not left slow start
/// (`TCP_INFINITE_SSTHRESH` segments), bytes at least.
const NO_SSTHRESH: u64 = 0x7fff_ffff;

/// What the policy decided: the control to run from now on, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CcChange {
    /// The congestion control from now on.
    pub cc: CongestionControl,
    /// Why, for the summary and telemetry.
    pub reason: String,
}

/// One stream as the previous look saw it.
#[derive(Debug, Clone, Copy)]
struct Seen {
    retrans: u64,
    acked: u64,
    /// Its slow-start threshold, bytes (0: unknown).
    ssthresh: u64,
    /// The threshold its slow start ended with, while it holds: the losses that ended slow
    /// start are an overflow of the queue the stream's own start-up filled, whatever the RTT
    /// shows once that queue drained, and so are their resends until a loss of its own sets
    /// another threshold.
    exit: Option<u64>,
}

impl Seen {
    /// A stream not seen yet: in slow start, nothing sent.
    const NEW: Seen = Seen {
        retrans: 0,
        acked: 0,
        ssthresh: NO_SSTHRESH,
        exit: None,
    };

    /// `s` seen now, after `self`: the stream's state and the segments it lost since, save
    /// those of its slow start's overflow.
    fn next(self, s: &TcpStats) -> (Seen, u64) {
        let ssthresh = s.ssthresh_bytes;
        let known = ssthresh > 0;
        let exit = if known && self.ssthresh >= NO_SSTHRESH && ssthresh < NO_SSTHRESH {
            Some(ssthresh)
        } else {
            self.exit.filter(|&e| e == ssthresh)
        };
        let retrans = u64::from(s.total_retrans);
        let lost = retrans.saturating_sub(self.retrans);
        let now = Seen {
            retrans,
            acked: s.bytes_acked,
            ssthresh,
            exit,
        };
        (now, if exit.is_some() { 0 } else { lost })
    }
}

/// The congestion-control policy of one sending transfer.
#[derive(Debug, Clone, Default)]
pub struct CongestionPolicy {
    /// Every stream at the previous look.
    last: Vec<Seen>,
    /// Segments lost without a queue in each of the last [`RECENT`] looks.
    recent: VecDeque<u64>,
    switched: bool,
}

impl CongestionPolicy {
    /// Takes a look at the streams; answers a change once random loss is established.
    pub fn observe(&mut self, o: &Observation<'_>) -> Option<CcChange> {
        if self.switched || o.streams.is_empty() {
            return None;
        }
        let (random, stretch) = self.random_losses(o);
        if self.recent.len() == RECENT {
            self.recent.pop_front();
        }
        self.recent.push_back(random);
        let looks = self.recent.iter().filter(|&&n| n > 0).count();
        let lost: u64 = self.recent.iter().sum();
        if random == 0 || lost < LOSSES || looks < LOOKS {
            return None;
        }
        self.switched = true;
        let cc = CongestionControl::FOR_RANDOM_LOSS;
        Some(CcChange {
            reason: format!(
                "{lost} segments lost in {looks} of the last {} looks with the RTT at its \
                 minimum ({:.0} % above it): random loss, not congestion; congestion control \
                 {cc} from now on",
                self.recent.len(),
                (stretch - 1.0) * 100.0
            ),
            cc,
        })
    }

    /// The segments lost since the last look that random loss explains (0 where a queue,
    /// an outage or a slow start's overflow does), and how far the RTT stood above its
    /// minimum.
    fn random_losses(&mut self, o: &Observation<'_>) -> (u64, f64) {
        let (mut lost, mut delivered) = (0, 0);
        let mut now = Vec::with_capacity(o.streams.len());
        for (i, s) in o.streams.iter().enumerate() {
            let before = self.last.get(i).copied().unwrap_or(Seen::NEW);
            let (seen, l) = before.next(s);
            let segment = match s.snd_mss {
                0 => SEGMENT,
                mss => u64::from(mss),
            };
            lost += l;
            delivered += s.bytes_acked.saturating_sub(before.acked) / segment;
            now.push(seen);
        }
        self.last = now;
        // Losses without deliveries beside them are an outage (or the resends after one), not
        // a lossy link.
        if lost == 0 || delivered < lost * DELIVERED_PER_LOST {
            return (0, 1.0);
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
        match stretch > path::QUEUE {
            true => (0, stretch),
            false => (lost, stretch),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sample::TcpStats;

    /// Segments each stream has acknowledged per look in these traces.
    const DELIVERED: u64 = 1_000;

    /// A policy fed looks in which every stream had `DELIVERED` segments acknowledged.
    #[derive(Default)]
    struct Trace {
        policy: CongestionPolicy,
        looks: u64,
    }

    impl Trace {
        fn look(&mut self, streams: &[TcpStats]) -> Option<CcChange> {
            self.looks += 1;
            let acked = self.looks * DELIVERED * SEGMENT;
            let streams: Vec<TcpStats> = streams
                .iter()
                .map(|s| TcpStats {
                    bytes_acked: acked,
                    ..*s
                })
                .collect();
            self.policy.observe(&Observation {
                streams: &streams,
                ..Observation::default()
            })
        }
    }

    /// A stream on a path of `min_rtt_us` at `rtt_us` that has retransmitted `retrans`.
    fn stream(min_rtt_us: u32, rtt_us: u32, retrans: u32) -> TcpStats {
        TcpStats {
            rtt_us,
            min_rtt_us,
            total_retrans: retrans,
            ..TcpStats::default()
        }
    }

    /// Two streams alike on a 100 ms path.
    fn two(rtt_us: u32, retrans: u32) -> [TcpStats; 2] {
        [stream(100_000, rtt_us, retrans); 2]
    }

    #[test]
    fn losses_at_the_minimum_rtt_switch_to_bbr_once() {
        let mut t = Trace::default();
        assert_eq!(t.look(&two(100_000, 0)), None);
        // Two streams, two segments each: 4 of the 8 needed.
        assert_eq!(t.look(&two(101_000, 2)), None);
        // 8, but seen in two looks: one burst may be the end of slow start.
        assert_eq!(t.look(&two(102_000, 4)), None);
        let c = t.look(&two(102_000, 5)).expect("a switch");
        assert_eq!(c.cc, CongestionControl::Bbr);
        assert!(c.reason.contains("10 segments lost"), "{}", c.reason);
        assert_eq!(t.look(&two(100_000, 40)), None, "only once");
    }

    #[test]
    fn one_stream_a_little_slower_than_the_others_is_not_a_queue() {
        let mut t = Trace::default();
        // 20 ms path: one stream 8 % above the minimum, its siblings at it.
        let mut look = |retrans| {
            t.look(&[
                stream(20_000, 21_600, retrans),
                stream(20_000, 20_300, retrans),
            ])
        };
        assert_eq!(look(0), None);
        assert_eq!(look(4), None);
        assert_eq!(look(8), None);
        assert!(
            look(12).is_some(),
            "24 segments lost without a queue in three looks"
        );
        // A stream just opened (no RTT yet) does not hide a queue the others show.
        let mut t = Trace::default();
        for retrans in [0, 4, 8] {
            let look = t.look(&[stream(20_000, 30_000, retrans), stream(20_000, 0, 0)]);
            assert_eq!(look, None);
        }
    }

    #[test]
    fn a_lone_stream_with_late_acknowledgements_still_sees_random_loss() {
        // A lone stream on a lossy 20 ms path, its smoothed RTT 11 % above the minimum with
        // samples that stray by 3 ms (delayed acknowledgements, a busy host): no queue.
        let lone = |rttvar_us, retrans| TcpStats {
            rttvar_us,
            ..stream(20_000, 22_200, retrans)
        };
        let mut t = Trace::default();
        for retrans in [0, 4, 8] {
            assert_eq!(t.look(&[lone(3_000, retrans)]), None);
        }
        assert!(
            t.look(&[lone(3_000, 12)]).is_some(),
            "12 lost in three looks"
        );
        // Samples close together: a queue, and losses beside it are congestion.
        let mut t = Trace::default();
        for retrans in [0, 5, 10, 20, 40] {
            assert_eq!(t.look(&[lone(300, retrans)]), None);
        }
    }

    #[test]
    fn one_burst_of_losses_is_no_random_loss() {
        let mut t = Trace::default();
        assert_eq!(t.look(&two(100_000, 0)), None);
        assert_eq!(t.look(&two(101_000, 130)), None, "260 segments in one look");
        for _ in 0..20 {
            assert_eq!(t.look(&two(100_000, 130)), None, "none lost since");
        }
    }

    #[test]
    fn losses_with_a_queue_are_congestion() {
        let mut t = Trace::default();
        for (i, rtt) in [150_000, 190_000, 130_000, 160_000].into_iter().enumerate() {
            assert_eq!(t.look(&two(rtt, 10 * (i as u32 + 1))), None);
        }
    }

    #[test]
    fn an_outage_is_no_random_loss() {
        // A 20 ms path goes dead: nothing is acknowledged, the RTT keeps its last value (at the
        // minimum), and each timeout resends a segment per stream, for 30 looks.
        let mut p = CongestionPolicy::default();
        let at = |retrans, acked_segments: u64| TcpStats {
            bytes_acked: acked_segments * 1448,
            snd_mss: 1448,
            ..stream(20_000, 20_100, retrans)
        };
        let mut look = |retrans, acked| {
            p.observe(&Observation {
                streams: &[at(retrans, acked), at(retrans, acked)],
                ..Observation::default()
            })
        };
        assert_eq!(look(0, 5_000), None);
        for i in 1..=30 {
            assert_eq!(look(i, 5_000), None, "{i} resends each, nothing delivered");
        }
        // The link is back: the window's worth lost in the outage is resent as it is
        // acknowledged, about one resend per segment delivered.
        for (i, delivered) in [(60, 5_030), (120, 5_090), (180, 5_150)] {
            assert_eq!(look(i, delivered), None, "resends of what the outage lost");
        }
        // Then random loss after all: 1 % of what goes through.
        let mut switched = None;
        for k in 1..=5 {
            switched = switched.or(look(180 + 10 * k, 5_150 + 1_000 * u64::from(k)));
        }
        assert!(
            switched.is_some(),
            "random loss after the outage is still seen"
        );
    }

    #[test]
    fn the_overflow_that_ends_slow_start_is_no_random_loss() {
        // Five streams start together on a 20 ms path; their slow start overflows the queue,
        // each leaves it (a finite threshold) and resends its losses over three looks while
        // the queue has drained.
        let at = |ssthresh_bytes, retrans| TcpStats {
            ssthresh_bytes,
            ca_state: 3,
            ..stream(20_000, 20_200, retrans)
        };
        let infinite = NO_SSTHRESH * SEGMENT;
        let mut t = Trace::default();
        assert_eq!(t.look(&[at(infinite, 0); 5]), None);
        for retrans in [6, 12, 15] {
            assert_eq!(t.look(&[at(70_000, retrans); 5]), None, "{retrans} each");
        }
        // Then losses of their own, each setting another threshold: random loss.
        let mut switched = None;
        for (k, ssthresh) in [60_000, 50_000, 45_000].into_iter().enumerate() {
            switched = switched.or(t.look(&[at(ssthresh, 17 + 2 * k as u32); 5]));
        }
        assert!(switched.is_some(), "losses after the overflow count");
    }

    #[test]
    fn losses_a_second_apart_are_no_pattern() {
        // A burst in two looks, a second of nothing, a third: each event apart, the last
        // RECENT looks never hold three with losses.
        let mut t = Trace::default();
        let mut retrans = 0;
        for lost in [0, 4, 4, 0, 0, 0, 0, 0, 0, 0, 0, 5, 0, 0, 0, 0, 0, 0, 3] {
            retrans += lost;
            assert_eq!(t.look(&two(100_000, retrans)), None, "at {retrans}");
        }
    }
}
