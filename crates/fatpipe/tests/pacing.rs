//! The pacing and congestion control a user picks reach the sending end: an upload's client,
//! and, asked over the control channel (`OPTS DRS Pacing=…;CC=…`), a download's server; files
//! arrive intact either way, and a choice the server cannot make is refused without failing the
//! copy.

mod common;

use common::*;

const SIZE: u64 = (24 << 20) + 777;

/// `fatpipe cp … --json`, checked to succeed.
fn cp(args: &[&str], src: &str, dst: &str) -> std::process::Output {
    run_ok(
        fatpipe_cmd(&["cp", "--quiet", "--json"])
            .args(args)
            .arg(src)
            .arg(dst),
    )
}

/// Every record names `cc`, and at least one carries a pacing rate.
fn ran(records: &[serde_json::Value], cc: &str) {
    assert!(!records.is_empty(), "no sender records");
    assert!(
        records.iter().all(|r| r["cc"] == cc),
        "congestion control: {:?}",
        records.iter().map(|r| &r["cc"]).collect::<Vec<_>>()
    );
    assert!(
        records
            .iter()
            .any(|r| r["pace"]["rate"].as_u64().is_some_and(|n| n > 0)),
        "no pacing rate set"
    );
}

/// A writable `fatpipe serve` whose telemetry goes to `server.jsonl` in `dir`.
fn server_with_stats(dir: &std::path::Path) -> (FatpipeServer, std::path::PathBuf) {
    let stats = dir.join("server.jsonl");
    let s = FatpipeServer::start(&["--anonymous-write", "--stats", stats.to_str().unwrap()]);
    (s, stats)
}

#[test]
fn the_sending_end_runs_the_pacing_and_congestion_control_asked_for() {
    let work = tempfile::tempdir().unwrap();
    let (s, server_stats) = server_with_stats(work.path());
    let src = work.path().join("src.bin");
    random_file(&src, SIZE, 41);
    // Upload: this client sends, over two streams, paced adaptively, with reno.
    let client_stats = work.path().join("client.jsonl");
    let stats = client_stats.to_str().unwrap();
    let flags = [
        "-p", "2", "--pacing", "adaptive", "--cc", "reno", "--stats", stats,
    ];
    cp(&flags, src.to_str().unwrap(), &s.url("up.bin"));
    assert_same(&src, &s.path("up.bin"));
    ran(&sender_samples(&client_stats, "client"), "reno");
    // Download: the server sends, as the client asked it to.
    let back = work.path().join("back.bin");
    let flags = ["-p", "2", "--pacing", "cwp", "--cc", "reno"];
    cp(&flags, &s.url("up.bin"), back.to_str().unwrap());
    assert_same(&src, &back);
    ran(&sender_samples(&server_stats, "server"), "reno");
}

#[test]
fn a_congestion_control_the_server_lacks_is_refused_and_the_copy_goes_on() {
    let s = FatpipeServer::start(&["--anonymous"]);
    random_file(&s.path("f.bin"), SIZE, 42);
    let work = tempfile::tempdir().unwrap();
    let back = work.path().join("f.bin");
    let out = run_ok(
        fatpipe_cmd(&["cp", "--cc", "no-such-cc"])
            .args([s.url("f.bin").as_str(), back.to_str().unwrap()]),
    );
    assert_same(&s.path("f.bin"), &back);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("refused") && err.contains("no-such-cc"),
        "{err}"
    );
    // On the control channel: 501, naming what the server has.
    let mut raw = Raw::login(s.addr, "anonymous", "x@");
    let (code, text) = raw.cmd("OPTS DRS CC=no-such-cc");
    assert_eq!(code, 501, "{text}");
    assert!(text.contains("reno"), "{text}");
    let (code, text) = raw.cmd("OPTS DRS Pacing=sideways");
    assert_eq!(code, 501, "{text}");
    assert_eq!(raw.cmd("OPTS DRS Pacing=adaptive;CC=reno").0, 200);
}

#[test]
fn a_sender_running_bbr_tells_the_receiver_which_reads_no_trains() {
    // bbr paces its own connections: a download's server says so (`126 PACED bbr`), an
    // upload's client too (`OPTS DRS Paced=bbr`), and the receiving end's laws take packet
    // spacing as the sender's pacing rate; its telemetry records it. Under reno nothing is said.
    let work = tempfile::tempdir().unwrap();
    let (s, server_stats) = server_with_stats(work.path());
    random_file(&s.path("f.bin"), SIZE, 43);
    // The `cc` events a stats file holds for `end`.
    let told = |stats: &std::path::Path, end: &str| {
        std::fs::read_to_string(stats)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .filter(|e| e["event"] == "cc" && e["end"] == end)
            .map(|e| e["cc"].as_str().unwrap_or_default().to_string())
            .collect::<Vec<_>>()
    };
    for cc in ["reno", "bbr"] {
        let stats = work.path().join(format!("{cc}.jsonl"));
        let back = work.path().join(format!("{cc}.bin"));
        // Two seconds or so per copy: the sender tells on its conductor's tick, and an
        // unlimited copy on loopback can end before the first one (at 200 Mbit/s, one copy of
        // a loaded test run's still did).
        let flags = [
            "-p",
            "2",
            "--cc",
            cc,
            "--limit-rate",
            "100mbit",
            "--stats",
            stats.to_str().unwrap(),
        ];
        let down = cp(&flags, &s.url("f.bin"), back.to_str().unwrap());
        assert_same(&s.path("f.bin"), &back);
        cp(
            &flags,
            back.to_str().unwrap(),
            &s.url(&format!("up-{cc}.bin")),
        );
        assert_same(&back, &s.path(&format!("up-{cc}.bin")));
        let heard = usize::from(cc == "bbr");
        // What the download said and which events the client recorded, should it not hear.
        let events = std::fs::read_to_string(&stats)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .map(|e| format!("{}/{}", e["event"], e["end"]))
            .collect::<std::collections::BTreeSet<_>>();
        assert_eq!(
            told(&stats, "client").len(),
            heard,
            "client, {cc}: the download said {} {}; events {events:?}",
            String::from_utf8_lossy(&down.stdout),
            String::from_utf8_lossy(&down.stderr)
        );
        assert_eq!(told(&server_stats, "server").len(), heard, "server, {cc}");
    }
}
