//! Fuzzes what client certificates and a site's grid-mapfile bring to the HTTPS front-end
//! (`serve --gridmap`): whatever the bytes, no panic; a chain's proxies are counted within
//! its length; a grid-mapfile's accounts are names without spaces.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rustls::pki_types::{CertificateDer, UnixTime};

fuzz_target!(|data: &[u8]| {
    if let Ok(map) = std::str::from_utf8(data).map(fatpipe_http::gridmap::parse) {
        if let Ok(map) = map {
            assert!(map
                .values()
                .all(|a| !a.is_empty() && !a.contains(char::is_whitespace)));
        }
    }
    // The bytes as a chain of certificates, cut at 0xff.
    let chain: Vec<CertificateDer<'_>> = data
        .split(|&b| b == 0xff)
        .take(6)
        .map(CertificateDer::from)
        .collect();
    let refs: Vec<&CertificateDer<'_>> = chain.iter().collect();
    if let Ok(n) = fatpipe_net::tls::grid::check_proxies(&refs, UnixTime::now()) {
        assert!(n < refs.len().max(1));
    }
});
