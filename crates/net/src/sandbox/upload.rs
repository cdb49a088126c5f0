//! An upload's file: nothing that exists is truncated, created or replaced before the data
//! connection does. A new file or a replaced one is written under a temporary name in its
//! directory and renamed to its own name when the upload completes, so a failed replacement
//! leaves the old file as it was; a new file whose upload failed after data arrived takes its
//! name with what it holds (and MODE E's partial record), so that it can be resumed. A file
//! continued in place (`REST` + `STOR`, `APPE`, `ESTO`) is cut back to where writing starts
//! only when [`Upload::begin`] is called. A symbolic link is never written through nor
//! replaced by an upload.

use super::{kind_of, lstat_at, regular, rename_no_replace, FsError};
use crate::partial;
use fatpipe_proto::listing::EntryKind;
use nix::fcntl::OFlag;
use nix::sys::stat::Mode;
use std::fs::File;
use std::io::{self, Seek};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// Where writing into a file starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteAt {
    /// At 0, the file replaced (`STOR`).
    Start,
    /// At this offset (`REST` then `STOR`); must not be past what the file holds in order.
    Offset(u64),
    /// Where the file's contents end (`APPE`).
    End,
    /// Nothing dropped: blocks land at their own offsets (`ESTO`).
    Keep,
}

/// What temporary upload files are called (then a random part): hidden from listings.
const TEMP_PREFIX: &str = ".fatpipe-upload-";

/// Whether `name` is an upload still being written.
pub(super) fn is_temporary(name: &str) -> bool {
    name.starts_with(TEMP_PREFIX)
}

/// An upload's file, opened but not yet changing anything that exists. Dropped without
/// [`Upload::commit`], it is abandoned: a temporary file is removed, unless the upload made a
/// new file and data arrived, which then takes the file's name.
#[derive(Debug)]
pub struct Upload {
    dir: OwnedFd,
    name: String,
    file: File,
    /// The temporary name written to, renamed to `name` at the end; `None`: in place.
    temp: Option<String>,
    /// `name` existed when the upload was prepared.
    replaces: bool,
    start: u64,
    at: WriteAt,
}

impl Upload {
    /// Opens the file `name` in `dir` an upload writes, as `at` says.
    pub(super) fn prepare(dir: OwnedFd, name: &str, at: WriteAt) -> Result<Upload, FsError> {
        let existing = match lstat_at(&dir, name) {
            Ok(st) => Some(st),
            Err(FsError::NotFound) => None,
            Err(e) => return Err(e),
        };
        match existing.as_ref().map(kind_of) {
            Some(EntryKind::Dir) => return Err(FsError::WrongKind("Is a directory")),
            // Never written through, never silently replaced.
            Some(EntryKind::Link) => {
                return Err(FsError::WrongKind(
                    "Is a symbolic link; delete it first to replace it",
                ))
            }
            _ => {}
        }
        if existing.is_some() && at != WriteAt::Start {
            let fd = nix::fcntl::openat(
                Some(dir.as_raw_fd()),
                name,
                OFlag::O_RDWR | OFlag::O_NOFOLLOW | OFlag::O_NONBLOCK | super::base_flags(),
                Mode::empty(),
            )?;
            // SAFETY: openat returned a new descriptor that nothing else owns.
            let file = regular(unsafe { OwnedFd::from_raw_fd(fd) })?;
            let start = match at {
                WriteAt::Start | WriteAt::Keep => 0,
                WriteAt::End => partial::held(&file)?.prefix(),
                WriteAt::Offset(offset) => {
                    if offset > partial::held(&file)?.prefix() {
                        return Err(beyond());
                    }
                    offset
                }
            };
            return Ok(Upload {
                dir,
                name: name.to_string(),
                file,
                temp: None,
                replaces: true,
                start,
                at,
            });
        }
        if matches!(at, WriteAt::Offset(n) if n > 0) {
            return Err(beyond());
        }
        // A replaced file's permissions carry over to its new content.
        let mode = existing.map_or(0o666, |st| st.st_mode & 0o777);
        let (temp, file) = create_temporary(&dir, mode)?;
        if existing.is_some() {
            // Exactly the old permissions, whatever the umask took from them.
            let _ = nix::sys::stat::fchmod(file.as_raw_fd(), Mode::from_bits_truncate(mode));
        }
        Ok(Upload {
            dir,
            name: name.to_string(),
            file,
            temp: Some(temp),
            replaces: existing.is_some(),
            start: 0,
            at,
        })
    }

    /// The file the data goes into.
    pub fn file(&self) -> &File {
        &self.file
    }

    /// Where writing starts.
    pub fn start(&self) -> u64 {
        self.start
    }

    /// A second handle on the file, to read what has arrived (a hash beside the transfer).
    pub fn reader(&self) -> io::Result<File> {
        self.file.try_clone()
    }

    /// The data connection exists: a file continued in place is cut back to where writing
    /// starts, and positioned there.
    pub fn begin(&mut self) -> io::Result<()> {
        if self.temp.is_none() && self.at != WriteAt::Keep {
            self.file.set_len(self.start)?;
        }
        (&self.file).seek(io::SeekFrom::Start(self.start))?;
        Ok(())
    }

    /// The upload is complete: the file takes its name (replacing what had it).
    pub fn commit(mut self) -> io::Result<()> {
        let Some(temp) = self.temp.take() else {
            return Ok(());
        };
        let dir = Some(self.dir.as_raw_fd());
        if let Err(e) = nix::fcntl::renameat(dir, temp.as_str(), dir, self.name.as_str()) {
            self.remove(&temp);
            return Err(e.into());
        }
        Ok(())
    }

    /// The upload failed and what arrived is not kept: a new file or a replacement goes (the
    /// old file stays as it was); a file continued in place keeps what it holds.
    pub fn discard(mut self) {
        if let Some(temp) = self.temp.take() {
            self.remove(&temp);
        }
    }

    fn remove(&self, temp: &str) {
        let _ = nix::unistd::unlinkat(
            Some(self.dir.as_raw_fd()),
            temp,
            nix::unistd::UnlinkatFlags::NoRemoveDir,
        );
    }
}

impl Drop for Upload {
    fn drop(&mut self) {
        let Some(temp) = self.temp.take() else {
            return;
        };
        let arrived = self.file.metadata().is_ok_and(|m| m.len() > 0);
        if arrived
            && !self.replaces
            && rename_no_replace(&self.dir, &temp, &self.dir, &self.name).is_ok()
        {
            return;
        }
        self.remove(&temp);
    }
}

fn beyond() -> FsError {
    FsError::WrongKind("Restart offset is beyond what the file holds (its end, or its first gap)")
}

/// A new file of `mode` with a name of its own in `dir`.
fn create_temporary(dir: &OwnedFd, mode: u32) -> Result<(String, File), FsError> {
    use std::hash::{BuildHasher, RandomState};
    static COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let mut last = None;
    for _ in 0..8 {
        let n = COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let random = RandomState::new().hash_one((std::process::id(), n));
        let name = format!("{TEMP_PREFIX}{random:016x}");
        match nix::fcntl::openat(
            Some(dir.as_raw_fd()),
            name.as_str(),
            OFlag::O_RDWR
                | OFlag::O_CREAT
                | OFlag::O_EXCL
                | OFlag::O_NOFOLLOW
                | super::base_flags(),
            Mode::from_bits_truncate(mode),
        ) {
            // SAFETY: openat returned a new descriptor that nothing else owns.
            Ok(fd) => return Ok((name, File::from(unsafe { OwnedFd::from_raw_fd(fd) }))),
            Err(e @ nix::errno::Errno::EEXIST) => last = Some(e),
            Err(e) => return Err(e.into()),
        }
    }
    Err(FsError::Io(last.map_or_else(
        || io::Error::other("no temporary name"),
        io::Error::from,
    )))
}
