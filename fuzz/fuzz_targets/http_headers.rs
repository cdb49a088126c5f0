//! Fuzzes what the HTTPS front-end reads from a request before touching anything: the target
//! path, `Range`, `Want-Digest`, `Digest`, a token's `scope` and a `Destination`. None may
//! panic; a path stays inside the tree's grammar and every range inside the file.
#![no_main]

use fatpipe_http::range::{wanted, Wanted};
use fatpipe_proto::gridftp::ChecksumAlg;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    if let Ok(v) = fatpipe_http::paths::vpath(&text) {
        assert!(v.components().all(|c| !c.is_empty() && c != "." && c != ".." && !c.contains('/')));
        assert_eq!(fatpipe_http::paths::vpath(&fatpipe_http::paths::href(&v, false)).ok(), Some(v));
    }
    let size = data.first().map_or(0, |&b| u64::from(b) * 977);
    if let Wanted::Parts(parts) = wanted(Some(&text), size) {
        assert!(parts.iter().all(|r| r.start < r.end && r.end <= size));
    }
    let _ = fatpipe_http::digest::chosen(&text);
    for alg in ChecksumAlg::ALL {
        let _ = fatpipe_http::digest::value_in(&text, alg);
    }
    let _ = fatpipe_http::token::parse_scopes(&text);
    let _ = fatpipe_http::dav::target(&text, Some("localhost:8443"));
});
