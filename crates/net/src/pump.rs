//! Byte pumps for one data connection: file → socket (with `sendfile`), socket → file, and the
//! `TYPE A` variants. A [`Pump`] is shared with the controller, which reads progress from it
//! and can cancel it from another thread.

use crate::rate_budget::RateBudget;
use fatpipe_proto::ascii;
use std::fs::File;
use std::io::{self, ErrorKind, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

const CHUNK: usize = 1 << 20;
/// How long a blocked `sendfile` waits before it tops the send buffer up anyway. Linux wakes a
/// blocked writer only once a third of its buffer is free, so a buffer refilled on wake-ups
/// alone must be 1.5 x what may be in flight; refilled this often, little more than that.
const REFILL: Duration = Duration::from_millis(2);
/// Largest read buffer a law may ask for.
const MAX_READ: u64 = 256 << 20;

/// How long a pump that moved `bytes` in `elapsed` waits to stay within `limit` bit/s (0: no
/// limit).
fn limit_wait(bytes: u64, limit: u64, elapsed: Duration) -> Duration {
    if limit == 0 {
        return Duration::ZERO;
    }
    let due = Duration::from_secs_f64(bytes as f64 * 8.0 / limit as f64);
    due.saturating_sub(elapsed)
}

/// Rewrites a chunk of input into output bytes (line-ending conversion).
type Transform<'a> = &'a mut dyn FnMut(&[u8], &mut Vec<u8>);

/// Shared state of one running transfer: bytes moved so far and a cancel switch. A transfer
/// over several connections has one pump per connection, each a [`Pump::child`] of the
/// transfer's: bytes add up in the parent, and cancelling the parent stops them all.
#[derive(Debug, Default)]
pub struct Pump {
    bytes: AtomicU64,
    cancelled: AtomicBool,
    sockets: Mutex<Vec<TcpStream>>,
    parent: Option<Arc<Pump>>,
    first_byte: OnceLock<Instant>,
    last_byte_ns: AtomicU64,
    max_read: AtomicU64,
    read_size: AtomicU64,
    /// `--limit-rate-per-file`: the most this pump (and its children together) may move,
    /// bit/s; 0: no limit.
    limit: AtomicU64,
    /// `--limit-rate`: a rate this pump (and its children) shares with the copy's other pumps.
    budget: OnceLock<Arc<RateBudget>>,
}

/// How a pump ended without completing.
#[derive(Debug, thiserror::Error)]
pub enum PumpError {
    /// [`Pump::cancel`] was called.
    #[error("transfer cancelled")]
    Cancelled,
    /// Reading the source failed (file or network side, as the caller knows).
    #[error("read failed: {0}")]
    Read(io::Error),
    /// Writing the destination failed.
    #[error("write failed: {0}")]
    Write(io::Error),
}

impl Pump {
    /// Bytes moved so far (payload bytes as read from the source).
    pub fn bytes(&self) -> u64 {
        self.bytes.load(Ordering::Relaxed)
    }

    /// The pump of one connection of a transfer whose pump is `parent`.
    pub fn child(parent: &Arc<Pump>) -> Pump {
        Pump {
            parent: Some(parent.clone()),
            ..Pump::default()
        }
    }

    /// Stops the transfer from another thread: wakes pumps blocked on its sockets.
    pub fn cancel(&self) {
        self.cancelled.store(true, Ordering::SeqCst);
        if let Ok(guard) = self.sockets.lock() {
            for s in guard.iter() {
                let _ = s.shutdown(Shutdown::Both);
            }
        }
    }

    /// Lets a cancelled pump run again: its transfer was stopped to go on another way (over
    /// the UDP channel), not given up. The sockets it stopped are forgotten.
    pub fn restart(&self) {
        if let Ok(mut guard) = self.sockets.lock() {
            guard.clear();
        }
        self.cancelled.store(false, Ordering::SeqCst);
    }

    /// Whether [`Pump::cancel`] was called on this pump or its parent.
    pub fn is_cancelled(&self) -> bool {
        self.cancelled.load(Ordering::SeqCst)
            || self.parent.as_ref().is_some_and(|p| p.is_cancelled())
    }

    /// Registers a data socket so that [`Pump::cancel`] (here or on the parent) can interrupt
    /// blocking calls on it.
    pub fn attach(&self, sock: &TcpStream) -> io::Result<()> {
        let clone = sock.try_clone()?;
        if let Ok(mut guard) = self.sockets.lock() {
            guard.push(clone);
        }
        if let Some(p) = &self.parent {
            p.attach(sock)?;
        }
        if self.is_cancelled() {
            let _ = sock.shutdown(Shutdown::Both);
        }
        Ok(())
    }

    /// Time from the first to the last byte moved: the data phase, without the commands and
    /// round trips before it. `None` until bytes have moved in more than one chunk.
    pub fn data_phase(&self) -> Option<Duration> {
        self.first_byte.get()?;
        let ns = self.last_byte_ns.load(Ordering::Relaxed);
        (ns > 0).then(|| Duration::from_nanos(ns))
    }

    /// The largest single read since the previous call (what drs-grid's law looks at).
    pub fn take_max_read(&self) -> u64 {
        self.max_read.swap(0, Ordering::Relaxed)
    }

    /// Asks the receiving loop to read up to `bytes` at a time (drs-grid reads whole buffers).
    pub fn set_read_size(&self, bytes: u64) {
        self.read_size.store(bytes.min(MAX_READ), Ordering::Relaxed);
    }

    /// Records the size of one read from the socket (drs-grid's law looks at the largest).
    pub(crate) fn note_read(&self, n: usize) {
        self.max_read.fetch_max(n as u64, Ordering::Relaxed);
    }

    /// Holds the pump (and its children together) to `bits_per_s` from its first byte on
    /// (`--limit-rate`): a pump that ran ahead waits after its chunk.
    pub fn set_limit(&self, bits_per_s: Option<u64>) {
        self.limit.store(bits_per_s.unwrap_or(0), Ordering::Relaxed);
    }

    /// Raises the count to `total` bytes that another party moved and reported (the sender of
    /// a copy between two servers, in its performance markers), for progress.
    pub fn reported(&self, total: u64) {
        let seen = self.bytes();
        if total > seen {
            self.count((total - seen) as usize);
        }
    }

    /// Holds the pump (and its children) to a rate shared with other pumps (`--limit-rate`
    /// over a whole copy).
    pub fn share_limit(&self, budget: Arc<RateBudget>) {
        let _ = self.budget.set(budget);
    }

    /// The shared rate this pump or its parent moves within.
    fn budget(&self) -> Option<&Arc<RateBudget>> {
        self.budget
            .get()
            .or_else(|| self.parent.as_ref().and_then(|p| p.budget()))
    }

    /// Counts `n` bytes moved, then waits as long as a rate limit (here or on the parent, or
    /// shared) says.
    pub(crate) fn add(&self, n: usize) {
        self.count(n);
        if let Some(b) = self.budget() {
            self.pause(b.take(n as u64, Instant::now()));
        }
        self.throttle();
    }

    /// Sleeps `wait`, in steps of at most 100 ms, until then or a cancel.
    fn pause(&self, wait: Duration) {
        let until = Instant::now() + wait;
        loop {
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() || self.is_cancelled() {
                return;
            }
            std::thread::sleep(left.min(Duration::from_millis(100)));
        }
    }

    /// Waits until the bytes moved are within this pump's rate limit and its parent's (never
    /// past a cancel; the wait is re-checked every 100 ms).
    fn throttle(&self) {
        if let Some(p) = &self.parent {
            p.throttle();
        }
        let limit = self.limit.load(Ordering::Relaxed);
        let Some(first) = self.first_byte.get().copied() else {
            return;
        };
        loop {
            let wait = limit_wait(self.bytes(), limit, first.elapsed());
            if wait.is_zero() || self.is_cancelled() {
                return;
            }
            std::thread::sleep(wait.min(Duration::from_millis(100)));
        }
    }

    /// Counts `n` bytes moved, whatever the rate limit (a UDP receiver must never stall).
    pub(crate) fn count(&self, n: usize) {
        // The clock starts when the first chunk arrives; that chunk's own time is not measurable.
        let first = *self.first_byte.get_or_init(Instant::now);
        self.last_byte_ns
            .store(first.elapsed().as_nanos() as u64, Ordering::Relaxed);
        self.bytes.fetch_add(n as u64, Ordering::Relaxed);
        if let Some(p) = &self.parent {
            p.count(n);
        }
    }

    pub(crate) fn check(&self) -> Result<(), PumpError> {
        if self.is_cancelled() {
            Err(PumpError::Cancelled)
        } else {
            Ok(())
        }
    }

    /// Sends `file` from its current position to its end over `sock`, in the kernel (`sendfile`).
    pub fn send_file(&self, file: &File, sock: &TcpStream) -> Result<u64, PumpError> {
        let _refill = Refill::on(sock).map_err(PumpError::Write)?;
        let mut total = 0u64;
        loop {
            self.check()?;
            match nix::sys::sendfile::sendfile64(sock.as_fd(), file.as_fd(), None, CHUNK * 4) {
                Ok(0) => break,
                Ok(n) => {
                    total += n as u64;
                    self.add(n);
                }
                Err(nix::errno::Errno::EINTR | nix::errno::Errno::EAGAIN) => continue,
                // sendfile cannot tell which side failed; a file read error surfaces as EIO.
                Err(e @ nix::errno::Errno::EIO) => return Err(PumpError::Read(e.into())),
                Err(e) => return Err(self.classify(PumpError::Write(e.into()))),
            }
        }
        Ok(total)
    }

    /// Sends `count` bytes of `file` from `offset` over `sock`, in the kernel (`sendfile`), without
    /// moving the file's position (several connections send from one file at once).
    pub fn send_range(
        &self,
        file: &File,
        offset: u64,
        count: u64,
        sock: &TcpStream,
    ) -> Result<u64, PumpError> {
        let _refill = Refill::on(sock).map_err(PumpError::Write)?;
        let mut at = offset as i64;
        let end = offset.saturating_add(count) as i64;
        while at < end {
            self.check()?;
            let want = ((end - at) as usize).min(CHUNK * 4);
            match nix::sys::sendfile::sendfile64(sock.as_fd(), file.as_fd(), Some(&mut at), want) {
                Ok(0) => {
                    return Err(PumpError::Read(io::Error::new(
                        ErrorKind::UnexpectedEof,
                        "file shorter than its size",
                    )))
                }
                Ok(n) => self.add(n),
                Err(nix::errno::Errno::EINTR | nix::errno::Errno::EAGAIN) => continue,
                Err(e @ nix::errno::Errno::EIO) => return Err(PumpError::Read(e.into())),
                Err(e) => return Err(self.classify(PumpError::Write(e.into()))),
            }
        }
        Ok(count)
    }

    /// Copies `src` to `dst` until `src` ends.
    pub fn copy(
        &self,
        src: &mut (impl Read + ?Sized),
        dst: &mut (impl Write + ?Sized),
    ) -> Result<u64, PumpError> {
        self.copy_with(src, dst, None, |_| {})
    }

    /// Copies local text to the network, LF → CRLF (`TYPE A` download).
    pub fn copy_to_ascii(
        &self,
        src: &mut (impl Read + ?Sized),
        dst: &mut (impl Write + ?Sized),
    ) -> Result<u64, PumpError> {
        let mut conv = ascii::ToNetwork::default();
        self.copy_with(
            src,
            dst,
            Some(&mut |chunk, out| conv.convert(chunk, out)),
            |_| {},
        )
    }

    /// Copies network text to local storage, CRLF → LF (`TYPE A` upload).
    pub fn copy_from_ascii(
        &self,
        src: &mut (impl Read + ?Sized),
        dst: &mut (impl Write + ?Sized),
    ) -> Result<u64, PumpError> {
        let conv = std::cell::RefCell::new(ascii::FromNetwork::default());
        self.copy_with(
            src,
            dst,
            Some(&mut |chunk, out| conv.borrow_mut().convert(chunk, out)),
            |out| conv.borrow_mut().finish(out),
        )
    }

    fn copy_with(
        &self,
        src: &mut (impl Read + ?Sized),
        dst: &mut (impl Write + ?Sized),
        mut transform: Option<Transform<'_>>,
        finish: impl FnOnce(&mut Vec<u8>),
    ) -> Result<u64, PumpError> {
        let mut buf = vec![0u8; CHUNK];
        let mut out = Vec::new();
        let mut total = 0u64;
        loop {
            self.check()?;
            let want = self.read_size.load(Ordering::Relaxed) as usize;
            if want > buf.len() {
                buf.resize(want, 0);
            }
            let n = match src.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => {
                    self.note_read(n);
                    n
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(e) => return Err(self.classify(PumpError::Read(e))),
            };
            // Untransformed data goes straight from the read buffer: no copy on the fast path.
            let chunk = match transform.as_mut() {
                Some(t) => {
                    out.clear();
                    t(&buf[..n], &mut out);
                    &out[..]
                }
                None => &buf[..n],
            };
            dst.write_all(chunk)
                .map_err(|e| self.classify(PumpError::Write(e)))?;
            total += n as u64;
            self.add(n);
        }
        out.clear();
        finish(&mut out);
        dst.write_all(&out)
            .and_then(|_| dst.flush())
            .map_err(|e| self.classify(PumpError::Write(e)))?;
        // A cancel that shut the socket down reads as a clean end of stream: do not call it complete.
        self.check()?;
        Ok(total)
    }

    pub(crate) fn classify(&self, e: PumpError) -> PumpError {
        if self.is_cancelled() {
            PumpError::Cancelled
        } else {
            e
        }
    }
}

/// A send timeout of [`REFILL`] on a socket while `sendfile` runs on it (other writers on the
/// socket expect it blocking): a full buffer is topped up every few milliseconds instead of
/// only once a third of it has drained.
struct Refill<'a>(&'a TcpStream);

impl<'a> Refill<'a> {
    fn on(sock: &'a TcpStream) -> io::Result<Refill<'a>> {
        sock.set_write_timeout(Some(REFILL))?;
        Ok(Refill(sock))
    }
}

impl Drop for Refill<'_> {
    fn drop(&mut self) {
        if let Err(e) = self.0.set_write_timeout(None) {
            tracing::warn!("cannot clear the send timeout: {e}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Seek;
    use std::net::TcpListener;

    fn pair() -> (TcpStream, TcpStream) {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let a = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (b, _) = l.accept().unwrap();
        (a, b)
    }

    #[test]
    fn a_limit_holds_the_rate_from_the_first_byte() {
        let s = Duration::from_secs;
        assert_eq!(limit_wait(1 << 30, 0, s(0)), Duration::ZERO);
        // 10 MB at 8 Mbit/s is due at 10 s.
        assert_eq!(limit_wait(10_000_000, 8_000_000, s(4)), s(6));
        assert_eq!(limit_wait(10_000_000, 8_000_000, s(12)), Duration::ZERO);
        // A child's bytes count against its parent's limit.
        let parent = Arc::new(Pump::default());
        parent.set_limit(Some(8_000_000));
        let child = Pump::child(&parent);
        child.count(1_000_000);
        let started = Instant::now();
        child.add(1);
        // 1 MB at 8 Mbit/s: about a second after the first byte.
        assert!(started.elapsed() >= Duration::from_millis(900));
    }

    #[test]
    fn send_file_moves_every_byte_from_offset() {
        let mut f = tempfile::tempfile().unwrap();
        let data: Vec<u8> = (0..3_000_000u32).map(|i| (i * 7 % 251) as u8).collect();
        f.write_all(&data).unwrap();
        f.seek(io::SeekFrom::Start(1000)).unwrap();
        let (a, mut b) = pair();
        let reader = std::thread::spawn(move || {
            let mut got = Vec::new();
            b.read_to_end(&mut got).unwrap();
            got
        });
        let pump = Pump::default();
        assert_eq!(pump.send_file(&f, &a).unwrap(), data.len() as u64 - 1000);
        drop(a);
        assert_eq!(reader.join().unwrap(), &data[1000..]);
        assert_eq!(pump.bytes(), data.len() as u64 - 1000);
    }

    #[test]
    fn a_range_sent_behind_a_slow_reader_arrives_whole_and_leaves_the_socket_blocking() {
        // A small send buffer and a reader that starts late: sendfile runs into its refill
        // timeout (partial sends and EAGAIN) many times over.
        let mut f = tempfile::tempfile().unwrap();
        let data: Vec<u8> = (0..2_000_000u32).map(|i| (i * 13 % 251) as u8).collect();
        f.write_all(&data).unwrap();
        let (a, mut b) = pair();
        socket2::SockRef::from(&a)
            .set_send_buffer_size(16 << 10)
            .unwrap();
        let reader = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(50));
            let mut got = vec![0; 1_500_000];
            b.read_exact(&mut got).unwrap();
            got
        });
        let pump = Pump::default();
        assert_eq!(
            pump.send_range(&f, 500_000, 1_500_000, &a).unwrap(),
            1_500_000
        );
        assert_eq!(reader.join().unwrap(), &data[500_000..]);
        assert_eq!(a.write_timeout().unwrap(), None);
    }

    #[test]
    fn a_restarted_pump_runs_again() {
        let (a, b) = pair();
        let pump = Pump::default();
        pump.attach(&a).unwrap();
        pump.cancel();
        let (c, mut d) = pair();
        assert!(pump.copy(&mut &b"stopped"[..], &mut &c).is_err());
        pump.restart();
        assert!(!pump.is_cancelled());
        let mut src: &[u8] = b"again";
        assert_eq!(pump.copy(&mut src, &mut &c).unwrap(), 5);
        drop(c);
        let mut got = Vec::new();
        d.read_to_end(&mut got).unwrap();
        assert_eq!(got, b"again");
        drop(b);
    }

    #[test]
    fn cancel_interrupts_a_blocked_receive() {
        let (a, b) = pair();
        let pump = std::sync::Arc::new(Pump::default());
        pump.attach(&b).unwrap();
        let p2 = pump.clone();
        let t = std::thread::spawn(move || p2.copy(&mut &b, &mut io::sink()));
        std::thread::sleep(std::time::Duration::from_millis(50));
        pump.cancel();
        assert!(matches!(t.join().unwrap(), Err(PumpError::Cancelled)));
        drop(a);
    }

    #[test]
    fn ascii_pumps_convert_line_endings() {
        let pump = Pump::default();
        let mut wire = Vec::new();
        pump.copy_to_ascii(&mut &b"a\nb\n"[..], &mut wire).unwrap();
        assert_eq!(wire, b"a\r\nb\r\n");
        let mut local = Vec::new();
        pump.copy_from_ascii(&mut &wire[..], &mut local).unwrap();
        assert_eq!(local, b"a\nb\n");
    }
}
