//! Sets of byte ranges, written `0-1000,2000-3000` as in GridFTP's `111 Range Marker` replies
//! and the `REST` ranges that resume a MODE E transfer.

use std::collections::BTreeMap;
use std::fmt;

/// Disjoint, merged half-open byte ranges `[start, end)`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RangeSet {
    /// start → end, never overlapping or touching.
    ranges: BTreeMap<u64, u64>,
}

impl RangeSet {
    /// Adds `[start, end)`, merging with neighbours it overlaps or touches.
    pub fn insert(&mut self, start: u64, end: u64) {
        if start >= end {
            return;
        }
        let (mut s, mut e) = (start, end);
        // The range starting at or before `start` may reach it.
        if let Some((&ps, &pe)) = self.ranges.range(..=s).next_back() {
            if pe >= s {
                s = ps;
                e = e.max(pe);
                self.ranges.remove(&ps);
            }
        }
        let inside: Vec<(u64, u64)> = self.ranges.range(s..=e).map(|(&a, &b)| (a, b)).collect();
        for (a, b) in inside {
            e = e.max(b);
            self.ranges.remove(&a);
        }
        self.ranges.insert(s, e);
    }

    /// Adds every range of `other`, moved by `shift` bytes (`ESTO A`'s base; 0 for a plain
    /// union).
    pub fn insert_all(&mut self, other: &RangeSet, shift: u64) {
        for (s, e) in other.iter() {
            self.insert(s.saturating_add(shift), e.saturating_add(shift));
        }
    }

    /// Total bytes covered.
    pub fn len(&self) -> u64 {
        self.ranges.iter().map(|(s, e)| e - s).sum()
    }

    /// Whether no byte is covered.
    pub fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }

    /// The ranges in order.
    pub fn iter(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.ranges.iter().map(|(&s, &e)| (s, e))
    }

    /// Separate ranges held (a measure of fragmentation).
    pub fn count(&self) -> usize {
        self.ranges.len()
    }

    /// Bytes held from offset 0 without a gap: how far a stream-mode resume may start.
    pub fn prefix(&self) -> u64 {
        self.ranges.get(&0).copied().unwrap_or(0)
    }

    /// The first `n` ranges: a subset, so still true of what is held, in bounded space.
    pub fn first(&self, n: usize) -> RangeSet {
        RangeSet {
            ranges: self.ranges.iter().take(n).map(|(&s, &e)| (s, e)).collect(),
        }
    }

    /// The ranges below `end` only (a file cut to `end` bytes holds these).
    pub fn below(&self, end: u64) -> RangeSet {
        let mut out = RangeSet::default();
        for (s, e) in self.iter().filter(|(s, _)| *s < end) {
            out.insert(s, e.min(end));
        }
        out
    }

    /// The parts of `[start, end)` not covered: what is still to be sent.
    pub fn gaps(&self, start: u64, end: u64) -> Vec<(u64, u64)> {
        let mut out = Vec::new();
        let mut at = start;
        for (s, e) in self.iter() {
            if e <= at {
                continue;
            }
            if s >= end {
                break;
            }
            if s > at {
                out.push((at, s.min(end)));
            }
            at = at.max(e);
        }
        if at < end {
            out.push((at, end));
        }
        out
    }

    /// Parses `a-b,c-d` (the form of `111 Range Marker` and `REST` in MODE E).
    pub fn parse(s: &str) -> Option<RangeSet> {
        let mut set = RangeSet::default();
        if s.trim().is_empty() {
            return None;
        }
        for part in s.trim().split(',') {
            let (a, b) = part.trim().split_once('-')?;
            let (a, b): (u64, u64) = (a.trim().parse().ok()?, b.trim().parse().ok()?);
            if a > b {
                return None;
            }
            set.insert(a, b);
        }
        Some(set)
    }
}

impl fmt::Display for RangeSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, (s, e)) in self.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{s}-{e}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn merges_touching_and_overlapping_ranges() {
        let mut r = RangeSet::default();
        r.insert(10, 20);
        r.insert(30, 40);
        assert_eq!(r.to_string(), "10-20,30-40");
        r.insert(20, 30);
        assert_eq!(r.to_string(), "10-40");
        r.insert(0, 5);
        r.insert(3, 12);
        assert_eq!(r.to_string(), "0-40");
        assert_eq!(r.len(), 40);
        assert_eq!(r.gaps(0, 50), vec![(40, 50)]);
    }

    #[test]
    fn parse_reads_markers_and_refuses_garbage() {
        let r = RangeSet::parse("0-100, 200-300").unwrap();
        assert_eq!(r.gaps(0, 400), vec![(100, 200), (300, 400)]);
        assert_eq!(RangeSet::parse("5-1"), None);
        assert_eq!(RangeSet::parse("x"), None);
        assert_eq!(RangeSet::parse("1-2,"), None);
    }

    #[test]
    fn below_cuts_at_the_end() {
        let r = RangeSet::parse("0-10,20-30,40-50").unwrap();
        assert_eq!(r.below(25).to_string(), "0-10,20-25");
        assert_eq!(r.below(20).to_string(), "0-10");
        assert_eq!(r.below(100), r);
        assert!(r.below(0).is_empty());
    }

    #[test]
    fn insert_all_moves_and_merges() {
        let mut a = RangeSet::parse("0-10").unwrap();
        a.insert_all(&RangeSet::parse("0-5,10-20").unwrap(), 10);
        assert_eq!(a.to_string(), "0-15,20-30");
    }

    proptest! {
        #[test]
        fn covers_exactly_the_inserted_bytes(
            rs in proptest::collection::vec((0u64..200, 0u64..50), 0..20)
        ) {
            let mut set = RangeSet::default();
            let mut bytes = [false; 250];
            for (s, l) in rs {
                set.insert(s, s + l);
                for b in &mut bytes[s as usize..(s + l) as usize] { *b = true; }
            }
            prop_assert_eq!(set.len(), bytes.iter().filter(|b| **b).count() as u64);
            let gaps: u64 = set.gaps(0, 250).iter().map(|(a, b)| b - a).sum();
            prop_assert_eq!(gaps + set.len(), 250);
            prop_assert_eq!(RangeSet::parse(&set.to_string()).unwrap_or_default(), set.clone());
            // The prefix is held without a gap, and the byte after it is not.
            let p = set.prefix() as usize;
            prop_assert!(bytes[..p].iter().all(|b| *b));
            prop_assert!(p == 250 || !bytes[p]);
            // A union with itself is itself.
            let mut twice = set.clone();
            twice.insert_all(&set, 0);
            prop_assert_eq!(&twice, &set);
            // A bounded subset holds nothing the set does not.
            let sub = set.first(2);
            prop_assert!(sub.count() <= 2);
            prop_assert!(sub.iter().all(|(a, b)| set.gaps(a, b).is_empty()));
        }
    }
}
