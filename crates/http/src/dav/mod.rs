//! The WebDAV methods clients use (RFC 4918's class 1 without properties one can set): each
//! request is checked against the [`Grant`] before it touches the tree, and every file-system
//! step goes through the [`Sandbox`](fatpipe_net::sandbox::Sandbox) on a blocking thread.

mod copymove;
mod propfind;
mod read;
mod tree;
mod write;

pub use copymove::{target, Target};
pub(crate) use write::upload_into;

use crate::answer::{refuse, Refused};
use crate::auth::{Grant, Op};
use crate::body::{full, ResponseBody};
use crate::request::{Conn, State};
use fatpipe_net::sandbox::{FsError, Sandbox};
use fatpipe_proto::VPath;
use hyper::body::Incoming;
use hyper::header::{HeaderMap, HeaderValue};
use hyper::{Request, Response, StatusCode};
use std::fs::Metadata;
use std::os::unix::fs::MetadataExt;
use std::sync::Arc;

/// The methods answered, for `Allow`.
const ALLOW: &str = "OPTIONS, GET, HEAD, PUT, DELETE, MKCOL, PROPFIND, COPY, MOVE";

/// `OPTIONS`: WebDAV class 1, the methods, ranges.
pub fn options() -> Response<ResponseBody> {
    let mut r = Response::new(full(""));
    let h = r.headers_mut();
    h.insert("DAV", HeaderValue::from_static("1"));
    h.insert("Allow", HeaderValue::from_static(ALLOW));
    h.insert("Accept-Ranges", HeaderValue::from_static("bytes"));
    h.insert("MS-Author-Via", HeaderValue::from_static("DAV"));
    r
}

/// Answers an authenticated request.
pub async fn answer(
    state: &Arc<State>,
    conn: &Arc<Conn>,
    grant: &Grant,
    req: Request<Incoming>,
) -> Response<ResponseBody> {
    let path = match crate::paths::vpath(req.uri().path()) {
        Ok(p) => p,
        Err(e) => return refuse(StatusCode::BAD_REQUEST, &e.to_string()).into_response(),
    };
    let method = req.method().as_str().to_string();
    let r = match method.as_str() {
        "GET" => read::get(state, conn, grant, &path, req.headers(), true).await,
        "HEAD" => read::get(state, conn, grant, &path, req.headers(), false).await,
        "PUT" => write::put(state, conn, grant, &path, req).await,
        "DELETE" => write::delete(state, grant, &path).await,
        "MKCOL" => write::mkcol(state, grant, &path, req).await,
        "PROPFIND" => propfind::propfind(state, grant, &path, req).await,
        "MOVE" => copymove::copy_or_move(state, grant, &path, req, true).await,
        "COPY" => copymove::copy_or_move(state, grant, &path, req, false).await,
        _ => Err(not_allowed()),
    };
    r.unwrap_or_else(Refused::into_response)
}

/// A request's outcome: its answer, or the error answer that stopped it.
pub(crate) type Answer = Result<Response<ResponseBody>, Refused>;

fn not_allowed() -> Refused {
    refuse(StatusCode::METHOD_NOT_ALLOWED, "method not allowed here").with("Allow", ALLOW)
}

/// 403 unless `grant` allows `op` on `path`.
pub(crate) fn check(grant: &Grant, op: Op, path: &VPath) -> Result<(), Refused> {
    if grant.allows(op, path) {
        return Ok(());
    }
    let what = match op {
        Op::Read => "read",
        Op::Stat => "look at",
        Op::Create => "create",
        Op::Modify => "modify",
    };
    Err(refuse(
        StatusCode::FORBIDDEN,
        &format!("{} may not {what} {path}", grant.who()),
    ))
}

/// Runs a file-system step on a blocking thread.
pub(crate) async fn fs<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, FsError> + Send + 'static,
) -> Result<T, FsError> {
    match tokio::task::spawn_blocking(f).await {
        Ok(r) => r,
        Err(e) => Err(FsError::Io(std::io::Error::other(e.to_string()))),
    }
}

/// Runs `f` on the tree and `path` on a blocking thread.
pub(crate) async fn on_tree<T: Send + 'static>(
    state: &State,
    path: &VPath,
    f: impl FnOnce(&Sandbox, &VPath) -> Result<T, FsError> + Send + 'static,
) -> Result<T, FsError> {
    let (sandbox, p) = (state.sandbox.clone(), path.clone());
    fs(move || f(&sandbox, &p)).await
}

/// The answer to a failed file-system step on `path`.
pub(crate) fn fs_failed(e: &FsError, path: &VPath) -> Refused {
    refuse(crate::answer::error_status(e), &format!("{path}: {e}"))
}

/// A header as text, if present and readable.
pub(crate) fn header<'h>(h: &'h HeaderMap, name: &str) -> Option<&'h str> {
    h.get(name).and_then(|v| v.to_str().ok())
}

/// An empty answer with `code`.
pub(crate) fn empty(code: StatusCode) -> Response<ResponseBody> {
    let mut r = Response::new(full(""));
    *r.status_mut() = code;
    r
}

/// Whether the request carries a body (a length above zero, or chunks).
pub(crate) fn has_body(h: &HeaderMap) -> bool {
    header(h, "content-length").is_some_and(|l| l.trim() != "0")
        || header(h, "transfer-encoding").is_some()
}

/// Reads and drops a request's body (at most `limit` bytes; more is an error).
pub(crate) async fn small_body(body: Incoming, limit: usize) -> Result<bytes::Bytes, Refused> {
    use http_body_util::BodyExt;
    let limited = http_body_util::Limited::new(body, limit);
    match limited.collect().await {
        Ok(c) => Ok(c.to_bytes()),
        Err(e) => Err(refuse(
            StatusCode::PAYLOAD_TOO_LARGE,
            &format!("request body: {e}"),
        )),
    }
}

/// The entity tag of a file's current content: inode, size and modification time.
fn etag(m: &Metadata) -> String {
    format!("\"{:x}-{:x}-{:x}\"", m.ino(), m.len(), m.mtime())
}

/// `Last-Modified` of `m`.
fn last_modified(m: &Metadata) -> String {
    m.modified()
        .map(httpdate::fmt_http_date)
        .unwrap_or_default()
}
