//! Riding through failure by itself (`--retry-for`): a server killed in the middle of a
//! download (MODE E, four streams) and of an upload (MODE S) and started again on the same
//! port; the copy reconnects, continues from what arrived and ends with identical bytes. With
//! no server coming back it gives up when `--retry-for` has passed and says how to resume.

mod common;
use common::*;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

/// `fatpipe serve` on 127.0.0.1:`port` serving `root` (a directory the test keeps).
fn serve(root: &Path, port: u16) -> FatpipeServer {
    let mut c = Command::new(fatpipe());
    c.args(["serve", "--anonymous-write", "--root"])
        .arg(root)
        .args(["--listen", &format!("127.0.0.1:{port}")]);
    FatpipeServer::spawn(c, tempfile::tempdir().unwrap())
}

/// Runs `fatpipe cp ARGS` while the server is killed after 1 s and started again 2 s later;
/// returns the copy's output.
fn across_a_restart(root: &Path, port: u16, args: &[&str]) -> std::process::Output {
    let server = serve(root, port);
    let cp = slow_copy(args);
    std::thread::sleep(Duration::from_secs(1));
    drop(server);
    std::thread::sleep(Duration::from_secs(2));
    let _again = serve(root, port);
    finish(cp)
}

/// `fatpipe cp --limit-rate 256mbit ARGS` started: 96 MiB take 3 s. After 1 s the reader has
/// taken 32 MiB; 256 KiB receive buffers keep what the sender can have handed to the kernel
/// below 4 × (8 MiB + 256 KiB), so a server killed then has not sent everything yet.
fn slow_copy(args: &[&str]) -> std::process::Child {
    let mut all = vec!["cp", "--limit-rate", "256mbit", "--tuning", "static:256K"];
    all.extend_from_slice(args);
    fatpipe_cmd(&all)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// The output of a copy that must end within two minutes.
fn finish(mut cp: std::process::Child) -> std::process::Output {
    let deadline = std::time::Instant::now() + Duration::from_secs(120);
    while cp.try_wait().unwrap().is_none() {
        if std::time::Instant::now() > deadline {
            let _ = cp.kill();
            panic!("the copy did not end");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    cp.wait_with_output().unwrap()
}

#[test]
fn a_download_and_an_upload_ride_through_a_server_restart() {
    let root = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    random_file(&root.path().join("big.bin"), 96 << 20, 81);
    let port = free_port();
    let url = |p: &str| format!("ftp://127.0.0.1:{port}/{p}");
    let got = work.path().join("big.bin");
    let out = across_a_restart(
        root.path(),
        port,
        &["-p", "4", &url("big.bin"), got.to_str().unwrap()],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("trying again"), "{err}");
    assert_same(&root.path().join("big.bin"), &got);

    let out = across_a_restart(
        root.path(),
        port,
        &["-p", "1", got.to_str().unwrap(), &url("up.bin")],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("trying again"), "{err}");
    assert_same(&got, &root.path().join("up.bin"));
}

#[test]
fn with_no_server_back_it_gives_up_and_says_how_to_resume() {
    let root = tempfile::tempdir().unwrap();
    random_file(&root.path().join("big.bin"), 96 << 20, 82);
    let port = free_port();
    let server = serve(root.path(), port);
    let work = tempfile::tempdir().unwrap();
    let got = work.path().join("big.bin");
    let url = format!("ftp://127.0.0.1:{port}/big.bin");
    let cp = slow_copy(&["--retry-for", "3s", &url, got.to_str().unwrap()]);
    std::thread::sleep(Duration::from_secs(1));
    drop(server);
    let out = finish(cp);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(
        err.contains("gave up after retrying") && err.contains("--resume"),
        "{err}"
    );
    assert!(
        !got.exists(),
        "an incomplete download keeps its partial name"
    );
}
