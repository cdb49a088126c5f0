//! The served tree, for every front-end: each file-system operation resolves its path beneath
//! one handle on the root (`openat2` with `RESOLVE_BENEATH`) and acts on what it resolved, by
//! handle, never by a path checked first and used after. A symbolic link inside the tree is
//! followed where a file is read or entered (it cannot lead out: one that would, or an
//! absolute one, is refused as it is met); it is never followed where something is created,
//! removed, renamed or written: those act on the link itself, from a handle on its directory.

mod upload;

pub use upload::{Upload, WriteAt};

use fatpipe_proto::listing::{Entry, EntryKind};
use fatpipe_proto::VPath;
use nix::errno::Errno;
use nix::fcntl::{OFlag, OpenHow, ResolveFlag};
use nix::sys::stat::{FileStat, Mode};
use std::fs::{File, Metadata};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

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

impl From<Errno> for FsError {
    fn from(e: Errno) -> FsError {
        match e {
            Errno::EXDEV => FsError::Outside,
            Errno::ENOENT | Errno::ENOTDIR => FsError::NotFound,
            e => FsError::Io(e.into()),
        }
    }
}

/// The root of a served tree: an open handle on it, which every path is resolved beneath.
#[derive(Debug, Clone)]
pub struct Sandbox {
    root: Arc<OwnedFd>,
}

/// How often an `openat2` that met a concurrent rename (`EAGAIN`: the kernel could not rule
/// out an escape) is tried again before the operation fails.
const RESOLVE_TRIES: usize = 64;

/// Flags every open carries.
fn base_flags() -> OFlag {
    OFlag::O_CLOEXEC | OFlag::O_NOCTTY
}

impl Sandbox {
    /// A sandbox at `root`, which must be an existing directory.
    pub fn new(root: &Path) -> io::Result<Self> {
        use std::os::unix::fs::OpenOptionsExt;
        let path = root.canonicalize()?;
        if !path.is_dir() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{} is not a directory", path.display()),
            ));
        }
        let root = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_PATH | libc::O_DIRECTORY)
            .open(&path)?;
        let sandbox = Sandbox {
            root: Arc::new(root.into()),
        };
        // Refuse to start on a kernel without openat2 rather than fail every command later.
        sandbox
            .resolve(&VPath::root(), OFlag::O_PATH | OFlag::O_DIRECTORY)
            .map_err(|e| io::Error::other(format!("cannot resolve paths beneath it: {e}")))?;
        Ok(sandbox)
    }

    /// Opens `v` with `flags`, resolved beneath the root (links inside the tree followed).
    fn resolve(&self, v: &VPath, flags: OFlag) -> Result<OwnedFd, FsError> {
        let rel = relative(v);
        // openat2 refuses O_PATH with flags that open() would ignore beside it.
        let extra = if flags.contains(OFlag::O_PATH) {
            OFlag::O_CLOEXEC
        } else {
            base_flags()
        };
        let how = OpenHow::new()
            .flags(flags | extra)
            .resolve(ResolveFlag::RESOLVE_BENEATH | ResolveFlag::RESOLVE_NO_MAGICLINKS);
        for _ in 0..RESOLVE_TRIES {
            match nix::fcntl::openat2(self.root.as_raw_fd(), rel.as_path(), how) {
                // SAFETY: openat2 returned a new descriptor that nothing else owns.
                Ok(fd) => return Ok(unsafe { OwnedFd::from_raw_fd(fd) }),
                Err(Errno::EAGAIN | Errno::EINTR) => continue,
                Err(e) => return Err(e.into()),
            }
        }
        Err(FsError::Io(io::Error::new(
            io::ErrorKind::WouldBlock,
            "the path kept changing while it was resolved",
        )))
    }

    /// A handle on `v`'s directory (links on the way followed inside the tree) and `v`'s own
    /// name in it; the root has none.
    pub(crate) fn parent<'v>(&self, v: &'v VPath) -> Result<(OwnedFd, &'v str), FsError> {
        let name = v
            .file_name()
            .ok_or(FsError::WrongKind("Not allowed on the root directory"))?;
        let dir = self.resolve(&v.parent(), OFlag::O_PATH | OFlag::O_DIRECTORY)?;
        Ok((dir, name))
    }

    /// Metadata of an existing object (links followed inside the tree).
    pub fn metadata(&self, v: &VPath) -> Result<Metadata, FsError> {
        let fd = self.resolve(v, OFlag::O_PATH)?;
        Ok(File::from(fd).metadata()?)
    }

    /// The object `v` names itself, a link not followed: what `RNFR` renames, what `DELE`
    /// removes.
    pub fn entry_of(&self, v: &VPath) -> Result<Entry, FsError> {
        let (dir, name) = self.parent(v)?;
        let st = lstat_at(&dir, name)?;
        Ok(entry_from_stat(name.to_string(), &st))
    }

    /// Opens an existing regular file for reading.
    pub fn open_read(&self, v: &VPath) -> Result<(File, Metadata), FsError> {
        // Non-blocking, so that a FIFO cannot hold the session; the kind is checked on what
        // was opened.
        let fd = self.resolve(v, OFlag::O_RDONLY | OFlag::O_NONBLOCK)?;
        let file = regular(fd)?;
        let m = file.metadata()?;
        Ok((file, m))
    }

    /// Sets a regular file's modification time (`MFMT`).
    pub fn set_modified(&self, v: &VPath, at: std::time::SystemTime) -> Result<(), FsError> {
        let fd = self.resolve(v, OFlag::O_RDONLY | OFlag::O_NONBLOCK)?;
        regular(fd)?.set_modified(at)?;
        Ok(())
    }

    /// Makes the directory `v`.
    pub fn make_dir(&self, v: &VPath) -> Result<(), FsError> {
        let (dir, name) = self.parent(v)?;
        nix::sys::stat::mkdirat(Some(dir.as_raw_fd()), name, Mode::from_bits_truncate(0o777))
            .map_err(io_error)?;
        Ok(())
    }

    /// Removes the file (or link, or other non-directory) `v`: a link itself, never what it
    /// points at.
    pub fn remove_file(&self, v: &VPath) -> Result<(), FsError> {
        let (dir, name) = self.parent(v)?;
        if kind_of(&lstat_at(&dir, name)?) == EntryKind::Dir {
            return Err(FsError::WrongKind("Is a directory; use RMD"));
        }
        // Without AT_REMOVEDIR a directory swapped in meanwhile is refused (EISDIR).
        nix::unistd::unlinkat(
            Some(dir.as_raw_fd()),
            name,
            nix::unistd::UnlinkatFlags::NoRemoveDir,
        )
        .map_err(io_error)?;
        Ok(())
    }

    /// Removes the empty directory `v` (never the root; a link to a directory is not one).
    pub fn remove_dir(&self, v: &VPath) -> Result<(), FsError> {
        let (dir, name) = self.parent(v)?;
        match nix::unistd::unlinkat(
            Some(dir.as_raw_fd()),
            name,
            nix::unistd::UnlinkatFlags::RemoveDir,
        ) {
            Err(Errno::ENOTDIR) => Err(FsError::WrongKind("Not a directory")),
            r => r.map_err(|e| io_error(e).into()),
        }
    }

    /// Renames `from` to `to`, unless `to` exists (atomically: `renameat2(RENAME_NOREPLACE)`);
    /// an existing `to` is an `AlreadyExists` error. A link is renamed, not what it points at.
    pub fn rename(&self, from: &VPath, to: &VPath) -> Result<(), FsError> {
        let (from_dir, from_name) = self.parent(from)?;
        let (to_dir, to_name) = self.parent(to)?;
        rename_no_replace(&from_dir, from_name, &to_dir, to_name)?;
        Ok(())
    }

    /// The entries of a directory, sorted by name, each as it is: a link is listed as a link
    /// (wherever it points), never as its target. Unfinished uploads are left out.
    pub fn list_dir(&self, v: &VPath) -> Result<Vec<Entry>, FsError> {
        let fd = self.resolve(v, OFlag::O_RDONLY | OFlag::O_DIRECTORY)?;
        let dir_fd = fd.try_clone()?;
        let mut dir = nix::dir::Dir::from_fd(fd_into_raw(fd)).map_err(io_error)?;
        let mut out = Vec::new();
        for item in dir.iter() {
            let item = item.map_err(io_error)?;
            let Ok(name) = item.file_name().to_str() else {
                continue;
            };
            if name == "." || name == ".." || upload::is_temporary(name) {
                continue;
            }
            // An entry removed meanwhile is simply not listed.
            if let Ok(st) = lstat_at(&dir_fd, name) {
                out.push(entry_from_stat(name.to_string(), &st));
            }
        }
        out.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(out)
    }

    /// Prepares an upload into `v`, writing from where `at` says; nothing that exists is
    /// changed until [`Upload::begin`] (see [`Upload`]).
    pub fn upload(&self, v: &VPath, at: WriteAt) -> Result<Upload, FsError> {
        let (dir, name) = self.parent(v)?;
        Upload::prepare(dir, name, at)
    }
}

/// `v` relative to the root (`.` for the root itself).
fn relative(v: &VPath) -> PathBuf {
    let mut p = PathBuf::from(".");
    p.extend(v.components());
    p
}

fn fd_into_raw(fd: OwnedFd) -> std::os::fd::RawFd {
    std::os::fd::IntoRawFd::into_raw_fd(fd)
}

fn io_error(e: Errno) -> io::Error {
    e.into()
}

/// `name` in `dir`, a link not followed.
fn lstat_at(dir: &OwnedFd, name: &str) -> Result<FileStat, FsError> {
    Ok(nix::sys::stat::fstatat(
        Some(dir.as_raw_fd()),
        name,
        nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW,
    )?)
}

/// `fd` as a file if it is a regular one (cleared of `O_NONBLOCK`).
fn regular(fd: OwnedFd) -> Result<File, FsError> {
    let file = File::from(fd);
    if !file.metadata()?.is_file() {
        return Err(FsError::WrongKind("Not a plain file"));
    }
    let flags = nix::fcntl::fcntl(file.as_raw_fd(), nix::fcntl::FcntlArg::F_GETFL)?;
    let flags = OFlag::from_bits_truncate(flags) - OFlag::O_NONBLOCK;
    nix::fcntl::fcntl(file.as_raw_fd(), nix::fcntl::FcntlArg::F_SETFL(flags))?;
    Ok(file)
}

/// Renames `from_name` in `from_dir` to `to_name` in `to_dir` unless that exists (on a file
/// system without `RENAME_NOREPLACE`, with a check just before). An existing target is
/// `AlreadyExists`.
pub(crate) fn rename_no_replace(
    from_dir: &OwnedFd,
    from_name: &str,
    to_dir: &OwnedFd,
    to_name: &str,
) -> io::Result<()> {
    use nix::fcntl::{renameat, renameat2, RenameFlags};
    let (fd, td) = (Some(from_dir.as_raw_fd()), Some(to_dir.as_raw_fd()));
    match renameat2(fd, from_name, td, to_name, RenameFlags::RENAME_NOREPLACE) {
        Ok(()) => Ok(()),
        Err(Errno::EINVAL | Errno::ENOSYS) => {
            if lstat_at(to_dir, to_name).is_ok() {
                return Err(io::Error::from(io::ErrorKind::AlreadyExists));
            }
            renameat(fd, from_name, td, to_name).map_err(io_error)
        }
        Err(e) => Err(e.into()),
    }
}

/// What the mode's type bits say an object is.
fn kind_from_mode(mode: u32) -> EntryKind {
    match mode & libc::S_IFMT {
        libc::S_IFDIR => EntryKind::Dir,
        libc::S_IFREG => EntryKind::File,
        libc::S_IFLNK => EntryKind::Link,
        _ => EntryKind::Other,
    }
}

fn kind_of(st: &FileStat) -> EntryKind {
    kind_from_mode(st.st_mode)
}

fn entry_from_stat(name: String, st: &FileStat) -> Entry {
    Entry {
        name,
        kind: kind_of(st),
        size: st.st_size.max(0) as u64,
        modified: st.st_mtime,
        mode: st.st_mode & 0o7777,
    }
}

/// A listing entry for an object with metadata `m`.
pub fn entry(name: String, m: &Metadata) -> Entry {
    Entry {
        name,
        kind: kind_from_mode(m.mode()),
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

#[cfg(test)]
mod tests;
