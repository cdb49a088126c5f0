//! WLCG HTTP third-party copy. `COPY` with `Source:` pulls into this server; `COPY` whose
//! `Destination:` is another server pushes from it. The client gets `202 Accepted` at once
//! and a body of performance markers (the first when the copy starts, then every 5 s) ending
//! in `success: Created` or `failure: …`; `TransferHeader<Name>` headers go to the remote as
//! `<Name>` (its `Authorization`). A pull may run over several connections
//! (`X-Number-Of-Streams`), each a ranged GET tuned like any data connection.

mod fetch;

use crate::answer::{refuse, Refused};
use crate::auth::{Grant, Op};
use crate::body::{self, ResponseBody};
use crate::connect::{self as client, Remote};
use crate::dav::{check, fs_failed, header, on_tree, Answer};
use crate::markers;
use crate::request::State;
use bytes::Bytes;
use fatpipe_net::stall::StallWatch;
use fatpipe_proto::VPath;
use hyper::header::{HeaderMap, HeaderName, HeaderValue};
use hyper::{Response, StatusCode};
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;
use tokio::sync::mpsc;

/// The headers to send the remote: each `TransferHeader<Name>: v` as `<Name>: v` (hop-by-hop
/// and length headers are the connection's own and never forwarded).
pub fn forwarded(h: &HeaderMap) -> Vec<(HeaderName, HeaderValue)> {
    const PREFIX: &str = "transferheader";
    h.iter()
        .filter_map(|(n, v)| {
            let name = n.as_str().strip_prefix(PREFIX)?;
            let name = HeaderName::from_bytes(name.as_bytes()).ok()?;
            let own = [
                "host",
                "content-length",
                "transfer-encoding",
                "connection",
                "te",
                "upgrade",
            ];
            (!own.contains(&name.as_str())).then(|| (name, v.clone()))
        })
        .collect()
}

/// What both directions check first: third-party copies allowed, asked by a named account or
/// a token (never anonymously, as for FTP: the server is nobody's free proxy), the remote
/// reachable.
async fn remote_of(state: &State, grant: &Grant, url: &str) -> Result<Remote, Refused> {
    if !state.config.allow_third_party {
        return Err(refuse(
            StatusCode::FORBIDDEN,
            "third-party copies are off on this server (--allow-third-party)",
        ));
    }
    if grant.is_anonymous() {
        return Err(refuse(
            StatusCode::FORBIDDEN,
            "anonymous requests may not start third-party copies",
        ));
    }
    let url = url::Url::parse(url.trim())
        .map_err(|e| refuse(StatusCode::BAD_REQUEST, &format!("bad remote URL: {e}")))?;
    client::resolve(&url, &state.config.third_party_networks)
        .await
        .map_err(|e| refuse(StatusCode::FORBIDDEN, &e))
}

/// `X-Number-Of-Streams`, bounded; `None` when the client left it to the server.
fn streams_asked(h: &HeaderMap) -> Option<u32> {
    header(h, "x-number-of-streams")
        .and_then(|s| s.trim().parse::<u32>().ok())
        .map(|n| n.clamp(1, crate::runtime::MAX_STREAMS))
}

/// Whether the client asked for the copy's checksum to be compared with the source's.
fn verify_asked(h: &HeaderMap) -> bool {
    header(h, "requirechecksumverification").is_some_and(|v| v.trim().eq_ignore_ascii_case("true"))
}

/// `COPY` with `Source: url`: this server fetches `url` into `dest`.
pub async fn pull(
    state: &Arc<State>,
    grant: &Grant,
    dest: &VPath,
    h: &HeaderMap,
    source: &str,
) -> Answer {
    let remote = remote_of(state, grant, source).await?;
    let (upload, _) = crate::dav::upload_into(state, grant, dest).await?;
    let job = fetch::Pull {
        state: state.clone(),
        remote,
        headers: forwarded(h),
        streams: streams_asked(h),
        verify: verify_asked(h),
    };
    tracing::info!(dest = %dest, source = %job.remote.url, "third-party pull");
    let progress = Arc::new(AtomicU64::new(0));
    let p = progress.clone();
    Ok(accepted(progress, state.config.stall_timeout, async move {
        job.run(upload, &p).await
    }))
}

/// `COPY` with a `Destination` on another server: this server sends `src` there with a PUT.
pub async fn push(
    state: &Arc<State>,
    grant: &Grant,
    src: &VPath,
    h: &HeaderMap,
    dest: url::Url,
) -> Answer {
    check(grant, Op::Read, src)?;
    let (file, meta) = on_tree(state, src, |sandbox, s| sandbox.open_read(s))
        .await
        .map_err(|e| fs_failed(&e, src))?;
    let remote = remote_of(state, grant, dest.as_str()).await?;
    tracing::info!(src = %src, dest = %remote.url, "third-party push");
    let job = fetch::Push {
        state: state.clone(),
        remote,
        headers: forwarded(h),
        verify: verify_asked(h),
    };
    let progress = Arc::new(AtomicU64::new(0));
    let p = progress.clone();
    Ok(accepted(progress, state.config.stall_timeout, async move {
        job.run(file, meta.len(), &p).await
    }))
}

/// `202 Accepted` whose body reports `job` as it runs: a marker at once, then every
/// [`markers::MARKER_EVERY`], then the outcome. A client that goes away cancels the job, and so
/// does a remote that moves nothing for `stall` (`--data-timeout`, as for FTP transfers).
fn accepted(
    progress: Arc<AtomicU64>,
    stall: std::time::Duration,
    job: impl Future<Output = Result<(), String>> + Send + 'static,
) -> Response<ResponseBody> {
    let (tx, rx) = mpsc::channel::<std::io::Result<Bytes>>(4);
    tokio::spawn(async move {
        let marker = |p: &AtomicU64| {
            Ok(Bytes::from(markers::marker(
                fatpipe_net::telemetry::unix_now() as u64,
                p.load(Ordering::Relaxed),
            )))
        };
        if tx.send(marker(&progress)).await.is_err() {
            return;
        }
        let mut job = std::pin::pin!(job);
        let mut every = tokio::time::interval(markers::MARKER_EVERY.min(stall));
        every.tick().await;
        let mut watch = StallWatch::new(stall, Instant::now());
        let result = loop {
            tokio::select! {
                r = &mut job => break r,
                _ = every.tick() => {
                    if watch.stalled(Instant::now(), progress.load(Ordering::Relaxed)) {
                        break Err(format!("the remote moved nothing for {} s", stall.as_secs()));
                    }
                    if tx.send(marker(&progress)).await.is_err() {
                        tracing::info!("the client went away: third-party copy cancelled");
                        return;
                    }
                }
            }
        };
        if let Err(e) = &result {
            tracing::warn!("third-party copy failed: {e}");
        }
        let _ = tx.send(marker(&progress)).await;
        let _ = tx.send(Ok(Bytes::from(markers::outcome(&result)))).await;
    });
    let mut r = Response::new(body::channel(rx, None));
    *r.status_mut() = StatusCode::ACCEPTED;
    r.headers_mut()
        .insert("Content-Type", HeaderValue::from_static("text/plain"));
    r
}
