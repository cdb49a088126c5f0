use super::*;
use fatpipe_proto::ranges::RangeSet;
use std::io::Write;
use std::os::unix::fs::symlink;
use std::os::unix::fs::FileExt;
use std::sync::atomic::{AtomicBool, Ordering};

struct Tree {
    outside: tempfile::TempDir,
    root: tempfile::TempDir,
    sb: Sandbox,
}

impl Tree {
    fn in_root(&self, p: &str) -> PathBuf {
        self.root.path().join(p)
    }
    fn out(&self, p: &str) -> PathBuf {
        self.outside.path().join(p)
    }
}

fn setup() -> Tree {
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("secret"), b"x").unwrap();
    std::fs::create_dir(outside.path().join("important")).unwrap();
    std::fs::write(outside.path().join("important/data"), b"keep").unwrap();
    let root = tempfile::tempdir().unwrap();
    std::fs::create_dir(root.path().join("sub")).unwrap();
    std::fs::write(root.path().join("sub/in"), b"in").unwrap();
    symlink(outside.path().join("secret"), root.path().join("out_link")).unwrap();
    symlink(outside.path(), root.path().join("out_dir")).unwrap();
    symlink(outside.path().join("missing"), root.path().join("dangling")).unwrap();
    symlink("sub/in", root.path().join("in_link")).unwrap();
    symlink("sub", root.path().join("in_dir")).unwrap();
    let sb = Sandbox::new(root.path()).unwrap();
    Tree { outside, root, sb }
}

fn v(s: &str) -> VPath {
    VPath::root().join(s)
}

fn outside(r: Result<impl std::fmt::Debug, FsError>) -> bool {
    matches!(r, Err(FsError::Outside))
}

#[test]
fn links_out_of_the_tree_are_refused() {
    let t = setup();
    assert!(outside(t.sb.open_read(&v("out_link"))));
    assert!(outside(t.sb.open_read(&v("out_dir/secret"))));
    assert!(outside(t.sb.metadata(&v("out_dir"))));
    assert!(outside(t.sb.list_dir(&v("out_dir"))));
    assert!(outside(t.sb.upload(&v("out_dir/new"), WriteAt::Start)));
    assert!(outside(t.sb.make_dir(&v("out_dir/new"))));
    assert!(outside(t.sb.remove_file(&v("out_dir/secret"))));
    assert!(outside(t.sb.rename(&v("sub/in"), &v("out_dir/moved"))));
    assert!(outside(t.sb.rename(&v("out_dir/secret"), &v("got"))));
    // Appending through a link is refused; a dangling one leads nowhere readable.
    assert!(t.sb.upload(&v("out_link"), WriteAt::End).is_err());
    assert!(t.sb.open_read(&v("dangling")).is_err());
    assert!(!t.out("missing").exists() && !t.out("new").exists() && !t.out("moved").exists());
    assert_eq!(std::fs::read(t.out("secret")).unwrap(), b"x");
}

#[test]
fn links_inside_the_tree_are_followed_where_read_and_listed_as_links() {
    let t = setup();
    assert_eq!(t.sb.open_read(&v("in_link")).unwrap().1.len(), 2);
    assert!(t.sb.metadata(&v("in_dir")).unwrap().is_dir());
    assert_eq!(t.sb.list_dir(&v("in_dir")).unwrap()[0].name, "in");
    let listed: Vec<(String, EntryKind)> =
        t.sb.list_dir(&VPath::root())
            .unwrap()
            .into_iter()
            .map(|e| (e.name, e.kind))
            .collect();
    let link = EntryKind::Link;
    assert_eq!(
        listed,
        vec![
            ("dangling".into(), link),
            ("in_dir".into(), link),
            ("in_link".into(), link),
            ("out_dir".into(), link),
            ("out_link".into(), link),
            ("sub".into(), EntryKind::Dir),
        ]
    );
}

#[test]
fn deleting_a_link_deletes_the_link_not_its_target() {
    let t = setup();
    t.sb.remove_file(&v("out_link")).unwrap();
    t.sb.remove_file(&v("in_link")).unwrap();
    assert!(!t.in_root("out_link").exists() && t.in_root("sub/in").exists());
    assert_eq!(std::fs::read(t.out("secret")).unwrap(), b"x");
    // A link to a directory is not a directory: RMD refuses it, DELE removes the link.
    assert!(matches!(
        t.sb.remove_dir(&v("out_dir")),
        Err(FsError::WrongKind(_))
    ));
    assert!(matches!(
        t.sb.remove_file(&v("sub")),
        Err(FsError::WrongKind(_))
    ));
    t.sb.remove_file(&v("out_dir")).unwrap();
    assert!(t.out("important/data").exists());
    assert!(t.sb.remove_dir(&VPath::root()).is_err());
}

#[test]
fn a_store_changes_nothing_until_it_is_committed() {
    let t = setup();
    let up = t.sb.upload(&v("sub/in"), WriteAt::Start).unwrap();
    up.file().write_all_at(b"new content", 0).unwrap();
    assert_eq!(std::fs::read(t.in_root("sub/in")).unwrap(), b"in");
    // Temporary files are not listed.
    assert_eq!(t.sb.list_dir(&v("sub")).unwrap().len(), 1);
    drop(up);
    assert_eq!(std::fs::read(t.in_root("sub/in")).unwrap(), b"in");
    assert_eq!(std::fs::read_dir(t.in_root("sub")).unwrap().count(), 1);
    let mut up = t.sb.upload(&v("sub/in"), WriteAt::Start).unwrap();
    up.begin().unwrap();
    up.file().write_all(b"new").unwrap();
    up.commit().unwrap();
    assert_eq!(std::fs::read(t.in_root("sub/in")).unwrap(), b"new");
    assert_eq!(std::fs::read_dir(t.in_root("sub")).unwrap().count(), 1);
}

#[test]
fn a_new_file_cut_short_keeps_what_arrived_under_its_name() {
    let t = setup();
    let up = t.sb.upload(&v("sub/fresh"), WriteAt::Start).unwrap();
    drop(up);
    assert!(
        !t.in_root("sub/fresh").exists(),
        "nothing arrived, nothing made"
    );
    let up = t.sb.upload(&v("sub/fresh"), WriteAt::Start).unwrap();
    up.file().write_all(b"half").unwrap();
    drop(up);
    assert_eq!(std::fs::read(t.in_root("sub/fresh")).unwrap(), b"half");
}

#[test]
fn an_upload_never_writes_through_or_replaces_a_link() {
    let t = setup();
    for at in [
        WriteAt::Start,
        WriteAt::End,
        WriteAt::Keep,
        WriteAt::Offset(0),
    ] {
        for name in ["out_link", "in_link", "dangling"] {
            assert!(
                matches!(t.sb.upload(&v(name), at), Err(FsError::WrongKind(_))),
                "{name} {at:?}"
            );
        }
    }
    assert!(t
        .in_root("out_link")
        .symlink_metadata()
        .unwrap()
        .is_symlink());
    assert_eq!(std::fs::read(t.out("secret")).unwrap(), b"x");
    assert_eq!(std::fs::read(t.in_root("sub/in")).unwrap(), b"in");
    assert!(!t.out("missing").exists());
}

#[test]
fn restart_offset_cuts_only_once_begun() {
    let t = setup();
    let mut up = t.sb.upload(&v("sub/in"), WriteAt::Offset(1)).unwrap();
    assert_eq!(up.start(), 1);
    assert_eq!(std::fs::read(t.in_root("sub/in")).unwrap(), b"in");
    up.begin().unwrap();
    up.file().write_all(b"Z").unwrap();
    up.commit().unwrap();
    assert_eq!(std::fs::read(t.in_root("sub/in")).unwrap(), b"iZ");
    assert!(t.sb.upload(&v("sub/in"), WriteAt::Offset(10)).is_err());
    assert!(t.sb.upload(&v("sub/none"), WriteAt::Offset(10)).is_err());
}

#[test]
fn an_incomplete_file_counts_only_what_it_holds_in_order() {
    let t = setup();
    let path = t.in_root("sub/part");
    std::fs::write(&path, [1u8; 100]).unwrap();
    let f = File::open(&path).unwrap();
    let held = RangeSet::parse("0-40,60-100").unwrap();
    crate::partial::mark(&f, &held).unwrap();
    // A restart past the first gap would leave a hole: refused.
    assert!(t.sb.upload(&v("sub/part"), WriteAt::Offset(50)).is_err());
    // Appending continues at the gap, dropping what lies beyond it.
    let mut up = t.sb.upload(&v("sub/part"), WriteAt::End).unwrap();
    assert_eq!(up.start(), 40);
    up.begin().unwrap();
    up.file().write_all(b"xy").unwrap();
    assert_eq!(std::fs::metadata(&path).unwrap().len(), 42);
}

/// Item 1 of the trust issue: while another thread keeps swapping a directory of the tree
/// for a link out of it (what `RNFR`/`RNTO` can do), no operation through that directory ever
/// reaches outside, in 20,000 tries of each.
#[test]
fn swapping_a_directory_for_a_link_never_leads_out() {
    const TRIES: usize = 20_000;
    let t = setup();
    std::fs::create_dir(t.in_root("a")).unwrap();
    symlink(t.outside.path(), t.in_root("evil")).unwrap();
    std::fs::write(t.out("victim"), b"v").unwrap();
    std::fs::create_dir(t.out("empty")).unwrap();
    let stop = AtomicBool::new(false);
    let swaps = std::thread::scope(|s| {
        let swapper = s.spawn(|| {
            let mut n = 0u64;
            let (a, spare, evil) = (t.in_root("a"), t.in_root("a.real"), t.in_root("evil"));
            while !stop.load(Ordering::Relaxed) {
                // a: directory -> link out -> directory again.
                let _ = std::fs::rename(&a, &spare);
                let _ = std::fs::rename(&evil, &a);
                let _ = std::fs::rename(&a, &evil);
                let _ = std::fs::rename(&spare, &a);
                n += 1;
            }
            n
        });
        let mut found = None;
        for i in 0..TRIES {
            let _ = t.sb.make_dir(&v("a/made"));
            let _ = t.sb.remove_file(&v("a/victim"));
            let _ = t.sb.remove_dir(&v("a/empty"));
            if let Ok((mut f, _)) = t.sb.open_read(&v("a/secret")) {
                let mut got = Vec::new();
                let _ = std::io::Read::read_to_end(&mut f, &mut got);
                if got == b"x" {
                    found = Some(("read", i));
                }
            }
            if let Ok(mut up) = t.sb.upload(&v("a/written"), WriteAt::Start) {
                let _ = up.begin();
                let _ = up.commit();
            }
            let _ = t.sb.rename(&v("a/secret"), &v("stolen"));
            if let Ok(list) = t.sb.list_dir(&v("a")) {
                if list.iter().any(|e| e.name == "secret") {
                    found = Some(("listed", i));
                }
            }
            if found.is_some() {
                break;
            }
        }
        // Stopped before any assertion, so that a failure cannot leave the swapper running.
        stop.store(true, Ordering::Relaxed);
        let swaps = swapper.join().unwrap();
        assert_eq!(found, None, "reached outside the tree (what, try)");
        swaps
    });
    assert!(
        swaps > 100,
        "the swapping thread hardly ran ({swaps} swaps)"
    );
    let names: Vec<_> = std::fs::read_dir(t.outside.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    let mut names = names;
    names.sort();
    assert_eq!(
        names,
        ["empty", "important", "secret", "victim"],
        "outside changed"
    );
    assert_eq!(std::fs::read(t.out("victim")).unwrap(), b"v");
    assert_eq!(std::fs::read(t.out("important/data")).unwrap(), b"keep");
    assert!(!t.in_root("stolen").exists());
}
