//! Outgoing HTTPS connections, the server's for third-party copies and the client's: the remote
//! endpoint resolved (for the server, held to the allow-list), a tuned TCP connection (buffers
//! set before connecting, the plan started when a body moves), TLS, HTTP/1.1.

use crate::body::ResponseBody;
use crate::tuned::Tunable;
use fatpipe_ftp::client::part::Source;
use fatpipe_net::admission::ThirdPartyNetworks;
use fatpipe_net::TunerConfig;
use fatpipe_proto::ranges::RangeSet;
use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper::client::conn::http1::SendRequest;
use hyper::header::{HeaderName, HeaderValue, AUTHORIZATION, HOST};
use hyper::{Method, Request, Response};
use hyper_util::rt::TokioIo;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

/// Most redirects one fetch follows.
pub const MAX_REDIRECTS: usize = 5;
/// How long connecting (TCP and TLS) may take.
const CONNECT: Duration = Duration::from_secs(30);

/// A remote endpoint a copy may reach.
#[derive(Debug, Clone)]
pub struct Remote {
    /// The URL asked for.
    pub url: url::Url,
    /// The address connected to.
    pub addr: SocketAddr,
    host: String,
}

/// Resolves `url` (https, or davs which is the same) to an address third-party copies may
/// reach: a public one, or one in `networks`; loopback, private and link-local ones are refused
/// otherwise (a copy must not become a way into the server's own neighbourhood).
pub async fn resolve(url: &url::Url, networks: &ThirdPartyNetworks) -> Result<Remote, String> {
    resolve_where(url, |ip| networks.allows(ip)).await
}

/// Resolves `url` to its first address (a client goes wherever its user says).
pub async fn resolve_any(url: &url::Url) -> Result<Remote, String> {
    resolve_where(url, |_| true).await
}

/// Resolves `url` to its first address that `allowed` accepts.
async fn resolve_where(
    url: &url::Url,
    allowed: impl Fn(std::net::IpAddr) -> bool,
) -> Result<Remote, String> {
    if !matches!(url.scheme(), "https" | "davs") {
        return Err(format!(
            "{}: only https:// and davs:// endpoints are reached",
            url.scheme()
        ));
    }
    let host = url
        .host_str()
        .ok_or_else(|| format!("{url}: no host"))?
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_string();
    let port = url.port().unwrap_or(443);
    let addrs: Vec<SocketAddr> = tokio::net::lookup_host((host.as_str(), port))
        .await
        .map_err(|e| format!("cannot resolve {host}: {e}"))?
        .collect();
    let addr = addrs
        .iter()
        .find(|a| allowed(a.ip()))
        .copied()
        .ok_or_else(|| {
            format!(
                "{host} is at {addrs:?}, which third-party copies may not reach (see --third-party-networks)"
            )
        })?;
    Ok(Remote {
        url: url.clone(),
        addr,
        host,
    })
}

/// Sends `method` to `remote` with `headers` and `body` on `send`, once the connection is
/// ready for it (HTTP/1.1 carries one exchange at a time: a request sent before the last
/// exchange ended is cancelled); errors name the method and the URL.
pub async fn exchange(
    send: &mut SendRequest<ResponseBody>,
    method: Method,
    remote: &Remote,
    headers: &[(HeaderName, HeaderValue)],
    body: ResponseBody,
) -> Result<Response<Incoming>, String> {
    let fail = |e: hyper::Error| format!("{method} {}: {e}", remote.url);
    let req = request(method.clone(), remote, headers, body)?;
    send.ready().await.map_err(fail)?;
    send.send_request(req).await.map_err(fail)
}

/// A request to `remote`'s path with `headers` (and `Host`).
fn request(
    method: Method,
    remote: &Remote,
    headers: &[(HeaderName, HeaderValue)],
    body: ResponseBody,
) -> Result<Request<ResponseBody>, String> {
    let mut target = remote.url.path().to_string();
    if let Some(q) = remote.url.query() {
        target.push('?');
        target.push_str(q);
    }
    let mut req = Request::builder()
        .method(method)
        .uri(target)
        .body(body)
        .map_err(|e| e.to_string())?;
    let authority = match remote.url.port() {
        Some(p) => format!("{}:{p}", remote.url.host_str().unwrap_or_default()),
        None => remote.url.host_str().unwrap_or_default().to_string(),
    };
    let h = req.headers_mut();
    if let Ok(v) = HeaderValue::from_str(&authority) {
        h.insert(HOST, v);
    }
    for (n, v) in headers {
        h.append(n.clone(), v.clone());
    }
    Ok(req)
}

/// A new connection to `remote`, ready for requests, and its tuning.
pub async fn connect(
    remote: &Remote,
    tls: &Arc<rustls::ClientConfig>,
    tune: &TunerConfig,
) -> Result<(SendRequest<ResponseBody>, Option<Tunable>), String> {
    let fail = |what: &str, e: &dyn std::fmt::Display| format!("{what} {}: {e}", remote.addr);
    let socket = if remote.addr.is_ipv4() {
        tokio::net::TcpSocket::new_v4()
    } else {
        tokio::net::TcpSocket::new_v6()
    }
    .map_err(|e| fail("cannot open a socket to", &e))?;
    if let Err(e) = fatpipe_net::tuner::before_connect(tune, &socket) {
        tracing::warn!("cannot size a copy's buffers: {e}");
    }
    let tcp = tokio::time::timeout(CONNECT, socket.connect(remote.addr))
        .await
        .map_err(|_| fail("timed out connecting to", &"no answer"))?
        .map_err(|e| fail("cannot connect to", &e))?;
    let _ = tcp.set_nodelay(true);
    let tunable = Tunable::new(tune, &tcp).ok();
    let name = rustls::pki_types::ServerName::try_from(remote.host.clone())
        .map_err(|e| fail("bad server name for", &e))?;
    let tls = tokio::time::timeout(
        CONNECT,
        tokio_rustls::TlsConnector::from(tls.clone()).connect(name, tcp),
    )
    .await
    .map_err(|_| fail("TLS handshake timed out with", &"no answer"))?
    .map_err(|e| fail("TLS handshake failed with", &e))?;
    let (sender, connection) = hyper::client::conn::http1::Builder::new()
        .title_case_headers(true)
        .max_buf_size(crate::body::READ_BUFFER)
        .handshake(TokioIo::new(tls))
        .await
        .map_err(|e| fail("HTTP failed with", &e))?;
    tokio::spawn(async move {
        if let Err(e) = connection.await {
            tracing::debug!("third-party connection ended: {e}");
        }
    });
    Ok((sender, tunable))
}

/// Where a request goes: the remote and the headers for it.
pub struct At {
    /// The remote.
    pub remote: Remote,
    /// The headers sent there.
    pub headers: Vec<(HeaderName, HeaderValue)>,
}

/// Where a redirect to `to` leads from `at`: https only, to an address within `networks` (a
/// third-party copy's reach; `None`: anywhere, as a client goes where its user's server sends
/// it); the credentials go on only to the same host and port (as curl does: a redirect
/// elsewhere carries what it needs in its URL).
pub async fn follow(
    at: &At,
    to: url::Url,
    networks: Option<&ThirdPartyNetworks>,
) -> Result<At, String> {
    let remote = match networks {
        Some(n) => resolve(&to, n).await,
        None => resolve_any(&to).await,
    }
    .map_err(|e| format!("{} redirected to {to}: {e}", at.remote.url))?;
    let here = |u: &url::Url| (u.host_str().map(str::to_string), u.port_or_known_default());
    let mut headers = at.headers.clone();
    if here(&to) != here(&at.remote.url) {
        headers.retain(|(name, _)| name != AUTHORIZATION);
    }
    tracing::info!("{} redirected to {to}", at.remote.url);
    Ok(At { remote, headers })
}

/// `status: first line of the body`, for a remote's refusal.
pub async fn refusal(what: &str, resp: Response<Incoming>) -> String {
    let code = resp.status();
    let body = http_body_util::Limited::new(resp.into_body(), 4096)
        .collect()
        .await
        .map(|c| c.to_bytes())
        .unwrap_or_default();
    let text = String::from_utf8_lossy(&body);
    let line = text.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
    format!("{what} answered {code} {line}").trim().to_string()
}

/// The `Content-Length` of a response.
pub fn length(resp: &Response<Incoming>) -> Option<u64> {
    resp.headers()
        .get(hyper::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse().ok())
}

/// PUTs `size` bytes of `file` to `at`, over a connection made as `tls` and `tune` say,
/// following a 307 or 308 (a dCache door sends an upload on to a pool) where `networks` lets
/// it reach, as [`follow`] does, at most [`MAX_REDIRECTS`] times; the bytes
/// sent are added to `progress` (those of a redirected attempt taken back). An answer other
/// than 2xx is an error.
pub async fn put_following(
    mut at: At,
    file: &std::fs::File,
    size: u64,
    (tls, tune): (&Arc<rustls::ClientConfig>, &TunerConfig),
    networks: Option<&ThirdPartyNetworks>,
    progress: &Arc<std::sync::atomic::AtomicU64>,
) -> Result<(), String> {
    use std::sync::atomic::Ordering::Relaxed;
    for _ in 0..=MAX_REDIRECTS {
        let (mut send, tunable) = connect(&at.remote, tls, tune).await?;
        let body = file.try_clone().map_err(|e| e.to_string())?;
        match put_file(&mut send, &at, body, size, tunable, progress).await? {
            None => return Ok(()),
            Some((to, counted)) => {
                progress.fetch_sub(counted, Relaxed);
                at = follow(&at, to, networks).await?;
            }
        }
    }
    Err(format!(
        "PUT {}: more than {} redirects",
        at.remote.url, MAX_REDIRECTS
    ))
}

/// One PUT of `size` bytes of `file` on `send` to `at` (with its length), the connection tuned
/// as a sender, the bytes sent added to `progress`; where the answer sends it elsewhere (307,
/// 308), there and the bytes this attempt added.
async fn put_file(
    send: &mut SendRequest<ResponseBody>,
    at: &At,
    file: std::fs::File,
    size: u64,
    tunable: Option<Tunable>,
    progress: &Arc<std::sync::atomic::AtomicU64>,
) -> Result<Option<(url::Url, u64)>, String> {
    let mut headers = at.headers.clone();
    headers.push((hyper::header::CONTENT_LENGTH, HeaderValue::from(size)));
    let tuned = tunable.map(|t| t.start(fatpipe_tune::Role::Sender));
    let sent = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let (p, this) = (progress.clone(), sent.clone());
    // `n` counts this file's bytes from 0; other files of a copy may be on their way too.
    let body = crate::body::from_file(file, vec![crate::body::Piece::File(0..size)], move |n| {
        use std::sync::atomic::Ordering::Relaxed;
        p.fetch_add(n - this.swap(n, Relaxed), Relaxed);
        if let Some(t) = &tuned {
            t.moved(n);
        }
    });
    let resp = exchange(send, Method::PUT, &at.remote, &headers, body).await?;
    let keeps_method = matches!(
        resp.status(),
        hyper::StatusCode::TEMPORARY_REDIRECT | hyper::StatusCode::PERMANENT_REDIRECT
    );
    if let Some(to) = moved_to(&resp, &at.remote.url).filter(|_| keeps_method) {
        let counted = sent.load(std::sync::atomic::Ordering::Relaxed);
        return Ok(Some((to, counted)));
    }
    match resp.status().is_success() {
        true => Ok(None),
        false => Err(refusal(&format!("PUT {}", at.remote.url), resp).await),
    }
}

/// Where a GET's body goes: `sink` from the part's start (0 for a whole file), at most `limit`
/// bytes, what arrives added to `progress` (and to `record`, where a partial file keeps one).
pub struct Landing<'a> {
    /// The file's writer.
    pub sink: &'a crate::body::FileSink,
    /// Most bytes taken.
    pub limit: u64,
    /// The copy's byte count, shared by its connections.
    pub progress: &'a std::sync::atomic::AtomicU64,
    /// What the fetch learns for a partial file's record, if one is kept.
    pub record: Option<&'a Record>,
}

/// What a download learns as its bytes arrive, for the record of a partial file: the ranges
/// handed to the sink (written once the sink has finished without error), and the file as
/// the first answer described it (a resume joins bytes of that very file only).
#[derive(Debug, Default)]
pub struct Record {
    landed: std::sync::Mutex<RangeSet>,
    source: std::sync::Mutex<Option<Source>>,
}

impl Record {
    /// The ranges handed to the sink so far.
    pub fn landed(&self) -> RangeSet {
        self.landed.lock().map(|l| l.clone()).unwrap_or_default()
    }

    /// The file as the first answer described it, if one came.
    pub fn source(&self) -> Option<Source> {
        self.source.lock().ok().and_then(|s| *s)
    }

    fn land(&self, start: u64, end: u64) {
        if let Ok(mut l) = self.landed.lock() {
            l.insert(start, end);
        }
    }

    fn learn(&self, resp: &Response<Incoming>) {
        if let Ok(mut s) = self.source.lock() {
            s.get_or_insert_with(|| described(resp));
        }
    }
}

/// The file a response is (part of): its whole size (a 206's `Content-Range` total, else the
/// `Content-Length`) and its `Last-Modified`.
pub fn described(resp: &Response<Incoming>) -> Source {
    let header = |name| resp.headers().get(name).and_then(|v| v.to_str().ok());
    let total = header(hyper::header::CONTENT_RANGE)
        .and_then(|v| v.rsplit_once('/'))
        .and_then(|(_, t)| t.trim().parse().ok());
    let modified = header(hyper::header::LAST_MODIFIED)
        .and_then(|v| httpdate::parse_http_date(v).ok())
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .and_then(|d| i64::try_from(d.as_secs()).ok());
    Source {
        size: match resp.status() {
            hyper::StatusCode::PARTIAL_CONTENT => total,
            _ => length(resp),
        },
        modified,
    }
}

/// Why a request moved nothing: the remote sent it elsewhere (a 3xx with a `Location`), or it
/// failed (why, for the user).
#[derive(Debug)]
pub enum Miss {
    /// Ask there instead.
    Moved(url::Url),
    /// Failed.
    Failed(String),
}

impl From<String> for Miss {
    fn from(e: String) -> Miss {
        Miss::Failed(e)
    }
}

/// Where a redirect in `resp` (301, 302, 303, 307, 308 with a `Location`, relative to `base`)
/// sends the request, if it is one.
pub fn moved_to(resp: &Response<Incoming>, base: &url::Url) -> Option<url::Url> {
    use hyper::StatusCode;
    let redirect = matches!(
        resp.status(),
        StatusCode::MOVED_PERMANENTLY
            | StatusCode::FOUND
            | StatusCode::SEE_OTHER
            | StatusCode::TEMPORARY_REDIRECT
            | StatusCode::PERMANENT_REDIRECT
    );
    let location = resp.headers().get(hyper::header::LOCATION)?.to_str().ok()?;
    redirect.then(|| base.join(location).ok()).flatten()
}

/// GETs `range` (or the whole file) on `send` into `into`, the connection tuned as a receiver:
/// the answer must be 206 with the range asked (200 for a whole file) and hold as many bytes as
/// it says; `who` names the remote in errors; a redirect is [`Miss::Moved`]. Returns the bytes
/// written.
pub async fn get_into(
    send: &mut SendRequest<ResponseBody>,
    remote: &Remote,
    headers: &[(HeaderName, HeaderValue)],
    range: Option<std::ops::Range<u64>>,
    tunable: Option<Tunable>,
    into: Landing<'_>,
    who: &str,
) -> Result<u64, Miss> {
    use hyper::StatusCode;
    use std::sync::atomic::{AtomicU64, Ordering};
    let mut headers = headers.to_vec();
    if let Some(r) = &range {
        if let Ok(v) = HeaderValue::from_str(&format!("bytes={}-{}", r.start, r.end - 1)) {
            headers.push((hyper::header::RANGE, v));
        }
    }
    let resp = exchange(send, Method::GET, remote, &headers, crate::body::full("")).await?;
    let (want, start) = match &range {
        Some(r) => (StatusCode::PARTIAL_CONTENT, r.start),
        None => (StatusCode::OK, 0),
    };
    if let Some(to) = moved_to(&resp, &remote.url) {
        return Err(Miss::Moved(to));
    }
    if resp.status() != want {
        return Err(Miss::Failed(refusal(who, resp).await));
    }
    if let Some(r) = &range {
        let cr = resp
            .headers()
            .get("content-range")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("");
        if !cr.starts_with(&format!("bytes {}-{}/", r.start, r.end - 1)) {
            return Err(Miss::Failed(format!("{who} sent range {cr:?} for {r:?}")));
        }
    }
    let expected = match &range {
        Some(r) => Some(r.end - r.start),
        None => length(&resp),
    };
    if let Some(r) = into.record {
        r.learn(&resp);
    }
    let tuned = tunable.map(|t| t.start(fatpipe_tune::Role::Receiver));
    let seen = AtomicU64::new(0);
    // Never a byte past what was asked: a body longer than its range would land on the next
    // part's bytes (and a partial file's record would claim them).
    let limit = expected.map_or(into.limit, |e| e.min(into.limit));
    let n = crate::body::drain_into(resp.into_body(), into.sink, start, limit, |n| {
        let new = n - seen.swap(n, Ordering::Relaxed);
        into.progress.fetch_add(new, Ordering::Relaxed);
        if let Some(r) = into.record {
            r.land(start, start + n);
        }
        if let Some(t) = &tuned {
            t.moved(n);
        }
    })
    .await?;
    if expected.is_some_and(|e| e != n) {
        return Err(Miss::Failed(format!(
            "{who} sent {n} bytes of {expected:?}"
        )));
    }
    Ok(n)
}
