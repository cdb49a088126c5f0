//! The task of a transfer: its job run over its connections by the mover it needs, and the
//! reply each way of failing earns.

use super::{lock_any, BlockLimit, Data, Job, Outcome, Record, BLOCK};
use fatpipe_net::admission::Proof;
use fatpipe_net::mode_e::{Channel, Requests, SendJob};
use fatpipe_net::mover::{BlockReceiver, BlockSender, StreamMover, StreamWork};
use fatpipe_net::partial;
use fatpipe_net::sandbox::Upload;
use fatpipe_net::tls::Secure;
use fatpipe_net::udp::{self as udp, Launched, UdpConfig, UdpReceiver, UdpSender};
use fatpipe_net::{Conductor, Mover, Pump, PumpError};
use fatpipe_proto::gridftp::{AUTO_NOTE, CC_NOTE, STREAMS_NOTE};
use fatpipe_proto::mode_e::Reassembly;
use fatpipe_proto::Reply;
use std::net::{IpAddr, TcpStream};
use std::os::fd::OwnedFd;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};

/// A MODE S transfer's connection, its token, its TLS, and (UDP uploads) where the receiver
/// keeps how far the file is in place.
type StreamEnds = (
    TcpStream,
    Option<Proof>,
    Option<Secure>,
    Option<Arc<AtomicU64>>,
);

/// How a transfer's mover runs besides its job and connections.
pub(super) struct How {
    /// MODE E send: connections close after the transfer.
    pub(super) close: bool,
    /// MODE S under `PROT P`: how the connection is secured.
    pub(super) secure: Option<Secure>,
    /// MODE E receive: most connections accepted.
    pub(super) max_streams: u32,
    /// MODE E send whose stream count grows: where the conductor's requests arrive.
    pub(super) requests: Option<Requests>,
    /// MODE E receive: what has arrived (shared with the markers).
    pub(super) reassembly: Option<Arc<Mutex<Reassembly>>>,
    /// MODE E upload: the file's partial record.
    pub(super) record: Option<Arc<Record>>,
    /// UDP upload: how far the file is in place without a gap.
    pub(super) in_place: Option<Arc<AtomicU64>>,
    /// UDP download: the packet train already sent to the socket the client named.
    pub(super) launched: Option<Launched>,
}

/// A UDP download whose receiver named its socket before the `RETR` ([`Job::SendUdp`]'s
/// `ready`): its packet train sent now (from `local`, timed by the round trip of `control`,
/// the control connection), before the data connection is up. `None` for any other job, or
/// where the train cannot leave early: that transfer goes the usual way.
pub(super) async fn launch(
    job: &Job,
    local: IpAddr,
    control: Option<&OwnedFd>,
    pump: &Arc<Pump>,
) -> Option<Launched> {
    let Job::SendUdp {
        file,
        offset,
        length,
        config,
        ready: Some((ready, peer)),
    } = job
    else {
        return None;
    };
    let rtt = control.and_then(udp::round_trip);
    let file = file.try_clone().ok()?;
    let (source, config, pump) = ((*offset, *length), config.clone(), pump.clone());
    let (ready, at) = (*ready, (*peer, local));
    let sent = tokio::task::spawn_blocking(move || {
        let source = (&file, source.0, source.1);
        udp::launch(ready, at, rtt, source, &config, &pump)
    })
    .await
    .ok()?;
    match sent {
        Ok(l) => {
            tracing::debug!("udp: the packet train left as the RETR was read");
            Some(l)
        }
        Err(e) => {
            tracing::debug!("the packet train waits for the data connection: {e}");
            None
        }
    }
}

/// Runs `job` over `data` with its mover, the conductor starting each connection's laws;
/// returns the outcome and a MODE E channel (whose connections may be kept).
pub(super) fn run(
    pump: &Arc<Pump>,
    job: Job,
    data: Data,
    conductor: &Conductor,
    how: How,
) -> (Result<Outcome, Reply>, Option<Channel>) {
    let channel = match data {
        Data::Stream(link, proof) => {
            let ends = (link, proof, how.secure, how.in_place);
            return (stream(pump, job, ends, how.launched, conductor), None);
        }
        Data::Blocks(channel) => *channel,
    };
    let r = match job {
        Job::SendBlocks {
            file,
            ranges,
            shift,
            parallelism,
        } => {
            let job = SendJob {
                file,
                ranges,
                shift,
                block: BLOCK,
                start: parallelism.start,
                close: how.close,
                requests: how.requests,
            };
            let mover = Box::new(BlockSender {
                job,
                channel: &channel,
            });
            mover
                .run(pump, conductor)
                .map_err(|e| failure_reply(e, true))
                .map(|r| {
                    // The client learns how the stream count was chosen from the final reply.
                    let mut notes = vec![format!("{STREAMS_NOTE}{}", r.streams)];
                    let decisions = conductor.decisions();
                    notes.extend(decisions.iter().map(|d| format!("{AUTO_NOTE}{d}")));
                    notes.extend(conductor.chosen_cc().map(|c| format!("{CC_NOTE}{c}")));
                    Outcome {
                        bytes: r.bytes,
                        notes,
                    }
                })
        }
        Job::ReceiveBlocks {
            mut into,
            base,
            limit,
            record,
        } => {
            let state = how
                .reassembly
                .unwrap_or_else(|| Arc::new(Mutex::new(Reassembly::new(limit.end))));
            // Nothing in the file changes before a data connection exists.
            let mut begun = false;
            let r = channel.prime(pump).and_then(|()| {
                into.begin().map_err(PumpError::Write)?;
                begun = true;
                if let Some(before) = &record {
                    if let Err(e) = partial::mark(into.file(), before) {
                        tracing::warn!("cannot record what an upload holds ({e}): a cut upload resumes from its first gap only while the server runs");
                    }
                }
                let mover = Box::new(BlockReceiver {
                    file: into.file(),
                    base,
                    state: &state,
                    channel: &channel,
                    max_streams: how.max_streams,
                });
                mover.run(pump, conductor)
            });
            match (&r, how.record) {
                (Ok(_), Some(_)) => {
                    if let Err(e) = partial::clear(into.file()) {
                        tracing::warn!("cannot mark an upload complete: {e}");
                    }
                }
                (Err(_), Some(rec)) if begun => rec.save(lock_any(&state).received()),
                _ => {}
            }
            match r {
                Ok(r) => commit(into).map(|()| Outcome {
                    bytes: r.bytes,
                    notes: Vec::new(),
                }),
                Err(e) => {
                    let reply = match e {
                        PumpError::Write(io) if io.kind() == std::io::ErrorKind::FileTooLarge => {
                            beyond_limit(&io, limit)
                        }
                        e => failure_reply(e, false),
                    };
                    give_up(into, &reply);
                    Err(reply)
                }
            }
        }
        _ => Err(Reply::new(451, "MODE S transfer on a MODE E channel")),
    };
    (r, Some(channel))
}

/// Runs a MODE S job over its one connection (and the UDP channel beside it, if chosen).
fn stream(
    pump: &Arc<Pump>,
    mut job: Job,
    (link, proof, secure, in_place): StreamEnds,
    launched: Option<Launched>,
    conductor: &Conductor,
) -> Result<Outcome, Reply> {
    let limit = match &job {
        Job::ReceiveUdp { limit, .. } => Some(*limit),
        _ => None,
    };
    let mut writing = None;
    let (mover, sending): (Box<dyn Mover + '_>, bool) = match &mut job {
        Job::SendFile { file, ascii } => {
            let work = StreamWork::SendFile {
                file,
                ascii: *ascii,
            };
            (StreamMover::new(link, work, secure, proof), true)
        }
        Job::SendBytes(bytes) => {
            let work = StreamWork::SendBytes(std::mem::take(bytes));
            (StreamMover::new(link, work, secure, proof), true)
        }
        Job::Receive { into, ascii } => {
            let work = StreamWork::Receive {
                into: writing.insert(FirstByte { into, begun: false }),
                ascii: *ascii,
            };
            (StreamMover::new(link, work, secure, proof), false)
        }
        Job::SendUdp {
            file,
            offset,
            length,
            config,
            ready,
        } => {
            // The packets the receiver named, also where the train waited for the data
            // connection after all.
            let packet = ready.map(|(r, _)| r.packet).or(config.packet);
            let m = UdpSender {
                link,
                file,
                offset: *offset,
                length: *length,
                config: UdpConfig {
                    packet,
                    ..config.clone()
                },
                proof,
                launched,
            };
            (Box::new(m), true)
        }
        Job::ReceiveUdp {
            into,
            limit,
            config,
        } => {
            // The data connection exists: the file may change now.
            begin_in_order(into).map_err(|e| failure_reply(PumpError::Write(e), false))?;
            let m = UdpReceiver {
                link,
                file: into.file(),
                offset: into.start(),
                limit: limit.end,
                config: config.clone(),
                proof,
                in_place,
                ahead: None,
            };
            (Box::new(m), false)
        }
        Job::SendBlocks { .. } | Job::ReceiveBlocks { .. } => {
            return Err(Reply::new(451, "MODE E transfer on a MODE S connection"))
        }
    };
    let moved = mover.run(pump, conductor);
    let moved = match (moved, writing) {
        // An empty upload began nowhere: it begins (and so is cut back) at its end.
        (Ok(m), Some(mut w)) => w.start().map(|()| m).map_err(PumpError::Write),
        (r, _) => r,
    };
    let outcome = match moved
        .map(|m| Outcome {
            bytes: m.bytes,
            // The client learns what the UDP channel did from the final reply.
            notes: m
                .udp
                .filter(|_| sending)
                .map(|u| u.to_string())
                .into_iter()
                .collect(),
        })
        .map_err(|e| match (e, limit) {
            (PumpError::Write(io), Some(limit))
                if io.kind() == std::io::ErrorKind::FileTooLarge =>
            {
                beyond_limit(&io, limit)
            }
            (e, _) => failure_reply(e, sending),
        }) {
        Ok(outcome) => outcome,
        Err(reply) => {
            if let Job::Receive { into, .. } | Job::ReceiveUdp { into, .. } = job {
                give_up(into, &reply);
            }
            return Err(reply);
        }
    };
    match job {
        Job::Receive { into, .. } | Job::ReceiveUdp { into, .. } => commit(into)?,
        _ => {}
    }
    Ok(outcome)
}

/// A MODE S upload's file, begun ([`begin_in_order`]) at the first byte that arrives, so that
/// a data connection that fails before any data (its TLS handshake, a client that never
/// sends) changes nothing.
struct FirstByte<'a> {
    into: &'a mut Upload,
    begun: bool,
}

impl FirstByte<'_> {
    fn start(&mut self) -> std::io::Result<()> {
        if !self.begun {
            begin_in_order(self.into)?;
            self.begun = true;
        }
        Ok(())
    }
}

impl std::io::Write for FirstByte<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.start()?;
        self.into.file().write(buf)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Begins an upload written in order from a point the file held: its length is the truth
/// again, so its partial record goes.
fn begin_in_order(into: &mut Upload) -> std::io::Result<()> {
    into.begin()?;
    partial::clear(into.file())
}

/// Puts a complete upload's file in place.
fn commit(into: Upload) -> Result<(), Reply> {
    into.commit()
        .map_err(|e| Reply::new(451, format!("Cannot put the upload in place: {e}")))
}

/// What a `452` says: the client tells its user whose disk it was.
const DISK_FULL: &str =
    "Insufficient storage space: the server's disk is full (No space left on device)";

/// A failed upload's file: after a full disk (`452`) a new file is removed rather than kept
/// under its name for a resume (it holds the room the next upload needs, and cannot be
/// resumed before room is made); otherwise dropped as [`Upload`] says.
fn give_up(into: Upload, reply: &Reply) {
    if reply.code == 452 {
        into.discard();
    }
}

/// The reply for a block past what the upload may write: no space on the disk (`452`), or past
/// the announced or configured size (`552`, exceeded storage allocation).
fn beyond_limit(e: &std::io::Error, limit: BlockLimit) -> Reply {
    if limit.disk {
        tracing::info!("upload refused: {e}");
        Reply::new(452, DISK_FULL)
    } else {
        Reply::new(552, format!("Exceeded storage allocation ({e})"))
    }
}

/// Maps a pump failure to the reply RFC 959 prescribes, knowing which side was the file.
fn failure_reply(e: PumpError, sending: bool) -> Reply {
    match (e, sending) {
        (PumpError::Cancelled, _) => Reply::new(426, "Transfer aborted"),
        (PumpError::Read(e), true) => Reply::new(451, format!("Error reading file: {e}")),
        (PumpError::Write(e), true) | (PumpError::Read(e), false) => Reply::new(
            426,
            format!("Data connection broken, transfer aborted: {e}"),
        ),
        (PumpError::Write(e), false) => match e.raw_os_error() {
            Some(libc::ENOSPC) | Some(libc::EDQUOT) => {
                tracing::info!("upload refused: {e}");
                Reply::new(452, DISK_FULL)
            }
            _ => Reply::new(451, format!("Error writing file: {e}")),
        },
    }
}
