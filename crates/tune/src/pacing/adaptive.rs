//! Adaptive TCP pacing (Tanida, Inaba, Hiraki: *Adaptive auto-tuning of TCP pacing*), for any
//! congestion control, from `TCP_INFO` at RTT granularity.
//!
//! CWP, congestion-window pacing: the sender is paced at cwnd/RTT (twice that in slow start, so
//! that pacing does not slow its doubling), which spreads each window over the round trip. At
//! every loss (the connection entering CWR, Recovery or Loss, or retransmitting between two
//! samples that saw none of them; not again while the episode lasts) the CWP rate
//! just before it is recorded as `eab`, the estimated available bandwidth; two consecutive
//! `eab`s within 10 % of each other (judged at CWR or Recovery, not after a timeout) mean a
//! stable path.
//!
//! EABP, estimated-available-bandwidth pacing: once the CWP rate reaches 90 % of the last `eab`,
//! the sender is paced at `eab`, and, as the seed holds the window, at no more than the window
//! it began with per RTT, for `time_eabp` (1 s at first, doubled each time the path is judged
//! stable, back to 1 s when unstable; an EABP cut short by a loss does not reset it), which
//! holds the rate where the last loss came instead of growing the window into the next one.
//! Then CWP again until the next loss (state CWP_B); a loss always returns to CWP_A, from where
//! EABP may start again. From user space the congestion control's window keeps its own clock
//! meanwhile (cubic's growth is a function of the time since its last loss, so a window held by
//! pacing jumps once let go): in CWP_B the rate is at most 1/64 above the delivery rate.
//!
//! Before the first loss, adaptive pacing (not CWP alone) also watches the delay, as
//! `fatpipe_bic`'s slow start exit does: once the smoothed RTT lies an eighth of the least RTT
//! (4–16 ms) above it, the window has reached the bottleneck's queue, and the rate follows the
//! delivery rate (scaled down by the queue's delay) plus an eighth instead of doubling: a small
//! queue is kept and the first overflow comes slowly, if at all, until another flow's.
//! Paced at twice cwnd/RTT, a window reaches the queue smoothly, and the congestion control's
//! own exit (cubic's HyStart) sees the delay a round late, after one more doubling.

use super::{Pace, Paced, PacingLaw};
use crate::path::queue::queue_delay;
use crate::sample::Sample;
use std::time::Duration;

/// `tcpi_ca_state` values (linux/tcp.h).
const CA_CWR: u8 = 2;
const CA_LOSS: u8 = 4;
/// EABP starts when the CWP rate is this share of the last `eab` (`fatpipe_bic` runs the same
/// law in the kernel: these four are in its `bic_law.h` too).
pub const NEAR_EAB: f64 = 0.9;
/// Two `eab`s this close (relative) mean a stable path.
pub const STABLE: f64 = 0.1;
/// The first EABP period ...
pub const FIRST_EABP: Duration = Duration::from_secs(1);
/// ... and the longest one doubling reaches.
pub const LONGEST_EABP: Duration = Duration::from_secs(64);
/// A new rate is set only when it differs from the one set by this share (or the state
/// changed); below every growth step of the law (CWP_B's 1/64), or the step is never set.
const RESET: f64 = 1.0 / 128.0;
/// Once the queue is reached before the first loss, the rate is the delivery rate scaled by
/// least RTT / RTT (what the path carries without the queue: while a queue fills, the delivery
/// rate counts the share of it this flow took), and this share of it more: a probe that keeps a
/// small queue (an eighth of the least RTT) and grows an eighth per round trip while there is
/// none.
const QUEUED_GROWTH: f64 = 0.125;

/// After an EABP period, the pacing rate is at most the delivery rate and this share of it:
/// where the path has room it grows by that share per sample (about a round trip); where the
/// queue is full it stays that close to what the path delivers, instead of jumping into it.
const CWP_B_GROWTH: f64 = 1.0 / 64.0;

/// The law's states (the seed's BI_CWP_A, BI_CWP_B, BI_EABP).
#[derive(Debug, Clone, Copy, PartialEq)]
enum State {
    /// CWP; EABP may start.
    CwpA,
    /// CWP after an EABP period ran out: the window may grow past `eab` until the next loss,
    /// the pacing rate little faster than the path delivers.
    CwpB,
    /// Paced at `eab`, and at no more than `window` bytes per RTT (the window when it began,
    /// held as the seed holds it), until `until`.
    Eabp { until: Duration, window: f64 },
}

/// CWP alone, or CWP with EABP (`adaptive`).
#[derive(Debug, Clone)]
pub struct Adaptive {
    eabp: bool,
    state: State,
    eab: Option<f64>,
    time_eabp: Duration,
    /// The rate the window carried at the last sample, as far as it was paced so: the next
    /// loss's `eab`.
    last_carried: Option<f64>,
    last_ca: u8,
    last_retrans: u32,
    last_rtt: Option<Duration>,
    set: Option<u64>,
    /// Before the first loss, the RTT rose by the queue's threshold: the rate follows delivery.
    queued: bool,
}

impl Adaptive {
    /// CWP with EABP when `eabp`, CWP only otherwise.
    pub fn new(eabp: bool) -> Adaptive {
        Adaptive {
            eabp,
            state: State::CwpA,
            eab: None,
            time_eabp: FIRST_EABP,
            last_carried: None,
            last_ca: 0,
            last_retrans: 0,
            last_rtt: None,
            set: None,
            queued: false,
        }
    }

    /// A loss seen now with the connection in `ca_state`: records `eab`, judges stability.
    fn on_loss(&mut self, ca_state: u8, cwp: f64) -> String {
        let eab = self.last_carried.unwrap_or(cwp);
        let mut judged = String::new();
        if let (Some(prev), true) = (self.eab, ca_state != CA_LOSS) {
            let stable = (eab - prev).abs() <= STABLE * prev;
            self.time_eabp = if stable {
                (self.time_eabp * 2).min(LONGEST_EABP)
            } else {
                FIRST_EABP
            };
            judged = format!(
                ", path {} (last eab {:.0} Mbit/s)",
                if stable { "stable" } else { "unstable" },
                prev * 8e-6
            );
        }
        self.eab = Some(eab);
        self.state = State::CwpA;
        format!(
            "loss: eab {:.0} Mbit/s{judged}; next EABP {} s",
            eab * 8e-6,
            self.time_eabp.as_secs()
        )
    }
}

impl PacingLaw for Adaptive {
    fn setup(&self) -> Option<Pace> {
        // Until the first sample, TCP paces itself (cwnd/RTT is not known yet).
        Some(Pace::Tcp)
    }

    fn next(&self) -> Option<Duration> {
        self.last_rtt
            .map(|r| r.clamp(Duration::from_millis(10), Duration::from_millis(250)))
    }

    fn on_sample(&mut self, s: &Sample) -> Option<Paced> {
        let tcp = s.tcp?;
        if tcp.rtt_us == 0 || tcp.cwnd_bytes == 0 {
            return None;
        }
        let rtt = Duration::from_micros(tcp.rtt_us.into());
        self.last_rtt = Some(rtt);
        let cwp = tcp.cwnd_bytes as f64 / rtt.as_secs_f64();
        // A loss is an episode: entering CWR, Recovery or Loss, or retransmissions since a
        // sample that saw none of them (an episode between samples); those of an episode
        // already seen are not another loss.
        let open_before = self.last_ca < CA_CWR;
        let entered = tcp.ca_state >= CA_CWR && open_before;
        let lost = entered || (open_before && tcp.total_retrans > self.last_retrans);
        let before = self.state;
        let mut note = lost.then(|| self.on_loss(tcp.ca_state, cwp));
        match (self.state, self.eab) {
            (State::CwpA, Some(eab)) if self.eabp && !lost && cwp >= NEAR_EAB * eab => {
                self.state = State::Eabp {
                    until: s.now + self.time_eabp,
                    window: tcp.cwnd_bytes as f64,
                };
                note = Some(format!(
                    "EABP: CWP rate {:.0} Mbit/s near eab, paced at {:.0} Mbit/s and the \
                     window held for {} s",
                    cwp * 8e-6,
                    eab * 8e-6,
                    self.time_eabp.as_secs()
                ));
            }
            (State::Eabp { until, .. }, _) if s.now >= until => {
                self.state = State::CwpB;
                note = Some(
                    "EABP period over: CWP until the next loss, at most 1/64 above the \
                     delivery rate"
                        .into(),
                );
            }
            _ => {}
        }
        let delivered = tcp.delivery_rate as f64;
        let min_rtt = Duration::from_micros(tcp.min_rtt_us.into());
        let queue = !min_rtt.is_zero() && rtt >= min_rtt + queue_delay(min_rtt);
        if self.eabp && self.eab.is_none() && !self.queued && delivered > 0.0 && queue {
            self.queued = true;
            note = Some(format!(
                "queue reached: RTT {} ms above the least; paced at the delivery rate \
                 ({:.0} Mbit/s) × least RTT / RTT, an eighth more, until the first loss",
                (rtt - min_rtt).as_millis(),
                delivered * 8e-6
            ));
        }
        self.last_ca = tcp.ca_state;
        self.last_retrans = tcp.total_retrans;
        let slow_start = tcp.ssthresh_bytes == 0 || tcp.cwnd_bytes < tcp.ssthresh_bytes;
        let rate = match (self.state, self.eab) {
            (State::Eabp { window, .. }, Some(eab)) => eab.min(window / rtt.as_secs_f64()),
            (State::CwpB, _) if delivered > 0.0 => cwp.min(delivered * (1.0 + CWP_B_GROWTH)),
            (_, None) if self.queued && delivered > 0.0 => {
                delivered * min_rtt.as_secs_f64() / rtt.as_secs_f64() * (1.0 + QUEUED_GROWTH)
            }
            _ if slow_start => 2.0 * cwp,
            _ => cwp,
        };
        self.last_carried = Some(rate.min(cwp));
        let rate = rate.max(1.0) as u64;
        let changed = self
            .set
            .is_none_or(|r| (rate as f64 - r as f64).abs() > RESET * r as f64);
        if !changed && self.state == before && note.is_none() {
            return None;
        }
        self.set = Some(rate);
        Some(Paced {
            pace: Pace::Rate(rate),
            note,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sample::TcpStats;

    /// A sample at `ms` with cwnd `cwnd_kb` KB, srtt 100 ms, out of slow start, in `ca_state`,
    /// with `retrans` retransmissions so far.
    fn at(ms: u64, cwnd_kb: u64, ca_state: u8, retrans: u32) -> Sample {
        Sample {
            now: Duration::from_millis(ms),
            tcp: Some(TcpStats {
                rtt_us: 100_000,
                cwnd_bytes: cwnd_kb * 1000,
                ssthresh_bytes: 1000,
                ca_state,
                total_retrans: retrans,
                ..TcpStats::default()
            }),
            ..Sample::default()
        }
    }

    /// The rate the law set (bytes/s), if it set one.
    fn rate(p: Option<Paced>) -> Option<u64> {
        match p?.pace {
            Pace::Rate(r) => Some(r),
            Pace::Tcp => None,
        }
    }

    #[test]
    fn cwp_paces_at_the_window_per_rtt_and_twice_that_in_slow_start() {
        let mut law = Adaptive::new(false);
        assert_eq!(law.setup(), Some(Pace::Tcp));
        assert_eq!(rate(law.on_sample(&at(0, 1000, 0, 0))), Some(10_000_000));
        // Unchanged within 1/128: nothing to set.
        assert_eq!(law.on_sample(&at(100, 1005, 0, 0)), None);
        let mut s = at(200, 2000, 0, 0);
        if let Some(t) = s.tcp.as_mut() {
            t.ssthresh_bytes = u64::MAX / 2;
        }
        assert_eq!(rate(law.on_sample(&s)), Some(40_000_000));
        assert_eq!(law.next(), Some(Duration::from_millis(100)));
    }

    #[test]
    fn eabp_holds_the_rate_of_the_last_loss_and_the_window_then_grows_slowly() {
        let mut law = Adaptive::new(true);
        law.on_sample(&at(0, 1000, 0, 0));
        // A loss: eab is the CWP rate just before it (10 MB/s); the window halves.
        let p = law.on_sample(&at(100, 500, 3, 5)).expect("a change");
        assert!(p.note.is_some_and(|n| n.contains("eab 80 Mbit/s")));
        // Growing back: CWP until 90 % of eab, then EABP: at eab, and no more than the window
        // it began with (920 KB) per RTT, for 1 s.
        assert_eq!(rate(law.on_sample(&at(200, 700, 0, 5))), Some(7_000_000));
        let p = law.on_sample(&at(300, 920, 0, 5)).expect("EABP");
        assert_eq!(rate(Some(p.clone())), Some(9_200_000));
        assert!(p.note.is_some_and(|n| n.contains("for 1 s")));
        // The window grows on, the pacing holds until the period ends; a queue that drains
        // (80 ms) lets the held window go faster, up to eab.
        assert_eq!(law.on_sample(&at(800, 1100, 0, 5)), None);
        let mut s = at(900, 1100, 0, 5);
        if let Some(t) = s.tcp.as_mut() {
            t.rtt_us = 80_000;
        }
        assert_eq!(rate(law.on_sample(&s)), Some(10_000_000));
        // The period over: CWP_B, at most 1/64 above the delivery rate (9.6 MB/s).
        let delivering = |ms, cwnd_kb, rate| {
            let mut s = at(ms, cwnd_kb, 0, 5);
            if let Some(t) = s.tcp.as_mut() {
                t.delivery_rate = rate;
            }
            s
        };
        let p = law.on_sample(&delivering(1400, 1200, 9_600_000));
        assert_eq!(rate(p.clone()), Some(9_750_000));
        assert!(p
            .and_then(|p| p.note)
            .is_some_and(|n| n.contains("EABP period over")));
        // Delivered as paced: the rate still grows by the step (a threshold for setting a new
        // rate above the step held a paced flow where it was).
        let p = law.on_sample(&delivering(1450, 1200, 9_750_000));
        assert_eq!(rate(p), Some(9_902_343));
        // Where the path has room, the rate grows with what it delivers, up to the window's.
        let p = law.on_sample(&delivering(1500, 1300, 10_500_000));
        assert_eq!(rate(p), Some(10_664_062));
        let p = law.on_sample(&delivering(1600, 1300, 13_500_000));
        assert_eq!(rate(p), Some(13_000_000));
        // No new EABP from CWP_B without a loss.
        assert_eq!(law.state, State::CwpB);
        // The next loss records the rate the window carried (13 MB/s; 30 % from the last eab:
        // an unstable path), and the next EABP lasts 1 s.
        let p = law.on_sample(&at(1800, 650, 3, 9)).expect("loss");
        assert!(
            p.note
                .as_deref()
                .is_some_and(|n| n.contains("eab 104 Mbit/s")
                    && n.contains("unstable")
                    && n.contains("next EABP 1 s")),
            "{p:?}"
        );
        // Another loss at that rate: stable, the next EABP lasts 2 s.
        law.on_sample(&at(1900, 1300, 0, 9));
        let p = law.on_sample(&at(2000, 650, 3, 12)).expect("loss");
        assert!(
            p.note
                .as_deref()
                .is_some_and(|n| n.contains("path stable") && n.contains("next EABP 2 s")),
            "{p:?}"
        );
    }

    #[test]
    fn before_the_first_loss_a_queue_turns_doubling_into_delivery_and_an_eighth() {
        let mut law = Adaptive::new(true);
        // Slow start at the least RTT (100 ms): twice cwnd/RTT.
        let sample = |ms, cwnd_kb, rtt_ms: u32, retrans| {
            let mut s = at(ms, cwnd_kb, if retrans > 0 { 3 } else { 0 }, retrans);
            if let Some(t) = s.tcp.as_mut() {
                t.ssthresh_bytes = u64::MAX / 2;
                t.min_rtt_us = 100_000;
                t.rtt_us = rtt_ms * 1000;
                t.delivery_rate = 10_000_000;
            }
            s
        };
        assert_eq!(
            rate(law.on_sample(&sample(0, 1000, 100, 0))),
            Some(20_000_000)
        );
        // 12 ms above: below an eighth (12.5 ms), still doubling.
        assert_eq!(
            rate(law.on_sample(&sample(100, 2000, 112, 0))),
            Some(35_714_285)
        );
        // 13 ms above: the queue; the delivery rate (10 MB/s) scaled by 100/113 and an eighth
        // more, however large cwnd.
        let p = law.on_sample(&sample(200, 4000, 113, 0)).expect("queue");
        assert_eq!(rate(Some(p.clone())), Some(9_955_752));
        assert!(p.note.is_some_and(|n| n.contains("queue reached")));
        // The queue gone: an eighth above the delivery rate.
        assert_eq!(
            rate(law.on_sample(&sample(300, 8000, 100, 0))),
            Some(11_250_000)
        );
        // The first loss records the rate paced as eab; the law is the seed's from there:
        // the window above it, EABP at eab.
        let p = law.on_sample(&sample(400, 5000, 150, 4)).expect("loss");
        assert!(p.note.is_some_and(|n| n.contains("eab 90 Mbit/s")));
        let p = law.on_sample(&sample(500, 5000, 100, 4)).expect("EABP");
        assert_eq!(rate(Some(p)), Some(11_250_000));
        assert_eq!(
            law.state,
            State::Eabp {
                until: Duration::from_millis(1500),
                window: 5_000_000.0
            }
        );
    }

    #[test]
    fn a_loss_is_one_episode_however_long_it_retransmits() {
        let mut law = Adaptive::new(true);
        law.on_sample(&at(0, 1000, 0, 0));
        let p = law.on_sample(&at(100, 700, 3, 5)).expect("loss");
        assert!(p.note.is_some_and(|n| n.contains("eab 80 Mbit/s")));
        // Still in Recovery, retransmitting more: the same loss, eab and its period kept.
        let p = law.on_sample(&at(200, 650, 3, 9));
        assert!(p.as_ref().is_none_or(|p| p.note.is_none()), "{p:?}");
        assert_eq!((law.eab, law.time_eabp), (Some(10_000_000.0), FIRST_EABP));
        // Retransmissions between two samples in Open: an episode the samples missed.
        law.on_sample(&at(300, 700, 0, 9));
        let p = law.on_sample(&at(400, 720, 0, 12)).expect("loss");
        assert!(p.note.is_some_and(|n| n.contains("eab 56 Mbit/s")));
    }

    #[test]
    fn a_loss_cuts_eabp_short_without_resetting_its_length() {
        let mut law = Adaptive::new(true);
        law.on_sample(&at(0, 1000, 0, 0));
        law.on_sample(&at(100, 500, 3, 1));
        law.on_sample(&at(200, 1000, 0, 1));
        law.on_sample(&at(300, 500, 3, 2)); // stable: 2 s from now on
        let p = law.on_sample(&at(400, 950, 0, 2)).expect("EABP");
        assert!(p.note.is_some_and(|n| n.contains("for 2 s")));
        // A timeout (Loss state) during EABP: back to CWP, no judgement, length kept.
        let p = law.on_sample(&at(500, 100, 4, 3)).expect("loss");
        assert!(p
            .note
            .is_some_and(|n| !n.contains("stable") && n.contains("next EABP 2 s")));
        assert_eq!(law.state, State::CwpA);
    }
}
