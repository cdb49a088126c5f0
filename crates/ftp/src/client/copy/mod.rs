//! Whole copies as `fatpipe cp` performs them: one file or a tree, either direction, with
//! resume, per-file results and a check that every byte arrived.

mod options;
mod result;

pub use options::{CopyOptions, Verify};
pub use result::{FileResult, DRY_RUN};

use super::connection::{checksum_command, AtMost, StreamsReport};
use super::failure::{misuse, Failure, NOT_BEGUN};
use super::mirror;
use super::part::{Part, Source};
use super::plan::{self, Job};
use super::pool;
use super::room;
use super::sync;
use super::verify::{
    already_there, ask_checksum, check_upload, follow, prepare_upload_check, regular_file_alg,
    remote_is_prefix, verify_alg, verify_copy,
};
use super::{Connection, Credentials, Location, RemoteUrl};
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
    tls: bool,
}

impl Report {
    /// What `c` says of its latest transfer.
    pub(super) fn of(c: &Connection) -> Report {
        Report {
            tune: c.last_tune().cloned(),
            streams: c.last_streams().cloned(),
            udp: c.last_udp().map(str::to_string),
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

/// Receives progress of a copy, for progress bars and logs; called from every session of a
/// copy that runs several at once.
pub trait Observer: Sync {
    /// The copy found what it will move: this many files, of these bytes (known sizes).
    fn planned(&self, _files: usize, _bytes: u64) {}
    /// A file's bytes are in; its checksum is being compared (it may take a while).
    fn verifying(&self, _name: &str) {}
    /// A file starts: its size if known, bytes already there, and the pump that counts the rest.
    fn file_started(&self, name: &str, total: Option<u64>, already: u64, pump: &Arc<Pump>);
    /// A file ended, well or not.
    fn file_finished(&self, result: &FileResult);
    /// Whether the user asked the copy to stop (Ctrl-C): files not yet begun are not begun.
    fn stop_requested(&self) -> bool {
        false
    }
}

/// Copies `srcs` (all local, or all on one server) to `dst`; exactly one side must be remote.
/// Returns one result per file; an error return means nothing could be copied at all (no
/// connection, bad arguments, a source that is not there).
pub fn copy(
    srcs: &[Location],
    dst: &Location,
    creds: &Credentials,
    opts: &CopyOptions,
    obs: &dyn Observer,
) -> anyhow::Result<Vec<FileResult>> {
    let (remote, paths, download) = sides(srcs, dst)?;
    let mut conn = pool::session(remote, creds, opts, !download)?;
    let planned = match plan_files(&mut conn, (remote, &paths, download), dst, opts) {
        Ok(planned) => planned,
        Err(e) => {
            conn.quit();
            return Err(e);
        }
    };
    let (jobs, mut left_out) = sync::select(&mut conn, planned.jobs, opts.existing);
    let extras = match opts.delete {
        true => mirror::extras(&mut conn, &planned.walked),
        false => Vec::new(),
    };
    if opts.dry_run {
        conn.quit();
        let mut all: Vec<FileResult> = jobs.iter().map(|j| sync::left_out(j, DRY_RUN)).collect();
        all.append(&mut left_out);
        all.extend(extras.iter().map(mirror::deleted));
        return Ok(all);
    }
    left_out.extend(mirror::remove(&mut conn, &extras, download));
    if let (true, Location::Local(d)) = (download, dst) {
        if let Err(e) = room::ensure_for_tree(d, &jobs, opts.resume) {
            conn.quit();
            return Err(e);
        }
    }
    obs.planned(jobs.len(), jobs.iter().filter_map(Job::size).sum());
    let stdout = dst == &Location::Stdout;
    let sessions = pool::concurrency(opts, &jobs, stdout, conn.round_trip());
    // One session of large files may start with several streams; many share the path.
    if let Some(size) = jobs.first().and_then(Job::size).filter(|_| sessions == 1) {
        conn.start_cold(size);
    }
    let mut results = pool::run(conn, sessions, remote, creds, opts, obs, jobs);
    results.append(&mut left_out);
    Ok(results)
}

/// The files of a copy of `paths` (on `remote` or here, as `sides` found them) to `dst`, as
/// `opts` asks (a dry run makes no directory).
pub(super) fn plan_files(
    c: &mut Connection,
    (remote, paths, download): (&RemoteUrl, &[String], bool),
    dst: &Location,
    opts: &CopyOptions,
) -> anyhow::Result<plan::Planned> {
    let req = plan::Request {
        sources: paths,
        from: opts.from.as_deref(),
        recursive: opts.recursive,
        create_dirs: opts.create_dirs,
        filter: &opts.filter,
        dry_run: opts.dry_run,
    };
    match (download, dst) {
        (true, Location::Local(p)) => plan::download(c, &req, Some(p)),
        (true, _) => plan::download(c, &req, None),
        (false, _) => plan::upload(c, &req, &remote.path),
    }
}

/// The server of a copy, the source paths on the side they are on, and whether it is a
/// download; the sources must all be local, or all on the destination's other side's server.
pub(super) fn sides<'a>(
    srcs: &'a [Location],
    dst: &'a Location,
) -> anyhow::Result<(&'a RemoteUrl, Vec<String>, bool)> {
    let Some(first) = srcs.first() else {
        return Err(misuse("nothing to copy: name a source"));
    };
    let mut paths = Vec::new();
    for s in srcs {
        match (s, first) {
            (Location::Remote(r), Location::Remote(f)) => {
                if (&r.host, r.port, &r.user) != (&f.host, f.port, &f.user) {
                    return Err(misuse(
                        "the sources of one copy must all be on one server (as one user)",
                    ));
                }
                paths.push(r.path.clone());
            }
            (Location::Local(p), Location::Local(_)) => {
                paths.push(p.to_string_lossy().into_owned())
            }
            (Location::Stdout, _) => {
                return Err(misuse("'-' (standard output) can only be a destination"))
            }
            _ => {
                return Err(misuse(
                    "the sources of one copy must all be local or all remote",
                ))
            }
        }
    }
    match (first, dst) {
        (Location::Remote(r), Location::Local(_) | Location::Stdout) => Ok((r, paths, true)),
        (Location::Local(_), Location::Remote(r)) => Ok((r, paths, false)),
        _ => Err(misuse("one side of a copy must be an ftp:// URL and the other a local path, or both URLs of one file each")),
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

    /// A remote file to standard output.
    fn download_stdout(&mut self, rpath: &str, size: Option<u64>) {
        let obs = self.obs;
        self.record(rpath.into(), "-".into(), |c, pump| {
            obs.file_started(rpath, size, 0, pump);
            c.verifies(false);
            let mut out = AtMost::new(std::io::stdout(), size);
            let n = c.retrieve(rpath, 0, &mut out, pump)?;
            check_complete(rpath, 0, n, size).map(|_| Done::new(n, 0))
        });
    }

    /// A remote file to a local one (or a device), resumed or verified as the options say;
    /// the copy keeps the remote file's modification time.
    fn download_file(
        &mut self,
        rpath: &str,
        size: Option<u64>,
        target: &Path,
        modified: Option<i64>,
    ) {
        let (obs, resume, verify) = (self.obs, self.opts.resume, self.opts.verify);
        let udp_on_loss = self.opts.udp_on_random_loss.as_ref();
        // Queued behind this file's download (a retry on a new session resumes: alone).
        let mut next = match resume {
            true => Vec::new(),
            false => self.next_downloads(),
        };
        self.record(rpath.into(), target.display().to_string(), |c, pump| {
            // Devices (/dev/null) and other non-files are written directly.
            if special_file(target) {
                obs.file_started(rpath, size, 0, pump);
                c.verifies(false);
                let sink = OpenOptions::new()
                    .write(true)
                    .open(target)
                    .with_context(|| format!("cannot write {}", target.display()))?;
                // MODE E too: blocks land at their offsets, which a device ignores.
                let n = if c.uses_blocks() {
                    let state = Arc::new(Mutex::new(Reassembly::new(size.unwrap_or(u64::MAX))));
                    match c.retrieve_blocks(rpath, &RangeSet::default(), &sink, pump, &state) {
                        // Left on random loss: the rest from the first gap, over UDP.
                        Err(_) if goes_on_after_leaving_tcp(c, udp_on_loss, pump, obs) => {
                            let have = held_with(&RangeSet::default(), &state).prefix();
                            let most = size.map(|s| s.saturating_sub(have));
                            have + c.retrieve_file(rpath, have, &sink, most, pump)?
                        }
                        n => n?,
                    }
                } else {
                    c.retrieve_file(rpath, 0, &sink, size, pump)?
                };
                check_complete(rpath, 0, n, size)?;
                return Ok(Done::new(n, 0));
            }
            // A destination as long as the source is complete only if the checksums agree.
            let whole = std::fs::metadata(target)
                .ok()
                .filter(|m| m.is_file() && Some(m.len()) == size)
                .map(|m| m.len());
            if let (true, Some(len)) = (resume, whole) {
                obs.file_started(rpath, size, len, pump);
                obs.verifying(rpath);
                match already_there(c, verify, rpath, target)? {
                    Some(verified) => {
                        keep_time(target, modified);
                        return Ok(Done {
                            bytes: 0,
                            resumed_from: len,
                            verified,
                        });
                    }
                    None => tracing::info!(
                        "{}: not known to match {rpath}: copying it again",
                        target.display()
                    ),
                }
            }
            let resume = resume && whole.is_none();
            if let Some(s) = size {
                room::ensure(target, s.saturating_sub(room::held(target, resume)), rpath)?;
            }
            let (mut part, mut first) = Part::open(target, resume, size)?;
            let mut size = size;
            let mut source = Source { size, modified };
            if !first.is_empty() {
                // The server's file as it is now (a retry comes long after the listing): the
                // bytes held must be of this very file.
                if let Ok((size, modified)) = c.size_and_modified(rpath) {
                    source = Source { size, modified };
                }
                if part.source().is_some_and(|was| was.changed(&source)) {
                    tracing::warn!(
                        "{rpath} changed since {} was begun: copying it again in full",
                        part.path().display()
                    );
                    first = RangeSet::default();
                    part.hold(&first)?;
                }
                size = source.size.or(size);
            }
            part.remember(&source);
            obs.file_started(rpath, size, first.len(), pump);
            let (mut held, mut moved) = (first.clone(), 0);
            // The checksum goes out behind the RETR (answered with the transfer's end), or
            // where the server cannot take that, a small file's ahead of it (the server hashes
            // it before sending; a large one's would hold the transfer up for longer than a
            // round trip).
            let small = size.is_some_and(|s| s <= ASK_AHEAD_MAX);
            let alg = verify_alg(c, verify, rpath, part.path()).ok().flatten();
            c.verifies(alg == Some(ChecksumAlg::Xxh3));
            ask_checksum(c, alg, rpath, small);
            loop {
                c.retrieve_next(std::mem::take(&mut next));
                let (n, hashed) = match download_into(c, rpath, size, &mut part, &held, pump, alg) {
                    Ok(done) => done,
                    // Left on random loss: what arrived stays, the rest comes over UDP.
                    Err((_, all)) if goes_on_after_leaving_tcp(c, udp_on_loss, pump, obs) => {
                        moved += all.len().saturating_sub(held.len());
                        held = all;
                        part.hold(&held)?;
                        continue;
                    }
                    Err((e, all)) => {
                        let bytes = all.len().saturating_sub(first.len());
                        part.failed(&all);
                        return Err(anyhow::Error::new(KeptPart { bytes, error: e }));
                    }
                };
                moved += n;
                obs.verifying(rpath);
                match verify_copy(c, verify, rpath, part.path(), hashed) {
                    Ok(verified) => {
                        part.complete()?;
                        keep_time(target, modified);
                        return Ok(Done {
                            bytes: moved,
                            resumed_from: first.len(),
                            verified,
                        });
                    }
                    // What was there before may not be what the server holds now: once more,
                    // in full.
                    Err(e) if !held.is_empty() => {
                        tracing::warn!("{e:#}: copying {rpath} again in full");
                        held = RangeSet::default();
                        part.hold(&held)?;
                    }
                    Err(e) => {
                        part.failed(&RangeSet::default());
                        return Err(e);
                    }
                }
            }
        });
    }

    /// A local file to the server, resumed or verified as the options say; the copy keeps
    /// the local file's modification time where the server can set it (`MFMT`).
    fn upload_file(&mut self, local: &Path, rpath: &str, modified: i64) {
        let (obs, resume, verify) = (self.obs, self.opts.resume, self.opts.verify);
        self.record(local.display().to_string(), rpath.into(), |c, pump| {
            let mut file = File::open(local).with_context(|| format!("cannot read {}", local.display()))?;
            let len = file.metadata()?.len();
            // A fatpipe server's SIZE of a cut MODE E upload is what it holds without a gap.
            let mut have = if resume { c.size(rpath)?.unwrap_or(0) } else { 0 };
            if have > len {
                bail!("remote {rpath} has {have} bytes, more than {}'s {len}: not a partial copy of it", local.display());
            }
            if have > 0 && have < len && remote_is_prefix(c, rpath, &file, have)? == Some(false) {
                tracing::warn!("remote {rpath} is not the beginning of {}: copying it again in full", local.display());
                have = 0;
            }
            obs.file_started(rpath, Some(len), have, pump);
            if have == len && have > 0 {
                obs.verifying(rpath);
                match already_there(c, verify, rpath, local)? {
                    Some(verified) => return Ok(Done { bytes: 0, resumed_from: have, verified }),
                    None => {
                        tracing::info!("remote {rpath} is not known to match {}: copying it again", local.display());
                        have = 0;
                    }
                }
            }
            let first = have;
            let mut moved = 0;
            let alg = verify_alg(c, verify, rpath, local).ok().flatten();
            c.verifies(alg == Some(ChecksumAlg::Xxh3));
            loop {
                file.seek(SeekFrom::Start(have))?;
                let hashed = prepare_upload_check(c, &file, alg, rpath, (have, len), pump);
                moved += if c.uses_blocks() {
                    c.store_blocks(rpath, have, &file, pump)?
                } else {
                    c.store_file(rpath, have, &file, pump)?
                };
                obs.verifying(rpath);
                match check_upload(c, verify, (rpath, local), len, modified, hashed)? {
                    Ok(verified) => {
                        return Ok(Done { bytes: moved, resumed_from: first, verified });
                    }
                    // What the server held before may not be a prefix of this file: once more,
                    // in full.
                    Err(e) if have > 0 => {
                        tracing::warn!("{e:#}: copying {} again in full", local.display());
                        have = 0;
                    }
                    Err(e) => return Err(e),
                }
            }
        });
    }
}

/// Downloads what `held` lacks into `part` (MODE E: the missing ranges; MODE S: from the first
/// gap on); returns the bytes moved, or the error and what the file holds anyway (for the
/// partial record).
#[allow(clippy::too_many_arguments)]
fn download_into(
    c: &mut Connection,
    rpath: &str,
    size: Option<u64>,
    part: &mut Part,
    held: &RangeSet,
    pump: &Arc<Pump>,
    alg: Option<ChecksumAlg>,
) -> Result<(u64, Option<Follower>), (anyhow::Error, RangeSet)> {
    if c.uses_blocks() {
        let state = Arc::new(Mutex::new(Reassembly::new(size.unwrap_or(u64::MAX))));
        let in_place = {
            let (state, held) = (state.clone(), held.clone());
            move || held_with(&held, &state).prefix()
        };
        let hashed = alg.and_then(|alg| follow(&part.file, alg, in_place));
        let r = c.retrieve_blocks(rpath, held, &part.file, pump, &state);
        let all = held_with(held, &state);
        r.and_then(|n| check_complete(rpath, 0, all.prefix(), size).map(|_| (n, hashed)))
            .map_err(|e| (e, all))
    } else {
        let start = part
            .seek_to_gap(held)
            .map_err(|e| (e, RangeSet::default()))?;
        let most = size.map(|s| s.saturating_sub(start));
        c.retrieve_file(rpath, start, &part.file, most, pump)
            .and_then(|n| check_complete(rpath, start, n, size).map(|_| (n, None)))
            .map_err(|e| {
                // Written in order: the file's length is what it holds.
                let mut all = RangeSet::default();
                all.insert(0, part.file.metadata().map_or(start, |m| m.len()));
                (e, all)
            })
    }
}

/// After a download that ended to leave TCP on random loss: moves the session to the UDP
/// channel `udp` (where that fails, it stays on TCP) and lets the file's `pump` run again;
/// whether the download goes on (not when it failed otherwise, or the user asked to stop).
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

/// What a MODE E download's file holds: `held` before it and the blocks `state` has written.
fn held_with(held: &RangeSet, state: &Mutex<Reassembly>) -> RangeSet {
    let mut all = held.clone();
    if let Ok(s) = state.lock() {
        all.insert_all(s.received(), 0);
    }
    all
}

/// Whether `path` is there and not a regular file (`/dev/null`, a pipe): a download writes it
/// directly, never through a partial copy (which would replace the device when renamed).
pub fn special_file(path: &Path) -> bool {
    std::fs::metadata(path).is_ok_and(|m| !m.is_file())
}

/// Gives a downloaded file the source's modification time (a failure only warns: the bytes
/// are there); devices and unknown times are left alone.
fn keep_time(target: &Path, modified: Option<i64>) {
    let Some(at) = modified
        .and_then(|s| u64::try_from(s).ok())
        .and_then(|s| std::time::UNIX_EPOCH.checked_add(Duration::from_secs(s)))
    else {
        return;
    };
    if !std::fs::metadata(target).is_ok_and(|m| m.is_file()) {
        return;
    }
    if let Err(e) = OpenOptions::new()
        .write(true)
        .open(target)
        .and_then(|f| f.set_modified(at))
    {
        tracing::warn!(
            "cannot set the modification time of {}: {e}",
            target.display()
        );
    }
}

/// A download that ended early must never pass for a complete one.
fn check_complete(rpath: &str, offset: u64, moved: u64, size: Option<u64>) -> anyhow::Result<()> {
    match size {
        Some(total) if offset + moved != total => {
            bail!("{rpath}: received {} of {total} bytes; the copy is incomplete (run again with --resume)", offset + moved)
        }
        _ => Ok(()),
    }
}
