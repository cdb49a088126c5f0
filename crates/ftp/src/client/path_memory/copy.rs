//! Path memory as one copy uses it: before the first file, where `-p auto` starts, which
//! congestion control a lossy path's next copy starts on, what the UDP sender knew; after the
//! last, what this copy learned. The rules live here, not in the CLI, so that every front-end
//! copying to a server remembers the same way.

use super::{PathMemory, Recalled};
use crate::client::file_result::FileResult;
use crate::client::transport;
use fatpipe_net::udp::path_loss_in_summary;
use fatpipe_tune::rate::RateMemory;
use fatpipe_tune::CongestionControl;
use std::path::PathBuf;
use std::time::Duration;

/// What one copy to one server recalled, and where to keep what it learns.
#[derive(Debug, Clone)]
pub struct CopyMemory {
    path: PathBuf,
    server: String,
    several: bool,
    recalled: Option<Recalled>,
    /// The congestion control this copy starts on because the last one met random loss (one
    /// file, no control asked for).
    pub carried: Option<CongestionControl>,
}

impl CopyMemory {
    /// Recalls, from the memory at `path`, the last copy to `server` (`host:port`) for a copy
    /// that moves several files at once or not (`several`: such a copy neither starts on nor
    /// keeps a control remembered from random loss) and whose user chose a control or not.
    pub fn recall(path: PathBuf, server: String, several: bool, cc_asked: bool) -> CopyMemory {
        let recalled = PathMemory::load(&path).recall(&server, unix_now());
        let carried = match &recalled {
            Some(r) if !several && !cc_asked => r.cc.clone().inspect(|cc| {
                tracing::info!(
                    "congestion control {cc}: the last copy to {server} met random loss ({} ago)",
                    ago(r.age)
                )
            }),
            _ => None,
        };
        CopyMemory {
            path,
            server,
            several,
            recalled,
            carried,
        }
    }

    /// The server, as path memory names it.
    pub fn server(&self) -> &str {
        &self.server
    }

    /// Where `-p auto`'s first file starts, and why: the streams the last copy ended with,
    /// when more than one.
    pub fn first_start(&self) -> Option<(u32, String)> {
        let r = self.recalled.as_ref().filter(|r| r.streams > 1)?;
        let why = format!(
            "where the last copy to {} ended ({} ago)",
            self.server,
            ago(r.age)
        );
        Some((r.streams, why))
    }

    /// Whether path memory recalls a copy to the server at all.
    pub fn known(&self) -> bool {
        self.recalled.is_some()
    }

    /// How long ago the last copy met random loss, if it did.
    pub fn lossy_ago(&self) -> Option<Duration> {
        self.recalled
            .as_ref()
            .filter(|r| r.cc.is_some())
            .map(|r| r.age)
    }

    /// What the UDP sender learned last time.
    pub fn udp(&self) -> Option<RateMemory> {
        self.recalled.as_ref().and_then(|r| r.udp.clone())
    }

    /// The server's features as the last copy read them.
    pub fn features(&self) -> Option<Vec<String>> {
        self.recalled.as_ref().and_then(|r| r.features.clone())
    }

    /// Keeps what this copy learned: the stream count its last moved file ended with, the
    /// congestion control chosen on random loss (by a file of this copy, or carried over and
    /// not disproved), what the UDP sender learned (`udp`, once it left start-up) and the
    /// server's `features` as this copy read them. A failure to save only warns: the copy
    /// itself is done.
    pub fn keep(
        self,
        results: &[FileResult],
        udp: Option<RateMemory>,
        features: Option<Vec<String>>,
    ) {
        let udp = udp.filter(|u| u.rate.is_some());
        let udp_loss = results
            .iter()
            .rev()
            .find_map(|r| r.udp.as_deref())
            .and_then(path_loss_in_summary);
        let chosen = results.iter().find_map(|r| r.cc_on_random_loss.clone());
        let cc = transport::remembered_loss(self.several, udp_loss, chosen, self.carried);
        let last = results
            .iter()
            .rev()
            .find(|r| r.error.is_none() && r.bytes > 0);
        let mut m = PathMemory::load(&self.path);
        let now = unix_now();
        // A copy over the UDP channel (one MODE S stream) leaves the remembered count as it was.
        let over_udp = udp.is_some() || last.is_some_and(|r| r.udp.is_some());
        let n = match last.and_then(|r| r.streams) {
            Some(n) => n,
            None if over_udp => m.recall(&self.server, now).map_or(1, |r| r.streams),
            None => return,
        };
        let learned = (udp.as_ref(), features.as_deref());
        m.remember(&self.server, n, cc.as_ref(), learned, now);
        if let Err(e) = m.save(&self.path) {
            tracing::warn!(
                "cannot keep the stream count in {}: {e}",
                self.path.display()
            );
        }
    }
}

/// An age in whole seconds, as people read it.
fn ago(age: Duration) -> humantime::FormattedDuration {
    humantime::format_duration(Duration::from_secs(age.as_secs()))
}

/// Seconds since the Unix epoch (0 if the clock is before it).
fn unix_now() -> u64 {
    fatpipe_net::telemetry::since_epoch().as_secs()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn moved(streams: u32, cc: Option<CongestionControl>) -> FileResult {
        FileResult {
            bytes: 1,
            streams: Some(streams),
            cc_on_random_loss: cc,
            ..FileResult::default()
        }
    }

    #[test]
    fn a_lossy_copy_of_one_file_is_carried_to_the_next_and_a_tree_copy_is_not() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("paths.json");
        let server = || "h:2811".to_string();
        // Nothing known: start from one stream, on the system's control.
        let first = CopyMemory::recall(path.clone(), server(), false, false);
        assert_eq!((first.first_start(), first.carried.clone()), (None, None));
        first.keep(&[moved(6, Some(CongestionControl::Bbr))], None, None);
        // The next copy of one file starts at 6 streams on bbr, and says why.
        let next = CopyMemory::recall(path.clone(), server(), false, false);
        let (n, why) = next.first_start().unwrap();
        assert!(n == 6 && why.contains("h:2811"), "{why}");
        assert_eq!(next.carried, Some(CongestionControl::Bbr));
        assert!(next.lossy_ago().is_some());
        // A control asked for, or a tree, takes nothing over.
        assert_eq!(
            CopyMemory::recall(path.clone(), server(), false, true).carried,
            None
        );
        let tree = CopyMemory::recall(path.clone(), server(), true, false);
        assert_eq!(tree.carried, None);
        // A tree's copy keeps its count but forgets the loss.
        tree.keep(&[moved(4, None)], None, None);
        let after = CopyMemory::recall(path, server(), false, false);
        assert_eq!(after.first_start().map(|s| s.0), Some(4));
        assert_eq!(after.carried, None);
    }
}
