//! `Range: bytes=…` (RFC 9110 §14): which parts of a file a GET wants.

use std::ops::Range;

/// Most ranges one request may ask for; more are answered with the whole file (a request
/// for thousands of tiny ranges costs the server more than the file).
pub const MAX_RANGES: usize = 64;

/// What a `Range` header asks of a file of a given size.
#[derive(Debug, PartialEq, Eq)]
pub enum Wanted {
    /// The whole file: no header, one the server does not understand or chooses to ignore.
    Whole,
    /// These byte ranges (non-empty, each within the file), in the order asked.
    Parts(Vec<Range<u64>>),
    /// None of the ranges overlaps the file: 416.
    Unsatisfiable,
}

/// The ranges `header` asks of a file of `size` bytes.
pub fn wanted(header: Option<&str>, size: u64) -> Wanted {
    let Some(spec) = header.and_then(|h| h.trim().strip_prefix("bytes=")) else {
        return Wanted::Whole;
    };
    let mut parts = Vec::new();
    for item in spec.split(',') {
        let Some(r) = one(item.trim(), size) else {
            return Wanted::Whole;
        };
        if let Some(r) = r {
            parts.push(r);
        }
        if parts.len() > MAX_RANGES {
            return Wanted::Whole;
        }
    }
    if parts.is_empty() {
        return Wanted::Unsatisfiable;
    }
    Wanted::Parts(parts)
}

/// One `first-last`, `first-` or `-suffix`: `None` when malformed, `Some(None)` when it
/// misses the file.
fn one(item: &str, size: u64) -> Option<Option<Range<u64>>> {
    let (first, last) = item.split_once('-')?;
    let num = |s: &str| -> Option<u64> {
        if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        s.parse().ok()
    };
    if first.is_empty() {
        let suffix = num(last)?;
        if suffix == 0 || size == 0 {
            return Some(None);
        }
        return Some(Some(size.saturating_sub(suffix)..size));
    }
    let first = num(first)?;
    let end = if last.is_empty() {
        size
    } else {
        let last = num(last)?;
        if last < first {
            return None;
        }
        last.saturating_add(1).min(size)
    };
    if first >= size {
        return Some(None);
    }
    Some(Some(first..end))
}

/// The `Content-Range` of part `r` of a file of `size` bytes.
pub fn content_range(r: &Range<u64>, size: u64) -> String {
    format!("bytes {}-{}/{size}", r.start, r.end.saturating_sub(1))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn ranges_as_rfc_9110_reads_them() {
        let one = |r: Range<u64>| Wanted::Parts(Vec::from([r]));
        assert_eq!(wanted(None, 10), Wanted::Whole);
        assert_eq!(wanted(Some("bytes=0-3"), 10), one(0..4));
        assert_eq!(wanted(Some("bytes=8-"), 10), one(8..10));
        assert_eq!(wanted(Some("bytes=-3"), 10), one(7..10));
        assert_eq!(wanted(Some("bytes=-30"), 10), one(0..10));
        assert_eq!(wanted(Some("bytes=5-100"), 10), one(5..10));
        assert_eq!(
            wanted(Some("bytes=0-0, 9-9"), 10),
            Wanted::Parts(vec![0..1, 9..10])
        );
        assert_eq!(wanted(Some("bytes=10-"), 10), Wanted::Unsatisfiable);
        assert_eq!(wanted(Some("bytes=-0"), 10), Wanted::Unsatisfiable);
        assert_eq!(wanted(Some("bytes=0-1"), 0), Wanted::Unsatisfiable);
        // Malformed: the whole file.
        assert_eq!(wanted(Some("bytes=3-1"), 10), Wanted::Whole);
        assert_eq!(wanted(Some("bytes=x-1"), 10), Wanted::Whole);
        assert_eq!(wanted(Some("items=0-1"), 10), Wanted::Whole);
        assert_eq!(wanted(Some("bytes=+1-2"), 10), Wanted::Whole);
        assert_eq!(content_range(&(0..4), 10), "bytes 0-3/10");
    }

    #[test]
    fn too_many_ranges_get_the_whole_file() {
        let many = (0..=MAX_RANGES)
            .map(|i| format!("{i}-{i}"))
            .collect::<Vec<_>>();
        let h = format!("bytes={}", many.join(","));
        assert_eq!(wanted(Some(&h), 1000), Wanted::Whole);
    }

    proptest! {
        /// Whatever the header, each part is non-empty and inside the file.
        #[test]
        fn parts_stay_inside_the_file(h in "bytes=[0-9,\\- ]{0,30}", size in 0u64..1000) {
            if let Wanted::Parts(ps) = wanted(Some(&h), size) {
                for p in ps {
                    prop_assert!(p.start < p.end && p.end <= size);
                }
            }
        }
    }
}
