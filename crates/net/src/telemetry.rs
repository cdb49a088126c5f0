//! `--stats FILE.jsonl`: the file the conductors of one process append their telemetry to
//! (client and server may share one). The events themselves are `fatpipe_tune::telemetry`'s,
//! which the plots read back.

use fatpipe_tune::telemetry::{CcEvent, Event, StreamsEvent};
use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// An append-only JSONL file shared by the conductors of one process.
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

    /// Appends one event as one line (one `write`, so ends sharing the file do not interleave).
    pub fn write(&self, e: &Event) -> io::Result<()> {
        let mut line = serde_json::to_vec(e).map_err(io::Error::other)?;
        line.push(b'\n');
        let mut f = self
            .file
            .lock()
            .map_err(|_| io::Error::other("stats file lock poisoned"))?;
        f.write_all(&line)
    }

    /// Appends a change of the stream count, seen by `end` now; a failure is only logged.
    pub fn streams(&self, end: &str, streams: u32, reason: &str) {
        self.log(&Event::Streams(StreamsEvent {
            unix_s: unix_now(),
            end: end.to_string(),
            streams,
            reason: reason.to_string(),
        }));
    }

    /// Appends a change of the senders' congestion control; a failure is only logged.
    pub fn cc(&self, end: &str, cc: &str, reason: &str) {
        self.log(&Event::Cc(CcEvent {
            unix_s: unix_now(),
            end: end.to_string(),
            cc: cc.to_string(),
            reason: reason.to_string(),
        }));
    }

    /// Appends any event; a failure is only logged.
    pub fn log(&self, e: &Event) {
        if let Err(err) = self.write(e) {
            tracing::warn!("cannot write stats: {err}");
        }
    }
}

/// Wall-clock time since the Unix epoch (zero if the clock is before it): the clock the
/// kernel's receive times and the records' `unix_s` are on.
pub fn since_epoch() -> Duration {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
}

/// Wall-clock time, seconds since the Unix epoch (0 if the clock is before it).
pub fn unix_now() -> f64 {
    since_epoch().as_secs_f64()
}
