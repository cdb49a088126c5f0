//! `--stats FILE.jsonl`: one JSON record per tuning sample, appended by every end that writes
//! to the file (client and server may share one).

use fatpipe_tune::{Role, TcpStats};
use serde::Serialize;
use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::Path;
use std::sync::{Arc, Mutex};

/// One sample of one end, as written to the stats file.
#[derive(Debug, Clone, Serialize)]
pub struct Record {
    /// Wall-clock time, seconds since the Unix epoch (to line up both ends).
    pub unix_s: f64,
    /// Seconds since this data connection was made.
    pub t: f64,
    /// `client` or `server`.
    pub end: &'static str,
    /// This end's port of the data connection (the listener's on an accepting end).
    pub port: u16,
    /// The peer's port of the data connection: with `port`, tells apart the connections of
    /// one transfer, which may open within the same millisecond.
    pub peer_port: u16,
    /// Which way data flows at this end.
    pub role: Role,
    /// The tuning mode.
    pub tuning: String,
    /// Payload bytes moved so far.
    pub bytes: u64,
    /// Throughput since the previous record, Mbit/s.
    pub mbit_s: f64,
    /// The law's BDP estimate, bytes.
    pub bdp: Option<u64>,
    /// Receive buffer as the kernel accounts it, bytes.
    pub rcvbuf: u64,
    /// Send buffer as the kernel accounts it, bytes.
    pub sndbuf: u64,
    /// The buffer the peer last announced, bytes.
    pub peer_buffer: Option<u64>,
    /// The latest control-channel round trip, ms.
    pub probe_rtt_ms: Option<f64>,
    /// `TCP_INFO` of the data socket.
    pub tcp: Option<TcpStats>,
    /// What the law set: receive buffer, send buffer, window clamp (`setsockopt` values).
    pub set_rcvbuf: Option<u64>,
    /// See `set_rcvbuf`.
    pub set_sndbuf: Option<u64>,
    /// See `set_rcvbuf`.
    pub clamp: Option<u64>,
    /// Why, when the law changed something.
    pub note: Option<String>,
    /// System limits that held a buffer below what the law asked.
    pub capped: Vec<String>,
}

/// A change of a transfer's stream count (`-p auto`), as written to the stats file beside the
/// tuners' records (told apart by its `event` field).
#[derive(Debug, Clone, Serialize)]
pub struct StreamsEvent<'a> {
    /// Wall-clock time, seconds since the Unix epoch.
    pub unix_s: f64,
    /// `client` or `server`.
    pub end: &'a str,
    /// Always `streams`.
    pub event: &'static str,
    /// Data connections after the change.
    pub streams: u32,
    /// Why.
    pub reason: &'a str,
}

impl StatsFile {
    /// A callback for the MODE E sender that records its stream decisions as `end`.
    pub fn stream_events(self, end: &'static str) -> crate::mode_e::OnChange {
        Box::new(move |streams, reason| {
            let unix_s = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0.0, |d| d.as_secs_f64());
            let e = StreamsEvent {
                unix_s,
                end,
                event: "streams",
                streams,
                reason,
            };
            if let Err(err) = self.write(&e) {
                tracing::warn!("cannot write stats: {err}");
            }
        })
    }
}

/// An append-only JSONL file shared by the tuners of one process.
#[derive(Debug, Clone)]
pub struct StatsFile {
    file: Arc<Mutex<File>>,
}

impl StatsFile {
    /// Opens (creates) `path` for appending.
    pub fn open(path: &Path) -> io::Result<StatsFile> {
        let file = OpenOptions::new().create(true).append(true).open(path)?;
        Ok(StatsFile {
            file: Arc::new(Mutex::new(file)),
        })
    }

    /// Appends one record as one line (one `write`, so ends sharing the file do not interleave).
    pub fn write(&self, r: &(impl Serialize + ?Sized)) -> io::Result<()> {
        let mut line = serde_json::to_vec(r).map_err(io::Error::other)?;
        line.push(b'\n');
        let mut f = self
            .file
            .lock()
            .map_err(|_| io::Error::other("stats file lock poisoned"))?;
        f.write_all(&line)
    }
}
