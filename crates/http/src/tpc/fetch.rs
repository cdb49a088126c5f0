//! The two directions of a third-party copy, once accepted: a pull (one GET, or ranged GETs
//! over several connections into one file) and a push (one PUT), each optionally verified
//! against the remote's adler32 (`Want-Digest`).

use crate::body::{full, FileSink};
use crate::connect::{self as client, refusal, Remote};
use crate::pending::Pending;
use crate::ranged::Fetch;
use crate::request::State;
use fatpipe_proto::gridftp::ChecksumAlg;
use hyper::header::{HeaderName, HeaderValue};
use hyper::{Method, StatusCode};
use std::fs::File;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;

/// What a pull needs.
pub struct Pull {
    pub state: Arc<State>,
    pub remote: Remote,
    pub headers: Vec<(HeaderName, HeaderValue)>,
    /// The connections the client asked for; `None`: the server's choice.
    pub streams: Option<u32>,
    pub verify: bool,
}

impl Pull {
    /// Fetches the source into `upload` and commits it.
    pub async fn run(self, upload: Pending, progress: &Arc<AtomicU64>) -> Result<(), String> {
        let file = upload.file().map_err(|e| e.to_string())?;
        let check = file.try_clone().map_err(|e| e.to_string())?;
        let sink = FileSink::new(file);
        let fetch = Fetch {
            remote: &self.remote,
            headers: &self.headers,
            tls: &self.state.client_tls,
            tune: &self.state.config.tune,
            streams: self.streams,
            limit: self.state.config.max_file_size.unwrap_or(u64::MAX),
            who: "the source",
            networks: Some(&self.state.config.third_party_networks),
            ranges: None,
            record: None,
        };
        let fetched = fetch.run(&sink, progress).await;
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
        let at = client::At {
            remote: self.remote.clone(),
            headers: self.headers.clone(),
        };
        let state = &self.state;
        let how = (&state.client_tls, &state.config.tune);
        let reach = Some(&state.config.third_party_networks);
        client::put_following(at, &file, size, how, reach, progress).await?;
        // The checksum is asked where the file is named, not where a redirect sent its bytes
        // (a dCache door, not its pool).
        if self.verify {
            verify(state, &self.remote, &self.headers, check).await?;
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
    let resp = client::exchange(&mut send, Method::HEAD, remote, &headers, full("")).await?;
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
