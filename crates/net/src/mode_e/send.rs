//! The sending side: blocks handed to whichever stream asks, more streams opened while the
//! stream policy says so, each stream ended with its EOD.

use super::{join_streams, lock, Channel, OnStream};
use crate::tcpinfo::tcp_stats;
use crate::{Pump, PumpError};
use fatpipe_proto::mode_e::{Header, SendPlan};
use fatpipe_tune::streams::{Observation, StreamPolicy};
use std::fs::File;
use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::os::fd::AsFd;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

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
    // Each stream says when it ends, so that the last one's end is seen at once (waiting for
    // the next policy look cost 100 ms per file).
    let (ended, ends) = std::sync::mpsc::channel::<()>();
    let result = std::thread::scope(|scope| {
        let stream = |kept: Option<TcpStream>| {
            let ctx = &ctx;
            let ended = ended.clone();
            scope.spawn(move || {
                let r = send_stream(ctx, kept);
                if r.is_err() {
                    pump.cancel();
                }
                let _ = ended.send(());
                r
            })
        };
        // Register every initial stream before any starts: a fast first stream could otherwise
        // hand out the last block before the others join.
        let wanted = job.start.max(1).max(reused);
        let initial = (0..wanted).filter(|_| lock(&plan).join()).count();
        let mut workers: Vec<_> = (0..initial).map(|_| stream(kept.pop())).collect();
        let mut next_look = Instant::now() + POLICY_TICK;
        // Streams that have not said they ended (a panicking one never says: then its thread's
        // end is seen at the next look).
        let mut running = workers.len();
        while running > 0 && !workers.iter().all(|w| w.is_finished()) {
            if ends
                .recv_timeout(next_look.saturating_duration_since(Instant::now()))
                .is_ok()
            {
                running -= 1;
            }
            if running == 0 || Instant::now() < next_look {
                continue;
            }
            next_look = Instant::now() + POLICY_TICK;
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
                        running += 1;
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
        join_streams(workers, || {
            PumpError::Write(io::Error::other("sender panicked"))
        })
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
