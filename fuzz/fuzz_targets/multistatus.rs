//! Fuzzes the reading of a PROPFIND answer (`fatpipe ls https://…`): whatever a server sends,
//! no panic, and every resource read has a path.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(all) = fatpipe_http::multistatus::parse(data) {
        assert!(all.iter().all(|r| !r.path.is_empty()));
    }
});
