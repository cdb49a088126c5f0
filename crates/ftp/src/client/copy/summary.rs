//! How a whole copy ended, counted from its files' results: the failure its exit code says and
//! the `--json` summary (docs/json.md), the same for every front-end that copies.

use crate::client::failure::Failure;
use crate::client::file_result::FileResult;
use crate::client::transport;
use serde::Serialize;

/// How a copy ended: its files' results, whether a signal stopped it, its wall clock and the
/// transport as it went.
pub struct Ending<'a> {
    /// Each file's result, in the order the copy took them.
    pub results: &'a [FileResult],
    /// A signal stopped the copy.
    pub interrupted: bool,
    /// The whole command's wall clock.
    pub seconds: f64,
    /// The transport chosen, and why.
    pub transport: transport::Choice,
    /// `--dry-run`: the results are the plan.
    pub dry_run: bool,
}

impl Ending<'_> {
    /// The failure the exit code says: interrupted, or the kind the failed files share.
    pub fn failure(&self) -> Option<Failure> {
        match self.interrupted {
            true => Some(Failure::Interrupted),
            false => Failure::common(self.results.iter().filter_map(|r| r.failure)),
        }
    }

    /// Bytes moved in this run.
    pub fn bytes(&self) -> u64 {
        self.results.iter().map(|r| r.bytes).sum()
    }

    /// Files that failed.
    pub fn failed(&self) -> usize {
        self.results.iter().filter(|r| r.error.is_some()).count()
    }

    /// Files left out on purpose.
    pub fn left_out(&self) -> usize {
        self.results.iter().filter(|r| r.skipped.is_some()).count()
    }

    /// Files copied.
    pub fn copied(&self) -> usize {
        self.results.iter().filter(|r| r.copied()).count()
    }

    /// Entries `--delete` removed (or would).
    pub fn deleted(&self) -> usize {
        deleted(self.results)
    }

    /// The `--json` summary.
    pub fn summary(&self) -> Summary<'_> {
        let failure = self.failure();
        Summary {
            ok: failure.is_none(),
            error: None,
            failure,
            exit_code: failure.map_or(0, Failure::exit_code),
            files_ok: self.copied(),
            files_failed: self.failed(),
            files_left_out: self.left_out(),
            files_deleted: self.deleted(),
            bytes: self.bytes(),
            seconds: self.seconds,
            rate_mbit_s: self.bytes() as f64 * 8.0 / self.seconds.max(1e-9) / 1e6,
            transport: Some(self.transport.clone().into()),
            files: self.results,
        }
    }
}

/// How many of `results` are entries a `--delete` removed (or would).
pub fn deleted(results: &[FileResult]) -> usize {
    results
        .iter()
        .filter(|r| r.deleted && r.error.is_none())
        .count()
}

/// The `--json` summary.
#[derive(Serialize)]
pub struct Summary<'a> {
    /// Every file arrived (and was verified where verification ran).
    pub ok: bool,
    /// Why the copy failed before (or instead of) its files.
    pub error: Option<String>,
    /// The kind of failure the exit code says: the copy's, or its files' if they share one.
    pub failure: Option<Failure>,
    /// The exit code.
    pub exit_code: u8,
    /// Files copied.
    pub files_ok: usize,
    /// Files that failed.
    pub files_failed: usize,
    /// Files left out on purpose (`--no-clobber`, `--update`, `--dry-run`).
    pub files_left_out: usize,
    /// Entries `--delete` removed from the destination.
    pub files_deleted: usize,
    /// Bytes moved.
    pub bytes: u64,
    /// The whole command's wall clock.
    pub seconds: f64,
    /// Bytes over the wall clock.
    pub rate_mbit_s: f64,
    /// The transport and why (none for a copy that failed before its first file).
    pub transport: Option<TransportReport>,
    /// Each file's result.
    pub files: &'a [FileResult],
}

impl Summary<'_> {
    /// The summary of a copy that failed before its first file, with `error`.
    pub fn before_first_file(error: &anyhow::Error) -> Summary<'static> {
        let failure = Failure::of_error(error);
        Summary {
            ok: false,
            error: Some(format!("{error:#}")),
            failure: Some(failure),
            exit_code: failure.exit_code(),
            files_ok: 0,
            files_failed: 0,
            files_left_out: 0,
            files_deleted: 0,
            bytes: 0,
            seconds: 0.0,
            rate_mbit_s: 0.0,
            transport: None,
            files: &[],
        }
    }
}

/// The `--json` summary's account of the transport: which, whether asked for, and why.
#[derive(Serialize)]
pub struct TransportReport {
    name: &'static str,
    asked: bool,
    why: String,
}

impl From<transport::Choice> for TransportReport {
    fn from(c: transport::Choice) -> Self {
        TransportReport {
            name: c.name(),
            asked: c.asked,
            why: c.why,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn choice() -> transport::Choice {
        transport::Choice {
            udp: false,
            asked: false,
            leave_tcp_on_loss: false,
            udp_if_long: false,
            why: "no random loss known".into(),
        }
    }

    #[test]
    fn a_copy_counts_its_files_by_what_became_of_them_and_its_failure_sets_the_exit_code() {
        let mut failed = FileResult::default();
        failed.fail_with("550 No such file".into());
        let results = [
            FileResult {
                bytes: 10,
                ..FileResult::default()
            },
            FileResult {
                bytes: 5,
                ..FileResult::default()
            },
            failed,
            FileResult {
                skipped: Some("exists (--no-clobber)".into()),
                ..FileResult::default()
            },
            FileResult {
                deleted: true,
                ..FileResult::default()
            },
        ];
        let ending = Ending {
            results: &results,
            interrupted: false,
            seconds: 1.0,
            transport: choice(),
            dry_run: false,
        };
        let s = ending.summary();
        let counts = (
            s.files_ok,
            s.files_failed,
            s.files_left_out,
            s.files_deleted,
        );
        assert_eq!(counts, (2, 1, 1, 1));
        assert_eq!((s.bytes, s.ok), (15, false));
        assert_eq!(s.failure, results[2].failure);
        assert_ne!(s.exit_code, 0);
        let stopped = Ending {
            interrupted: true,
            ..ending
        };
        assert_eq!(stopped.failure(), Some(Failure::Interrupted));
    }
}
