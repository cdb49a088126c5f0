//! What a script sees when a copy fails: an exit code per kind of failure (docs/exit-codes.md),
//! a JSON object with `--json` even when nothing was copied, options anywhere on the line, and
//! Ctrl-C as one line and exit 130, what arrived kept for `--resume`.

mod common;

use common::*;
use std::process::Stdio;
use std::time::{Duration, Instant};

fn code(out: &std::process::Output) -> i32 {
    out.status.code().unwrap_or(-1)
}

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn each_kind_of_failure_has_its_exit_code() {
    let s = FatpipeServer::start(&["--anonymous", "--user", "alice:secret-pass"]);
    std::fs::create_dir(s.path("d")).unwrap();
    random_file(&s.path("d/a"), 1000, 1);
    let work = tempfile::tempdir().unwrap();
    let dst = work.path().to_str().unwrap();
    // A missing file.
    let out = run(&mut fatpipe_cmd(&["cp", &s.url("nope"), dst]));
    assert_eq!(code(&out), 5, "{}", stderr(&out));
    // A server that is not there.
    let closed = format!("ftp://127.0.0.1:{}/x", free_port());
    let out = run(&mut fatpipe_cmd(&["cp", &closed, dst]));
    assert_eq!(code(&out), 3, "{}", stderr(&out));
    // A wrong password.
    let wrong = s.url_as("alice", "wrong", "d/a");
    let out = run(&mut fatpipe_cmd(&["cp", "--tls", "off", &wrong, dst]));
    assert_eq!(code(&out), 4, "{}", stderr(&out));
    // A directory without -r is a usage error, like a bad option.
    let out = run(&mut fatpipe_cmd(&["cp", &s.url("d"), dst]));
    assert_eq!(code(&out), 2, "{}", stderr(&out));
    let out = run(&mut fatpipe_cmd(&["cp", &s.url("d/a")]));
    assert_eq!(code(&out), 2, "{}", stderr(&out));
    // A destination with a trailing slash names a directory: missing, it is an error (as for
    // GNU cp), and no file takes its name.
    let slash = format!("{dst}/not-there/");
    let out = run(&mut fatpipe_cmd(&["cp", &s.url("d/a"), &slash]));
    assert_eq!(code(&out), 5, "{}", stderr(&out));
    assert!(!work.path().join("not-there").exists());
    let local = work.path().join("x");
    std::fs::write(&local, b"x").unwrap();
    let out = run(&mut fatpipe_cmd(&[
        "cp",
        local.to_str().unwrap(),
        &s.url("no-dir/"),
    ]));
    assert_eq!(code(&out), 5, "{}", stderr(&out));
    assert!(!s.path("no-dir").exists());
    // Some of the files missing, the others copied: the kind of those that failed.
    let out = run(&mut fatpipe_cmd(&["cp", &s.url("d/a"), &s.url("d/b"), dst]));
    assert_eq!(code(&out), 5, "{}", stderr(&out));
    assert_same(&s.path("d/a"), &work.path().join("a"));
}

#[test]
fn json_reports_a_failure_before_the_first_file() {
    let work = tempfile::tempdir().unwrap();
    let closed = format!("ftp://127.0.0.1:{}/x", free_port());
    let out = run(&mut fatpipe_cmd(&[
        "cp",
        "--json",
        &closed,
        work.path().to_str().unwrap(),
    ]));
    assert_eq!(code(&out), 3);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout)));
    assert_eq!(v["ok"], false);
    assert_eq!(v["failure"], "connect");
    assert_eq!(v["exit_code"], 3);
    assert!(
        v["error"].as_str().unwrap().contains("Connection refused"),
        "{v}"
    );
    assert_eq!(v["files"].as_array().unwrap().len(), 0);
    // A file's failure names its kind too.
    let s = FatpipeServer::start(&["--anonymous"]);
    let out = run(&mut fatpipe_cmd(&[
        "cp",
        "--json",
        &s.url("nope"),
        work.path().to_str().unwrap(),
    ]));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        (v["failure"].as_str(), v["exit_code"].as_u64()),
        (Some("not_found"), Some(5))
    );
    assert_eq!(v["files"][0]["failure"], "not_found");
}

#[test]
fn options_may_follow_the_paths() {
    let s = FatpipeServer::start(&["--anonymous"]);
    std::fs::create_dir(s.path("proj1")).unwrap();
    random_file(&s.path("proj1/a"), 100_000, 2);
    random_file(&s.path("proj1/b"), 200_000, 3);
    let work = tempfile::tempdir().unwrap();
    let dst = format!("{}/x1/", work.path().display());
    run_ok(&mut fatpipe_cmd(&[
        "cp",
        &s.url("proj1"),
        "-r",
        &dst,
        "-p",
        "2",
    ]));
    for f in ["a", "b"] {
        assert_same(
            &s.path(&format!("proj1/{f}")),
            &work.path().join("x1/proj1").join(f),
        );
    }
}

#[test]
fn ctrl_c_mid_tree_is_one_line_exit_130_and_resume_finishes_it() {
    let s = FatpipeServer::start(&["--anonymous"]);
    std::fs::create_dir(s.path("t")).unwrap();
    for i in 0..6 {
        random_file(&s.path(&format!("t/f{i}")), 4 << 20, 10 + i);
    }
    let work = tempfile::tempdir().unwrap();
    let dst = work.path().to_str().unwrap();
    let url = s.url("t");
    let cp = fatpipe_cmd(&[
        "cp",
        "-r",
        "--concurrency",
        "1",
        "--limit-rate",
        "40mbit",
        &url,
        dst,
    ])
    .stdin(Stdio::null())
    .stdout(Stdio::null())
    .stderr(Stdio::piped())
    .spawn()
    .unwrap();
    // Interrupted once the first file is in and the second begun.
    let second = work.path().join("t/f1.fatpipe-part");
    let deadline = Instant::now() + Duration::from_secs(30);
    while !second.exists() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(300));
    interrupt(&cp);
    let out = cp.wait_with_output().unwrap();
    let err = stderr(&out);
    assert_eq!(code(&out), 130, "{err}");
    assert!(!err.contains("failed"), "{err}");
    let line: Vec<&str> = err.lines().filter(|l| l.contains("interrupted")).collect();
    assert_eq!(line.len(), 1, "{err}");
    assert!(
        line[0].contains("1 of 6 file(s) copied, 1 in part (kept), 4 not begun")
            && line[0].contains("--resume"),
        "{err}"
    );
    run_ok(&mut fatpipe_cmd(&["cp", "-r", "--resume", &url, dst]));
    for i in 0..6 {
        let f = format!("t/f{i}");
        assert_same(&s.path(&f), &work.path().join(&f));
    }
}
