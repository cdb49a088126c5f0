//! A sink bounded by what the peer announced: a server that sends more than it said a file
//! holds is stopped, not followed onto the disk.

use std::io::Write;

/// The error of a peer that sent more than the size it announced.
pub fn past_size() -> std::io::Error {
    std::io::Error::new(
        std::io::ErrorKind::InvalidData,
        "the server sent more bytes than the file's size it gave: the copy stops there",
    )
}

/// A sink that takes `most` bytes at most (`None`: any number): a server that sends more than
/// it said the file holds is stopped, not followed onto the disk.
pub struct AtMost<W> {
    inner: W,
    left: Option<u64>,
}

impl<W> AtMost<W> {
    /// `inner`, taking `most` bytes at most.
    pub fn new(inner: W, most: Option<u64>) -> AtMost<W> {
        AtMost { inner, left: most }
    }
}

impl<W: Write> Write for AtMost<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if self.left.is_some_and(|left| buf.len() as u64 > left) {
            return Err(past_size());
        }
        let n = self.inner.write(buf)?;
        if let Some(left) = self.left.as_mut() {
            *left -= n as u64;
        }
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}
