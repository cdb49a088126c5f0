//! What a long-running server reads from files that change under it: a renewed TLS
//! certificate, a regenerated grid-mapfile, CA directories whose revocation lists fetch-crl
//! renews every few hours. Each is read again when a file's modification time changes (for a
//! directory, the newest of it and what it holds), at most once per look interval; a reading
//! that fails keeps the previous value and says why, so a half-written file never takes a
//! server's credentials away.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime};

/// How a [`Reloading`] value is read from its files.
type Read<T> = Box<dyn Fn() -> Result<T, String> + Send + Sync>;

/// A value read from files, read again when they change.
pub struct Reloading<T> {
    /// What it is, for the log ("TLS certificate", "grid-mapfile").
    what: &'static str,
    paths: Vec<PathBuf>,
    /// Least time between two looks at the files (zero: every use looks).
    every: Duration,
    read: Read<T>,
    state: Mutex<State<T>>,
}

struct State<T> {
    stamps: Vec<Option<SystemTime>>,
    looked: Instant,
    value: T,
}

impl<T: Clone> Reloading<T> {
    /// Reads the value with `read` at `now`, watching `paths` for changes; `read`'s error
    /// (naming the file) when that fails.
    pub fn load(
        what: &'static str,
        paths: Vec<PathBuf>,
        every: Duration,
        now: Instant,
        read: impl Fn() -> Result<T, String> + Send + Sync + 'static,
    ) -> Result<Reloading<T>, String> {
        let stamps = stamps(&paths);
        let value = read()?;
        Ok(Reloading {
            what,
            paths,
            every,
            read: Box::new(read),
            state: Mutex::new(State {
                stamps,
                looked: now,
                value,
            }),
        })
    }

    /// The value at `now`: read again first when the look interval passed and a file changed
    /// (a reading that fails keeps the previous value and logs why).
    pub fn current(&self, now: Instant) -> T {
        let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if now.saturating_duration_since(st.looked) >= self.every {
            st.looked = now;
            let stamps = stamps(&self.paths);
            if stamps != st.stamps {
                st.stamps = stamps;
                match (self.read)() {
                    Ok(v) => {
                        let files: Vec<_> = self.paths.iter().map(|p| p.display()).collect();
                        tracing::info!("{} read again from {files:?}", self.what);
                        st.value = v;
                    }
                    Err(e) => tracing::warn!("keeping the previous {}: {e}", self.what),
                }
            }
        }
        st.value.clone()
    }
}

impl<T> fmt::Debug for Reloading<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Reloading")
            .field("what", &self.what)
            .field("paths", &self.paths)
            .finish_non_exhaustive()
    }
}

/// Each path's stamp: the newest modification time of it and, for a directory, of what it
/// holds (`None` where none can be read).
fn stamps(paths: &[PathBuf]) -> Vec<Option<SystemTime>> {
    paths.iter().map(|p| newest(p)).collect()
}

fn newest(path: &Path) -> Option<SystemTime> {
    let mtime = |p: &Path| std::fs::metadata(p).and_then(|m| m.modified()).ok();
    let inside = std::fs::read_dir(path)
        .into_iter()
        .flatten()
        .filter_map(Result::ok)
        .filter_map(|e| mtime(&e.path()));
    mtime(path).into_iter().chain(inside).max()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU32, Ordering};
    use std::sync::Arc;

    /// Sets `path`'s modification time `secs` after the epoch (a change the stamp sees
    /// whatever the file system's time resolution).
    fn touch(path: &Path, secs: u64) {
        let f = std::fs::File::options().write(true).open(path).unwrap();
        f.set_modified(SystemTime::UNIX_EPOCH + Duration::from_secs(secs))
            .unwrap();
    }

    fn number(path: &Path) -> Result<u32, String> {
        let text = std::fs::read_to_string(path).map_err(|e| e.to_string())?;
        text.trim()
            .parse()
            .map_err(|_| format!("not a number: {text:?}"))
    }

    #[test]
    fn a_changed_file_is_read_again_and_a_broken_one_keeps_the_value() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("n");
        std::fs::write(&path, "1").unwrap();
        touch(&path, 1000);
        let t0 = Instant::now();
        let p = path.clone();
        let read = move || number(&p);
        let r = Reloading::load("number", vec![path.clone()], Duration::ZERO, t0, read).unwrap();
        assert_eq!(r.current(t0), 1);
        std::fs::write(&path, "2").unwrap();
        touch(&path, 2000);
        assert_eq!(r.current(t0), 2);
        std::fs::write(&path, "two").unwrap();
        touch(&path, 3000);
        assert_eq!(r.current(t0), 2, "a broken file keeps the value");
        std::fs::write(&path, "3").unwrap();
        touch(&path, 4000);
        assert_eq!(r.current(t0), 3);
        std::fs::write(&path, "x").unwrap();
        let p = path.clone();
        let read = move || number(&p);
        assert!(Reloading::load("number", vec![path], Duration::ZERO, t0, read).is_err());
    }

    #[test]
    fn files_are_looked_at_once_per_interval_and_read_only_when_changed() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("n");
        std::fs::write(&path, "1").unwrap();
        touch(&path, 1000);
        let reads = Arc::new(AtomicU32::new(0));
        let counted = reads.clone();
        let t0 = Instant::now();
        let every = Duration::from_secs(600);
        let p = path.clone();
        let r = Reloading::load("number", vec![path.clone()], every, t0, move || {
            counted.fetch_add(1, Ordering::Relaxed);
            number(&p)
        })
        .unwrap();
        assert_eq!(r.current(t0 + every), 1);
        assert_eq!(
            reads.load(Ordering::Relaxed),
            1,
            "unchanged: not read again"
        );
        std::fs::write(&path, "2").unwrap();
        touch(&path, 2000);
        assert_eq!(r.current(t0 + every + every / 2), 1, "not looked at yet");
        assert_eq!(r.current(t0 + 2 * every), 2);
        assert_eq!(reads.load(Ordering::Relaxed), 2);
    }

    #[test]
    fn a_file_added_to_a_directory_changes_its_stamp() {
        let dir = tempfile::tempdir().unwrap();
        let before = newest(dir.path());
        let f = dir.path().join("a.crl");
        std::fs::write(&f, "x").unwrap();
        touch(&f, 4_000_000_000);
        assert_ne!(newest(dir.path()), before);
        assert_eq!(
            newest(dir.path()),
            Some(SystemTime::UNIX_EPOCH + Duration::from_secs(4_000_000_000))
        );
    }
}
