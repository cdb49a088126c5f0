//! The UDP data channel's wire formats (FOBS, shared/seeds/fobs.txt): the data packets, each
//! carrying a per-transfer token, a transmission number, its place in the file and its send
//! time; and the messages of the TCP connection beside them, where the receiver sends back a
//! bitmap per segment of 10,000 packets (the packet-loss signatures) and the one-way queueing
//! delay it sees. No I/O: the movers in `fatpipe-net` send and receive these. The channel's
//! `SITE` commands on the control connection are in [`commands`].

pub mod commands;

pub use commands::{NetStack, UdpReady, SETNETSTACK, UDPREADY};

/// UDP payload of a data packet by default (the seed's 1,470 bytes: fits a 1,500-byte MTU).
pub const PACKET: u16 = 1470;
/// Smallest and largest data packet a peer may ask for.
pub const PACKET_RANGE: std::ops::RangeInclusive<u16> = 512..=8972;
/// Bytes of a data packet's header.
pub const HEADER: usize = 28;
/// Packets per segment: one bitmap covers one segment.
pub const SEGMENT: u64 = 10_000;
/// Bytes of a full segment's bitmap.
pub const BITMAP: usize = (SEGMENT as usize).div_ceil(8);
/// Packets the sender sends back to back first: the bottleneck spaces them out, and the span of
/// their arrivals at the receiver gives its rate (packet-train dispersion), where start-up can
/// begin instead of ramping up to it from a few Mbit/s.
pub const TRAIN: u64 = 128;
/// The shortest arrival span of the train taken as a measurement (a span shorter than the
/// receiver's clock can tell caps the rate it gives).
const TRAIN_MIN_SPAN_US: u32 = 500;
/// Most segment bitmaps one report carries.
pub const MAX_REPORT_SEGMENTS: usize = 64;
/// Largest message body on the feedback connection.
const MAX_BODY: usize = 48 + MAX_REPORT_SEGMENTS * (10 + BITMAP);

/// The header of one data packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DataHeader {
    /// The transfer's token: packets with another one are not the peer's.
    pub token: u64,
    /// Transmission number, one more for every packet sent (first sends and resends alike): the
    /// receiver reports the highest it saw, so the sender knows what was sent before it and lost.
    pub tx: u64,
    /// The packet's place in the transfer: its data starts at `index × payload`.
    pub index: u64,
    /// The sender's clock when sent, in microseconds (wrapping): the receiver's one-way delay.
    pub sent_us: u32,
}

impl DataHeader {
    /// Writes the header into the first [`HEADER`] bytes of `out` (which must hold them).
    pub fn write(&self, out: &mut [u8; HEADER]) {
        out[0..8].copy_from_slice(&self.token.to_be_bytes());
        out[8..16].copy_from_slice(&self.tx.to_be_bytes());
        out[16..24].copy_from_slice(&self.index.to_be_bytes());
        out[24..28].copy_from_slice(&self.sent_us.to_be_bytes());
    }

    /// Reads a packet: its header and payload, or `None` if it is too short to be one.
    pub fn parse(packet: &[u8]) -> Option<(DataHeader, &[u8])> {
        let (h, payload) = packet.split_first_chunk::<HEADER>()?;
        let u64_at = |i: usize| {
            let mut b = [0u8; 8];
            b.copy_from_slice(&h[i..i + 8]);
            u64::from_be_bytes(b)
        };
        let sent_us = u32::from_be_bytes([h[24], h[25], h[26], h[27]]);
        Some((
            DataHeader {
                token: u64_at(0),
                tx: u64_at(8),
                index: u64_at(16),
                sent_us,
            },
            payload,
        ))
    }
}

/// The packets of a transfer of `length` bytes with `payload` data bytes per packet.
pub fn packets(length: u64, payload: u64) -> u64 {
    length.div_ceil(payload.max(1))
}

/// Packets in segment `segment` of a transfer of `total` packets (the last one may be short).
pub fn segment_len(segment: u64, total: u64) -> u64 {
    total
        .saturating_sub(segment.saturating_mul(SEGMENT))
        .min(SEGMENT)
}

/// What one segment holds at the receiver: bit `i` (LSB first in each byte) is packet
/// `segment × SEGMENT + i`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SegmentBits {
    /// The segment.
    pub segment: u64,
    /// Its bitmap, one bit per packet of the segment.
    pub bits: Vec<u8>,
}

impl SegmentBits {
    /// Whether packet `i` of the segment is marked.
    pub fn has(&self, i: usize) -> bool {
        self.bits
            .get(i / 8)
            .is_some_and(|b| b & (1 << (i % 8)) != 0)
    }
}

/// A report from the receiver.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Report {
    /// The receiver's clock when it made the report, microseconds since its first report: the
    /// sender measures intervals by it (reports may arrive bunched).
    pub at_us: u64,
    /// Highest transmission number received.
    pub max_tx: u64,
    /// Data packets received so far (duplicates included).
    pub received: u64,
    /// Bytes written to the file so far (new data only).
    pub written: u64,
    /// Queueing delay: the lowest one-way delay since the last report above the lowest of the
    /// transfer, in microseconds, up to when the receiver read the packet (a receiver that
    /// falls behind queues packets as a router does); where the receiving socket dropped
    /// packets since, its buffer's time at the rate that came at least (a full queue).
    pub queue_us: u32,
    /// Packets dropped for a wrong token or place.
    pub foreign: u32,
    /// How many of the first [`TRAIN`] transmissions arrived (0 until the last of them or a
    /// later transmission arrived: the train is over).
    pub train_packets: u32,
    /// Microseconds from the first of the train's arrivals to the last (0 until it is over).
    pub train_us: u32,
    /// Bitmaps of the segments that changed since the last report.
    pub segments: Vec<SegmentBits>,
}

impl Report {
    /// The bottleneck rate the train's arrivals show, bits/s, for packets of `packet` bytes;
    /// `None` until the train is over, or when too few of it arrived to tell.
    pub fn train_rate(&self, packet: u32) -> Option<f64> {
        if u64::from(self.train_packets) < TRAIN / 2 || self.train_us == 0 {
            return None;
        }
        let span = f64::from(self.train_us.max(TRAIN_MIN_SPAN_US)) / 1e6;
        Some(f64::from(self.train_packets - 1) * f64::from(packet) * 8.0 / span)
    }
}

/// A message on the feedback connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Message {
    /// Sender → receiver, first (it crosses the receiver's `Ready`): the payload per packet
    /// and the bytes the transfer moves.
    Hello {
        /// UDP payload of a data packet, header included.
        packet: u16,
        /// Bytes of the transfer.
        length: u64,
    },
    /// Receiver → sender, first (it need not wait for `Hello`): where to send, and the token
    /// to put in every packet.
    Ready {
        /// The receiver's UDP port (on the address of its end of this connection).
        port: u16,
        /// The transfer's token.
        token: u64,
    },
    /// Receiver → sender: what has arrived.
    Report(Report),
    /// Receiver → sender: every byte arrived and was written.
    Done {
        /// Bytes written.
        bytes: u64,
    },
    /// Sender → receiver: no UDP packet got through; the data from `offset` on follows on this
    /// connection as a plain byte stream.
    Fallback {
        /// Where the stream of bytes starts in the transfer.
        offset: u64,
    },
    /// Sender → receiver, a few times a second: how the rate controller sees the transfer, for
    /// the receiving user's progress line.
    Status {
        /// The sending rate, bits/s.
        rate: u64,
        /// Recent loss, parts per million of the packets sent.
        loss_ppm: u32,
        /// The controller's state (at most [`MAX_STATE`] bytes).
        state: String,
    },
}

/// Longest controller state a status message carries.
pub const MAX_STATE: usize = 32;

/// A message that breaks the format.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WireError {
    /// The type byte names no message.
    #[error("unknown message type {0}")]
    UnknownType(u8),
    /// A length field past what the format allows.
    #[error("message of {0} bytes is too long")]
    TooLong(usize),
    /// The body does not match its type.
    #[error("malformed {0} message")]
    Malformed(&'static str),
}

const HELLO: u8 = 1;
const READY: u8 = 2;
const REPORT: u8 = 3;
const DONE: u8 = 4;
const FALLBACK: u8 = 5;
const STATUS: u8 = 6;

impl Message {
    /// The message framed for the connection: type, body length (32 bits), body.
    pub fn encode(&self) -> Vec<u8> {
        let mut body = Vec::new();
        let kind = match self {
            Message::Hello { packet, length } => {
                body.extend_from_slice(&packet.to_be_bytes());
                body.extend_from_slice(&length.to_be_bytes());
                HELLO
            }
            Message::Ready { port, token } => {
                body.extend_from_slice(&port.to_be_bytes());
                body.extend_from_slice(&token.to_be_bytes());
                READY
            }
            Message::Report(r) => {
                body.extend_from_slice(&r.at_us.to_be_bytes());
                body.extend_from_slice(&r.max_tx.to_be_bytes());
                body.extend_from_slice(&r.received.to_be_bytes());
                body.extend_from_slice(&r.written.to_be_bytes());
                body.extend_from_slice(&r.queue_us.to_be_bytes());
                body.extend_from_slice(&r.foreign.to_be_bytes());
                body.extend_from_slice(&r.train_packets.to_be_bytes());
                body.extend_from_slice(&r.train_us.to_be_bytes());
                let segments = &r.segments[..r.segments.len().min(MAX_REPORT_SEGMENTS)];
                body.push(segments.len() as u8);
                for s in segments {
                    let bits = &s.bits[..s.bits.len().min(BITMAP)];
                    body.extend_from_slice(&s.segment.to_be_bytes());
                    body.extend_from_slice(&(bits.len() as u16).to_be_bytes());
                    body.extend_from_slice(bits);
                }
                REPORT
            }
            Message::Done { bytes } => {
                body.extend_from_slice(&bytes.to_be_bytes());
                DONE
            }
            Message::Fallback { offset } => {
                body.extend_from_slice(&offset.to_be_bytes());
                FALLBACK
            }
            Message::Status {
                rate,
                loss_ppm,
                state,
            } => {
                let mut end = state.len().min(MAX_STATE);
                while !state.is_char_boundary(end) {
                    end -= 1;
                }
                body.extend_from_slice(&rate.to_be_bytes());
                body.extend_from_slice(&loss_ppm.to_be_bytes());
                body.push(end as u8);
                body.extend_from_slice(&state.as_bytes()[..end]);
                STATUS
            }
        };
        let mut out = Vec::with_capacity(5 + body.len());
        out.push(kind);
        out.extend_from_slice(&(body.len() as u32).to_be_bytes());
        out.extend_from_slice(&body);
        out
    }

    /// The first message in `buf` and the bytes it took, `None` while it is incomplete.
    pub fn decode(buf: &[u8]) -> Result<Option<(Message, usize)>, WireError> {
        let Some((&kind, rest)) = buf.split_first() else {
            return Ok(None);
        };
        if !(HELLO..=STATUS).contains(&kind) {
            return Err(WireError::UnknownType(kind));
        }
        let Some((len, rest)) = rest.split_first_chunk::<4>() else {
            return Ok(None);
        };
        let len = u32::from_be_bytes(*len) as usize;
        if len > MAX_BODY {
            return Err(WireError::TooLong(len));
        }
        let Some(body) = rest.get(..len) else {
            return Ok(None);
        };
        let mut r = Reader(body);
        let m = match kind {
            HELLO => Message::Hello {
                packet: r.u16("hello")?,
                length: r.u64("hello")?,
            },
            READY => Message::Ready {
                port: r.u16("ready")?,
                token: r.u64("ready")?,
            },
            REPORT => Message::Report(report(&mut r)?),
            DONE => Message::Done {
                bytes: r.u64("done")?,
            },
            FALLBACK => Message::Fallback {
                offset: r.u64("fallback")?,
            },
            _ => {
                let (rate, loss_ppm) = (r.u64("status")?, r.u32("status")?);
                let n = r.take(1, "status")?[0] as usize;
                if n > MAX_STATE {
                    return Err(WireError::Malformed("status"));
                }
                let state = std::str::from_utf8(r.take(n, "status")?)
                    .map_err(|_| WireError::Malformed("status"))?
                    .to_string();
                Message::Status {
                    rate,
                    loss_ppm,
                    state,
                }
            }
        };
        if !r.0.is_empty() {
            return Err(WireError::Malformed("trailing bytes in a"));
        }
        Ok(Some((m, 5 + len)))
    }
}

fn report(r: &mut Reader<'_>) -> Result<Report, WireError> {
    const W: &str = "report";
    let mut out = Report {
        at_us: r.u64(W)?,
        max_tx: r.u64(W)?,
        received: r.u64(W)?,
        written: r.u64(W)?,
        queue_us: r.u32(W)?,
        foreign: r.u32(W)?,
        train_packets: r.u32(W)?,
        train_us: r.u32(W)?,
        segments: Vec::new(),
    };
    let n = r.take(1, W)?[0] as usize;
    if n > MAX_REPORT_SEGMENTS {
        return Err(WireError::Malformed(W));
    }
    for _ in 0..n {
        let segment = r.u64(W)?;
        let len = r.u16(W)? as usize;
        if len > BITMAP {
            return Err(WireError::Malformed(W));
        }
        out.segments.push(SegmentBits {
            segment,
            bits: r.take(len, W)?.to_vec(),
        });
    }
    Ok(out)
}

/// Reads big-endian fields off the front of a body.
struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize, what: &'static str) -> Result<&'a [u8], WireError> {
        if self.0.len() < n {
            return Err(WireError::Malformed(what));
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Ok(head)
    }

    fn u16(&mut self, what: &'static str) -> Result<u16, WireError> {
        let b = self.take(2, what)?;
        Ok(u16::from_be_bytes([b[0], b[1]]))
    }

    fn u32(&mut self, what: &'static str) -> Result<u32, WireError> {
        let b = self.take(4, what)?;
        Ok(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }

    fn u64(&mut self, what: &'static str) -> Result<u64, WireError> {
        let b = self.take(8, what)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(u64::from_be_bytes(a))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn message() -> impl Strategy<Value = Message> {
        let bits = (
            any::<u64>(),
            proptest::collection::vec(any::<u8>(), 0..=BITMAP),
        )
            .prop_map(|(segment, bits)| SegmentBits { segment, bits });
        let report = (
            any::<[u64; 4]>(),
            any::<[u32; 4]>(),
            proptest::collection::vec(bits, 0..4),
        )
            .prop_map(
                |(
                    [at_us, max_tx, received, written],
                    [queue_us, foreign, train_packets, train_us],
                    segments,
                )| {
                    Message::Report(Report {
                        at_us,
                        max_tx,
                        received,
                        written,
                        queue_us,
                        foreign,
                        train_packets,
                        train_us,
                        segments,
                    })
                },
            );
        prop_oneof![
            (any::<u16>(), any::<u64>())
                .prop_map(|(packet, length)| Message::Hello { packet, length }),
            (any::<u16>(), any::<u64>()).prop_map(|(port, token)| Message::Ready { port, token }),
            report,
            any::<u64>().prop_map(|bytes| Message::Done { bytes }),
            any::<u64>().prop_map(|offset| Message::Fallback { offset }),
            (any::<u64>(), any::<u32>(), "[a-z]{0,32}").prop_map(|(rate, loss_ppm, state)| {
                Message::Status {
                    rate,
                    loss_ppm,
                    state,
                }
            }),
        ]
    }

    #[test]
    fn the_trains_arrival_span_gives_the_bottleneck_rate() {
        let r = |train_packets, train_us| Report {
            train_packets,
            train_us,
            ..Report::default()
        };
        // 128 packets of 1,250 bytes 10 µs apart: 1 Gbit/s.
        let rate = r(128, 1270).train_rate(1250).unwrap();
        assert!((rate - 1e9).abs() < 1e3, "{rate}");
        assert_eq!(r(0, 0).train_rate(1250), None, "not over yet");
        assert_eq!(r(40, 1270).train_rate(1250), None, "too few arrived");
        // A span the receiver's clock cannot tell caps the rate.
        let capped = r(128, 3).train_rate(1250).unwrap();
        assert!((capped - 127.0 * 10_000.0 / 500e-6).abs() < 1.0, "{capped}");
    }

    proptest! {
        #[test]
        fn messages_decode_to_themselves_whole_and_wait_when_cut(m in message(), cut in 0usize..64) {
            let wire = m.encode();
            prop_assert_eq!(Message::decode(&wire), Ok(Some((m, wire.len()))));
            let short = wire.len().saturating_sub(cut.max(1));
            prop_assert_eq!(Message::decode(&wire[..short]), Ok(None));
        }

        #[test]
        fn any_bytes_decode_or_fail_without_panic(bytes in proptest::collection::vec(any::<u8>(), 0..4096)) {
            if let Ok(Some((_, used))) = Message::decode(&bytes) {
                prop_assert!(used <= bytes.len());
            }
        }

        #[test]
        fn headers_read_back(token: u64, tx: u64, index: u64, sent_us: u32, payload in proptest::collection::vec(any::<u8>(), 0..64)) {
            let h = DataHeader { token, tx, index, sent_us };
            let mut packet = [0u8; HEADER].to_vec();
            let mut head = [0u8; HEADER];
            h.write(&mut head);
            packet[..HEADER].copy_from_slice(&head);
            packet.extend_from_slice(&payload);
            prop_assert_eq!(DataHeader::parse(&packet), Some((h, &payload[..])));
        }
    }

    #[test]
    fn short_packets_and_bad_messages_are_refused() {
        assert_eq!(DataHeader::parse(&[0u8; HEADER - 1]), None);
        assert_eq!(
            Message::decode(&[9, 0, 0, 0, 0]),
            Err(WireError::UnknownType(9))
        );
        assert_eq!(
            Message::decode(&[DONE, 0xff, 0xff, 0xff, 0xff]),
            Err(WireError::TooLong(u32::MAX as usize))
        );
        assert_eq!(
            Message::decode(&[DONE, 0, 0, 0, 1, 7]),
            Err(WireError::Malformed("done"))
        );
    }

    #[test]
    fn segments_split_the_packets() {
        assert_eq!(packets(0, 1442), 0);
        assert_eq!(packets(1443, 1442), 2);
        assert_eq!(segment_len(0, 25_000), SEGMENT);
        assert_eq!(segment_len(2, 25_000), 5_000);
        assert_eq!(segment_len(3, 25_000), 0);
        let s = SegmentBits {
            segment: 0,
            bits: vec![0b0000_0101],
        };
        assert!(s.has(0) && !s.has(1) && s.has(2) && !s.has(8));
    }
}
