//! Fuzzes a MODE E receiver: any byte string read as a sequence of block headers (data skipped
//! as a receiver would) and the GridFTP argument parsers. None may panic; an accepted data block
//! always lies inside the transfer's range.
#![no_main]

use fatpipe_proto::gridftp::{Cksm, Parallelism};
use fatpipe_proto::mode_e::{Action, Header, Reassembly, HEADER_LEN};
use fatpipe_proto::ranges::RangeSet;
use libfuzzer_sys::fuzz_target;

const LIMIT: u64 = 1 << 20;

fuzz_target!(|data: &[u8]| {
    let mut r = Reassembly::new(LIMIT);
    for chunk in data.chunks_exact(HEADER_LEN) {
        let mut b = [0u8; HEADER_LEN];
        b.copy_from_slice(chunk);
        match r.on_header(&Header::decode(&b)) {
            Ok(Action::Data { offset, count }) => {
                assert!(offset + count <= LIMIT);
                r.on_written(offset, count);
            }
            Ok(_) => {}
            Err(_) => break,
        }
    }
    let text = String::from_utf8_lossy(data);
    let _ = Parallelism::parse_opts(&text);
    let _ = Cksm::parse(&text);
    let _ = RangeSet::parse(&text);
});
