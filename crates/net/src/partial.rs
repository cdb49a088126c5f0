//! The record of what an incomplete file holds: the byte ranges that really arrived, kept in an
//! extended attribute of the file itself (`user.fatpipe.received`) from before its first byte
//! is written until it is complete. MODE E writes blocks out of order, so a cut transfer leaves
//! holes that the file's length does not show; a resume reads this record instead of trusting
//! the length, and a file without it is complete (or was written in order by someone else).
//!
//! The record only ever names ranges whose bytes were written before it (never more than the
//! file holds), so reading a stale one loses progress, never data.

use fatpipe_proto::ranges::RangeSet;
use std::fs::File;
use std::io;
use xattr::FileExt;

const NAME: &str = "user.fatpipe.received";
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
    file.set_xattr(NAME, text.as_bytes())
}

/// What an incomplete `file` holds, or `None` when it carries no record (complete, or written
/// by another program, or on a file system without user attributes).
pub fn read(file: &File) -> io::Result<Option<RangeSet>> {
    let value = match file.get_xattr(NAME) {
        Ok(v) => v,
        Err(e) if unsupported(&e) => None,
        Err(e) => return Err(e),
    };
    Ok(value.map(|v| {
        // An empty record claims nothing, and so does one that cannot be read.
        RangeSet::parse(&String::from_utf8_lossy(&v)).unwrap_or_default()
    }))
}

/// Removes the record: `file` is complete.
pub fn clear(file: &File) -> io::Result<()> {
    match file.remove_xattr(NAME) {
        Err(e) if !unsupported(&e) && e.raw_os_error() != Some(libc::ENODATA) => Err(e),
        _ => Ok(()),
    }
}

/// Whether the file system keeps no user attributes.
fn unsupported(e: &io::Error) -> bool {
    e.raw_os_error() == Some(libc::ENOTSUP)
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
