//! The receiving side: every connection's blocks written at their offsets until the EOF block
//! and every EOD have come; connections past the limit closed as they come.

use super::channel::accept_from;
use super::Links;
use super::{join_streams, lock, Channel, OnStream};
use crate::admission::is_not_proved;
use crate::link::Link;
use crate::wake::Wake;
use crate::{Moved, Pump, PumpError};
use fatpipe_proto::mode_e::{Action, BlockError, Header, Reassembly, CLOSE, EOD, HEADER_LEN};
use std::fs::File;
use std::io::{self, ErrorKind, Read};
use std::net::TcpStream;
use std::os::unix::fs::FileExt;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

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
) -> Result<Moved, PumpError> {
    let idle = match &channel.links {
        Links::Accept { timeout, .. } | Links::Connect { timeout, .. } => *timeout,
    };
    let kept = channel.take_idle();
    let reused = kept.len() as u32;
    let fresh = channel.take_fresh();
    let wake = Wake::new().map_err(PumpError::Read)?;
    let wake = &wake;
    let target = &Target {
        file,
        base,
        writes: file
            .metadata()
            .is_ok_and(|m| m.is_file())
            .then(|| Mutex::new(())),
    };
    std::thread::scope(|scope| {
        let start = |arrival: Arrival| -> Result<_, PumpError> {
            let mine = Arc::new(Pump::child(pump));
            let reused = matches!(arrival, Arrival::Kept(_));
            mine.attach(arrival.socket()).map_err(PumpError::Read)?;
            on_stream(arrival.socket(), &mine, reused);
            Ok(scope.spawn(move || {
                // A new connection's TLS handshake runs here, beside the other streams.
                let link = match arrival {
                    Arrival::Kept(link) | Arrival::Ready(link) => Ok(link),
                    Arrival::New(sock) => match channel.link(sock) {
                        // Not this session's: dropped, the transfer goes on without it.
                        Err(e) if is_not_proved(&e) => {
                            tracing::warn!("refused a data connection: {e}");
                            return Ok(());
                        }
                        r => r.map_err(|e| mine.classify(PumpError::Read(e))),
                    },
                };
                let r = link.and_then(|mut link| {
                    let r = receive_stream(target, state, &mut link, reused, idle, &mine);
                    match r {
                        Ok(true) => channel.keep(link),
                        // Pumps and tuners hold clones of the socket: close it for all of them.
                        _ => {
                            let _ = link.socket().shutdown(std::net::Shutdown::Both);
                        }
                    }
                    r
                });
                if r.is_err() {
                    pump.cancel();
                }
                wake.ring();
                r.map(|_| ())
            }))
        };
        let mut streams = reused + fresh.len() as u32;
        let mut workers = kept
            .into_iter()
            .map(Arrival::Kept)
            .chain(fresh.into_iter().map(Arrival::Ready))
            .map(start)
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
                if let Err(e) = join_streams(done, receiver_panicked) {
                    return Err(first_cause(e, workers));
                }
                continue;
            }
            if let Err(cancelled) = pump.check() {
                return Err(first_cause(cancelled, workers));
            }
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
                Links::Accept {
                    listener,
                    admission,
                    ..
                } => accept_from(
                    listener,
                    admission,
                    Instant::now() + Duration::from_millis(100),
                    Some(wake),
                )
                .map_err(PumpError::Read)?,
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
                    workers.push(start(Arrival::New(sock))?);
                }
                None => {}
            }
        }
        join_streams(workers, receiver_panicked)?;
        Ok(Moved {
            bytes: pump.bytes(),
            streams,
            reused,
            udp: None,
        })
    })
}

/// Where the streams write: the file (each block at `base` plus its offset) and, for a
/// regular file, the lock that lets one stream write at a time. The kernel takes the file's
/// own lock for each write, and writers kept waiting for it spin on the cores: on two cores
/// receiving into tmpfs, a third of the receiver's time (`perf`: `rwsem_spin_on_owner`);
/// waiting here, they sleep. (Writes to /dev/null take no lock and need none.)
struct Target<'a> {
    file: &'a File,
    base: u64,
    writes: Option<Mutex<()>>,
}

impl Target<'_> {
    /// Leave to write: held while one stream writes.
    fn turn(&self) -> Option<std::sync::MutexGuard<'_, ()>> {
        self.writes.as_ref().map(lock)
    }
}

/// A connection a receive starts on: kept from the last transfer, made (and secured) before
/// it began, or just accepted (to be secured, if the channel is, in its own thread).
enum Arrival {
    Kept(Link),
    Ready(Link),
    New(TcpStream),
}

impl Arrival {
    fn socket(&self) -> &TcpStream {
        match self {
            Arrival::Kept(l) | Arrival::Ready(l) => l.socket(),
            Arrival::New(s) => s,
        }
    }
}

/// Why a receive failed, given one failure seen and the streams still running (a failure
/// cancels them all): a stream that broke, not the cancel it caused in the others, which may
/// end first (a retry tells a lost connection from a cancelled copy by it).
fn first_cause(
    seen: PumpError,
    running: Vec<std::thread::ScopedJoinHandle<'_, Result<(), PumpError>>>,
) -> PumpError {
    match (seen, join_streams(running, receiver_panicked)) {
        (PumpError::Cancelled, Err(cause)) => cause,
        (seen, _) => seen,
    }
}

fn receiver_panicked() -> PumpError {
    PumpError::Read(io::Error::other("receiver panicked"))
}

/// Reads one connection's blocks until its EOD; answers whether the sender keeps the
/// connection open for another transfer. A connection kept from the previous transfer
/// (`reused`) that the sender closes, or leaves silent for `idle`, before its first block just
/// drops out.
fn receive_stream(
    target: &Target<'_>,
    state: &Mutex<Reassembly>,
    link: &mut Link,
    reused: bool,
    idle: Duration,
    pump: &Pump,
) -> Result<bool, PumpError> {
    let (file, base) = (target.file, target.base);
    let mut buf = vec![0u8; 1 << 20];
    // A plain connection's bytes go into the file in the kernel (one copy instead of two).
    let mut splicer = match link {
        Link::Plain(_) if crate::splice::splices_into(file) => crate::splice::SpliceIn::new().ok(),
        _ => None,
    };
    // A kept connection's first header may never come: the wait for it is bounded.
    let mut awaiting_first = reused;
    if awaiting_first {
        link.socket()
            .set_read_timeout(Some(idle))
            .map_err(|e| pump.classify(PumpError::Read(e)))?;
    }
    loop {
        pump.check()?;
        let mut h = [0u8; HEADER_LEN];
        match read_exact(pump, link, &mut h) {
            Err(PumpError::Read(e)) if awaiting_first && dropped(&e) => return Ok(false),
            r => r?,
        }
        if awaiting_first {
            awaiting_first = false;
            link.socket()
                .set_read_timeout(None)
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
                    let n = match (splicer.as_mut(), &*link) {
                        (Some(pipe), Link::Plain(sock)) => match pipe.fill(pump, sock, want)? {
                            0 => return Err(closed_inside_a_block(pump)),
                            n => {
                                pump.note_read(n);
                                let _turn = target.turn();
                                pipe.drain(pump, file, Some(at), n)?;
                                n
                            }
                        },
                        _ => {
                            let n = read_some(pump, link, &mut buf[..want])?;
                            let _turn = target.turn();
                            file.write_all_at(&buf[..n], at)
                                .map_err(|e| pump.classify(PumpError::Write(e)))?;
                            n
                        }
                    };
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

/// The connection ended inside a block.
fn closed_inside_a_block(pump: &Pump) -> PumpError {
    pump.classify(PumpError::Read(io::Error::new(
        ErrorKind::UnexpectedEof,
        "data connection closed inside a block",
    )))
}

/// Reads what is there (at least one byte); the connection ending here is an error.
fn read_some(pump: &Pump, sock: &mut impl Read, buf: &mut [u8]) -> Result<usize, PumpError> {
    loop {
        match sock.read(buf) {
            Ok(0) => return Err(closed_inside_a_block(pump)),
            Ok(n) => {
                pump.note_read(n);
                return Ok(n);
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(e) => return Err(pump.classify(PumpError::Read(e))),
        }
    }
}

fn read_exact(pump: &Pump, sock: &mut impl Read, buf: &mut [u8]) -> Result<(), PumpError> {
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
