//! Each file of a copy over one session (`Copier`): either direction, resumed, verified,
//! moved to the UDP channel when TCP meets random loss, with a result per file; and how the
//! whole copy ended ([`Summary`]). The copy command that plans the files and runs the
//! sessions is `copy_command.rs`.

mod download;
mod summary;
mod upload;

pub use super::copy_options::{CopyOptions, ServerFeatures, Verify};
pub use super::file_result::{FileResult, Observer, DRY_RUN};
pub use download::special_file;
pub use summary::{deleted, Ending, Summary, TransportReport};

use super::connection::{checksum_command, AtMost, StreamsReport};
use super::failure::{Failure, NOT_BEGUN};
use super::part::{Part, Source};
use super::plan::Job;
use super::room;
use super::verify::{
    already_there, ask_checksum, beside, check_upload, prepare_upload_check, regular_file_alg,
    remote_is_prefix, verify_alg, verify_copy,
};
use super::{Connection, Streams};
use anyhow::{bail, Context};
use fatpipe_net::checksum::Follower;
use fatpipe_net::udp::UdpConfig;
use fatpipe_net::{Pump, TuneSummary};
use fatpipe_proto::gridftp::ChecksumAlg;
use fatpipe_proto::mode_e::Reassembly;
use fatpipe_proto::ranges::RangeSet;
use fatpipe_proto::udp::NetStack;
use fatpipe_proto::Command;
use std::fs::{File, OpenOptions};
use std::io::{Seek, SeekFrom};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

/// Files up to this size have their checksum asked for with their `RETR` (ahead).
const ASK_AHEAD_MAX: u64 = 64 << 20;
/// Behind a download up to this size the next files' `RETR`s go out with its own (pipelined:
/// the round trip between files is a large share of a small file's time). Queued downloads run
/// on the connections the one before them leaves open, without `-p auto` adding more (see
/// `connection/pipelined.rs`), which larger files need where a stream is held back by loss:
/// 256 files of 4 MiB at 100 ms took 37–45 s pipelined against 13 s.
pub(super) const PIPELINE_MAX: u64 = 1 << 20;
/// Most downloads queued behind the current one ...
pub(super) const PIPELINE_DEPTH: usize = 8;
/// ... and most of their bytes: what keeps a session's path busy while the next commands
/// travel, without taking many files from the other sessions.
pub(super) const PIPELINE_BYTES: u64 = 4 << 20;

/// Whether `job` is a download that may go out behind another (or have others behind it).
fn pipelines(job: &Job) -> bool {
    matches!(job, Job::Download { target: Some(_), size: Some(s), .. } if *s <= PIPELINE_MAX)
}

/// Whether a session that copies `current` and then `next` takes one more file now, to send
/// its download behind `current`'s (see [`PIPELINE_DEPTH`], [`PIPELINE_BYTES`]).
pub(super) fn takes_one_more(current: &Job, next: &[Job], resume: bool) -> bool {
    let bytes: u64 = next.iter().filter_map(Job::size).sum();
    !resume
        && pipelines(current)
        && next.iter().all(pipelines)
        && next.len() < PIPELINE_DEPTH
        && bytes < PIPELINE_BYTES
}

/// What one file's copy did.
pub(super) struct Done {
    pub(super) bytes: u64,
    pub(super) resumed_from: u64,
    pub(super) verified: Option<String>,
}

/// A failed download's error, with the bytes this run added to its part file.
#[derive(Debug, thiserror::Error)]
#[error("{error:#}")]
struct KeptPart {
    bytes: u64,
    error: anyhow::Error,
}

/// What the connection said of a file's transfer, taken when it ended.
pub(super) struct Report {
    tune: Option<TuneSummary>,
    streams: Option<StreamsReport>,
    udp: Option<String>,
    udp_started: Option<String>,
    tls: bool,
}

impl Report {
    /// What `c` says of its latest transfer.
    pub(super) fn of(c: &Connection) -> Report {
        Report {
            tune: c.last_tune().cloned(),
            streams: c.last_streams().cloned(),
            udp: c.last_udp().map(str::to_string),
            udp_started: c.udp_started().map(str::to_string),
            tls: c.data_secured(),
        }
    }
}

impl Done {
    fn new(bytes: u64, resumed_from: u64) -> Done {
        Done {
            bytes,
            resumed_from,
            verified: None,
        }
    }
}

/// A copy in progress over one control connection, collecting per-file results.
pub(super) struct Copier<'a> {
    pub(super) c: Connection,
    pub(super) opts: &'a CopyOptions,
    pub(super) obs: &'a dyn Observer,
    pub(super) results: Vec<FileResult>,
    /// The files this session copies after the current one, if known (pipelined downloads).
    pub(super) next: Vec<Job>,
    /// Set by the first file that found a disk full: no file of the copy begins after it.
    pub(super) halted: &'a OnceLock<Failure>,
}

impl Copier<'_> {
    /// Copies one planned file; its result joins `results`.
    pub(super) fn run(&mut self, job: Job) {
        match job {
            Job::Download {
                rpath,
                target: None,
                size,
                ..
            } => self.download_stdout(&rpath, size),
            Job::Download {
                rpath,
                target: Some(t),
                size,
                modified,
            } => self.download_file(&rpath, size, &t, modified),
            Job::Upload {
                local,
                rpath,
                modified,
                ..
            } => self.upload_file(&local, &rpath, modified),
        }
    }

    /// The next files' downloads as they can go out behind the current one: their paths and
    /// the checksum question behind each (downloads into regular files, in MODE E).
    fn next_downloads(&self) -> Vec<(String, Option<Command>)> {
        if !self.c.uses_blocks() {
            return Vec::new();
        }
        let alg = regular_file_alg(&self.c, self.opts.verify).ok().flatten();
        self.next
            .iter()
            .map_while(|job| match job {
                Job::Download {
                    rpath,
                    target: Some(t),
                    ..
                } if !special_file(t) => {
                    Some((rpath.clone(), alg.map(|a| checksum_command(a, rpath))))
                }
                _ => None,
            })
            .collect()
    }

    /// Why no more files begin, if none does: the user stopped the copy, or a disk filled.
    pub(super) fn stopped(&self) -> Option<&'static str> {
        if self.obs.stop_requested() {
            return Some("interrupted");
        }
        match self.halted.get() {
            Some(Failure::LocalDiskFull) => Some("this machine's disk is full"),
            Some(Failure::ServerDiskFull) => Some("the server's disk is full"),
            _ => None,
        }
    }

    /// The pump of a file's transfer, within the copy's rate limits.
    pub(super) fn new_pump(&self) -> Arc<Pump> {
        let pump = Arc::new(Pump::default());
        pump.set_limit(self.opts.limit_rate);
        if let Some(budget) = &self.opts.total_rate {
            pump.share_limit(budget.clone());
        }
        pump
    }

    /// Runs one file's copy and records its result, keeping the error instead of returning it.
    fn record(
        &mut self,
        source: String,
        destination: String,
        run: impl FnOnce(&mut Connection, &Arc<Pump>) -> anyhow::Result<Done>,
    ) {
        let pump = self.new_pump();
        let outcome = match self.stopped() {
            Some(why) => Err(anyhow::anyhow!("{NOT_BEGUN}: {why}")),
            None => run(&mut self.c, &pump),
        };
        let report = Report::of(&self.c);
        self.record_outcome(source, destination, &pump, outcome, report);
    }

    /// Records a file's result from its outcome, its `pump` and what the connection said of
    /// its transfer.
    pub(super) fn record_outcome(
        &mut self,
        source: String,
        destination: String,
        pump: &Pump,
        outcome: anyhow::Result<Done>,
        report: Report,
    ) {
        let Report {
            tune,
            streams,
            udp,
            udp_started,
            tls,
        } = report;
        let (done, error) = match outcome {
            Ok(d) => (d, None),
            // Counted: what the destination keeps (a download's part file), not what was read.
            Err(e) => {
                let kept = e.downcast_ref::<KeptPart>().map_or(0, |k| k.bytes);
                // Stopped by the user while it ran: that, not how the stop broke it.
                let began = !e.to_string().starts_with(NOT_BEGUN);
                let e = match self.obs.stop_requested() && began {
                    true => anyhow::anyhow!("interrupted"),
                    false => e,
                };
                (Done::new(kept, 0), Some(e))
            }
        };
        let Done {
            bytes,
            resumed_from,
            verified,
        } = done;
        let mut result = FileResult {
            source,
            destination,
            bytes,
            resumed_from,
            data_seconds: pump.data_phase().map(|d| d.as_secs_f64()),
            peak_buffer: tune.as_ref().map(|t| t.peak_local),
            peer_peak_buffer: tune.as_ref().and_then(|t| t.peak_peer),
            capped: tune.map(|t| t.capped).unwrap_or_default(),
            streams: streams.as_ref().map(|s| s.streams),
            reused_streams: streams.as_ref().map_or(0, |s| s.reused),
            cc_on_random_loss: streams.as_ref().and_then(|s| s.cc.clone()),
            stream_decisions: streams.map(|s| s.decisions).unwrap_or_default(),
            udp_started,
            udp,
            tls,
            verified,
            ..FileResult::default()
        };
        if let Some(e) = error {
            result.fail(&e);
        }
        self.obs.file_finished(&result);
        self.results.push(result);
    }
}

/// After a transfer that ended because no UDP packet got through a channel the session
/// started on unasked: moves the session to TCP with `streams` and lets the file's `pump` run
/// again; whether the transfer goes on (not when it failed otherwise, or the user asked to
/// stop).
fn goes_on_after_leaving_udp(
    c: &mut Connection,
    streams: Streams,
    pump: &Pump,
    obs: &dyn Observer,
) -> bool {
    if !c.left_udp_unreached() || obs.stop_requested() {
        return false;
    }
    if let Err(e) = c.back_to_tcp(streams) {
        tracing::warn!("cannot go back to TCP streams ({e:#})");
        return false;
    }
    pump.restart();
    true
}

/// After a transfer that ended to leave TCP on random loss: moves the session to the UDP
/// channel `udp` (where that fails, it stays on TCP) and lets the file's `pump` run again;
/// whether the transfer goes on (not when it failed otherwise, or the user asked to stop).
fn goes_on_after_leaving_tcp(
    c: &mut Connection,
    udp: Option<&(NetStack, UdpConfig)>,
    pump: &Pump,
    obs: &dyn Observer,
) -> bool {
    let Some((stack, config)) = udp else {
        return false;
    };
    if !c.left_tcp_on_random_loss() || obs.stop_requested() {
        return false;
    }
    match c.move_to_udp(stack, config.clone()) {
        Ok(None) => {}
        Ok(Some(why)) => tracing::warn!("{why}: the transfer goes on over TCP"),
        Err(e) => {
            tracing::warn!("cannot move to the UDP channel ({e:#}): the transfer goes on over TCP")
        }
    }
    pump.restart();
    true
}
