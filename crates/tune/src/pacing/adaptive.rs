//! Adaptive TCP pacing (Tanida, Inaba, Hiraki: *Adaptive auto-tuning of TCP pacing*), for any
//! congestion control, from `TCP_INFO` at RTT granularity.
//!
//! CWP, congestion-window pacing: the sender is paced at cwnd/RTT (twice that in slow start, so
//! that pacing does not slow its doubling), which spreads each window over the round trip. At
//! every loss (the connection entering CWR, Recovery or Loss, or retransmitting) the CWP rate
//! just before it is recorded as `eab`, the estimated available bandwidth; two consecutive
//! `eab`s within 10 % of each other (judged at CWR or Recovery, not after a timeout) mean a
//! stable path.
//!
//! EABP, estimated-available-bandwidth pacing: once the CWP rate reaches 90 % of the last `eab`,
//! the sender is paced at `eab` for `time_eabp` (1 s at first, doubled each time the path is
//! judged stable, back to 1 s when unstable; an EABP cut short by a loss does not reset it),
//! which holds the rate where the last loss came instead of growing the window into the next
//! one. Then CWP again until the next loss (state CWP_B); a loss always returns to CWP_A, from
//! where EABP may start again.

use super::{Pace, Paced, PacingLaw};
use crate::sample::Sample;
use std::time::Duration;

/// `tcpi_ca_state` values (linux/tcp.h).
const CA_CWR: u8 = 2;
const CA_LOSS: u8 = 4;
/// EABP starts when the CWP rate is this share of the last `eab`.
const NEAR_EAB: f64 = 0.9;
/// Two `eab`s this close (relative) mean a stable path.
const STABLE: f64 = 0.1;
/// The first EABP period, and the longest one doubling reaches.
const FIRST_EABP: Duration = Duration::from_secs(1);
const LONGEST_EABP: Duration = Duration::from_secs(64);
/// A new rate is set only when it differs from the one set by this share (or the state changed).
const RESET: f64 = 0.02;

/// The law's states (the seed's BI_CWP_A, BI_CWP_B, BI_EABP).
#[derive(Debug, Clone, Copy, PartialEq)]
enum State {
    /// CWP; EABP may start.
    CwpA,
    /// CWP after an EABP period ran out: the window may grow past `eab` until the next loss.
    CwpB,
    /// Paced at `eab` until `until`.
    Eabp { until: Duration },
}

/// CWP alone, or CWP with EABP (`adaptive`).
#[derive(Debug, Clone)]
pub struct Adaptive {
    eabp: bool,
    state: State,
    eab: Option<f64>,
    time_eabp: Duration,
    last_cwp: Option<f64>,
    last_ca: u8,
    last_retrans: u32,
    last_rtt: Option<Duration>,
    set: Option<u64>,
}

impl Adaptive {
    /// CWP with EABP when `eabp`, CWP only otherwise.
    pub fn new(eabp: bool) -> Adaptive {
        Adaptive {
            eabp,
            state: State::CwpA,
            eab: None,
            time_eabp: FIRST_EABP,
            last_cwp: None,
            last_ca: 0,
            last_retrans: 0,
            last_rtt: None,
            set: None,
        }
    }

    /// A loss seen now with the connection in `ca_state`: records `eab`, judges stability.
    fn on_loss(&mut self, ca_state: u8, cwp: f64) -> String {
        let eab = self.last_cwp.unwrap_or(cwp);
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
        let entered = tcp.ca_state >= CA_CWR && self.last_ca < CA_CWR;
        let lost = entered || tcp.total_retrans > self.last_retrans;
        let before = self.state;
        let mut note = lost.then(|| self.on_loss(tcp.ca_state, cwp));
        match (self.state, self.eab) {
            (State::CwpA, Some(eab)) if self.eabp && !lost && cwp >= NEAR_EAB * eab => {
                self.state = State::Eabp {
                    until: s.now + self.time_eabp,
                };
                note = Some(format!(
                    "EABP: CWP rate {:.0} Mbit/s near eab, paced at {:.0} Mbit/s for {} s",
                    cwp * 8e-6,
                    eab * 8e-6,
                    self.time_eabp.as_secs()
                ));
            }
            (State::Eabp { until }, _) if s.now >= until => {
                self.state = State::CwpB;
                note = Some("EABP period over: CWP until the next loss".into());
            }
            _ => {}
        }
        self.last_cwp = Some(cwp);
        self.last_ca = tcp.ca_state;
        self.last_retrans = tcp.total_retrans;
        let slow_start = tcp.ssthresh_bytes == 0 || tcp.cwnd_bytes < tcp.ssthresh_bytes;
        let rate = match (self.state, self.eab) {
            (State::Eabp { .. }, Some(eab)) => eab,
            _ if slow_start => 2.0 * cwp,
            _ => cwp,
        };
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
        // Unchanged within 2 %: nothing to set.
        assert_eq!(law.on_sample(&at(100, 1010, 0, 0)), None);
        let mut s = at(200, 2000, 0, 0);
        if let Some(t) = s.tcp.as_mut() {
            t.ssthresh_bytes = u64::MAX / 2;
        }
        assert_eq!(rate(law.on_sample(&s)), Some(40_000_000));
        assert_eq!(law.next(), Some(Duration::from_millis(100)));
    }

    #[test]
    fn eabp_holds_the_rate_of_the_last_loss_and_lengthens_on_a_stable_path() {
        let mut law = Adaptive::new(true);
        law.on_sample(&at(0, 1000, 0, 0));
        // A loss: eab is the CWP rate just before it (10 MB/s); the window halves.
        let p = law.on_sample(&at(100, 500, 3, 5)).expect("a change");
        assert!(p.note.is_some_and(|n| n.contains("eab 80 Mbit/s")));
        // Growing back: CWP until 90 % of eab, then EABP at eab for 1 s.
        assert_eq!(rate(law.on_sample(&at(200, 700, 0, 5))), Some(7_000_000));
        let p = law.on_sample(&at(300, 920, 0, 5)).expect("EABP");
        assert_eq!(rate(Some(p.clone())), Some(10_000_000));
        assert!(p.note.is_some_and(|n| n.contains("for 1 s")));
        // The window grows on, the pacing stays at eab until the period ends.
        assert_eq!(law.on_sample(&at(800, 1100, 0, 5)), None);
        let p = law.on_sample(&at(1400, 1200, 0, 5)).expect("EABP over");
        assert_eq!(rate(Some(p)), Some(12_000_000));
        // CWP_B: no new EABP without a loss.
        assert_eq!(rate(law.on_sample(&at(1500, 1300, 0, 5))), Some(13_000_000));
        // A loss near the last eab (13 vs 10 MB/s: 30 % apart): unstable, 1 s.
        let p = law.on_sample(&at(1600, 650, 3, 9)).expect("loss");
        assert!(p.note.is_some_and(|n| n.contains("unstable")));
        // Another at the same rate: stable, the next EABP lasts 2 s.
        law.on_sample(&at(1700, 1300, 0, 9));
        let p = law.on_sample(&at(1800, 650, 3, 12)).expect("loss");
        assert!(
            p.note
                .as_deref()
                .is_some_and(|n| n.contains("path stable") && n.contains("next EABP 2 s")),
            "{p:?}"
        );
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
