//! fatpipe's own congestion control, `--cc bic` (BIC with adaptive pacing as a BPF program; the
//! `bpf` build feature, which CI's test command turns on; registering it needs root, as CI
//! has), carries real transfers across an emulated lossy path: a download's server and an
//! upload's client register it on demand and run it, the program sets each connection's pacing
//! ceiling itself, and the files arrive intact.
#![cfg(feature = "bpf")]

mod common;
use common::*;

/// Every record ran fatpipe_bic, and the program paced most of them: a ceiling of the 200 Mbit/s
/// path's order (under 800 Mbit/s; the kernel says u64::MAX while nobody set one), which the
/// program's own view (`kernel_pace`) matches; through the path's random loss it found an `eab`.
fn ran_bic(records: &[serde_json::Value]) {
    assert!(!records.is_empty(), "no sender records");
    let ccs: Vec<_> = records.iter().map(|r| r["cc"].clone()).collect();
    assert!(ccs.iter().all(|c| c == "fatpipe_bic"), "{ccs:?}");
    let paced = records
        .iter()
        .filter_map(|r| r["tcp"]["max_pacing_rate"].as_u64())
        .filter(|&c| c > 0 && c < 100_000_000)
        .count();
    assert!(paced > records.len() / 2, "{paced} of {}", records.len());
    let views: Vec<&serde_json::Value> = records.iter().map(|r| &r["kernel_pace"]).collect();
    let shown = views
        .iter()
        .filter(|v| v["ceiling"].as_u64() > Some(0))
        .count();
    assert!(
        shown > records.len() / 2,
        "{shown} of {}: {views:?}",
        records.len()
    );
    assert!(
        views.iter().any(|v| v["eab"].as_u64() > Some(0)),
        "no eab: {views:?}"
    );
}

#[test]
fn the_bpf_bic_registers_on_demand_and_carries_downloads_and_uploads_through_loss() {
    let tb = Testbed::up(
        "fpbic",
        &["--rtt", "20ms", "--rate", "200mbit", "--loss", "0.001"],
    );
    let work = tempfile::tempdir().unwrap();
    let root = tempfile::tempdir().unwrap();
    random_file(&root.path().join("f.bin"), 12 << 20, 61);
    let server_stats = work.path().join("server.jsonl");
    let mut c = tb.fatpipe("a", &["serve", "--anonymous-write", "--root"]);
    c.arg(root.path())
        .args(["--listen", "198.18.0.1:0", "--stats"])
        .arg(&server_stats);
    let srv = FatpipeServer::spawn(c, root);
    // Download: the client asks the server (OPTS DRS CC=bic), which registers the program.
    let back = work.path().join("back.bin");
    let args = ["cp", "--quiet", "-p", "1", "--cc", "bic"];
    let mut cp = tb.fatpipe("b", &args);
    run_ok(cp.arg(srv.url("f.bin")).arg(&back));
    assert_same(&srv.path("f.bin"), &back);
    ran_bic(&sender_samples(&server_stats, "server"));
    // Upload: this end sends; the program is registered already (by the server) or now.
    let client_stats = work.path().join("client.jsonl");
    let mut cp = tb.fatpipe("b", &args);
    cp.arg("--stats").arg(&client_stats);
    run_ok(cp.arg(&back).arg(srv.url("up.bin")));
    assert_same(&back, &srv.path("up.bin"));
    ran_bic(&sender_samples(&client_stats, "client"));
}
