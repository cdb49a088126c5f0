//! The dynamic-buffer extension and the tuning modes against real processes on loopback: every
//! mode moves files byte for byte both ways, `OPTS DRS`/`SBUF` answer as specified, the `126 SBUF`
//! announcements reach only clients that asked, and `--stats` feeds `fatpipe plot`.

mod common;
use common::*;
use std::io::{Read, Write};
use std::time::{Duration, Instant};

const MODES: [&str; 7] = [
    "stock",
    "static:1M",
    "probe",
    "kernel",
    "drs-classic",
    "drs-grid",
    "drs",
];

fn server() -> FatpipeServer {
    FatpipeServer::start(&["--anonymous-write", "--sample-interval", "100ms"])
}

#[test]
fn every_mode_moves_files_intact_both_ways() {
    let s = server();
    let work = tempfile::tempdir().unwrap();
    let src = work.path().join("src.bin");
    random_file(&src, (8 << 20) + 1, 4);
    for mode in MODES {
        let name = format!("up-{}.bin", mode.replace(':', "-"));
        run_ok(
            fatpipe_cmd(&["cp", "--quiet", "--tuning", mode])
                .arg(&src)
                .arg(s.url(&name)),
        );
        assert_same(&src, &s.path(&name));
        let back = work.path().join(&name);
        run_ok(
            fatpipe_cmd(&["cp", "--quiet", "--tuning", mode])
                .arg(s.url(&name))
                .arg(&back),
        );
        assert_same(&src, &back);
    }
}

#[test]
fn feat_opts_and_sbuf_answer_as_specified() {
    let s = server();
    let mut c = Raw::login(s.addr, "anonymous", "x");
    let (code, feat) = c.cmd("FEAT");
    assert_eq!(code, 211);
    assert!(feat.lines().any(|l| l == " DRS"), "{feat}");
    assert!(feat.lines().any(|l| l == " SBUF"), "{feat}");
    let (code, text) = c.cmd("OPTS DRS ON;Tuning=drs-classic");
    assert_eq!(
        (code, text.as_str()),
        (200, "OPTS DRS ON;Tuning=drs-classic")
    );
    assert_eq!(c.cmd("OPTS DRS OFF").1, "OPTS DRS OFF;Tuning=drs-classic");
    // A client that will not verify tells the server to stop hashing beside its transfers.
    assert_eq!(
        c.cmd("OPTS DRS Hash=off").1,
        "OPTS DRS OFF;Tuning=drs-classic;Hash=off"
    );
    assert_eq!(c.cmd("OPTS DRS Hash=md5").0, 501);
    assert_eq!(
        c.cmd("OPTS DRS Hash=xxh3").1,
        "OPTS DRS OFF;Tuning=drs-classic"
    );
    assert_eq!(c.cmd("OPTS DRS Turbo=1").0, 501);
    assert_eq!(c.cmd("OPTS DRS Tuning=warp").0, 501);
    assert_eq!(c.cmd("OPTS DRS").0, 501);
    assert_eq!(c.cmd("SBUF 0").0, 501);
    assert_eq!(c.cmd("SBUF lots").0, 501);
    // GridFTP's meaning before a transfer: the next data connections' buffer size.
    assert_eq!(c.cmd("SBUF 1048576"), (200, "SBUF 1048576".to_string()));
    assert_eq!(c.cmd("OPTS DRS ON").1, "OPTS DRS ON;Tuning=static:1M");
}

/// Stores a file by writing 64 KiB every 20 ms for about `ms` milliseconds while reading the
/// control channel; returns every reply line that came before the final one, and the final one.
fn slow_store(c: &mut Raw, ms: u64) -> (Vec<String>, u16) {
    assert_eq!(c.cmd("TYPE I").0, 200);
    let mut d = c.data();
    assert_eq!(c.cmd("STOR slow.bin").0, 150);
    let writer = std::thread::spawn(move || {
        let chunk = vec![7u8; 64 << 10];
        let end = Instant::now() + Duration::from_millis(ms);
        while Instant::now() < end {
            d.write_all(&chunk).unwrap();
            std::thread::sleep(Duration::from_millis(20));
        }
    });
    let mut seen = Vec::new();
    let code = loop {
        let (code, text) = c.reply();
        if code == 226 || code >= 400 || code == 0 {
            break code;
        }
        seen.push(format!("{code} {text}"));
    };
    writer.join().unwrap();
    (seen, code)
}

#[test]
fn receiving_server_announces_its_buffer_only_to_clients_that_asked() {
    let s = server();
    let mut asked = Raw::login(s.addr, "anonymous", "x");
    assert_eq!(asked.cmd("OPTS DRS ON;Tuning=drs-classic").0, 200);
    let (seen, code) = slow_store(&mut asked, 600);
    assert_eq!(code, 226);
    assert!(!seen.is_empty(), "no 126 SBUF while receiving");
    for line in &seen {
        let n = line
            .strip_prefix("126 SBUF ")
            .and_then(|n| n.parse::<u64>().ok());
        assert!(n.is_some_and(|n| n > 0), "unexpected line {line:?}");
    }
    // A stock client in the same mode never sees an unsolicited line.
    let mut stock = Raw::login(s.addr, "anonymous", "x");
    assert_eq!(stock.cmd("OPTS DRS Tuning=drs-classic").0, 200);
    let (seen, code) = slow_store(&mut stock, 600);
    assert_eq!((seen, code), (vec![], 226));
}

#[test]
fn sbuf_during_a_download_is_answered_at_once() {
    let s = server();
    random_file(&s.path("big.bin"), 64 << 20, 9);
    let mut c = Raw::login(s.addr, "anonymous", "x");
    assert_eq!(c.cmd("OPTS DRS ON;Tuning=drs-classic").0, 200);
    assert_eq!(c.cmd("TYPE I").0, 200);
    let mut d = c.data();
    assert_eq!(c.cmd("RETR big.bin").0, 150);
    // The data connection is not read yet, so the transfer is still running.
    let (code, text) = c.cmd("SBUF 1048576");
    assert_eq!(code, 200, "{text}");
    let n: u64 = text.strip_prefix("SBUF ").unwrap().parse().unwrap();
    assert!(n > 0);
    let mut got = Vec::new();
    d.read_to_end(&mut got).unwrap();
    assert_eq!(got.len(), 64 << 20);
    // The server's peak send buffer comes before the final reply, for a client that asked.
    let (code, text) = c.reply();
    assert_eq!(code, 126, "{text}");
    let peak: u64 = text.strip_prefix("SBUF ").unwrap().parse().unwrap();
    assert!(peak > 0);
    assert_eq!(c.reply().0, 226);
}

#[test]
fn stats_record_both_ends_and_plot_draws_them() {
    let work = tempfile::tempdir().unwrap();
    let stats = work.path().join("s.jsonl");
    let s = FatpipeServer::start(&["--anonymous", "--stats", stats.to_str().unwrap()]);
    random_file(&s.path("f.bin"), 32 << 20, 3);
    let out = run_ok(
        // -v: the summary tells how the tuning went.
        fatpipe_cmd(&["cp", "-v", "--tuning", "drs", "--stats"])
            .arg(&stats)
            .arg(s.url("f.bin"))
            .arg(work.path().join("f.bin")),
    );
    assert_same(&s.path("f.bin"), &work.path().join("f.bin"));
    let summary = String::from_utf8_lossy(&out.stderr);
    assert!(
        summary.contains("tuning drs: peak socket buffer here"),
        "{summary}"
    );
    let text = std::fs::read_to_string(&stats).unwrap();
    let recs: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    for (end, role) in [("client", "receiver"), ("server", "sender")] {
        let mine: Vec<_> = recs.iter().filter(|r| r["end"] == end).collect();
        assert!(!mine.is_empty(), "no records from the {end}");
        for r in &mine {
            assert_eq!(r["role"], role);
            assert_eq!(r["tuning"], "drs");
            assert!(r["rcvbuf"].as_u64().unwrap() > 0 && r["sndbuf"].as_u64().unwrap() > 0);
            assert!(r["bytes"].as_u64().unwrap() <= 32 << 20);
        }
    }
    for ext in ["svg", "png"] {
        let pic = work.path().join(format!("s.{ext}"));
        run_ok(fatpipe_cmd(&["plot"]).arg(&stats).arg("-o").arg(&pic));
        let bytes = std::fs::read(&pic).unwrap();
        assert!(bytes.len() > 1000, "{ext}: {} bytes", bytes.len());
    }
    let svg = std::fs::read_to_string(work.path().join("s.svg")).unwrap();
    assert!(svg.contains("Throughput") && svg.contains("receive buffer"));
    // Bad input is an error, not a picture.
    std::fs::write(work.path().join("bad.jsonl"), "not json\n").unwrap();
    let bad = run(fatpipe_cmd(&["plot"])
        .arg(work.path().join("bad.jsonl"))
        .arg("-o")
        .arg(work.path().join("bad.svg")));
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("bad.jsonl:1"));
}

#[test]
fn a_cap_met_before_connecting_is_reported() {
    let s = server();
    random_file(&s.path("f.bin"), 1 << 20, 5);
    let work = tempfile::tempdir().unwrap();
    // 64 MiB is above net.core.rmem_max (4 MiB here, 208 KiB on a stock Debian), and
    // --no-force-buffers keeps even root within it.
    let out = run_ok(
        fatpipe_cmd(&["cp", "--tuning", "static:64M", "--no-force-buffers"])
            .arg(s.url("f.bin"))
            .arg(work.path().join("f.bin")),
    );
    assert_same(&s.path("f.bin"), &work.path().join("f.bin"));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("limit: receive buffer capped at") && err.contains("net.core.rmem_max"),
        "{err}"
    );
}

#[test]
fn a_copy_that_does_not_verify_tells_the_server_not_to_hash() {
    let s = server();
    let work = tempfile::tempdir().unwrap();
    random_file(&s.path("f.bin"), 3 << 20, 9);
    let log = |dst: &std::path::Path| {
        let out = run_ok(
            fatpipe_cmd(&["cp", "-vv", "--json"])
                .arg(s.url("f.bin"))
                .arg(dst),
        );
        let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let verified = json["files"][0]["verified"].as_str().map(String::from);
        (String::from_utf8_lossy(&out.stderr).into_owned(), verified)
    };
    let (to_null, verified) = log(std::path::Path::new("/dev/null"));
    assert!(to_null.contains("OPTS DRS Hash=off"), "{to_null}");
    assert_eq!(verified, None);
    let file = work.path().join("f.bin");
    let (to_file, verified) = log(&file);
    assert!(!to_file.contains("Hash="), "{to_file}");
    assert!(
        verified.is_some_and(|v| v.starts_with("XXH3:")),
        "{to_file}"
    );
    assert_same(&s.path("f.bin"), &file);
}

/// A fatpipe client's MODE S download is hashed beside it too (the UDP channel's transfers are
/// MODE S), and a `CKSM` asked right behind a transfer that failed is not held up by a pass over
/// the whole file: that client drops such answers (it left TCP, and goes on). Asked again, the
/// checksum is the file's.
#[test]
fn a_checksum_behind_a_failed_transfer_is_refused_at_once_and_one_behind_a_whole_one_is_the_file_s()
{
    let s = server();
    let size = 64 << 20;
    random_file(&s.path("big.bin"), size, 31);
    let mut c = Raw::login(s.addr, "anonymous", "x");
    assert_eq!(c.cmd("OPTS DRS ON").0, 200);
    assert_eq!(c.cmd("TYPE I").0, 200);
    // A fatpipe client hears `126` announcements before a transfer's final reply.
    let last = |c: &mut Raw| std::iter::repeat_with(|| c.reply()).find(|(code, _)| *code != 126);
    let mut d = c.data();
    assert_eq!(c.cmd("RETR big.bin").0, 150);
    let mut some = vec![0u8; 1 << 20];
    d.read_exact(&mut some).unwrap();
    drop(d);
    let (code, text) = last(&mut c).unwrap();
    assert_eq!(code, 426, "the client closed the data connection: {text}");
    let ask = "CKSM XXH3 0 -1 big.bin";
    let (code, text) = c.cmd(ask);
    assert_eq!(code, 451, "{text}");
    let (code, full_pass) = c.cmd(ask);
    assert_eq!(code, 213, "{full_pass}");
    let mut d = c.data();
    assert_eq!(c.cmd("RETR big.bin").0, 150);
    let mut whole = Vec::new();
    d.read_to_end(&mut whole).unwrap();
    assert_eq!(whole.len() as u64, size);
    assert_eq!(last(&mut c).unwrap().0, 226);
    assert_eq!(c.cmd(ask), (213, full_pass), "hashed beside the download");
}
