//! One remote file into a local one (resumed, verified, moved to the UDP channel when TCP
//! meets random loss), or to standard output.

use super::*;

impl Copier<'_> {
    /// A remote file to standard output.
    pub(super) fn download_stdout(&mut self, rpath: &str, size: Option<u64>) {
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
    pub(super) fn download_file(
        &mut self,
        rpath: &str,
        size: Option<u64>,
        target: &Path,
        modified: Option<i64>,
    ) {
        let (obs, resume, verify) = (self.obs, self.opts.resume, self.opts.verify);
        let (udp_on_loss, streams) = (self.opts.udp_on_random_loss.as_ref(), self.opts.streams);
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
                let n = loop {
                    if !c.uses_blocks() {
                        match c.retrieve_file(rpath, 0, &sink, size, pump, None) {
                            // No UDP packet got through: the whole file over TCP streams.
                            Err(_) if goes_on_after_leaving_udp(c, streams, pump, obs) => continue,
                            n => break n?,
                        }
                    }
                    // MODE E too: blocks land at their offsets, which a device ignores.
                    let state = Arc::new(Mutex::new(Reassembly::new(size.unwrap_or(u64::MAX))));
                    let none = RangeSet::default();
                    break match c.retrieve_blocks(rpath, &none, &sink, pump, &state) {
                        // Left on random loss: the rest from the first gap, over UDP.
                        Err(_) if goes_on_after_leaving_tcp(c, udp_on_loss, pump, obs) => {
                            let have = held_with(&none, &state).prefix();
                            let most = size.map(|s| s.saturating_sub(have));
                            have + c.retrieve_file(rpath, have, &sink, most, pump, None)?
                        }
                        n => n?,
                    };
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
            loop {
                // Again behind each try: the one that went behind a try that ended is gone.
                ask_checksum(c, alg, rpath, small);
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
                    // No UDP packet got through: nothing arrived, all of it over TCP streams.
                    Err(_) if goes_on_after_leaving_udp(c, streams, pump, obs) => continue,
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
}

/// Downloads what `held` lacks into `part` (MODE E: the missing ranges; MODE S: from the first
/// gap on), hashed beside as `alg` says; returns the bytes moved and the hash, or the error and
/// what the file holds anyway (for the partial record).
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
        let (hashed, _watch) = beside(&part.file, alg, in_place);
        let r = c.retrieve_blocks(rpath, held, &part.file, pump, &state);
        let all = held_with(held, &state);
        r.and_then(|n| check_complete(rpath, 0, all.prefix(), size).map(|_| (n, hashed)))
            .map_err(|e| (e, all))
    } else {
        let start = part
            .seek_to_gap(held)
            .map_err(|e| (e, RangeSet::default()))?;
        let most = size.map(|s| s.saturating_sub(start));
        // In order over TCP; over UDP as far as the receiver has every packet.
        let placed = Arc::new(AtomicU64::new(0));
        let in_place: Box<dyn Fn() -> u64 + Send> = match c.uses_udp() {
            true => {
                let placed = placed.clone();
                Box::new(move || start + placed.load(Ordering::Acquire))
            }
            false => {
                let (pump, from) = (pump.clone(), pump.bytes());
                Box::new(move || start + pump.bytes().saturating_sub(from))
            }
        };
        let (hashed, _watch) = beside(&part.file, alg, in_place);
        c.retrieve_file(rpath, start, &part.file, most, pump, Some(placed))
            .and_then(|n| check_complete(rpath, start, n, size).map(|_| (n, hashed)))
            .map_err(|e| {
                // Written in order: the file's length is what it holds.
                let mut all = RangeSet::default();
                all.insert(0, part.file.metadata().map_or(start, |m| m.len()));
                (e, all)
            })
    }
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
