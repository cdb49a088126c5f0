//! `--delete`: a tree copy that mirrors. In every destination directory the copy's trees
//! reach, what the source directory does not hold goes, before the files are copied (the room
//! it frees counts for them). A name the source holds is kept even when `--exclude` leaves it
//! out of the copy; a part file (`NAME.fatpipe-part`) of a name the source holds is kept for
//! `--resume`; links are removed, never followed, and a destination directory that is a link
//! is left alone.

use super::file_result::FileResult;
use super::part::SUFFIX;
use super::plan::{Dest, Walked};
use super::Connection;
use fatpipe_proto::listing::EntryKind;
use std::collections::BTreeSet;

/// What a mirror removes: one entry at the destination, and whether it is a directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Extra {
    /// Its path at the destination.
    pub path: String,
    /// A directory (removed with all it holds).
    pub dir: bool,
}

/// The entries of the destination directories `walked` reached that the source does not hold.
pub(super) fn extras(c: &mut Connection, walked: &[Walked]) -> Vec<Extra> {
    let mut out = Vec::new();
    for w in walked {
        let here = match &w.dest {
            // A directory reached through a link is somebody else's: nothing is removed there.
            Dest::Local(dir) if is_link(dir) => {
                tracing::warn!("not deleting in {}: a symbolic link", dir.display());
                Vec::new()
            }
            Dest::Local(dir) => local_entries(dir),
            Dest::Remote(dir) => c
                .list(dir)
                .map(|l| {
                    l.into_iter()
                        .map(|e| (e.name, e.kind == EntryKind::Dir))
                        .collect()
                })
                .unwrap_or_default(),
        };
        let base = match &w.dest {
            Dest::Local(d) => d.display().to_string(),
            Dest::Remote(d) => d.clone(),
        };
        for (name, dir) in here {
            if !extra(&name, &w.names) {
                continue;
            }
            out.push(Extra {
                path: format!("{}/{name}", base.trim_end_matches('/')),
                dir,
            });
        }
    }
    out
}

/// Whether `path` is a symbolic link (not followed).
fn is_link(path: &std::path::Path) -> bool {
    std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink())
}

/// The names in the local directory `dir`, each with whether it is a directory (a link is
/// not, whatever it points at); none where it cannot be read.
fn local_entries(dir: &std::path::Path) -> Vec<(String, bool)> {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    rd.filter_map(Result::ok)
        .filter_map(|e| {
            let dir = e.file_type().ok()?.is_dir();
            Some((e.file_name().to_str()?.to_string(), dir))
        })
        .collect()
}

/// Removes a local extra: a file or link itself, a directory with all it holds (links inside
/// removed, not followed).
fn remove_local(x: &Extra) -> std::io::Result<()> {
    match x.dir {
        true => std::fs::remove_dir_all(&x.path),
        false => std::fs::remove_file(&x.path),
    }
}

/// Whether the destination's `name` is not the source's: neither one of `names` nor the part
/// file of one; `.` and `..` and names with a `/` (a hostile listing) are never touched.
fn extra(name: &str, names: &BTreeSet<String>) -> bool {
    if name == "." || name == ".." || name.contains('/') || names.contains(name) {
        return false;
    }
    !name
        .strip_suffix(SUFFIX)
        .is_some_and(|base| names.contains(base))
}

/// Removes `extras` (at the destination of a download when `local`, else on the server); one
/// result each, its error if it could not be removed.
pub(super) fn remove(c: &mut Connection, extras: &[Extra], local: bool) -> Vec<FileResult> {
    extras
        .iter()
        .map(|x| {
            let done = match (local, x.dir) {
                (true, _) => remove_local(x).map_err(anyhow::Error::from),
                (false, true) => c.remove_tree(&x.path),
                (false, false) => c.delete(&x.path),
            };
            let mut r = deleted(x);
            if let Err(e) = done {
                r.fail(&e.context(format!("cannot delete {}", x.path)));
            }
            r
        })
        .collect()
}

/// The result of a deletion (or, in a dry run, of one to come).
pub(super) fn deleted(x: &Extra) -> FileResult {
    FileResult {
        destination: x.path.clone(),
        deleted: true,
        ..FileResult::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_names_the_source_lacks_are_extra() {
        let names: BTreeSet<String> = ["a", "b.h5", "run 1"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        for kept in ["a", "b.h5", "run 1", "a.fatpipe-part", ".", "..", "x/y"] {
            assert!(!extra(kept, &names), "{kept}");
        }
        for gone in [
            "c",
            "A",
            "b.h5.fatpipe-part.old",
            "z.fatpipe-part",
            ".hidden",
        ] {
            assert!(extra(gone, &names), "{gone}");
        }
    }

    #[test]
    fn a_local_mirror_removes_files_and_trees_the_source_lacks_and_no_more() {
        let d = tempfile::tempdir().unwrap();
        let p = |n: &str| d.path().join(n);
        std::fs::write(p("keep"), b"1").unwrap();
        std::fs::write(p("old"), b"2").unwrap();
        std::fs::create_dir_all(p("gone/deep")).unwrap();
        std::fs::write(p("gone/deep/f"), b"3").unwrap();
        // A link to something outside: the link goes, its target stays.
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("precious"), b"4").unwrap();
        std::os::unix::fs::symlink(outside.path(), p("link")).unwrap();
        let walked = Walked {
            dest: Dest::Local(d.path().to_path_buf()),
            names: ["keep".to_string()].into(),
        };
        let extras: Vec<Extra> = local_entries(d.path())
            .into_iter()
            .filter(|(n, _)| extra(n, &walked.names))
            .map(|(n, dir)| Extra {
                path: d.path().join(n).display().to_string(),
                dir,
            })
            .collect();
        assert_eq!(extras.len(), 3, "{extras:?}");
        for x in &extras {
            remove_local(x).unwrap();
        }
        let left: Vec<_> = std::fs::read_dir(d.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(left, ["keep"]);
        assert!(outside.path().join("precious").exists());
    }
}
