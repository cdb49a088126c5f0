//! Which congestion control a transfer's senders run when the user did not choose one: the
//! system's (cubic, a loss-based control) until segments are lost while the RTT stays at the
//! path's minimum. Such loss is random (a lossy link), not congestion; a loss-based control
//! reads every one as congestion and collapses under it (1 % loss at 100 ms: about 1 Mbit/s
//! per stream), while a model-based one (bbr) holds the path's rate through it. Losses that
//! come with a queue (the RTT above the minimum, see `path::QUEUE`) are congestion and change
//! nothing: on a clean path the system's control stays.

pub mod control;

pub use control::{CongestionControl, PacedBy};

use crate::path;
use crate::sample::TcpStats;
use crate::streams::Observation;
use std::collections::VecDeque;
use std::time::Duration;

/// Segments lost without a queue, over the recent looks, before the switch (a lone loss may
/// be a tail drop the queue had drained from by the time it was seen).
const LOSSES: u64 = 8;
/// Looks that saw them, at least, of the last [`RECENT`]: random loss goes on, while the
/// overflow that ends slow start is one event (three streams starting together on a 100
/// Mbit/s path lost 260 segments in one look, counted as they were resent after the queue
/// had drained).
const LOOKS: usize = 3;
/// The looks the evidence must lie within, none of them with a queue: random loss shows in
/// most looks while the RTT stays at its minimum, while a full drop-tail queue's losses are
/// resent after it drained, between looks that see it full again, and events apart (a
/// start-up's overflow, a link's outage and its end) are no pattern. Counted over a whole
/// transfer, such losses switched 4 of 10 downloads through a 28 s outage on a clean 20 ms
/// path to bbr (`outage_wan.rs`).
const RECENT: usize = 6;
/// A slower pattern, over this many looks (5 s): a lone stream that random loss holds to a
/// few segments a round trip (1 % at 100 ms: 1.4 Mbit/s, a loss every 0.8 s or so) never
/// loses [`LOSSES`] within [`RECENT`] looks, yet loses again and again ...
const SPREAD: usize = 50;
/// ... in this many looks of them at least, none with a queue: more loss events than the
/// events apart that are no pattern (a start-up's overflow, an outage and its end).
const SPREAD_LOOKS: usize = 5;
/// Segments the path must have delivered per segment lost for a look to count: random loss
/// worth a switch leaves most of the data through (at 10 % loss nine of ten), while a link
/// outage delivers nothing and every timeout's resend counts as lost, the recovery after it
/// resends much of what it delivers (2.8 to 3.3 per loss seen), and so does a start-up's
/// overflow.
const DELIVERED_PER_LOST: u64 = 4;
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
    /// Its smoothed RTT over its minimum.
    stretch: f64,
    /// The threshold a slow start that had filled a queue ended with, while it holds: the
    /// losses that ended it are that queue's overflow, whatever the RTT shows once the queue
    /// drained, and so are their resends until a loss of the stream's own sets another
    /// threshold. (A slow start ended by random loss saw no queue: its losses count.)
    overflow: Option<u64>,
}

impl Seen {
    /// A stream not seen yet: in slow start, nothing sent.
    const NEW: Seen = Seen {
        retrans: 0,
        acked: 0,
        ssthresh: NO_SSTHRESH,
        stretch: 1.0,
        overflow: None,
    };

    /// `s` seen now, after `self`: the stream's state and the segments it lost since, save
    /// those of its slow start's overflow.
    fn next(self, s: &TcpStats) -> (Seen, u64) {
        let ssthresh = s.ssthresh_bytes;
        let us = |v: u32| Duration::from_micros(v.into());
        let stretch = path::stretch(us(s.rtt_us), us(s.min_rtt_us));
        let exited = ssthresh > 0 && self.ssthresh >= NO_SSTHRESH && ssthresh < NO_SSTHRESH;
        let overflow = if exited {
            (self.stretch.max(stretch) > path::queue::STARTUP_QUEUE).then_some(ssthresh)
        } else {
            self.overflow.filter(|&e| e == ssthresh)
        };
        let retrans = u64::from(s.total_retrans);
        let lost = retrans.saturating_sub(self.retrans);
        let now = Seen {
            retrans,
            acked: s.bytes_acked,
            ssthresh,
            stretch,
            overflow,
        };
        (now, if overflow.is_some() { 0 } else { lost })
    }
}

/// What one look shows.
enum Look {
    /// Losses without a queue, and how far the RTT stood above its minimum.
    Random(u64, f64),
    /// A queue: losses beside it, now or in the recent looks, are congestion.
    Queue,
    /// No evidence either way: no losses, those of an outage or an overflow.
    Nothing,
}

/// The congestion-control policy of one sending transfer.
#[derive(Debug, Clone, Default)]
pub struct CongestionPolicy {
    /// Every stream at the previous look.
    last: Vec<Seen>,
    /// Segments lost without a queue in each of the last [`SPREAD`] looks since one with a
    /// queue, the newest last.
    recent: VecDeque<u64>,
    switched: bool,
}

impl CongestionPolicy {
    /// Takes a look at the streams; answers a change once random loss is established.
    pub fn observe(&mut self, o: &Observation<'_>) -> Option<CcChange> {
        if self.switched || o.streams.is_empty() {
            return None;
        }
        let (random, stretch) = match self.look(o) {
            Look::Queue => {
                self.recent.clear();
                return None;
            }
            Look::Nothing => (0, 1.0),
            Look::Random(lost, stretch) => (lost, stretch),
        };
        if self.recent.len() == SPREAD {
            self.recent.pop_front();
        }
        self.recent.push_back(random);
        // Losses in most of the last few looks, or again and again over the last seconds.
        let window = |n: usize| {
            let last = self.recent.iter().rev().take(n);
            let (looks, lost) = last.fold((0, 0), |(k, l), &x| (k + usize::from(x > 0), l + x));
            (looks, lost, n.min(self.recent.len()))
        };
        let (fast, slow) = (window(RECENT), window(SPREAD));
        let (looks, lost, over) = match (fast, slow) {
            _ if random == 0 => return None,
            ((looks, lost, _), _) if lost >= LOSSES && looks >= LOOKS => fast,
            (_, (looks, _, _)) if looks >= SPREAD_LOOKS => slow,
            _ => return None,
        };
        self.switched = true;
        let cc = CongestionControl::FOR_RANDOM_LOSS;
        Some(CcChange {
            reason: format!(
                "{lost} segments lost in {looks} of the last {over} looks with the RTT at its \
                 minimum ({:.0} % above it): random loss, not congestion; congestion control \
                 {cc} from now on",
                (stretch - 1.0) * 100.0
            ),
            cc,
        })
    }

    /// What the streams show since the last look.
    fn look(&mut self, o: &Observation<'_>) -> Look {
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
        // A queue that stood before the streams opened is in their own minimum too: the
        // control connection saw the path without it (four copies at once on a 20 ms path,
        // the uploads' data filling the way the downloads' acknowledgements came back: every
        // download stream's minimum twice the path's RTT, its overflow losses "at the
        // minimum").
        let hidden = o.control_rtt.map_or(1.0, |c| path::stretch_over(judged, c));
        if stretch > path::QUEUE || hidden > path::queue::HIDDEN_QUEUE {
            return Look::Queue;
        }
        // Losses without deliveries beside them are an outage (or the resends after one), not
        // a lossy link.
        if lost == 0 || delivered < lost * DELIVERED_PER_LOST {
            return Look::Nothing;
        }
        Look::Random(lost, stretch)
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
        /// The control connection's lowest RTT, if known.
        control_rtt: Option<Duration>,
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
                control_rtt: self.control_rtt,
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
    fn a_queue_that_stood_before_the_streams_opened_is_still_a_queue() {
        // Four copies at once on a 20 ms path (outage_wan.rs): the uploads' data fill the
        // queue the downloads' acknowledgements come back through, so a download's streams
        // never saw the path's RTT: their minimum is 39 ms, their RTT at it, and they lose
        // segments to their own direction's overflow in look after look.
        let at = |retrans| stream(39_000, 39_800, retrans);
        let trace = |control_rtt| {
            let mut t = Trace {
                control_rtt,
                ..Trace::default()
            };
            [0, 3, 6, 9, 12, 15].map(|retrans| t.look(&[at(retrans), at(retrans)]))
        };
        assert!(
            trace(None).iter().any(Option::is_some),
            "the streams alone take it for random loss"
        );
        // The control connection crossed the path before the queue stood: 20 ms.
        let seen = trace(Some(Duration::from_millis(20)));
        assert!(seen.iter().all(Option::is_none), "{seen:?}");
        // Where the control connection saw what the streams see, random loss still shows
        // (its small segments cross a slow link a little sooner).
        let seen = trace(Some(Duration::from_micros(35_000)));
        assert!(seen.iter().any(Option::is_some), "{seen:?}");
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
        // The link is back after timeouts' backoff: the estimates are scattered (RTT 150 times
        // the minimum, deviation twice that), resends beside deliveries; no reading of a
        // path at its minimum.
        let scattered = |retrans, acked_segments: u64| TcpStats {
            rttvar_us: 6_000_000,
            ..at(retrans, acked_segments)
        };
        for (i, delivered) in [(184, 5_400), (188, 5_600), (192, 5_800)] {
            let streams = [TcpStats {
                rtt_us: 3_000_000,
                ..scattered(i, delivered)
            }; 2];
            let look = p.observe(&Observation {
                streams: &streams,
                ..Observation::default()
            });
            assert_eq!(look, None, "scattered estimates after the outage");
        }
        let mut look = |retrans, acked| {
            p.observe(&Observation {
                streams: &[at(retrans, acked), at(retrans, acked)],
                ..Observation::default()
            })
        };
        // Then random loss after all: 1 % of what goes through.
        let mut switched = None;
        for k in 1..=5 {
            switched = switched.or(look(192 + 10 * k, 5_800 + 1_000 * u64::from(k)));
        }
        assert!(
            switched.is_some(),
            "random loss after the outage is still seen"
        );
    }

    #[test]
    fn the_overflow_that_ends_slow_start_is_no_random_loss() {
        // Five streams start together on a 20 ms path; their slow start fills the queue (RTT
        // doubled), overflows it, and each leaves slow start (a finite threshold) and resends
        // its losses over three looks once the queue has drained.
        let at = |rtt_us, ssthresh_bytes, retrans| TcpStats {
            ssthresh_bytes,
            ca_state: 3,
            ..stream(20_000, rtt_us, retrans)
        };
        let infinite = NO_SSTHRESH * SEGMENT;
        let mut t = Trace::default();
        assert_eq!(t.look(&[at(38_000, infinite, 0); 5]), None);
        for retrans in [6, 12, 15] {
            let look = t.look(&[at(20_200, 70_000, retrans); 5]);
            assert_eq!(look, None, "{retrans} each");
        }
        // Then losses of their own, each setting another threshold: random loss.
        let mut switched = None;
        for (k, ssthresh) in [60_000, 50_000, 45_000].into_iter().enumerate() {
            switched = switched.or(t.look(&[at(20_200, ssthresh, 17 + 2 * k as u32); 5]));
        }
        assert!(switched.is_some(), "losses after the overflow count");
        // A slow start that random loss ended saw no queue: its losses count at once.
        let mut t = Trace::default();
        assert_eq!(t.look(&[at(20_100, infinite, 0); 5]), None);
        let mut switched = None;
        for retrans in [2, 4, 6] {
            switched = switched.or(t.look(&[at(20_100, 70_000, retrans); 5]));
        }
        assert!(
            switched.is_some(),
            "10 segments in three looks, no queue ever"
        );
    }

    #[test]
    fn a_queue_between_losses_makes_them_congestion() {
        // Losses resent after a full queue drained, between looks that see it full again.
        let mut t = Trace::default();
        let mut retrans = 0;
        for (rtt, lost) in [(100_000, 4), (100_000, 4), (190_000, 0), (100_000, 4)] {
            retrans += lost;
            assert_eq!(t.look(&two(rtt, retrans)), None, "at {retrans}");
        }
    }

    #[test]
    fn a_lone_slow_stream_losing_again_and_again_sees_random_loss() {
        // One stream at 1 % loss on a 100 ms path, held to a few segments a round trip: a
        // loss every eighth look, never eight within six looks.
        let mut t = Trace::default();
        let mut retrans = 0;
        for look in 0..40 {
            retrans += u32::from(look % 8 == 1);
            let said = t.look(&[stream(100_000, 100_500, retrans)]);
            match look {
                33 => {
                    let c = said.expect("the fifth loss event in 5 s");
                    assert!(
                        c.reason.contains("in 5 of the last 34 looks"),
                        "{}",
                        c.reason
                    );
                }
                _ => assert_eq!(said, None, "look {look}: {retrans} lost"),
            }
        }
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
