//! Bodies that stream between a file and a connection without holding the file in memory: a
//! response body read from a file on a blocking thread, and a sink that writes a request's
//! body into a file on one.

use bytes::Bytes;
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full};
use hyper::body::{Body, Frame, SizeHint};
use std::fs::File;
use std::io;
use std::ops::Range;
use std::os::unix::fs::FileExt;
use std::pin::Pin;
use std::task::{Context, Poll};
use tokio::sync::mpsc;

/// Every response's body type.
pub type ResponseBody = BoxBody<Bytes, io::Error>;

/// Bytes read from a file at a time: below the allocator's mmap threshold (128 KiB), so that a
/// chunk's memory comes back from the heap warm (256 KiB chunks were each a fresh mmap, page
/// faults and zeroing included: an eighth of a loopback pull's CPU time went there).
const CHUNK: usize = 64 << 10;
/// The most a connection's read buffer holds: below the mmap threshold the server sets (256
/// KiB), so that its memory is reused rather than mapped, faulted in and zeroed each time.
pub const READ_BUFFER: usize = 128 << 10;
/// Chunks read ahead of the connection.
const AHEAD: usize = 32;

impl Piece {
    /// Its length in bytes.
    pub fn len(&self) -> u64 {
        match self {
            Piece::Text(t) => t.len() as u64,
            Piece::File(r) => r.end - r.start,
        }
    }
}

/// The length of a body made of `pieces`.
pub fn length(pieces: &[Piece]) -> u64 {
    pieces.iter().map(Piece::len).sum()
}

/// A body with these bytes.
pub fn full(b: impl Into<Bytes>) -> ResponseBody {
    Full::new(b.into()).map_err(|never| match never {}).boxed()
}

/// One piece of a response read from a file: literal bytes (a multipart boundary) or a
/// range of the file.
#[derive(Debug, Clone)]
pub enum Piece {
    /// These bytes.
    Text(Bytes),
    /// This part of the file.
    File(Range<u64>),
}

/// A body streamed from a channel that a reading thread fills.
struct ChannelBody {
    rx: mpsc::Receiver<io::Result<Bytes>>,
    /// Bytes still to come, when known.
    left: Option<u64>,
}

/// A body of what arrives on `rx` (`len`: its length, when known).
pub fn channel(rx: mpsc::Receiver<io::Result<Bytes>>, len: Option<u64>) -> ResponseBody {
    ChannelBody { rx, left: len }.boxed()
}

impl Body for ChannelBody {
    type Data = Bytes;
    type Error = io::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, io::Error>>> {
        match self.rx.poll_recv(cx) {
            Poll::Ready(Some(Ok(b))) => {
                self.left = self.left.map(|l| l.saturating_sub(b.len() as u64));
                Poll::Ready(Some(Ok(Frame::data(b))))
            }
            Poll::Ready(Some(Err(e))) => Poll::Ready(Some(Err(e))),
            Poll::Ready(None) => Poll::Ready(None),
            Poll::Pending => Poll::Pending,
        }
    }

    fn size_hint(&self) -> SizeHint {
        self.left
            .map_or_else(SizeHint::default, SizeHint::with_exact)
    }
}

/// A body made of `pieces` of `file`, read ahead on a blocking thread; `sent(n)` is called
/// with the total read so far (what tunes the connection counts). A file that ends early
/// ends the body with an error, so the client sees a short response, never a wrong one.
pub fn from_file(
    file: File,
    pieces: Vec<Piece>,
    sent: impl Fn(u64) + Send + 'static,
) -> ResponseBody {
    let total = length(&pieces);
    let (tx, rx) = mpsc::channel(AHEAD);
    tokio::task::spawn_blocking(move || {
        let mut moved = 0u64;
        for p in pieces {
            match p {
                Piece::Text(t) => {
                    if tx.blocking_send(Ok(t)).is_err() {
                        return;
                    }
                }
                Piece::File(r) => {
                    let mut at = r.start;
                    while at < r.end {
                        let want = ((r.end - at) as usize).min(CHUNK);
                        let mut buf = vec![0u8; want];
                        let chunk = match file.read_at(&mut buf, at) {
                            Ok(0) => Err(io::Error::new(
                                io::ErrorKind::UnexpectedEof,
                                "the file shrank while it was sent",
                            )),
                            Ok(n) => {
                                buf.truncate(n);
                                Ok(Bytes::from(buf))
                            }
                            Err(e) => Err(e),
                        };
                        let failed = chunk.is_err();
                        if let Ok(b) = &chunk {
                            at += b.len() as u64;
                            moved += b.len() as u64;
                            sent(moved);
                        }
                        if tx.blocking_send(chunk).is_err() || failed {
                            return;
                        }
                    }
                }
            }
        }
    });
    channel(rx, Some(total))
}

/// Writes what arrives into a file from an offset, on a blocking thread.
pub struct FileSink {
    tx: Option<mpsc::Sender<(u64, Bytes)>>,
    handle: tokio::task::JoinHandle<io::Result<()>>,
    seeks: bool,
}

impl FileSink {
    /// A sink into `file`: written at each piece's offset, or, where it cannot seek (a pipe, a
    /// terminal), in order, each piece where the last ended.
    pub fn new(mut file: File) -> FileSink {
        let (tx, mut rx) = mpsc::channel::<(u64, Bytes)>(AHEAD);
        let seeks = io::Seek::stream_position(&mut file).is_ok();
        let handle = tokio::task::spawn_blocking(move || {
            let mut next = 0;
            while let Some((at, b)) = rx.blocking_recv() {
                if seeks {
                    file.write_all_at(&b, at)?;
                } else if at == next {
                    io::Write::write_all(&mut file, &b)?;
                    next += b.len() as u64;
                } else {
                    return Err(io::Error::other(format!(
                        "bytes from offset {at} would land at {next}: not a file that seeks"
                    )));
                }
            }
            Ok(())
        });
        FileSink {
            tx: Some(tx),
            handle,
            seeks,
        }
    }

    /// Whether pieces may come in any order (the file seeks).
    pub fn seeks(&self) -> bool {
        self.seeks
    }

    /// Queues `b` to be written at `at`; an error when the writing thread failed (its error
    /// comes from [`FileSink::finish`]).
    pub async fn write(&self, at: u64, b: Bytes) -> Result<(), ()> {
        match &self.tx {
            Some(tx) => tx.send((at, b)).await.map_err(|_| ()),
            None => Err(()),
        }
    }

    /// Waits for everything queued to be written.
    pub async fn finish(mut self) -> io::Result<()> {
        self.tx.take();
        match (&mut self.handle).await {
            Ok(r) => r,
            Err(e) => Err(io::Error::other(e.to_string())),
        }
    }
}

/// Reads a request body to its end into `sink` from offset `start`, at most `limit` bytes;
/// returns how many arrived. `received(n)` is told the total as it grows.
pub async fn drain_into<B>(
    mut body: B,
    sink: &FileSink,
    start: u64,
    limit: u64,
    received: impl Fn(u64),
) -> Result<u64, String>
where
    B: Body<Data = Bytes> + Unpin,
    B::Error: std::fmt::Display,
{
    let mut n = 0u64;
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| format!("the body was cut: {e}"))?;
        let Ok(data) = frame.into_data() else {
            continue;
        };
        let len = data.len() as u64;
        if n.saturating_add(len) > limit {
            return Err(format!("the body is larger than the {limit} bytes allowed"));
        }
        sink.write(start + n, data)
            .await
            .map_err(|()| "the file could not be written".to_string())?;
        n += len;
        received(n);
    }
    Ok(n)
}
