//! Broken links and broken processes across an emulated 20 ms, 20 Mbit/s path (`fatpipe
//! testbed`, needs root, as CI has): uploads and downloads ride through a link outage of 28 s
//! with the default limits; a download stopped with Ctrl-C and an upload whose server was
//! killed resume to identical bytes (MODE E, four streams: the partial files have holes).

mod common;
use common::*;
use std::process::Command;
use std::time::Duration;

/// Takes a testbed down even if the test fails half-way.
struct Down(&'static str);

impl Drop for Down {
    fn drop(&mut self) {
        let _ = run(&mut fatpipe_cmd(&["testbed", "down", "--name", self.0]));
    }
}

/// `fatpipe testbed exec <side> -- fatpipe <args>` on testbed `name`.
fn in_side(name: &str, side: &str, args: &[&str]) -> Command {
    let mut c = fatpipe_cmd(&["testbed", "exec", side, "--name", name, "--", fatpipe()]);
    c.args(args);
    c
}

/// Brings up testbed `name` with `extra` settings; taken down when the guard drops.
fn testbed(name: &'static str, extra: &[&str]) -> Down {
    let guard = Down(name);
    let mut args = vec![
        "testbed", "up", "--name", name, "--rtt", "20ms", "--rate", "20mbit",
    ];
    args.extend(extra);
    run_ok(&mut fatpipe_cmd(&args));
    guard
}

/// A writable anonymous server in side a of testbed `name`, on `root`.
fn server(name: &str, root: tempfile::TempDir) -> FatpipeServer {
    let mut c = in_side(name, "a", &["serve", "--anonymous-write", "--root"]);
    c.arg(root.path()).args(["--listen", "198.18.0.1:0"]);
    FatpipeServer::spawn(c, root)
}

#[test]
fn uploads_and_downloads_ride_through_a_28_second_outage() {
    const NAME: &str = "fpcut";
    let work = tempfile::tempdir().unwrap();
    let schedule = work.path().join("schedule");
    // The link goes dead 5 s after the emulator starts and comes back 28 s later: TCP's
    // backoff then leaves about 50 s without a byte, past the server's old fixed 30 s limit.
    std::fs::write(&schedule, "0s loss=0\n5s loss=100%\n33s loss=0\n").unwrap();
    let _down = testbed(NAME, &["--schedule", schedule.to_str().unwrap()]);
    let root = tempfile::tempdir().unwrap();
    random_file(&root.path().join("down.bin"), 12 << 20, 51);
    let s = server(NAME, root);
    let up = work.path().join("up.bin");
    random_file(&up, 12 << 20, 52);
    let back = work.path().join("down.bin");
    let (down_url, up_url) = (s.url("down.bin"), s.url("up.bin"));
    let (up_path, back_path) = (up.to_str().unwrap(), back.to_str().unwrap());
    let both = std::thread::scope(|sc| {
        let d = sc.spawn(|| {
            run(&mut in_side(
                NAME,
                "b",
                &["cp", "--quiet", "-p", "4", &down_url, back_path],
            ))
        });
        let u = sc.spawn(|| {
            run(&mut in_side(
                NAME,
                "b",
                &["cp", "--quiet", "-p", "4", up_path, &up_url],
            ))
        });
        [d.join().unwrap(), u.join().unwrap()]
    });
    for out in &both {
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    assert_same(&s.path("down.bin"), &back);
    assert_same(&up, &s.path("up.bin"));
}

#[test]
fn an_interrupted_download_and_a_killed_server_resume_to_identical_bytes() {
    const NAME: &str = "fpkill";
    let _down = testbed(NAME, &[]);
    let root = tempfile::tempdir().unwrap();
    random_file(&root.path().join("big.bin"), 24 << 20, 61);
    let s = server(NAME, root);
    let work = tempfile::tempdir().unwrap();
    let dest = work.path().join("big.bin");
    let part = work.path().join("big.bin.fatpipe-part");

    // Ctrl-C in the middle of a four-stream download.
    let (src, dst) = (s.url("big.bin"), dest.to_str().unwrap().to_string());
    let cp = four_streams(NAME, &src, &dst, false);
    std::thread::sleep(Duration::from_millis(3500));
    // SAFETY: signals the child this test started, by its PID.
    unsafe { libc::kill(cp.id() as i32, libc::SIGINT) };
    assert!(!wait(cp).success());
    assert!(
        !dest.exists(),
        "an incomplete download never takes the destination's name"
    );
    let held = fatpipe_net::partial::read(&std::fs::File::open(&part).unwrap())
        .unwrap()
        .expect("the partial file records what arrived");
    assert!(!held.is_empty() && held.len() < 24 << 20, "{held}");
    assert!(wait(four_streams(NAME, &src, &dst, true)).success());
    assert_same(&s.path("big.bin"), &dest);
    assert!(!part.exists());

    // The server killed in the middle of a four-stream upload, then started again.
    let up = s.url("again.bin");
    let cp = four_streams(NAME, &dst, &up, false);
    std::thread::sleep(Duration::from_millis(3500));
    let FatpipeServer { root, proc, .. } = s;
    drop(proc); // SIGKILL, by PID
    assert!(!wait(cp).success());
    let s = server(NAME, root);
    assert!(wait(four_streams(NAME, &dst, &s.url("again.bin"), true)).success());
    assert_same(&dest, &s.path("again.bin"));
}

/// Starts `cp -p 4 [--resume] SRC DST` in side b.
fn four_streams(name: &str, src: &str, dst: &str, resume: bool) -> std::process::Child {
    let mut args = vec!["cp", "--quiet", "-p", "4"];
    if resume {
        args.push("--resume");
    }
    args.extend([src, dst]);
    in_side(name, "b", &args)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap()
}

/// Waits (at most 5 minutes) for a child to end.
fn wait(mut c: std::process::Child) -> std::process::ExitStatus {
    let deadline = std::time::Instant::now() + Duration::from_secs(300);
    loop {
        if let Some(s) = c.try_wait().unwrap() {
            return s;
        }
        assert!(std::time::Instant::now() < deadline, "cp did not end");
        std::thread::sleep(Duration::from_millis(50));
    }
}
