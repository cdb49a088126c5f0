//! Fuzzes the server's view of the dynamic-buffer extension: `OPTS DRS` arguments, tuning mode
//! names and `SBUF` reply texts. None may panic on any input.
#![no_main]

use fatpipe_proto::drs::{parse_sbuf_text, DrsOpts};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    if let Ok(o) = DrsOpts::parse(&text) {
        let _ = o.tuning.as_deref().map(fatpipe_tune::Tuning::parse);
    }
    let _ = parse_sbuf_text(&text);
});
