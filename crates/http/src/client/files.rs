//! The file operations beside copies, for `fatpipe ls`, `mkdir`, `rm` and `mv` on `https://`
//! URLs: PROPFIND (Depth 1), MKCOL, DELETE and MOVE.

use super::tree::member_name;
use super::{Client, Endpoint};
use crate::body::full;
use crate::connect::{self, refusal};
use crate::multistatus::{self, Resource};
use fatpipe_ftp::client::filter::{glob_names, is_glob};
use http_body_util::BodyExt;
use hyper::header::{HeaderName, HeaderValue, CONTENT_TYPE};
use hyper::{Method, StatusCode};

/// The properties a listing asks for.
const PROPFIND: &str = "<?xml version=\"1.0\" encoding=\"utf-8\"?>\n<D:propfind xmlns:D=\"DAV:\">\
    <D:prop><D:resourcetype/><D:getcontentlength/><D:getlastmodified/></D:prop></D:propfind>";
/// Largest listing read, bytes (some 250,000 entries).
const MAX_LISTING: usize = 64 << 20;

/// What a PROPFIND with Depth 1 found.
#[derive(Debug, Clone, Default)]
pub struct Listing {
    /// The resource asked about, told apart by its path (servers list it, first as a rule).
    pub itself: Option<Resource>,
    /// The rest: what a collection holds.
    pub members: Vec<Resource>,
}

/// `e`'s path split at its last slash: the path above it and the last component, decoded.
fn split_last(e: &Endpoint) -> (&str, String) {
    let path = e.url.path();
    let (parent, last) = path.rsplit_once('/').unwrap_or(("", path));
    let last = percent_encoding::percent_decode_str(last).decode_utf8_lossy();
    (parent, last.into_owned())
}

/// Whether the last component of `e`'s path is a glob (`*`, `?`, `[`), which
/// [`Client::matches`] expands.
pub fn names_a_glob(e: &Endpoint) -> bool {
    is_glob(&split_last(e).1)
}

impl Client {
    /// `e` and, for a collection, what it holds (PROPFIND, Depth 1).
    pub async fn list(&self, e: &Endpoint) -> Result<Listing, String> {
        let base = percent_encoding::percent_decode_str(e.url.path()).decode_utf8_lossy();
        let mut listing = Listing::default();
        for r in self.propfind(e, "1").await? {
            match r.path.trim_end_matches('/') == base.trim_end_matches('/') {
                true if listing.itself.is_none() => listing.itself = Some(r),
                _ => listing.members.push(r),
            }
        }
        Ok(listing)
    }

    /// What `e` names when the last component of its path is a glob (`*`, `?`, `[`): the
    /// members of its collection that match, each with what the listing said of it (none is
    /// an error naming the pattern); `None` when it is no glob.
    pub async fn matches(&self, e: &Endpoint) -> Result<Option<Vec<(Endpoint, Resource)>>, String> {
        let (parent, pattern) = split_last(e);
        if !is_glob(&pattern) {
            return Ok(None);
        }
        let mut dir = e.clone();
        dir.url.set_path(&format!("{parent}/"));
        let listed = self.list(&dir).await?;
        let named: Vec<(String, &Resource)> = listed
            .members
            .iter()
            .filter_map(|r| member_name(&dir, r).map(|n| (n, r)))
            .collect();
        let names = named.iter().map(|(n, _)| n.as_str());
        let hits = glob_names(&pattern, names).map_err(|e| format!("{e:#}"))?;
        if hits.is_empty() {
            return Err(format!("nothing matches {pattern} in {}", dir.url));
        }
        let found = named.iter().filter(|(n, _)| hits.contains(&n.as_str()));
        Ok(Some(
            found
                .map(|(n, r)| (dir.member(n, r.dir), (*r).clone()))
                .collect(),
        ))
    }

    /// `e` alone (PROPFIND, Depth 0).
    pub async fn stat(&self, e: &Endpoint) -> Result<Resource, String> {
        let all = self.propfind(e, "0").await?;
        all.into_iter()
            .next()
            .ok_or_else(|| format!("{}: the server described nothing", e.url))
    }

    async fn propfind(&self, e: &Endpoint, depth: &'static str) -> Result<Vec<Resource>, String> {
        let mut headers = e.headers();
        headers.push((
            HeaderName::from_static("depth"),
            HeaderValue::from_static(depth),
        ));
        headers.push((CONTENT_TYPE, HeaderValue::from_static("application/xml")));
        let (resp, _) = self.ask(e, b"PROPFIND", &headers, PROPFIND).await?;
        if resp.status() != StatusCode::MULTI_STATUS {
            return Err(refusal("the server", resp).await);
        }
        let body = http_body_util::Limited::new(resp.into_body(), MAX_LISTING)
            .collect()
            .await
            .map_err(|err| format!("PROPFIND {}: {err}", e.url))?
            .to_bytes();
        multistatus::parse(&body)
    }

    /// Makes the collection `e` (MKCOL); `exists_ok`: one that is there already is no error.
    pub async fn make_dir(&self, e: &Endpoint, exists_ok: bool) -> Result<(), String> {
        let (resp, _) = self.ask(e, b"MKCOL", &e.headers(), "").await?;
        match resp.status() {
            StatusCode::CREATED => Ok(()),
            StatusCode::METHOD_NOT_ALLOWED if exists_ok => Ok(()),
            _ => Err(refusal("the server", resp).await),
        }
    }

    /// Removes `e`, a file or a whole collection (DELETE).
    pub async fn remove(&self, e: &Endpoint) -> Result<(), String> {
        let (resp, _) = self.ask(e, b"DELETE", &e.headers(), "").await?;
        match resp.status().is_success() {
            true => Ok(()),
            false => Err(refusal("the server", resp).await),
        }
    }

    /// Renames `from` to `to` on the same server (MOVE); an existing `to` is never replaced.
    pub async fn rename(&self, from: &Endpoint, to: &Endpoint) -> Result<(), String> {
        let mut headers = from.headers();
        let destination = HeaderValue::from_str(&to.https_url()).map_err(|e| e.to_string())?;
        headers.push((HeaderName::from_static("destination"), destination));
        headers.push((
            HeaderName::from_static("overwrite"),
            HeaderValue::from_static("F"),
        ));
        let (resp, _) = self.ask(from, b"MOVE", &headers, "").await?;
        match resp.status().is_success() {
            true => Ok(()),
            false => Err(refusal("the server", resp).await),
        }
    }

    /// Sends one request with `method` to `e` on a new connection.
    async fn ask(
        &self,
        e: &Endpoint,
        method: &[u8],
        headers: &[(HeaderName, HeaderValue)],
        body: &'static str,
    ) -> Result<(hyper::Response<hyper::body::Incoming>, connect::Remote), String> {
        let method = Method::from_bytes(method).map_err(|e| e.to_string())?;
        let (mut send, _, remote) = self.open(e).await?;
        let resp = connect::exchange(&mut send, method, &remote, headers, full(body)).await?;
        Ok((resp, remote))
    }
}
