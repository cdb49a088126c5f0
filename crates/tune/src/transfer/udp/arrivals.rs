//! The UDP receiver's books: a bitmap per segment of what arrived, what changed since the last
//! report, and the one-way delay seen. No I/O: the receive loop feeds it packet headers.
//! Bounded: only segments within [`WINDOW`] of the lowest unfinished one are accepted.

use super::ledger::WINDOW;
use fatpipe_proto::udp::{segment_len, DataHeader, Report, SegmentBits, SEGMENT, TRAIN};
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::time::Instant;

/// When a packet came, on this host's clock: when it arrived (the kernel's receive time where
/// it tells, else when it was read), which times the packet train and the reports; and when
/// the receiver read it, which gives the delay the sender sees as a queue: packets waiting in
/// the socket of a receiver that fell behind wait as surely as in a router's queue, and
/// unseen they overflowed it (a starved receiver dropped a fifth of a copy's packets while
/// the sender, seeing no queue, read the drops as the path's random loss).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Arrival {
    /// When it arrived.
    pub at: Instant,
    /// When this end read it.
    pub read: Instant,
}

/// What became of one packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Take {
    /// New data: write it.
    New,
    /// Already here.
    Duplicate,
    /// Not this transfer's (wrong token, past the end, or beyond the window).
    Foreign,
}

/// The receiver's books for one transfer.
pub struct Arrivals {
    token: u64,
    total: u64,
    /// Segments still missing packets (and completed ones until they are reported).
    segments: BTreeMap<u64, (Vec<u8>, u64)>,
    changed: BTreeSet<u64>,
    /// Complete segments at or above `low`.
    done: BTreeSet<u64>,
    /// Segments below this one are complete.
    low: u64,
    max_tx: u64,
    received: u64,
    foreign: u32,
    have: u64,
    /// Lowest one-way delay of the current report interval (wrapping µs), and those of the
    /// intervals of the last [`BASE_WINDOW_US`] (the lowest is the path's own delay: a window,
    /// not the whole transfer, so that a path whose delay grows is not read as a queue for good).
    interval_delay: Option<u32>,
    lows: VecDeque<(u64, u32)>,
    train: Train,
}

/// The arrivals of the first [`TRAIN`] transmissions (this end's clock, wrapping µs).
#[derive(Debug, Default)]
struct Train {
    first: Option<u32>,
    last: u32,
    count: u32,
    /// Its last transmission or a later one arrived: the train is over (one of it that comes
    /// after is not counted).
    over: bool,
    /// A report told it.
    told: bool,
}

/// How long the path's own one-way delay is remembered, µs.
pub const BASE_WINDOW_US: u64 = 3_000_000;

impl Arrivals {
    /// Books for `total` packets carrying `token`.
    pub fn new(token: u64, total: u64) -> Arrivals {
        Arrivals {
            token,
            total,
            segments: BTreeMap::new(),
            changed: BTreeSet::new(),
            done: BTreeSet::new(),
            low: 0,
            max_tx: 0,
            received: 0,
            foreign: 0,
            have: 0,
            interval_delay: None,
            lows: VecDeque::new(),
            train: Train::default(),
        }
    }

    /// Whether the packet train is over and no report told it yet: the sender's start-up
    /// waits for it.
    pub fn train_untold(&self) -> bool {
        self.train.over && !self.train.told
    }

    /// Whether every packet is here.
    pub fn complete(&self) -> bool {
        self.have >= self.total
    }

    /// Packets from the first on that are all here, as of the last report: the receive loop
    /// writes each packet as it books it, so a hash beside the transfer may read this far.
    pub fn in_order(&self) -> u64 {
        match self.complete() {
            true => self.total,
            false => self.low.saturating_mul(SEGMENT).min(self.total),
        }
    }

    /// Packets dropped as not this transfer's.
    pub fn foreign(&self) -> u32 {
        self.foreign
    }

    /// Books one packet that arrived at `now_us` and was read at `read_us` (this end's clock,
    /// wrapping microseconds; see [`Arrival`]).
    pub fn take(&mut self, h: &DataHeader, now_us: u32, read_us: u32) -> Take {
        let s = h.index / SEGMENT;
        if h.token != self.token || h.index >= self.total || s >= self.low.saturating_add(WINDOW) {
            self.foreign = self.foreign.saturating_add(1);
            return Take::Foreign;
        }
        self.received += 1;
        self.max_tx = self.max_tx.max(h.tx);
        if h.tx <= TRAIN && !self.train.over {
            self.train.first.get_or_insert(now_us);
            self.train.last = now_us;
            self.train.count += 1;
        }
        // The train's last: a receiver that started late, its train in the socket and the
        // sender waiting for the data connection to go on, need not wait for the next.
        self.train.over |= h.tx >= TRAIN;
        let delay = read_us.wrapping_sub(h.sent_us);
        // Delays compare by wrapping difference (the two clocks have unrelated origins).
        let lower = |a: Option<u32>| a.is_none_or(|b| (delay.wrapping_sub(b) as i32) < 0);
        if lower(self.interval_delay) {
            self.interval_delay = Some(delay);
        }
        if s < self.low || self.done.contains(&s) && !self.segments.contains_key(&s) {
            return Take::Duplicate;
        }
        let len = segment_len(s, self.total);
        let (bits, count) = self
            .segments
            .entry(s)
            .or_insert_with(|| (vec![0; len.div_ceil(8) as usize], 0));
        let i = (h.index % SEGMENT) as usize;
        let Some(byte) = bits.get_mut(i / 8) else {
            return Take::Foreign;
        };
        if *byte & (1 << (i % 8)) != 0 {
            return Take::Duplicate;
        }
        *byte |= 1 << (i % 8);
        *count += 1;
        if *count >= len {
            self.done.insert(s);
        }
        self.have += 1;
        self.changed.insert(s);
        Take::New
    }

    /// The report of what changed since the last one (at most the segments a report carries;
    /// the rest wait for the next); `written` is the bytes on disk so far, `at_us` this end's
    /// clock.
    pub fn report(&mut self, written: u64, at_us: u64) -> Report {
        let queue_us = match self.interval_delay.take() {
            Some(d) => {
                self.lows.push_back((at_us, d));
                while self
                    .lows
                    .front()
                    .is_some_and(|(t, _)| at_us.saturating_sub(*t) > BASE_WINDOW_US)
                {
                    self.lows.pop_front();
                }
                // The lowest: the furthest below this interval's by wrapping difference.
                let base = self
                    .lows
                    .iter()
                    .map(|(_, b)| *b)
                    .max_by_key(|b| d.wrapping_sub(*b) as i32)
                    .unwrap_or(d);
                (d.wrapping_sub(base) as i32).max(0) as u32
            }
            None => 0,
        };
        let take: Vec<u64> = self
            .changed
            .iter()
            .take(fatpipe_proto::udp::MAX_REPORT_SEGMENTS)
            .copied()
            .collect();
        let mut segments = Vec::with_capacity(take.len());
        for s in take {
            self.changed.remove(&s);
            if let Some((bits, _)) = self.segments.get(&s) {
                segments.push(SegmentBits {
                    segment: s,
                    bits: bits.clone(),
                });
            }
        }
        // Complete segments leave the books once reported.
        let len = |s: u64| segment_len(s, self.total);
        self.segments
            .retain(|&s, (_, count)| *count < len(s) || self.changed.contains(&s));
        while self.done.remove(&self.low) {
            self.low += 1;
        }
        Report {
            at_us,
            max_tx: self.max_tx,
            received: self.received,
            written,
            queue_us,
            foreign: self.foreign,
            train_packets: match self.train.over {
                true => {
                    self.train.told = true;
                    self.train.count
                }
                false => 0,
            },
            train_us: match (self.train.over, self.train.first) {
                (true, Some(first)) => self.train.last.wrapping_sub(first),
                _ => 0,
            },
            segments,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use super::super::test_header as h;

    #[test]
    fn books_new_duplicate_and_foreign_packets() {
        let mut a = Arrivals::new(7, 25_000);
        assert_eq!(a.take(&h(3, 1), 100, 100), Take::New);
        assert_eq!(a.take(&h(3, 2), 100, 100), Take::Duplicate);
        let wrong = DataHeader {
            token: 8,
            ..h(4, 3)
        };
        assert_eq!(a.take(&wrong, 100, 100), Take::Foreign);
        assert_eq!(
            a.take(&h(25_000, 4), 100, 100),
            Take::Foreign,
            "past the end"
        );
        let far = WINDOW * SEGMENT;
        let mut big = Arrivals::new(7, far * 2);
        assert_eq!(
            big.take(&h(far, 1), 0, 0),
            Take::Foreign,
            "beyond the window"
        );
        assert_eq!(a.foreign(), 2);
        let r = a.report(1442, 0);
        assert_eq!((r.max_tx, r.received, r.foreign), (2, 2, 2));
        assert_eq!(r.segments.len(), 1);
        assert!(r.segments[0].has(3) && !r.segments[0].has(4));
        assert!(
            a.report(1442, 0).segments.is_empty(),
            "nothing changed since"
        );
    }

    #[test]
    fn only_whole_segments_from_the_first_count_as_in_order_once_reported() {
        let total = 3 * SEGMENT;
        let mut a = Arrivals::new(7, total);
        // The second segment whole, the first but one packet.
        for i in (0..2 * SEGMENT).filter(|&i| i != 5) {
            a.take(&h(i, i + 1), 0, 0);
        }
        a.report(0, 0);
        assert_eq!(a.in_order(), 0, "a hole in the first segment");
        a.take(&h(5, 2 * SEGMENT + 1), 0, 0);
        assert_eq!(a.in_order(), 0, "not before the next report");
        a.report(0, 0);
        assert_eq!(a.in_order(), 2 * SEGMENT);
        for i in 2 * SEGMENT..total {
            a.take(&h(i, i + 2), 0, 0);
        }
        assert_eq!(a.in_order(), total, "complete");
    }

    #[test]
    fn completes_and_moves_the_window() {
        let total = 2 * SEGMENT + 5;
        let mut a = Arrivals::new(7, total);
        for i in 0..total {
            a.take(&h(i, i + 1), 0, 0);
        }
        assert!(a.complete());
        let r = a.report(0, 0);
        assert_eq!(r.segments.len(), 3);
        assert!(a.segments.is_empty());
        assert_eq!(a.take(&h(0, 1), 0, 0), Take::Duplicate);
    }

    #[test]
    fn the_train_is_reported_once_its_last_transmission_arrived() {
        let mut a = Arrivals::new(7, 1000);
        for tx in (1..TRAIN).filter(|&tx| tx != 5) {
            let at = 1_000 + 10 * tx as u32;
            // Read late, all at once: the train keeps its arrival times.
            a.take(&h(tx - 1, tx), at, 5_000);
        }
        assert!(!a.train_untold());
        let r = a.report(0, 0);
        assert_eq!((r.train_packets, r.train_us), (0, 0), "its last is to come");
        a.take(&h(TRAIN - 1, TRAIN), 1_000 + 10 * TRAIN as u32, 5_000);
        assert!(a.train_untold(), "a report is due");
        // The fifth, late, comes after the train is over: not counted.
        a.take(&h(4, 5), 9_000, 9_000);
        let r = a.report(0, 0);
        assert!(!a.train_untold());
        assert_eq!(r.train_packets as u64, TRAIN - 1);
        assert_eq!(r.train_us, 10 * (TRAIN as u32 - 1));
    }

    #[test]
    fn a_train_whose_last_was_lost_ends_with_a_later_transmission() {
        let mut a = Arrivals::new(7, 1000);
        for tx in 1..TRAIN {
            a.take(&h(tx - 1, tx), 10 * tx as u32, 5_000);
        }
        assert!(!a.train_untold());
        a.take(&h(TRAIN, TRAIN + 1), 9_000, 9_000);
        let r = a.report(0, 0);
        assert_eq!(
            (r.train_packets as u64, r.train_us),
            (TRAIN - 1, 10 * (TRAIN as u32 - 2))
        );
    }

    #[test]
    fn queueing_delay_is_the_interval_low_over_the_lowest_of_the_last_seconds() {
        let mut a = Arrivals::new(7, 100);
        // The sender's clock is far from ours: only differences count, across the wrap too.
        let sent = |i: u64, at: u32| DataHeader {
            sent_us: at,
            ..h(i, i + 1)
        };
        a.take(&sent(0, u32::MAX - 10), 1_000, 1_000);
        assert_eq!(a.report(0, 0).queue_us, 0);
        a.take(&sent(1, u32::MAX - 10), 6_000, 6_000);
        a.take(&sent(2, u32::MAX - 10), 4_000, 4_000);
        assert_eq!(a.report(0, 10_000).queue_us, 3_000);
        // The path's delay grew for good: after the window it is the path's, not a queue.
        a.take(&sent(3, u32::MAX - 10), 4_000, 4_000);
        assert_eq!(a.report(0, 2_000_000).queue_us, 3_000);
        a.take(&sent(4, u32::MAX - 10), 4_000, 4_000);
        assert_eq!(a.report(0, BASE_WINDOW_US + 20_000).queue_us, 0);
    }

    #[test]
    fn a_receiver_that_falls_behind_shows_as_a_queue() {
        let mut a = Arrivals::new(7, 10_000);
        let sent = |i: u64, at: u32| DataHeader {
            sent_us: at,
            ..h(i, i + 1)
        };
        // Read as they arrived, 1 ms after they left.
        for i in 0..10 {
            let at = 1_000 + 100 * i as u32;
            a.take(&sent(i, at - 1_000), at, at);
        }
        assert_eq!(a.report(0, 10_000).queue_us, 0);
        // They still arrive 1 ms after leaving, but the receiver reads each later than the
        // one before: 5 ms behind at the interval's best.
        for i in 10..20 {
            let at = 1_000 + 100 * i as u32;
            a.take(
                &sent(i, at - 1_000),
                at,
                at + 5_000 + 1_000 * (i as u32 - 10),
            );
        }
        assert_eq!(a.report(0, 20_000).queue_us, 5_000);
        // Caught up: no queue.
        a.take(&sent(20, 30_000), 31_000, 31_000);
        assert_eq!(a.report(0, 30_000).queue_us, 0);
    }
}
