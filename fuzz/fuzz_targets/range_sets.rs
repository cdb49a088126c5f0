//! Fuzzes the range lists that `REST` (MODE E), `111 Range Marker` and the partial-file record
//! carry: parsing never panics, a parsed set prints back to itself, its prefix is held, and a
//! bounded subset claims nothing the set does not.
#![no_main]

use fatpipe_proto::ranges::RangeSet;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    if let Some(set) = RangeSet::parse(&text) {
        if !set.is_empty() {
            assert_eq!(RangeSet::parse(&set.to_string()), Some(set.clone()));
        }
        assert!(set.gaps(0, set.prefix()).is_empty());
        let sub = set.first(3);
        assert!(sub.iter().all(|(a, b)| set.gaps(a, b).is_empty()));
    }
});
