//! What one file's copy over HTTPS came to, as `fatpipe cp` reports every copy: the FTP copy's
//! result type, so that both front-ends share one summary, one `--json` and one set of exit
//! codes; and a download that rides through a broken link as an FTP copy does (`--retry-for`).

use super::{Client, Download, Endpoint, ThirdParty};
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
    /// Downloads `src` into `dst` as [`Client::download`] does, again from what arrived while
    /// its connection breaks (see [`retrying`]; never into a device or a pipe: what went there
    /// cannot be taken back).
    pub async fn download_file(
        &self,
        src: &Endpoint,
        dst: &Path,
        how: Download,
        progress: &Arc<AtomicU64>,
    ) -> FileResult {
        let (source, into) = (src.https_url(), dst.display().to_string());
        let retry_for = match special_file(dst) {
            true => Duration::ZERO,
            false => how.retry_for,
        };
        retrying(retry_for, async |again| {
            let how = Download {
                resume: how.resume || again,
                ..how
            };
            let started = Instant::now();
            let got = self.download(src, dst, how, progress).await;
            file_result(&source, &into, started, got)
        })
        .await
    }

    /// Uploads the file `src` to `dst` as [`Client::upload`] does, whole again while its
    /// connection breaks (see [`retrying`]).
    pub async fn upload_file(
        &self,
        src: &Path,
        dst: &Endpoint,
        retry_for: Duration,
        progress: &Arc<AtomicU64>,
    ) -> FileResult {
        let (source, into) = (src.display().to_string(), dst.https_url());
        sent_whole(retry_for, &source, &into, async || {
            self.upload(src, dst, progress).await
        })
        .await
    }

    /// Has `dst`'s server pull `src` as [`Client::third_party`] does, again while the
    /// connection to it breaks (see [`retrying`]).
    pub async fn third_party_file(
        &self,
        src: &Endpoint,
        dst: &Endpoint,
        how: ThirdParty,
        retry_for: Duration,
        progress: &Arc<AtomicU64>,
    ) -> FileResult {
        let (source, into) = (src.https_url(), dst.https_url());
        let copy = async || self.third_party(src, dst, how, progress).await;
        sent_whole(retry_for, &source, &into, copy).await
    }
}

/// A copy of `source` to `into` that `send` moves whole each time, tried again as
/// [`retrying`] says.
async fn sent_whole(
    retry_for: Duration,
    source: &str,
    into: &str,
    send: impl AsyncFn() -> Result<u64, String>,
) -> FileResult {
    retrying(retry_for, async |_| {
        let started = Instant::now();
        let got = send().await.map(Got::new).map_err(Into::into);
        file_result(source, into, started, got)
    })
    .await
}

/// Runs `attempt` (told whether it is a new try) while it fails because a connection broke or
/// could not be made, after a pause that doubles (1 s to 30 s), until `retry_for` has passed
/// since the first failure, as an FTP copy does (`--retry-for`). The result is the last
/// attempt's, counting every attempt's bytes and the first one's resumed prefix; one that
/// gave up says how long it tried.
pub async fn retrying(
    retry_for: Duration,
    mut attempt: impl AsyncFnMut(bool) -> FileResult,
) -> FileResult {
    let (mut first_failure, mut pause, mut moved) = (None, None, 0);
    let mut resumed_from = None;
    loop {
        let mut r = attempt(first_failure.is_some()).await;
        moved += r.bytes;
        let from = *resumed_from.get_or_insert(r.resumed_from);
        let transient = r.failure.is_some_and(|f| f.transient());
        let error = r
            .error
            .clone()
            .filter(|_| transient && !retry_for.is_zero());
        let Some(error) = error else {
            r.bytes = moved;
            r.resumed_from = from;
            return r;
        };
        let since = *first_failure.get_or_insert_with(Instant::now);
        let wait = next_pause(pause);
        pause = Some(wait);
        if since.elapsed() + wait > retry_for {
            let tried = Duration::from_secs(since.elapsed().as_secs());
            r.fail_with(format!(
                "{error} (gave up after retrying for {}, --retry-for)",
                humantime::format_duration(tried)
            ));
            r.bytes = moved;
            r.resumed_from = from;
            return r;
        }
        tracing::warn!(
            "{error}; trying again in {} (--retry-for)",
            humantime::format_duration(wait)
        );
        tokio::time::sleep(wait).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use fatpipe_ftp::client::failure::Failure;

    /// A result that failed saying `error`, having moved `bytes`.
    fn failed(error: &str, bytes: u64) -> FileResult {
        let t = Instant::now();
        let f = Failed {
            error: error.into(),
            kept: bytes,
        };
        file_result("s", "d", t, Err(f))
    }

    #[test]
    fn only_lost_connections_are_tried_again_and_every_attempt_counts() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap();
        let run = |retry_for: Duration, script: Vec<FileResult>| {
            let mut left = script.into_iter();
            let mut tries = Vec::new();
            let r = rt.block_on(retrying(retry_for, async |again| {
                tries.push(again);
                left.next().unwrap_or_else(|| failed("script ran out", 0))
            }));
            (r, tries)
        };
        let ok = |bytes| file_result("s", "d", Instant::now(), Ok(Got::new(bytes)));
        let lost = "the body was cut: connection reset";
        // Cut after 3 bytes, then the rest: one result of 10 bytes, the second try told so.
        let (r, tries) = run(Duration::from_secs(60), vec![failed(lost, 3), ok(7)]);
        assert_eq!((r.error, r.bytes, tries), (None, 10, vec![false, true]));
        // A refusal is never tried again.
        let refused = failed("the server answered 404 Not Found", 0);
        let (r, tries) = run(Duration::from_secs(60), vec![refused]);
        assert_eq!((r.failure, tries.len()), (Some(Failure::NotFound), 1));
        // Nor anything with --retry-for 0.
        let (r, tries) = run(Duration::ZERO, vec![failed(lost, 5), ok(1)]);
        assert_eq!(
            (r.failure, r.bytes, tries.len()),
            (Some(Failure::Lost), 5, 1)
        );
        // Past --retry-for it gives up and says so.
        let (r, _) = run(Duration::from_millis(500), vec![failed(lost, 1), ok(1)]);
        assert!(r
            .error
            .unwrap_or_default()
            .contains("gave up after retrying"));
    }

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
