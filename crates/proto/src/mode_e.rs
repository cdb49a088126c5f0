//! GridFTP extended block mode (`MODE E`, GFD.20 §3): the block header and the receiver's
//! bookkeeping of one transfer spread over several data connections.
//!
//! Every block starts with a 17-byte header: an 8-bit descriptor, a 64-bit byte count and a
//! 64-bit offset (big-endian). Each connection ends its part with an EOD block; one connection
//! carries the EOF block, whose offset field is the number of EODs the receiver must see.

use crate::ranges::RangeSet;

/// Length of a block header on the wire.
pub const HEADER_LEN: usize = 17;
/// Descriptor bit: end of record (records are not used with `STRU F`).
pub const EOR: u8 = 128;
/// Descriptor bit: end of file; the header's offset is the expected EOD count.
pub const EOF: u8 = 64;
/// Descriptor bit: the data may be damaged.
pub const SUSPECT: u8 = 32;
/// Descriptor bit: restart marker.
pub const RESTART: u8 = 16;
/// Descriptor bit: end of data on this connection for this transfer.
pub const EOD: u8 = 8;
/// Descriptor bit: the sender closes this connection after this block.
pub const CLOSE: u8 = 4;

/// Largest data block a receiver accepts (a sender that asks for more is broken or hostile).
pub const MAX_BLOCK: u64 = 64 << 20;
/// Most data connections one transfer may announce in its EOF block.
pub const MAX_STREAMS: u64 = 1024;

/// One block header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    /// Descriptor bits ([`EOF`], [`EOD`], [`CLOSE`], …).
    pub descriptor: u8,
    /// Bytes of data following the header.
    pub count: u64,
    /// Where the data belongs in the file; in an EOF block, the EOD count.
    pub offset: u64,
}

impl Header {
    /// A data block of `count` bytes at file offset `offset`.
    pub fn data(offset: u64, count: u64) -> Header {
        Header {
            descriptor: 0,
            count,
            offset,
        }
    }

    /// The last block on a connection; `close` says the sender will close it.
    pub fn eod(close: bool) -> Header {
        Header {
            descriptor: if close { EOD | CLOSE } else { EOD },
            count: 0,
            offset: 0,
        }
    }

    /// The EOF block: the receiver is done after `eods` EOD blocks.
    pub fn eof(eods: u64) -> Header {
        Header {
            descriptor: EOF,
            count: 0,
            offset: eods,
        }
    }

    /// The 17 bytes on the wire.
    pub fn encode(&self) -> [u8; HEADER_LEN] {
        let mut b = [0u8; HEADER_LEN];
        b[0] = self.descriptor;
        b[1..9].copy_from_slice(&self.count.to_be_bytes());
        b[9..17].copy_from_slice(&self.offset.to_be_bytes());
        b
    }

    /// Reads a header from its 17 bytes (every byte string of that length is a header).
    pub fn decode(b: &[u8; HEADER_LEN]) -> Header {
        let mut count = [0u8; 8];
        let mut offset = [0u8; 8];
        count.copy_from_slice(&b[1..9]);
        offset.copy_from_slice(&b[9..17]);
        Header {
            descriptor: b[0],
            count: u64::from_be_bytes(count),
            offset: u64::from_be_bytes(offset),
        }
    }

    /// Whether a descriptor bit is set.
    pub fn has(&self, bit: u8) -> bool {
        self.descriptor & bit != 0
    }
}

/// Why a received block is not acceptable.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BlockError {
    /// Records, restart markers inside the data or suspect data: not part of `STRU F` transfers.
    #[error("unsupported MODE E descriptor {0:#04x}")]
    Descriptor(u8),
    /// A block larger than [`MAX_BLOCK`].
    #[error("MODE E block of {0} bytes is larger than the {MAX_BLOCK}-byte limit")]
    TooLarge(u64),
    /// Offset plus count beyond 2^64.
    #[error("MODE E block at {0} overflows the file offset")]
    Overflow(u64),
    /// A data block outside the range this transfer may write.
    #[error("MODE E block {start}-{end} is outside the transfer's range up to {limit}")]
    OutOfRange {
        /// First byte.
        start: u64,
        /// One past the last byte.
        end: u64,
        /// One past the last byte allowed.
        limit: u64,
    },
    /// An EOF block with a zero or absurd EOD count, or a second one that disagrees.
    #[error("MODE E EOF block announces {0} data connections")]
    EodCount(u64),
    /// The blocks left more separate holes than a real sender does ([`MAX_FRAGMENTS`]).
    #[error("MODE E blocks leave more than {MAX_FRAGMENTS} separate ranges")]
    Fragmented,
    /// More EOD blocks than the EOF block announced.
    #[error("MODE E: {seen} EOD blocks but the EOF block announced {expected}")]
    TooManyEods {
        /// EODs received.
        seen: u64,
        /// EODs announced.
        expected: u64,
    },
}

/// Most separate byte ranges a transfer may hold at once. Real senders (any number of streams,
/// blocks of a MiB or a few KiB) leave a few gaps per stream; a sender of one-byte blocks at
/// every other offset would make the receiver's bookkeeping and markers grow without bound.
pub const MAX_FRAGMENTS: usize = 16_384;

/// What a receiver does with a header it accepted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Read `count` bytes and write them at `offset`.
    Data {
        /// File offset.
        offset: u64,
        /// Bytes that follow.
        count: u64,
    },
    /// This connection has no more data for this transfer; `close` if the sender closes it.
    EndOfData {
        /// The sender will close the connection.
        close: bool,
    },
    /// Nothing to do (an EOF block without data).
    Nothing,
}

/// The receiver's view of one MODE E transfer across all its connections: EODs counted,
/// the EOF block's announcement, and the byte ranges received (for `111 Range Marker`s).
#[derive(Debug, Clone)]
pub struct Reassembly {
    limit: u64,
    eods: u64,
    expected: Option<u64>,
    received: RangeSet,
}

impl Reassembly {
    /// A transfer that may write bytes below `limit` (`u64::MAX` for an unbounded upload).
    pub fn new(limit: u64) -> Reassembly {
        Reassembly {
            limit,
            eods: 0,
            expected: None,
            received: RangeSet::default(),
        }
    }

    /// Takes one header from any connection: what to do next, or why the transfer is broken.
    pub fn on_header(&mut self, h: &Header) -> Result<Action, BlockError> {
        if h.has(EOR | SUSPECT | RESTART) {
            return Err(BlockError::Descriptor(h.descriptor));
        }
        if h.has(EOF) {
            if h.offset == 0 || h.offset > MAX_STREAMS {
                return Err(BlockError::EodCount(h.offset));
            }
            if self.expected.is_some_and(|e| e != h.offset) {
                return Err(BlockError::EodCount(h.offset));
            }
            self.expected = Some(h.offset);
            self.check_eods()?;
        }
        let action = if h.count > 0 {
            if h.count > MAX_BLOCK {
                return Err(BlockError::TooLarge(h.count));
            }
            let end = h
                .offset
                .checked_add(h.count)
                .ok_or(BlockError::Overflow(h.offset))?;
            if h.has(EOF) || end > self.limit {
                return Err(BlockError::OutOfRange {
                    start: h.offset,
                    end,
                    limit: self.limit,
                });
            }
            if self.received.count() >= MAX_FRAGMENTS {
                return Err(BlockError::Fragmented);
            }
            Action::Data {
                offset: h.offset,
                count: h.count,
            }
        } else {
            Action::Nothing
        };
        if h.has(EOD) {
            self.eods += 1;
            self.check_eods()?;
            if let Action::Data { .. } = action {
                // Data and EOD in one block: the caller reads the data, then ends the stream.
                return Ok(action);
            }
            return Ok(Action::EndOfData {
                close: h.has(CLOSE),
            });
        }
        Ok(action)
    }

    /// Records that `count` bytes at `offset` were written.
    pub fn on_written(&mut self, offset: u64, count: u64) {
        self.received.insert(offset, offset.saturating_add(count));
    }

    /// Whether the EOF block came and every connection has ended its part.
    pub fn is_complete(&self) -> bool {
        self.expected == Some(self.eods)
    }

    /// Byte ranges received so far.
    pub fn received(&self) -> &RangeSet {
        &self.received
    }

    fn check_eods(&self) -> Result<(), BlockError> {
        match self.expected {
            Some(expected) if self.eods > expected => Err(BlockError::TooManyEods {
                seen: self.eods,
                expected,
            }),
            _ => Ok(()),
        }
    }
}

/// The sender's plan of one MODE E transfer: blocks handed to whichever stream asks next, and
/// the closing blocks each stream sends (EOD on each; EOF with the count on the last one).
#[derive(Debug, Clone)]
pub struct SendPlan {
    todo: std::collections::VecDeque<(u64, u64)>,
    block: u64,
    streams: u64,
    done: u64,
    frozen: bool,
}

impl SendPlan {
    /// Sends `ranges` (`[start, end)` each) in blocks of at most `block` bytes.
    pub fn new(ranges: Vec<(u64, u64)>, block: u64) -> SendPlan {
        SendPlan {
            todo: ranges.into_iter().filter(|(s, e)| s < e).collect(),
            block: block.clamp(1, MAX_BLOCK),
            streams: 0,
            done: 0,
            frozen: false,
        }
    }

    /// Registers one more stream; `false` once the data has all been handed out (a stream
    /// opened then would carry nothing, and the EOF count may already be on the wire).
    pub fn join(&mut self) -> bool {
        if self.frozen {
            return false;
        }
        self.streams += 1;
        true
    }

    /// The next block to send, `(offset, count)`; `None` when there is none left.
    pub fn next_block(&mut self) -> Option<(u64, u64)> {
        let Some((s, e)) = self.todo.pop_front() else {
            self.frozen = true;
            return None;
        };
        let n = (e - s).min(self.block);
        if s + n < e {
            self.todo.push_front((s + n, e));
        }
        Some((s, n))
    }

    /// A stream has sent its last block: the headers it ends with.
    pub fn finish_stream(&mut self, close: bool) -> Vec<Header> {
        self.frozen = true;
        self.done += 1;
        if self.done == self.streams {
            vec![Header::eof(self.streams), Header::eod(close)]
        } else {
            vec![Header::eod(close)]
        }
    }

    /// Streams registered so far.
    pub fn streams(&self) -> u64 {
        self.streams
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn header_layout_is_descriptor_count_offset_big_endian() {
        let b = Header::data(0x0102, 0x0a0b).encode();
        assert_eq!(b[0], 0);
        assert_eq!(&b[1..9], &[0, 0, 0, 0, 0, 0, 0x0a, 0x0b]);
        assert_eq!(&b[9..17], &[0, 0, 0, 0, 0, 0, 0x01, 0x02]);
        assert_eq!(Header::eof(4).encode()[0], 64);
        assert_eq!(Header::eof(4).encode()[16], 4);
        assert_eq!(Header::eod(true).encode()[0], 12);
    }

    #[test]
    fn a_sender_that_scatters_tiny_blocks_is_refused() {
        let mut r = Reassembly::new(u64::MAX);
        for i in 0..MAX_FRAGMENTS as u64 {
            assert!(r.on_header(&Header::data(i * 2, 1)).is_ok());
            r.on_written(i * 2, 1);
        }
        assert_eq!(
            r.on_header(&Header::data(u64::MAX / 2, 1)),
            Err(BlockError::Fragmented)
        );
        // Blocks that fill holes are never refused for it.
        let mut r = Reassembly::new(u64::MAX);
        for i in 0..(2 * MAX_FRAGMENTS as u64) {
            assert!(r.on_header(&Header::data(i, 1)).is_ok());
            r.on_written(i, 1);
        }
    }

    #[test]
    fn complete_after_eof_and_all_eods_in_any_order() {
        let mut r = Reassembly::new(100);
        assert_eq!(
            r.on_header(&Header::data(50, 50)),
            Ok(Action::Data {
                offset: 50,
                count: 50
            })
        );
        r.on_written(50, 50);
        assert_eq!(
            r.on_header(&Header::eod(false)),
            Ok(Action::EndOfData { close: false })
        );
        assert!(!r.is_complete());
        r.on_header(&Header::eof(2)).unwrap();
        assert!(!r.is_complete());
        r.on_header(&Header::data(0, 50)).unwrap();
        r.on_written(0, 50);
        r.on_header(&Header::eod(true)).unwrap();
        assert!(r.is_complete());
        assert_eq!(r.received().to_string(), "0-100");
    }

    #[test]
    fn broken_senders_are_refused() {
        let mut r = Reassembly::new(100);
        assert!(matches!(
            r.on_header(&Header::data(90, 20)),
            Err(BlockError::OutOfRange { .. })
        ));
        assert!(matches!(
            r.on_header(&Header::data(u64::MAX, 2)),
            Err(BlockError::Overflow(_))
        ));
        assert!(matches!(
            r.on_header(&Header::data(0, MAX_BLOCK + 1)),
            Err(BlockError::TooLarge(_))
        ));
        assert_eq!(r.on_header(&Header::eof(0)), Err(BlockError::EodCount(0)));
        assert_eq!(
            r.on_header(&Header {
                descriptor: RESTART,
                count: 0,
                offset: 0
            }),
            Err(BlockError::Descriptor(RESTART))
        );
        r.on_header(&Header::eof(1)).unwrap();
        assert_eq!(r.on_header(&Header::eof(2)), Err(BlockError::EodCount(2)));
        r.on_header(&Header::eod(false)).unwrap();
        assert!(r.is_complete());
        assert!(matches!(
            r.on_header(&Header::eod(false)),
            Err(BlockError::TooManyEods { .. })
        ));
    }

    #[test]
    fn a_plan_feeds_a_reassembly_to_completion() {
        let mut plan = SendPlan::new(vec![(0, 250), (300, 310)], 100);
        assert!(plan.join() && plan.join());
        let mut r = Reassembly::new(400);
        let mut sent = Vec::new();
        while let Some((o, n)) = plan.next_block() {
            sent.push((o, n));
            r.on_header(&Header::data(o, n)).unwrap();
            r.on_written(o, n);
        }
        assert_eq!(sent, vec![(0, 100), (100, 100), (200, 50), (300, 10)]);
        assert!(
            !plan.join(),
            "no stream may join once the data is handed out"
        );
        for h in plan
            .finish_stream(false)
            .iter()
            .chain(&plan.finish_stream(true))
        {
            r.on_header(h).unwrap();
        }
        assert!(r.is_complete());
        assert_eq!(r.received().to_string(), "0-250,300-310");
    }

    #[test]
    fn an_empty_file_still_ends_with_eof_and_eod() {
        let mut plan = SendPlan::new(vec![(0, 0)], 100);
        assert!(plan.join());
        assert_eq!(plan.next_block(), None);
        assert_eq!(
            plan.finish_stream(true),
            vec![Header::eof(1), Header::eod(true)]
        );
    }

    proptest! {
        #[test]
        fn encode_decode_round_trips(d: u8, count: u64, offset: u64) {
            let h = Header { descriptor: d, count, offset };
            prop_assert_eq!(Header::decode(&h.encode()), h);
        }

        #[test]
        fn any_header_sequence_is_answered_without_panic(
            hs in proptest::collection::vec((any::<u8>(), 0u64..200, any::<u64>()), 0..40)
        ) {
            let mut r = Reassembly::new(1000);
            for (descriptor, count, offset) in hs {
                let _ = r.on_header(&Header { descriptor, count, offset });
            }
        }

        #[test]
        fn blocks_split_any_way_reassemble_the_file(
            cuts in proptest::collection::btree_set(1u64..999, 0..20),
            streams in 1u64..8,
        ) {
            let mut bounds: Vec<u64> = vec![0];
            bounds.extend(cuts);
            bounds.push(1000);
            let mut r = Reassembly::new(1000);
            for w in bounds.windows(2).rev() {
                let a = r.on_header(&Header::data(w[0], w[1] - w[0])).unwrap();
                prop_assert_eq!(a, Action::Data { offset: w[0], count: w[1] - w[0] });
                r.on_written(w[0], w[1] - w[0]);
            }
            r.on_header(&Header::eof(streams)).unwrap();
            for _ in 0..streams {
                prop_assert!(!r.is_complete());
                r.on_header(&Header::eod(false)).unwrap();
            }
            prop_assert!(r.is_complete());
            prop_assert_eq!(r.received().to_string(), "0-1000");
        }
    }
}
