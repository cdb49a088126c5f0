//! `fatpipe cp` and `fatpipe ls` against a real vsftpd (Debian's): download, upload, listing,
//! trees with -r, and --resume, every size.

mod common;
use common::*;

fn cp(args: &[&str]) -> std::process::Output {
    let mut all = vec!["cp", "--quiet"];
    all.extend_from_slice(args);
    run_ok(&mut fatpipe_cmd(&all))
}

#[test]
fn cp_downloads_and_uploads_every_size() {
    let v = Vsftpd::start();
    let dir = tempfile::tempdir().unwrap();
    for (i, size) in SIZES.iter().enumerate() {
        random_file(&v.path(&format!("d{i}")), *size, i as u64);
        v.give_to_ftp();
        let local = dir.path().join(format!("d{i}"));
        cp(&[&v.url(&format!("d{i}")), local.to_str().unwrap()]);
        assert_same(&v.path(&format!("d{i}")), &local);
        cp(&[local.to_str().unwrap(), &v.url(&format!("u{i}"))]);
        assert_same(&local, &v.path(&format!("u{i}")));
    }
}

#[test]
fn ls_lists_vsftpd_directory() {
    let v = Vsftpd::start();
    std::fs::write(v.path("file one"), b"12345").unwrap();
    std::fs::create_dir(v.path("sub")).unwrap();
    v.give_to_ftp();
    let out = run_ok(&mut fatpipe_cmd(&["ls", &v.url("")]));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.lines()
            .any(|l| l.starts_with('-') && l.contains(" 5 ") && l.ends_with(" file one")),
        "{text}"
    );
    assert!(
        text.lines()
            .any(|l| l.starts_with('d') && l.ends_with(" sub")),
        "{text}"
    );
}

#[test]
fn cp_recursive_both_ways() {
    let v = Vsftpd::start();
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("tree");
    let rels = ["top", "x/one", "x/y z/two", "x/y z/w/three"];
    for (i, rel) in rels.iter().enumerate() {
        let p = src.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        random_file(&p, SIZES[i % SIZES.len()].min(3 << 20), 20 + i as u64);
    }
    std::fs::create_dir_all(src.join("x/empty")).unwrap();
    cp(&["-r", src.to_str().unwrap(), &v.url("")]);
    for rel in rels {
        assert_same(&src.join(rel), &v.path(&format!("tree/{rel}")));
    }
    assert!(v.path("tree/x/empty").is_dir());

    let back = dir.path().join("back");
    cp(&["-r", &v.url("tree"), back.to_str().unwrap()]);
    for rel in rels {
        assert_same(&src.join(rel), &back.join(rel));
    }
    assert!(back.join("x/empty").is_dir());

    let out = run(&mut fatpipe_cmd(&[
        "cp",
        &v.url("tree"),
        dir.path().join("no").to_str().unwrap(),
    ]));
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("use -r"));
}

#[test]
fn cp_resume_completes_partial_files_both_ways() {
    let v = Vsftpd::start();
    let dir = tempfile::tempdir().unwrap();
    let size = (1 << 20) + 1;
    random_file(&v.path("r"), size, 5);
    v.give_to_ftp();
    let full = std::fs::read(v.path("r")).unwrap();
    let local = dir.path().join("r");
    std::fs::write(&local, &full[..400_000]).unwrap();
    let out = cp(&["--resume", "--json", &v.url("r"), local.to_str().unwrap()]);
    assert_same(&v.path("r"), &local);
    let summary: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(summary["ok"], true);
    assert_eq!(summary["files"][0]["resumed_from"], 400_000);
    assert_eq!(summary["bytes"], size - 400_000);

    std::fs::write(v.path("up"), &full[..654_321]).unwrap();
    v.give_to_ftp();
    cp(&["--resume", local.to_str().unwrap(), &v.url("up")]);
    assert_same(&local, &v.path("up"));
}

/// Item 7 of the trust issue: vsftpd has no checksums; a resume whose source changed since
/// the partial copy began (same size, other bytes, a later time) starts over.
#[test]
fn a_resume_after_the_source_changed_starts_over() {
    let v = Vsftpd::start();
    random_file(&v.path("f"), 8 << 20, 21);
    v.give_to_ftp();
    let out = tempfile::tempdir().unwrap();
    let dst = out.path().join("f");
    cut_download(&v.url("f"), &dst);
    let held = std::fs::metadata(out.path().join("f.fatpipe-part")).map_or(0, |m| m.len());
    assert!(held > 0 && held < 8 << 20, "{held} bytes held");
    rewrite_later(&v.path("f"), 8 << 20, 22);
    v.give_to_ftp();
    let o = run_ok(&mut fatpipe_cmd(&[
        "cp",
        "--resume",
        &v.url("f"),
        dst.to_str().unwrap(),
    ]));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("changed since"), "{err}");
    assert_same(&v.path("f"), &dst);
}
