//! Fuzzes the client's view of a server: reply assembly and the parsers of reply texts and
//! listings. None of them may panic on any input.
#![no_main]

use fatpipe_proto::{addr, listing, reply::ReplyParser};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let mut parser = ReplyParser::default();
    for line in text.lines() {
        let _ = parser.push_line(line);
        let _ = addr::parse_pasv_reply(line);
        let _ = addr::parse_epsv_reply(line);
        let _ = listing::parse_list_line(line);
        let _ = listing::parse_mlsx(line);
    }
});
