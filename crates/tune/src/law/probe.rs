//! Measure once, set once (AutoNcFTP, Enable): during the first `probe_period` of the transfer
//! the kernel's defaults carry the data while the receiver records the highest rate and the
//! lowest RTT; then it fixes its buffer at 2 × BDP and tells the sender to do the same.

use super::window::History;
use super::{rate, Decision, Law, Setup};
use super::{Params, STOCK_BUFFER};
use crate::sample::Sample;
use std::time::Duration;

/// Rate samples are taken over this span.
const SPAN: Duration = Duration::from_millis(100);

/// The probing receiver.
#[derive(Debug, Clone)]
pub struct Probe {
    period: Duration,
    history: History,
    best_rate: f64,
    best_rtt: Option<Duration>,
    fixed: Option<u64>,
}

impl Probe {
    /// A probe lasting `params.probe_period`.
    pub fn new(params: &Params) -> Probe {
        Probe {
            period: params.probe_period,
            history: History::default(),
            best_rate: 0.0,
            best_rtt: None,
            fixed: None,
        }
    }
}

impl Law for Probe {
    fn setup(&self) -> Setup {
        Setup::default()
    }

    fn on_sample(&mut self, s: &Sample) -> Decision {
        let mut d = Decision {
            next: SPAN,
            announce: self.fixed,
            ..Decision::default()
        };
        if self.fixed.is_some() {
            d.next = Duration::from_secs(1);
            return d;
        }
        self.history.push(s.now, s.bytes);
        if let Some((bytes, dt)) = self.history.since(SPAN) {
            self.best_rate = self.best_rate.max(rate(bytes, dt));
        }
        if let Some(rtt) = crate::path::lowest_rtt(s) {
            self.best_rtt = Some(self.best_rtt.map_or(rtt, |b| b.min(rtt)));
        }
        if let (true, Some(rtt)) = (s.now >= self.period, self.best_rtt) {
            let bdp = (self.best_rate * rtt.as_secs_f64()) as u64;
            let size = (2 * bdp).max(STOCK_BUFFER);
            self.fixed = Some(size);
            d.bdp = Some(bdp);
            d.set.rcvbuf = Some(size);
            d.announce = Some(size);
            d.note = Some(format!(
                "probe done: {:.1} Mbit/s x {:.1} ms, buffer fixed at 2 x BDP",
                self.best_rate * 8e-6,
                rtt.as_secs_f64() * 1e3
            ));
        }
        d
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sample::TcpStats;

    #[test]
    fn fixes_twice_the_bdp_after_the_probe_period_once() {
        let mut law = Probe::new(&Params::default());
        let tcp = TcpStats {
            min_rtt_us: 50_000,
            ..TcpStats::default()
        };
        let mut decided = Vec::new();
        // 12.5 MB/s (100 Mbit/s) for 3 s, sampled every 100 ms.
        for i in 0..=30u64 {
            let s = Sample {
                now: Duration::from_millis(100 * i),
                bytes: i * 1_250_000,
                tcp: Some(tcp),
                ..Sample::default()
            };
            let d = law.on_sample(&s);
            if let Some(n) = d.set.rcvbuf {
                decided.push((i, n));
            }
        }
        // BDP = 12.5 MB/s x 50 ms = 625 kB; the buffer is twice that, set at t = 2 s only.
        assert_eq!(decided, vec![(20, 1_250_000)]);
    }
}
