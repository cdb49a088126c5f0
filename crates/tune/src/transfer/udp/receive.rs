//! The UDP channel's receiving end, free of I/O: its books ([`Arrivals`]), which packets are
//! new data to write, and when it reports: every [`REPORT_EVERY`], every [`QUIET_REPORTS`]
//! before the first packet, never while its previous report is still queued, and at once when
//! every packet is here. A driver (`fatpipe-net`'s conductor) hands in each packet's header
//! with [`UdpReceive::take`], writes what is new, and sends what [`UdpReceive::poll_report`]
//! answers.

use super::arrivals::{Arrivals, Take};
use fatpipe_proto::udp::{packets, DataHeader, Report};
use std::time::{Duration, Instant};

/// How often the receiver reports.
pub const REPORT_EVERY: Duration = Duration::from_millis(10);
/// How often it reports before any packet has arrived (it tells the sender it is there;
/// nothing else is new): a round trip of empty reports every [`REPORT_EVERY`] took the
/// feedback connection's whole first window, and the one that told the packet train then
/// waited 130 ms for acknowledgements.
pub const QUIET_REPORTS: Duration = Duration::from_millis(250);

/// One UDP transfer's receiver.
pub struct UdpReceive {
    arrivals: Arrivals,
    length: u64,
    payload: u64,
    start: Instant,
    next_report: Instant,
    reported: Instant,
    /// A packet arrived, and when anything last did.
    arrived: bool,
    heard: Instant,
}

impl UdpReceive {
    /// The receiver, from `now`, of `length` bytes in packets carrying `payload` bytes of data
    /// each and the transfer's `token`.
    pub fn new(token: u64, length: u64, payload: u64, now: Instant) -> UdpReceive {
        let payload = payload.max(1);
        UdpReceive {
            arrivals: Arrivals::new(token, packets(length, payload)),
            length,
            payload,
            start: now,
            next_report: now + REPORT_EVERY,
            reported: now,
            arrived: false,
            heard: now,
        }
    }

    /// Books a packet whose data is `body` bytes, arrived at `at_us` (see
    /// [`UdpReceive::clock_us`]): new data is to be written at its place, the rest dropped. A
    /// packet whose size does not match its place is not the sender's.
    pub fn take(&mut self, h: &DataHeader, body: usize, at_us: u32) -> Take {
        let at = h.index.saturating_mul(self.payload);
        let want = self.payload.min(self.length.saturating_sub(at));
        if body as u64 != want {
            let foreign = DataHeader {
                token: !h.token,
                ..*h
            };
            return self.arrivals.take(&foreign, at_us);
        }
        self.arrivals.take(h, at_us)
    }

    /// Packets came at `now` (the sender is alive, and the quiet start is over).
    pub fn heard(&mut self, now: Instant) {
        self.heard = now;
        self.arrived = true;
    }

    /// The report due at `now`, if one is (`written`: the bytes on disk; `queued`: the
    /// previous report has not left yet, and what changed meanwhile goes into the next).
    pub fn poll_report(&mut self, now: Instant, written: u64, queued: bool) -> Option<Report> {
        let quiet = !self.arrived && now < self.reported + QUIET_REPORTS;
        if quiet && now >= self.next_report {
            self.next_report = now + REPORT_EVERY;
        }
        let due = now >= self.next_report || self.arrivals.complete();
        if !due || queued {
            return None;
        }
        self.reported = now;
        self.next_report = now + REPORT_EVERY;
        let at = now.saturating_duration_since(self.start).as_micros() as u64;
        Some(self.arrivals.report(written, at))
    }

    /// When the next report is due.
    pub fn poll_timeout(&self) -> Instant {
        self.next_report
    }

    /// This end's clock at `now`, wrapping microseconds since the transfer began: when a
    /// packet arrived where the kernel does not say.
    pub fn clock_us(&self, now: Instant) -> u32 {
        now.saturating_duration_since(self.start).as_micros() as u32
    }

    /// When anything last arrived.
    pub fn last_heard(&self) -> Instant {
        self.heard
    }

    /// Whether every packet is here.
    pub fn complete(&self) -> bool {
        self.arrivals.complete()
    }

    /// The bytes from the first on that are all here, as of the last report.
    pub fn in_place(&self) -> u64 {
        self.arrivals
            .in_order()
            .saturating_mul(self.payload)
            .min(self.length)
    }

    /// Packets dropped as not this transfer's.
    pub fn foreign(&self) -> u32 {
        self.arrivals.foreign()
    }

    /// Bytes the transfer brings.
    pub fn length(&self) -> u64 {
        self.length
    }

    /// Bytes of data a packet carries.
    pub fn payload(&self) -> u64 {
        self.payload
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use super::super::test_header as header;

    #[test]
    fn reports_are_rare_before_the_first_packet_then_every_interval_and_at_the_end() {
        let t0 = Instant::now();
        let ms = |n: u64| t0 + Duration::from_millis(n);
        let mut r = UdpReceive::new(7, 3 * 1000, 1000, t0);
        // Before any packet: one report in the quiet span, not one per interval.
        let quiet: Vec<u64> = (1..=300)
            .filter(|&n| r.poll_report(ms(n), 0, false).is_some())
            .collect();
        assert_eq!(quiet, [250], "{quiet:?}");
        // Packets came: every interval, but not while the last one is still queued.
        assert_eq!(r.take(&header(0, 1), 1000, 0), Take::New);
        r.heard(ms(301));
        assert!(r.poll_report(ms(305), 1000, false).is_none());
        assert!(r.poll_report(ms(311), 1000, true).is_none(), "queued");
        assert!(r.poll_report(ms(312), 1000, false).is_some());
        assert_eq!(r.poll_timeout(), ms(322));
        // The last packet: reported at once, interval or not.
        assert_eq!(r.take(&header(1, 2), 1000, 0), Take::New);
        assert_eq!(r.take(&header(2, 3), 1000, 0), Take::New);
        assert!(r.complete());
        let last = r.poll_report(ms(313), 3000, false).expect("at once");
        assert_eq!(last.received, 3);
        assert_eq!(r.in_place(), 3000);
    }

    #[test]
    fn a_packet_whose_size_does_not_match_its_place_is_not_written() {
        let mut r = UdpReceive::new(7, 2500, 1000, Instant::now());
        // The last packet carries 500 bytes; 1000 there are not the sender's.
        assert_eq!(r.take(&header(2, 1), 1000, 0), Take::Foreign);
        assert_eq!(r.take(&header(2, 2), 500, 0), Take::New);
        assert_eq!(r.take(&header(2, 3), 500, 0), Take::Duplicate);
        assert_eq!(r.foreign(), 1);
    }
}
