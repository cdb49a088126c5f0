//! Where a download writes until it is complete: `NAME.fatpipe-part` beside the destination,
//! carrying the record of the byte ranges it holds (`fatpipe_net::partial`), renamed over the
//! destination only once the file is complete and verified. A failed download never touches
//! what the destination held, and a resume continues from what really arrived, holes included.

use anyhow::Context;
use fatpipe_net::partial;
use fatpipe_proto::ranges::RangeSet;
use std::fs::{File, OpenOptions};
use std::io::{Seek, SeekFrom};
use std::path::{Path, PathBuf};

/// What a partial download's name ends with.
pub const SUFFIX: &str = ".fatpipe-part";

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
        let existed = path.exists();
        if resume && !existed {
            if let Some(m) = std::fs::metadata(target).ok().filter(|m| m.is_file()) {
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
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .with_context(|| format!("cannot write {}", path.display()))?;
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
