//! The UDP channel's receiving end, free of I/O: its books ([`Arrivals`]), which packets are
//! new data to write, and when it reports: every [`REPORT_EVERY`], every [`QUIET_REPORTS`]
//! before the first packet, never while its previous report is still queued, and at once when
//! the packet train is over or every packet is here. A driver (`fatpipe-net`'s conductor)
//! hands in each packet's header with [`UdpReceive::take`], writes what is new, and sends what
//! [`UdpReceive::poll_report`] answers.

use super::arrivals::{Arrival, Arrivals, Take};
use fatpipe_proto::udp::{packets, DataHeader, Report, HEADER};
use std::time::{Duration, Instant};

pub use crate::rate::REPORT_EVERY;
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
    /// When the latest packet booked since the last report arrived, and the last report's
    /// time (µs since the transfer began).
    latest: Option<Instant>,
    reported_us: u64,
    /// Packets counted by the last report.
    reported_received: u64,
    /// The receiving socket's drops as last told, and those the last report covered; its
    /// buffer, bytes.
    drops: (u64, u64),
    buffer: u64,
}

/// Most queueing delay a report says a full socket stood for, µs (a receiver that took
/// nearly nothing over the interval is held to it).
const FULL_SOCKET_US: u64 = 1_000_000;

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
            latest: None,
            reported_us: 0,
            reported_received: 0,
            drops: (0, 0),
            buffer: 0,
        }
    }

    /// The receiving socket has dropped `dropped` packets so far (the system's count: packets
    /// that found its `buffer` bytes full). Drops since the last report mean this end is the
    /// bottleneck: the report says the queue was as deep as that buffer at the rate that came
    /// through, so the sender backs off as from any full queue instead of taking them for
    /// random loss and resending at the same rate (a receiver put aside on a busy host lost
    /// 4–13 % of the packets to its socket while the sender held its rate).
    pub fn socket_drops(&mut self, dropped: u64, buffer: u64) {
        self.drops.0 = self.drops.0.max(dropped);
        self.buffer = buffer;
    }

    /// The queueing delay a socket of [`UdpReceive::socket_drops`]' buffer stood for, if it
    /// dropped packets since the last report: its bytes at the rate of `packets` over
    /// `span_us`.
    fn full_socket_us(&mut self, packets: u64, span_us: u64) -> Option<u32> {
        if self.drops.0 <= self.drops.1 {
            return None;
        }
        self.drops.1 = self.drops.0;
        let bytes = packets * (self.payload + HEADER as u64);
        let us = match bytes {
            0 => FULL_SOCKET_US,
            _ => (self.buffer.saturating_mul(span_us.max(1)) / bytes).min(FULL_SOCKET_US),
        };
        Some(us as u32)
    }

    /// Books a packet whose data is `body` bytes, which came as `came` says (on this host's
    /// clock): new data is to be written at its place, the rest dropped. A packet whose size
    /// does not match its place is not the sender's.
    pub fn take(&mut self, h: &DataHeader, body: usize, came: Arrival) -> Take {
        let (at, at_us, read_us) = (came.at, self.clock_us(came.at), self.clock_us(came.read));
        let place = h.index.saturating_mul(self.payload);
        let want = self.payload.min(self.length.saturating_sub(place));
        if body as u64 != want {
            let foreign = DataHeader {
                token: !h.token,
                ..*h
            };
            return self.arrivals.take(&foreign, at_us, read_us);
        }
        let taken = self.arrivals.take(h, at_us, read_us);
        if taken != Take::Foreign {
            self.latest = Some(self.latest.map_or(at, |l| l.max(at)));
        }
        taken
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
        let due =
            now >= self.next_report || self.arrivals.complete() || self.arrivals.train_untold();
        if !due || queued {
            return None;
        }
        self.reported = now;
        self.next_report = now + REPORT_EVERY;
        // A report is timed by the arrival of the latest packet it counts, not by when it is
        // written: a receiver put aside for 30 ms counts that backlog into the report after,
        // and timed by the report the sender read the gigabit as 1.6 Gbit/s (and the one
        // before as 0.6), set its estimate on it and overflowed the queue.
        let at = self.latest.take().unwrap_or(now);
        let at_us =
            (at.saturating_duration_since(self.start).as_micros() as u64).max(self.reported_us);
        let span_us = at_us - self.reported_us;
        self.reported_us = at_us;
        let mut report = self.arrivals.report(written, at_us);
        let packets = report.received.saturating_sub(self.reported_received);
        self.reported_received = report.received;
        if let Some(full) = self.full_socket_us(packets, span_us) {
            report.queue_us = report.queue_us.max(full);
        }
        Some(report)
    }

    /// When the next report is due.
    pub fn poll_timeout(&self) -> Instant {
        self.next_report
    }

    /// This end's clock at `at`, wrapping microseconds since the transfer began (a packet
    /// that arrived before, the train's first ones as the receiver read the sender's `Hello`,
    /// keeps its place before it).
    fn clock_us(&self, at: Instant) -> u32 {
        match at.checked_duration_since(self.start) {
            Some(d) => d.as_micros() as u32,
            None => (self.start.duration_since(at).as_micros() as u32).wrapping_neg(),
        }
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

    /// A packet read as it arrived.
    fn came(t: Instant) -> Arrival {
        Arrival { at: t, read: t }
    }

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
        assert_eq!(r.take(&header(0, 1), 1000, came(ms(300))), Take::New);
        r.heard(ms(301));
        assert!(r.poll_report(ms(305), 1000, false).is_none());
        assert!(r.poll_report(ms(311), 1000, true).is_none(), "queued");
        assert!(r.poll_report(ms(312), 1000, false).is_some());
        assert_eq!(r.poll_timeout(), ms(322));
        // The last packet: reported at once, interval or not.
        assert_eq!(r.take(&header(1, 2), 1000, came(ms(312))), Take::New);
        assert_eq!(r.take(&header(2, 3), 1000, came(ms(312))), Take::New);
        assert!(r.complete());
        let last = r.poll_report(ms(313), 3000, false).expect("at once");
        assert_eq!(last.received, 3);
        assert_eq!(r.in_place(), 3000);
    }

    /// A receiver of 1,000 packets of 1,000 bytes from `t0`, and what books `n` more of them
    /// (each new) sent and arrived at `at` ms.
    fn receiving(t0: Instant) -> (UdpReceive, impl FnMut(&mut UdpReceive, u64, u64)) {
        let mut tx = 0;
        let arrive = move |r: &mut UdpReceive, at: u64, n: u64| {
            let when = t0 + Duration::from_millis(at);
            for _ in 0..n {
                tx += 1;
                let h = DataHeader {
                    sent_us: (at * 1000) as u32,
                    ..header(tx - 1, tx)
                };
                assert_eq!(r.take(&h, 1000, came(when)), Take::New);
            }
            r.heard(when);
        };
        (UdpReceive::new(7, 1000 * 1000, 1000, t0), arrive)
    }

    #[test]
    fn a_report_is_timed_by_the_latest_arrival_it_counts_not_by_when_it_is_written() {
        let t0 = Instant::now();
        let ms = |n: u64| t0 + Duration::from_millis(n);
        let (mut r, mut arrive) = receiving(t0);
        // Ten packets a millisecond; the receiver was put aside from 10 to 40 ms and books
        // part of the backlog (what came until 25 ms) before its report at 41 ms, the rest
        // (and what came until 50 ms) before the next one at 51 ms.
        for at in 1..=10 {
            arrive(&mut r, at, 10);
        }
        let first = r.poll_report(ms(10), 0, false).expect("due");
        for at in 11..=25 {
            arrive(&mut r, at, 10);
        }
        let second = r.poll_report(ms(41), 0, false).expect("due");
        for at in 26..=50 {
            arrive(&mut r, at, 10);
        }
        let third = r.poll_report(ms(51), 0, false).expect("due");
        // Each report's packets over its span: ten a millisecond, not 150 over 31 ms and 250
        // over 10 ms as the reports' own times would have it.
        let rate = |a: &Report, b: &Report| (b.received - a.received) * 1000 / (b.at_us - a.at_us);
        assert_eq!(
            (first.at_us, second.at_us, third.at_us),
            (10_000, 25_000, 50_000)
        );
        assert_eq!((rate(&first, &second), rate(&second, &third)), (10, 10));
        // Nothing booked since: the report is timed when it is written.
        let quiet = r.poll_report(ms(61), 0, false).expect("due");
        assert_eq!(quiet.at_us, 61_000);
    }

    #[test]
    fn the_end_of_the_train_is_reported_at_once() {
        let t0 = Instant::now();
        let ms = |n: u64| t0 + Duration::from_millis(n);
        let train = fatpipe_proto::udp::TRAIN;
        let mut r = UdpReceive::new(7, 1000 * 1000, 1000, t0);
        for tx in 1..train {
            r.take(&header(tx - 1, tx), 1000, came(ms(1)));
        }
        r.heard(ms(1));
        let _ = r.poll_report(ms(2), 0, false);
        assert!(
            r.poll_report(ms(3), 0, false).is_none(),
            "an interval to wait"
        );
        r.take(&header(train - 1, train), 1000, came(ms(3)));
        let told = r.poll_report(ms(3), 0, false).expect("at once");
        assert_eq!(u64::from(told.train_packets), train);
        assert!(r.poll_report(ms(4), 0, false).is_none(), "told once");
    }

    #[test]
    fn a_train_that_began_before_the_receiver_did_is_timed_from_its_first_arrival() {
        let t0 = Instant::now() + Duration::from_secs(1);
        let mut r = UdpReceive::new(7, 1000 * 1000, 1000, t0);
        // The train's first packet was in the socket when the receiver started, 1 ms before.
        r.take(&header(0, 1), 1000, came(t0 - Duration::from_millis(1)));
        r.take(&header(1, 2), 1000, came(t0 + Duration::from_millis(1)));
        // A packet after the train ends it.
        let after = fatpipe_proto::udp::TRAIN + 1;
        r.take(
            &header(after, after),
            1000,
            came(t0 + Duration::from_millis(2)),
        );
        r.heard(t0 + Duration::from_millis(2));
        let report = r
            .poll_report(t0 + Duration::from_millis(20), 0, false)
            .expect("due");
        assert_eq!((report.train_packets, report.train_us), (2, 2_000));
    }

    #[test]
    fn packets_the_socket_dropped_show_as_a_queue_as_deep_as_its_buffer() {
        let t0 = Instant::now();
        let ms = |n: u64| t0 + Duration::from_millis(n);
        // 1,000-byte packets (1,028 with the header), 100 of them every 10 ms: 10.28 MB/s.
        let (mut r, mut arrive) = receiving(t0);
        let mut report = |r: &mut UdpReceive, at: u64| {
            arrive(r, at, 100);
            r.poll_report(ms(at), 0, false).expect("due").queue_us
        };
        r.socket_drops(0, 1_028_000);
        assert_eq!(report(&mut r, 10), 0, "no drops: no queue");
        // 5 dropped: the 1,028,000-byte buffer is 100 ms at that rate.
        r.socket_drops(5, 1_028_000);
        assert_eq!(report(&mut r, 20), 100_000);
        // No more since: no queue again.
        r.socket_drops(5, 1_028_000);
        assert_eq!(report(&mut r, 30), 0);
    }

    #[test]
    fn a_packet_whose_size_does_not_match_its_place_is_not_written() {
        let t0 = Instant::now();
        let mut r = UdpReceive::new(7, 2500, 1000, t0);
        // The last packet carries 500 bytes; 1000 there are not the sender's.
        assert_eq!(r.take(&header(2, 1), 1000, came(t0)), Take::Foreign);
        assert_eq!(r.take(&header(2, 2), 500, came(t0)), Take::New);
        assert_eq!(r.take(&header(2, 3), 500, came(t0)), Take::Duplicate);
        assert_eq!(r.foreign(), 1);
    }
}
