//! The UDP sender's books: which packet went out with which transmission number, what the
//! receiver's bitmaps say has arrived, and what to send next (resends first). No I/O and no
//! clock: the sender loop feeds it reports and asks it for packets.
//!
//! A packet is lost when the receiver got something sent after it (a higher transmission
//! number) but not it; a resend is a new transmission. The books hold only the segments still
//! missing packets, at most [`WINDOW`] of them, so memory is bounded whatever the file's size.

use crate::rate::SegmentLoss;
use fatpipe_proto::udp::{segment_len, Report, SEGMENT};
use std::collections::{BTreeMap, VecDeque};

/// Most segments in flight: new packets wait while the lowest unfinished segment is this far
/// behind (64 × 10,000 packets ≈ 940 MB: several BDPs of a 10 Gbit/s, 200 ms path).
pub const WINDOW: u64 = 64;
/// A packet counts as lost only once this many later transmissions arrived (reordering).
const REORDER: u64 = 3;
/// `last_tx` of a packet waiting in the resend queue.
const QUEUED: u64 = u64::MAX;

/// One segment still missing packets.
struct Segment {
    len: u64,
    /// Per packet: its latest transmission number, [`QUEUED`], or 0 if never sent.
    last_tx: Vec<u64>,
    acked: Vec<u64>,
    acked_count: u64,
    /// Packets lost at least once.
    resent: Vec<u64>,
    lost_first: u64,
}

fn bit(words: &[u64], i: usize) -> bool {
    words.get(i / 64).is_some_and(|w| w & (1 << (i % 64)) != 0)
}

fn set_bit(words: &mut [u64], i: usize) -> bool {
    match words.get_mut(i / 64) {
        Some(w) if *w & (1 << (i % 64)) == 0 => {
            *w |= 1 << (i % 64);
            true
        }
        _ => false,
    }
}

impl Segment {
    fn new(len: u64) -> Segment {
        let words = len.div_ceil(64) as usize;
        Segment {
            len,
            last_tx: vec![0; len as usize],
            acked: vec![0; words],
            acked_count: 0,
            resent: vec![0; words],
            lost_first: 0,
        }
    }
}

/// A segment that has all its packets: its first pass's loss, and which packets that lost (its
/// packet-loss signature).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Retired {
    /// The count, for the rate controller.
    pub loss: SegmentLoss,
    /// Indices within the segment of the packets lost on their first send.
    pub lost: Vec<u32>,
}

/// A malformed or impossible report: an error for the transfer, never a crash.
#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
pub enum LedgerError {
    /// A bitmap of a segment the transfer does not have, or too long for it.
    #[error("the receiver reported segment {0}, which this transfer does not have")]
    NoSuchSegment(u64),
    /// A bitmap marks a packet that was never sent.
    #[error("the receiver reported packet {0} as arrived before it was sent")]
    NeverSent(u64),
}

/// The sender's books for one transfer.
pub struct Ledger {
    total: u64,
    next_new: u64,
    next_tx: u64,
    segments: BTreeMap<u64, Segment>,
    resend: VecDeque<u64>,
    /// Transmissions so far (the seed's T; `total` is its N).
    pub transmissions: u64,
}

impl Ledger {
    /// Books for a transfer of `total` packets.
    pub fn new(total: u64) -> Ledger {
        Ledger {
            total,
            next_new: 0,
            next_tx: 1,
            segments: BTreeMap::new(),
            resend: VecDeque::new(),
            transmissions: 0,
        }
    }

    /// Whether the receiver has every packet.
    pub fn complete(&self) -> bool {
        self.next_new >= self.total && self.segments.is_empty()
    }

    /// Whether every packet has gone out at least once.
    pub fn all_sent_once(&self) -> bool {
        self.next_new >= self.total
    }

    /// The next transmission number (one more than the last one given out).
    pub fn next_tx(&self) -> u64 {
        self.next_tx
    }

    /// Packets sent but not known to have arrived.
    pub fn missing(&self) -> u64 {
        self.segments.values().map(|s| s.len - s.acked_count).sum()
    }

    /// The next packet to send, resends first (new ones only when `new`); `None` when nothing
    /// may go now.
    pub fn next_packet(&mut self, new: bool) -> Option<u64> {
        while let Some(i) = self.resend.pop_front() {
            let (s, at) = (i / SEGMENT, (i % SEGMENT) as usize);
            if let Some(seg) = self.segments.get(&s) {
                if !bit(&seg.acked, at) {
                    return Some(i);
                }
            }
        }
        if !new {
            return None;
        }
        let low = self.segments.keys().next().copied().unwrap_or(u64::MAX);
        let limit = low.saturating_add(WINDOW).saturating_mul(SEGMENT);
        if self.next_new >= self.total || self.next_new >= limit {
            return None;
        }
        let i = self.next_new;
        self.next_new += 1;
        let s = i / SEGMENT;
        self.segments
            .entry(s)
            .or_insert_with(|| Segment::new(segment_len(s, self.total)));
        Some(i)
    }

    /// Up to `n` packets for one batch, as [`Ledger::next_packet`] gives them, except that
    /// when the last packet is shorter than the others (`short_last`) it goes last and at most
    /// once: segmentation offload cuts a batch into equal parts, of which only the last may be
    /// shorter (two short copies in one batch would arrive as one wrong-sized packet, again
    /// and again). Its second copy waits for the next batch.
    pub fn next_batch(&mut self, n: usize, new: bool, short_last: bool) -> Vec<u64> {
        let last = self.total.saturating_sub(1);
        let mut picked = Vec::with_capacity(n);
        let mut short = None;
        while picked.len() + usize::from(short.is_some()) < n {
            match self.next_packet(new) {
                Some(i) if short_last && i == last => {
                    if short.is_some() {
                        self.resend.push_front(i);
                        break;
                    }
                    short = Some(i);
                }
                Some(i) => picked.push(i),
                None => break,
            }
        }
        picked.extend(short);
        picked
    }

    /// Records that packet `index` went out; returns its transmission number.
    pub fn sent(&mut self, index: u64) -> u64 {
        let tx = self.next_tx;
        self.next_tx += 1;
        self.transmissions += 1;
        if let Some(seg) = self.segments.get_mut(&(index / SEGMENT)) {
            if let Some(t) = seg.last_tx.get_mut((index % SEGMENT) as usize) {
                *t = tx;
            }
        }
        tx
    }

    /// Takes a report: marks what arrived, queues what was lost, and returns the segments that
    /// are now complete with their first pass's loss.
    pub fn on_report(&mut self, r: &Report) -> Result<Vec<Retired>, LedgerError> {
        for b in &r.segments {
            let Some(seg) = self.segments.get_mut(&b.segment) else {
                // A segment already complete (or not yet begun, which is an error below).
                if b.segment.saturating_mul(SEGMENT) >= self.next_new {
                    return Err(LedgerError::NoSuchSegment(b.segment));
                }
                continue;
            };
            if b.bits.len() as u64 > seg.len.div_ceil(8) {
                return Err(LedgerError::NoSuchSegment(b.segment));
            }
            for i in (0..seg.len as usize).filter(|&i| b.has(i)) {
                if seg.last_tx[i] == 0 {
                    return Err(LedgerError::NeverSent(b.segment * SEGMENT + i as u64));
                }
                if set_bit(&mut seg.acked, i) {
                    seg.acked_count += 1;
                }
            }
        }
        // At the tail (every packet out once) nothing later would show that a resend was lost
        // but the timer, a round trip or more later: resends go twice there.
        let copies = if self.all_sent_once() { 2 } else { 1 };
        self.find_lost(r.max_tx.saturating_sub(REORDER), copies);
        Ok(self.retire())
    }

    /// Queues every packet not known to have arrived whose latest send is older than
    /// transmission `before`, `copies` times each (the tail of a transfer: nothing later
    /// arrives to show the loss, so a resend is worth sending twice).
    pub fn find_lost(&mut self, before: u64, copies: usize) {
        for (&s, seg) in self.segments.iter_mut() {
            for i in 0..seg.len as usize {
                let t = seg.last_tx[i];
                if t == 0 || t == QUEUED || t >= before || bit(&seg.acked, i) {
                    continue;
                }
                seg.last_tx[i] = QUEUED;
                if set_bit(&mut seg.resent, i) {
                    seg.lost_first += 1;
                }
                for _ in 0..copies.max(1) {
                    self.resend.push_back(s * SEGMENT + i as u64);
                }
            }
        }
    }

    /// Drops the segments that have all their packets.
    fn retire(&mut self) -> Vec<Retired> {
        let done: Vec<u64> = self
            .segments
            .iter()
            .filter(|(_, seg)| seg.acked_count >= seg.len)
            .map(|(&s, _)| s)
            .collect();
        done.into_iter()
            .filter_map(|s| self.segments.remove(&s).map(|seg| (s, seg)))
            .map(|(segment, seg)| Retired {
                loss: SegmentLoss {
                    segment,
                    packets: seg.len,
                    lost: seg.lost_first,
                },
                lost: (0..seg.len as usize)
                    .filter(|&i| bit(&seg.resent, i))
                    .map(|i| i as u32)
                    .collect(),
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use fatpipe_proto::udp::SegmentBits;

    fn bits(segment: u64, len: usize, have: impl Fn(usize) -> bool) -> SegmentBits {
        let mut bits = vec![0u8; len.div_ceil(8)];
        for i in (0..len).filter(|&i| have(i)) {
            bits[i / 8] |= 1 << (i % 8);
        }
        SegmentBits { segment, bits }
    }

    fn send_all(l: &mut Ledger) -> Vec<u64> {
        let mut sent = Vec::new();
        while let Some(i) = l.next_packet(true) {
            l.sent(i);
            sent.push(i);
        }
        sent
    }

    #[test]
    fn resends_exactly_the_packets_missing_below_the_highest_arrival() {
        let mut l = Ledger::new(100);
        assert_eq!(send_all(&mut l), (0..100).collect::<Vec<_>>());
        // Packets 10 and 20 lost; the last arrival is transmission 100 (packet 99).
        let r = Report {
            max_tx: 100,
            segments: vec![bits(0, 100, |i| i != 10 && i != 20)],
            ..Report::default()
        };
        assert_eq!(l.on_report(&r), Ok(vec![]));
        // Every packet is out once: each resend goes twice.
        assert_eq!(send_all(&mut l), vec![10, 10, 20, 20]);
        assert!(!l.complete());
        // The resends arrive: the segment is complete, two of its packets lost once.
        let r = Report {
            max_tx: 102,
            segments: vec![bits(0, 100, |_| true)],
            ..Report::default()
        };
        let done = l.on_report(&r).unwrap_or_default();
        assert_eq!(
            done,
            vec![Retired {
                loss: SegmentLoss {
                    segment: 0,
                    packets: 100,
                    lost: 2
                },
                lost: vec![10, 20]
            }]
        );
        assert!(l.complete());
        assert_eq!(l.transmissions, 104);
    }

    #[test]
    fn packets_sent_after_the_last_arrival_are_not_lost_yet() {
        let mut l = Ledger::new(50);
        send_all(&mut l);
        let r = Report {
            max_tx: 20,
            segments: vec![bits(0, 50, |i| i < 20)],
            ..Report::default()
        };
        l.on_report(&r).unwrap_or_default();
        assert_eq!(l.next_packet(true), None, "21..50 are in flight, not lost");
        // At the tail, nothing later arrives: the sender declares them lost by age.
        l.find_lost(l.next_tx(), 1);
        assert_eq!(send_all(&mut l), (20..50).collect::<Vec<_>>());
        // Twice each, when asked.
        l.find_lost(l.next_tx(), 2);
        assert_eq!(send_all(&mut l).len(), 60);
    }

    #[test]
    fn a_lost_resend_is_resent_again_and_counted_once() {
        let mut l = Ledger::new(10);
        send_all(&mut l);
        let r = Report {
            max_tx: 10,
            segments: vec![bits(0, 10, |i| i != 0)],
            ..Report::default()
        };
        l.on_report(&r).unwrap_or_default();
        assert_eq!(send_all(&mut l), vec![0, 0], "at the tail, twice");
        l.find_lost(l.next_tx(), 1);
        assert_eq!(send_all(&mut l), vec![0]);
        let r = Report {
            max_tx: 13,
            segments: vec![bits(0, 10, |_| true)],
            ..Report::default()
        };
        let done = l.on_report(&r).unwrap_or_default();
        assert_eq!((done[0].loss.lost, &done[0].lost[..]), (1, &[0][..]));
    }

    #[test]
    fn new_packets_wait_for_the_window() {
        let total = (WINDOW + 2) * SEGMENT;
        let mut l = Ledger::new(total);
        let sent = send_all(&mut l);
        assert_eq!(sent.len() as u64, WINDOW * SEGMENT);
        // The first segment arrived; the rest are in flight.
        let r = Report {
            max_tx: SEGMENT,
            segments: vec![bits(0, SEGMENT as usize, |_| true)],
            ..Report::default()
        };
        assert_eq!(l.on_report(&r).map(|d| d.len()), Ok(1));
        assert_eq!(send_all(&mut l).len() as u64, SEGMENT);
    }

    #[test]
    fn a_short_last_packet_goes_once_per_batch_and_last() {
        let mut l = Ledger::new(10);
        send_all(&mut l);
        // Nothing reported at the tail: every packet is queued twice (0, 0, 1, 1, …, 9, 9).
        l.find_lost(l.next_tx(), 2);
        let batch = l.next_batch(32, true, true);
        assert_eq!(batch.len(), 19);
        assert_eq!(
            (batch[18], batch.iter().filter(|&&i| i == 9).count()),
            (9, 1)
        );
        assert_eq!(
            l.next_batch(32, true, true),
            vec![9],
            "its second copy in the next batch"
        );
        // Without a short packet both copies of every packet may share a batch.
        let mut l = Ledger::new(10);
        send_all(&mut l);
        l.find_lost(l.next_tx(), 2);
        assert_eq!(l.next_batch(32, true, false).len(), 20);
    }

    #[test]
    fn impossible_reports_are_errors() {
        let mut l = Ledger::new(10);
        l.next_packet(true).map(|i| l.sent(i));
        let r = Report {
            max_tx: 1,
            segments: vec![bits(0, 10, |i| i == 5)],
            ..Report::default()
        };
        assert_eq!(l.on_report(&r), Err(LedgerError::NeverSent(5)));
        let r = Report {
            segments: vec![bits(7, 10, |_| true)],
            ..Report::default()
        };
        assert_eq!(l.on_report(&r), Err(LedgerError::NoSuchSegment(7)));
    }
}
