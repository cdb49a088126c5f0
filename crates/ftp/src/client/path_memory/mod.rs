//! What `-p auto` learned about the path to a server, kept between copies: the stream count the
//! last copy to it ended with, so that the next copy (a script copying file by file, a sync run
//! again) starts there instead of from one stream, and the congestion control its senders
//! switched to on random loss, so that the next copy starts on it instead of finding the loss
//! again, and what the UDP channel's sender learned (the rate it ended at, `history`'s odds). What
//! is remembered is trusted for an hour, as long as the kernel keeps its own per-destination TCP
//! metrics.

mod copy;

pub use copy::CopyMemory;

use fatpipe_tune::rate::RateMemory;
use fatpipe_tune::CongestionControl;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// How long a remembered count is trusted.
pub const TRUSTED_FOR: Duration = Duration::from_secs(3600);

/// Most features kept for a server, and the longest kept: a longer list (a hostile server's)
/// is not kept at all, rather than cut short (a list without its `AUTH TLS` would keep the
/// next anonymous session in clear).
const MAX_FEATURES: usize = 64;
const MAX_FEATURE_LEN: usize = 256;

/// Stream counts by server (`host:port`), with when each was learned.
#[derive(Debug, Default, Serialize, Deserialize)]
pub struct PathMemory {
    servers: BTreeMap<String, Learned>,
}

/// One server's count.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Learned {
    streams: u32,
    /// The congestion control chosen on random loss, if one was.
    #[serde(default)]
    cc: Option<CongestionControl>,
    /// What the UDP channel's sender learned, if a copy used it.
    #[serde(default)]
    udp: Option<RateMemory>,
    /// The server's features as a session read them once logged in.
    #[serde(default)]
    features: Option<Vec<String>>,
    /// Seconds since the Unix epoch.
    at: u64,
}

/// What the last copy to a server learned, and how long ago.
#[derive(Debug, Clone, PartialEq)]
pub struct Recalled {
    /// The stream count it ended with.
    pub streams: u32,
    /// The congestion control its senders switched to on random loss, if they did.
    pub cc: Option<CongestionControl>,
    /// What the UDP channel's sender learned, if a copy used it.
    pub udp: Option<RateMemory>,
    /// The server's features, if a copy read them.
    pub features: Option<Vec<String>>,
    /// How long ago.
    pub age: Duration,
}

impl PathMemory {
    /// What the last copy to `server` learned, if it is recent enough (`now`: seconds since
    /// the Unix epoch).
    pub fn recall(&self, server: &str, now: u64) -> Option<Recalled> {
        let l = self.servers.get(server)?;
        let age = Duration::from_secs(now.checked_sub(l.at)?);
        (age <= TRUSTED_FOR).then(|| Recalled {
            streams: l.streams,
            cc: l.cc.clone(),
            udp: l.udp.clone(),
            features: l.features.clone(),
            age,
        })
    }

    /// Keeps `streams` (and `cc`, chosen on random loss, `udp`, what the UDP sender learned,
    /// and the server's `features`; a copy without either of the last two keeps the last
    /// one's) for `server`, learned at `now`; forgets what is no longer trusted.
    pub fn remember(
        &mut self,
        server: &str,
        streams: u32,
        cc: Option<&CongestionControl>,
        (udp, features): (Option<&RateMemory>, Option<&[String]>),
        now: u64,
    ) {
        self.servers
            .retain(|_, l| now.saturating_sub(l.at) <= TRUSTED_FOR.as_secs());
        let before = self.servers.get(server);
        let udp = udp.cloned().or_else(|| before.and_then(|l| l.udp.clone()));
        let bounded =
            |f: &&[String]| f.len() <= MAX_FEATURES && f.iter().all(|l| l.len() <= MAX_FEATURE_LEN);
        let features = match features {
            Some(f) => Some(f).filter(bounded).map(<[String]>::to_vec),
            None => before.and_then(|l| l.features.clone()),
        };
        let cc = cc.cloned();
        self.servers.insert(
            server.to_string(),
            Learned {
                streams,
                cc,
                udp,
                features,
                at: now,
            },
        );
    }

    /// Reads the memory at `path`; none yet, or one that cannot be read, is empty (a broken file
    /// is replaced at the next save).
    pub fn load(path: &Path) -> PathMemory {
        match std::fs::read(path) {
            Ok(bytes) => serde_json::from_slice(&bytes).unwrap_or_else(|e| {
                tracing::warn!("ignoring {}: {e}", path.display());
                PathMemory::default()
            }),
            Err(e) if e.kind() == io::ErrorKind::NotFound => PathMemory::default(),
            Err(e) => {
                tracing::warn!("cannot read {}: {e}", path.display());
                PathMemory::default()
            }
        }
    }

    /// Writes the memory to `path` (a new file renamed over the old: a reader never sees half).
    pub fn save(&self, path: &Path) -> io::Result<()> {
        let dir = path.parent().unwrap_or(Path::new("."));
        std::fs::create_dir_all(dir)?;
        let mut tmp = tempfile::NamedTempFile::new_in(dir)?;
        serde_json::to_writer_pretty(&mut tmp, self)?;
        tmp.persist(path).map_err(|e| e.error)?;
        Ok(())
    }
}

/// Where the memory lives: `$XDG_CACHE_HOME/fatpipe/paths.json`, else
/// `$HOME/.cache/fatpipe/paths.json`; `None` without either.
pub fn default_path() -> Option<PathBuf> {
    let cache = std::env::var_os("XDG_CACHE_HOME")
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME")
                .filter(|d| !d.is_empty())
                .map(|h| PathBuf::from(h).join(".cache"))
        })?;
    Some(cache.join("fatpipe").join("paths.json"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_count_is_recalled_for_an_hour_and_for_its_server_only() {
        let mut m = PathMemory::default();
        m.remember(
            "a:2811",
            8,
            Some(&CongestionControl::Bbr),
            (None, None),
            1000,
        );
        let at = |age| Recalled {
            streams: 8,
            cc: Some("bbr".into()),
            udp: None,
            features: None,
            age: Duration::from_secs(age),
        };
        assert_eq!(m.recall("a:2811", 1000), Some(at(0)));
        assert_eq!(m.recall("a:2811", 1000 + 3600), Some(at(3600)));
        assert_eq!(m.recall("a:2811", 1000 + 3601), None);
        assert_eq!(m.recall("b:2811", 1000), None);
        // A clock that went back trusts nothing.
        assert_eq!(m.recall("a:2811", 999), None);
        // Newer replaces older; stale entries are dropped when anything is remembered.
        m.remember("a:2811", 4, None, (None, None), 2000);
        let r = m.recall("a:2811", 2000).map(|r| (r.streams, r.cc));
        assert_eq!(r, Some((4, None)));
        m.remember("b:2811", 2, None, (None, None), 9000);
        assert!(!m.servers.contains_key("a:2811"));
    }

    #[test]
    fn memory_survives_a_save_and_a_broken_file_reads_as_empty() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub/paths.json");
        assert!(PathMemory::load(&path).servers.is_empty());
        let mut m = PathMemory::default();
        let learned = RateMemory {
            rate: Some(8e8),
            ..RateMemory::default()
        };
        let features = ["MDTM".to_string(), "DRS".to_string()];
        let bbr = Some(&CongestionControl::Bbr);
        m.remember("h:1", 6, bbr, (Some(&learned), Some(&features)), 50);
        // A later copy over TCP that read no features keeps what the UDP channel learned and
        // the features.
        m.remember("h:1", 6, bbr, (None, None), 55);
        m.save(&path).unwrap();
        let r = PathMemory::load(&path).recall("h:1", 60);
        let kept = r.map(|r| (r.udp, r.features));
        assert_eq!(kept, Some((Some(learned), Some(features.to_vec()))));
        // A server that lists too much has nothing kept.
        let endless = vec!["X".repeat(10); 1000];
        m.remember("h:2", 1, None, (None, Some(&endless)), 56);
        assert_eq!(m.recall("h:2", 60).map(|r| r.features), Some(None));
        let r = PathMemory::load(&path).recall("h:1", 60);
        assert_eq!(r.map(|r| (r.streams, r.cc)), Some((6, Some("bbr".into()))));
        // A file written before congestion controls were remembered reads too.
        std::fs::write(&path, br#"{"servers":{"h:1":{"streams":3,"at":50}}}"#).unwrap();
        assert_eq!(
            PathMemory::load(&path).recall("h:1", 60).map(|r| r.streams),
            Some(3)
        );
        std::fs::write(&path, b"{not json").unwrap();
        assert!(PathMemory::load(&path).servers.is_empty());
    }
}
