//! The record of what an incomplete file holds: the byte ranges that really arrived, kept in an
//! extended attribute of the file itself (`user.fatpipe.received`) from before its first byte
//! is written until it is complete. MODE E writes blocks out of order, so a cut transfer leaves
//! holes that the file's length does not show; a resume reads this record instead of trusting
//! the length, and a file without it is complete (or was written in order by someone else).
//!
//! The record only ever names ranges whose bytes were written before it (never more than the
//! file holds), so reading a stale one loses progress, never data.

use fatpipe_proto::ranges::RangeSet;
use std::ffi::CStr;
use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;

const NAME: &CStr = c"user.fatpipe.received";
/// Largest record written: ext4 keeps an attribute in one 4 KiB block. A longer range list is
/// cut to its first ranges, which is still true of the file (less of it is claimed).
const MAX_RECORD: usize = 3800;

/// Records that `file` is incomplete and holds `held`.
pub fn mark(file: &File, held: &RangeSet) -> io::Result<()> {
    let mut n = held.count();
    let mut text = held.to_string();
    while text.len() > MAX_RECORD {
        n = n * 3 / 4;
        text = held.first(n).to_string();
    }
    // SAFETY: a valid descriptor, NUL-terminated name, and a buffer of the length given.
    let r = unsafe {
        libc::fsetxattr(
            file.as_raw_fd(),
            NAME.as_ptr(),
            text.as_ptr().cast(),
            text.len(),
            0,
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// What an incomplete `file` holds, or `None` when it carries no record (complete, or written
/// by another program).
pub fn read(file: &File) -> io::Result<Option<RangeSet>> {
    let mut buf = vec![0u8; MAX_RECORD + 1];
    // SAFETY: a valid descriptor, NUL-terminated name, and a buffer of the length given.
    let n = unsafe {
        libc::fgetxattr(
            file.as_raw_fd(),
            NAME.as_ptr(),
            buf.as_mut_ptr().cast(),
            buf.len(),
        )
    };
    if n < 0 {
        let e = io::Error::last_os_error();
        return match e.raw_os_error() {
            Some(libc::ENODATA) | Some(libc::ENOTSUP) => Ok(None),
            _ => Err(e),
        };
    }
    let text = String::from_utf8_lossy(&buf[..n as usize]);
    if text.trim().is_empty() {
        return Ok(Some(RangeSet::default()));
    }
    // A record that cannot be read claims nothing.
    Ok(Some(RangeSet::parse(&text).unwrap_or_default()))
}

/// Removes the record: `file` is complete.
pub fn clear(file: &File) -> io::Result<()> {
    // SAFETY: a valid descriptor and NUL-terminated name.
    let r = unsafe { libc::fremovexattr(file.as_raw_fd(), NAME.as_ptr()) };
    if r == 0 {
        return Ok(());
    }
    let e = io::Error::last_os_error();
    match e.raw_os_error() {
        Some(libc::ENODATA) | Some(libc::ENOTSUP) => Ok(()),
        _ => Err(e),
    }
}

/// What `file` holds for a resume: its record, or, without one, all of its length.
pub fn held(file: &File) -> io::Result<RangeSet> {
    let mut all = RangeSet::default();
    let len = file.metadata()?.len();
    match read(file)? {
        // Never more than the file holds (it may have been cut shorter since).
        Some(r) => {
            for (s, e) in r.iter() {
                all.insert(s.min(len), e.min(len));
            }
        }
        None => all.insert(0, len),
    }
    Ok(all)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::FileExt;

    #[test]
    fn a_record_lives_with_the_file_until_cleared() {
        let f = tempfile::tempfile().unwrap();
        f.write_all_at(&[1u8; 300], 0).unwrap();
        assert_eq!(read(&f).unwrap(), None);
        assert_eq!(held(&f).unwrap().to_string(), "0-300");
        mark(&f, &RangeSet::default()).unwrap();
        assert_eq!(read(&f).unwrap(), Some(RangeSet::default()));
        assert!(
            held(&f).unwrap().is_empty(),
            "a fresh record claims nothing"
        );
        let mut r = RangeSet::default();
        r.insert(0, 100);
        r.insert(200, 400);
        mark(&f, &r).unwrap();
        // Never more than the file's length.
        assert_eq!(held(&f).unwrap().to_string(), "0-100,200-300");
        clear(&f).unwrap();
        clear(&f).unwrap();
        assert_eq!(read(&f).unwrap(), None);
    }

    #[test]
    fn a_long_record_is_cut_to_what_fits_and_stays_true() {
        let f = tempfile::tempfile().unwrap();
        let mut r = RangeSet::default();
        for i in 0..5000u64 {
            r.insert(i * 1_000_000_000, i * 1_000_000_000 + 10);
        }
        mark(&f, &r).unwrap();
        let back = read(&f).unwrap().unwrap();
        assert!(back.count() > 10 && back.count() < r.count());
        assert!(back.iter().all(|(a, b)| r.gaps(a, b).is_empty()));
    }
}
