//! Broken links and broken processes across an emulated 20 ms, 20 Mbit/s path (`fatpipe
//! testbed`, needs root, as CI has): uploads and downloads, MODE E and MODE S, ride through a
//! link outage of 28 s with the default limits, no sender taking it for random loss; a
//! download stopped with Ctrl-C and an upload whose server was killed resume to identical
//! bytes (MODE E, four streams: the partial files have holes).

mod common;
use common::*;
use std::process::Stdio;
use std::time::Duration;

/// Brings up testbed `name` (20 ms, 20 Mbit/s) with `extra` settings; taken down when dropped.
fn testbed(name: &'static str, extra: &[&str]) -> Testbed {
    let mut settings = vec!["--rtt", "20ms", "--rate", "20mbit"];
    settings.extend(extra);
    Testbed::up(name, &settings)
}

/// A writable anonymous server in side a of testbed `tb`, on `root`, logging at info to `log`.
fn server(tb: &Testbed, root: tempfile::TempDir, log: Stdio) -> FatpipeServer {
    let mut c = tb.fatpipe("a", &["serve", "--anonymous-write", "--root"]);
    c.arg(root.path()).args(["--listen", "198.18.0.1:0"]);
    c.env("FATPIPE_LOG", "info");
    FatpipeServer::spawn_logging(c, root, log)
}

#[test]
fn uploads_and_downloads_ride_through_a_28_second_outage() {
    let work = tempfile::tempdir().unwrap();
    let schedule = work.path().join("schedule");
    // The link goes dead 5 s after the emulator starts and comes back 28 s later: TCP's
    // backoff then leaves about 50 s without a byte, past the server's old fixed 30 s limit.
    std::fs::write(&schedule, "0s loss=0\n5s loss=100%\n33s loss=0\n").unwrap();
    let tb = testbed("fpcut", &["--schedule", schedule.to_str().unwrap()]);
    let root = tempfile::tempdir().unwrap();
    // MODE E (four streams) and MODE S (one), each way, all at once across the outage.
    let modes = [("4", 51), ("1", 53)];
    for (p, seed) in modes {
        random_file(&root.path().join(format!("down{p}.bin")), 8 << 20, seed);
    }
    let log = work.path().join("server.log");
    let s = server(&tb, root, std::fs::File::create(&log).unwrap().into());
    for (p, seed) in modes {
        random_file(&work.path().join(format!("up{p}.bin")), 8 << 20, seed + 1);
    }
    let copies: Vec<(String, String, String)> = modes
        .iter()
        .flat_map(|(p, _)| {
            let down = work.path().join(format!("down{p}.bin"));
            let up = work.path().join(format!("up{p}.bin"));
            [
                (
                    p.to_string(),
                    s.url(&format!("down{p}.bin")),
                    down.display().to_string(),
                ),
                (
                    p.to_string(),
                    up.display().to_string(),
                    s.url(&format!("up{p}.bin")),
                ),
            ]
        })
        .collect();
    let outs = std::thread::scope(|sc| {
        let running: Vec<_> = copies
            .iter()
            .map(|(p, from, to)| {
                let tb = &tb;
                sc.spawn(move || run(&mut tb.fatpipe("b", &["cp", "-v", "-p", p, from, to])))
            })
            .collect();
        running
            .into_iter()
            .map(|h| h.join().unwrap())
            .collect::<Vec<_>>()
    });
    for out in &outs {
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    for (p, _) in modes {
        let (down, up) = (format!("down{p}.bin"), format!("up{p}.bin"));
        assert_same(&s.path(&down), &work.path().join(&down));
        assert_same(&work.path().join(&up), &s.path(&up));
    }
    // The outage's resends are no random loss: no sender, here or there, changed its
    // congestion control for it, and no download left TCP for the UDP channel.
    let said: Vec<String> = outs
        .iter()
        .map(|o| String::from_utf8_lossy(&o.stderr).into_owned())
        .chain([std::fs::read_to_string(&log).unwrap()])
        .collect();
    assert!(
        !said
            .iter()
            .any(|t| t.contains("random loss, not congestion") || t.contains("UDP channel")),
        "an outage taken for random loss:\n{}",
        said.join("\n")
    );
}

#[test]
fn an_interrupted_download_and_a_killed_server_resume_to_identical_bytes() {
    let tb = testbed("fpkill", &[]);
    let root = tempfile::tempdir().unwrap();
    random_file(&root.path().join("big.bin"), 24 << 20, 61);
    let s = server(&tb, root, Stdio::null());
    let work = tempfile::tempdir().unwrap();
    let dest = work.path().join("big.bin");
    let part = work.path().join("big.bin.fatpipe-part");

    // Ctrl-C in the middle of a four-stream download.
    let (src, dst) = (s.url("big.bin"), dest.to_str().unwrap().to_string());
    let cp = four_streams(&tb, &src, &dst, false);
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
    assert!(wait(four_streams(&tb, &src, &dst, true)).success());
    assert_same(&s.path("big.bin"), &dest);
    assert!(!part.exists());

    // The server killed in the middle of a four-stream upload, then started again.
    let up = s.url("again.bin");
    let cp = four_streams(&tb, &dst, &up, false);
    std::thread::sleep(Duration::from_millis(3500));
    let FatpipeServer { root, proc, .. } = s;
    drop(proc); // SIGKILL, by PID
    assert!(!wait(cp).success());
    let s = server(&tb, root, Stdio::null());
    assert!(wait(four_streams(&tb, &dst, &s.url("again.bin"), true)).success());
    assert_same(&dest, &s.path("again.bin"));
}

/// Starts `cp -p 4 [--resume] SRC DST` in side b.
fn four_streams(tb: &Testbed, src: &str, dst: &str, resume: bool) -> std::process::Child {
    let mut args = vec!["cp", "--quiet", "-p", "4"];
    if resume {
        args.push("--resume");
    }
    args.extend([src, dst]);
    tb.fatpipe("b", &args)
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
