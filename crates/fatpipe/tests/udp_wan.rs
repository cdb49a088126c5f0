//! The UDP data channel across an emulated lossy path (`fatpipe testbed`, needs root, as CI
//! has): 20 ms, 200 Mbit/s, 2 % random loss each way. Downloads and uploads arrive intact with
//! each rate controller, lost packets are resent (and counted), a copy with no options that
//! meets the loss over TCP goes on over UDP, one to a new server over a long path starts on it,
//! and where UDP does not get through (a namespace that drops it) the copy falls back to TCP
//! and says so.

mod common;
use common::*;
use std::process::Command;

/// One test at a time: two emulated paths and their transfers on two cores would starve the
/// receivers, and the seed's controllers read the drops as loss (`state` halves down to 1 %
/// of the line rate, which made a run take minutes).
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// A server on side a of testbed `tb`, with anonymous writes and `extra` options.
fn server(tb: &Testbed, extra: &[&str]) -> FatpipeServer {
    server_logging(tb, extra, std::process::Stdio::null())
}

/// [`server`], its log going to `log`.
fn server_logging(tb: &Testbed, extra: &[&str], log: std::process::Stdio) -> FatpipeServer {
    let root = tempfile::tempdir().unwrap();
    random_file(&root.path().join("f.bin"), 12 << 20, 16);
    let mut c = tb.fatpipe("a", &["serve", "--anonymous-write", "--root"]);
    c.arg(root.path())
        .args(["--listen", "198.18.0.1:0"])
        .args(extra);
    FatpipeServer::spawn_logging(c, root, log)
}

/// `fatpipe cp --quiet --json --transport udp ARGS… SRC DST` on side b; its JSON summary.
fn udp_cp(tb: &Testbed, args: &[&str], src: &str, dst: &str) -> serde_json::Value {
    let mut all = vec!["cp", "--quiet", "--json", "--transport", "udp"];
    all.extend_from_slice(args);
    all.extend_from_slice(&[src, dst]);
    json(&run_ok(&mut tb.fatpipe("b", &all)))
}

fn json(out: &std::process::Output) -> serde_json::Value {
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn downloads_and_uploads_over_udp_arrive_whole_through_random_loss() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let tb = Testbed::up(
        "fpudp",
        &["--rtt", "20ms", "--rate", "200mbit", "--loss", "0.02"],
    );
    let work = tempfile::tempdir().unwrap();
    let stats = work.path().join("server.jsonl");
    let srv = server(&tb, &["--stats", stats.to_str().unwrap()]);
    for control in ["default", "history", "state"] {
        let dst = work.path().join(format!("{control}.bin"));
        let args = ["--udp-rate-control", control, "--udp-rate", "200mbit"];
        let out = udp_cp(&tb, &args, &srv.url("f.bin"), dst.to_str().unwrap());
        assert_same(&srv.path("f.bin"), &dst);
        let file = &out["files"][0];
        let udp = file["udp"].as_str().unwrap_or_default();
        assert!(
            udp.starts_with(&format!("udp: {control} rate control")),
            "{file}"
        );
        // 2 % of the packets are lost on the way: the sender resent some, and said so.
        assert!(!udp.contains(" 0 resent"), "{udp}");
        assert!(file["verified"].as_str().is_some(), "{file}");
    }
    // The sending server wrote its rate decisions and the packet-loss signatures, which plot.
    let events: Vec<serde_json::Value> = std::fs::read_to_string(&stats)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let of = |kind: &str| events.iter().filter(|e| e["event"] == kind).count();
    assert!(of("rate") > 0 && of("segment") > 0, "{events:?}");
    let lost: usize = events
        .iter()
        .filter(|e| e["event"] == "segment")
        .map(|e| e["lost"].as_array().map_or(0, |l| l.len()))
        .sum();
    assert!(lost > 0, "2 % loss, yet no packet lost in any signature");
    // The server remembers what the path taught: `state` (the last run) starts (its first rate
    // event) near the rate the runs before it ended at, not at half of the 200 Mbit/s line
    // rate as it would afresh.
    let first_state = events
        .iter()
        .find(|e| e["event"] == "rate" && e["control"] == "state")
        .and_then(|e| e["rate_mbit"].as_f64())
        .unwrap_or(0.0);
    assert!(first_state > 120.0, "state started at {first_state} Mbit/s");
    let pic = work.path().join("udp.svg");
    run_ok(fatpipe_cmd(&["plot"]).arg(&stats).arg("-o").arg(&pic));
    let svg = std::fs::read_to_string(&pic).unwrap();
    assert!(svg.contains("Packet-loss signatures") && svg.contains("UDP rate decisions"));
    // Upload: this end sends, the server receives by UDP and verifies.
    let src = work.path().join("up.bin");
    random_file(&src, 12 << 20, 17);
    let out = udp_cp(&tb, &[], src.to_str().unwrap(), &srv.url("up.bin"));
    assert_same(&src, &srv.path("up.bin"));
    let udp = out["files"][0]["udp"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(udp.starts_with("udp: default rate control"), "{udp}");
}

/// A download into a file and one to /dev/null, then an upload, each with no options across a
/// lossy path: each starts over TCP, meets random loss and goes on over the UDP channel.
#[test]
fn a_copy_with_no_options_that_meets_random_loss_goes_on_over_udp_either_way() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let tb = Testbed::up(
        "fpauto",
        &["--rtt", "20ms", "--rate", "200mbit", "--loss", "0.02"],
    );
    let work = tempfile::tempdir().unwrap();
    let srv = server(&tb, &[]);
    random_file(&srv.path("big.bin"), 32 << 20, 17);
    let into_file = work.path().join("big.bin");
    let (from, down) = (srv.url("big.bin"), into_file.to_str().unwrap());
    // Then an upload of what arrived: its own senders meet the loss.
    let up = srv.url("up.bin");
    for (i, (src, dst)) in [(from.as_str(), down), (&from, "/dev/null"), (down, &up)]
        .into_iter()
        .enumerate()
    {
        // Cold: nothing known of the path, so the copy starts over TCP.
        let cache = work.path().join(format!("cache{i}"));
        let out = json(&run_ok(
            tb.fatpipe("b", &["cp", "--quiet", "--json", "--udp-rate", "200mbit"])
                .args([src, dst])
                .env("XDG_CACHE_HOME", &cache),
        ));
        let transport = &out["transport"];
        assert_eq!(transport["name"], "udp", "{out}");
        assert_eq!(transport["asked"], false, "{out}");
        let why = transport["why"].as_str().unwrap_or_default();
        assert!(why.contains("went on over the UDP channel"), "{why}");
        let udp = out["files"][0]["udp"].as_str().unwrap_or_default();
        assert!(udp.starts_with("udp: default rate control"), "{out}");
        assert_eq!(
            out["bytes"].as_u64().map(|b| b >= 32 << 20),
            Some(true),
            "{out}"
        );
        // The next copy to the server starts on UDP at once.
        let memory = std::fs::read_to_string(cache.join("fatpipe/paths.json")).unwrap();
        assert!(memory.contains("\"cc\": \"bbr\""), "{memory}");
    }
    assert_same(&srv.path("big.bin"), &into_file);
    assert_same(&into_file, &srv.path("up.bin"));
}

/// With no options, one file to or from a server path memory knows nothing of, over a long
/// path (60 ms, clean): it starts on the UDP channel and says why; the next copy to the same
/// server is not new; a stream count asked for keeps the copy on TCP. The download names its
/// receiving socket with its `RETR`, and the server sends the packet train then.
#[test]
fn one_file_to_a_new_server_over_a_long_path_starts_on_udp() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let tb = Testbed::up("fplong", &["--rtt", "60ms", "--rate", "200mbit"]);
    let work = tempfile::tempdir().unwrap();
    let log_path = work.path().join("server.log");
    let log = std::fs::File::create(&log_path).unwrap();
    let srv = server_logging(&tb, &["-vv"], log.into());
    let down = work.path().join("f.bin");
    let (from, to) = (srv.url("f.bin"), down.to_str().unwrap());
    let up = srv.url("up.bin");
    let cp = |args: &[&str], src: &str, dst: &str, cache: &str| {
        json(&run_ok(
            tb.fatpipe("b", &["cp", "--quiet", "--json"])
                .args(args)
                .args([src, dst])
                .env("XDG_CACHE_HOME", work.path().join(cache)),
        ))
    };
    for (src, dst, cache) in [(from.as_str(), to, "down"), (to, up.as_str(), "up")] {
        let out = cp(&[], src, dst, cache);
        if cache == "down" {
            // The client named its receiving socket with the RETR: the train left then.
            let log = std::fs::read_to_string(&log_path).unwrap();
            assert!(log.contains("SITE UDPREADY"), "{log}");
            assert!(
                log.contains("the packet train left as the RETR was read"),
                "{log}"
            );
        }
        let transport = &out["transport"];
        assert_eq!(transport["name"], "udp", "{out}");
        assert_eq!(transport["asked"], false, "{out}");
        let why = transport["why"].as_str().unwrap_or_default();
        assert!(why.contains("a new path with a 6"), "{why}");
        let file = &out["files"][0];
        assert!(file["udp_started"].as_str().is_some(), "{file}");
        let udp = file["udp"].as_str().unwrap_or_default();
        assert!(udp.starts_with("udp: default rate control"), "{out}");
        assert!(file["verified"].as_str().is_some(), "{file}");
        if cache == "up" {
            // This end's sender keeps what the path taught it for the next copy.
            let kept = std::fs::read(work.path().join("up/fatpipe/paths.json")).unwrap();
            let kept: serde_json::Value = serde_json::from_slice(&kept).unwrap();
            let servers = kept["servers"].as_object().cloned().unwrap_or_default();
            let learned = servers
                .values()
                .any(|s| s["udp"]["rate"].as_f64().is_some());
            assert!(learned, "{kept}");
        }
        // The next copy to the server knows the path: not new, whichever way it goes.
        let again = cp(&[], src, dst, cache);
        let why = again["transport"]["why"].as_str().unwrap_or_default();
        assert!(!why.contains("a new path"), "{again}");
        assert!(again["files"][0]["udp_started"].is_null(), "{again}");
    }
    assert_same(&srv.path("f.bin"), &down);
    assert_same(&down, &srv.path("up.bin"));
    // Streams asked for: TCP, though the path is new.
    let out = cp(&["-p", "2"], &from, to, "fixed");
    assert_eq!(out["transport"]["name"], "tcp", "{out}");
    assert_eq!(out["files"][0]["streams"], 2, "{out}");
    assert_same(&srv.path("f.bin"), &down);
}

/// The same over a long path where UDP does not get through either way: each copy (into a
/// file, to /dev/null, up) leaves the channel after its probe and goes on over TCP streams,
/// and says so.
#[test]
fn a_new_long_path_that_drops_udp_goes_on_over_tcp_streams() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let tb = Testbed::up("fplongx", &["--rtt", "60ms", "--rate", "200mbit"]);
    for side in ["fplongx-a", "fplongx-b"] {
        drop_udp(side);
    }
    let work = tempfile::tempdir().unwrap();
    let srv = server(&tb, &[]);
    let down = work.path().join("f.bin");
    let (from, to) = (srv.url("f.bin"), down.to_str().unwrap().to_string());
    let up = srv.url("up.bin");
    let copies = [
        (from.as_str(), to.as_str()),
        (&from, "/dev/null"),
        (&to, &up),
    ];
    for (i, (src, dst)) in copies.into_iter().enumerate() {
        let out = json(&run_ok(
            tb.fatpipe("b", &["cp", "--quiet", "--json", src, dst])
                .env("XDG_CACHE_HOME", work.path().join(format!("cache{i}"))),
        ));
        let transport = &out["transport"];
        assert_eq!(transport["name"], "tcp", "{out}");
        let why = transport["why"].as_str().unwrap_or_default();
        assert!(why.contains("a new path with a 6"), "{why}");
        assert!(why.ends_with("went on over TCP streams"), "{why}");
        assert!(out["files"][0]["udp"].is_null(), "{out}");
        assert_eq!(out["bytes"], 12 << 20, "{out}");
    }
    assert_same(&srv.path("f.bin"), &down);
    assert_same(&down, &srv.path("up.bin"));
}

/// Makes namespace `ns` drop every UDP packet that arrives, silently, as a firewall would (the
/// rule goes before the local table's).
fn drop_udp(ns: &str) {
    ip(&["-n", ns, "rule", "add", "pref", "1", "lookup", "local"]);
    ip(&["-n", ns, "rule", "del", "pref", "0"]);
    ip(&[
        "-n",
        ns,
        "rule",
        "add",
        "pref",
        "0",
        "iif",
        "fp0",
        "ipproto",
        "udp",
        "blackhole",
    ]);
}

/// Downloads `f.bin` from a server on side a over UDP; returns what the copy said of it.
fn fallback_copy(tb: &Testbed) -> String {
    let srv = server(tb, &[]);
    let work = tempfile::tempdir().unwrap();
    let dst = work.path().join("f.bin");
    let out = udp_cp(tb, &[], &srv.url("f.bin"), dst.to_str().unwrap());
    assert_same(&srv.path("f.bin"), &dst);
    let file = &out["files"][0];
    assert!(file["verified"].as_str().is_some(), "{file}");
    file["udp"].as_str().unwrap_or_default().to_string()
}

fn ip(args: &[&str]) {
    run_ok(Command::new("ip").args(args));
}

#[test]
fn where_udp_is_dropped_the_copy_falls_back_to_tcp_and_says_so() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    // The receiving side drops every UDP packet that arrives: no packet gets through the 2 s
    // probe.
    let tb = Testbed::up("fpudpx", &["--rtt", "10ms", "--rate", "200mbit"]);
    drop_udp("fpudpx-b");
    let said = fallback_copy(&tb);
    assert!(said.contains("the data went over TCP"), "{said}");
    drop(tb);
    // The sending side's routes refuse UDP outright: the fallback is immediate.
    let tb = Testbed::up("fpudpy", &["--rtt", "10ms", "--rate", "200mbit"]);
    ip(&[
        "-n",
        "fpudpy-a",
        "rule",
        "add",
        "ipproto",
        "udp",
        "blackhole",
    ]);
    let said = fallback_copy(&tb);
    assert!(said.contains("the data went over TCP"), "{said}");
}
