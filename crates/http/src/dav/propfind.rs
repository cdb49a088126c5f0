//! `PROPFIND` at depth 0 or 1: each resource's type, size, modification time and entity tag,
//! as a `207 Multi-Status` (the request's body, which names properties, is read and the same
//! live properties are always answered, as clients that list and stat expect).

use super::{check, fs_failed, header, on_tree, small_body, Answer};
use crate::answer::refuse;
use crate::auth::{Grant, Op};
use crate::body::{self, full, ResponseBody};
use crate::request::State;
use bytes::Bytes;
use fatpipe_proto::listing::Entry;
use fatpipe_proto::VPath;
use hyper::body::Incoming;
use hyper::header::HeaderValue;
use hyper::{Request, Response, StatusCode};
use std::fs::Metadata;
use std::sync::Arc;
use tokio::sync::mpsc;

/// Largest PROPFIND body read.
const MAX_BODY: usize = 64 << 10;

/// `s` with XML's special characters escaped.
pub fn xml_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            c => out.push(c),
        }
    }
    out
}

/// One `<D:response>` for `path` with metadata `m`.
pub fn response_xml(path: &VPath, m: &Metadata) -> String {
    let dir = m.is_dir();
    let href = crate::paths::href(path, dir);
    let name = xml_escape(path.file_name().unwrap_or(""));
    let kind = if dir { "<D:collection/>" } else { "" };
    let created = m
        .created()
        .or_else(|_| m.modified())
        .map(time_rfc3339)
        .unwrap_or_default();
    let mut props = format!(
        "<D:displayname>{name}</D:displayname><D:resourcetype>{kind}</D:resourcetype>\
         <D:getlastmodified>{}</D:getlastmodified><D:creationdate>{created}</D:creationdate>\
         <D:getetag>{}</D:getetag>",
        super::last_modified(m),
        xml_escape(&super::etag(m)),
    );
    if !dir {
        props.push_str(&format!(
            "<D:getcontentlength>{}</D:getcontentlength>\
             <D:getcontenttype>application/octet-stream</D:getcontenttype>",
            m.len()
        ));
    }
    format!(
        "<D:response><D:href>{}</D:href><D:propstat><D:prop>{props}</D:prop>\
         <D:status>HTTP/1.1 200 OK</D:status></D:propstat></D:response>\n",
        xml_escape(&href)
    )
}

/// `t` as RFC 3339 in UTC (WebDAV's `creationdate`).
fn time_rfc3339(t: std::time::SystemTime) -> String {
    let secs = t
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64);
    time::OffsetDateTime::from_unix_timestamp(secs)
        .ok()
        .and_then(|d| {
            d.format(&time::format_description::well_known::Rfc3339)
                .ok()
        })
        .unwrap_or_default()
}

/// `PROPFIND` of `path`.
pub async fn propfind(
    state: &Arc<State>,
    grant: &Grant,
    path: &VPath,
    req: Request<Incoming>,
) -> Answer {
    let deep = match header(req.headers(), "depth").map(str::trim) {
        Some("0") => false,
        Some("1") => true,
        _ => {
            return Err(refuse(
                StatusCode::FORBIDDEN,
                "PROPFIND takes Depth 0 or 1 (propfind-finite-depth)",
            ))
        }
    };
    check(grant, Op::Stat, path)?;
    let body = small_body(req.into_body(), MAX_BODY).await?;
    if !body.is_empty() && !looks_like_xml(&body) {
        return Err(refuse(
            StatusCode::BAD_REQUEST,
            "the PROPFIND body is not XML",
        ));
    }
    // The listing is read first: a collection that cannot be listed is an error status, not
    // a body cut short.
    let (m, listed) = on_tree(state, path, move |sandbox, p| {
        let m = sandbox.metadata(p)?;
        let listed = match deep && m.is_dir() {
            true => Some(sandbox.list_dir(p)?),
            false => None,
        };
        Ok((m, listed))
    })
    .await
    .map_err(|e| fs_failed(&e, path))?;
    let head = format!("{XML_HEAD}{}", response_xml(path, &m));
    let body = match listed {
        Some(names) => members(state, path, head, names),
        None => full(head + XML_TAIL),
    };
    let mut r = Response::new(body);
    *r.status_mut() = StatusCode::MULTI_STATUS;
    r.headers_mut().insert(
        "Content-Type",
        HeaderValue::from_static("application/xml; charset=utf-8"),
    );
    Ok(r)
}

/// A 207's opening, and its end.
const XML_HEAD: &str =
    "<?xml version=\"1.0\" encoding=\"utf-8\"?>\n<D:multistatus xmlns:D=\"DAV:\">\n";
const XML_TAIL: &str = "</D:multistatus>\n";
/// XML handed to the connection at a time: a collection of a million members answers in
/// pieces of this size, never as one string of hundreds of megabytes.
const PIECE: usize = 64 << 10;

/// The body of a depth-1 answer for the collection `path`: `head` (its own response), then
/// the response of each of its `members`, written as their metadata is read (a link that leads
/// nowhere is left out).
fn members(state: &Arc<State>, path: &VPath, head: String, members: Vec<Entry>) -> ResponseBody {
    let (tx, rx) = mpsc::channel(4);
    let (sandbox, path) = (state.sandbox.clone(), path.clone());
    tokio::task::spawn_blocking(move || {
        let mut xml = head;
        for e in members {
            let c = path.join(&e.name);
            if let Ok(cm) = sandbox.metadata(&c) {
                xml.push_str(&response_xml(&c, &cm));
            }
            if xml.len() >= PIECE {
                let piece = Bytes::from(std::mem::take(&mut xml));
                if tx.blocking_send(Ok(piece)).is_err() {
                    return;
                }
            }
        }
        xml.push_str(XML_TAIL);
        let _ = tx.blocking_send(Ok(Bytes::from(xml)));
    });
    body::channel(rx, None)
}

/// Whether a body could be an XML document (its first non-blank character opens a tag).
fn looks_like_xml(b: &[u8]) -> bool {
    let text = String::from_utf8_lossy(b);
    let t = text.trim_start_matches('\u{feff}').trim_start();
    t.starts_with('<') && t.trim_end().ends_with('>')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_and_responses() {
        assert_eq!(xml_escape("a<b>&\"'"), "a&lt;b&gt;&amp;&quot;&apos;");
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("f&x"), b"12345").unwrap();
        let m = std::fs::metadata(dir.path().join("f&x")).unwrap();
        let x = response_xml(&VPath::root().join("/d/f&x"), &m);
        assert!(x.contains("<D:href>/d/f%26x</D:href>"), "{x}");
        assert!(x.contains("<D:getcontentlength>5</D:getcontentlength>"));
        assert!(x.contains("<D:resourcetype></D:resourcetype>"));
        let d = std::fs::metadata(dir.path()).unwrap();
        let x = response_xml(&VPath::root().join("/d"), &d);
        assert!(x.contains("<D:href>/d/</D:href>") && x.contains("<D:collection/>"));
        assert!(looks_like_xml(b" <?xml version=\"1.0\"?><propfind/>"));
        assert!(!looks_like_xml(b"</foo"));
    }
}
