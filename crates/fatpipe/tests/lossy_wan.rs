//! A download across an emulated lossy path (`fatpipe testbed`, needs root, as CI has): 20 ms,
//! 200 Mbit/s, 2 % random loss each way. Over TCP (`--transport tcp`: with no options the copy
//! would go on over the UDP channel, udp_wan.rs) the server's senders start on the system's
//! cubic, meet losses with the RTT at its minimum, and switch to bbr; the copy says so, the file
//! arrives intact, and the next copy to the same server starts on bbr (path memory). An HTTPS
//! download's sender (the server's GET) switches alike.

mod common;
use common::*;

#[test]
fn random_loss_switches_the_senders_to_bbr_and_the_next_copy_starts_on_it() {
    let tb = Testbed::up(
        "fplossy",
        &["--rtt", "20ms", "--rate", "200mbit", "--loss", "0.02"],
    );
    let root = tempfile::tempdir().unwrap();
    random_file(&root.path().join("f.bin"), 16 << 20, 77);
    let work = tempfile::tempdir().unwrap();
    let stats = work.path().join("server.jsonl");
    let server = FatpipeServer::spawn(
        {
            let mut c = tb.fatpipe("a", &["serve", "--anonymous", "--root"]);
            c.arg(root.path())
                .args(["--listen", "198.18.0.1:0", "--stats"]);
            c.arg(&stats);
            c
        },
        root,
    );
    let dst = work.path().join("f.bin");
    // Up to three copies: now and then `-p auto` judges a lone stream's first look a full path
    // (at 20 ms its delayed acknowledgements stretch the RTT past the queue mark), stays at one
    // stream, and that stream's RTT never shows the random loss (seen in 1 of 6 runs on
    // 2026-11-28; a known weakness, see that day's note). Each copy must arrive intact.
    let mut file = serde_json::Value::Null;
    for _ in 0..3 {
        let out = run_ok(&mut tb.fatpipe(
            "b",
            &[
                "cp",
                "--quiet",
                "--json",
                "--transport",
                "tcp",
                "-p",
                "auto",
                &server.url("f.bin"),
                dst.to_str().unwrap(),
            ],
        ));
        assert_same(&server.path("f.bin"), &dst);
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        file = v["files"][0].clone();
        if file["cc_on_random_loss"] == "bbr" {
            break;
        }
    }
    assert_eq!(file["cc_on_random_loss"], "bbr", "{file}");
    let events: Vec<serde_json::Value> = std::fs::read_to_string(&stats)
        .unwrap()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .filter(|e: &serde_json::Value| e["event"] == "cc")
        .collect();
    assert_eq!(events.len(), 1, "{events:?}");
    assert!(
        events[0]["reason"]
            .as_str()
            .is_some_and(|r| r.contains("random loss")),
        "{events:?}"
    );
    // The next copy to the server starts on bbr at once, and says why.
    let again = work.path().join("again.bin");
    let out = run_ok(&mut tb.fatpipe(
        "b",
        &[
            "cp",
            "-v",
            "--quiet",
            "--transport",
            "tcp",
            "-p",
            "auto",
            &server.url("f.bin"),
            again.to_str().unwrap(),
        ],
    ));
    assert_same(&server.path("f.bin"), &again);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("congestion control bbr: the last copy to 198.18.0.1:"),
        "{err}"
    );
}

#[test]
fn an_https_download_s_sender_switches_to_bbr_on_random_loss() {
    let tb = Testbed::up(
        "fplossyh",
        &["--rtt", "20ms", "--rate", "200mbit", "--loss", "0.02"],
    );
    let pki = tempfile::tempdir().unwrap();
    let (ca, chain, key) = fatpipe_net::tls::testing::ca_signed_files(pki.path()).unwrap();
    let root = tempfile::tempdir().unwrap();
    random_file(&root.path().join("f.bin"), 16 << 20, 78);
    let work = tempfile::tempdir().unwrap();
    let stats = work.path().join("server.jsonl");
    let server = FatpipeServer::spawn(
        {
            let mut c = tb.fatpipe("a", &["serve", "--anonymous", "--root"]);
            c.arg(root.path())
                .args(["--listen", "198.18.0.1:0", "--https", "198.18.0.1:0"])
                .arg("--tls-cert")
                .arg(&chain)
                .arg("--tls-key")
                .arg(&key)
                .arg("--stats")
                .arg(&stats);
            c
        },
        root,
    );
    let url = format!("https://198.18.0.1:{}/f.bin", server.https.unwrap().port());
    let switched = || {
        std::fs::read_to_string(&stats)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .filter(|e| e["event"] == "cc")
            .filter(|e| {
                e["reason"]
                    .as_str()
                    .is_some_and(|r| r.contains("random loss"))
            })
            .count()
    };
    // Up to three copies, as above: a lone connection's first looks may read its delayed
    // acknowledgements as a queue. Each copy must arrive intact.
    for i in 0..3 {
        let dst = work.path().join(format!("f{i}.bin"));
        run_ok(&mut tb.fatpipe(
            "b",
            &[
                "cp",
                "--quiet",
                "--ca",
                ca.to_str().unwrap(),
                &url,
                dst.to_str().unwrap(),
            ],
        ));
        assert_same(&server.path("f.bin"), &dst);
        if switched() > 0 {
            break;
        }
    }
    assert!(switched() > 0, "no switch to bbr in the server's --stats");
}
