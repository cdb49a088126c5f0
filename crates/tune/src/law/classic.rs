//! drsFTP as published (drsftp.txt §3): every sampling interval, bandwidth = bytes received in
//! the interval / interval, RTT = the latest control-channel round trip, and the receive buffer
//! becomes 2 × BDP whenever it is below that. It only grows. The drs-grid-performance variant
//! (§4.1) instead multiplies the buffer by four whenever one read returns more than half of
//! what `SO_RCVBUF` reports, reading with an application buffer twice the kernel's.

use super::{rate, Buffers, Decision, Law, Setup};
use super::{Params, STOCK_BUFFER};
use crate::sample::Sample;
use std::time::Duration;

/// The drsFTP receiver.
#[derive(Debug, Clone)]
pub struct Classic {
    interval: Duration,
    preconnect: u64,
    grid: bool,
    last: Option<(Duration, u64)>,
    buffer: u64,
}

impl Classic {
    /// `grid` selects the ×4-on-large-read variant.
    pub fn new(params: &Params, grid: bool) -> Classic {
        Classic {
            interval: params.interval,
            preconnect: params.preconnect,
            grid,
            last: None,
            buffer: STOCK_BUFFER,
        }
    }

    fn grow(&mut self, d: &mut Decision, to: u64, why: String) {
        self.buffer = to;
        d.set.rcvbuf = Some(to);
        d.note = Some(why);
    }
}

impl Law for Classic {
    fn setup(&self) -> Setup {
        Setup {
            before_connect: Buffers::both(self.preconnect),
            after_connect: Buffers::both(STOCK_BUFFER),
            ..Setup::default()
        }
    }

    fn on_sample(&mut self, s: &Sample) -> Decision {
        let mut d = Decision {
            next: self.interval,
            announce: Some(self.buffer),
            ..Decision::default()
        };
        if self.grid {
            d.read_buffer = Some(2 * s.rcvbuf.max(STOCK_BUFFER));
        }
        let Some((t0, b0)) = self.last.replace((s.now, s.bytes)) else {
            return d;
        };
        let bw = rate(s.bytes.saturating_sub(b0), s.now.saturating_sub(t0));
        if let Some(rtt) = s.probe_rtt {
            let bdp = (bw * rtt.as_secs_f64()) as u64;
            d.bdp = Some(bdp);
            if !self.grid && self.buffer < 2 * bdp {
                let why = format!("buffer below 2 x BDP ({bdp} bytes)");
                self.grow(&mut d, 2 * bdp, why);
            }
        }
        if self.grid && s.max_read > s.rcvbuf / 2 {
            let why = format!(
                "a read of {} bytes exceeded half the buffer ({} bytes)",
                s.max_read, s.rcvbuf
            );
            self.grow(&mut d, self.buffer * 4, why);
        }
        d.announce = Some(self.buffer);
        d
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(secs: u64, bytes: u64, rtt_ms: u64) -> Sample {
        Sample {
            now: Duration::from_secs(secs),
            bytes,
            probe_rtt: Some(Duration::from_millis(rtt_ms)),
            rcvbuf: 2 * STOCK_BUFFER,
            ..Sample::default()
        }
    }

    #[test]
    fn sets_large_buffers_before_connect_then_resets() {
        let law = Classic::new(&Params::default(), false);
        assert_eq!(law.setup().before_connect, Buffers::both(16 << 20));
        assert_eq!(law.setup().after_connect, Buffers::both(STOCK_BUFFER));
    }

    #[test]
    fn grows_to_twice_the_bdp_and_never_shrinks() {
        let mut law = Classic::new(&Params::default(), false);
        assert_eq!(law.on_sample(&sample(0, 0, 100)).set.rcvbuf, None);
        // 10 MB in one second at 100 ms: BDP 1 MB, buffer 2 MB, announced to the sender.
        let d = law.on_sample(&sample(1, 10_000_000, 100));
        assert_eq!(d.bdp, Some(1_000_000));
        assert_eq!(d.set.rcvbuf, Some(2_000_000));
        assert_eq!(d.announce, Some(2_000_000));
        assert_eq!(d.next, Duration::from_secs(1));
        // The same rate again: 2 MB is not below 2 x BDP, nothing changes.
        assert_eq!(law.on_sample(&sample(2, 20_000_000, 100)).set.rcvbuf, None);
        // The rate falls: drsFTP never shrinks.
        let d = law.on_sample(&sample(3, 20_100_000, 100));
        assert_eq!(d.set.rcvbuf, None);
        assert_eq!(d.announce, Some(2_000_000));
    }

    #[test]
    fn without_a_round_trip_it_cannot_estimate() {
        let mut law = Classic::new(&Params::default(), false);
        let mut s = sample(0, 0, 100);
        s.probe_rtt = None;
        law.on_sample(&s);
        s.now = Duration::from_secs(1);
        s.bytes = 50_000_000;
        assert_eq!(law.on_sample(&s).set.rcvbuf, None);
    }

    #[test]
    fn grid_variant_quadruples_on_a_large_read() {
        let mut law = Classic::new(&Params::default(), true);
        let mut s = sample(0, 0, 100);
        assert_eq!(law.on_sample(&s).read_buffer, Some(4 * STOCK_BUFFER));
        s.now = Duration::from_secs(1);
        s.max_read = STOCK_BUFFER; // not more than half of the 128 KiB reported
        assert_eq!(law.on_sample(&s).set.rcvbuf, None);
        s.now = Duration::from_secs(2);
        s.max_read = STOCK_BUFFER + 1;
        assert_eq!(law.on_sample(&s).set.rcvbuf, Some(4 * STOCK_BUFFER));
    }
}
