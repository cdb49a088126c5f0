//! `fatpipe lab` end to end on small transfers (needs root, as CI has): presets and a custom
//! command pair are measured and reported; a failing client is reported as a failure.

mod common;
use common::*;

fn lab(out: &std::path::Path, extra: &[&str]) -> std::process::Output {
    let mut args = vec![
        "lab",
        "--rtt",
        "10ms",
        "--rate",
        "100mbit",
        "--runs",
        "1",
        "--size-mib",
        "8",
        "--out",
        out.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    run(&mut fatpipe_cmd(&args))
}

fn results(out: &std::path::Path) -> Vec<serde_json::Value> {
    serde_json::from_str(&std::fs::read_to_string(out.join("results.json")).unwrap()).unwrap()
}

#[test]
fn presets_and_a_custom_pair_are_measured() {
    require("iperf3");
    let dir = tempfile::tempdir().unwrap();
    let custom_server =
        "cd \"$(dirname {file})\" && exec python3 -m http.server 8080 --bind 198.18.0.2";
    let custom_client = "exec curl -sS --fail -o /dev/null http://198.18.0.2:8080/file";
    let out = lab(
        dir.path(),
        &[
            "--tool",
            "iperf3",
            "--tool",
            "fatpipe",
            "--server",
            custom_server,
            "--client",
            custom_client,
            "--port",
            "8080",
            "--label",
            "http",
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let r = results(dir.path());
    let labels: Vec<&str> = r.iter().map(|c| c["label"].as_str().unwrap()).collect();
    assert_eq!(labels, vec!["iperf3 (1 stream, -R)", "fatpipe cp", "http"]);
    let ceiling = 100.0 * 1448.0 / 1500.0;
    for case in &r {
        let run = &case["runs"][0];
        let mbit = run["mbit_s"].as_f64().unwrap();
        // The data phase is measured on the emulated link: no tool can beat its ceiling.
        assert!(
            mbit > 5.0 && mbit <= ceiling * 1.02,
            "{}: {mbit} Mbit/s",
            case["label"]
        );
        assert!(run["wall_seconds"].as_f64().unwrap() >= run["data_seconds"].as_f64().unwrap());
        assert!(run["peak_rb_receiver"].as_u64().unwrap() > 0, "{case}");
    }
    let md = std::fs::read_to_string(dir.path().join("results.md")).unwrap();
    assert_eq!(
        md.lines()
            .filter(|l| l.starts_with("| 10 ms, 100 Mbit/s"))
            .count(),
        3,
        "{md}"
    );
    assert!(!std::path::Path::new(&format!(
        "/var/run/netns/lab{}-a",
        std::process::id() % 100_000
    ))
    .exists());
}

#[test]
fn uploads_are_measured_in_their_own_direction() {
    // The client sends the file a -> b (an HTTP PUT-like upload with curl to a netcat-free sink).
    let dir = tempfile::tempdir().unwrap();
    let server = "exec python3 -c 'import socket\ns=socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind((\"198.18.0.2\", 8082)); s.listen(1)\nc,_=s.accept()\nwhile c.recv(1<<20): pass'";
    let client = "exec python3 -c 'import socket,sys\ns=socket.create_connection((\"198.18.0.2\", 8082)); s.sendall(open(sys.argv[1],\"rb\").read()); s.close()' {file}";
    let out = lab(
        dir.path(),
        &[
            "--server", server, "--client", client, "--port", "8082", "--label", "upload",
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let run = &results(dir.path())[0]["runs"][0];
    let mbit = run["mbit_s"].as_f64().unwrap();
    assert!(
        mbit > 5.0 && mbit <= 100.0 * 1448.0 / 1500.0 * 1.02,
        "{mbit} Mbit/s"
    );
    // The sender's send buffer is side a's here.
    assert!(run["peak_tb_sender"].as_u64().unwrap() > 0, "{run}");
}

#[test]
fn a_failing_client_is_reported() {
    let dir = tempfile::tempdir().unwrap();
    let out = lab(
        dir.path(),
        &[
            "--server",
            "exec python3 -m http.server 8081 --bind 198.18.0.2",
            "--port",
            "8081",
            "--client",
            "echo broken >&2; exit 3",
            "--label",
            "bad",
        ],
    );
    assert!(!out.status.success());
    let r = results(dir.path());
    let failure = r[0]["failures"][0].as_str().unwrap();
    assert!(
        failure.contains("exit status: 3") && failure.contains("broken"),
        "{failure}"
    );
}

#[test]
fn unknown_tool_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let out = lab(dir.path(), &["--tool", "scp"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown tool \"scp\""));
}
