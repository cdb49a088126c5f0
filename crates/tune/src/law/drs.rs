//! DRS fed by `TCP_INFO`, evaluated once per RTT at each end.
//!
//! Receiver: the bytes that arrived during the last RTT are what was in flight. If that fills
//! most of the window and the RTT is at its base, the window is the bottleneck: it grows
//! fourfold per look during start-up (a change shows only an RTT later, so this keeps pace with
//! slow start). The first RTT stretched by 8 % ends start-up and the window falls back at once
//! (undoing the last step's overshoot) to 1.25 × the larger of the BDP estimate and a quarter
//! of the window (which showed no queue a step ago). Later, once
//! the previous change has shown its effect, a full window grows by a quarter. Such a growth is
//! a trial: if the rate has not risen by 3 % three RTTs later, the path was the limit, the
//! window goes back to its size before the trial (or 1.25 × the BDP the trial revealed, if
//! larger) and no new trial starts for two seconds. When the path is
//! the limit the window settles at 1.25 × BDP (highest rate of the last second × lowest RTT of
//! the last ten), a quarter of a BDP for bursts instead of the seeds' 2 ×. It shrinks when the
//! BDP has fallen below half the window and the window has gone underused for a while (a
//! sender that met loss no longer fills it). The clamp goes down first and the buffer never below the
//! window already advertised, so data the peer may send is never refused.
//!
//! Sender: the send buffer holds what may be in flight (the smaller of the congestion window
//! and the peer's window) with room for half as much again unsent; while the congestion window
//! grows, twice the congestion window (the next RTT's, in slow start) up to the peer's window;
//! when the buffer has limited sending, at least twice its size; never more than the peer's
//! window.

use super::window::History;
use super::{rate, Decision, Law, Setup};
use crate::mode::{Params, STOCK_BUFFER};
use crate::path::{lowest_rtt, queued, PathEstimate};
use crate::sample::{Role, Sample, TcpStats};
use std::time::Duration;

/// Window in flight per unit of BDP once the path is the limit.
const STEADY_GAIN: f64 = 1.25;
/// Growth per RTT during start-up while the window is the limit (slow start's pace).
const GROWTH_GAIN: f64 = 4.0;
/// Growth per trial after start-up (the path may already be full).
const GENTLE_GAIN: f64 = 1.25;
/// "Most of the window" for the receiver's window-limited test.
const FULL: f64 = 0.7;
/// During start-up a smaller stretch already ends the doubling (each RTT of delay doubles the
/// overshoot).
const STARTUP_QUEUE: f64 = 1.08;
/// A shrink waits until the estimate has stayed low this long (and at least 4 RTTs).
const SHRINK_HOLD: Duration = Duration::from_secs(1);
/// RTTs after a growth by which the rate must have risen.
const TRIAL_RTTS: u32 = 3;
/// Rise in rate that makes a growth worth it.
const PAYS: f64 = 1.03;
/// Pause after a futile growth before the next trial.
const QUIET: Duration = Duration::from_secs(2);

/// A growth on probation: when, from which size, at which rate.
#[derive(Debug, Clone, Copy)]
struct Trial {
    at: Duration,
    from: u64,
    rate: f64,
}

/// The `drs` law for one end.
#[derive(Debug, Clone)]
pub struct Drs {
    role: Role,
    history: History,
    path: PathEstimate,
    size: Option<u64>,
    low_since: Option<Duration>,
    last: Option<TcpStats>,
    trial: Option<Trial>,
    quiet_until: Duration,
    changed_at: Duration,
    previous: Option<u64>,
    starting: bool,
    /// Seeded from a sibling connection: no shrinking (not even at the end of start-up) before
    /// this connection has once filled its window (slow start leaves a seeded window unused for
    /// a while).
    seeded: bool,
}

impl Drs {
    /// A law for `role`; `drs` has no parameters of its own.
    pub fn new(role: Role, _: &Params) -> Drs {
        Drs {
            role,
            history: History::default(),
            path: PathEstimate::default(),
            size: None,
            low_since: None,
            last: None,
            trial: None,
            quiet_until: Duration::ZERO,
            changed_at: Duration::ZERO,
            previous: None,
            starting: true,
            seeded: false,
        }
    }

    /// Grows at once to `target`; shrinks to it only after the estimate has stayed below half
    /// the current size for the hold time, and only while `may_shrink`.
    fn steer(
        &mut self,
        now: Duration,
        rtt: Duration,
        target: u64,
        may_shrink: bool,
    ) -> Option<u64> {
        let target = target.max(STOCK_BUFFER);
        let current = self.size.unwrap_or(0);
        if target > current {
            self.low_since = None;
            self.size = Some(target);
            return Some(target);
        }
        if 2 * target >= current || !may_shrink {
            self.low_since = None;
            return None;
        }
        let since = *self.low_since.get_or_insert(now);
        if now.saturating_sub(since) < SHRINK_HOLD.max(4 * rtt) {
            return None;
        }
        self.low_since = None;
        self.size = Some(target);
        Some(target)
    }

    fn receiver(&mut self, s: &Sample, tcp: &TcpStats, base: Duration, d: &mut Decision) {
        let rtt = match tcp.rcv_rtt_us {
            0 => base,
            us => Duration::from_micros(us.into()).max(base),
        };
        let Some((bytes, dt)) = self.history.since(rtt) else {
            return;
        };
        let now_rate = rate(bytes, dt);
        let peak = self.path.observe_rate(s.now, now_rate);
        let bdp = peak * base.as_secs_f64();
        d.bdp = Some(bdp as u64);
        let in_flight = now_rate * rtt.as_secs_f64();
        let window = self
            .size
            .map(|n| n as f64)
            .unwrap_or(f64::from(tcp.rcv_wnd.max(tcp.rcv_ssthresh)));
        // A stretched RTT means a queue or a longer path; grow gently then, and let the trial tell.
        let queue = queued(rtt, base);
        // What arrived during the last RTT was sent under the window of one RTT ago.
        let in_effect =
            if s.now.saturating_sub(self.changed_at).as_secs_f64() < 1.5 * rtt.as_secs_f64() {
                self.previous.map_or(window, |p| p as f64)
            } else {
                window
            };
        let limited = in_flight >= FULL * in_effect;
        if limited {
            self.seeded = false;
        }
        if let Some(t) = self
            .trial
            .filter(|t| s.now.saturating_sub(t.at) >= TRIAL_RTTS * rtt)
        {
            self.trial = None;
            if now_rate < PAYS * t.rate {
                // Back to where the trial started, or to 1.25 x the BDP it revealed if larger.
                let current = self.size.unwrap_or(t.from);
                let back = t.from.max((STEADY_GAIN * bdp) as u64).min(current);
                self.quiet_until = s.now + QUIET;
                self.low_since = None;
                self.size = Some(back);
                self.changed_at = s.now;
                let note = format!("growth did not raise the rate: back to {back} bytes");
                Self::set_window(d, back, tcp, note);
                return;
            }
        }
        // The first stretched RTT ends the start-up: the growth overshot by up to one RTT's
        // growth, so the window falls back to 1.25 x BDP at once.
        let startup_over = rtt.as_secs_f64() > STARTUP_QUEUE * base.as_secs_f64();
        if self.starting && startup_over && self.size.is_some() {
            self.starting = false;
            // A quarter of the window showed no queue a step ago: the BDP is at least about that.
            let size = (STEADY_GAIN * bdp).max(STEADY_GAIN * window / GROWTH_GAIN) as u64;
            // A seeded window not yet filled is no overshoot of this connection's: kept.
            let kept = if self.seeded { self.size } else { None };
            let size = size.max(STOCK_BUFFER).max(kept.unwrap_or(0));
            self.previous = self.size;
            self.size = Some(size);
            self.changed_at = s.now;
            self.low_since = None;
            let note = format!("start-up over: queue seen, settle at {STEADY_GAIN} x BDP");
            Self::set_window(d, size, tcp, note);
            return;
        }
        // At the base RTT a full window is the bottleneck for sure: grow it fourfold, every RTT during
        // start-up (keeping pace with slow start), then once each change has shown its effect.
        // With a stretched RTT, try a quarter more.
        let settled = s.now.saturating_sub(self.changed_at) >= 2 * rtt;
        let gain = match (limited, queue) {
            (true, false) if self.starting => Some(GROWTH_GAIN),
            (true, _) if self.trial.is_none() && settled && s.now >= self.quiet_until => {
                Some(GENTLE_GAIN)
            }
            _ => None,
        };
        let target = match (gain, self.size) {
            (Some(g), _) => (g * window).max(STEADY_GAIN * bdp),
            // The first sample takes the window over from the kernel's autotuning, at its size.
            (None, None) => window,
            (None, Some(_)) => (STEADY_GAIN * bdp).min(window),
        };
        let before = self.size;
        let Some(size) = self.steer(s.now, base, target as u64, !limited && !self.seeded) else {
            // A buffer raised to hold a larger advertised window is released once it has closed.
            let hold = self.size.unwrap_or(0).max(u64::from(tcp.rcv_wnd));
            if s.rcvbuf > 2 * hold + hold / 4 {
                d.set.rcvbuf = Some(hold);
                d.clamp = self.size;
            }
            return;
        };
        self.changed_at = s.now;
        self.previous = before;
        let note = if before.is_none() {
            format!("take the window over from the kernel at {size} bytes")
        } else if (size as f64) < window {
            format!("shrink: BDP fell to {} bytes", bdp as u64)
        } else if !self.starting {
            self.trial = Some(Trial {
                at: s.now,
                from: before.unwrap_or(window as u64),
                rate: now_rate,
            });
            format!(
                "try: window-limited, {} bytes in flight per RTT",
                in_flight as u64
            )
        } else {
            format!(
                "grow: window-limited, {} bytes in flight per RTT",
                in_flight as u64
            )
        };
        Self::set_window(d, size, tcp, note);
    }

    /// Sets the window clamp and a buffer that holds it, never below the advertised window.
    fn set_window(d: &mut Decision, size: u64, tcp: &TcpStats, note: String) {
        d.set.rcvbuf = Some(size.max(u64::from(tcp.rcv_wnd)));
        d.clamp = Some(size);
        d.announce = Some(size);
        d.note = Some(note);
    }

    fn sender(&mut self, s: &Sample, tcp: &TcpStats, base: Duration, d: &mut Decision) {
        let last = self.last.unwrap_or_default();
        let buffer_bound = tcp.sndbuf_limited_us > last.sndbuf_limited_us;
        let growing = tcp.cwnd_bytes * 10 > last.cwnd_bytes * 11 || buffer_bound;
        // While the congestion window grows (slow start doubles it every RTT) the buffer must
        // already hold the next RTT's window, up to what the peer's window allows; once it is
        // steady, what may be in flight. Linux doubles the size set, which leaves room for half
        // (steady) or all of that again unsent.
        let cwnd = if growing {
            2 * tcp.cwnd_bytes
        } else {
            tcp.cwnd_bytes * 3 / 4
        };
        let cap = match tcp.snd_wnd {
            0 => cwnd,
            w => cwnd.min(u64::from(w)),
        };
        let mut target = cap;
        if buffer_bound {
            target = target.max(s.sndbuf);
        }
        // Never more than the peer's window can take in flight (Linux doubles it for the rest).
        if tcp.snd_wnd > 0 {
            target = target.min(u64::from(tcp.snd_wnd));
        }
        d.bdp = Some((tcp.delivery_rate as f64 * base.as_secs_f64()) as u64);
        if let Some(size) = self.steer(s.now, base, target, !buffer_bound) {
            d.set.sndbuf = Some(size);
            d.announce = Some(size);
            d.note = Some(format!(
                "send buffer for {cap} bytes in flight{}",
                if buffer_bound {
                    ", was buffer-limited"
                } else {
                    ""
                }
            ));
        }
    }
}

impl Law for Drs {
    fn setup(&self) -> Setup {
        Setup::default()
    }

    /// A receiver starts at its siblings' window and stays in start-up (a sibling seen early
    /// may still be far from its own limit); a sender's buffer follows its congestion window
    /// and needs no seed.
    fn seed(&mut self, bytes: u64) -> bool {
        if self.role != Role::Receiver {
            return false;
        }
        self.size = Some(bytes.max(STOCK_BUFFER));
        self.seeded = true;
        true
    }

    fn on_sample(&mut self, s: &Sample) -> Decision {
        let mut d = Decision {
            next: Duration::from_millis(10),
            ..Decision::default()
        };
        self.history.push(s.now, s.bytes);
        let Some(tcp) = s.tcp else {
            return d;
        };
        let Some(base) = lowest_rtt(s).map(|r| self.path.observe_rtt(s.now, r)) else {
            return d;
        };
        d.next = base.clamp(Duration::from_millis(10), Duration::from_millis(250));
        match self.role {
            Role::Receiver => self.receiver(s, &tcp, base, &mut d),
            Role::Sender => self.sender(s, &tcp, base, &mut d),
        }
        self.last = Some(tcp);
        d
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::FluidPath;

    fn receiver() -> Drs {
        Drs::new(Role::Receiver, &Params::default())
    }

    #[test]
    fn receiver_grows_through_slow_start_and_settles_near_the_bdp() {
        // 1 Gbit/s, 100 ms: BDP 12.5 MB. Start from the kernel's 64 KiB.
        let mut path = FluidPath::new(125e6, 0.1);
        let mut law = receiver();
        let chosen = path.run(&mut law, 10.0);
        let reached = chosen.iter().find(|&&(_, w)| w >= 12.5e6).map(|&(t, _)| t);
        assert!(reached.is_some_and(|t| t < 1.2), "too slow: {chosen:?}");
        // It settles between 1.0 and 1.6 BDP; later trials never go past 2 BDP (the queue's end).
        assert!(
            (12.5e6..=1.6 * 12.5e6).contains(&path.window),
            "{} bytes; {chosen:?}",
            path.window
        );
        assert!(chosen.iter().all(|c| c.1 <= 2.0 * 12.5e6), "{chosen:?}");
        // Steady throughput is the path's.
        let before = path.bytes;
        path.run(&mut law, 12.0);
        assert!((path.bytes - before) / 2.0 > 0.99 * 125e6);
    }

    #[test]
    fn receiver_shrinks_after_the_rate_falls_but_not_at_once() {
        let mut path = FluidPath::new(62.5e6, 0.04);
        let mut law = receiver();
        path.run(&mut law, 5.0);
        let high = path.window;
        assert!(high >= 2.5e6, "{high}");
        // 500 -> 50 Mbit/s: the BDP falls tenfold; the window waits, then shrinks.
        path.rate = 6.25e6;
        let early = path.run(&mut law, 5.5);
        assert!(
            early.iter().all(|c| c.1 >= 2.5e6),
            "shrank within 0.5 s: {early:?}"
        );
        path.run(&mut law, 10.0);
        assert!(path.window <= 0.4e6, "did not shrink: {}", path.window);
        assert!(
            path.window >= 0.25e6 * 1.1,
            "below the BDP: {}",
            path.window
        );
    }

    #[test]
    fn receiver_follows_an_rtt_increase() {
        let mut path = FluidPath::new(12.5e6, 0.04);
        let mut law = receiver();
        path.run(&mut law, 5.0);
        path.base = 0.2; // BDP 0.5 MB -> 2.5 MB
        path.run(&mut law, 12.0);
        assert!(path.window >= 0.95 * 2.5e6, "{}", path.window);
        let before = path.bytes;
        path.run(&mut law, 14.0);
        assert!((path.bytes - before) / 2.0 > 0.95 * 12.5e6);
    }

    /// A receiver seeded with `seed` bytes on a path of `rate` bytes/s and `base` s, run
    /// `until` seconds: the windows it chose.
    fn seeded_run(rate: f64, base: f64, seed: u64, until: f64) -> Vec<(f64, f64)> {
        let mut path = FluidPath::new(rate, base);
        path.window = seed as f64;
        let mut law = receiver();
        assert!(law.seed(seed));
        path.run(&mut law, until)
    }

    #[test]
    fn a_seeded_receiver_keeps_its_window_until_the_connection_fills_it() {
        // A new MODE E connection starts at its siblings' 4 MB window; its sender needs a while
        // (slow start, here a slow share of the path) before it fills that.
        let chosen = seeded_run(1e6, 0.1, 4_000_000, 5.0);
        assert!(chosen.iter().all(|c| c.1 >= 4e6), "shrank: {chosen:?}");
        // A sender's law takes no seed.
        assert!(!Drs::new(Role::Sender, &Params::default()).seed(1 << 20));
    }

    #[test]
    fn a_receiver_seeded_early_still_grows_at_start_up_pace() {
        // Opened beside a sibling that had just begun: seeded with 500 kB on a path of 1 Gbit/s
        // and 200 ms (BDP 25 MB). Growth by trials (a quarter per few RTTs) would take seconds.
        let chosen = seeded_run(125e6, 0.2, 500_000, 3.0);
        let reached = chosen.iter().find(|&&(_, w)| w >= 25e6).map(|&(t, _)| t);
        assert!(reached.is_some_and(|t| t < 1.5), "too slow: {chosen:?}");
    }

    fn sender_sample(t_ms: u64, cwnd: u64, snd_wnd: u32, limited_us: u64, sndbuf: u64) -> Sample {
        Sample {
            now: Duration::from_millis(t_ms),
            sndbuf,
            tcp: Some(TcpStats {
                min_rtt_us: 100_000,
                cwnd_bytes: cwnd,
                snd_wnd,
                sndbuf_limited_us: limited_us,
                ..TcpStats::default()
            }),
            ..Sample::default()
        }
    }

    #[test]
    fn sender_holds_what_may_be_in_flight() {
        let mut law = Drs::new(Role::Sender, &Params::default());
        // Slow start: the congestion window doubles; the buffer holds the next RTT's window.
        let d = law.on_sample(&sender_sample(0, 1 << 20, 64 << 20, 0, 0));
        assert_eq!(d.set.sndbuf, Some(2 << 20));
        assert_eq!(d.next, Duration::from_millis(100));
        let d = law.on_sample(&sender_sample(100, 2 << 20, 64 << 20, 0, 0));
        assert_eq!(d.set.sndbuf, Some(4 << 20));
        // Limited by the peer's 6 MiB window: the buffer follows that, not the congestion window.
        let d = law.on_sample(&sender_sample(200, 16 << 20, 6 << 20, 0, 0));
        assert_eq!(d.set.sndbuf, Some(6 << 20));
        // Steady: 3/4 of the congestion window, capped by the peer's window; no shrink for that.
        let d = law.on_sample(&sender_sample(300, 16 << 20, 6 << 20, 0, 0));
        assert_eq!(d.set.sndbuf, None);
        // Buffer-limited time grew: at least the kernel's current size (it doubles), but no
        // more than the peer's window.
        let d = law.on_sample(&sender_sample(400, 16 << 20, 64 << 20, 5000, 12 << 20));
        assert_eq!(d.set.sndbuf, Some(32 << 20));
        let d = law.on_sample(&sender_sample(500, 16 << 20, 40 << 20, 9000, 64 << 20));
        assert_eq!(d.set.sndbuf, Some(40 << 20));
    }
}
