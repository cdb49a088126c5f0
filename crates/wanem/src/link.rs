//! One direction of the emulated path, as pure logic: random loss, a drop-tail queue in front of
//! a bottleneck of fixed rate (serialisation counts the whole packet), then a fixed one-way delay.
//! The queue may also carry cross traffic: a constant-rate stream of packets that enter it at
//! exact times and leave the path at the bottleneck (a background that no scheduling delays).
//! Time is injected (`now` since the emulator started), so the model is tested on synthetic traces.

use crate::units::QueueLimit;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;
use std::time::Duration;

/// The settings of one direction.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct LinkParams {
    /// Bottleneck rate in bit/s.
    pub rate_bps: u64,
    /// One-way propagation delay.
    pub delay: Duration,
    /// Drop-tail limit of the bottleneck queue.
    #[serde(with = "queue_serde")]
    pub queue: QueueLimit,
    /// Probability that a packet is lost before the queue.
    pub loss: f64,
    /// Rate of the constant cross traffic sharing the queue, in bit/s (0: none).
    #[serde(default)]
    pub cross_bps: u64,
}

/// Size of one cross-traffic packet: a 1400-byte UDP payload with its IPv4 and UDP headers, as
/// `iperf3 -u -l 1400` sends.
pub const CROSS_PACKET: u64 = 1428;

/// How far back cross traffic is replayed when the link was idle: older arrivals are counted but
/// not queued (a queue of this age has long drained, unless the cross traffic alone fills it).
const CROSS_REPLAY: Duration = Duration::from_secs(2);

impl LinkParams {
    /// The queue limit in bytes and packets for these settings; a BDP-relative limit uses
    /// RTT = 2 × the one-way delay and never falls below two full-size packets.
    fn limits(&self) -> (u64, u64) {
        match self.queue {
            QueueLimit::Bytes(b) => (b.max(1), u64::MAX),
            QueueLimit::Packets(p) => (u64::MAX, p.max(1)),
            QueueLimit::Bdp(k) => {
                let bdp = self.rate_bps as f64 * 2.0 * self.delay.as_secs_f64() / 8.0;
                (((k * bdp) as u64).max(3000), u64::MAX)
            }
        }
    }
}

mod queue_serde {
    use super::QueueLimit;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(q: &QueueLimit, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(q)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<QueueLimit, D::Error> {
        let s = String::deserialize(d)?;
        QueueLimit::parse(&s).map_err(serde::de::Error::custom)
    }
}

/// What happened to an offered packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Accepted; it will be delivered at this time.
    Queued(Duration),
    /// Dropped by the random-loss stage.
    Lost,
    /// Dropped because the queue was full.
    QueueFull,
}

/// Counters of one direction.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LinkStats {
    /// Packets offered to this direction.
    pub packets_in: u64,
    /// Bytes offered.
    pub bytes_in: u64,
    /// Packets delivered to the far side.
    pub packets_out: u64,
    /// Bytes delivered.
    pub bytes_out: u64,
    /// Packets dropped by random loss.
    pub drops_loss: u64,
    /// Packets dropped because the queue was full.
    pub drops_queue: u64,
    /// Packets the far side would not take (TUN write failed).
    pub drops_write: u64,
    /// Largest lateness of a release against its schedule, in microseconds.
    pub late_max_us: u64,
    /// Sum of release lateness, in microseconds (mean = sum / packets_out).
    pub late_sum_us: u64,
    /// Releases more than 1 ms late.
    pub late_over_1ms: u64,
    /// Largest queue occupancy seen, in bytes.
    pub queue_peak_bytes: u64,
    /// Bytes released in full-size ("bulk", at least [`BULK_PACKET`] bytes) packets: the data
    /// of a transfer, not its acknowledgements and commands.
    pub bulk_bytes: u64,
    /// Release time of the first bulk packet, in microseconds since the emulator started.
    pub first_bulk_us: u64,
    /// Release time of the last bulk packet, in microseconds since the emulator started.
    pub last_bulk_us: u64,
    /// Cross-traffic bytes offered to the queue.
    #[serde(default)]
    pub cross_bytes_in: u64,
    /// Cross-traffic packets dropped because the queue was full.
    #[serde(default)]
    pub cross_drops_queue: u64,
}

/// Packets at least this long count as a transfer's data (see [`LinkStats::bulk_bytes`]).
pub const BULK_PACKET: usize = 1000;

impl LinkStats {
    /// Records that a packet due at `due` was released at `now`.
    pub fn released(&mut self, due: Duration, now: Duration, len: usize) {
        let late = now.saturating_sub(due).as_micros() as u64;
        self.packets_out += 1;
        self.bytes_out += len as u64;
        self.late_max_us = self.late_max_us.max(late);
        self.late_sum_us += late;
        if late > 1000 {
            self.late_over_1ms += 1;
        }
        if len >= BULK_PACKET {
            let at = now.as_micros() as u64;
            if self.bulk_bytes == 0 {
                self.first_bulk_us = at;
            }
            self.last_bulk_us = at;
            self.bulk_bytes += len as u64;
        }
    }

    /// The data phase seen on this direction: first to last bulk packet.
    pub fn bulk_phase(&self) -> Option<Duration> {
        (self.last_bulk_us > self.first_bulk_us)
            .then(|| Duration::from_micros(self.last_bulk_us - self.first_bulk_us))
    }
}

/// How long `bytes` take at `rate_bps`: a packet's serialisation at the bottleneck, or the
/// spacing of cross traffic.
fn time_to_send(bytes: u64, rate_bps: u64) -> Duration {
    let nanos = (u128::from(bytes) * 8 * 1_000_000_000) / u128::from(rate_bps.max(1));
    Duration::from_nanos(nanos.min(u64::MAX as u128) as u64)
}

/// One direction of the path. `P` is the packet (anything with a length).
#[derive(Debug)]
pub struct Link<P> {
    params: LinkParams,
    limit_bytes: u64,
    limit_packets: u64,
    rng: SmallRng,
    busy_until: Duration,
    backlog: VecDeque<(Duration, u64)>,
    backlog_bytes: u64,
    in_flight: VecDeque<(Duration, P)>,
    last_delivery: Duration,
    cross_next: Duration,
    /// Counters since creation.
    pub stats: LinkStats,
}

impl<P: AsRef<[u8]>> Link<P> {
    /// A link with `params`; `seed` fixes the loss pattern.
    pub fn new(params: LinkParams, seed: u64) -> Self {
        let (limit_bytes, limit_packets) = params.limits();
        Link {
            params,
            limit_bytes,
            limit_packets,
            rng: SmallRng::seed_from_u64(seed),
            busy_until: Duration::ZERO,
            backlog: VecDeque::new(),
            backlog_bytes: 0,
            in_flight: VecDeque::new(),
            last_delivery: Duration::ZERO,
            cross_next: Duration::ZERO,
            stats: LinkStats::default(),
        }
    }

    /// The current settings.
    pub fn params(&self) -> LinkParams {
        self.params
    }

    /// Changes the settings; packets already accepted keep their times.
    pub fn set_params(&mut self, params: LinkParams) {
        self.params = params;
        (self.limit_bytes, self.limit_packets) = params.limits();
    }

    /// Offers a packet arriving at `now`.
    pub fn enqueue(&mut self, now: Duration, packet: P) -> Verdict {
        let len = packet.as_ref().len() as u64;
        self.stats.packets_in += 1;
        self.stats.bytes_in += len;
        if self.params.loss > 0.0 && self.rng.gen::<f64>() < self.params.loss {
            self.stats.drops_loss += 1;
            return Verdict::Lost;
        }
        self.cross_until(now);
        let Some(depart) = self.queue_at(now, len) else {
            self.stats.drops_queue += 1;
            return Verdict::QueueFull;
        };
        // A shorter delay after a schedule step must not reorder packets: the line is FIFO.
        let deliver = (depart + self.params.delay).max(self.last_delivery);
        self.last_delivery = deliver;
        self.in_flight.push_back((deliver, packet));
        Verdict::Queued(deliver)
    }

    /// Puts `len` bytes arriving at `now` into the bottleneck queue; their departure from the
    /// bottleneck, or `None` if the queue is full.
    fn queue_at(&mut self, now: Duration, len: u64) -> Option<Duration> {
        while let Some(&(depart, bytes)) = self.backlog.front() {
            if depart > now {
                break;
            }
            self.backlog.pop_front();
            self.backlog_bytes -= bytes;
        }
        if self.backlog_bytes + len > self.limit_bytes
            || self.backlog.len() as u64 >= self.limit_packets
        {
            return None;
        }
        let depart = self.busy_until.max(now) + time_to_send(len, self.params.rate_bps);
        self.busy_until = depart;
        self.backlog.push_back((depart, len));
        self.backlog_bytes += len;
        self.stats.queue_peak_bytes = self.stats.queue_peak_bytes.max(self.backlog_bytes);
        Some(depart)
    }

    /// Queues the cross traffic that arrived up to `now`, each packet at its own time.
    fn cross_until(&mut self, now: Duration) {
        if self.params.cross_bps == 0 {
            self.cross_next = now;
            return;
        }
        let gap = time_to_send(CROSS_PACKET, self.params.cross_bps).max(Duration::from_nanos(1));
        let replay_from = now.saturating_sub(CROSS_REPLAY);
        if self.cross_next < replay_from {
            let skipped = (replay_from - self.cross_next).as_nanos() / gap.as_nanos();
            self.stats.cross_bytes_in += skipped as u64 * CROSS_PACKET;
            self.cross_next = replay_from;
        }
        while self.cross_next <= now {
            self.stats.cross_bytes_in += CROSS_PACKET;
            if self.queue_at(self.cross_next, CROSS_PACKET).is_none() {
                self.stats.cross_drops_queue += 1;
            }
            self.cross_next += gap;
        }
    }

    /// When the next packet is due, if any is in flight.
    pub fn next_delivery(&self) -> Option<Duration> {
        self.in_flight.front().map(|(t, _)| *t)
    }

    /// Takes the next packet due at or before `now`, with its due time.
    pub fn pop_due(&mut self, now: Duration) -> Option<(Duration, P)> {
        if self.next_delivery()? <= now {
            self.in_flight.pop_front()
        } else {
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(rate_bps: u64, delay_ms: u64, queue: QueueLimit, loss: f64) -> LinkParams {
        LinkParams {
            rate_bps,
            delay: Duration::from_millis(delay_ms),
            queue,
            loss,
            cross_bps: 0,
        }
    }

    fn ms(v: f64) -> Duration {
        Duration::from_secs_f64(v / 1e3)
    }

    /// Offers `n` full-size packets at time zero; returns how many the queue took.
    fn accepted_at_once(l: &mut Link<Vec<u8>>, n: usize) -> usize {
        (0..n)
            .filter(|_| {
                matches!(
                    l.enqueue(Duration::ZERO, vec![0u8; 1500]),
                    Verdict::Queued(_)
                )
            })
            .count()
    }

    /// Random-loss drops among 100 000 packets offered at 1 Gbit/s spacing with 1 % loss.
    fn loss_drops(seed: u64) -> u64 {
        let mut l = Link::new(
            params(1_000_000_000, 0, QueueLimit::Packets(1 << 20), 0.01),
            seed,
        );
        for i in 0..100_000u64 {
            l.enqueue(Duration::from_micros(i * 12), vec![0u8; 1500]);
        }
        l.stats.drops_loss
    }

    #[test]
    fn delay_plus_serialisation() {
        // 1500 bytes at 12 Mbit/s take 1 ms on the wire; then 10 ms of delay.
        let mut l = Link::new(params(12_000_000, 10, QueueLimit::Packets(100), 0.0), 1);
        assert_eq!(
            l.enqueue(Duration::ZERO, vec![0u8; 1500]),
            Verdict::Queued(ms(11.0))
        );
        // A back-to-back second packet waits for the first to leave the bottleneck.
        assert_eq!(
            l.enqueue(Duration::ZERO, vec![0u8; 1500]),
            Verdict::Queued(ms(12.0))
        );
        assert_eq!(l.pop_due(ms(10.9)), None);
        assert_eq!(l.pop_due(ms(11.0)).map(|(t, _)| t), Some(ms(11.0)));
        assert_eq!(l.next_delivery(), Some(ms(12.0)));
    }

    #[test]
    fn drop_tail_by_packets_and_bytes() {
        let mut l = Link::new(params(12_000_000, 0, QueueLimit::Packets(3), 0.0), 1);
        let verdicts: Vec<Verdict> = (0..5)
            .map(|_| l.enqueue(Duration::ZERO, vec![0u8; 1500]))
            .collect();
        assert_eq!(
            verdicts
                .iter()
                .filter(|v| **v == Verdict::QueueFull)
                .count(),
            2
        );
        // After two packet times the queue has room for two more.
        assert!(matches!(
            l.enqueue(ms(2.0), vec![0u8; 1500]),
            Verdict::Queued(_)
        ));
        assert!(matches!(
            l.enqueue(ms(2.0), vec![0u8; 1500]),
            Verdict::Queued(_)
        ));
        assert_eq!(l.enqueue(ms(2.0), vec![0u8; 1500]), Verdict::QueueFull);
        let mut b = Link::new(params(12_000_000, 0, QueueLimit::Bytes(4000), 0.0), 1);
        assert_eq!(accepted_at_once(&mut b, 4), 2);
        assert_eq!(b.stats.queue_peak_bytes, 3000);
    }

    #[test]
    fn bdp_queue_limit() {
        // 100 Mbit/s × 50 ms RTT = 625 000 bytes; 1 BDP holds 416 full packets.
        let mut l = Link::new(params(100_000_000, 25, QueueLimit::Bdp(1.0), 0.0), 1);
        assert_eq!(accepted_at_once(&mut l, 1000), 416);
    }

    #[test]
    fn saturated_link_delivers_at_its_rate() {
        let mut l = Link::new(params(100_000_000, 5, QueueLimit::Packets(1000), 0.0), 1);
        let mut delivered = 0u64;
        let mut t = Duration::ZERO;
        // Offer 2× the rate for one second, in 1 ms steps.
        while t < Duration::from_secs(1) {
            for _ in 0..17 {
                l.enqueue(t, vec![0u8; 1500]);
            }
            while let Some((_, p)) = l.pop_due(t) {
                delivered += p.len() as u64;
            }
            t += Duration::from_millis(1);
        }
        let mbit = delivered as f64 * 8.0 / 1e6;
        assert!(
            (94.0..=100.0).contains(&mbit),
            "{mbit} Mbit in 1 s at 100 Mbit/s less the 5 ms delay"
        );
    }

    #[test]
    fn configured_loss_is_measured_over_100k_packets() {
        let drops = loss_drops(42);
        let rate = drops as f64 / 100_000.0;
        assert!((0.008..=0.012).contains(&rate), "measured loss {rate}");
        // The same seed gives the same pattern; another seed a different one.
        assert_eq!(loss_drops(42), drops);
        assert_ne!(loss_drops(43), drops);
    }

    #[test]
    fn a_step_applies_to_the_next_packet_and_keeps_order() {
        let mut l = Link::new(params(1_000_000_000, 100, QueueLimit::Packets(100), 0.0), 1);
        let Verdict::Queued(first) = l.enqueue(Duration::ZERO, vec![0u8; 100]) else {
            panic!()
        };
        l.set_params(params(1_000_000_000, 20, QueueLimit::Packets(100), 0.0));
        let Verdict::Queued(second) = l.enqueue(ms(1.0), vec![0u8; 100]) else {
            panic!()
        };
        assert!(second >= first, "FIFO even when the delay shrinks");
        let Verdict::Queued(third) = l.enqueue(ms(200.0), vec![0u8; 100]) else {
            panic!()
        };
        assert!(
            third < ms(200.0) + ms(20.01) && third >= ms(220.0),
            "new delay in force: {third:?}"
        );
    }

    /// Bytes delivered in one second by a link whose own traffic is offered at twice its rate
    /// in 1 ms steps, beside `cross_bps` of cross traffic.
    fn delivered_beside(cross_bps: u64) -> (u64, Link<Vec<u8>>) {
        let mut p = params(100_000_000, 5, QueueLimit::Packets(100), 0.0);
        p.cross_bps = cross_bps;
        let mut l = Link::new(p, 1);
        let mut delivered = 0;
        for step in 0..1000 {
            let t = Duration::from_millis(step);
            for _ in 0..17 {
                l.enqueue(t, vec![0u8; 1500]);
            }
            while let Some((_, p)) = l.pop_due(t) {
                delivered += p.len() as u64;
            }
        }
        (delivered, l)
    }

    #[test]
    fn cross_traffic_takes_its_share_of_the_bottleneck_and_is_not_delivered() {
        let (alone, _) = delivered_beside(0);
        let (beside, l) = delivered_beside(60_000_000);
        // 100 Mbit/s less the cross traffic it accepts leaves about 40 (less the 5 ms delay); a
        // full queue drops cross packets as well as the link's own.
        let share = beside as f64 * 8.0 / 1e6;
        assert!(alone as f64 * 8.0 / 1e6 > 94.0);
        assert!(
            (36.0..=46.0).contains(&share),
            "{share} Mbit beside 60 of cross traffic"
        );
        let offered = l.stats.cross_bytes_in as f64 * 8.0 / 1e6;
        assert!(
            (59.0..=61.0).contains(&offered),
            "{offered} Mbit of cross traffic"
        );
        assert!(l.stats.cross_drops_queue > 0);
        let accepted = offered - (l.stats.cross_drops_queue * CROSS_PACKET) as f64 * 8.0 / 1e6;
        assert!(
            (94.0..=101.0).contains(&(share + accepted)),
            "{share} + {accepted} Mbit through a 100 Mbit/s bottleneck"
        );
        assert_eq!(
            l.stats.bytes_out, 0,
            "released packets are counted by the engine"
        );
    }

    #[test]
    fn cross_traffic_enters_at_its_own_times_whenever_the_link_looks() {
        // The same arrivals looked at once after 50 ms, or every millisecond, leave the same queue.
        let mut p = params(10_000_000, 0, QueueLimit::Packets(1000), 0.0);
        p.cross_bps = 8_000_000;
        let (mut once, mut often) = (Link::new(p, 1), Link::new(p, 1));
        for step in 0..50 {
            often.cross_until(Duration::from_millis(step));
        }
        let late = Duration::from_millis(50);
        assert_eq!(
            once.enqueue(late, vec![0u8; 1500]),
            often.enqueue(late, vec![0u8; 1500])
        );
        // After an idle hour only the last seconds are replayed, the rest is counted.
        let hour = Duration::from_secs(3600);
        assert!(matches!(
            once.enqueue(hour, vec![0u8; 1500]),
            Verdict::Queued(_)
        ));
        let offered = once.stats.cross_bytes_in as f64 * 8.0 / 8e6;
        assert!(
            (3599.0..=3601.0).contains(&offered),
            "{offered} s of cross traffic"
        );
    }

    #[test]
    fn release_lateness_is_accounted() {
        let mut s = LinkStats::default();
        s.released(ms(10.0), ms(10.5), 100);
        s.released(ms(11.0), ms(13.0), 100);
        assert_eq!(
            (s.late_max_us, s.late_sum_us, s.late_over_1ms, s.packets_out),
            (2000, 2500, 1, 2)
        );
    }

    #[test]
    fn bulk_phase_spans_first_to_last_data_packet() {
        let mut s = LinkStats::default();
        s.released(ms(1.0), ms(1.0), 60); // a command or an ACK
        s.released(ms(5.0), ms(5.0), 1500);
        s.released(ms(6.0), ms(6.0), 52);
        s.released(ms(905.0), ms(905.0), 1500);
        s.released(ms(906.0), ms(906.0), 52);
        assert_eq!(s.bulk_bytes, 3000);
        assert_eq!(s.bulk_phase(), Some(ms(900.0)));
    }
}
