//! A copy between two servers: the destination pulls the file (a third-party `COPY`), the
//! bytes never pass through here; or, only where the user asked for it, when the destination
//! cannot pull it, the file streams through this machine (a `GET` from the source sent on as
//! the body of a `PUT` to the destination while it arrives).

use super::{Client, Endpoint};
use crate::body::full;
use crate::connect::{self, refusal};
use crate::markers::Reading;
use http_body_util::BodyExt;
use hyper::header::{HeaderName, HeaderValue, CONTENT_LENGTH};
use hyper::Method;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// How a copy between two servers goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ThirdParty {
    /// Connections asked of the destination for its pull (`X-Number-Of-Streams`).
    pub streams: u32,
    /// When the destination refuses the copy or it fails, stream the file through here.
    pub streamed_fallback: bool,
}

impl Client {
    /// Has `dst`'s server pull `src` (or, as `how` allows, streams it through here when that
    /// fails); returns the bytes moved.
    pub async fn third_party(
        &self,
        src: &Endpoint,
        dst: &Endpoint,
        how: ThirdParty,
        progress: &Arc<AtomicU64>,
    ) -> Result<u64, String> {
        let mut told = 0;
        match self.pull(src, dst, how.streams, progress, &mut told).await {
            Err(e) if how.streamed_fallback => {
                // What the markers counted goes: the file moves again, whole.
                progress.fetch_sub(told, Ordering::Relaxed);
                tracing::warn!("{e}: streaming {} through this machine", src.https_url());
                self.streamed(src, dst, progress)
                    .await
                    .map_err(|s| format!("{e}; streamed through here: {s}"))
            }
            r => r,
        }
    }

    /// The destination's pull of `src` (`streams` connections asked); returns the bytes the
    /// last marker reported, `told` the bytes added to `progress`.
    async fn pull(
        &self,
        src: &Endpoint,
        dst: &Endpoint,
        streams: u32,
        progress: &AtomicU64,
        told: &mut u64,
    ) -> Result<u64, String> {
        let (mut send, _, remote) = self.open(dst).await?;
        let mut headers = dst.headers();
        let mut add = |name: &'static str, value: &str| {
            if let Ok(v) = HeaderValue::from_str(value) {
                headers.push((HeaderName::from_static(name), v));
            }
        };
        add("source", &src.https_url());
        add("x-number-of-streams", &streams.to_string());
        if let Some(a) = &src.authorization {
            add("transferheaderauthorization", a);
        }
        let copy = Method::from_bytes(b"COPY").map_err(|e| e.to_string())?;
        let resp = connect::exchange(&mut send, copy, &remote, &headers, full("")).await?;
        if !resp.status().is_success() {
            return Err(refusal("the destination", resp).await);
        }
        let mut body = resp.into_body();
        let mut reading = Reading::default();
        // Several copies may report at once: each adds what its markers say it moved.
        while let Some(frame) = body.frame().await {
            let frame = frame.map_err(|e| format!("the destination stopped reporting: {e}"))?;
            if let Ok(data) = frame.into_data() {
                reading.feed(&data);
                let now = reading.bytes.max(*told);
                progress.fetch_add(now - *told, Ordering::Relaxed);
                *told = now;
            }
        }
        match reading.outcome {
            Some(Ok(())) => Ok(reading.bytes),
            Some(Err(e)) => Err(format!("the destination reports: {e}")),
            None => Err("the destination ended its report without an outcome".into()),
        }
    }

    /// `src` through here: its `GET`'s body is the body of a `PUT` to `dst` (of the length the
    /// source said), the bytes counted into `progress` as they pass. A body cut short fails
    /// the `PUT`, and the destination keeps nothing of it.
    async fn streamed(
        &self,
        src: &Endpoint,
        dst: &Endpoint,
        progress: &Arc<AtomicU64>,
    ) -> Result<u64, String> {
        let (mut get, _, from) = self.open(src).await?;
        let resp =
            connect::exchange(&mut get, Method::GET, &from, &src.headers(), full("")).await?;
        if !resp.status().is_success() {
            return Err(refusal("the source", resp).await);
        }
        let size = connect::length(&resp).ok_or("the source sent no Content-Length")?;
        let counted = progress.clone();
        let body = resp
            .into_body()
            .map_frame(move |f| {
                if let Some(d) = f.data_ref() {
                    counted.fetch_add(d.len() as u64, Ordering::Relaxed);
                }
                f
            })
            .map_err(std::io::Error::other)
            .boxed();
        let (mut put, _, to) = self.open(dst).await?;
        let mut headers = dst.headers();
        headers.push((CONTENT_LENGTH, HeaderValue::from(size)));
        let resp = connect::exchange(&mut put, Method::PUT, &to, &headers, body).await?;
        if !resp.status().is_success() {
            return Err(refusal("the destination", resp).await);
        }
        Ok(size)
    }
}
