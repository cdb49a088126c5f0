//! Framing of the control channel's byte stream into command lines.
//!
//! Lines end in CRLF, the Telnet end-of-line (RFC 959 §4.1.1): a bare LF is part of the line,
//! never the end of a command, so one line can never smuggle a second command past a check (the
//! command parser refuses line breaks inside arguments). Telnet IAC sequences, which some clients send before `ABOR`,
//! are removed; a line longer than the limit is reported once and then skipped, so a hostile
//! client cannot make the server buffer without bound.

/// One framed item from the control stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Frame {
    /// A complete line, without its line ending and with Telnet sequences removed.
    Line(Vec<u8>),
    /// A line exceeded the limit; its bytes were discarded up to its end.
    TooLong,
}

/// Incremental line framer with a maximum line length.
#[derive(Debug)]
pub struct LineFramer {
    max_len: usize,
    buf: Vec<u8>,
    discarding: bool,
    pending_iac: bool,
    /// The last byte kept or skipped was a CR (the next LF ends the line).
    last_cr: bool,
}

const IAC: u8 = 255;

impl LineFramer {
    /// A framer accepting lines of at most `max_len` bytes (excluding the line ending).
    pub fn new(max_len: usize) -> Self {
        LineFramer {
            max_len,
            buf: Vec::new(),
            discarding: false,
            pending_iac: false,
            last_cr: false,
        }
    }

    /// Feeds bytes read from the connection; returns the frames they complete, in order.
    pub fn push(&mut self, bytes: &[u8]) -> Vec<Frame> {
        let mut out = Vec::new();
        for &b in bytes {
            if self.pending_iac {
                self.pending_iac = false;
                if b == IAC {
                    self.keep(IAC, &mut out);
                    self.last_cr = false;
                }
                // Any other Telnet command byte (IP, DM, ...) is dropped with its IAC.
                continue;
            }
            match b {
                IAC => self.pending_iac = true,
                b'\n' if self.last_cr => {
                    if self.discarding {
                        self.discarding = false;
                    } else {
                        let mut line = std::mem::take(&mut self.buf);
                        line.pop(); // the CR
                        out.push(Frame::Line(line));
                    }
                    self.buf.clear();
                    self.last_cr = false;
                    continue;
                }
                _ => self.keep(b, &mut out),
            }
            self.last_cr = b == b'\r';
        }
        out
    }

    fn keep(&mut self, b: u8, out: &mut Vec<Frame>) {
        if self.discarding {
            return;
        }
        // One extra byte is allowed for the CR of a CRLF ending.
        if self.buf.len() > self.max_len {
            self.buf.clear();
            self.discarding = true;
            out.push(Frame::TooLong);
            return;
        }
        self.buf.push(b);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn splits_lines_and_strips_crlf() {
        let mut f = LineFramer::new(100);
        assert_eq!(
            f.push(b"USER a\r\nPA"),
            vec![Frame::Line(b"USER a".to_vec())]
        );
        assert_eq!(f.push(b"SS b\r\n"), vec![Frame::Line(b"PASS b".to_vec())]);
    }

    #[test]
    fn a_bare_lf_never_ends_a_command() {
        let mut f = LineFramer::new(100);
        assert_eq!(
            f.push(b"SIZE x\nDELE v1\r\n"),
            vec![Frame::Line(b"SIZE x\nDELE v1".to_vec())]
        );
        // A CR alone is data too; CR LF split across reads still ends the line.
        assert_eq!(f.push(b"a\rb\r"), vec![]);
        assert_eq!(f.push(b"\n"), vec![Frame::Line(b"a\rb".to_vec())]);
    }

    #[test]
    fn removes_telnet_interrupt_before_abor() {
        let mut f = LineFramer::new(100);
        let input = [&[IAC, 244, IAC, 242][..], b"ABOR\r\n"].concat();
        assert_eq!(f.push(&input), vec![Frame::Line(b"ABOR".to_vec())]);
        assert_eq!(
            f.push(&[b'a', IAC, IAC, b'\r', b'\n']),
            vec![Frame::Line(vec![b'a', IAC])]
        );
    }

    #[test]
    fn long_line_is_reported_once_and_skipped() {
        let mut f = LineFramer::new(8);
        let mut frames = f.push(&[b'x'; 20]);
        frames.extend(f.push(b"yyyy\r\nNOOP\r\n"));
        assert_eq!(frames, vec![Frame::TooLong, Frame::Line(b"NOOP".to_vec())]);
    }

    #[test]
    fn line_at_limit_is_accepted() {
        let mut f = LineFramer::new(4);
        assert_eq!(f.push(b"NOOP\r\n"), vec![Frame::Line(b"NOOP".to_vec())]);
    }

    proptest! {
        #[test]
        fn frames_never_exceed_limit(chunks in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..64), 0..16)) {
            let mut f = LineFramer::new(16);
            for c in &chunks {
                for frame in f.push(c) {
                    if let Frame::Line(l) = frame {
                        prop_assert!(l.len() <= 17);
                        prop_assert!(!l.windows(2).any(|w| w == b"\r\n"));
                    }
                }
            }
        }

        #[test]
        fn chunking_does_not_change_frames(data in proptest::collection::vec(any::<u8>(), 0..200), cut in 0usize..200) {
            let cut = cut.min(data.len());
            let mut whole = LineFramer::new(32);
            let a = whole.push(&data);
            let mut split = LineFramer::new(32);
            let mut b = split.push(&data[..cut]);
            b.extend(split.push(&data[cut..]));
            prop_assert_eq!(a, b);
        }
    }
}
