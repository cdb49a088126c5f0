//! The path models the laws and policies are tested on (test builds only): one shared set of
//! traces, so that a new law is judged on the paths the existing ones were.

use crate::law::Law;
use crate::sample::{Sample, TcpStats};
use crate::streams::{Observation, StreamLimits, StreamPolicy};
use std::time::Duration;

/// A fluid model of one path: capacity `rate` bytes/s, base RTT `base`, a drop-tail queue of
/// one BDP. The sender fills the advertised window up to what the path holds before loss
/// (its congestion control backs off there); what exceeds the BDP queues and stretches the RTT.
pub struct FluidPath {
    /// Capacity, bytes/s.
    pub rate: f64,
    /// Base RTT, s.
    pub base: f64,
    /// The advertised window, bytes.
    pub window: f64,
    /// Bytes delivered so far.
    pub bytes: f64,
    /// Time, s.
    pub t: f64,
}

impl FluidPath {
    /// A path of `rate` bytes/s and `base` s RTT, the window at the kernel's first 64 KiB.
    pub fn new(rate: f64, base: f64) -> FluidPath {
        FluidPath {
            rate,
            base,
            window: 65536.0,
            bytes: 0.0,
            t: 0.0,
        }
    }

    fn in_flight(&self) -> f64 {
        self.window.min(2.0 * self.rate * self.base)
    }

    fn rtt(&self) -> f64 {
        self.base + (self.in_flight() - self.rate * self.base).max(0.0) / self.rate
    }

    /// Runs the receiver law until `until` seconds; returns the windows it chose, with times.
    pub fn run(&mut self, law: &mut dyn Law, until: f64) -> Vec<(f64, f64)> {
        let mut chosen = Vec::new();
        let mut next = 0.0;
        while self.t < until {
            let dt = 0.001;
            self.bytes += (self.in_flight() / self.rtt()).min(self.rate) * dt;
            self.t += dt;
            if self.t < next {
                continue;
            }
            let tcp = TcpStats {
                min_rtt_us: 0,
                rcv_rtt_us: (self.rtt() * 1e6) as u32,
                rcv_wnd: self.window as u32,
                ..TcpStats::default()
            };
            let s = Sample {
                now: Duration::from_secs_f64(self.t),
                bytes: self.bytes as u64,
                tcp: Some(tcp),
                ..Sample::default()
            };
            let d = law.on_sample(&s);
            if let Some(w) = d.clamp {
                // The buffer is never set below the window already advertised.
                assert!(d.set.rcvbuf >= Some(tcp.rcv_wnd.into()));
                self.window = w as f64;
                chosen.push((self.t, self.window));
            }
            next = self.t + d.next.as_secs_f64();
        }
        chosen
    }
}

/// A toy path: each stream moves at most `window / rtt` once out of slow start (which
/// takes 5 RTTs, at half that rate), all together at most `path`, shared equally.
/// Returns the stream count and the policy after `secs` seconds sampled every 100 ms.
pub fn run_streams(
    path_mbit: f64,
    window: f64,
    rtt_ms: u32,
    limits: StreamLimits,
    secs: u32,
) -> (u32, StreamPolicy) {
    let mut p = StreamPolicy::new(limits);
    let mut streams: Vec<(TcpStats, f64)> = vec![(TcpStats::default(), 0.0)];
    let cap = window * 8.0 / (f64::from(rtt_ms) / 1000.0) / 1e6;
    let ramp = f64::from(rtt_ms) * 5.0 / 1000.0;
    for tick in 1..=secs * 10 {
        let now = f64::from(tick) / 10.0;
        let wants: Vec<f64> = streams
            .iter()
            .map(|(_, born)| if now - born < ramp { cap / 2.0 } else { cap })
            .collect();
        let total: f64 = wants.iter().sum();
        let share = (path_mbit / total).min(1.0);
        for ((s, _), want) in streams.iter_mut().zip(&wants) {
            s.min_rtt_us = rtt_ms * 1000;
            // A full path queues: the RTT grows by half.
            s.rtt_us = if share < 1.0 {
                rtt_ms * 1500
            } else {
                rtt_ms * 1000
            };
            s.busy_us += 100_000;
            // A receiver sized just above its stream's rate keeps it window-limited.
            s.rwnd_limited_us += 90_000;
            s.bytes_acked += (want * share * 1e6 / 8.0 * 0.1) as u64;
            s.delivery_rate = (want * share * 1e6 / 8.0) as u64;
        }
        let obs: Vec<TcpStats> = streams.iter().map(|(s, _)| *s).collect();
        let o = Observation {
            now: Duration::from_millis(u64::from(tick) * 100),
            streams: &obs,
            memory: (window as u64) * 2 * streams.len() as u64,
        };
        if let Some(c) = p.observe(&o) {
            streams.extend((0..c.add).map(|_| (TcpStats::default(), now)));
        }
    }
    (streams.len() as u32, p)
}
