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
use std::time::Duration;
use tokio::sync::mpsc;
use tokio::time::Instant;

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
    tx: Option<mpsc::Sender<(u64, Vec<Bytes>)>>,
    handle: tokio::task::JoinHandle<io::Result<()>>,
    seeks: bool,
}

impl FileSink {
    /// A sink into `file`: written at each batch's offset, or, where it cannot seek (a pipe, a
    /// terminal), in order, each batch where the last ended.
    pub fn new(mut file: File) -> FileSink {
        let (tx, mut rx) = mpsc::channel::<(u64, Vec<Bytes>)>(AHEAD);
        let seeks = io::Seek::stream_position(&mut file).is_ok();
        let handle = tokio::task::spawn_blocking(move || {
            let mut next = 0;
            while let Some((mut at, batch)) = rx.blocking_recv() {
                if !seeks && at != next {
                    return Err(io::Error::other(format!(
                        "bytes from offset {at} would land at {next}: not a file that seeks"
                    )));
                }
                for b in batch {
                    if seeks {
                        file.write_all_at(&b, at)?;
                    } else {
                        io::Write::write_all(&mut file, &b)?;
                    }
                    at += b.len() as u64;
                }
                next = at;
            }
            Ok(())
        });
        FileSink {
            tx: Some(tx),
            handle,
            seeks,
        }
    }

    /// Whether batches may come in any order (the file seeks).
    pub fn seeks(&self) -> bool {
        self.seeks
    }

    /// Queues `batch`, adjacent pieces, to be written from `at`; an error when the writing
    /// thread failed (its error comes from [`FileSink::finish`]).
    pub async fn write(&self, at: u64, batch: Vec<Bytes>) -> Result<(), ()> {
        match &self.tx {
            Some(tx) => tx.send((at, batch)).await.map_err(|_| ()),
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
/// returns how many arrived. `received(n)` is told the total handed to the sink as it grows
/// (what arrived before a failure is handed over too: a download resumes from it).
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
    let mut batch = Batch::default();
    // One timer, set as a batch begins (a timer for each piece cost more than it saved).
    let mut due = std::pin::pin!(tokio::time::sleep(HOLD));
    let outcome = loop {
        let next = if batch.pieces.is_empty() {
            body.frame().await
        } else {
            tokio::select! {
                biased;
                next = body.frame() => next,
                () = &mut due => {
                    batch.flush(sink, start + n).await?;
                    received(n);
                    continue;
                }
            }
        };
        let Some(frame) = next else {
            break Ok(());
        };
        let data = match frame {
            Ok(f) => match f.into_data() {
                Ok(d) => d,
                Err(_) => continue,
            },
            Err(e) => break Err(format!("the body was cut: {e}")),
        };
        let len = data.len() as u64;
        if n.saturating_add(len) > limit {
            break Err(format!("the body is larger than the {limit} bytes allowed"));
        }
        n += len;
        if batch.pieces.is_empty() {
            due.as_mut().reset(Instant::now() + HOLD);
        }
        if batch.add(data) {
            batch.flush(sink, start + n).await?;
            received(n);
        }
    };
    batch.flush(sink, start + n).await?;
    received(n);
    outcome.map(|()| n)
}

/// Bytes handed to the writing thread at once: each hand-over wakes it (hyper's frames are at
/// most [`READ_BUFFER`]; a wake for each cost a fifth of an HTTPS download's CPU).
const BATCH: usize = 1 << 20;
/// The longest a piece waits for others to join it: what arrives slowly is handed on (and
/// counted) without waiting for a full batch.
const HOLD: Duration = Duration::from_millis(20);

/// Adjacent pieces of a body not yet handed to the writing thread.
#[derive(Default)]
struct Batch {
    pieces: Vec<Bytes>,
    bytes: usize,
}

impl Batch {
    /// Adds `b`; whether the batch is now full.
    fn add(&mut self, b: Bytes) -> bool {
        self.bytes += b.len();
        self.pieces.push(b);
        self.bytes >= BATCH
    }

    /// Hands what is held, ending at offset `end`, to `sink`.
    async fn flush(&mut self, sink: &FileSink, end: u64) -> Result<(), String> {
        if self.pieces.is_empty() {
            return Ok(());
        }
        let at = end - self.bytes as u64;
        self.bytes = 0;
        sink.write(at, std::mem::take(&mut self.pieces))
            .await
            .map_err(|()| "the file could not be written".to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::StreamBody;
    use std::io::Write;
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::Arc;

    fn file_of(bytes: &[u8]) -> File {
        let mut f = tempfile::tempfile().expect("a temporary file");
        f.write_all(bytes).expect("written");
        f
    }

    fn pattern(n: usize) -> Vec<u8> {
        (0..n).map(|i| (i * 7 + i / 251) as u8).collect()
    }

    async fn collect(body: ResponseBody) -> (Vec<u8>, Option<io::Error>) {
        let mut body = body;
        let mut got = Vec::new();
        while let Some(frame) = body.frame().await {
            match frame {
                Ok(f) => got.extend_from_slice(&f.into_data().unwrap_or_default()),
                Err(e) => return (got, Some(e)),
            }
        }
        (got, None)
    }

    #[tokio::test]
    async fn a_file_body_is_its_pieces_in_order_past_the_read_ahead() {
        let data = pattern(CHUNK * AHEAD * 2 + 5);
        let pieces = vec![
            Piece::Text(Bytes::from_static(b"--a\r\n")),
            Piece::File(3..(CHUNK * AHEAD + 17) as u64),
            Piece::Text(Bytes::from_static(b"--b\r\n")),
            Piece::File(1..data.len() as u64),
        ];
        let sent = Arc::new(AtomicU64::new(0));
        let counted = sent.clone();
        let body = from_file(file_of(&data), pieces, move |n| {
            counted.store(n, Ordering::Relaxed)
        });
        assert_eq!(
            body.size_hint().exact(),
            Some(5 + (CHUNK * AHEAD + 14) as u64 + 5 + data.len() as u64 - 1)
        );
        let (got, err) = collect(body).await;
        assert!(err.is_none());
        let mut want = b"--a\r\n".to_vec();
        want.extend_from_slice(&data[3..CHUNK * AHEAD + 17]);
        want.extend_from_slice(b"--b\r\n");
        want.extend_from_slice(&data[1..]);
        assert!(got == want, "{} bytes, {} expected", got.len(), want.len());
        assert_eq!(sent.load(Ordering::Relaxed), (want.len() - 10) as u64);
    }

    #[tokio::test]
    async fn a_file_shorter_than_its_range_ends_the_body_with_an_error() {
        let data = pattern(CHUNK * 3 + 100);
        let body = from_file(
            file_of(&data),
            vec![Piece::File(0..(CHUNK * 20) as u64)],
            |_| {},
        );
        let (got, err) = collect(body).await;
        assert_eq!(got, data);
        assert_eq!(err.map(|e| e.kind()), Some(io::ErrorKind::UnexpectedEof));
    }

    type Frames = Vec<Result<Frame<Bytes>, io::Error>>;

    fn body_of(frames: Frames) -> impl Body<Data = Bytes, Error = io::Error> + Unpin {
        StreamBody::new(futures_util::stream::iter(frames))
    }

    #[tokio::test]
    async fn what_arrived_before_a_cut_is_written_and_counted() {
        let data = pattern(BATCH * 2 + 3000);
        let mut frames: Frames = data
            .chunks(100_000)
            .map(|c| Ok(Frame::data(Bytes::copy_from_slice(c))))
            .collect();
        frames.push(Err(io::Error::other("reset")));
        let dir = tempfile::tempdir().expect("a directory");
        let path = dir.path().join("f");
        let sink = FileSink::new(File::create(&path).expect("created"));
        let counted = AtomicU64::new(0);
        let r = drain_into(body_of(frames), &sink, 10, u64::MAX, |n| {
            counted.store(n, Ordering::Relaxed)
        })
        .await;
        assert!(r.is_err_and(|e| e.contains("cut")));
        sink.finish().await.expect("written");
        let on_disk = std::fs::read(&path).expect("read back");
        assert_eq!(on_disk[..10], [0u8; 10]);
        assert!(on_disk[10..] == data[..], "{} bytes on disk", on_disk.len());
        assert_eq!(counted.load(Ordering::Relaxed), data.len() as u64);
    }

    #[tokio::test]
    async fn a_body_past_its_limit_is_refused_after_what_fits() {
        let frames: Frames = (0..5)
            .map(|_| Ok(Frame::data(Bytes::from(vec![9u8; 1000]))))
            .collect();
        let dir = tempfile::tempdir().expect("a directory");
        let path = dir.path().join("f");
        let sink = FileSink::new(File::create(&path).expect("created"));
        let r = drain_into(body_of(frames), &sink, 0, 3500, |_| {}).await;
        assert!(r.is_err_and(|e| e.contains("larger")));
        sink.finish().await.expect("written");
        assert_eq!(std::fs::read(&path).expect("read back"), vec![9u8; 3000]);
    }

    #[tokio::test]
    async fn pieces_that_arrive_slowly_are_counted_without_waiting_for_a_batch() {
        let (tx, rx) = mpsc::channel::<io::Result<Bytes>>(1);
        let body = channel(rx, None);
        let dir = tempfile::tempdir().expect("a directory");
        let sink = FileSink::new(File::create(dir.path().join("f")).expect("created"));
        let counted = Arc::new(AtomicU64::new(0));
        let seen = counted.clone();
        let drain = tokio::spawn(async move {
            let r = drain_into(body, &sink, 0, u64::MAX, |n| {
                seen.store(n, Ordering::Relaxed)
            })
            .await;
            sink.finish().await.map(|()| r)
        });
        tx.send(Ok(Bytes::from_static(b"abc"))).await.expect("sent");
        let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
        while counted.load(Ordering::Relaxed) < 3 && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        assert_eq!(counted.load(Ordering::Relaxed), 3);
        drop(tx);
        let r = drain.await.expect("joined").expect("written");
        assert_eq!(r, Ok(3));
    }
}
