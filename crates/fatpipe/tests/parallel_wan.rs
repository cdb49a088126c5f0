//! `-p auto` across an emulated 20 ms path (`fatpipe testbed`, needs root, as CI has): with
//! 64 KiB buffers (`--tuning stock`) one stream is held by its window, so the first file of a
//! copy grows to the stream limit; every later file of the same copy starts there, in both
//! directions, says so, and moves over the connections the previous file left open; a later
//! copy to the same server starts where the last one ended (path memory).

mod common;
use common::*;

/// The per-file results of `cp --json -r -p auto <extra>` in namespace b.
fn copy(tb: &Testbed, src: &str, dst: &str, extra: &[&str]) -> Vec<serde_json::Value> {
    let mut args = vec![
        "cp",
        "--quiet",
        "--json",
        "-r",
        "-p",
        "auto",
        "--max-streams",
        "4",
        "--tuning",
        "stock",
    ];
    args.extend(extra);
    args.extend([src, dst]);
    let out = run_ok(&mut tb.fatpipe("b", &args));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    // In the order they were copied.
    v["files"].as_array().unwrap().clone()
}

/// The first file grows to the limit; each later one starts with what the previous ended with,
/// over the previous file's connections.
fn assert_started_where_the_last_ended(files: &[serde_json::Value]) {
    assert_eq!(files.len(), 3, "{files:?}");
    let streams: Vec<u64> = files
        .iter()
        .map(|f| f["streams"].as_u64().unwrap())
        .collect();
    assert_eq!(streams, [4, 4, 4], "{files:?}");
    let first = |f: &serde_json::Value| f["stream_decisions"][0].as_str().unwrap_or("").to_string();
    assert!(!first(&files[0]).starts_with("started with"), "{files:?}");
    for f in &files[1..] {
        assert!(
            first(f).starts_with("started with 4 streams, where the previous transfer"),
            "{f}"
        );
    }
    let reused: Vec<u64> = files
        .iter()
        .map(|f| f["reused_streams"].as_u64().unwrap())
        .collect();
    assert_eq!(reused, [0, 4, 4], "{files:?}");
}

#[test]
fn later_files_of_an_auto_copy_start_where_the_previous_ended() {
    let tb = Testbed::up("fpauto", &["--rtt", "20ms", "--rate", "1gbit"]);
    let root = tempfile::tempdir().unwrap();
    std::fs::create_dir(root.path().join("d")).unwrap();
    for i in 0..3 {
        random_file(&root.path().join(format!("d/f{i}")), 6 << 20, 40 + i);
    }
    let server = FatpipeServer::spawn(
        {
            let mut c = tb.fatpipe("a", &["serve", "--anonymous-write", "--root"]);
            c.arg(root.path()).args(["--listen", "198.18.0.1:0"]);
            c
        },
        root,
    );
    let work = tempfile::tempdir().unwrap();
    let down = work.path().join("down");
    let files = copy(&tb, &server.url("d"), down.to_str().unwrap(), &[]);
    assert_started_where_the_last_ended(&files);
    for i in 0..3 {
        let name = format!("f{i}");
        assert_same(&server.path(&format!("d/{name}")), &down.join(&name));
    }
    let files = copy(
        &tb,
        down.to_str().unwrap(),
        &server.url("up"),
        &["--no-path-memory"],
    );
    assert_started_where_the_last_ended(&files);
    for i in 0..3 {
        let name = format!("f{i}");
        assert_same(&down.join(&name), &server.path(&format!("up/{name}")));
    }
    // A new copy to the same server starts where the first copy ended (the second did not
    // update the memory), and says so.
    let again = work.path().join("again");
    let files = copy(&tb, &server.url("d/f1"), again.to_str().unwrap(), &[]);
    let first = files[0]["stream_decisions"][0].as_str().unwrap_or("");
    assert!(
        first.starts_with("started with 4 streams, where the last copy to 198.18.0.1:"),
        "{files:?}"
    );
    assert_same(&server.path("d/f1"), &again);
}
