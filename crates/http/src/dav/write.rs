//! What changes the tree in place: `PUT` (into a temporary name, renamed when the whole body
//! arrived: a failed upload leaves nothing, and a replaced file stays whole until then),
//! `DELETE` (a collection with all beneath it) and `MKCOL`.

use super::{check, empty, fs_failed, has_body, header, on_tree, tree, Answer};
use crate::answer::{refuse, Refused};
use crate::auth::{Grant, Op};
use crate::body::{drain_into, FileSink};
use crate::pending::Pending;
use crate::request::{Conn, State};
use fatpipe_net::sandbox::FsError;
use fatpipe_proto::VPath;
use fatpipe_tune::Role;
use hyper::body::Incoming;
use hyper::{Request, StatusCode};
use std::sync::Arc;

/// Whether `path` exists, and is a collection; `None` when it does not exist.
pub(crate) async fn kind(state: &Arc<State>, path: &VPath) -> Result<Option<bool>, FsError> {
    match on_tree(state, path, move |sandbox, p| sandbox.entry_of(p)).await {
        Ok(e) => Ok(Some(e.kind == fatpipe_proto::listing::EntryKind::Dir)),
        Err(FsError::NotFound) => Ok(None),
        Err(e) => Err(e),
    }
}

/// The most a new file may hold here: `--max-file-size`, else unbounded (the file system
/// refuses when full).
fn size_limit(state: &State) -> u64 {
    state.config.max_file_size.unwrap_or(u64::MAX)
}

/// A new upload into `path` (nothing changes before it commits), and whether it replaces a
/// file: refused when a collection is there, the parent is missing, or `grant` does not allow
/// creating (or, over a file, modifying) it.
pub(crate) async fn upload_into(
    state: &Arc<State>,
    grant: &Grant,
    path: &VPath,
) -> Result<(Pending, bool), Refused> {
    let existed = match kind(state, path).await {
        Ok(Some(true)) => {
            return Err(refuse(
                StatusCode::METHOD_NOT_ALLOWED,
                "a collection is there",
            ))
        }
        Ok(k) => k.is_some(),
        Err(e) => return Err(fs_failed(&e, path)),
    };
    check(grant, if existed { Op::Modify } else { Op::Create }, path)?;
    let upload = on_tree(state, path, Pending::start)
        .await
        .map_err(|e| match e {
            FsError::NotFound => {
                refuse(StatusCode::CONFLICT, "the parent collection does not exist")
            }
            e => fs_failed(&e, path),
        })?;
    Ok((upload, existed))
}

/// `PUT`: the body becomes the file's content; 201 when it made the file, 204 when it
/// replaced one.
pub async fn put(
    state: &Arc<State>,
    conn: &Arc<Conn>,
    grant: &Grant,
    path: &VPath,
    req: Request<Incoming>,
) -> Answer {
    if path.is_root() || crate::paths::names_collection(req.uri().path()) {
        return Err(refuse(
            StatusCode::METHOD_NOT_ALLOWED,
            "cannot PUT a collection",
        ));
    }
    if header(req.headers(), "content-range").is_some() {
        return Err(refuse(
            StatusCode::NOT_IMPLEMENTED,
            "partial PUT (Content-Range) is not supported",
        ));
    }
    let limit = size_limit(state);
    let announced =
        header(req.headers(), "content-length").and_then(|l| l.trim().parse::<u64>().ok());
    if announced.is_some_and(|n| n > limit) {
        return Err(refuse(
            StatusCode::PAYLOAD_TOO_LARGE,
            &format!("larger than the {limit} bytes a file may hold here"),
        ));
    }
    let (upload, existed) = upload_into(state, grant, path).await?;
    let file = upload
        .file()
        .map_err(|e| fs_failed(&FsError::Io(e), path))?;
    if let Some(n) = announced {
        let room = fatpipe_net::sandbox::room(&file).unwrap_or(u64::MAX);
        if n > room {
            return Err(refuse(
                StatusCode::INSUFFICIENT_STORAGE,
                &format!("{n} bytes do not fit: {room} left"),
            ));
        }
    }
    let sink = FileSink::new(file);
    let tuned = conn.tunable.as_ref().map(|t| t.start(Role::Receiver));
    let got = drain_into(req.into_body(), &sink, 0, limit, |n| {
        if let Some(t) = &tuned {
            t.moved(n);
        }
    })
    .await;
    drop(tuned);
    let written = sink.finish().await;
    let outcome = match (got, written) {
        (Ok(n), Ok(())) if announced.is_none_or(|a| a == n) => Ok(n),
        (Ok(n), Ok(())) => Err(format!("{n} bytes arrived of {announced:?}")),
        (Err(e), _) => Err(e),
        (Ok(_), Err(e)) => Err(format!("cannot write: {e}")),
    };
    match outcome {
        Ok(_) => {
            let committed = tokio::task::spawn_blocking(move || upload.commit()).await;
            match committed {
                Ok(Ok(())) => Ok(empty(if existed {
                    StatusCode::NO_CONTENT
                } else {
                    StatusCode::CREATED
                })),
                Ok(Err(e)) => Err(fs_failed(&FsError::Io(e), path)),
                Err(e) => Err(refuse(StatusCode::INTERNAL_SERVER_ERROR, &e.to_string())),
            }
        }
        Err(e) => {
            drop(upload);
            let code = if e.contains("No space") {
                StatusCode::INSUFFICIENT_STORAGE
            } else {
                StatusCode::BAD_REQUEST
            };
            Err(refuse(
                code,
                &format!("{path}: upload failed, nothing kept: {e}"),
            ))
        }
    }
}

/// `DELETE`: a file, a link (never what it points at), or a collection with everything in it.
pub async fn delete(state: &Arc<State>, grant: &Grant, path: &VPath) -> Answer {
    if path.is_root() {
        return Err(refuse(StatusCode::FORBIDDEN, "the root cannot be deleted"));
    }
    check(grant, Op::Modify, path)?;
    on_tree(state, path, tree::remove)
        .await
        .map_err(|e| fs_failed(&e, path))?;
    Ok(empty(StatusCode::NO_CONTENT))
}

/// `MKCOL`: a new collection; 405 when something is there, 409 without a parent, 415 with a
/// body (none is defined).
pub async fn mkcol(
    state: &Arc<State>,
    grant: &Grant,
    path: &VPath,
    req: Request<Incoming>,
) -> Answer {
    if has_body(req.headers()) {
        return Err(refuse(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "MKCOL takes no body",
        ));
    }
    check(grant, Op::Create, path)?;
    match kind(state, path).await {
        Ok(Some(_)) => {
            return Err(refuse(
                StatusCode::METHOD_NOT_ALLOWED,
                "something is already there",
            ))
        }
        Ok(None) => {}
        Err(FsError::NotFound) => {}
        Err(e) => return Err(fs_failed(&e, path)),
    }
    match on_tree(state, path, move |sandbox, p| sandbox.make_dir(p)).await {
        Ok(()) => Ok(empty(StatusCode::CREATED)),
        Err(FsError::NotFound) => Err(refuse(
            StatusCode::CONFLICT,
            "the parent collection does not exist",
        )),
        Err(FsError::Io(e)) if e.kind() == std::io::ErrorKind::NotFound => Err(refuse(
            StatusCode::CONFLICT,
            "the parent collection does not exist",
        )),
        Err(FsError::Io(e)) if e.kind() == std::io::ErrorKind::AlreadyExists => Err(refuse(
            StatusCode::METHOD_NOT_ALLOWED,
            "something is already there",
        )),
        Err(e) => Err(fs_failed(&e, path)),
    }
}
