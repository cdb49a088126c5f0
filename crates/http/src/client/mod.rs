//! `fatpipe cp`'s HTTPS side: one file down (GET), up (PUT) or between two servers (a
//! third-party `COPY` to the destination, which pulls), each connection tuned as an FTP data
//! connection. A download lands in a partial file beside its destination (what arrived and of
//! which file recorded, for `--resume`) and takes the name only when complete. `files` holds
//! the operations beside copies (`ls`, `mkdir`, `rm`, `mv`, globs), `tree` the copies of whole
//! trees (`-r`), `results` what each file's copy came to (and its retries), `copy` a whole copy
//! as a user names it (cp's rules for names and globs), `commands` `ls`, `mkdir -p` and `rm`
//! likewise.

mod auth;
mod commands;
mod copy;
mod files;
mod results;
mod third_party;
mod tree;

pub use auth::authorization;
pub use commands::entry;
pub use copy::{url_name, CopyPlan, Place};
pub use files::Listing;
pub use results::{file_result, Failed, Got};
pub use third_party::ThirdParty;
pub use tree::{member_of, MAX_DEPTH};

use crate::body::FileSink;
use crate::connect::{self, Record, Remote};
use crate::ranged::Fetch;
use crate::tuned::Tunable;
use fatpipe_ftp::client::part::{self, Part};
use fatpipe_net::TunerConfig;
use fatpipe_proto::ranges::RangeSet;
use hyper::client::conn::http1::SendRequest;
use hyper::header::{HeaderName, HeaderValue, AUTHORIZATION};
use std::path::Path;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;

/// A remote file and how to authenticate to its server.
#[derive(Debug, Clone)]
pub struct Endpoint {
    /// `https://` or `davs://` URL (credentials in it are not sent as such).
    pub url: url::Url,
    /// The `Authorization` header value (`Basic …`, `Bearer …`), if any.
    pub authorization: Option<String>,
}

impl Endpoint {
    /// The URL as another server is told it (`davs://` is `https://` on the wire, without
    /// credentials).
    pub fn https_url(&self) -> String {
        let mut u = self.url.clone();
        let _ = u.set_username("");
        let _ = u.set_password(None);
        let s = u.to_string();
        match s.strip_prefix("davs://") {
            Some(rest) => format!("https://{rest}"),
            None => s,
        }
    }

    /// The request headers that authenticate to its server.
    fn headers(&self) -> Vec<(HeaderName, HeaderValue)> {
        self.authorization
            .as_deref()
            .and_then(|a| HeaderValue::from_str(a).ok())
            .map(|v| vec![(AUTHORIZATION, v)])
            .unwrap_or_default()
    }
}

#[cfg(test)]
impl Endpoint {
    /// An endpoint at `url` without authorization, for the tests.
    pub(crate) fn at(url: &str) -> Endpoint {
        Endpoint {
            url: url::Url::parse(url).expect("a test's URL"),
            authorization: None,
        }
    }
}

/// How a download goes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Download {
    /// Connections (ranged GETs); `None`: as a `-p auto` cold start opens.
    pub streams: Option<u32>,
    /// Go on from a partial file an earlier run left (`--resume`).
    pub resume: bool,
    /// A download whose connection broke is tried again, from what arrived, for this long
    /// from its first failure (`--retry-for`; zero: never).
    pub retry_for: std::time::Duration,
}

/// A partial file being written. Dropped before its download ends (another file of a tree
/// failed), it keeps only what it held before this run: one this run made is removed, and
/// bytes still on their way to the disk are never claimed.
struct Unfinished {
    part: Option<Part>,
    before: RangeSet,
}

impl Drop for Unfinished {
    fn drop(&mut self) {
        if let Some(p) = self.part.take() {
            p.failed(&self.before);
        }
    }
}

/// Whether the partial file holding `all` is the whole file of `size` bytes (when the server
/// said): cut to that size, with no gap below it.
fn whole(part: &Part, all: &RangeSet, size: Option<u64>) -> Result<(), String> {
    let Some(size) = size else {
        return Ok(());
    };
    part.file
        .set_len(part.file.metadata().map_or(0, |m| m.len()).min(size))
        .map_err(|e| format!("cannot cut {}: {e}", part.path().display()))?;
    match all.gaps(0, size).first() {
        None => Ok(()),
        Some((a, b)) => Err(format!(
            "the server's answers left bytes {a}-{b} of {size} out; the copy is incomplete"
        )),
    }
}

/// Makes the client's connections.
pub struct Client {
    tls: Arc<rustls::ClientConfig>,
    tune: TunerConfig,
}

impl Client {
    /// A client trusting the system's roots and `ca` (else `$SSL_CERT_FILE`), showing `cert`
    /// to servers that ask for a client certificate, tuning its connections as `tune` says.
    pub fn new(
        ca: Option<&Path>,
        cert: Option<&fatpipe_net::tls::grid::ClientCert>,
        tune: TunerConfig,
    ) -> Result<Client, String> {
        let env = std::env::var_os("SSL_CERT_FILE").map(std::path::PathBuf::from);
        let tls = fatpipe_net::tls::client_config_showing(ca.or(env.as_deref()), cert)?;
        Ok(Client { tls, tune })
    }

    /// Data connections a download as `how` says may open at once (what the runtime it runs
    /// on may spread over threads: [`crate::runtime::for_connections`]).
    pub fn connections(&self, how: &Download) -> usize {
        crate::runtime::connections(how.streams, &self.tune)
    }

    async fn open(
        &self,
        e: &Endpoint,
    ) -> Result<
        (
            SendRequest<crate::body::ResponseBody>,
            Option<Tunable>,
            Remote,
        ),
        String,
    > {
        let remote = connect::resolve_any(&e.url).await?;
        let (send, tunable) = connect::connect(&remote, &self.tls, &self.tune).await?;
        Ok((send, tunable, remote))
    }

    /// Downloads `src` into the file `dst` over `how.streams` connections (ranged GETs;
    /// `None`: as a `-p auto` cold start opens); returns the bytes moved. The bytes land in
    /// `NAME.fatpipe-part` beside `dst` (straight into a device or a pipe: `/dev/null` stays a
    /// device), which records the ranges that arrived and the file they are of, and takes
    /// `dst`'s name once complete. A failed download keeps what arrived there; with `resume` the
    /// next one fetches only what it lacks, if the server's file is still the one it was
    /// begun from (same size and modification time) and serves byte ranges, else all of it.
    pub async fn download(
        &self,
        src: &Endpoint,
        dst: &Path,
        how: Download,
        progress: &Arc<AtomicU64>,
    ) -> Result<Got, Failed> {
        let Download {
            streams, resume, ..
        } = how;
        let remote = connect::resolve_any(&src.url).await?;
        let headers = src.headers();
        let mut fetch = Fetch {
            remote: &remote,
            headers: &headers,
            tls: &self.tls,
            tune: &self.tune,
            streams,
            limit: u64::MAX,
            who: "the server",
            networks: None,
            ranges: None,
            record: None,
        };
        if fatpipe_ftp::client::copy::special_file(dst) {
            let file = std::fs::OpenOptions::new()
                .write(true)
                .open(dst)
                .map_err(|e| format!("cannot write {}: {e}", dst.display()))?;
            let sink = FileSink::new(file);
            let got = fetch.run(&sink, progress).await;
            let written = sink.finish().await;
            let bytes = got?;
            written.map_err(|e| format!("cannot write {}: {e}", dst.display()))?;
            return Ok(Got::new(bytes));
        }
        // Only a partial file of fatpipe's own is resumed (it says what it holds and of which
        // file); a destination of the same name may hold anything.
        let resume = resume && part::part_path(dst).symlink_metadata().is_ok();
        let (mut part, held) = Part::open(dst, resume, None).map_err(|e| format!("{e:#}"))?;
        // What the partial file holds from before this run, and what it lacks.
        let (gaps, before) = match held.is_empty() {
            true => (None, held),
            false => match self.resumable(&fetch, &mut part, &held).await? {
                Some((gaps, held)) => (Some(gaps), held),
                None => (None, RangeSet::default()),
            },
        };
        fetch.ranges = gaps.as_deref();
        let record = Record::default();
        fetch.record = Some(&record);
        let file = part.file.try_clone().map_err(|e| e.to_string())?;
        let mut unfinished = Unfinished {
            part: Some(part),
            before: before.clone(),
        };
        let sink = FileSink::new(file);
        let got = fetch.run(&sink, progress).await;
        let written = sink.finish().await;
        let Some(part) = unfinished.part.take() else {
            return Err("the partial file was lost".to_string().into());
        };
        if let Some(source) = record.source() {
            part.remember(&source);
        }
        let mut all = before;
        if written.is_ok() {
            all.insert_all(&record.landed(), 0);
        }
        let outcome = got.and_then(|n| {
            written
                .map(|()| n)
                .map_err(|e| format!("cannot write {}: {e}", dst.display()))
        });
        // The file as the server described it: nothing past its size, no hole before.
        let size = record.source().and_then(|s| s.size);
        if let Some(size) = size {
            all = all.below(size);
        }
        let outcome = outcome.and_then(|n| whole(&part, &all, size).map(|()| n));
        let resumed_from = unfinished.before.len();
        match outcome {
            Ok(bytes) => {
                part.complete().map_err(|e| format!("{e:#}"))?;
                Ok(Got {
                    bytes,
                    resumed_from,
                })
            }
            Err(error) => {
                let kept = all.len();
                let error = match kept {
                    0 => error,
                    _ => format!(
                        "{error}; {kept} bytes kept in {} (run again with --resume)",
                        part.path().display()
                    ),
                };
                part.failed(&all);
                Err(Failed {
                    error,
                    kept: kept.saturating_sub(resumed_from),
                })
            }
        }
    }

    /// The gaps of a partial file that holds `held` and can be resumed, and what it holds of
    /// the file (nothing past its size): the server's file is the one it was begun from and
    /// serves ranges; else (`None`) it starts over, emptied.
    async fn resumable(
        &self,
        fetch: &Fetch<'_>,
        part: &mut Part,
        held: &RangeSet,
    ) -> Result<Option<(Vec<std::ops::Range<u64>>, RangeSet)>, String> {
        let head = fetch.head().await?;
        let why = match (head.source.size, part.source()) {
            (None, _) | (_, None) => Some("its size or the partial copy's origin is unknown"),
            _ if !head.ranges => Some("the server serves no byte ranges"),
            (_, Some(was)) if was.changed(&head.source) => Some("it changed since"),
            _ => None,
        };
        let Some(size) = head.source.size.filter(|_| why.is_none()) else {
            tracing::warn!(
                "{} cannot be resumed ({}): copying it again in full",
                part.path().display(),
                why.unwrap_or_default()
            );
            part.hold(&RangeSet::default())
                .map_err(|e| format!("{e:#}"))?;
            return Ok(None);
        };
        tracing::info!(
            "resuming {}: {} of {size} bytes held",
            part.path().display(),
            held.len()
        );
        let held = held.below(size);
        part.file
            .set_len(part.file.metadata().map_or(0, |m| m.len()).min(size))
            .map_err(|e| format!("cannot cut {}: {e}", part.path().display()))?;
        part.hold(&held).map_err(|e| format!("{e:#}"))?;
        let gaps = held.gaps(0, size).into_iter().map(|(a, b)| a..b).collect();
        Ok(Some((gaps, held)))
    }

    /// Uploads the file `src` to `dst`; returns the bytes moved.
    pub async fn upload(
        &self,
        src: &Path,
        dst: &Endpoint,
        progress: &Arc<AtomicU64>,
    ) -> Result<u64, String> {
        let file = std::fs::File::open(src).map_err(|e| format!("{}: {e}", src.display()))?;
        let size = file.metadata().map_err(|e| e.to_string())?.len();
        let at = connect::At {
            remote: connect::resolve_any(&dst.url).await?,
            headers: dst.headers(),
        };
        let how = (&self.tls, &self.tune);
        connect::put_following(at, &file, size, how, None, progress).await?;
        Ok(size)
    }
}
