//! What happened to each file of a copy, as the summary, `--json` and the exit code read it.

use crate::client::failure::{Failure, NOT_BEGUN};
use fatpipe_net::Pump;
use fatpipe_tune::CongestionControl;
use serde::Serialize;
use std::sync::Arc;

/// What happened to one file.
#[derive(Debug, Clone, Default, Serialize)]
pub struct FileResult {
    /// Where the file came from (path or remote path).
    pub source: String,
    /// Where it went.
    pub destination: String,
    /// Bytes moved in this run (not counting a resumed prefix).
    pub bytes: u64,
    /// Bytes that were already at the destination when resuming.
    pub resumed_from: u64,
    /// Duration of the data phase (first to last byte), without login and commands.
    pub data_seconds: Option<f64>,
    /// Why the file failed, if it did.
    pub error: Option<String>,
    /// The kind of that failure (each kind has its exit code).
    pub failure: Option<Failure>,
    /// Why the file was left out on purpose (`--no-clobber`, `--update`, `--dry-run`).
    pub skipped: Option<String>,
    /// The source's size, for a file left out.
    pub size: Option<u64>,
    /// Not a copy: `destination` was removed (`--delete`; to be, in a `--dry-run`).
    pub deleted: bool,
    /// Peak of this end's socket buffer for the file, as the kernel accounts it (tuned copies).
    pub peak_buffer: Option<u64>,
    /// Peak buffer the server announced (fatpipe servers).
    pub peer_peak_buffer: Option<u64>,
    /// System limits that held a buffer below what the tuning asked.
    pub capped: Vec<String>,
    /// Data connections used (MODE E copies).
    pub streams: Option<u32>,
    /// Of those, connections the previous file left open.
    pub reused_streams: u32,
    /// Why `-p auto` opened streams or stopped (when this end sent).
    pub stream_decisions: Vec<String>,
    /// The congestion control the sending end switched to when it met random loss.
    pub cc_on_random_loss: Option<CongestionControl>,
    /// What the UDP data channel did (`udp: …`), when the file moved over it.
    pub udp: Option<String>,
    /// Why the file started on the UDP channel where the copy's plan said TCP (a long path
    /// that path memory knew nothing of).
    pub udp_started: Option<String>,
    /// Whether the file's data connections were TLS (`PROT P`; the login was then too).
    pub tls: bool,
    /// The checksum both ends agreed on, as `ALG:hex` (verified copies).
    pub verified: Option<String>,
}

impl FileResult {
    /// Records that the file failed with `error`, and the failure's kind.
    pub fn fail(&mut self, error: &anyhow::Error) {
        self.fail_with(format!("{error:#}"));
    }

    /// Records that the file failed, saying `error`.
    pub fn fail_with(&mut self, error: String) {
        self.failure = Some(Failure::of(&error));
        self.error = Some(error);
    }

    /// Whether the file was copied (not failed, left out or a deletion).
    pub fn copied(&self) -> bool {
        self.error.is_none() && self.skipped.is_none() && !self.deleted
    }

    /// Whether the file was stopped by Ctrl-C, or never begun after a disk filled: such files
    /// are told in one line, not one each.
    pub fn stopped(&self) -> bool {
        self.failure == Some(Failure::Interrupted) || self.never_begun()
    }

    /// Whether the file was never begun (the copy stopped before its turn).
    pub fn never_begun(&self) -> bool {
        self.error
            .as_deref()
            .is_some_and(|e| e.starts_with(NOT_BEGUN))
    }
}

/// Why every file of a `--dry-run` is left out.
pub const DRY_RUN: &str = "dry run";

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
