//! The sending side: blocks handed to whichever stream asks, more streams opened when the
//! conductor asks (its stream policy decides), each stream ended with its EOD.

use super::{join_streams, lock, Channel, OnStream};
use crate::link::Link;
use crate::{Moved, Pump, PumpError};
use fatpipe_proto::mode_e::{Header, SendPlan};
use std::fs::File;
use std::io::{self, Write};
use std::os::fd::AsFd;
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::Duration;

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
    /// Whether connections are closed after the transfer (set in the EOD block); if not, the
    /// channel keeps them for the next transfer.
    pub close: bool,
    /// Where requests for more streams arrive ([`growth`]); without, the count stays.
    pub requests: Option<Requests>,
}

/// What reaches a running send: a stream's end, or a request for more streams.
enum Msg {
    Ended,
    Open(u32),
}

/// Asks a running send for more streams (the conductor's handle).
#[derive(Clone)]
pub struct Grow(mpsc::Sender<Msg>);

impl Grow {
    /// Asks for `n` more streams (ignored once the send has ended).
    pub fn open(&self, n: u32) {
        let _ = self.0.send(Msg::Open(n));
    }
}

/// The send's end of [`growth`].
pub struct Requests {
    tx: mpsc::Sender<Msg>,
    rx: mpsc::Receiver<Msg>,
}

/// A handle to ask a send for more streams, and the requests end its [`SendJob`] takes.
pub fn growth() -> (Grow, Requests) {
    let (tx, rx) = mpsc::channel();
    (Grow(tx.clone()), Requests { tx, rx })
}

/// Longest wait for the receiver to close a connection after its EOD.
const CLOSE_WAIT: Duration = Duration::from_secs(5);

/// How often the sender looks whether a stream thread ended without saying so (it panicked).
const LOOK: Duration = Duration::from_millis(100);

/// Sends `job` over the channel's kept connections and new ones it makes; `pump` is the
/// transfer's (progress, cancel).
pub fn send(
    job: SendJob,
    channel: &Channel,
    pump: &Arc<Pump>,
    on_stream: &OnStream,
) -> Result<Moved, PumpError> {
    let SendJob {
        file,
        ranges,
        shift,
        block,
        start,
        close,
        requests,
    } = job;
    let plan = Mutex::new(SendPlan::new(ranges, block));
    let Requests { tx, rx } = requests.unwrap_or_else(|| growth().1);
    // Every kept connection is used (the receiver reads them all), new ones make up the rest.
    let mut kept = channel.take_idle();
    // The widest window last (it is handed out first, with the first block).
    kept.sort_by_cached_key(|l| {
        crate::tcpinfo::tcp_stats(l.socket().as_fd()).map_or(0, |t| t.cwnd_bytes)
    });
    let reused = kept.len() as u32;
    let ctx = Sending {
        file: &file,
        shift,
        close,
        channel,
        plan: &plan,
        pump,
        on_stream,
    };
    let result = std::thread::scope(|scope| {
        // Each stream says when it ends, so that the last one's end is seen at once (waiting for
        // a periodic look cost 100 ms per file).
        let stream = |kept: Option<Link>, first: Option<(u64, u64)>| {
            let ctx = &ctx;
            let ended = tx.clone();
            scope.spawn(move || {
                let r = send_stream(ctx, kept, first);
                if r.is_err() {
                    pump.cancel();
                }
                let _ = ended.send(Msg::Ended);
                r
            })
        };
        // Register every initial stream before any starts: a fast first stream could otherwise
        // hand out the last block before the others join.
        let wanted = start.max(1).max(reused);
        let initial = (0..wanted).filter(|_| lock(&plan).join()).count();
        // The first block goes to the kept connection with the widest congestion window: a
        // small file (one block) rides the connection that carried the last one, not one that
        // only ever carried EODs and would start from the initial window (measured at 100 ms:
        // a tree's 64 KiB files took 330 ms each, three windows of slow start, instead of 125).
        let mut first = lock(&plan).next_block();
        let mut workers: Vec<_> = (0..initial)
            .map(|_| stream(kept.pop(), first.take()))
            .collect();
        // Streams that have not said they ended (a panicking one never says: then its thread's
        // end is seen at the next look).
        let mut running = workers.len();
        while running > 0 && !workers.iter().all(|w| w.is_finished()) {
            match rx.recv_timeout(LOOK) {
                Ok(Msg::Ended) => running -= 1,
                Ok(Msg::Open(n)) => {
                    for _ in 0..n {
                        if lock(&plan).join() {
                            workers.push(stream(None, None));
                            running += 1;
                        }
                    }
                }
                Err(_) => {}
            }
        }
        join_streams(workers, || {
            PumpError::Write(io::Error::other("sender panicked"))
        })
    });
    pump.check()?;
    result?;
    let streams = lock(&plan).streams() as u32;
    Ok(Moved {
        bytes: pump.bytes(),
        streams,
        reused,
        udp: None,
    })
}

/// What the streams of one send share.
struct Sending<'a> {
    file: &'a File,
    /// Subtracted from the offsets in the headers.
    shift: u64,
    /// Whether connections close after their EOD.
    close: bool,
    channel: &'a Channel,
    plan: &'a Mutex<SendPlan>,
    pump: &'a Arc<Pump>,
    on_stream: &'a OnStream,
}

/// Sends `first` (a block handed to this stream) and then blocks over `kept` (or a new
/// connection) until the plan has none left.
fn send_stream(
    ctx: &Sending<'_>,
    kept: Option<Link>,
    mut first: Option<(u64, u64)>,
) -> Result<(), PumpError> {
    let Sending {
        file,
        shift,
        close,
        channel,
        plan,
        pump,
        on_stream,
    } = *ctx;
    let mine = Arc::new(Pump::child(pump));
    let fail = |e| mine.classify(PumpError::Write(e));
    let mut link = match kept {
        Some(link) => {
            mine.attach(link.socket()).map_err(PumpError::Write)?;
            on_stream(link.socket(), &mine, true);
            link
        }
        None => {
            let sock = channel.links.open().map_err(PumpError::Write)?;
            mine.attach(&sock).map_err(PumpError::Write)?;
            on_stream(&sock, &mine, false);
            channel.link(sock).map_err(fail)?
        }
    };
    loop {
        mine.check()?;
        let next = first.take().or_else(|| lock(plan).next_block());
        let Some((offset, count)) = next else { break };
        link.write_all(&Header::data(offset - shift, count).encode())
            .map_err(fail)?;
        link.send_range(&mine, file, offset, count)?;
    }
    let tail: Vec<u8> = lock(plan)
        .finish_stream(close)
        .iter()
        .flat_map(|h| h.encode())
        .collect();
    link.write_all(&tail)
        .and_then(|_| link.flush())
        .map_err(fail)?;
    if !close {
        channel.keep(link);
        return Ok(());
    }
    // Wait (a bounded while: a receiver may keep the connection) for the receiver to close
    // first, so the last bytes are not lost to a reset.
    let _ = link.close_write();
    link.await_close(CLOSE_WAIT);
    Ok(())
}
