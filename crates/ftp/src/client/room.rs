//! Room on this machine's disk: a download checks the free space before a tree's first file
//! and before each file, so that a copy that cannot fit fails at once and says so, instead of
//! filling the disk and failing file after file.

use super::part::part_path;
use super::plan::Job;
use anyhow::bail;
use fatpipe_tune::size::format_size;
use std::path::Path;

/// Fails when the downloads of `jobs` into `dst` cannot all fit (see [`ensure`]); with
/// `resume`, what their part files already hold is not needed again.
pub(super) fn ensure_for_tree(dst: &Path, jobs: &[Job], resume: bool) -> anyhow::Result<()> {
    let need: u64 = jobs
        .iter()
        .filter_map(|j| match j {
            Job::Download {
                target: Some(t),
                size: Some(s),
                ..
            } => Some(s.saturating_sub(held(t, resume))),
            _ => None,
        })
        .sum();
    let what = match jobs {
        [Job::Download { rpath, .. }] => rpath.clone(),
        _ => format!("{} files", jobs.len()),
    };
    ensure(dst, need, &what)
}

/// Bytes of `target` a resumed download keeps (a complete copy or a part file; 0 without
/// `resume`).
pub(super) fn held(target: &Path, resume: bool) -> u64 {
    let len = |p: &Path| std::fs::metadata(p).map_or(0, |m| m.len());
    match resume {
        true => len(target).max(len(&part_path(target))),
        false => 0,
    }
}

/// Fails when the file system holding `place` (a file or directory, made or not) has less
/// than `need` bytes free for this user, naming `what` needs them. Where the free space cannot
/// be read (no such file system yet, a device) the copy goes on and meets the disk as it is.
pub(super) fn ensure(place: &Path, need: u64, what: &str) -> anyhow::Result<()> {
    let Some(free) = free_at(place) else {
        return Ok(());
    };
    if need > free {
        bail!(
            "not enough room on this machine's disk for {what}: {} needed, {} free in {}",
            format_size(need),
            format_size(free),
            existing(place)
                .map_or_else(|| place.display().to_string(), |p| p.display().to_string())
        );
    }
    Ok(())
}

/// Bytes this user may still write on the file system of `place`'s nearest existing ancestor
/// (root may use the blocks reserved for it).
fn free_at(place: &Path) -> Option<u64> {
    let dir = existing(place)?;
    let st = nix::sys::statvfs::statvfs(dir).ok()?;
    let blocks = if nix::unistd::geteuid().is_root() {
        st.blocks_free()
    } else {
        st.blocks_available()
    };
    Some(blocks.saturating_mul(st.fragment_size()))
}

/// `place` or its nearest ancestor that exists.
fn existing(place: &Path) -> Option<&Path> {
    place.ancestors().find(|p| p.exists())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_copy_larger_than_the_free_space_is_refused_before_it_starts() {
        let dir = tempfile::tempdir().unwrap();
        let place = dir.path().join("not/yet/made/file");
        assert!(ensure(&place, 1, "f").is_ok());
        let e = ensure(&place, u64::MAX, "f").unwrap_err().to_string();
        assert!(
            e.starts_with("not enough room on this machine's disk for f: ")
                && e.contains(&format!("free in {}", dir.path().display())),
            "{e}"
        );
        assert_eq!(
            crate::client::failure::Failure::of(&e),
            crate::client::failure::Failure::LocalDiskFull
        );
    }
}
