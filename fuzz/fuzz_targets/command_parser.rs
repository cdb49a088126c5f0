//! Fuzzes the server's view of a client: line framing, then command parsing. Parsing must never
//! panic, a parsed command never holds a line break (one line is one command), and whatever the
//! client would send (`to_wire`) frames as exactly one line that parses back to the command.
#![no_main]

use fatpipe_proto::line::{Frame, LineFramer};
use fatpipe_proto::Command;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut framer = LineFramer::new(4096);
    for frame in framer.push(data) {
        if let Frame::Line(line) = frame {
            if let Ok(cmd) = Command::parse(&line) {
                assert!(!line.windows(2).any(|w| w == b"\r\n"));
                assert!(!line.contains(&b'\n') && !line.contains(&b'\r'));
                let again = Command::parse(cmd.to_string().as_bytes());
                // Arguments are kept verbatim, so only the structured commands must roundtrip.
                if let (Command::Port(_) | Command::Eprt(_) | Command::Rest(_) | Command::Type(_), Ok(a)) = (&cmd, &again) {
                    assert_eq!(&cmd, a);
                }
            }
        }
    }
    // The client side: a name from anywhere (a file, a URL, a listing) is sent as one command
    // or refused.
    let name = String::from_utf8_lossy(data).into_owned();
    if let Ok(wire) = Command::Stor(name).to_wire() {
        let frames = LineFramer::new(1 << 20).push(&wire);
        assert_eq!(frames.len(), 1);
    }
});
