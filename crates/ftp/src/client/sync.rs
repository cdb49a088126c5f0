//! What a copy does with a destination that already exists, decided before any data moves:
//! replaced (the default), kept (`--no-clobber`), or replaced only by a newer source
//! (`--update`, as `rsync -u` and `cp -u`). Files left out say why in their result
//! (`skipped`), as do all files of a `--dry-run`.

use super::file_result::FileResult;
use super::plan::Job;
use super::Connection;
use fatpipe_proto::listing::{Entry, EntryKind};
use std::collections::HashMap;
use std::os::unix::fs::MetadataExt;

/// How an existing destination is treated.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Existing {
    /// Replaced.
    #[default]
    Replace,
    /// Kept: the file is not copied (`--no-clobber`).
    Keep,
    /// Replaced only when the source is newer, or as old with another size (`--update`).
    Older,
}

/// A file's size and modification time (Unix seconds; `None` where the server gave none).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stamp {
    /// Bytes.
    pub size: Option<u64>,
    /// Modification time.
    pub modified: Option<i64>,
}

impl Existing {
    /// Why a source stamped `source` is not copied over a destination stamped `dest`
    /// (`None`: the destination does not exist); `None` when it is copied.
    pub fn skips(self, source: Stamp, dest: Option<Stamp>) -> Option<&'static str> {
        let dest = dest?;
        match self {
            Existing::Replace => None,
            Existing::Keep => Some("exists (--no-clobber)"),
            Existing::Older => {
                let (Some(s), Some(d)) = (source.modified, dest.modified) else {
                    return None;
                };
                let newer_there = d > s || (d == s && source.size == dest.size);
                newer_there.then_some("not newer than the destination (--update)")
            }
        }
    }
}

/// `jobs` split into those to copy and the results of those left out as `existing` says.
pub(super) fn select(
    c: &mut Connection,
    jobs: Vec<Job>,
    existing: Existing,
) -> (Vec<Job>, Vec<FileResult>) {
    if existing == Existing::Replace {
        return (jobs, Vec::new());
    }
    let mut remote = RemoteDirs::default();
    let mut copied = Vec::new();
    let mut skipped = Vec::new();
    for job in jobs {
        let (source, dest) = match &job {
            Job::Download {
                target: Some(t),
                size,
                modified,
                ..
            } => {
                let here = std::fs::metadata(t).ok().filter(|m| m.is_file());
                let dest = here.map(|m| Stamp {
                    size: Some(m.len()),
                    modified: Some(m.mtime()),
                });
                let source = Stamp {
                    size: *size,
                    modified: *modified,
                };
                (source, dest)
            }
            Job::Download { target: None, .. } => {
                copied.push(job);
                continue;
            }
            Job::Upload {
                rpath,
                size,
                modified,
                ..
            } => {
                let source = Stamp {
                    size: Some(*size),
                    modified: Some(*modified),
                };
                (source, remote.stamp(c, rpath))
            }
        };
        match existing.skips(source, dest) {
            Some(why) => skipped.push(left_out(&job, why)),
            None => copied.push(job),
        }
    }
    (copied, skipped)
}

/// The result of a file not copied, and why.
pub(super) fn left_out(job: &Job, why: &str) -> FileResult {
    let (source, destination) = match job {
        Job::Download { rpath, target, .. } => (
            rpath.clone(),
            target
                .as_ref()
                .map_or("-".into(), |t| t.display().to_string()),
        ),
        Job::Upload { local, rpath, .. } => (local.display().to_string(), rpath.clone()),
    };
    FileResult {
        source,
        destination,
        skipped: Some(why.to_string()),
        size: job.size(),
        ..FileResult::default()
    }
}

/// Remote directories listed once each, for the files of an upload.
#[derive(Default)]
pub(super) struct RemoteDirs(HashMap<String, Vec<Entry>>);

impl RemoteDirs {
    /// The size and time of the remote file `rpath`, if it is one (a directory that cannot
    /// be listed holds nothing).
    pub(super) fn stamp(&mut self, c: &mut Connection, rpath: &str) -> Option<Stamp> {
        let (dir, name) = match rpath.rsplit_once('/') {
            Some(("", name)) => ("/", name),
            Some((dir, name)) => (dir, name),
            None => ("", rpath),
        };
        let entries = self
            .0
            .entry(dir.to_string())
            .or_insert_with(|| c.list(dir).unwrap_or_default());
        entries
            .iter()
            .find(|e| e.name == name && e.kind == EntryKind::File)
            .map(|e| Stamp {
                size: Some(e.size),
                modified: Some(e.modified),
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(size: u64, modified: i64) -> Stamp {
        Stamp {
            size: Some(size),
            modified: Some(modified),
        }
    }

    #[test]
    fn update_replaces_only_older_destinations_no_clobber_none() {
        let src = at(10, 1000);
        // Nothing there: always copied.
        for e in [Existing::Replace, Existing::Keep, Existing::Older] {
            assert_eq!(e.skips(src, None), None);
        }
        assert_eq!(Existing::Replace.skips(src, Some(at(10, 2000))), None);
        assert!(Existing::Keep.skips(src, Some(at(3, 1))).is_some());
        // --update: a newer destination, or the same time and size, stays.
        assert!(Existing::Older.skips(src, Some(at(3, 2000))).is_some());
        assert!(Existing::Older.skips(src, Some(at(10, 1000))).is_some());
        // An older one, or as old with another size (a cut copy), is replaced.
        assert_eq!(Existing::Older.skips(src, Some(at(10, 999))), None);
        assert_eq!(Existing::Older.skips(src, Some(at(7, 1000))), None);
        // Without the source's time nothing can be judged: copied.
        let unknown = Stamp {
            size: Some(10),
            modified: None,
        };
        assert_eq!(Existing::Older.skips(unknown, Some(at(10, 2000))), None);
    }
}
