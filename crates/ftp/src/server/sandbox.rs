//! The served tree: maps virtual paths to local ones and refuses anything that would leave it.
//!
//! Names are normalised by [`VPath`]; symbolic links are resolved here with `canonicalize` and the
//! result must stay under the canonical root. Files are opened with `O_NOFOLLOW`, so a link swapped
//! in after the check is refused rather than followed.

use fatpipe_net::partial;
use fatpipe_proto::listing::{Entry, EntryKind};
use fatpipe_proto::VPath;
use std::fs::{File, Metadata, OpenOptions};
use std::io::{self, ErrorKind};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// Why a path operation was refused or failed.
#[derive(Debug, thiserror::Error)]
pub enum FsError {
    /// Nothing exists at that path.
    #[error("No such file or directory")]
    NotFound,
    /// The path leads outside the served tree (reported like a permission problem).
    #[error("Permission denied")]
    Outside,
    /// The operation does not apply to this kind of object.
    #[error("{0}")]
    WrongKind(&'static str),
    /// The file system refused or failed.
    #[error("{0}")]
    Io(#[from] io::Error),
}

/// The root of a served tree.
#[derive(Debug, Clone)]
pub struct Sandbox {
    root: PathBuf,
}

impl Sandbox {
    /// A sandbox at `root`, which must be an existing directory.
    pub fn new(root: &Path) -> io::Result<Self> {
        let root = root.canonicalize()?;
        if !root.is_dir() {
            return Err(io::Error::new(
                ErrorKind::InvalidInput,
                format!("{} is not a directory", root.display()),
            ));
        }
        Ok(Sandbox { root })
    }

    fn local(&self, v: &VPath) -> PathBuf {
        let mut p = self.root.clone();
        p.extend(v.components());
        p
    }

    fn inside(&self, p: &Path) -> bool {
        p.starts_with(&self.root)
    }

    /// The local path of an existing object, with every link resolved inside the tree.
    pub fn existing(&self, v: &VPath) -> Result<PathBuf, FsError> {
        let local = self.local(v);
        match local.canonicalize() {
            Ok(p) if self.inside(&p) => Ok(p),
            Ok(_) => Err(FsError::Outside),
            // A dangling link: the name exists but leads nowhere we can serve.
            Err(e) if e.kind() == ErrorKind::NotFound && local.symlink_metadata().is_ok() => {
                Err(FsError::Outside)
            }
            Err(e) if e.kind() == ErrorKind::NotFound => Err(FsError::NotFound),
            Err(e) => Err(e.into()),
        }
    }

    /// The local path at which `v` may be created or replaced: its parent is inside the tree, and
    /// if the name exists as a link, the link leads inside too.
    pub fn creatable(&self, v: &VPath) -> Result<PathBuf, FsError> {
        let name = v
            .file_name()
            .ok_or(FsError::WrongKind("Cannot replace the root directory"))?;
        let parent = self.existing(&v.parent())?;
        if !parent.is_dir() {
            return Err(FsError::NotFound);
        }
        let path = parent.join(name);
        match path.symlink_metadata() {
            Ok(m) if m.file_type().is_symlink() => self.existing(v),
            _ => Ok(path),
        }
    }

    /// Metadata of an existing object (links followed inside the tree).
    pub fn metadata(&self, v: &VPath) -> Result<(PathBuf, Metadata), FsError> {
        let p = self.existing(v)?;
        let m = p.metadata()?;
        Ok((p, m))
    }

    /// Opens an existing regular file for reading.
    pub fn open_read(&self, v: &VPath) -> Result<(File, Metadata), FsError> {
        let (p, m) = self.metadata(v)?;
        if !m.is_file() {
            return Err(FsError::WrongKind("Not a plain file"));
        }
        let f = OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NOFOLLOW)
            .open(p)?;
        Ok((f, m))
    }

    /// Opens a file for writing from where `at` says; returns it and the offset writing starts
    /// at (everything before it is kept, everything after it dropped, except with `Keep`). A
    /// file an earlier transfer left incomplete counts only what it holds in order (its
    /// [`partial`] record): appending continues there, and a restart past it is refused, so a
    /// resume never leaves a hole.
    pub fn open_write(&self, v: &VPath, at: WriteAt) -> Result<(File, u64), FsError> {
        let p = self.creatable(v)?;
        if p.is_dir() {
            return Err(FsError::WrongKind("Is a directory"));
        }
        let mut o = OpenOptions::new();
        o.write(true).create(true).custom_flags(libc::O_NOFOLLOW);
        if at == WriteAt::Start {
            o.truncate(true);
        }
        let f = o.open(&p)?;
        let start = match at {
            WriteAt::Start => 0,
            WriteAt::Keep => return Ok((f, 0)),
            WriteAt::End => partial::held(&f)?.prefix(),
            WriteAt::Offset(offset) => {
                if offset > partial::held(&f)?.prefix() {
                    return Err(FsError::WrongKind(
                        "Restart offset is beyond what the file holds (its end, or its first gap)",
                    ));
                }
                offset
            }
        };
        f.set_len(start)?;
        use std::io::Seek;
        (&f).seek(io::SeekFrom::Start(start))?;
        Ok((f, start))
    }

    /// The entries of a directory, sorted by name. Links that lead outside the tree or nowhere
    /// are left out: they cannot be used through this server.
    pub fn list_dir(&self, v: &VPath) -> Result<Vec<Entry>, FsError> {
        let (p, m) = self.metadata(v)?;
        if !m.is_dir() {
            return Err(FsError::WrongKind("Not a directory"));
        }
        let mut out = Vec::new();
        for item in std::fs::read_dir(p)? {
            let item = item?;
            let Some(name) = item.file_name().to_str().map(str::to_string) else {
                continue;
            };
            if let Ok((_, meta)) = self.metadata(&v.join(&name)) {
                out.push(entry(name, &meta));
            }
        }
        out.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(out)
    }
}

/// A listing entry for an object with metadata `m`.
pub fn entry(name: String, m: &Metadata) -> Entry {
    let kind = if m.is_dir() {
        EntryKind::Dir
    } else if m.is_file() {
        EntryKind::File
    } else {
        EntryKind::Other
    };
    Entry {
        name,
        kind,
        size: m.len(),
        modified: m.mtime(),
        mode: m.mode() & 0o7777,
    }
}

/// Bytes `file` may grow to: its length plus the room left on its file system for this user.
pub fn room(file: &File) -> io::Result<u64> {
    let st = nix::sys::statvfs::fstatvfs(file)?;
    let free = st.blocks_available().saturating_mul(st.fragment_size());
    Ok(file.metadata()?.len().saturating_add(free))
}

/// Where writing into a file starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteAt {
    /// At 0, the file emptied (`STOR`).
    Start,
    /// At this offset (`REST` then `STOR`); must not be past what the file holds in order.
    Offset(u64),
    /// Where the file's contents end (`APPE`).
    End,
    /// Nothing dropped: blocks land at their own offsets (`ESTO`).
    Keep,
}

/// Renames `from` to `to` unless `to` exists (atomically, with `renameat2(RENAME_NOREPLACE)`;
/// on a file system without it, with a check just before). An existing `to` is `AlreadyExists`.
pub fn rename_no_replace(from: &Path, to: &Path) -> io::Result<()> {
    use nix::fcntl::{renameat2, RenameFlags};
    match renameat2(None, from, None, to, RenameFlags::RENAME_NOREPLACE) {
        Ok(()) => Ok(()),
        Err(nix::errno::Errno::EINVAL | nix::errno::Errno::ENOSYS) => {
            if to.symlink_metadata().is_ok() {
                return Err(io::Error::from(io::ErrorKind::AlreadyExists));
            }
            std::fs::rename(from, to)
        }
        Err(e) => Err(e.into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    fn setup() -> (tempfile::TempDir, tempfile::TempDir, Sandbox) {
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("secret"), b"x").unwrap();
        let root = tempfile::tempdir().unwrap();
        std::fs::create_dir(root.path().join("sub")).unwrap();
        std::fs::write(root.path().join("sub/in"), b"in").unwrap();
        symlink(outside.path().join("secret"), root.path().join("out_link")).unwrap();
        symlink(outside.path(), root.path().join("out_dir")).unwrap();
        symlink(outside.path().join("missing"), root.path().join("dangling")).unwrap();
        symlink("sub/in", root.path().join("in_link")).unwrap();
        let sb = Sandbox::new(root.path()).unwrap();
        (outside, root, sb)
    }

    fn v(s: &str) -> VPath {
        VPath::root().join(s)
    }

    #[test]
    fn links_out_of_the_tree_are_refused() {
        let (outside, _root, sb) = setup();
        assert!(matches!(
            sb.open_read(&v("out_link")),
            Err(FsError::Outside)
        ));
        assert!(matches!(
            sb.open_read(&v("out_dir/secret")),
            Err(FsError::Outside)
        ));
        assert!(matches!(
            sb.open_write(&v("out_link"), WriteAt::Start),
            Err(FsError::Outside)
        ));
        assert!(matches!(
            sb.open_write(&v("out_dir/new"), WriteAt::Start),
            Err(FsError::Outside)
        ));
        // A dangling link must not let a write create the file it points at.
        assert!(matches!(
            sb.open_write(&v("dangling"), WriteAt::Start),
            Err(FsError::Outside)
        ));
        assert!(!outside.path().join("missing").exists());
        assert!(!outside.path().join("new").exists());
        assert_eq!(std::fs::read(outside.path().join("secret")).unwrap(), b"x");
    }

    #[test]
    fn links_inside_the_tree_work_and_listing_hides_the_rest() {
        let (_o, _root, sb) = setup();
        assert!(sb.open_read(&v("in_link")).is_ok());
        let names: Vec<String> = sb
            .list_dir(&VPath::root())
            .unwrap()
            .into_iter()
            .map(|e| e.name)
            .collect();
        assert_eq!(names, vec!["in_link", "sub"]);
    }

    #[test]
    fn restart_offset_truncates_and_positions() {
        let (_o, root, sb) = setup();
        use std::io::Write;
        let (mut f, at) = sb.open_write(&v("sub/in"), WriteAt::Offset(1)).unwrap();
        assert_eq!(at, 1);
        f.write_all(b"Z").unwrap();
        assert_eq!(std::fs::read(root.path().join("sub/in")).unwrap(), b"iZ");
        assert!(sb.open_write(&v("sub/in"), WriteAt::Offset(10)).is_err());
    }

    #[test]
    fn an_incomplete_file_counts_only_what_it_holds_in_order() {
        let (_o, root, sb) = setup();
        use std::io::Write;
        let path = root.path().join("sub/part");
        std::fs::write(&path, [1u8; 100]).unwrap();
        let f = File::open(&path).unwrap();
        let held = fatpipe_proto::ranges::RangeSet::parse("0-40,60-100").unwrap();
        partial::mark(&f, &held).unwrap();
        // A restart past the first gap would leave a hole: refused.
        assert!(sb.open_write(&v("sub/part"), WriteAt::Offset(50)).is_err());
        // Appending continues at the gap, dropping what lies beyond it.
        let (mut f, at) = sb.open_write(&v("sub/part"), WriteAt::End).unwrap();
        assert_eq!(at, 40);
        f.write_all(b"xy").unwrap();
        assert_eq!(std::fs::metadata(&path).unwrap().len(), 42);
    }
}
