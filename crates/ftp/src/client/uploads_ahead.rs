//! A session's small uploads sent ahead (pipelined, see `connection/stored.rs`): each file's
//! `STOR` and data go out as soon as the one before it has left, and each is ended (its
//! replies read, its size and checksum compared, its modification time set) while those after
//! it travel; a file's result is recorded when it ends, in the order the files went out.

use super::copy::{Copier, Done, Report, PIPELINE_BYTES, PIPELINE_DEPTH, PIPELINE_MAX};
use super::plan::Job;
use super::verify::{check_upload, prepare_upload_check, verify_alg};
use fatpipe_net::checksum::Follower;
use fatpipe_net::Pump;
use std::collections::VecDeque;
use std::fs::File;
use std::path::PathBuf;
use std::sync::Arc;

/// An upload sent ahead: what its end needs.
pub(super) struct SentUpload {
    local: PathBuf,
    rpath: String,
    modified: i64,
    len: u64,
    pump: Arc<Pump>,
    hashed: Option<Follower>,
    report: Report,
}

/// A session's uploads sent ahead and not yet ended, in the order they went out, each with
/// its place in the plan and its job (to send again the normal way when it failed).
#[derive(Default)]
pub(super) struct UploadsAhead {
    sent: VecDeque<(usize, Job, SentUpload)>,
}

impl UploadsAhead {
    /// Whether one more upload of `len` bytes fits beside those awaited (at most
    /// [`PIPELINE_DEPTH`] files and [`PIPELINE_BYTES`]).
    pub(super) fn has_room(&self, len: u64) -> bool {
        let bytes: u64 = self.sent.iter().map(|(_, _, s)| s.len).sum();
        self.sent.len() < PIPELINE_DEPTH && bytes + len <= PIPELINE_BYTES
    }

    /// Whether no upload is awaited.
    pub(super) fn is_empty(&self) -> bool {
        self.sent.is_empty()
    }

    /// Keeps `sent`, the upload of `job` (at `place` in the plan).
    pub(super) fn push(&mut self, place: usize, job: Job, sent: SentUpload) {
        self.sent.push_back((place, job, sent));
    }

    /// The upload sent first among those awaited.
    pub(super) fn oldest(&mut self) -> Option<(usize, Job, SentUpload)> {
        self.sent.pop_front()
    }
}

/// Whether `job` may be sent ahead: a regular file's upload up to [`PIPELINE_MAX`], copied
/// whole (a resumed copy asks what the server holds first).
pub(super) fn sends_ahead(job: &Job, resume: bool) -> bool {
    matches!(job, Job::Upload { size, .. } if *size <= PIPELINE_MAX) && !resume
}

impl Copier<'_> {
    /// Sends `job`'s upload before the replies to the uploads before it are in, when the
    /// session can (see `Connection::stores_ahead`); `None` when it did not go out (it is then
    /// copied the normal way).
    pub(super) fn send_upload(&mut self, job: &Job) -> Option<SentUpload> {
        let Job::Upload {
            local,
            rpath,
            modified,
            ..
        } = job
        else {
            return None;
        };
        if !self.c.stores_ahead() || self.stopped().is_some() {
            return None;
        }
        // The size planned may be stale: what is sent is what the file holds now.
        let file = File::open(local).ok()?;
        let len = file.metadata().ok()?.len();
        if len > PIPELINE_MAX {
            return None;
        }
        let pump = self.new_pump();
        self.obs.file_started(rpath, Some(len), 0, &pump);
        let alg = verify_alg(&self.c, self.opts.verify, rpath, local)
            .ok()
            .flatten();
        // At most PIPELINE_MAX bytes: no file the page cache needs watching for.
        let (hashed, _) = prepare_upload_check(&mut self.c, &file, alg, rpath, (0, len), &pump);
        if let Err(e) = self.c.store_ahead(rpath, &file, &pump) {
            tracing::debug!("{e:#}: sent the normal way");
            return None;
        }
        Some(SentUpload {
            local: local.clone(),
            rpath: rpath.clone(),
            modified: *modified,
            len,
            pump,
            hashed,
            report: Report::of(&self.c),
        })
    }

    /// Ends an upload sent ahead: its replies read, the server's size and checksum compared
    /// with this end's, its modification time set, its result recorded. `false` when the
    /// upload itself failed (nothing is recorded: the file goes again the normal way, as do
    /// those sent behind it, which the server refuses once one failed).
    pub(super) fn end_upload(&mut self, s: SentUpload) -> bool {
        let SentUpload {
            local,
            rpath,
            modified,
            len,
            pump,
            hashed,
            report,
        } = s;
        let moved = match self.c.stored(&rpath) {
            Ok(n) => n,
            Err(e) => {
                tracing::debug!("{e:#}: {} goes again", local.display());
                return false;
            }
        };
        self.obs.verifying(&rpath);
        let checked = check_upload(
            &mut self.c,
            self.opts.verify,
            (&rpath, &local),
            len,
            modified,
            hashed,
        );
        let outcome = checked.and_then(|verified| verified).map(|verified| Done {
            bytes: moved,
            resumed_from: 0,
            verified,
        });
        let source = local.display().to_string();
        self.record_outcome(source, rpath, &pump, outcome, report);
        true
    }
}
