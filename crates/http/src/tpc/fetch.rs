//! The two directions of a third-party copy, once accepted: a pull (one GET, or ranged GETs
//! over several connections into one file) and a push (one PUT), each optionally verified
//! against the remote's adler32 (`Want-Digest`).

use crate::body::{full, FileSink};
use crate::connect::{self as client, length, refusal, Remote};
use crate::pending::Pending;
use crate::server::State;
use fatpipe_proto::gridftp::ChecksumAlg;
use hyper::header::{HeaderName, HeaderValue};
use hyper::{Method, StatusCode};
use std::fs::File;
use std::ops::Range;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;

/// Smallest part one connection of a pull takes: below it, fewer connections.
pub const MIN_PART: u64 = 8 << 20;

/// The parts `size` bytes are fetched in over at most `streams` connections.
pub fn parts(size: u64, streams: u32) -> Vec<Range<u64>> {
    let n = (size / MIN_PART).clamp(1, u64::from(streams.max(1)));
    let each = size.div_ceil(n);
    (0..n)
        .map(|i| (i * each).min(size)..((i + 1) * each).min(size))
        .filter(|r| !r.is_empty())
        .collect()
}

/// What a pull needs.
pub struct Pull {
    pub state: Arc<State>,
    pub remote: Remote,
    pub headers: Vec<(HeaderName, HeaderValue)>,
    /// The connections the client asked for; `None`: the server's choice.
    pub streams: Option<u32>,
    pub verify: bool,
}

/// A connection to the source and its tuning.
type Connection = (
    hyper::client::conn::http1::SendRequest<crate::body::ResponseBody>,
    Option<crate::tuned::Tunable>,
);

impl Pull {
    /// Fetches the source into `upload` and commits it.
    pub async fn run(self, upload: Pending, progress: &Arc<AtomicU64>) -> Result<(), String> {
        let file = upload.file().map_err(|e| e.to_string())?;
        let check = file.try_clone().map_err(|e| e.to_string())?;
        let sink = FileSink::new(file);
        let mut first = self.connect().await?;
        let split = self.split(&mut first).await?;
        let fetched = if split.len() > 1 {
            let mut first = Some(first);
            let all = split
                .into_iter()
                .map(|r| self.fetch(first.take(), Some(r), &sink, progress));
            futures_util::future::try_join_all(all).await.map(|_| ())
        } else {
            self.fetch(Some(first), None, &sink, progress)
                .await
                .map(|_| ())
        };
        let written = sink
            .finish()
            .await
            .map_err(|e| format!("cannot write: {e}"));
        fetched?;
        written?;
        if self.verify {
            verify(&self.state, &self.remote, &self.headers, check).await?;
        }
        tokio::task::spawn_blocking(move || upload.commit())
            .await
            .map_err(|e| e.to_string())?
            .map_err(|e| format!("cannot keep the file: {e}"))
    }

    /// The parts to fetch at once: as many as the client asked, or as a `-p auto` cold start
    /// would open at this connection's round trip with this host's buffer cap (one as root:
    /// nothing caps its window); none to split (one GET) when one connection it is, or the
    /// source serves no ranges.
    async fn split(&self, first: &mut Connection) -> Result<Vec<Range<u64>>, String> {
        let cap = self.state.config.tune.control.receive_cap();
        // One connection asked for, or left to a cold start that opens one (no cap): no HEAD.
        match (self.streams, cap) {
            (Some(1), _) | (None, None) => return Ok(Vec::new()),
            _ => {}
        }
        let Some(size) = self.size(&mut first.0).await? else {
            return Ok(Vec::new());
        };
        let streams =
            match (self.streams, first.1.as_ref().and_then(|t| t.round_trip())) {
                (Some(n), _) => n,
                (None, Some(rtt)) => {
                    fatpipe_tune::streams::cold::cold_start(rtt, cap, size, super::MAX_STREAMS)
                        .map_or(1, |c| {
                            tracing::info!("pull over {} connections {}", c.streams, c.why);
                            c.streams
                        })
                }
                (None, None) => 1,
            };
        let split = parts(size, streams);
        if split.len() > 1 {
            tracing::info!("pulling {size} bytes in {} parts at once", split.len());
        }
        Ok(split)
    }

    /// The source's size, when it serves ranges (a HEAD on `send`).
    async fn size(
        &self,
        send: &mut hyper::client::conn::http1::SendRequest<crate::body::ResponseBody>,
    ) -> Result<Option<u64>, String> {
        let req = client::request(Method::HEAD, &self.remote, &self.headers, full(""))?;
        let resp = send
            .send_request(req)
            .await
            .map_err(|e| format!("HEAD {}: {e}", self.remote.url))?;
        if resp.status() != StatusCode::OK {
            return Err(refusal("the source", resp).await);
        }
        let ranges = resp
            .headers()
            .get("accept-ranges")
            .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"bytes"));
        Ok(length(&resp).filter(|_| ranges))
    }

    async fn connect(&self) -> Result<Connection, String> {
        client::connect(
            &self.remote,
            &self.state.client_tls,
            &self.state.config.tune,
        )
        .await
    }

    /// One GET (of `range`, or the whole file) into `sink`, on `open` or a new connection.
    async fn fetch(
        &self,
        open: Option<Connection>,
        range: Option<Range<u64>>,
        sink: &FileSink,
        progress: &AtomicU64,
    ) -> Result<u64, String> {
        let (mut send, tunable) = match open {
            Some(c) => c,
            None => self.connect().await?,
        };
        let into = client::Landing {
            sink,
            limit: self.state.config.max_file_size.unwrap_or(u64::MAX),
            progress,
        };
        client::get_into(
            &mut send,
            &self.remote,
            &self.headers,
            range,
            tunable,
            into,
            "the source",
        )
        .await
    }
}

/// What a push needs.
pub struct Push {
    pub state: Arc<State>,
    pub remote: Remote,
    pub headers: Vec<(HeaderName, HeaderValue)>,
    pub verify: bool,
}

impl Push {
    /// Sends `size` bytes of `file` to the destination with a PUT.
    pub async fn run(self, file: File, size: u64, progress: &Arc<AtomicU64>) -> Result<(), String> {
        let check = file.try_clone().map_err(|e| e.to_string())?;
        let (mut send, tunable) = client::connect(
            &self.remote,
            &self.state.client_tls,
            &self.state.config.tune,
        )
        .await?;
        let resp = client::put_file(
            &mut send,
            &self.remote,
            &self.headers,
            file,
            size,
            tunable,
            progress,
        )
        .await?;
        if !resp.status().is_success() {
            return Err(refusal("the destination", resp).await);
        }
        if self.verify {
            verify(&self.state, &self.remote, &self.headers, check).await?;
        }
        Ok(())
    }
}

/// Compares `local`'s adler32 with the one the remote gives for its copy.
async fn verify(
    state: &State,
    remote: &Remote,
    headers: &[(HeaderName, HeaderValue)],
    local: File,
) -> Result<(), String> {
    let mine = tokio::task::spawn_blocking(move || {
        fatpipe_net::checksum::checksum(&local, ChecksumAlg::Adler32, 0, None)
    });
    let (mut send, _) = client::connect(remote, &state.client_tls, &state.config.tune).await?;
    let mut headers = headers.to_vec();
    headers.push((
        HeaderName::from_static("want-digest"),
        HeaderValue::from_static("adler32"),
    ));
    let req = client::request(Method::HEAD, remote, &headers, full(""))?;
    let resp = send
        .send_request(req)
        .await
        .map_err(|e| format!("HEAD {}: {e}", remote.url))?;
    if resp.status() != StatusCode::OK {
        return Err(refusal("checksum request: the remote", resp).await);
    }
    let theirs = resp
        .headers()
        .get("digest")
        .and_then(|v| v.to_str().ok())
        .and_then(|d| crate::digest::value_in(d, ChecksumAlg::Adler32))
        .ok_or("the remote gave no adler32 to verify against")?;
    let mine = mine
        .await
        .map_err(|e| e.to_string())?
        .map_err(|e| format!("cannot checksum the local file: {e}"))?;
    if mine != theirs {
        return Err(format!(
            "checksum mismatch: adler32 {mine} here, {theirs} there"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parts_cover_the_file_once() {
        assert_eq!(parts(0, 4), Vec::<Range<u64>>::new());
        assert_eq!(parts(100, 4), vec![0..100]);
        let p = parts(4 * MIN_PART + 3, 4);
        assert_eq!(p.len(), 4);
        assert_eq!(p[0].start, 0);
        assert_eq!(p[3].end, 4 * MIN_PART + 3);
        assert!(p.windows(2).all(|w| w[0].end == w[1].start));
        assert_eq!(parts(3 * MIN_PART, 16).len(), 3);
    }
}
