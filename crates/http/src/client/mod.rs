//! `fatpipe cp`'s HTTPS side: one file down (GET), up (PUT) or between two servers (a
//! third-party `COPY` to the destination, which pulls), each connection tuned as an FTP data
//! connection. A download lands under a temporary name beside its destination and takes the
//! name only when complete. `files` holds the operations beside copies (`ls`, `mkdir`, `rm`,
//! `mv`), `tree` the copies of whole trees (`-r`).

mod files;
mod tree;

pub use files::Listing;
pub use tree::Moved;

use crate::body::{full, FileSink};
use crate::connect::{self, refusal, Remote};
use crate::markers::Reading;
use crate::ranged::Fetch;
use crate::tuned::Tunable;
use fatpipe_net::TunerConfig;
use http_body_util::BodyExt;
use hyper::client::conn::http1::SendRequest;
use hyper::header::{HeaderName, HeaderValue, AUTHORIZATION};
use hyper::Method;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
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

/// Makes the client's connections.
pub struct Client {
    tls: Arc<rustls::ClientConfig>,
    tune: TunerConfig,
}

impl Client {
    /// A client trusting the system's roots and `ca` (else `$SSL_CERT_FILE`), tuning its
    /// connections as `tune` says.
    pub fn new(ca: Option<&Path>, tune: TunerConfig) -> Result<Client, String> {
        let env = std::env::var_os("SSL_CERT_FILE").map(std::path::PathBuf::from);
        let tls = fatpipe_net::tls::client_config(ca.or(env.as_deref()))?;
        Ok(Client { tls, tune })
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

    /// Downloads `src` into the file `dst` (through a partial file renamed when complete;
    /// straight into a device or a pipe, `/dev/null` stays a device) over `streams`
    /// connections (ranged GETs; `None`: as a `-p auto` cold start opens); returns the bytes
    /// moved.
    pub async fn download(
        &self,
        src: &Endpoint,
        dst: &Path,
        streams: Option<u32>,
        progress: &Arc<AtomicU64>,
    ) -> Result<u64, String> {
        let remote = connect::resolve_any(&src.url).await?;
        let (file, part) = if fatpipe_ftp::client::copy::special_file(dst) {
            let file = std::fs::OpenOptions::new()
                .write(true)
                .open(dst)
                .map_err(|e| format!("cannot write {}: {e}", dst.display()))?;
            (file, None)
        } else {
            let dir = dst
                .parent()
                .filter(|d| !d.as_os_str().is_empty())
                .unwrap_or(Path::new("."));
            let part = tempfile::Builder::new()
                .prefix(".fatpipe-part-")
                .tempfile_in(dir)
                .map_err(|e| format!("cannot write into {}: {e}", dir.display()))?;
            let file = part.as_file().try_clone().map_err(|e| e.to_string())?;
            (file, Some(part))
        };
        let sink = FileSink::new(file);
        let headers = src.headers();
        let fetch = Fetch {
            remote: &remote,
            headers: &headers,
            tls: &self.tls,
            tune: &self.tune,
            streams,
            limit: u64::MAX,
            who: "the server",
            networks: None,
        };
        let got = fetch.run(&sink, progress).await;
        let written = sink.finish().await;
        let n = got?;
        written.map_err(|e| format!("cannot write {}: {e}", dst.display()))?;
        if let Some(part) = part {
            part.persist(dst)
                .map_err(|e| format!("cannot name {}: {e}", dst.display()))?;
        }
        Ok(n)
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
        let (mut send, tunable, remote) = self.open(dst).await?;
        connect::put_file(
            &mut send,
            &remote,
            &dst.headers(),
            file,
            size,
            tunable,
            progress,
        )
        .await?;
        Ok(size)
    }

    /// Has `dst`'s server pull `src` (a third-party `COPY`, `streams` connections asked);
    /// returns the bytes the last marker reported.
    pub async fn third_party(
        &self,
        src: &Endpoint,
        dst: &Endpoint,
        streams: u32,
        progress: &Arc<AtomicU64>,
    ) -> Result<u64, String> {
        let (mut send, _, remote) = self.open(dst).await?;
        let mut headers = dst.headers();
        let mut add = |name: &'static str, value: &str| {
            if let Ok(v) = HeaderValue::from_str(value) {
                headers.push((HeaderName::from_static(name), v));
            }
        };
        add("source", &src.https_url());
        add("x-number-of-streams", &streams.to_string());
        if let Some(a) = &src.authorization {
            add("transferheaderauthorization", a);
        }
        let copy = Method::from_bytes(b"COPY").map_err(|e| e.to_string())?;
        let resp = connect::exchange(&mut send, copy, &remote, &headers, full("")).await?;
        if !resp.status().is_success() {
            return Err(refusal("the destination", resp).await);
        }
        let mut body = resp.into_body();
        let mut reading = Reading::default();
        while let Some(frame) = body.frame().await {
            let frame = frame.map_err(|e| format!("the destination stopped reporting: {e}"))?;
            if let Ok(data) = frame.into_data() {
                reading.feed(&data);
                progress.store(reading.bytes, Ordering::Relaxed);
            }
        }
        match reading.outcome {
            Some(Ok(())) => Ok(reading.bytes),
            Some(Err(e)) => Err(format!("the destination reports: {e}")),
            None => Err("the destination ended its report without an outcome".into()),
        }
    }
}
