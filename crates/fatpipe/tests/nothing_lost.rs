//! `fatpipe cp` never loses or corrupts what users trust it with: a failed download leaves the
//! destination as it was, a resume continues from what really arrived (MODE E holes included,
//! at either end), a file is complete only when its checksum says so, names the control channel
//! cannot carry are refused instead of sent, and a closed output ends the command in order.

mod common;
use common::*;
use fatpipe_proto::ranges::RangeSet;
use std::os::unix::fs::FileExt;

fn json(out: &std::process::Output) -> serde_json::Value {
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout)))
}

#[test]
fn names_with_line_breaks_are_refused_not_sent() {
    let s = FatpipeServer::start(&["--anonymous-write"]);
    std::fs::write(s.path("victim"), b"keep me").unwrap();
    let work = tempfile::tempdir().unwrap();
    let tree = work.path().join("tree");
    std::fs::create_dir(&tree).unwrap();
    std::fs::write(tree.join("x\r\nDELE victim"), b"evil").unwrap();
    std::fs::write(tree.join("fine"), b"ok").unwrap();
    let out = run(&mut fatpipe_cmd(&[
        "cp",
        "-r",
        "--json",
        tree.to_str().unwrap(),
        &s.url("in"),
    ]));
    assert!(!out.status.success());
    let v = json(&out);
    assert_eq!(v["files_failed"], 1, "{v}");
    assert_eq!(std::fs::read(s.path("in/fine")).unwrap(), b"ok");
    // The same through a URL.
    let url = format!("ftp://{}/z%0d%0aDELE%20victim", s.addr);
    let out = run(&mut fatpipe_cmd(&[
        "cp",
        work.path().join("tree/fine").to_str().unwrap(),
        &url,
    ]));
    assert!(!out.status.success());
    assert_eq!(std::fs::read(s.path("victim")).unwrap(), b"keep me");
}

#[test]
fn a_failed_download_leaves_the_destination_as_it_was() {
    let s = FatpipeServer::start(&["--anonymous"]);
    let work = tempfile::tempdir().unwrap();
    let dest = work.path().join("dest");
    std::fs::write(&dest, b"what was there").unwrap();
    let out = run(&mut fatpipe_cmd(&[
        "cp",
        &s.url("missing"),
        dest.to_str().unwrap(),
    ]));
    assert!(!out.status.success());
    assert_eq!(std::fs::read(&dest).unwrap(), b"what was there");
    // A typo'd name into a directory leaves nothing behind.
    let dir = work.path().join("d");
    std::fs::create_dir(&dir).unwrap();
    let out = run(&mut fatpipe_cmd(&[
        "cp",
        &s.url("tpyo"),
        dir.to_str().unwrap(),
    ]));
    assert!(!out.status.success());
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0);
}

#[test]
fn resume_never_takes_a_same_size_file_for_a_complete_one() {
    let s = FatpipeServer::start(&["--anonymous-write"]);
    random_file(&s.path("f"), 3 << 20, 11);
    let work = tempfile::tempdir().unwrap();
    let local = work.path().join("f");
    random_file(&local, 3 << 20, 12); // right size, other bytes
    for extra in [&["--verify"][..], &[][..]] {
        let mut args = vec!["cp", "--json", "--resume"];
        args.extend(extra);
        let url = s.url("f");
        args.extend([url.as_str(), local.to_str().unwrap()]);
        let v = json(&run_ok(&mut fatpipe_cmd(&args)));
        assert_same(&s.path("f"), &local);
        assert!(v["files"][0]["verified"].as_str().is_some(), "{v}");
        random_file(&local, 3 << 20, 12);
    }
    // The same for an upload.
    random_file(&local, 3 << 20, 13);
    let v = json(&run_ok(&mut fatpipe_cmd(&[
        "cp",
        "--json",
        "--resume",
        local.to_str().unwrap(),
        &s.url("f"),
    ])));
    assert_same(&local, &s.path("f"));
    assert!(v["files"][0]["verified"].as_str().is_some(), "{v}");
}

/// Writes `whole`'s bytes in `held` into `file`, garbage elsewhere, and records `held`.
fn partial_copy(file: &std::path::Path, whole: &[u8], held: &str, len: usize) {
    let f = std::fs::File::create(file).unwrap();
    f.write_all_at(&vec![0xA5u8; len], 0).unwrap();
    let held = RangeSet::parse(held).unwrap();
    for (a, b) in held.iter() {
        f.write_all_at(&whole[a as usize..b as usize], a).unwrap();
    }
    fatpipe_net::partial::mark(&f, &held).unwrap();
}

#[test]
fn a_mode_e_download_with_holes_resumes_from_what_arrived() {
    let s = FatpipeServer::start(&["--anonymous"]);
    random_file(&s.path("r.bin"), 6 << 20, 21);
    let whole = std::fs::read(s.path("r.bin")).unwrap();
    let work = tempfile::tempdir().unwrap();
    let dest = work.path().join("r.bin");
    // What a cut four-stream download leaves: holes, and bytes past the first gap.
    partial_copy(
        &work.path().join("r.bin.fatpipe-part"),
        &whole,
        "0-1048576,3145728-5242880",
        6 << 20,
    );
    let v = json(&run_ok(&mut fatpipe_cmd(&[
        "cp",
        "--json",
        "--resume",
        "-p",
        "3",
        &s.url("r.bin"),
        dest.to_str().unwrap(),
    ])));
    assert_same(&s.path("r.bin"), &dest);
    assert_eq!(v["files"][0]["resumed_from"], 3 << 20, "{v}");
    assert_eq!(v["files"][0]["bytes"], 3 << 20, "{v}");
    assert!(!work.path().join("r.bin.fatpipe-part").exists());
}

#[test]
fn a_cut_mode_e_upload_resumes_from_what_the_server_holds() {
    let s = FatpipeServer::start(&["--anonymous-write"]);
    let work = tempfile::tempdir().unwrap();
    let local = work.path().join("u.bin");
    random_file(&local, 5 << 20, 31);
    let whole = std::fs::read(&local).unwrap();
    // What a cut (or killed) server keeps of a MODE E upload.
    partial_copy(
        &s.path("u.bin"),
        &whole,
        "0-1048576,2097152-4194304",
        4 << 20,
    );
    let mut c = Raw::login(s.addr, "anonymous", "x");
    assert_eq!(c.cmd("SIZE u.bin"), (213, "1048576".to_string()));
    let v = json(&run_ok(&mut fatpipe_cmd(&[
        "cp",
        "--json",
        "--resume",
        "-p",
        "2",
        local.to_str().unwrap(),
        &s.url("u.bin"),
    ])));
    assert_same(&local, &s.path("u.bin"));
    assert_eq!(v["files"][0]["resumed_from"], 1 << 20, "{v}");
    // Complete now: no record left, SIZE is the length.
    assert_eq!(c.cmd("SIZE u.bin"), (213, (5u64 << 20).to_string()));
}

#[test]
fn a_closed_output_ends_the_command_in_order() {
    require("timeout");
    let s = FatpipeServer::start(&["--anonymous"]);
    std::fs::create_dir(s.path("t")).unwrap();
    for i in 0..20 {
        random_file(&s.path(&format!("t/f{i}")), 64 << 10, i);
    }
    let work = tempfile::tempdir().unwrap();
    let dest = work.path().join("t");
    // Debug logging floods standard error, which `head` closes after a few bytes.
    let script = format!(
        "timeout 60 {} -vv cp -r {} {} 2>&1 | head -c 100 >/dev/null; echo ${{PIPESTATUS[0]}}",
        fatpipe(),
        s.url("t"),
        dest.display()
    );
    let out = run(std::process::Command::new("bash")
        .args(["-c", &script])
        .env("XDG_CACHE_HOME", cache_home()));
    // fatpipe's own status: 0, not 124 (killed by timeout: hung) nor 101 (panicked).
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "0");
    for i in 0..20 {
        let name = format!("f{i}");
        assert_same(&s.path(&format!("t/{name}")), &dest.join(&name));
    }
}
