//! Where a download writes until it is complete: `NAME.fatpipe-part` beside the destination,
//! carrying the record of the byte ranges it holds (`fatpipe_net::partial`), renamed over the
//! destination only once the file is complete and verified. A failed download never touches
//! what the destination held, and a resume continues from what really arrived, holes included.

use anyhow::Context;
use fatpipe_net::partial;
use fatpipe_proto::ranges::RangeSet;
use std::fs::{File, OpenOptions};
use std::io::{Seek, SeekFrom};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// What a partial download's name ends with.
pub const SUFFIX: &str = ".fatpipe-part";

/// What a download copies from, as the server gave it: a partial copy remembers it, and a
/// resume whose source has changed since starts over instead of joining old and new bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Source {
    /// Its size.
    pub size: Option<u64>,
    /// Its modification time (seconds since the epoch).
    pub modified: Option<i64>,
}

impl Source {
    /// Whether `now` is another file than `self` (only what both know is compared).
    pub fn changed(&self, now: &Source) -> bool {
        let differ = |a: Option<i64>, b: Option<i64>| a.zip(b).is_some_and(|(a, b)| a != b);
        differ(self.size.map(|s| s as i64), now.size.map(|s| s as i64))
            || differ(self.modified, now.modified)
    }

    fn encode(&self) -> String {
        let word = |v: Option<i64>| v.map_or("-".to_string(), |v| v.to_string());
        format!(
            "size={} modified={}",
            word(self.size.map(|s| s as i64)),
            word(self.modified)
        )
    }

    fn decode(text: &str) -> Source {
        let mut s = Source::default();
        for (key, value) in text.split_whitespace().filter_map(|w| w.split_once('=')) {
            match key {
                "size" => s.size = value.parse().ok(),
                "modified" => s.modified = value.parse().ok(),
                _ => {}
            }
        }
        s
    }
}

/// The attribute a partial file keeps its [`Source`] in.
const SOURCE_ATTR: &str = "user.fatpipe.source";

/// The partial file of one download.
#[derive(Debug)]
pub struct Part {
    path: PathBuf,
    target: PathBuf,
    /// The open partial file.
    pub file: File,
    /// Whether it was there before this run (then it is never removed).
    existed: bool,
}

/// The partial file's name for `target`.
pub fn part_path(target: &Path) -> PathBuf {
    let mut name = target.file_name().unwrap_or_default().to_os_string();
    name.push(SUFFIX);
    target.with_file_name(name)
}

impl Part {
    /// Opens the partial file of `target` and says what it holds. Without `resume` it starts
    /// empty. With it: what a partial file from an earlier run holds, or, when there is none,
    /// the destination's own bytes, taken over as a prefix (a partial copy that another
    /// program wrote in order; `upto` bounds it: a longer file is not a partial copy).
    pub fn open(
        target: &Path,
        resume: bool,
        upto: Option<u64>,
    ) -> anyhow::Result<(Part, RangeSet)> {
        let path = part_path(target);
        let existed = path.symlink_metadata().is_ok();
        if resume && !existed {
            // Only a regular file is taken over, never what a link points at.
            if let Some(m) = std::fs::symlink_metadata(target)
                .ok()
                .filter(|m| m.is_file())
            {
                if let Some(total) = upto.filter(|t| m.len() > *t) {
                    anyhow::bail!(
                        "{} has {} bytes, more than the remote file's {total}: not a partial copy of it",
                        target.display(),
                        m.len()
                    );
                }
                // Moved aside, not copied: if this run fails, the bytes wait under the
                // partial name, with their record.
                std::fs::rename(target, &path).with_context(|| {
                    format!("cannot take {} over as a partial copy", target.display())
                })?;
            }
        }
        let file = open_own(&path)?;
        let mut part = Part {
            path,
            target: target.to_path_buf(),
            file,
            existed,
        };
        let held = if resume {
            partial::held(&part.file)?
        } else {
            RangeSet::default()
        };
        part.hold(&held)?;
        Ok((part, held))
    }

    /// Keeps only `held` (all of it dropped when empty) and records it: from here on the file
    /// says what it holds, whatever happens to this process.
    pub fn hold(&mut self, held: &RangeSet) -> anyhow::Result<()> {
        if held.is_empty() {
            self.file.set_len(0)?;
        }
        if let Err(e) = partial::mark(&self.file, held) {
            tracing::warn!(
                "cannot record what {} holds ({e}): a cut download restarts from its first gap",
                self.path.display()
            );
        }
        Ok(())
    }

    /// Positions the file for a download in order from its first gap; returns that offset.
    pub fn seek_to_gap(&mut self, held: &RangeSet) -> anyhow::Result<u64> {
        let start = held.prefix();
        self.file.set_len(start)?;
        self.file.seek(SeekFrom::Start(start))?;
        Ok(start)
    }

    /// The download failed holding `held`: record it for `--resume`, or remove a partial file
    /// this run created and that holds nothing.
    pub fn failed(self, held: &RangeSet) {
        if held.is_empty() && !self.existed {
            let _ = std::fs::remove_file(&self.path);
            return;
        }
        if partial::mark(&self.file, held).is_err() {
            // Without a record only the bytes in order can be trusted.
            let _ = self.file.set_len(held.prefix());
        }
    }

    /// The download is complete and verified: the partial file becomes the destination.
    pub fn complete(self) -> anyhow::Result<()> {
        partial::clear(&self.file)?;
        {
            use xattr::FileExt;
            let _ = self.file.remove_xattr(SOURCE_ATTR);
        }
        std::fs::rename(&self.path, &self.target).with_context(|| {
            format!(
                "cannot rename {} to {}",
                self.path.display(),
                self.target.display()
            )
        })
    }

    /// Where the partial file is.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The source this partial copy was made from, when it recorded one.
    pub fn source(&self) -> Option<Source> {
        use xattr::FileExt;
        let v = self.file.get_xattr(SOURCE_ATTR).ok().flatten()?;
        Some(Source::decode(&String::from_utf8_lossy(&v)))
    }

    /// Records the source the bytes come from (a file system without user attributes only
    /// loses the check on the next resume).
    pub fn remember(&self, source: &Source) {
        use xattr::FileExt;
        if let Err(e) = self.file.set_xattr(SOURCE_ATTR, source.encode().as_bytes()) {
            tracing::debug!("cannot record the source of {}: {e}", self.path.display());
        }
    }
}

/// Opens (or makes) the partial file at `path`: never through a symbolic link, and never one
/// that another user owns (in a shared directory anyone could plant either, to have this run
/// overwrite their target or take their bytes for this copy's).
fn open_own(path: &Path) -> anyhow::Result<File> {
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
        .map_err(|e| match e.raw_os_error() {
            Some(libc::ELOOP) => anyhow::anyhow!(
                "{} is a symbolic link, not a partial copy this run made: remove it",
                path.display()
            ),
            _ => anyhow::Error::new(e).context(format!("cannot write {}", path.display())),
        })?;
    let m = file.metadata()?;
    if !m.is_file() {
        anyhow::bail!("{} is not a regular file: remove it", path.display());
    }
    if m.uid() != nix::unistd::geteuid().as_raw() {
        anyhow::bail!(
            "{} belongs to another user (uid {}): not a partial copy of this user's; remove it or copy elsewhere",
            path.display(),
            m.uid()
        );
    }
    Ok(file)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ranges(s: &str) -> RangeSet {
        RangeSet::parse(s).unwrap_or_default()
    }

    #[test]
    fn a_failed_download_leaves_the_destination_alone_and_records_what_arrived() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("f");
        std::fs::write(&target, b"old contents").unwrap();
        let (part, held) = Part::open(&target, false, Some(100)).unwrap();
        assert!(held.is_empty());
        std::os::unix::fs::FileExt::write_all_at(&part.file, &[7u8; 50], 20).unwrap();
        part.failed(&ranges("20-70"));
        assert_eq!(std::fs::read(&target).unwrap(), b"old contents");
        // A resume finds exactly what arrived, hole included.
        let (part, held) = Part::open(&target, true, Some(100)).unwrap();
        assert_eq!(held, ranges("20-70"));
        // A run without --resume starts over.
        drop(part);
        let (part, held) = Part::open(&target, false, Some(100)).unwrap();
        assert!(held.is_empty());
        assert_eq!(part.file.metadata().unwrap().len(), 0);
        part.complete().unwrap();
        assert_eq!(std::fs::read(&target).unwrap(), b"");
        assert!(!part_path(&target).exists());
    }

    /// Item 9 of the trust issue: a partial name planted as a link (in a shared directory)
    /// is not followed, and one that another user owns is not taken over.
    #[test]
    fn a_planted_partial_file_is_neither_followed_nor_taken_over() {
        let dir = tempfile::tempdir().unwrap();
        let victim = dir.path().join("victim");
        std::fs::write(&victim, b"someone else's").unwrap();
        let target = dir.path().join("f");
        std::os::unix::fs::symlink(&victim, part_path(&target)).unwrap();
        for resume in [false, true] {
            let e = Part::open(&target, resume, Some(100))
                .unwrap_err()
                .to_string();
            assert!(e.contains("symbolic link"), "{e}");
        }
        assert_eq!(std::fs::read(&victim).unwrap(), b"someone else's");
        std::fs::remove_file(part_path(&target)).unwrap();
        std::fs::write(part_path(&target), [9u8; 10]).unwrap();
        let other = if nix::unistd::geteuid().is_root() {
            65534
        } else {
            return;
        };
        std::os::unix::fs::chown(part_path(&target), Some(other), None).unwrap();
        let e = Part::open(&target, true, Some(100))
            .unwrap_err()
            .to_string();
        assert!(e.contains("another user"), "{e}");
        assert_eq!(std::fs::read(part_path(&target)).unwrap(), [9u8; 10]);
    }

    #[test]
    fn a_partial_copy_remembers_its_source() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("f");
        let (part, _) = Part::open(&target, false, Some(100)).unwrap();
        let was = Source {
            size: Some(100),
            modified: Some(1_700_000_000),
        };
        part.remember(&was);
        std::os::unix::fs::FileExt::write_all_at(&part.file, &[1u8; 50], 0).unwrap();
        part.failed(&ranges("0-50"));
        let (part, held) = Part::open(&target, true, Some(100)).unwrap();
        assert_eq!((held, part.source()), (ranges("0-50"), Some(was)));
        let grown = Source {
            size: Some(120),
            ..was
        };
        let touched = Source {
            modified: Some(1_700_000_001),
            ..was
        };
        assert!(was.changed(&grown) && was.changed(&touched));
        assert!(!was.changed(&Source {
            modified: None,
            ..was
        }));
        part.complete().unwrap();
        let done = File::open(&target).unwrap();
        use xattr::FileExt;
        assert_eq!(done.get_xattr(SOURCE_ATTR).unwrap(), None);
    }

    #[test]
    fn nothing_is_left_behind_when_nothing_arrived() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("typo");
        let (part, _) = Part::open(&target, false, None).unwrap();
        part.failed(&RangeSet::default());
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }

    #[test]
    fn resume_takes_over_a_prefix_written_by_another_program() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("f");
        std::fs::write(&target, [1u8; 40]).unwrap();
        assert!(
            Part::open(&target, true, Some(30)).is_err(),
            "longer than the source"
        );
        let (mut part, held) = Part::open(&target, true, Some(100)).unwrap();
        assert_eq!(held, ranges("0-40"));
        assert!(!target.exists());
        assert_eq!(part.seek_to_gap(&held).unwrap(), 40);
        part.failed(&ranges("0-40"));
        let (_, held) = Part::open(&target, true, Some(100)).unwrap();
        assert_eq!(held, ranges("0-40"));
    }
}
