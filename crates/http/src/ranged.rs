//! One file fetched with GET into one sink: whole over one connection, or in ranged parts
//! over several at once. A third-party pull and `fatpipe cp https://… FILE` both fetch so.

use crate::body::{full, FileSink};
use crate::connect::{self, length, refusal, Remote};
use fatpipe_net::TunerConfig;
use hyper::client::conn::http1::SendRequest;
use hyper::header::{HeaderName, HeaderValue};
use hyper::{Method, StatusCode};
use std::ops::Range;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;

/// Smallest part one connection takes: below it, fewer connections.
pub const MIN_PART: u64 = 8 << 20;
/// Most connections one fetch opens.
pub const MAX_STREAMS: u32 = 16;

/// The parts `size` bytes are fetched in over at most `streams` connections.
pub fn parts(size: u64, streams: u32) -> Vec<Range<u64>> {
    let n = (size / MIN_PART).clamp(1, u64::from(streams.max(1)));
    let each = size.div_ceil(n);
    (0..n)
        .map(|i| (i * each).min(size)..((i + 1) * each).min(size))
        .filter(|r| !r.is_empty())
        .collect()
}

/// A connection to the remote and its tuning.
type Connection = (
    SendRequest<crate::body::ResponseBody>,
    Option<crate::tuned::Tunable>,
);

/// What to fetch, from where, and how.
pub struct Fetch<'a> {
    /// The file.
    pub remote: &'a Remote,
    /// Sent with every request (credentials).
    pub headers: &'a [(HeaderName, HeaderValue)],
    /// Whom the client trusts.
    pub tls: &'a Arc<rustls::ClientConfig>,
    /// How each connection is tuned (its receive cap decides a cold start's count).
    pub tune: &'a TunerConfig,
    /// The connections asked for; `None`: as a `-p auto` cold start would open.
    pub streams: Option<u32>,
    /// Most bytes taken.
    pub limit: u64,
    /// The remote in errors: "the source", "the server".
    pub who: &'static str,
}

impl Fetch<'_> {
    /// Fetches the file into `sink` (in parts only where `sink` seeks); returns the bytes.
    pub async fn run(&self, sink: &FileSink, progress: &AtomicU64) -> Result<u64, String> {
        let mut first = self.connect().await?;
        let split = match sink.seeks() {
            true => self.split(&mut first).await?,
            false => Vec::new(),
        };
        if split.len() < 2 {
            return self.get(first, None, sink, progress).await;
        }
        let mut first = Some(first);
        let mut all = Vec::new();
        for r in split {
            let open = first.take();
            all.push(async move {
                let c = match open {
                    Some(c) => c,
                    None => self.connect().await?,
                };
                self.get(c, Some(r), sink, progress).await
            });
        }
        let got = futures_util::future::try_join_all(all).await?;
        Ok(got.iter().sum())
    }

    /// The parts to fetch at once: as many as asked, or as a `-p auto` cold start would open
    /// at this connection's round trip with this host's buffer cap (one as root: nothing caps
    /// its window); none to split (one GET) when one connection it is, or the remote serves
    /// no ranges.
    async fn split(&self, first: &mut Connection) -> Result<Vec<Range<u64>>, String> {
        let cap = self.tune.control.receive_cap();
        // One connection asked for, or left to a cold start that opens one (no cap): no HEAD.
        match (self.streams, cap) {
            (Some(1), _) | (None, None) => return Ok(Vec::new()),
            _ => {}
        }
        let Some(size) = self.size(&mut first.0).await? else {
            return Ok(Vec::new());
        };
        let streams = match (self.streams, first.1.as_ref().and_then(|t| t.round_trip())) {
            (Some(n), _) => n.min(MAX_STREAMS),
            (None, Some(rtt)) => {
                fatpipe_tune::streams::cold::cold_start(rtt, cap, size, MAX_STREAMS).map_or(
                    1,
                    |c| {
                        tracing::info!("fetch over {} connections {}", c.streams, c.why);
                        c.streams
                    },
                )
            }
            (None, None) => 1,
        };
        let split = parts(size, streams);
        if split.len() > 1 {
            tracing::info!("fetching {size} bytes in {} parts at once", split.len());
        }
        Ok(split)
    }

    /// The remote's size, when it serves ranges (a HEAD on `send`).
    async fn size(
        &self,
        send: &mut SendRequest<crate::body::ResponseBody>,
    ) -> Result<Option<u64>, String> {
        let resp =
            connect::exchange(send, Method::HEAD, self.remote, self.headers, full("")).await?;
        if resp.status() != StatusCode::OK {
            return Err(refusal(self.who, resp).await);
        }
        let ranges = resp
            .headers()
            .get("accept-ranges")
            .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"bytes"));
        Ok(length(&resp).filter(|_| ranges))
    }

    async fn connect(&self) -> Result<Connection, String> {
        connect::connect(self.remote, self.tls, self.tune).await
    }

    /// One GET (of `range`, or the whole file) into `sink` on `c`.
    async fn get(
        &self,
        c: Connection,
        range: Option<Range<u64>>,
        sink: &FileSink,
        progress: &AtomicU64,
    ) -> Result<u64, String> {
        let (mut send, tunable) = c;
        let into = connect::Landing {
            sink,
            limit: self.limit,
            progress,
        };
        connect::get_into(
            &mut send,
            self.remote,
            self.headers,
            range,
            tunable,
            into,
            self.who,
        )
        .await
    }
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
