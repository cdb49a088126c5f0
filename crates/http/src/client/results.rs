//! What one file's copy over HTTPS came to, as `fatpipe cp` reports every copy: the FTP copy's
//! result type, so that both front-ends share one summary, one `--json` and one set of exit
//! codes; and a download that rides through a broken link as an FTP copy does (`--retry-for`).

use super::{Client, Download, Endpoint};
use fatpipe_ftp::client::copy::{special_file, FileResult};
use fatpipe_ftp::client::retry::next_pause;
use std::path::Path;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A file that arrived.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Got {
    /// Bytes moved by this run.
    pub bytes: u64,
    /// Bytes a partial copy held from before (`--resume`).
    pub resumed_from: u64,
}

impl Got {
    /// A file moved whole by this run.
    pub fn new(bytes: u64) -> Got {
        Got {
            bytes,
            resumed_from: 0,
        }
    }
}

/// A file that did not arrive.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failed {
    /// Why, for the user.
    pub error: String,
    /// Bytes this run moved that a partial file keeps.
    pub kept: u64,
}

impl From<String> for Failed {
    fn from(error: String) -> Failed {
        Failed { error, kept: 0 }
    }
}

/// The result of copying `source` to `destination`, begun at `started`.
pub fn file_result(
    source: &str,
    destination: &str,
    started: Instant,
    outcome: Result<Got, Failed>,
) -> FileResult {
    let mut r = FileResult {
        source: source.to_string(),
        destination: destination.to_string(),
        tls: true,
        ..FileResult::default()
    };
    match outcome {
        Ok(got) => {
            r.bytes = got.bytes;
            r.resumed_from = got.resumed_from;
            r.data_seconds = Some(started.elapsed().as_secs_f64());
        }
        Err(f) => {
            r.bytes = f.kept;
            r.fail_with(f.error);
        }
    }
    r
}

impl Client {
    /// Downloads `src` into `dst` as [`Client::download`] does, and while an attempt fails
    /// because its connection broke (or could not be made), tries again after a pause that
    /// doubles (1 s to 30 s), from what arrived, until `how.retry_for` has passed since the
    /// first failure (never into a device or a pipe: what went there cannot be taken back).
    /// The result counts every attempt's bytes.
    pub async fn download_file(
        &self,
        src: &Endpoint,
        dst: &Path,
        how: Download,
        progress: &Arc<AtomicU64>,
    ) -> FileResult {
        let (source, into) = (src.https_url(), dst.display().to_string());
        let retries = !special_file(dst);
        let mut how = how;
        let (mut first_failure, mut pause, mut moved) = (None, None, 0);
        let mut resumed_from = None;
        loop {
            let started = Instant::now();
            let got = self.download(src, dst, how, progress).await;
            let mut r = file_result(&source, &into, started, got);
            moved += r.bytes;
            let from = *resumed_from.get_or_insert(r.resumed_from);
            let transient = r.failure.is_some_and(|f| f.transient());
            let Some(error) = r.error.clone().filter(|_| transient && retries) else {
                r.bytes = moved;
                r.resumed_from = from;
                return r;
            };
            let since = *first_failure.get_or_insert_with(Instant::now);
            let wait = next_pause(pause);
            pause = Some(wait);
            if since.elapsed() + wait > how.retry_for {
                if !how.retry_for.is_zero() {
                    let tried = Duration::from_secs(since.elapsed().as_secs());
                    r.fail_with(format!(
                        "{error} (gave up after retrying for {}, --retry-for)",
                        humantime::format_duration(tried)
                    ));
                }
                r.bytes = moved;
                r.resumed_from = from;
                return r;
            }
            tracing::warn!(
                "{error}; trying again in {} (--retry-for)",
                humantime::format_duration(wait)
            );
            tokio::time::sleep(wait).await;
            how.resume = true;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use fatpipe_ftp::client::failure::Failure;

    #[test]
    fn a_result_carries_what_moved_or_why_not() {
        let t = Instant::now();
        let ok = file_result(
            "https://h/f",
            "f",
            t,
            Ok(Got {
                bytes: 5,
                resumed_from: 3,
            }),
        );
        assert_eq!((ok.bytes, ok.resumed_from, ok.error), (5, 3, None));
        assert!(ok.tls && ok.data_seconds.is_some());
        let cut = Failed {
            error: "the body was cut: connection reset".into(),
            kept: 7,
        };
        let bad = file_result("https://h/f", "f", t, Err(cut));
        assert_eq!(bad.bytes, 7);
        assert_eq!(bad.failure, Some(Failure::Lost));
    }
}
