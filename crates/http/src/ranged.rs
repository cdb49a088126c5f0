//! One file fetched with GET into one sink: whole over one connection, or in ranged parts
//! over several at once, after the redirects of its first request. A third-party pull and
//! `fatpipe cp https://… FILE` both fetch so.

use crate::body::{full, FileSink};
use crate::connect::{self, refusal, At, Miss, Record, Remote, MAX_REDIRECTS};
use crate::runtime::MAX_STREAMS;
use fatpipe_ftp::client::part::Source;
use fatpipe_net::admission::ThirdPartyNetworks;
use fatpipe_net::TunerConfig;
use hyper::client::conn::http1::SendRequest;
use hyper::header::{HeaderName, HeaderValue};
use hyper::{Method, StatusCode};
use std::ops::Range;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;

/// Smallest part one connection takes: below it, fewer connections.
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

/// `gaps` cut into at most about `streams` parts of similar size (none smaller than
/// [`MIN_PART`] unless a gap is), in order.
pub fn spread(gaps: &[Range<u64>], streams: u32) -> Vec<Range<u64>> {
    let left: u64 = gaps.iter().map(|g| g.end - g.start).sum();
    let each = left.div_ceil(u64::from(streams.max(1))).max(MIN_PART);
    gaps.iter()
        .flat_map(|g| {
            let n = (g.end - g.start).div_ceil(each);
            (0..n).map(move |i| (g.start + i * each)..(g.start + (i + 1) * each).min(g.end))
        })
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
    /// Where a redirect may lead: the networks a third-party copy may reach; `None`: anywhere
    /// (a client goes where its user's server sends it).
    pub networks: Option<&'a ThirdPartyNetworks>,
    /// Only these byte ranges (what a partial file lacks); `None`: the whole file.
    pub ranges: Option<&'a [Range<u64>]>,
    /// Where what arrives is recorded for a partial file, if one is kept.
    pub record: Option<&'a Record>,
}

/// The remote file as a `HEAD` describes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Head {
    /// Its size and modification time.
    pub source: Source,
    /// Whether it serves byte ranges.
    pub ranges: bool,
}

impl Fetch<'_> {
    /// Fetches the file into `sink` (in parts only where `sink` seeks), following redirects
    /// of its first request (a dCache door sends GETs on to a pool); returns the bytes.
    pub async fn run(&self, sink: &FileSink, progress: &AtomicU64) -> Result<u64, String> {
        let mut at = At {
            remote: self.remote.clone(),
            headers: self.headers.to_vec(),
        };
        for _ in 0..=MAX_REDIRECTS {
            match self.run_at(&at, sink, progress).await {
                Err(Miss::Moved(to)) => at = connect::follow(&at, to, self.networks).await?,
                Err(Miss::Failed(e)) => return Err(e),
                Ok(n) => return Ok(n),
            }
        }
        Err(format!(
            "{}: more than {MAX_REDIRECTS} redirects",
            self.remote.url
        ))
    }

    /// The remote file as a `HEAD` describes it, after the redirects of that request.
    pub async fn head(&self) -> Result<Head, String> {
        let mut at = At {
            remote: self.remote.clone(),
            headers: self.headers.to_vec(),
        };
        for _ in 0..=MAX_REDIRECTS {
            let mut c = self.connect(&at).await?;
            match self.head_at(&at, &mut c.0).await {
                Err(Miss::Moved(to)) => at = connect::follow(&at, to, self.networks).await?,
                Err(Miss::Failed(e)) => return Err(e),
                Ok(h) => return Ok(h),
            }
        }
        Err(format!(
            "{}: more than {MAX_REDIRECTS} redirects",
            self.remote.url
        ))
    }

    async fn run_at(&self, at: &At, sink: &FileSink, progress: &AtomicU64) -> Result<u64, Miss> {
        let mut first = self.connect(at).await?;
        let split = match self.ranges {
            Some(gaps) => self.spread(at, &mut first, gaps).await?,
            None if sink.seeks() => self.split(at, &mut first).await?,
            None => Vec::new(),
        };
        if self.ranges.is_none() && split.len() < 2 {
            return self.get(at, first, None, sink, progress).await;
        }
        let mut first = Some(first);
        let mut all = Vec::new();
        for r in split {
            let open = first.take();
            all.push(async move {
                let c = match open {
                    Some(c) => c,
                    None => self.connect(at).await?,
                };
                // The HEAD was answered here: a part sent elsewhere is a failure.
                self.get(at, c, Some(r), sink, progress)
                    .await
                    .map_err(|m| match m {
                        Miss::Moved(to) => format!("{} moved a part to {to}", self.who),
                        Miss::Failed(e) => e,
                    })
            });
        }
        let got = futures_util::future::try_join_all(all).await?;
        Ok(got.iter().sum())
    }

    /// The parts of a resume: the `gaps` spread over the connections asked for (or as a cold
    /// start opens), after a `HEAD` that follows a redirect here (the parts then go where it
    /// answered).
    async fn spread(
        &self,
        at: &At,
        first: &mut Connection,
        gaps: &[Range<u64>],
    ) -> Result<Vec<Range<u64>>, Miss> {
        self.head_at(at, &mut first.0).await?;
        let left: u64 = gaps.iter().map(|g| g.end - g.start).sum();
        let streams = self.streams_for(first, left);
        Ok(spread(gaps, streams))
    }

    /// The parts to fetch at once: as many as asked, or as a `-p auto` cold start would open
    /// at this connection's round trip with this host's buffer cap (one as root: nothing caps
    /// its window); none to split (one GET) when one connection it is, or the remote serves
    /// no ranges.
    async fn split(&self, at: &At, first: &mut Connection) -> Result<Vec<Range<u64>>, Miss> {
        // One connection asked for, or left to a cold start that opens one (no cap): no HEAD.
        if crate::runtime::connections(self.streams, self.tune) == 1 {
            return Ok(Vec::new());
        }
        let Some(size) = self.size(at, &mut first.0).await? else {
            return Ok(Vec::new());
        };
        let streams = self.streams_for(first, size);
        let split = parts(size, streams);
        if split.len() > 1 {
            tracing::info!("fetching {size} bytes in {} parts at once", split.len());
        }
        Ok(split)
    }

    /// How many connections fetch `size` bytes: as many as asked, or as a `-p auto` cold start
    /// would open at `first`'s round trip with this host's buffer cap.
    fn streams_for(&self, first: &Connection, size: u64) -> u32 {
        let cap = self.tune.control.receive_cap();
        match (self.streams, first.1.as_ref().and_then(|t| t.round_trip())) {
            (Some(n), _) => n.min(MAX_STREAMS),
            (None, Some(rtt)) => fatpipe_tune::streams::cold::cold_start(
                rtt,
                cap,
                size,
                MAX_STREAMS,
                fatpipe_net::conductor::host_cores(),
            )
            .map_or(1, |c| {
                tracing::info!("fetch over {} connections {}", c.streams, c.why);
                c.streams
            }),
            (None, None) => 1,
        }
    }

    /// The remote's size, when it serves ranges (a HEAD on `send`).
    async fn size(
        &self,
        at: &At,
        send: &mut SendRequest<crate::body::ResponseBody>,
    ) -> Result<Option<u64>, Miss> {
        let head = self.head_at(at, send).await?;
        Ok(head.source.size.filter(|_| head.ranges))
    }

    /// What a HEAD on `send` says of the file; a redirect is [`Miss::Moved`].
    async fn head_at(
        &self,
        at: &At,
        send: &mut SendRequest<crate::body::ResponseBody>,
    ) -> Result<Head, Miss> {
        let resp = connect::exchange(send, Method::HEAD, &at.remote, &at.headers, full("")).await?;
        if let Some(to) = connect::moved_to(&resp, &at.remote.url) {
            return Err(Miss::Moved(to));
        }
        if resp.status() != StatusCode::OK {
            return Err(Miss::Failed(refusal(self.who, resp).await));
        }
        let ranges = resp
            .headers()
            .get("accept-ranges")
            .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"bytes"));
        Ok(Head {
            source: connect::described(&resp),
            ranges,
        })
    }

    async fn connect(&self, at: &At) -> Result<Connection, String> {
        connect::connect(&at.remote, self.tls, self.tune).await
    }

    /// One GET (of `range`, or the whole file) into `sink` on `c`.
    async fn get(
        &self,
        at: &At,
        c: Connection,
        range: Option<Range<u64>>,
        sink: &FileSink,
        progress: &AtomicU64,
    ) -> Result<u64, Miss> {
        let (mut send, tunable) = c;
        let into = connect::Landing {
            sink,
            limit: self.limit,
            progress,
            record: self.record,
        };
        connect::get_into(
            &mut send,
            &at.remote,
            &at.headers,
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
