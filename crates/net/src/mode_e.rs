//! The MODE E data mover: a file sent as blocks over several TCP connections (the sender opens
//! them, and with a [`StreamPolicy`] opens more while the transfer runs), and blocks received
//! from any number of connections into a file by offset. A [`Channel`] keeps the connections a
//! transfer ended without closing (GridFTP data-channel caching) for the next one. Block framing
//! and bookkeeping are `fatpipe_proto::mode_e`'s; this module only moves bytes.

use crate::tcpinfo::tcp_stats;
use crate::{Pump, PumpError};
use fatpipe_proto::mode_e::{
    Action, BlockError, Header, Reassembly, SendPlan, CLOSE, EOD, HEADER_LEN,
};
use fatpipe_tune::streams::{Observation, StreamPolicy};
use socket2::Socket;
use std::fs::File;
use std::io::{self, ErrorKind, Read, Write};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream};
use std::os::fd::{AsFd, BorrowedFd};
use std::os::unix::fs::FileExt;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// Sets options on a socket before it connects (buffers that fix the window scale).
pub type Prepare = Arc<dyn Fn(BorrowedFd<'_>) -> io::Result<()> + Send + Sync>;
/// Called with each data connection of a transfer, its pump (to start a tuner), and whether
/// the connection is kept from the previous transfer (its windows already grown).
pub type OnStream = Arc<dyn Fn(&TcpStream, &Arc<Pump>, bool) + Send + Sync>;

/// How the data connections of a transfer are made.
pub enum Links {
    /// This end connects to `target` (GridFTP: the sender does).
    Connect {
        /// The peer's data address (PORT/EPRT or PASV/EPSV reply).
        target: SocketAddr,
        /// Run on each socket before it connects.
        prepare: Prepare,
        /// Limit for each connect.
        timeout: Duration,
    },
    /// This end accepts connections, from `peer` only.
    Accept {
        /// The listening socket (PASV/EPSV, or this client's PORT/EPRT).
        listener: TcpListener,
        /// The only address connections are taken from.
        peer: IpAddr,
        /// Longest wait for a connection while no data moves.
        timeout: Duration,
    },
}

impl Links {
    fn open(&self) -> io::Result<TcpStream> {
        match self {
            Links::Connect {
                target,
                prepare,
                timeout,
            } => {
                crate::socket::connect_prepared(*target, *timeout, |s: &Socket| prepare(s.as_fd()))
            }
            Links::Accept {
                listener,
                peer,
                timeout,
            } => {
                let deadline = Instant::now() + *timeout;
                loop {
                    match accept_from(listener, *peer, deadline)? {
                        Some(s) => return Ok(s),
                        None if Instant::now() >= deadline => {
                            return Err(io::Error::new(
                                ErrorKind::TimedOut,
                                "timed out waiting for a data connection",
                            ))
                        }
                        None => {}
                    }
                }
            }
        }
    }
}

/// The data channel of a session's MODE E transfers in one direction: how new connections are
/// made, and the connections the previous transfer left open (its EODs without the close bit),
/// which the next transfer uses first: warm windows instead of a new handshake and slow start.
pub struct Channel {
    links: Links,
    idle: Mutex<Vec<TcpStream>>,
}

impl std::fmt::Debug for Channel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Channel")
            .field("idle", &self.idle())
            .finish()
    }
}

impl Channel {
    /// A channel with no connections yet.
    pub fn new(links: Links) -> Channel {
        Channel {
            links,
            idle: Mutex::default(),
        }
    }

    /// Connections kept open by the previous transfer.
    pub fn idle(&self) -> usize {
        lock(&self.idle).len()
    }

    /// Hands every kept connection that is still open to a transfer (one the peer or the
    /// network closed meanwhile would fail it); the others are dropped.
    fn take_idle(&self) -> Vec<TcpStream> {
        let all = std::mem::take(&mut *lock(&self.idle));
        let (open, gone): (Vec<_>, Vec<_>) = all.into_iter().partition(still_open);
        if !gone.is_empty() {
            tracing::warn!(
                closed = gone.len(),
                "kept data connections were closed since the last transfer"
            );
        }
        open
    }

    fn keep(&self, sock: TcpStream) {
        lock(&self.idle).push(sock);
    }
}

/// Whether a connection is neither closed by its peer nor broken: a peek without waiting
/// finds data or nothing yet.
fn still_open(sock: &TcpStream) -> bool {
    if sock.set_nonblocking(true).is_err() {
        return false;
    }
    let open = match sock.peek(&mut [0u8; 1]) {
        Ok(n) => n > 0,
        Err(e) => e.kind() == ErrorKind::WouldBlock,
    };
    sock.set_nonblocking(false).is_ok() && open
}

/// A channel a session's last MODE E transfer left open, and which way that data went: the
/// next transfer in the same direction uses it, unless a new data address (PASV, PORT, …) or
/// anything else comes first (GridFTP data-channel caching; both ends keep one alike).
#[derive(Debug)]
pub struct Kept {
    /// Whether this end sent the data.
    pub sending: bool,
    /// The connections, and how to make more (the same listener or address).
    pub channel: Channel,
}

/// Waits up to 100 ms (and never past `deadline`) for a connection from `peer`.
fn accept_from(
    listener: &TcpListener,
    peer: IpAddr,
    deadline: Instant,
) -> io::Result<Option<TcpStream>> {
    listener.set_nonblocking(true)?;
    let wait = deadline
        .saturating_duration_since(Instant::now())
        .min(Duration::from_millis(100));
    let mut pfd = libc::pollfd {
        fd: std::os::fd::AsRawFd::as_raw_fd(listener),
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd for the listener, which outlives the call.
    let n = unsafe { libc::poll(&mut pfd, 1, wait.as_millis() as i32) };
    if n <= 0 {
        return Ok(None);
    }
    match listener.accept() {
        Ok((s, from)) if from.ip().to_canonical() == peer.to_canonical() => {
            s.set_nonblocking(false)?;
            s.set_nodelay(true)?;
            Ok(Some(s))
        }
        Ok((_, from)) => {
            tracing::warn!(%from, "refused data connection from a foreign address");
            Ok(None)
        }
        Err(e) if e.kind() == ErrorKind::WouldBlock || e.kind() == ErrorKind::Interrupted => {
            Ok(None)
        }
        Err(e) => Err(e),
    }
}

/// What to send.
pub struct SendJob {
    /// The file.
    pub file: File,
    /// Byte ranges `[start, end)` to send (the whole file, or what a restart still needs).
    pub ranges: Vec<(u64, u64)>,
    /// Subtracted from file offsets in the block headers (`ERET P`: offsets count from the
    /// start of the part sent).
    pub shift: u64,
    /// Largest block.
    pub block: u64,
    /// Connections at the start (at least the channel's kept ones, which are all used).
    pub start: u32,
    /// Grows the connection count while the transfer runs (`-p auto`, streams paced); `None`
    /// keeps `start`.
    pub policy: Option<StreamPolicy>,
    /// Whether connections are closed after the transfer (set in the EOD block); if not, the
    /// channel keeps them for the next transfer.
    pub close: bool,
    /// Told each policy decision with the stream count it leads to (telemetry).
    pub on_change: Option<OnChange>,
}

/// Receives the stream policy's decisions: the stream count after it, and why.
pub type OnChange = Box<dyn Fn(u32, &str) + Send + Sync>;

/// What a MODE E send did.
#[derive(Debug, Clone, Default)]
pub struct SendReport {
    /// Payload bytes sent.
    pub bytes: u64,
    /// Connections used.
    pub streams: u32,
    /// Of those, connections kept from the previous transfer.
    pub reused: u32,
    /// The stream policy's decisions, in order.
    pub decisions: Vec<String>,
}

/// Longest wait for the receiver to close a connection after its EOD.
const CLOSE_WAIT: Duration = Duration::from_secs(5);

/// How often the sender looks at its streams for the policy.
const POLICY_TICK: Duration = Duration::from_millis(100);

/// Sends `job` over the channel's kept connections and new ones it makes; `pump` is the
/// transfer's (progress, cancel).
pub fn send(
    mut job: SendJob,
    channel: &Channel,
    pump: &Arc<Pump>,
    on_stream: &OnStream,
) -> Result<SendReport, PumpError> {
    let plan = Mutex::new(SendPlan::new(std::mem::take(&mut job.ranges), job.block));
    let socks: Mutex<Vec<TcpStream>> = Mutex::default();
    let started = Instant::now();
    let mut policy = job.policy.take();
    // Streams whose count grows are paced; the first failure to pace one is kept for the report.
    let unpaced: Mutex<Option<String>> = Mutex::default();
    let pacing = policy.is_some().then_some(&unpaced);
    // Every kept connection is used (the receiver reads them all), new ones make up the rest.
    let mut kept = channel.take_idle();
    let reused = kept.len() as u32;
    let ctx = Sending {
        job: &job,
        channel,
        pacing,
        plan: &plan,
        socks: &socks,
        pump,
        on_stream,
    };
    let result = std::thread::scope(|scope| {
        let stream = |kept: Option<TcpStream>| {
            let ctx = &ctx;
            scope.spawn(move || {
                let r = send_stream(ctx, kept);
                if r.is_err() {
                    pump.cancel();
                }
                r
            })
        };
        // Register every initial stream before any starts: a fast first stream could otherwise
        // hand out the last block before the others join.
        let wanted = job.start.max(1).max(reused);
        let initial = (0..wanted).filter(|_| lock(&plan).join()).count();
        let mut workers: Vec<_> = (0..initial).map(|_| stream(kept.pop())).collect();
        while !workers.iter().all(|w| w.is_finished()) {
            std::thread::sleep(POLICY_TICK);
            let Some(p) = policy.as_mut() else { continue };
            let (streams, memory) = {
                let g = lock(&socks);
                let streams: Vec<_> = g
                    .iter()
                    .map(|s| tcp_stats(s.as_fd()).unwrap_or_default())
                    .collect();
                let memory = g
                    .iter()
                    .filter_map(|s| crate::buffers::accounted(s.as_fd()).ok())
                    .map(|a| a.sndbuf)
                    .sum();
                (streams, memory)
            };
            let obs = Observation {
                now: started.elapsed(),
                streams: &streams,
                memory,
            };
            let settled = p.is_settled();
            let change = p.observe(&obs);
            if let Some(c) = &change {
                for _ in 0..c.add {
                    if lock(&plan).join() {
                        workers.push(stream(None));
                    }
                }
            }
            let said = match (&change, settled, p.is_settled()) {
                (Some(c), _, _) => Some(c.reason.clone()),
                (None, false, true) => p.log.last().cloned(),
                _ => None,
            };
            if let Some(reason) = said {
                let n = lock(&plan).streams() as u32;
                tracing::info!(streams = n, "-p auto: {reason}");
                if let Some(f) = &job.on_change {
                    f(n, &reason);
                }
            }
        }
        let mut first_err = None;
        for w in workers {
            match w.join() {
                Ok(Ok(())) => {}
                Ok(Err(e)) => {
                    if first_err.is_none() || matches!(first_err, Some(PumpError::Cancelled)) {
                        first_err = Some(e);
                    }
                }
                Err(_) => first_err = Some(PumpError::Write(io::Error::other("sender panicked"))),
            }
        }
        first_err.map_or(Ok(()), Err)
    });
    pump.check()?;
    result?;
    let streams = lock(&plan).streams() as u32;
    let decisions = policy
        .map(|p| {
            let pacing = match lock(&unpaced).take() {
                None => PACED.to_string(),
                Some(e) => format!("streams not paced: {e}"),
            };
            std::iter::once(pacing).chain(p.log).collect()
        })
        .unwrap_or_default();
    Ok(SendReport {
        bytes: pump.bytes(),
        streams,
        reused,
        decisions,
    })
}

/// Why the streams of a transfer whose stream count grows (`-p auto`) are paced.
const PACED: &str = "every stream paced by TCP (internal pacing): a stream's slow-start \
    bursts would otherwise end its siblings' slow start early";

/// What the streams of one send share.
struct Sending<'a> {
    job: &'a SendJob,
    channel: &'a Channel,
    /// Where the first failure to pace a stream is kept; `None`: streams are not paced.
    pacing: Option<&'a Mutex<Option<String>>>,
    plan: &'a Mutex<SendPlan>,
    /// Clones of the streams' sockets, for the policy's looks.
    socks: &'a Mutex<Vec<TcpStream>>,
    pump: &'a Arc<Pump>,
    on_stream: &'a OnStream,
}

/// Sends blocks over `kept` (or a new connection) until the plan has none left; paces it when
/// the send's streams are paced.
fn send_stream(ctx: &Sending<'_>, kept: Option<TcpStream>) -> Result<(), PumpError> {
    let Sending {
        job,
        channel,
        pacing,
        plan,
        socks,
        pump,
        on_stream,
    } = *ctx;
    let reused = kept.is_some();
    let sock = match kept {
        Some(s) => s,
        None => channel.links.open().map_err(PumpError::Write)?,
    };
    if let Some(unpaced) = pacing {
        if let Err(e) = crate::pacing::pace(sock.as_fd()) {
            tracing::warn!("cannot pace a data connection: {e}");
            lock(unpaced).get_or_insert(e.to_string());
        }
    }
    let mine = Arc::new(Pump::child(pump));
    mine.attach(&sock).map_err(PumpError::Write)?;
    if let Ok(c) = sock.try_clone() {
        lock(socks).push(c);
    }
    on_stream(&sock, &mine, reused);
    loop {
        mine.check()?;
        let next = lock(plan).next_block();
        let Some((offset, count)) = next else { break };
        (&sock)
            .write_all(&Header::data(offset - job.shift, count).encode())
            .map_err(|e| mine.classify(PumpError::Write(e)))?;
        mine.send_range(&job.file, offset, count, &sock)?;
    }
    let tail: Vec<u8> = lock(plan)
        .finish_stream(job.close)
        .iter()
        .flat_map(|h| h.encode())
        .collect();
    (&sock)
        .write_all(&tail)
        .map_err(|e| mine.classify(PumpError::Write(e)))?;
    if !job.close {
        channel.keep(sock);
        return Ok(());
    }
    // Wait (a bounded while: a receiver may keep the connection) for the receiver to close
    // first, so the last bytes are not lost to a reset.
    let _ = sock.shutdown(std::net::Shutdown::Write);
    let _ = sock.set_read_timeout(Some(CLOSE_WAIT));
    let _ = (&sock).read(&mut [0u8; 1]);
    let _ = sock.shutdown(std::net::Shutdown::Both);
    Ok(())
}

/// What a MODE E receive did.
#[derive(Debug, Clone, Default)]
pub struct ReceiveReport {
    /// Payload bytes written.
    pub bytes: u64,
    /// Connections that carried the transfer.
    pub streams: u32,
    /// Of those, connections kept from the previous transfer.
    pub reused: u32,
}

/// Receives blocks into `file` (each at `base` plus its offset: `ESTO A`) from the channel's
/// kept connections and every new one it accepts, until the transfer is complete (EOF seen and
/// every connection's EOD). Connections whose EOD did not close them stay in the channel.
/// `state` is shared so that the caller can report the ranges received while it runs
/// (`111 Range Marker`). Connections beyond `max_streams` are closed as they come.
pub fn receive(
    file: &File,
    base: u64,
    state: &Arc<Mutex<Reassembly>>,
    channel: &Channel,
    pump: &Arc<Pump>,
    on_stream: &OnStream,
    max_streams: u32,
) -> Result<ReceiveReport, PumpError> {
    let idle = match &channel.links {
        Links::Accept { timeout, .. } | Links::Connect { timeout, .. } => *timeout,
    };
    let kept = channel.take_idle();
    let reused = kept.len() as u32;
    std::thread::scope(|scope| {
        let start = |sock: TcpStream, reused: bool| -> Result<_, PumpError> {
            let mine = Arc::new(Pump::child(pump));
            mine.attach(&sock).map_err(PumpError::Read)?;
            on_stream(&sock, &mine, reused);
            Ok(scope.spawn(move || {
                let r = receive_stream(file, base, state, &sock, reused, idle, &mine);
                match r {
                    Ok(true) => channel.keep(sock),
                    // Pumps and tuners hold clones of the socket: close it for all of them.
                    _ => {
                        let _ = sock.shutdown(std::net::Shutdown::Both);
                    }
                }
                if r.is_err() {
                    pump.cancel();
                }
                r.map(|_| ())
            }))
        };
        let mut streams = reused;
        let mut workers = kept
            .into_iter()
            .map(|s| start(s, true))
            .collect::<Result<Vec<_>, _>>()?;
        let mut last_progress = (Instant::now(), 0u64);
        loop {
            if lock(state).is_complete() {
                break;
            }
            if workers.iter().any(|w| w.is_finished()) {
                // A stream that failed fails the transfer; finished ones are collected below.
                let (done, running): (Vec<_>, Vec<_>) =
                    workers.into_iter().partition(|w| w.is_finished());
                workers = running;
                for w in done {
                    join_stream(w)?;
                }
                continue;
            }
            pump.check()?;
            let bytes = pump.bytes();
            if bytes != last_progress.1 {
                last_progress = (Instant::now(), bytes);
            } else if last_progress.0.elapsed() > idle {
                pump.cancel();
                return Err(PumpError::Read(io::Error::new(
                    ErrorKind::TimedOut,
                    "MODE E transfer stalled: no data and no connection",
                )));
            }
            let sock = match &channel.links {
                Links::Accept { listener, peer, .. } => {
                    accept_from(listener, *peer, Instant::now() + Duration::from_millis(100))
                        .map_err(PumpError::Read)?
                }
                Links::Connect { .. } => {
                    return Err(PumpError::Read(io::Error::other(
                        "a MODE E receiver accepts its connections",
                    )))
                }
            };
            match sock {
                // A sender may not take a thread and a buffer per connection without bound.
                Some(sock) if streams >= max_streams => {
                    tracing::warn!(max_streams, "refused a data connection beyond the limit");
                    let _ = sock.shutdown(std::net::Shutdown::Both);
                }
                Some(sock) => {
                    streams += 1;
                    workers.push(start(sock, false)?);
                }
                None => {}
            }
        }
        for w in workers {
            join_stream(w)?;
        }
        Ok(ReceiveReport {
            bytes: pump.bytes(),
            streams,
            reused,
        })
    })
}

fn join_stream(
    w: std::thread::ScopedJoinHandle<'_, Result<(), PumpError>>,
) -> Result<(), PumpError> {
    w.join()
        .map_err(|_| PumpError::Read(io::Error::other("receiver panicked")))?
}

/// Reads one connection's blocks until its EOD; answers whether the sender keeps the
/// connection open for another transfer. A connection kept from the previous transfer
/// (`reused`) that the sender closes, or leaves silent for `idle`, before its first block just
/// drops out.
fn receive_stream(
    file: &File,
    base: u64,
    state: &Mutex<Reassembly>,
    sock: &TcpStream,
    reused: bool,
    idle: Duration,
    pump: &Pump,
) -> Result<bool, PumpError> {
    let mut buf = vec![0u8; 1 << 20];
    // A kept connection's first header may never come: the wait for it is bounded.
    let mut awaiting_first = reused;
    if awaiting_first {
        sock.set_read_timeout(Some(idle))
            .map_err(|e| pump.classify(PumpError::Read(e)))?;
    }
    loop {
        pump.check()?;
        let mut h = [0u8; HEADER_LEN];
        match read_exact(pump, sock, &mut h) {
            Err(PumpError::Read(e)) if awaiting_first && dropped(&e) => return Ok(false),
            r => r?,
        }
        if awaiting_first {
            awaiting_first = false;
            sock.set_read_timeout(None)
                .map_err(|e| pump.classify(PumpError::Read(e)))?;
        }
        let header = Header::decode(&h);
        let action = lock(state).on_header(&header).map_err(|e| match e {
            // Past what this end may write: a storage matter, not a broken sender.
            BlockError::OutOfRange { .. } => {
                PumpError::Write(io::Error::new(ErrorKind::FileTooLarge, e.to_string()))
            }
            e => PumpError::Read(io::Error::new(ErrorKind::InvalidData, e.to_string())),
        })?;
        match action {
            Action::Data { offset, count } => {
                let mut at = base.checked_add(offset).ok_or_else(|| {
                    PumpError::Read(io::Error::new(
                        ErrorKind::InvalidData,
                        "block offset overflow",
                    ))
                })?;
                let end = at.checked_add(count).ok_or_else(|| {
                    PumpError::Read(io::Error::new(
                        ErrorKind::InvalidData,
                        "block offset overflow",
                    ))
                })?;
                // Whatever arrives is written and counted at once: the tuner's law reads the
                // byte count to see how much the window lets through per RTT.
                while at < end {
                    let want = ((end - at) as usize).min(buf.len());
                    let n = read_some(pump, sock, &mut buf[..want])?;
                    file.write_all_at(&buf[..n], at)
                        .map_err(|e| pump.classify(PumpError::Write(e)))?;
                    pump.add(n);
                    at += n as u64;
                }
                lock(state).on_written(offset, count);
                if header.descriptor & EOD != 0 {
                    return Ok(header.descriptor & CLOSE == 0);
                }
            }
            Action::EndOfData { close } => return Ok(!close),
            Action::Nothing => {}
        }
    }
}

/// Whether a kept connection's first read ended because the sender left it out of this
/// transfer: closed (or reset) it, or sent nothing on it within the data timeout.
fn dropped(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        ErrorKind::UnexpectedEof
            | ErrorKind::ConnectionReset
            | ErrorKind::WouldBlock
            | ErrorKind::TimedOut
    )
}

/// Reads what is there (at least one byte); the connection ending here is an error.
fn read_some(pump: &Pump, mut sock: &TcpStream, buf: &mut [u8]) -> Result<usize, PumpError> {
    loop {
        match sock.read(buf) {
            Ok(0) => {
                return Err(pump.classify(PumpError::Read(io::Error::new(
                    ErrorKind::UnexpectedEof,
                    "data connection closed inside a block",
                ))))
            }
            Ok(n) => {
                pump.note_read(n);
                return Ok(n);
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(e) => return Err(pump.classify(PumpError::Read(e))),
        }
    }
}

fn read_exact(pump: &Pump, mut sock: &TcpStream, buf: &mut [u8]) -> Result<(), PumpError> {
    sock.read_exact(buf).map_err(|e| {
        let e = if e.kind() == ErrorKind::UnexpectedEof {
            io::Error::new(
                ErrorKind::UnexpectedEof,
                "data connection closed before its EOD block",
            )
        } else {
            e
        };
        pump.classify(PumpError::Read(e))
    })
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Seek;

    fn file_with(data: &[u8]) -> File {
        let mut f = tempfile::tempfile().unwrap();
        f.write_all(data).unwrap();
        f.rewind().unwrap();
        f
    }

    fn nothing() -> OnStream {
        Arc::new(|_, _, _| {})
    }

    fn job(data: &[u8], ranges: Vec<(u64, u64)>, streams: u32, close: bool) -> SendJob {
        SendJob {
            file: file_with(data),
            ranges,
            shift: 0,
            block: 64 << 10,
            start: streams,
            policy: None,
            close,
            on_change: None,
        }
    }

    /// Both ends of a loopback data channel: the sender connects, the receiver accepts.
    fn channels() -> (Arc<Channel>, Channel) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let target = listener.local_addr().unwrap();
        let sending = Channel::new(Links::Connect {
            target,
            prepare: Arc::new(|_| Ok(())),
            timeout: Duration::from_secs(5),
        });
        let receiving = Channel::new(Links::Accept {
            listener,
            peer: "127.0.0.1".parse().unwrap(),
            timeout: Duration::from_secs(10),
        });
        (Arc::new(sending), receiving)
    }

    /// Sends `job` from one channel to the other; returns the received file.
    fn transfer_over(
        job: SendJob,
        len: usize,
        sending: &Arc<Channel>,
        receiving: &Channel,
    ) -> (Vec<u8>, SendReport, ReceiveReport) {
        let into = tempfile::tempfile().unwrap();
        let state = Arc::new(Mutex::new(Reassembly::new(len as u64)));
        let ch = sending.clone();
        let sender =
            std::thread::spawn(move || send(job, &ch, &Arc::new(Pump::default()), &nothing()));
        let report = receive(
            &into,
            0,
            &state,
            receiving,
            &Arc::new(Pump::default()),
            &nothing(),
            64,
        )
        .unwrap();
        let sent = sender.join().unwrap().unwrap();
        let mut got = vec![0u8; len];
        into.read_exact_at(&mut got, 0).unwrap_or(());
        (got, sent, report)
    }

    /// Sends `ranges` of `data` over `streams` new loopback connections; returns the received
    /// file.
    fn transfer(data: &[u8], ranges: Vec<(u64, u64)>, streams: u32) -> (Vec<u8>, ReceiveReport) {
        let (sending, receiving) = channels();
        let (got, sent, report) = transfer_over(
            job(data, ranges, streams, true),
            data.len(),
            &sending,
            &receiving,
        );
        assert_eq!(sent.streams, streams);
        assert_eq!((sending.idle(), receiving.idle()), (0, 0));
        (got, report)
    }

    #[test]
    fn connections_left_open_carry_the_next_transfer() {
        let (sending, receiving) = channels();
        let first: Vec<u8> = (0..1_000_003u32).map(|i| (i % 251) as u8).collect();
        let second: Vec<u8> = (0..2_000_017u32).map(|i| (i * 7 % 241) as u8).collect();
        let whole = |d: &[u8]| vec![(0, d.len() as u64)];
        let (got, _, r) = transfer_over(
            job(&first, whole(&first), 3, false),
            first.len(),
            &sending,
            &receiving,
        );
        assert!(got == first, "first file differs");
        assert_eq!((r.streams, r.reused), (3, 0));
        assert_eq!((sending.idle(), receiving.idle()), (3, 3));
        // The second transfer asks for one connection but uses the three kept ones, and the
        // receiver accepts none; it closes them at its end.
        let (got, sent, r) = transfer_over(
            job(&second, whole(&second), 1, true),
            second.len(),
            &sending,
            &receiving,
        );
        assert!(got == second, "second file differs");
        assert_eq!(sent.streams, 3);
        assert_eq!((r.streams, r.reused), (3, 3));
        assert_eq!((sending.idle(), receiving.idle()), (0, 0));
    }

    #[test]
    fn a_kept_connection_the_sender_closed_drops_out() {
        let (sending, receiving) = channels();
        let data = vec![5u8; 400_000];
        let whole = vec![(0, data.len() as u64)];
        let over = |close| job(&data, whole.clone(), 2, close);
        transfer_over(over(false), data.len(), &sending, &receiving);
        assert_eq!(receiving.idle(), 2);
        // The sender's end forgets one of them (closes it) between the transfers: the
        // receiver leaves it out, and the next transfer uses the other and a new one.
        let mut idle = sending.take_idle();
        drop(idle.pop());
        sending.keep(idle.pop().unwrap());
        std::thread::sleep(Duration::from_millis(50));
        let (got, _, r) = transfer_over(over(true), data.len(), &sending, &receiving);
        assert!(got == data, "file differs");
        assert_eq!((r.streams, r.reused), (2, 1));
        // A kept connection closed while the receiver reads it, before any block: not an error.
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let peer = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        receiving.keep(l.accept().unwrap().0);
        let closer = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(200));
            drop(peer);
        });
        let (got, _, r) = transfer_over(over(true), data.len(), &sending, &receiving);
        closer.join().unwrap();
        assert!(got == data, "file differs");
        assert_eq!((r.streams, r.reused), (3, 1));
    }

    #[test]
    fn a_kept_connection_the_receiver_closed_is_not_used() {
        let (sending, receiving) = channels();
        let data: Vec<u8> = (0..500_000u32).map(|i| (i % 249) as u8).collect();
        let whole = vec![(0, data.len() as u64)];
        transfer_over(
            job(&data, whole.clone(), 2, false),
            data.len(),
            &sending,
            &receiving,
        );
        // The receiving end closes one of the two between the transfers.
        let mut idle = receiving.take_idle();
        drop(idle.pop());
        receiving.keep(idle.pop().unwrap());
        std::thread::sleep(Duration::from_millis(50));
        let (got, sent, r) =
            transfer_over(job(&data, whole, 2, true), data.len(), &sending, &receiving);
        assert!(got == data, "file differs");
        assert_eq!((sent.streams, sent.reused), (2, 1));
        assert_eq!((r.streams, r.reused), (2, 1));
    }

    #[test]
    fn a_file_over_four_streams_arrives_whole() {
        let data: Vec<u8> = (0..3_000_001u32).map(|i| (i * 31 % 253) as u8).collect();
        let (got, report) = transfer(&data, vec![(0, data.len() as u64)], 4);
        assert!(got == data, "received file differs");
        assert_eq!(report.bytes, data.len() as u64);
        assert_eq!(report.streams, 4);
    }

    #[test]
    fn only_the_ranges_asked_for_are_sent() {
        let data = vec![7u8; 300_000];
        let (got, report) = transfer(&data, vec![(100_000, 200_000)], 2);
        assert_eq!(report.bytes, 100_000);
        assert!(got[..100_000].iter().all(|b| *b == 0));
        assert!(got[100_000..200_000].iter().all(|b| *b == 7));
    }

    #[test]
    fn an_empty_file_completes() {
        let (got, report) = transfer(&[], vec![(0, 0)], 3);
        assert!(got.is_empty());
        assert_eq!(report.bytes, 0);
    }

    #[test]
    fn a_connection_closed_early_fails_the_receive() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let target = listener.local_addr().unwrap();
        let t = std::thread::spawn(move || {
            let mut s = TcpStream::connect(target).unwrap();
            s.write_all(&Header::data(0, 100).encode()).unwrap();
            s.write_all(&[1u8; 10]).unwrap();
        });
        let links = Channel::new(Links::Accept {
            listener,
            peer: "127.0.0.1".parse().unwrap(),
            timeout: Duration::from_secs(5),
        });
        let state = Arc::new(Mutex::new(Reassembly::new(100)));
        let into = tempfile::tempfile().unwrap();
        let r = receive(
            &into,
            0,
            &state,
            &links,
            &Arc::new(Pump::default()),
            &nothing(),
            64,
        );
        t.join().unwrap();
        let err = r.unwrap_err().to_string();
        assert!(
            err.contains("data connection closed inside a block"),
            "{err}"
        );
    }
}
