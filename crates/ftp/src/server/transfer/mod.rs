//! One data transfer of a session, running beside the control channel so that `ABOR`, `STAT` and
//! `NOOP` are answered while it runs. Ends in the reply the client is owed.

mod run;

use super::data::DataSpec;
use crate::inband::Heard;
use fatpipe_net::admission::{Admission, Proof, Token};
use fatpipe_net::conductor::Told;
use fatpipe_net::mode_e::{Channel, Links, Prepare, Requests};
use fatpipe_net::partial;
use fatpipe_net::sandbox::Upload;
use fatpipe_net::socket::hedge_after;
use fatpipe_net::stall::StallWatch;
use fatpipe_net::tls::Secure;
use fatpipe_net::udp::UdpConfig;
use fatpipe_net::{Conductor, Pump, TunerConfig};
use fatpipe_proto::gridftp::{perf_marker, range_marker, Parallelism};
use fatpipe_proto::mode_e::Reassembly;
use fatpipe_proto::ranges::RangeSet;
use fatpipe_proto::udp::UdpReady;
use fatpipe_proto::Reply;
use fatpipe_tune::streams::{StreamLimits, StreamPolicy};
use fatpipe_tune::Role;
use run::{run, How};
use std::fs::File;
use std::net::{IpAddr, TcpStream};
use std::os::fd::{AsFd, OwnedFd};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

/// What a transfer moves.
#[derive(Debug)]
pub enum Job {
    /// A file to the client; `ascii` converts LF to CRLF.
    SendFile { file: File, ascii: bool },
    /// Bytes prepared in advance (a listing) to the client.
    SendBytes(Vec<u8>),
    /// The client's data into an upload's file; `ascii` converts CRLF to LF.
    Receive { into: Upload, ascii: bool },
    /// MODE E: `ranges` of a file as blocks over the connections this end opens (GridFTP's
    /// sender connects), `parallelism` of them, growing between its start and max.
    /// `shift` is subtracted from the offsets in the headers (`ERET P`).
    SendBlocks {
        file: File,
        ranges: Vec<(u64, u64)>,
        shift: u64,
        parallelism: Parallelism,
    },
    /// MODE S over the UDP channel: `length` bytes of `file` from `offset`, the data
    /// connection carrying the receiver's reports; with `ready` (the socket the receiver named
    /// at the client's address, `SITE UDPREADY`), the packet train leaves before the data
    /// connection is up.
    SendUdp {
        file: File,
        offset: u64,
        length: u64,
        config: UdpConfig,
        ready: Option<(UdpReady, IpAddr)>,
    },
    /// MODE S over the UDP channel: the client's packets into an upload's file from where it
    /// starts, at most `limit` bytes.
    ReceiveUdp {
        into: Upload,
        limit: BlockLimit,
        config: UdpConfig,
    },
    /// MODE E: blocks from every connection the client opens, written into an upload's file at
    /// `base` plus their offsets (`ESTO A`; 0 for `STOR`), none past `limit`. With `record`
    /// (what the file held before), the file's partial record is kept up to date until it is
    /// complete.
    ReceiveBlocks {
        into: Upload,
        base: u64,
        limit: BlockLimit,
        record: Option<RangeSet>,
    },
}

/// How far a MODE E upload's blocks may reach, and whether the file system's free space is what
/// sets it (a block past it is then "no space left", `452`; past `ALLO` or `--max-file-size`,
/// "exceeded storage allocation", `552`).
#[derive(Debug, Clone, Copy)]
pub struct BlockLimit {
    /// One past the last byte a block may write (offsets as the blocks count them).
    pub end: u64,
    /// The free space set it.
    pub disk: bool,
}

impl Job {
    /// Whether the client sends the data.
    pub fn receiving(&self) -> bool {
        matches!(
            self,
            Job::Receive { .. } | Job::ReceiveBlocks { .. } | Job::ReceiveUdp { .. }
        )
    }

    /// Whether the data moves in MODE E blocks.
    pub fn blocks(&self) -> bool {
        matches!(self, Job::SendBlocks { .. } | Job::ReceiveBlocks { .. })
    }

    /// The conductor of this job's transfer: a MODE E send whose parallelism may grow runs
    /// the stream policy, asking the mover for streams through the handle `requests` is for.
    fn conductor(&self, tune: Option<TunerConfig>) -> (Conductor, Option<Requests>) {
        match self {
            Job::SendBlocks { parallelism, .. } => {
                let policy = (parallelism.max > parallelism.min).then(|| {
                    StreamPolicy::new(StreamLimits {
                        max: parallelism.max,
                        max_memory: None,
                    })
                });
                Conductor::sending(tune, policy, parallelism.start)
            }
            _ => {
                let role = if self.receiving() {
                    Role::Receiver
                } else {
                    Role::Sender
                };
                (Conductor::new(tune, role), None)
            }
        }
    }
}

/// The connections a transfer runs over: MODE S's one (and what it must show or check once
/// it is up), or MODE E's channel.
enum Data {
    Stream(TcpStream, Option<Proof>),
    Blocks(Box<Channel>),
}

/// Where the connection is made, how long to wait for it, and how an active socket is prepared.
pub struct Endpoints {
    pub spec: DataSpec,
    /// Whose data connections are taken: the client's, and other hosts' for a third-party copy.
    pub admission: Admission,
    /// The session's data token (`DTOK`): each new data connection shows or checks it.
    pub token: Option<Token>,
    /// The control connection's least round trip, where it stands for the data path's: a
    /// connect that has no answer for a few of them gets a second attempt (only with a token,
    /// which a spare never shows).
    pub control_rtt: Option<Duration>,
    /// The address connections this end makes leave from (the control connection's).
    pub local_ip: IpAddr,
    pub timeout: Duration,
    pub prepare: Prepare,
    /// MODE E: the channel the previous transfer left open (used instead of `spec`).
    pub kept: Option<Channel>,
    /// MODE E: a sending end leaves its connections open for the next transfer (the client
    /// asked for data-channel reuse).
    pub keep_open: bool,
    /// MODE E: most connections a receiving end accepts for one transfer.
    pub max_streams: u32,
    /// `PROT P`: how the MODE S connection is secured.
    pub secure: Option<Secure>,
}

/// The partial record of a MODE E upload's file: what it held before the transfer, plus what
/// has arrived (see `fatpipe_net::partial`).
struct Record {
    file: File,
    base: u64,
    before: RangeSet,
}

impl Record {
    /// Writes down what the file holds now.
    fn save(&self, received: &RangeSet) {
        let mut all = self.before.clone();
        all.insert_all(received, self.base);
        if let Err(e) = partial::mark(&self.file, &all) {
            tracing::warn!("cannot record what an upload holds: {e}");
        }
    }
}

/// What a transfer that worked moved, and what its final reply should add.
struct Outcome {
    bytes: u64,
    notes: Vec<String>,
}

/// How often a MODE E transfer reports progress (`112-Perf Marker`, `111 Range Marker`).
const MARKER_EVERY: Duration = Duration::from_secs(5);
/// Most ranges one `111 Range Marker` lists (the first ones; a fragmented upload would
/// otherwise make every marker as long as its bookkeeping).
const MARKER_RANGES: usize = 256;
/// Largest MODE E block this server sends.
const BLOCK: u64 = 1 << 20;

/// What a running transfer has to say to its session.
#[derive(Debug)]
pub enum Event {
    /// What the conductor has for the client: a buffer size (drsFTP's announcement), or
    /// that this sending end paces.
    Announce(Told),
    /// The transfer ended with this reply after moving this many bytes.
    Finished(Reply, u64),
    /// Progress of a MODE E transfer, for the client.
    Markers(Vec<Reply>),
}

/// A transfer in progress.
pub struct Running {
    handle: JoinHandle<Result<Outcome, Reply>>,
    pump: Arc<Pump>,
    conductor: Conductor,
    announcements: mpsc::UnboundedReceiver<Told>,
    /// The transfer's end, once its thread returned: given out when the announcements it
    /// left are.
    ended: Option<Event>,
    /// Whether this end receives the data (the drsFTP `126` replies are only for that case).
    pub receiving: bool,
    /// What is being moved, for logs and `STAT`.
    pub label: String,
    /// The file moved (not a listing), as the client named it: for the transfer log.
    pub file: Option<String>,
    started: Instant,
    /// MODE E: when the next markers are due, and the ranges received so far.
    markers: Option<(Instant, Option<Arc<Mutex<Reassembly>>>)>,
    /// MODE E uploads: the file's partial record, brought up to date with every marker.
    record: Option<Arc<Record>>,
    /// UDP uploads: how far the file is in place without a gap.
    in_place: Option<Arc<AtomicU64>>,
    /// MODE E: the channel, once the transfer has worked and left connections open.
    kept: Arc<Mutex<Option<Channel>>>,
    /// No byte moved for `--data-timeout` (and the connect's own wait): the transfer is
    /// cancelled, whichever way it was blocked.
    stall: StallWatch,
    /// The stall watch cancelled it.
    stalled: bool,
}

/// How often a transfer's progress is looked at.
const STALL_LOOK: Duration = Duration::from_secs(1);

impl std::fmt::Debug for Running {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Running")
            .field("label", &self.label)
            .finish()
    }
}

impl Running {
    /// Starts `job` over a connection made as `ends` says, its buffers tuned as `tune` says.
    /// The control connection `control` gives the path's own RTT (see
    /// [`Conductor::watch_control`]): a sender reads queues against it, and a receiver takes it
    /// as its probe (drsFTP's server side: it cannot send probes, only answer them).
    pub fn start(
        job: Job,
        ends: Endpoints,
        label: String,
        tune: Option<TunerConfig>,
        control: Option<OwnedFd>,
    ) -> Running {
        let pump = Arc::new(Pump::default());
        let p = pump.clone();
        let receiving = job.receiving();
        let (reassembly, record) = match &job {
            Job::ReceiveBlocks {
                into,
                base,
                limit,
                record,
            } => (
                Some(Arc::new(Mutex::new(Reassembly::new(limit.end)))),
                record.as_ref().and_then(|before| {
                    Some(Arc::new(Record {
                        file: into.reader().ok()?,
                        base: *base,
                        before: before.clone(),
                    }))
                }),
            ),
            _ => (None, None),
        };
        let kept_record = record.clone();
        let in_place = matches!(job, Job::ReceiveUdp { .. }).then(Arc::default);
        let markers = job
            .blocks()
            .then(|| (Instant::now() + MARKER_EVERY, reassembly.clone()));
        let (conductor, requests) = job.conductor(tune);
        let slot = conductor.clone();
        let (tx, announcements) = mpsc::unbounded_channel();
        let kept = Arc::new(Mutex::new(None));
        let keep = kept.clone();
        // The wait for the connection has its own limit, which should speak first.
        let stall = StallWatch::new(ends.timeout + 2 * STALL_LOOK, Instant::now());
        let placed = in_place.clone();
        let handle = tokio::spawn(async move {
            let launched = run::launch(&job, ends.local_ip, control.as_ref(), &p).await;
            let close = !ends.keep_open;
            let secure = ends.secure.clone();
            let max_streams = ends.max_streams;
            let data = if job.blocks() {
                match ends.kept {
                    Some(c) => Data::Blocks(Box::new(c)),
                    None => {
                        let (secure, token) = (ends.secure.clone(), ends.token);
                        Data::Blocks(Box::new(
                            Channel::new(links(ends)?).secured(secure).proved(token),
                        ))
                    }
                }
            } else {
                let prepare = ends.prepare.clone();
                let connected = matches!(ends.spec, DataSpec::Active(_));
                // A plain connection accepted shows its token as it is taken (a TLS one
                // inside its TLS, in the mover).
                let at_accept = ends.token.filter(|_| !connected && ends.secure.is_none());
                let sock = ends
                    .spec
                    .connect(
                        &ends.admission,
                        ends.local_ip,
                        ends.timeout,
                        at_accept,
                        move |s| prepare(s.as_fd()),
                    )
                    .await
                    .map_err(|e| Reply::new(425, format!("Cannot open data connection: {e}")))?;
                let proof = Proof::of(ends.token, connected).filter(|_| at_accept.is_none());
                Data::Stream(sock, proof)
            };
            let r = tokio::task::spawn_blocking(move || {
                let how = How {
                    close,
                    secure,
                    max_streams,
                    requests,
                    reassembly,
                    record,
                    in_place: placed,
                    launched,
                };
                if let Some(fd) = control {
                    slot.watch_control(fd);
                }
                let moved = slot.run(
                    || run(&p, job, data, &slot, how),
                    |n| {
                        let _ = tx.send(n);
                    },
                );
                let (r, channel) = moved.unwrap_or_else(|| {
                    (
                        Err(Reply::new(451, "Transfer failed: the mover panicked")),
                        None,
                    )
                });
                if let (Ok(_), Some(channel)) = (&r, channel) {
                    if channel.idle() > 0 {
                        *lock_any(&keep) = Some(channel);
                    }
                }
                r
            })
            .await;
            r.map_err(|e| Reply::new(451, format!("Transfer failed: {e}")))?
        });
        Running {
            handle,
            pump,
            conductor,
            announcements,
            ended: None,
            receiving,
            label,
            file: None,
            started: Instant::now(),
            markers,
            in_place,
            record: kept_record,
            kept,
            stall,
            stalled: false,
        }
    }

    /// Seconds since the transfer began.
    pub fn seconds(&self) -> f64 {
        self.started.elapsed().as_secs_f64()
    }

    /// The MODE E channel a finished transfer left open, for the next transfer of the session.
    pub fn take_kept(&self) -> Option<Channel> {
        lock_any(&self.kept).take()
    }

    /// How far the transfer has got: bytes sent, or a MODE E or UDP receive's first byte not
    /// yet in place (its blocks and packets land out of order); `None` for a receive in
    /// another mode.
    pub fn progress(&self) -> Option<Box<dyn Fn() -> u64 + Send>> {
        let (pump, markers) = (self.pump.clone(), self.markers.as_ref());
        if !self.receiving {
            return Some(Box::new(move || pump.bytes()));
        }
        if let Some(placed) = self.in_place.clone() {
            return Some(Box::new(move || placed.load(Ordering::Acquire)));
        }
        let r = markers.and_then(|(_, r)| r.clone())?;
        Some(Box::new(move || lock_any(&r).received().prefix()))
    }

    /// Waits for the transfer's next event: a buffer size to announce, markers, or its end.
    /// Everything the transfer told comes before its end (with both ready, `select!` took
    /// either, and the client could miss the last `126`). Meanwhile a transfer that moves
    /// nothing for too long is cancelled.
    pub async fn next_event(&mut self) -> Event {
        loop {
            if let Some(end) = self.ended.take() {
                if let Ok(n) = self.announcements.try_recv() {
                    self.ended = Some(end);
                    return Event::Announce(n);
                }
                return end;
            }
            let marker_due = self.markers.as_ref().map(|(at, _)| *at);
            tokio::select! {
                biased;
                Some(n) = self.announcements.recv() => return Event::Announce(n),
                _ = sleep_until_some(marker_due) => return Event::Markers(self.markers()),
                r = &mut self.handle => {
                    let reply = self.stall_reply(outcome(r));
                    self.ended = Some(Event::Finished(reply, self.pump.bytes()));
                }
                _ = tokio::time::sleep(STALL_LOOK) => self.watch(),
            }
        }
    }

    /// Cancels a transfer that moved no byte for the stall limit.
    fn watch(&mut self) {
        if !self.stalled && self.stall.stalled(Instant::now(), self.pump.bytes()) {
            tracing::info!(
                "{}: no data for {:?}, cancelled",
                self.label,
                self.stall.limit()
            );
            self.stalled = true;
            self.pump.cancel();
        }
    }

    /// The reply of a transfer the stall watch cancelled says so.
    fn stall_reply(&self, reply: Reply) -> Reply {
        if self.stalled && reply.code != 226 {
            return Reply::new(
                426,
                format!(
                    "Data connection stalled: no data moved for {} s (--data-timeout); transfer aborted",
                    self.stall.limit().as_secs()
                ),
            );
        }
        reply
    }

    /// A perf marker, and a range marker when receiving; schedules the next ones.
    fn markers(&mut self) -> Vec<Reply> {
        let Some((at, ranges)) = self.markers.as_mut() else {
            return Vec::new();
        };
        *at = Instant::now() + MARKER_EVERY;
        let unix = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0.0, |d| d.as_secs_f64());
        let mut out = Vec::new();
        if let Some(r) = ranges {
            let held = lock_any(r).received().clone();
            if let Some(rec) = &self.record {
                rec.save(&held);
            }
            if !held.is_empty() {
                // A subset of the ranges is still a true marker, in bounded space.
                out.push(range_marker(&held.first(MARKER_RANGES)));
            }
        }
        out.push(perf_marker(unix, self.pump.bytes()));
        out
    }

    /// What the client said of its side during the transfer (its buffer, that its senders
    /// pace), for the transfer's laws; a buffer returns this end's (its connections' largest).
    pub fn heard(&self, h: &Heard) -> Option<u64> {
        h.deliver(&self.conductor)
    }

    /// Peak buffer memory (summed over connections) and caps met, for the log.
    pub fn tune_summary(&self) -> Option<fatpipe_net::TuneSummary> {
        self.conductor.summary()
    }

    /// Waits for the transfer to end on its own; returns the final reply and the bytes moved.
    pub async fn finish(&mut self) -> (Reply, u64) {
        let done = outcome((&mut self.handle).await);
        let reply = self.stall_reply(done);
        (reply, self.pump.bytes())
    }

    /// Cancels the transfer and waits until it has stopped; returns the transfer's final reply.
    pub async fn abort(mut self) -> Reply {
        self.pump.cancel();
        let (reply, _) = self.finish().await;
        if reply.code == 226 {
            reply
        } else {
            Reply::new(426, "Transfer aborted")
        }
    }

    /// Progress for `STAT` during a transfer.
    pub fn status(&self) -> String {
        let secs = self.started.elapsed().as_secs_f64();
        let bytes = self.pump.bytes();
        format!(
            "{}: {bytes} bytes in {secs:.1} s ({:.1} Mbit/s)",
            self.label,
            bytes as f64 * 8.0 / secs.max(1e-6) / 1e6
        )
    }
}

/// The reply a finished transfer task earns.
fn outcome(r: Result<Result<Outcome, Reply>, tokio::task::JoinError>) -> Reply {
    match r {
        Ok(Ok(o)) if o.notes.is_empty() => {
            Reply::new(226, format!("Transfer complete, {} bytes", o.bytes))
        }
        Ok(Ok(o)) => Reply::multi(
            226,
            format!("Transfer complete, {} bytes", o.bytes),
            o.notes.iter().map(|n| format!(" {n}")).collect(),
            "End",
        ),
        Ok(Err(r)) => r,
        Err(e) => Reply::new(451, format!("Transfer failed: {e}")),
    }
}

fn lock_any<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Sleeps until `at`, or forever without one.
async fn sleep_until_some(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at.into()).await,
        None => std::future::pending().await,
    }
}

/// The MODE E connections of a transfer, from the session's PORT/EPRT or PASV/EPSV.
fn links(ends: Endpoints) -> Result<Links, Reply> {
    match ends.spec {
        DataSpec::None => Err(Reply::new(425, "Use PORT, EPRT, PASV or EPSV first")),
        DataSpec::Active(target) => Ok(Links::Connect {
            target,
            from: Some(ends.local_ip),
            prepare: ends.prepare,
            timeout: ends.timeout,
            hedge: ends.token.and(ends.control_rtt).map(hedge_after),
        }),
        DataSpec::Passive(l) => Ok(Links::Accept {
            listener: l
                .into_std()
                .map_err(|e| Reply::new(425, format!("Cannot use data listener: {e}")))?,
            admission: ends.admission,
            timeout: ends.timeout,
        }),
    }
}
