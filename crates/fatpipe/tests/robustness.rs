//! Nothing lost on a broken link or a bad disk: cut uploads resume to identical bytes, cut
//! downloads never report success, and full disks and unreadable files are clear errors.

mod common;
use common::*;
use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::os::unix::fs::PermissionsExt;
use std::process::Command;

#[test]
fn cut_upload_leaves_a_partial_file_that_resume_completes() {
    let s = FatpipeServer::start(&["--user", "alice:pw"]);
    let dir = tempfile::tempdir().unwrap();
    let local = dir.path().join("data");
    random_file(&local, 5 << 20, 1);
    let bytes = std::fs::read(&local).unwrap();
    let mut c = Raw::login(s.addr, "alice", "pw");
    c.cmd("TYPE I");
    let mut d = c.data();
    assert_eq!(c.cmd("STOR data").0, 150);
    d.write_all(&bytes[..2_000_000]).unwrap();
    drop(d); // the link breaks after 2 MB
    c.reply();
    assert_eq!(
        std::fs::metadata(s.path("data")).unwrap().len(),
        2_000_000,
        "partial file kept"
    );
    let url = s.url_as("alice", "pw", "data");
    let out = run_ok(&mut fatpipe_cmd(&[
        "cp",
        "--resume",
        "--json",
        "--tls",
        "off",
        local.to_str().unwrap(),
        &url,
    ]));
    let summary: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(summary["files"][0]["resumed_from"], 2_000_000);
    assert_same(&local, &s.path("data"));
}

/// How the fake server misbehaves after sending part of a file.
#[derive(Clone, Copy)]
enum Cut {
    /// Closes the control connection without a final reply.
    Vanish,
    /// Claims success although the data was short.
    Lie,
}

const FAKE_SIZE: usize = 1_000_000;
const FAKE_SENT: usize = 300_000;

fn fake_byte(i: usize) -> u8 {
    (i * 7 % 253) as u8
}

/// A scripted FTP server that sends only part of a file, then breaks as `cut` says.
fn fake_server(cut: Cut) -> (u16, std::thread::JoinHandle<()>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let h = std::thread::spawn(move || {
        let (ctl, _) = l.accept().unwrap();
        ctl.set_read_timeout(Some(std::time::Duration::from_secs(20)))
            .unwrap();
        let mut w = ctl.try_clone().unwrap();
        let mut r = BufReader::new(ctl);
        w.write_all(b"220 fake\r\n").unwrap();
        let mut data_l = None;
        for _ in 0..50 {
            let mut line = String::new();
            if r.read_line(&mut line).unwrap_or(0) == 0 {
                return;
            }
            let verb = line
                .split_whitespace()
                .next()
                .unwrap_or("")
                .to_ascii_uppercase();
            let reply: &[u8] = match verb.as_str() {
                "USER" => b"331 pw\r\n",
                "PASS" => b"230 ok\r\n",
                "FEAT" => b"211-f\r\n SIZE\r\n211 End\r\n",
                "TYPE" => b"200 ok\r\n",
                "SIZE" => b"213 1000000\r\n",
                "EPSV" => {
                    let dl = TcpListener::bind("127.0.0.1:0").unwrap();
                    let p = dl.local_addr().unwrap().port();
                    data_l = Some(dl);
                    w.write_all(format!("229 ok (|||{p}|)\r\n").as_bytes())
                        .unwrap();
                    continue;
                }
                "RETR" => {
                    w.write_all(b"150 here\r\n").unwrap();
                    let (mut d, _) = data_l.take().unwrap().accept().unwrap();
                    let part: Vec<u8> = (0..FAKE_SENT).map(fake_byte).collect();
                    d.write_all(&part).unwrap();
                    drop(d);
                    match cut {
                        Cut::Vanish => return,
                        Cut::Lie => b"226 all done\r\n",
                    }
                }
                "QUIT" => {
                    let _ = w.write_all(b"221 bye\r\n");
                    return;
                }
                _ => b"502 no\r\n",
            };
            w.write_all(reply).unwrap();
        }
    });
    (port, h)
}

#[test]
fn cut_download_never_reports_success_and_resume_completes_it() {
    let dir = tempfile::tempdir().unwrap();
    let local = dir.path().join("file");
    for cut in [Cut::Vanish, Cut::Lie] {
        let _ = std::fs::remove_file(&local);
        let (port, h) = fake_server(cut);
        let url = format!("ftp://127.0.0.1:{port}/file");
        // Not tried again (--retry-for 0): the fake server answers once.
        let out = run(&mut fatpipe_cmd(&[
            "cp",
            "--json",
            "--retry-for",
            "0",
            &url,
            local.to_str().unwrap(),
        ]));
        h.join().unwrap();
        assert!(!out.status.success(), "a cut download must fail");
        let summary: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(summary["ok"], false);
        let err = summary["files"][0]["error"].as_str().unwrap().to_string();
        assert!(
            err.contains("incomplete") || err.contains("closed the control connection"),
            "{err}"
        );
        // What arrived waits under the partial name; the destination was never written.
        assert!(!local.exists());
        let part = dir.path().join("file.fatpipe-part");
        assert_eq!(std::fs::metadata(&part).unwrap().len(), FAKE_SENT as u64);
    }
    // The partial file is a prefix of the real one: --resume against a real server completes it.
    let s = FatpipeServer::start(&["--anonymous"]);
    let full: Vec<u8> = (0..FAKE_SIZE).map(fake_byte).collect();
    std::fs::write(s.path("file"), &full).unwrap();
    run_ok(&mut fatpipe_cmd(&[
        "cp",
        "--quiet",
        "--resume",
        &s.url("file"),
        local.to_str().unwrap(),
    ]));
    assert_same(&s.path("file"), &local);
}

/// A command run in a private mount namespace with a 1 MiB tmpfs mounted at `dir`.
fn on_tiny_disk(dir: &std::path::Path, program: &str, args: &[&str]) -> Command {
    require("unshare");
    let mut c = Command::new("unshare");
    c.args([
        "--mount",
        "--propagation",
        "private",
        "sh",
        "-c",
        "mount -t tmpfs -o size=1m fatpipe-test \"$0\" && exec \"$@\"",
    ])
    .arg(dir)
    .arg(program)
    .args(args);
    c
}

#[test]
fn full_disk_on_the_server_is_a_clear_error() {
    let root = tempfile::tempdir().unwrap();
    let cmd = on_tiny_disk(
        root.path(),
        fatpipe(),
        &[
            "serve",
            "--root",
            root.path().to_str().unwrap(),
            "--listen",
            "127.0.0.1:0",
            "--anonymous-write",
        ],
    );
    let s = FatpipeServer::spawn(cmd, root);
    let dir = tempfile::tempdir().unwrap();
    let local = dir.path().join("big");
    random_file(&local, 3 << 20, 2);
    let out = run(&mut fatpipe_cmd(&[
        "cp",
        "--quiet",
        local.to_str().unwrap(),
        &s.url("big"),
    ]));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(8), "{err}");
    assert!(
        err.contains("452") && err.contains("the server's disk is full"),
        "{err}"
    );
    // Nothing half-written under the file's name.
    let mut c = Raw::login(s.addr, "anonymous", "x");
    assert_eq!(c.cmd("SIZE big").0, 550, "a partial upload was kept");
    assert_eq!(c.cmd("NOOP").0, 200, "server still serves");
    // A tree stops at the first full disk: the files after it are not begun, in one line.
    let tree = dir.path().join("tree");
    std::fs::create_dir(&tree).unwrap();
    for i in 0..5 {
        random_file(&tree.join(format!("f{i}")), 2 << 20, 10 + i);
    }
    let out = run(&mut fatpipe_cmd(&[
        "cp",
        "-r",
        "--concurrency",
        "1",
        tree.to_str().unwrap(),
        &s.url(""),
    ]));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(8), "{err}");
    assert_eq!(err.matches("failed: ").count(), 1, "{err}");
    assert!(
        err.contains("file(s) not begun: the server's disk is full"),
        "{err}"
    );
}

#[test]
fn full_disk_on_the_client_is_a_clear_error() {
    let s = FatpipeServer::start(&["--anonymous"]);
    random_file(&s.path("big"), 3 << 20, 4);
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("big");
    let url = s.url("big");
    let out = run(&mut on_tiny_disk(
        dir.path(),
        fatpipe(),
        &["cp", "--quiet", &url, target.to_str().unwrap()],
    ));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(7), "{err}");
    // Known to be too large before a byte moved: said so, nothing written.
    assert!(
        err.contains("not enough room on this machine's disk for /big: 3 MiB needed"),
        "{err}"
    );
    assert!(!err.contains("server said"), "{err}");
}

#[test]
fn unreadable_file_is_a_clear_error() {
    require("setpriv");
    // Root reads everything, so the server runs as nobody for this test.
    let root = tempfile::tempdir().unwrap();
    std::fs::set_permissions(root.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::write(root.path().join("locked"), b"secret").unwrap();
    std::fs::set_permissions(
        root.path().join("locked"),
        std::fs::Permissions::from_mode(0o000),
    )
    .unwrap();
    let mut cmd = Command::new("setpriv");
    cmd.args([
        "--reuid=65534",
        "--regid=65534",
        "--clear-groups",
        fatpipe(),
        "serve",
        "--root",
    ])
    .arg(root.path())
    .args(["--listen", "127.0.0.1:0", "--anonymous"]);
    let s = FatpipeServer::spawn(cmd, root);
    let dir = tempfile::tempdir().unwrap();
    let out = run(&mut fatpipe_cmd(&[
        "cp",
        "--quiet",
        &s.url("locked"),
        dir.path().join("x").to_str().unwrap(),
    ]));
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("550") && err.contains("Permission denied"),
        "{err}"
    );
    // And a local file the client cannot read: fails before anything is sent.
    let out = run(&mut fatpipe_cmd(&[
        "cp",
        "--quiet",
        "/nonexistent/file",
        &s.url("x"),
    ]));
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot read /nonexistent/file"));
}
