//! GridFTP MODE E against real processes on loopback: fatpipe to fatpipe with fixed and `auto`
//! stream counts, globus-url-copy against `fatpipe serve`, `fatpipe cp` against
//! globus-gridftp-server, each way, files hashed at both ends; and the GridFTP replies
//! (`MODE E`, `OPTS RETR`, `CKSM`, `REST` ranges, `FEAT`).

mod common;
use common::*;

/// Larger than several 1 MiB blocks and not a multiple of one.
const SIZE: u64 = (24 << 20) + 12_345;

fn server() -> FatpipeServer {
    FatpipeServer::start(&["--anonymous-write"])
}

/// `fatpipe cp … --json`, checked to succeed; returns the summary's only file.
fn cp_json(args: &[&str], src: &str, dst: &str) -> serde_json::Value {
    let out = run_ok(
        fatpipe_cmd(&["cp", "--quiet", "--json"])
            .args(args)
            .arg(src)
            .arg(dst),
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    v["files"][0].clone()
}

#[test]
fn four_streams_both_ways_between_fatpipes_with_verification() {
    let s = server();
    let work = tempfile::tempdir().unwrap();
    let src = work.path().join("src.bin");
    random_file(&src, SIZE, 11);
    let up = cp_json(&["-p", "4"], src.to_str().unwrap(), &s.url("up.bin"));
    assert_same(&src, &s.path("up.bin"));
    assert_eq!(up["streams"], 4, "{up}");
    assert!(
        up["verified"]
            .as_str()
            .is_some_and(|v| v.starts_with("XXH3:")),
        "{up}"
    );
    let back = work.path().join("back.bin");
    let down = cp_json(&["-p", "4"], &s.url("up.bin"), back.to_str().unwrap());
    assert_same(&src, &back);
    assert_eq!(down["streams"], 4, "{down}");
    assert!(down["verified"].is_string(), "{down}");
    // To a device (the benchmarks' /dev/null) the download is MODE E as well.
    let null = cp_json(&["-p", "4"], &s.url("up.bin"), "/dev/null");
    assert_eq!(null["streams"], 4, "{null}");
    assert_eq!(null["bytes"], SIZE, "{null}");
}

/// Between fatpipes a verified copy is hashed beside its transfer at both ends: the server
/// answers `CKSM` from the hash it took while the file moved, the client compares the one it
/// took, and neither reads the file again afterwards; over the UDP channel too, whose packets
/// land out of order.
#[test]
fn a_verified_copy_is_hashed_beside_its_transfer() {
    let root = tempfile::tempdir().unwrap();
    let log = tempfile::NamedTempFile::new().unwrap();
    let mut cmd = std::process::Command::new(fatpipe());
    cmd.args([
        "serve",
        "-v",
        "--anonymous-write",
        "--listen",
        "127.0.0.1:0",
        "--root",
    ])
    .arg(root.path());
    let s = FatpipeServer::spawn_logging(cmd, root, log.reopen().unwrap().into());
    let work = tempfile::tempdir().unwrap();
    let src = work.path().join("src.bin");
    // Past the size whose checksum a download asks for with its RETR (hashed before it).
    random_file(&src, (65 << 20) + 12_345, 12);
    let back = work.path().join("back.bin");
    let udp_back = work.path().join("udp.bin");
    let url = s.url("beside.bin");
    let udp_url = s.url("udp.bin");
    for (how, from, to) in [
        (["-p", "4"], src.to_str().unwrap(), url.as_str()),
        (["-p", "4"], &url, back.to_str().unwrap()),
        (
            ["--transport", "udp"],
            src.to_str().unwrap(),
            udp_url.as_str(),
        ),
        (["--transport", "udp"], &udp_url, udp_back.to_str().unwrap()),
    ] {
        let mut cmd = fatpipe_cmd(&["cp"]);
        cmd.args(how).args([from, to]);
        let out = run_ok(cmd.env("FATPIPE_LOG", "fatpipe_ftp=debug"));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("checksum taken beside the transfer"), "{err}");
    }
    assert_same(&src, &s.path("beside.bin"));
    assert_same(&src, &back);
    assert_same(&src, &s.path("udp.bin"));
    assert_same(&src, &udp_back);
    let served = std::fs::read_to_string(log.path()).unwrap();
    assert_eq!(served.matches("taken=true").count(), 4, "{served}");
}

#[test]
fn auto_streams_and_small_files_move_intact() {
    let s = server();
    let work = tempfile::tempdir().unwrap();
    for (i, size) in [0u64, 1, SIZE].into_iter().enumerate() {
        let src = work.path().join(format!("f{i}"));
        random_file(&src, size, 20 + i as u64);
        let name = format!("auto{i}");
        let stats = work.path().join(format!("stats{i}.jsonl"));
        let up = cp_json(
            &["-p", "auto", "--stats", stats.to_str().unwrap()],
            src.to_str().unwrap(),
            &s.url(&name),
        );
        assert_same(&src, &s.path(&name));
        assert!(up["streams"].as_u64().is_some_and(|n| n >= 1), "{up}");
        let paced = |r: &serde_json::Value| {
            r["stream_decisions"].as_array().is_some_and(|d| {
                d.iter()
                    .any(|d| d.as_str().is_some_and(|d| d.contains("paced")))
            })
        };
        assert!(paced(&up), "an auto upload paces its streams: {up}");
        let samples: Vec<serde_json::Value> = std::fs::read_to_string(&stats)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .filter(|r: &serde_json::Value| r["role"] == "sender")
            .collect();
        assert!(size < SIZE || !samples.is_empty(), "no sender samples");
        // A lone stream runs unpaced where its buffers are forced (as root); once it has
        // company, every stream is paced.
        let unpaced =
            |r: &&serde_json::Value| r["tcp"]["max_pacing_rate"].as_u64() == Some(u64::MAX);
        // SAFETY: geteuid has no preconditions and cannot fail.
        let root = unsafe { libc::geteuid() } == 0;
        if up["streams"] == 1 && root {
            assert!(
                samples.iter().all(|r| unpaced(&r)),
                "a lone stream was paced"
            );
        } else {
            let mut last = std::collections::HashMap::new();
            for r in &samples {
                last.insert(r["port"].as_u64(), r);
            }
            assert!(!last.values().any(unpaced), "unpaced streams with company");
        }
        let back = work.path().join(format!("b{i}"));
        let down = cp_json(&["-p", "auto"], &s.url(&name), back.to_str().unwrap());
        assert_same(&src, &back);
        assert!(paced(&down), "the server paces an auto download: {down}");
    }
}

#[test]
fn a_partial_download_resumes_in_mode_e() {
    let s = server();
    random_file(&s.path("r.bin"), SIZE, 5);
    let work = tempfile::tempdir().unwrap();
    let part = work.path().join("r.bin");
    let whole = std::fs::read(s.path("r.bin")).unwrap();
    std::fs::write(&part, &whole[..(5 << 20) + 7]).unwrap();
    let r = cp_json(
        &["-p", "3", "--resume"],
        &s.url("r.bin"),
        part.to_str().unwrap(),
    );
    assert_eq!(r["resumed_from"], (5 << 20) + 7, "{r}");
    assert_eq!(r["bytes"], SIZE - (5 << 20) - 7, "{r}");
    assert_same(&s.path("r.bin"), &part);
}

#[test]
fn globus_url_copy_four_streams_against_fatpipe_serve() {
    require("globus-url-copy");
    let s = server();
    let work = tempfile::tempdir().unwrap();
    let src = work.path().join("g.bin");
    random_file(&src, SIZE, 7);
    run_ok(
        std::process::Command::new("globus-url-copy")
            .args(["-fast", "-p", "4", "-verify-checksum"])
            .arg(format!("file://{}", src.display()))
            .arg(s.url("g.bin")),
    );
    assert_same(&src, &s.path("g.bin"));
    let back = work.path().join("g-back.bin");
    run_ok(
        std::process::Command::new("globus-url-copy")
            .args(["-fast", "-p", "4", "-verify-checksum"])
            .arg(s.url("g.bin"))
            .arg(format!("file://{}", back.display())),
    );
    assert_same(&src, &back);
}

#[test]
fn fatpipe_cp_four_streams_against_globus_gridftp_server() {
    let g = GlobusServer::start();
    let work = tempfile::tempdir().unwrap();
    let src = work.path().join("src.bin");
    random_file(&src, SIZE, 9);
    let up = cp_json(
        &["-p", "4", "--verify"],
        src.to_str().unwrap(),
        &g.url("up.bin"),
    );
    assert_same(&src, &g.path("up.bin"));
    assert_eq!(up["streams"], 4, "{up}");
    // Globus offers MD5, ADLER32, SHA1, SHA256, SHA512: fatpipe picks the fastest shared one.
    assert!(
        up["verified"]
            .as_str()
            .is_some_and(|v| v.starts_with("ADLER32:")),
        "{up}"
    );
    let back = work.path().join("back.bin");
    let down = cp_json(
        &["-p", "4", "--verify"],
        &g.url("up.bin"),
        back.to_str().unwrap(),
    );
    assert_same(&src, &back);
    assert_eq!(down["streams"], 4, "{down}");
    assert!(down["verified"].is_string(), "{down}");
    // To a device (the benchmarks' /dev/null) the download is MODE E as well.
    let null = cp_json(&["-p", "4"], &g.url("up.bin"), "/dev/null");
    assert_eq!(null["streams"], 4, "{null}");
    assert_eq!(null["bytes"], SIZE, "{null}");
}

#[test]
fn gridftp_commands_answer_as_specified() {
    let s = server();
    std::fs::write(s.path("abc"), b"xxabcxx").unwrap();
    let mut c = Raw::login(s.addr, "anonymous", "x");
    let (code, feat) = c.cmd("FEAT");
    assert_eq!(code, 211);
    assert!(feat.lines().any(|l| l == " PARALLEL"), "{feat}");
    assert!(
        feat.lines().any(|l| l == " CKSM MD5,ADLER32,SHA256,XXH3"),
        "{feat}"
    );
    assert_eq!(c.cmd("REST 0-10").0, 501, "ranges need MODE E");
    assert_eq!(c.cmd("MODE E").0, 200);
    assert_eq!(c.cmd("OPTS RETR Parallelism=2,2,2;").0, 200);
    assert_eq!(c.cmd("OPTS RETR Parallelism=0,0,0;").0, 501);
    assert_eq!(c.cmd("OPTS RETR Foo=1;").0, 501);
    assert_eq!(c.cmd("REST 0-10,20-30").0, 350);
    for (alg, want) in [
        ("MD5", "900150983cd24fb0d6963f7d28e17f72"),
        ("ADLER32", "024d0127"),
        (
            "SHA256",
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad",
        ),
    ] {
        assert_eq!(
            c.cmd(&format!("CKSM {alg} 2 3 /abc")),
            (213, want.to_string())
        );
    }
    assert_eq!(c.cmd("CKSM CRC32 0 -1 /abc").0, 501);
    assert_eq!(c.cmd("CKSM MD5 99 -1 /abc").0, 501);
    assert_eq!(c.cmd("CKSM MD5 0 -1 /missing").0, 550);
    assert_eq!(c.cmd("MODE S").0, 200);
    // Back in MODE S a stock RETR works as before.
    assert_eq!(c.cmd("TYPE I").0, 200);
    assert_eq!(c.fetch("RETR /abc"), b"xxabcxx");
}

#[test]
fn a_mode_e_upload_reports_range_and_perf_markers_then_completes() {
    use fatpipe_proto::mode_e::Header;
    use std::io::Write;
    let s = server();
    let mut c = Raw::login(s.addr, "anonymous", "x");
    assert_eq!(c.cmd("TYPE I").0, 200);
    assert_eq!(c.cmd("MODE E").0, 200);
    let mut d = c.data();
    c.send(b"STOR m.bin\r\n");
    assert_eq!(c.reply().0, 150);
    d.write_all(&Header::data(0, 10).encode()).unwrap();
    d.write_all(b"0123456789").unwrap();
    // The server reports every 5 s while a MODE E transfer runs.
    let (code, text) = c.reply();
    assert_eq!((code, text.as_str()), (111, "Range Marker 0-10"));
    let (code, text) = c.reply();
    assert_eq!(code, 112, "{text}");
    assert!(text.contains("Stripe Bytes Transferred: 10"), "{text}");
    // A second connection carries the rest; the EOF block announces two EODs.
    let port = d.peer_addr().unwrap().port();
    let mut d2 = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    d2.write_all(&Header::data(10, 5).encode()).unwrap();
    d2.write_all(b"abcde").unwrap();
    d2.write_all(&Header::eod(true).encode()).unwrap();
    d.write_all(&Header::eof(2).encode()).unwrap();
    d.write_all(&Header::eod(true).encode()).unwrap();
    let (code, text) = c.reply();
    assert_eq!(code, 226, "{text}");
    assert_eq!(std::fs::read(s.path("m.bin")).unwrap(), b"0123456789abcde");
}

#[test]
fn kept_connections_carry_the_next_file_until_a_new_data_address() {
    use fatpipe_proto::mode_e::{Header, CLOSE};
    use std::io::{Read, Write};
    let s = server();
    let mut c = Raw::login(s.addr, "anonymous", "x");
    let (_, feat) = c.cmd("FEAT");
    assert!(feat.lines().any(|l| l == " DCREUSE"), "{feat}");
    assert_eq!(c.cmd("OPTS DCREUSE maybe").0, 501);
    assert_eq!(c.cmd("OPTS DCREUSE ON").0, 200);
    assert_eq!(c.cmd("TYPE I").0, 200);
    assert_eq!(c.cmd("MODE E").0, 200);
    // An upload whose EOD leaves the connection open; the next upload needs no new address:
    // the same connection carries it.
    let mut d = c.data();
    for (name, data) in [("one", &b"abc"[..]), ("two", b"defg")] {
        c.send(format!("STOR {name}\r\n").as_bytes());
        assert_eq!(c.reply().0, 150);
        d.write_all(&Header::data(0, data.len() as u64).encode())
            .unwrap();
        d.write_all(data).unwrap();
        d.write_all(&Header::eof(1).encode()).unwrap();
        d.write_all(&Header::eod(false).encode()).unwrap();
        assert_eq!(c.reply().0, 226);
    }
    assert_eq!(std::fs::read(s.path("one")).unwrap(), b"abc");
    assert_eq!(std::fs::read(s.path("two")).unwrap(), b"defg");
    // A download the other way does not use it: it needs an address, and closes it.
    assert_eq!(c.cmd("RETR two").0, 425);
    let mut rest = Vec::new();
    assert_eq!(
        d.read_to_end(&mut rest).unwrap(),
        0,
        "kept connection still open"
    );
    // A download with a new address: the server sends with EODs that keep the connection
    // (no close bit), and sends the next file over it without another PORT.
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    assert_eq!(c.cmd(&format!("EPRT |1|127.0.0.1|{port}|")).0, 200);
    assert_eq!(c.cmd("OPTS RETR Parallelism=1,1,1;").0, 200);
    let mut got = Vec::new();
    let mut d = None;
    for name in ["one", "two"] {
        c.send(format!("RETR {name}\r\n").as_bytes());
        assert_eq!(c.reply().0, 150);
        let conn = d.get_or_insert_with(|| {
            let (d, _) = l.accept().unwrap();
            d.set_read_timeout(Some(std::time::Duration::from_secs(20)))
                .unwrap();
            d
        });
        got.push(read_blocks(conn));
        assert_eq!(c.reply().0, 226);
    }
    assert_eq!(got[0].0, [(0, b"abc".to_vec())]);
    assert_eq!(got[1].0, [(0, b"defg".to_vec())]);
    assert!(got.iter().all(|(_, last)| last & CLOSE == 0), "{got:?}");
    // A new address closes it.
    assert_eq!(c.cmd("EPSV").0, 229);
    let mut rest = Vec::new();
    assert_eq!(d.unwrap().read_to_end(&mut rest).unwrap(), 0);
}

/// Blocks from one connection until its EOD: (offset, data) of each, and the EOD's descriptor.
fn read_blocks(d: &mut std::net::TcpStream) -> (Vec<(u64, Vec<u8>)>, u8) {
    use fatpipe_proto::mode_e::{Header, EOD, EOF, HEADER_LEN};
    use std::io::Read;
    let mut out = Vec::new();
    loop {
        let mut h = [0u8; HEADER_LEN];
        d.read_exact(&mut h).unwrap();
        let h = Header::decode(&h);
        if h.count > 0 && !h.has(EOF) {
            let mut data = vec![0u8; h.count as usize];
            d.read_exact(&mut data).unwrap();
            out.push((h.offset, data));
        }
        if h.has(EOD) {
            return (out, h.descriptor);
        }
    }
}

#[test]
fn eret_sends_a_part_and_esto_writes_at_an_offset() {
    use fatpipe_proto::mode_e::Header;
    use std::io::Write;
    let s = server();
    let data: Vec<u8> = (0..200u8).collect();
    std::fs::write(s.path("e.bin"), &data).unwrap();
    let mut c = Raw::login(s.addr, "anonymous", "x");
    assert_eq!(c.cmd("ERET P 10 20 /e.bin").0, 503, "needs MODE E");
    assert_eq!(c.cmd("TYPE I").0, 200);
    assert_eq!(c.cmd("MODE E").0, 200);
    // ERET P: the sender connects (PORT); offsets count from the part's start, as Globus does.
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let p = l.local_addr().unwrap().port();
    assert_eq!(
        c.cmd(&format!("PORT 127,0,0,1,{},{}", p / 256, p % 256)).0,
        200
    );
    assert_eq!(c.cmd("ERET P 10 20 /e.bin").0, 150);
    let (mut d, _) = l.accept().unwrap();
    assert_eq!(read_blocks(&mut d).0, vec![(0, data[10..30].to_vec())]);
    drop(d); // the receiver closes: the sender's EOD said it would not reuse the connection
    assert_eq!(c.reply().0, 226);
    // ESTO A: blocks land at 100 + their offset; the rest of the file stays.
    let mut d = c.data();
    assert_eq!(c.cmd("ESTO A 100 /e.bin").0, 150);
    d.write_all(&Header::data(2, 3).encode()).unwrap();
    d.write_all(b"xyz").unwrap();
    d.write_all(&Header::eof(1).encode()).unwrap();
    d.write_all(&Header::eod(true).encode()).unwrap();
    assert_eq!(c.reply().0, 226);
    let mut want = data.clone();
    want[102..105].copy_from_slice(b"xyz");
    assert_eq!(std::fs::read(s.path("e.bin")).unwrap(), want);
}
