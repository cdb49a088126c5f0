//! `GET` and `HEAD`: a file whole or in ranges (several as `multipart/byteranges`), its
//! `Digest` when asked with `Want-Digest`, or a collection's listing as a small HTML page.

use super::{check, etag, fs, fs_failed, header, last_modified, on_tree, Answer};
use crate::answer::refuse;
use crate::auth::{Grant, Op};
use crate::body::{self, full, Piece};
use crate::range::{self, Wanted};
use crate::request::{Conn, State};
use bytes::Bytes;
use fatpipe_proto::listing::EntryKind;
use fatpipe_proto::VPath;
use fatpipe_tune::Role;
use hyper::header::{HeaderMap, HeaderValue};
use hyper::{Response, StatusCode};
use std::sync::Arc;

/// `GET` (`body`) or `HEAD` of `path`.
pub async fn get(
    state: &Arc<State>,
    conn: &Arc<Conn>,
    grant: &Grant,
    path: &VPath,
    headers: &HeaderMap,
    with_body: bool,
) -> Answer {
    check(grant, if with_body { Op::Read } else { Op::Stat }, path)?;
    let meta = on_tree(state, path, move |sandbox, p| sandbox.metadata(p))
        .await
        .map_err(|e| fs_failed(&e, path))?;
    if meta.is_dir() {
        return listing(state, path, with_body).await;
    }
    let (file, meta) = on_tree(state, path, move |sandbox, p| sandbox.open_read(p))
        .await
        .map_err(|e| fs_failed(&e, path))?;
    let size = meta.len();
    let mut digest = None;
    if let Some((alg, name)) = header(headers, "want-digest").and_then(crate::digest::chosen) {
        let f = file
            .try_clone()
            .map_err(|e| refuse(StatusCode::INTERNAL_SERVER_ERROR, &e.to_string()))?;
        let hex = fs(move || Ok(fatpipe_net::checksum::checksum(&f, alg, 0, None)?))
            .await
            .map_err(|e| fs_failed(&e, path))?;
        digest = Some(crate::digest::header(name, &hex));
    }
    let wanted = range::wanted(header(headers, "range"), size);
    let (code, pieces, content_type) = match wanted {
        Wanted::Unsatisfiable => {
            return Err(refuse(
                StatusCode::RANGE_NOT_SATISFIABLE,
                "no requested range is in the file",
            )
            .with("Content-Range", &format!("bytes */{size}")));
        }
        Wanted::Whole => (StatusCode::OK, vec![Piece::File(0..size)], None),
        Wanted::Parts(parts) if parts.len() == 1 => (
            StatusCode::PARTIAL_CONTENT,
            vec![Piece::File(parts[0].clone())],
            None,
        ),
        Wanted::Parts(parts) => {
            let (pieces, boundary) = multipart(&parts, size);
            let ct = format!("multipart/byteranges; boundary={boundary}");
            (StatusCode::PARTIAL_CONTENT, pieces, Some(ct))
        }
    };
    let length = body::length(&pieces);
    let single = match (&pieces[..], code) {
        ([Piece::File(r)], StatusCode::PARTIAL_CONTENT) => Some(range::content_range(r, size)),
        _ => None,
    };
    let body = if with_body && length > 0 {
        let tuned = conn.tunable.as_ref().map(|t| t.start(Role::Sender));
        body::from_file(file, pieces, move |n| {
            if let Some(t) = &tuned {
                t.moved(n);
            }
        })
    } else {
        full("")
    };
    let mut r = Response::new(body);
    *r.status_mut() = code;
    let h = r.headers_mut();
    let mut set = |name: &'static str, v: &str| {
        if let Ok(v) = HeaderValue::from_str(v) {
            h.insert(name, v);
        }
    };
    set("Content-Length", &length.to_string());
    set(
        "Content-Type",
        content_type
            .as_deref()
            .unwrap_or("application/octet-stream"),
    );
    set("Accept-Ranges", "bytes");
    set("ETag", &etag(&meta));
    set("Last-Modified", &last_modified(&meta));
    if let Some(cr) = &single {
        set("Content-Range", cr);
    }
    if let Some(d) = &digest {
        set("Digest", d);
    }
    Ok(r)
}

/// The pieces of a `multipart/byteranges` body for `parts`, and its boundary.
fn multipart(parts: &[std::ops::Range<u64>], size: u64) -> (Vec<Piece>, String) {
    let mut nonce = [0u8; 8];
    getrandom_fill(&mut nonce);
    let boundary = format!("fatpipe-{}", hex::encode(nonce));
    let mut pieces = Vec::with_capacity(parts.len() * 2 + 1);
    for r in parts {
        let head = format!(
            "\r\n--{boundary}\r\nContent-Type: application/octet-stream\r\nContent-Range: {}\r\n\r\n",
            range::content_range(r, size)
        );
        pieces.push(Piece::Text(Bytes::from(head)));
        pieces.push(Piece::File(r.clone()));
    }
    pieces.push(Piece::Text(Bytes::from(format!("\r\n--{boundary}--\r\n"))));
    (pieces, boundary)
}

/// Random bytes for a boundary (uniqueness, not secrecy: the time does when the system has
/// no randomness to give).
fn getrandom_fill(buf: &mut [u8]) {
    if getrandom::getrandom(buf).is_err() {
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        for (i, b) in buf.iter_mut().enumerate() {
            *b = (t >> (8 * i)) as u8;
        }
    }
}

/// A collection's entries as a small HTML page (browsers, `curl` by hand).
async fn listing(state: &Arc<State>, path: &VPath, with_body: bool) -> Answer {
    let entries = on_tree(state, path, move |sandbox, p| sandbox.list_dir(p))
        .await
        .map_err(|e| fs_failed(&e, path))?;
    let mut page = format!(
        "<!DOCTYPE html>\n<html><head><title>{0}</title></head><body><h1>{0}</h1><ul>\n",
        crate::dav::propfind::xml_escape(&path.to_string())
    );
    for e in entries {
        let dir = e.kind == EntryKind::Dir;
        let href = crate::paths::href(&path.join(&e.name), dir);
        page.push_str(&format!(
            "<li><a href=\"{href}\">{}{}</a></li>\n",
            crate::dav::propfind::xml_escape(&e.name),
            if dir { "/" } else { "" }
        ));
    }
    page.push_str("</ul></body></html>\n");
    let len = page.len();
    let mut r = Response::new(if with_body { full(page) } else { full("") });
    let h = r.headers_mut();
    h.insert(
        "Content-Type",
        HeaderValue::from_static("text/html; charset=utf-8"),
    );
    if let Ok(v) = HeaderValue::from_str(&len.to_string()) {
        h.insert("Content-Length", v);
    }
    Ok(r)
}
