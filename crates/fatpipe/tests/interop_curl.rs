//! curl (Debian's) against `fatpipe serve`: download, upload, listing and resume, every size.

mod common;
use common::*;
use std::process::Command;

fn curl() -> Command {
    require("curl");
    let mut c = Command::new("curl");
    c.args([
        "--silent",
        "--show-error",
        "--fail",
        "--max-time",
        "120",
        "--user",
        "alice:pw",
    ]);
    c
}

fn server() -> FatpipeServer {
    FatpipeServer::start(&["--user", "alice:pw"])
}

#[test]
fn curl_downloads_every_size_byte_exact() {
    let s = server();
    let out = tempfile::tempdir().unwrap();
    for (i, size) in SIZES.iter().enumerate() {
        let name = format!("f{i}");
        random_file(&s.path(&name), *size, i as u64);
        let dst = out.path().join(&name);
        run_ok(curl().arg("-o").arg(&dst).arg(s.url(&name)));
        assert_same(&s.path(&name), &dst);
    }
}

#[test]
fn curl_uploads_every_size_byte_exact() {
    let s = server();
    let src = tempfile::tempdir().unwrap();
    std::fs::create_dir(s.path("up")).unwrap();
    for (i, size) in SIZES.iter().enumerate() {
        let local = src.path().join(format!("u{i}"));
        random_file(&local, *size, 100 + i as u64);
        run_ok(curl().arg("-T").arg(&local).arg(s.url("up/")));
        assert_same(&local, &s.path(&format!("up/u{i}")));
    }
}

#[test]
fn curl_lists_directories() {
    let s = server();
    std::fs::write(s.path("a file.txt"), b"x").unwrap();
    std::fs::create_dir(s.path("sub")).unwrap();
    let long = String::from_utf8(run_ok(curl().arg(s.url(""))).stdout).unwrap();
    assert!(
        long.lines()
            .any(|l| l.starts_with('-') && l.ends_with(" a file.txt")),
        "{long}"
    );
    assert!(
        long.lines()
            .any(|l| l.starts_with('d') && l.ends_with(" sub")),
        "{long}"
    );
    let names = String::from_utf8(run_ok(curl().arg("--list-only").arg(s.url(""))).stdout).unwrap();
    let mut names: Vec<&str> = names.lines().collect();
    names.sort();
    assert_eq!(names, vec!["a file.txt", "sub"]);
}

#[test]
fn curl_resumes_download_and_upload() {
    let s = server();
    let dir = tempfile::tempdir().unwrap();
    let size = (1 << 20) + 1;
    random_file(&s.path("big"), size, 7);
    let full = std::fs::read(s.path("big")).unwrap();
    let partial = dir.path().join("big");
    std::fs::write(&partial, &full[..300_000]).unwrap();
    run_ok(
        curl()
            .args(["-C", "-", "-o"])
            .arg(&partial)
            .arg(s.url("big")),
    );
    assert_same(&s.path("big"), &partial);

    // Upload resume: the server holds a prefix, curl appends the rest.
    std::fs::write(s.path("up"), &full[..123_457]).unwrap();
    run_ok(
        curl()
            .args(["-C", "-", "-T"])
            .arg(s.path("big"))
            .arg(s.url("up")),
    );
    assert_same(&s.path("big"), &s.path("up"));
}

#[test]
fn curl_sees_login_failure_and_missing_files() {
    let s = server();
    let out = run(Command::new("curl")
        .args(["-s", "--user", "alice:wrong"])
        .arg(s.url("")));
    assert_eq!(out.status.code(), Some(67), "curl exit 67 = login denied");
    let out = run(curl().arg(s.url("nope")));
    assert_eq!(
        out.status.code(),
        Some(78),
        "curl exit 78 = remote file not found"
    );
}
