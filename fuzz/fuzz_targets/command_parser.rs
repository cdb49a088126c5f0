//! Fuzzes the server's view of a client: line framing, then command parsing. Parsing must never
//! panic, and a parsed command must format to a line that parses back to itself.
#![no_main]

use fatpipe_proto::line::{Frame, LineFramer};
use fatpipe_proto::Command;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut framer = LineFramer::new(4096);
    for frame in framer.push(data) {
        if let Frame::Line(line) = frame {
            if let Ok(cmd) = Command::parse(&line) {
                let again = Command::parse(cmd.to_string().as_bytes());
                // Arguments are kept verbatim, so only the structured commands must roundtrip.
                if let (Command::Port(_) | Command::Eprt(_) | Command::Rest(_) | Command::Type(_), Ok(a)) = (&cmd, &again) {
                    assert_eq!(&cmd, a);
                }
            }
        }
    }
});
