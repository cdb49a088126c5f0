//! What a server operator relies on: `serve --config FILE` (TOML, the command line winning),
//! the transfer log in the xferlog format, logs as JSON lines, and SIGHUP reading the users
//! file again while sessions go on.

mod common;

use common::*;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Whether `user:password` may list the server's root.
fn logs_in(s: &FatpipeServer, user: &str, password: &str) -> bool {
    run(&mut fatpipe_cmd(&[
        "ls",
        "--tls",
        "off",
        &s.url_as(user, password, ""),
    ]))
    .status
    .success()
}

/// Adds `user` with `password` to the users file `file` (`fatpipe passwd`).
fn passwd(file: &std::path::Path, user: &str, password: &str) {
    let mut p = fatpipe_cmd(&["passwd", "--file", file.to_str().unwrap(), user])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    use std::io::Write;
    let mut input = p.stdin.take().unwrap();
    input
        .write_all(format!("{password}\n{password}\n").as_bytes())
        .unwrap();
    drop(input);
    assert!(p.wait().unwrap().success());
}

#[test]
fn a_config_file_a_transfer_log_json_logs_and_sighup() {
    let root = tempfile::tempdir().unwrap();
    let etc = tempfile::tempdir().unwrap();
    let users = etc.path().join("users");
    passwd(&users, "alice", "first-pass");
    let xferlog = etc.path().join("xferlog");
    let config = etc.path().join("serve.toml");
    std::fs::write(
        &config,
        format!(
            "users = {:?}\ntransfer-log = {:?}\nanonymous-write = true\nlog-format = \"json\"\nlisten = \"127.0.0.1:1\"\n",
            users.to_str().unwrap(),
            xferlog.to_str().unwrap()
        ),
    )
    .unwrap();
    let log = etc.path().join("serve.log");
    let mut cmd = Command::new(fatpipe());
    // The command line's --listen wins over the file's.
    cmd.args(["serve", "--config", config.to_str().unwrap(), "--root"])
        .arg(root.path())
        .args(["--listen", "127.0.0.1:0"]);
    let s = FatpipeServer::spawn_logging(cmd, root, std::fs::File::create(&log).unwrap().into());
    random_file(&s.path("f.bin"), 300_000, 3);
    let work = tempfile::tempdir().unwrap();
    let back = work.path().join("f.bin");
    run_ok(&mut fatpipe_cmd(&[
        "cp",
        "--tls",
        "off",
        &s.url_as("alice", "first-pass", "f.bin"),
        back.to_str().unwrap(),
    ]));
    run_ok(&mut fatpipe_cmd(&[
        "cp",
        back.to_str().unwrap(),
        &s.url("up.bin"),
    ]));
    assert_same(&s.path("f.bin"), &s.path("up.bin"));
    // One xferlog line per file: out to alice, in from anonymous, both complete.
    let lines: Vec<Vec<String>> = std::fs::read_to_string(&xferlog)
        .unwrap()
        .lines()
        .map(|l| l.split_whitespace().map(str::to_string).collect())
        .collect();
    assert_eq!(lines.len(), 2, "{lines:?}");
    for (l, (path, dir, mode, user)) in lines.iter().zip([
        ("/f.bin", "o", "r", "alice"),
        ("/up.bin", "i", "a", "anonymous"),
    ]) {
        assert_eq!(l.len(), 18, "{l:?}");
        assert_eq!(
            (
                &l[6][..],
                &l[7][..],
                &l[8][..],
                &l[9][..],
                &l[11][..],
                &l[12][..],
                &l[13][..],
                &l[17][..]
            ),
            ("127.0.0.1", "300000", path, "b", dir, mode, user, "c"),
            "{l:?}"
        );
    }
    // SIGHUP: a user added to the file may log in, without a restart.
    passwd(&users, "bob", "second-pass");
    assert!(!logs_in(&s, "bob", "second-pass"));
    let pid = nix::unistd::Pid::from_raw(s.proc.child.id() as i32);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGHUP).unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while !logs_in(&s, "bob", "second-pass") {
        assert!(Instant::now() < deadline, "bob never got in after SIGHUP");
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(logs_in(&s, "alice", "first-pass"));
    // The server's log: one JSON object a line.
    let text = std::fs::read_to_string(&log).unwrap();
    let events: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    assert!(
        events
            .iter()
            .any(|e| e["fields"]["message"] == "SIGHUP: accounts read again"),
        "{text}"
    );
}

#[test]
fn a_bad_config_file_is_a_usage_error() {
    let etc = tempfile::tempdir().unwrap();
    let config = etc.path().join("serve.toml");
    std::fs::write(&config, "[not-an-option]\nx = 1\n").unwrap();
    let out = run(&mut fatpipe_cmd(&[
        "serve",
        "--config",
        config.to_str().unwrap(),
    ]));
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("serve.toml"), "{err}");
}
