//! Keeping two trees alike, as rsync and rclone users expect: `--no-clobber`, `--update`,
//! `--dry-run`, `--delete` both ways, and `fatpipe check` telling what differs.

mod common;

use common::*;
use std::path::Path;
use std::time::{Duration, SystemTime};

fn stdout(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Sets `path`'s modification time `secs` from now (negative: in the past).
fn touch(path: &Path, secs: i64) {
    let now = SystemTime::now();
    let t = if secs >= 0 {
        now + Duration::from_secs(secs as u64)
    } else {
        now - Duration::from_secs(secs.unsigned_abs())
    };
    std::fs::File::options()
        .write(true)
        .open(path)
        .unwrap()
        .set_modified(t)
        .unwrap();
}

/// A served tree `t` of four files, and an empty local directory.
fn tree() -> (FatpipeServer, tempfile::TempDir) {
    let s = FatpipeServer::start(&["--anonymous-write"]);
    std::fs::create_dir(s.path("t")).unwrap();
    for i in 0..4 {
        random_file(&s.path(&format!("t/f{i}")), 50_000 + i * 1000, 40 + i);
        touch(&s.path(&format!("t/f{i}")), -3600);
    }
    (s, tempfile::tempdir().unwrap())
}

#[test]
fn no_clobber_keeps_and_update_replaces_only_older_copies() {
    let (s, work) = tree();
    let dst = work.path().to_str().unwrap();
    let local = |n: &str| work.path().join("t").join(n);
    std::fs::create_dir(work.path().join("t")).unwrap();
    std::fs::write(local("f0"), b"mine").unwrap();
    std::fs::write(local("f1"), b"older").unwrap();
    touch(&local("f1"), -7200);
    std::fs::write(local("f2"), b"newer").unwrap();
    // --no-clobber: what exists stays, the rest arrives.
    let out = run_ok(&mut fatpipe_cmd(&[
        "cp",
        "-r",
        "--no-clobber",
        &s.url("t"),
        dst,
    ]));
    assert_eq!(std::fs::read(local("f0")).unwrap(), b"mine");
    assert_eq!(std::fs::read(local("f1")).unwrap(), b"older");
    assert_same(&s.path("t/f3"), &local("f3"));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("1 file copied, 3 left out: exists (--no-clobber)"),
        "{err}"
    );
    // --update: the older copy is replaced, the newer one kept.
    run_ok(&mut fatpipe_cmd(&["cp", "-r", "-u", &s.url("t"), dst]));
    assert_same(&s.path("t/f1"), &local("f1"));
    assert_eq!(std::fs::read(local("f2")).unwrap(), b"newer");
    // Uploads too: the server's newer file stays.
    std::fs::write(s.path("t/f3"), b"server's own").unwrap();
    let out = run_ok(&mut fatpipe_cmd(&[
        "cp",
        "-r",
        "-u",
        &work.path().join("t").display().to_string(),
        &s.url(""),
    ]));
    assert_eq!(
        std::fs::read(s.path("t/f3")).unwrap(),
        b"server's own",
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_same(&local("f1"), &s.path("t/f1"));
}

#[test]
fn a_dry_run_changes_nothing_and_says_what_a_mirror_would_do() {
    let (s, work) = tree();
    let dst = work.path().join("x");
    std::fs::create_dir_all(dst.join("t/old")).unwrap();
    std::fs::write(dst.join("t/stale"), b"1").unwrap();
    std::fs::write(dst.join("t/f0"), b"2").unwrap();
    let out = run_ok(&mut fatpipe_cmd(&[
        "cp",
        "-r",
        "--delete",
        "--dry-run",
        &s.url("t"),
        dst.to_str().unwrap(),
    ]));
    let text = stdout(&out);
    for line in ["copy /t/f0 -> ", "copy /t/f3 -> ", "delete "] {
        assert!(text.contains(line), "{text}");
    }
    assert_eq!(text.matches("delete ").count(), 2, "{text}");
    assert!(dst.join("t/old").is_dir() && dst.join("t/stale").is_file());
    assert_eq!(std::fs::read(dst.join("t/f0")).unwrap(), b"2");
    // Into a directory that is not there: none is made.
    let none = work.path().join("none");
    run_ok(&mut fatpipe_cmd(&[
        "cp",
        "-r",
        "--dry-run",
        &s.url("t"),
        none.to_str().unwrap(),
    ]));
    assert!(!none.exists());
}

#[test]
fn delete_mirrors_both_ways_and_keeps_what_is_excluded() {
    let (s, work) = tree();
    let dst = work.path().to_str().unwrap();
    let local = |n: &str| work.path().join("t").join(n);
    std::fs::create_dir_all(local("old/deeper")).unwrap();
    std::fs::write(local("old/deeper/x"), b"1").unwrap();
    std::fs::write(local("stale"), b"2").unwrap();
    std::fs::write(local("f1.fatpipe-part"), b"3").unwrap();
    // Excluded from the copy, but the source holds it: kept.
    std::fs::write(local("f2"), b"mine").unwrap();
    // A download mirror, `f2` excluded.
    let mirror = || {
        run_ok(&mut fatpipe_cmd(&[
            "cp",
            "-r",
            "--delete",
            "--exclude",
            "f2",
            &s.url("t"),
            dst,
        ]))
    };
    let out = mirror();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("3 files copied, 2 deleted"), "{err}");
    assert!(!local("old").exists() && !local("stale").exists());
    assert_eq!(std::fs::read(local("f2")).unwrap(), b"mine");
    for f in ["f0", "f1", "f3"] {
        assert_same(&s.path(&format!("t/{f}")), &local(f));
    }
    // A destination directory that is a link to elsewhere: nothing is deleted there.
    std::fs::create_dir(s.path("t/sub")).unwrap();
    random_file(&s.path("t/sub/a"), 10, 9);
    let elsewhere = tempfile::tempdir().unwrap();
    std::fs::write(elsewhere.path().join("precious"), b"5").unwrap();
    std::os::unix::fs::symlink(elsewhere.path(), local("sub")).unwrap();
    mirror();
    assert!(elsewhere.path().join("precious").exists());
    std::fs::remove_file(local("sub")).unwrap();
    std::fs::remove_dir_all(s.path("t/sub")).unwrap();
    // An upload mirror removes what the server holds beyond the local tree.
    std::fs::create_dir_all(s.path("t/gone/sub")).unwrap();
    std::fs::write(s.path("t/gone/sub/y"), b"4").unwrap();
    std::fs::remove_file(local("f3")).unwrap();
    run_ok(&mut fatpipe_cmd(&[
        "cp",
        "-r",
        "--delete",
        &work.path().join("t").display().to_string(),
        &s.url(""),
    ]));
    assert!(!s.path("t/gone").exists() && !s.path("t/f3").exists());
    assert_eq!(std::fs::read(s.path("t/f2")).unwrap(), b"mine");
}

#[test]
fn check_says_what_differs_with_an_exit_code() {
    let (s, work) = tree();
    let dst = work.path().to_str().unwrap();
    run_ok(&mut fatpipe_cmd(&["cp", "-r", &s.url("t"), dst]));
    let out = run_ok(&mut fatpipe_cmd(&["check", "-r", &s.url("t"), dst]));
    assert_eq!(stdout(&out), "");
    // The same size, other bytes: only a checksum tells.
    let f1 = work.path().join("t/f1");
    let mut bytes = std::fs::read(&f1).unwrap();
    bytes[100] ^= 1;
    std::fs::write(&f1, &bytes).unwrap();
    let out = run(&mut fatpipe_cmd(&["check", "-r", &s.url("t"), dst]));
    assert_eq!(out.status.code(), Some(10));
    assert!(
        stdout(&out).starts_with("differs  ") && stdout(&out).contains("t/f1"),
        "{}",
        stdout(&out)
    );
    // --size-only does not see it; a missing file it does.
    std::fs::remove_file(work.path().join("t/f3")).unwrap();
    let out = run(&mut fatpipe_cmd(&[
        "check",
        "-r",
        "--size-only",
        &s.url("t"),
        dst,
    ]));
    assert_eq!(out.status.code(), Some(5));
    assert_eq!(stdout(&out).lines().count(), 1, "{}", stdout(&out));
    // Both kinds at once: 1.
    let out = run(&mut fatpipe_cmd(&["check", "-r", &s.url("t"), dst]));
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    // The other way round: the local tree against the server's.
    let out = run(&mut fatpipe_cmd(&[
        "check",
        "-r",
        "--json",
        &work.path().join("t").display().to_string(),
        &s.url(""),
    ]));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["same"], false);
    assert_eq!(v["files"].as_array().unwrap().len(), 3);
}
