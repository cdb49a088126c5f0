//! Fuzzes the UDP channel's wire formats: any byte string read as a run of feedback messages,
//! as a data packet, and as a `SITE SETNETSTACK` or `SITE UDPREADY` argument. None may panic; a message that
//! decodes encodes back to exactly the bytes it came from.
#![no_main]

use fatpipe_proto::udp::{DataHeader, Message, NetStack, UdpReady};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut rest = data;
    while let Ok(Some((m, used))) = Message::decode(rest) {
        assert!(used <= rest.len());
        assert_eq!(m.encode(), &rest[..used]);
        rest = &rest[used..];
    }
    if let Some((h, payload)) = DataHeader::parse(data) {
        assert_eq!(payload.len() + 28, data.len());
        let mut head = [0u8; 28];
        h.write(&mut head);
        assert_eq!(&head[..], &data[..28]);
    }
    let text = String::from_utf8_lossy(data);
    let _ = NetStack::parse(&text);
    if let Ok(r) = UdpReady::parse(&text) {
        assert_eq!(UdpReady::parse(&r.to_string()), Ok(r));
    }
});
