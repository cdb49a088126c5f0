//! `TYPE A` conversion between the local LF line ending and the network's CRLF.
//!
//! Both directions are streaming converters that keep the one byte of state a chunk boundary
//! needs, so a file of any size converts in bounded memory.

/// Converts local text (LF) to network ASCII (CRLF); a CR already before an LF is kept as is.
#[derive(Debug, Default)]
pub struct ToNetwork {
    last_was_cr: bool,
}

impl ToNetwork {
    /// Appends the converted form of `input` to `out`.
    pub fn convert(&mut self, input: &[u8], out: &mut Vec<u8>) {
        out.reserve(input.len() + input.len() / 16);
        for &b in input {
            if b == b'\n' && !self.last_was_cr {
                out.push(b'\r');
            }
            out.push(b);
            self.last_was_cr = b == b'\r';
        }
    }
}

/// Converts network ASCII (CRLF) to local text (LF); a lone CR is kept.
#[derive(Debug, Default)]
pub struct FromNetwork {
    pending_cr: bool,
}

impl FromNetwork {
    /// Appends the converted form of `input` to `out`.
    pub fn convert(&mut self, input: &[u8], out: &mut Vec<u8>) {
        out.reserve(input.len());
        for &b in input {
            if self.pending_cr {
                self.pending_cr = false;
                if b != b'\n' {
                    out.push(b'\r');
                }
            }
            if b == b'\r' {
                self.pending_cr = true;
            } else {
                out.push(b);
            }
        }
    }

    /// Flushes a CR held back at the end of the stream.
    pub fn finish(&mut self, out: &mut Vec<u8>) {
        if std::mem::take(&mut self.pending_cr) {
            out.push(b'\r');
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn lf_becomes_crlf() {
        let mut out = Vec::new();
        ToNetwork::default().convert(b"a\nb\r\nc", &mut out);
        assert_eq!(out, b"a\r\nb\r\nc");
    }

    #[test]
    fn crlf_becomes_lf_across_chunks() {
        let mut c = FromNetwork::default();
        let mut out = Vec::new();
        c.convert(b"a\r", &mut out);
        c.convert(b"\nb\rc\r", &mut out);
        c.finish(&mut out);
        assert_eq!(out, b"a\nb\rc\r");
    }

    proptest! {
        #[test]
        fn roundtrip_of_text_without_cr(text in "[a-z\n]{0,200}", cut in 0usize..200) {
            let bytes = text.as_bytes();
            let cut = cut.min(bytes.len());
            let mut net = Vec::new();
            let mut to = ToNetwork::default();
            to.convert(&bytes[..cut], &mut net);
            to.convert(&bytes[cut..], &mut net);
            let mut back = Vec::new();
            let mut from = FromNetwork::default();
            from.convert(&net, &mut back);
            from.finish(&mut back);
            prop_assert_eq!(back, bytes.to_vec());
        }
    }
}
