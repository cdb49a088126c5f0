//! `fatpipe cp` against a hostile or broken server, scripted here on loopback: a download that
//! sends more than `SIZE` said, an endless `FEAT`, a listing without end, and an upload that
//! the server never reads. The client stops each, with a clear error, in bounded memory and
//! time.

mod common;
use common::*;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::time::{Duration, Instant};

/// What the scripted server does wrong.
#[derive(Clone, Copy)]
enum Misdeed {
    /// `SIZE` says 10 bytes, `RETR` sends 30 MiB.
    MoreThanSize,
    /// `FEAT` answers with lines that never end.
    EndlessFeat,
    /// A listing of two million entries.
    EndlessListing,
    /// `STOR` takes the data connection and never reads it.
    NeverReads,
}

/// A server on loopback that misbehaves as `misdeed` says; serves one control connection.
fn hostile(misdeed: Misdeed) -> (u16, std::thread::JoinHandle<()>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let t = std::thread::spawn(move || {
        let Ok((s, _)) = l.accept() else { return };
        s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
        let mut w = s.try_clone().unwrap();
        let mut r = BufReader::new(s);
        let mut data: Option<TcpListener> = None;
        let _ = w.write_all(b"220 hostile\r\n");
        let mut line = String::new();
        while r.read_line(&mut line).is_ok_and(|n| n > 0) {
            let cmd = line.trim_end().to_string();
            line.clear();
            let verb = cmd.split(' ').next().unwrap_or("").to_ascii_uppercase();
            let reply: String = match verb.as_str() {
                "USER" => "331 pass\r\n".into(),
                "PASS" => "230 in\r\n".into(),
                "FEAT" if matches!(misdeed, Misdeed::EndlessFeat) => {
                    let _ = w.write_all(b"211-Features:\r\n");
                    let chunk = " X-ENDLESS-FEATURE\r\n".repeat(1000);
                    let until = Instant::now() + Duration::from_secs(60);
                    while Instant::now() < until && w.write_all(chunk.as_bytes()).is_ok() {}
                    return;
                }
                "FEAT" => "211-Features:\r\n SIZE\r\n211 End\r\n".into(),
                "SIZE" if cmd.ends_with("dir") => "550 a directory\r\n".into(),
                "SIZE" => "213 10\r\n".into(),
                "TYPE" | "MODE" => "200 ok\r\n".into(),
                "PWD" => "257 \"/\"\r\n".into(),
                "CWD" if cmd.ends_with(" /") || cmd.ends_with("dir") => "250 ok\r\n".into(),
                "EPSV" => {
                    let l = TcpListener::bind("127.0.0.1:0").unwrap();
                    let p = l.local_addr().unwrap().port();
                    data = Some(l);
                    format!("229 Entering Extended Passive Mode (|||{p}|)\r\n")
                }
                "RETR" | "LIST" | "NLST" | "STOR" => {
                    let Some(l) = data.take() else {
                        let _ = w.write_all(b"425 no data connection\r\n");
                        continue;
                    };
                    let _ = w.write_all(b"150 here it comes\r\n");
                    let Ok((mut d, _)) = l.accept() else { return };
                    match (verb.as_str(), misdeed) {
                        ("RETR", Misdeed::MoreThanSize) => {
                            let chunk = vec![0x5A; 1 << 20];
                            for _ in 0..30 {
                                if d.write_all(&chunk).is_err() {
                                    break;
                                }
                            }
                        }
                        ("LIST", _) => {
                            let chunk = (0..10_000)
                                .map(|i| format!("-rw-r--r-- 1 0 0 1 Jan 01 2020 f{i}\r\n"))
                                .collect::<String>();
                            for _ in 0..200 {
                                if d.write_all(chunk.as_bytes()).is_err() {
                                    break;
                                }
                            }
                        }
                        ("STOR", Misdeed::NeverReads) => {
                            // Holds the connection, reads nothing, says nothing.
                            std::thread::sleep(Duration::from_secs(60));
                            return;
                        }
                        _ => {}
                    }
                    drop(d);
                    "226 done\r\n".into()
                }
                "QUIT" => {
                    let _ = w.write_all(b"221 bye\r\n");
                    return;
                }
                _ => "502 not here\r\n".into(),
            };
            if w.write_all(reply.as_bytes()).is_err() {
                return;
            }
        }
    });
    (port, t)
}

/// Runs `fatpipe ARGS` (with a short --timeout and no retries), bounded in time: its exit
/// status, standard error, and how long it took.
fn against(args: &[&str]) -> (bool, String, Duration) {
    let started = Instant::now();
    let mut all = vec!["--timeout", "4s", "--retry-for", "0", "--tls", "off"];
    all.extend_from_slice(args);
    let mut cmd = fatpipe_cmd(&["cp"]);
    cmd.args(&all).stderr(std::process::Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    let deadline = started + Duration::from_secs(90);
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("fatpipe cp still running after 90 s");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    (status.success(), err, started.elapsed())
}

/// Item 8 of the trust issue: a MODE S download that brings more than `SIZE` said stops
/// there, with an error; no part file grows past the size.
#[test]
fn a_download_that_brings_more_than_its_size_stops() {
    let (port, _t) = hostile(Misdeed::MoreThanSize);
    let dir = tempfile::tempdir().unwrap();
    let dst = dir.path().join("f");
    let url = format!("ftp://127.0.0.1:{port}/f");
    let (ok, err, _) = against(&["--no-verify", &url, dst.to_str().unwrap()]);
    assert!(!ok && err.contains("more bytes than"), "{err}");
    let part = dir.path().join("f.fatpipe-part");
    let held = std::fs::metadata(&part).map_or(0, |m| m.len());
    assert!(held <= 10, "{held} bytes kept");
    assert!(!dst.exists());
}

/// Item 12: a `FEAT` reply that never ends fails the login instead of filling memory.
#[test]
fn an_endless_reply_fails_the_session() {
    let (port, _t) = hostile(Misdeed::EndlessFeat);
    let dir = tempfile::tempdir().unwrap();
    let url = format!("ftp://127.0.0.1:{port}/f");
    let (ok, err, took) = against(&[&url, dir.path().join("f").to_str().unwrap()]);
    assert!(!ok && err.contains("lines"), "{err}");
    assert!(took < Duration::from_secs(30), "{took:?}");
}

/// Item 12: a listing past a million entries fails the copy instead of queueing a job for
/// each.
#[test]
fn an_endless_listing_fails_the_copy() {
    let (port, _t) = hostile(Misdeed::EndlessListing);
    let dir = tempfile::tempdir().unwrap();
    let url = format!("ftp://127.0.0.1:{port}/dir");
    let (ok, err, _) = against(&["-r", &url, dir.path().to_str().unwrap()]);
    assert!(!ok && err.contains("more than 1000000 entries"), "{err}");
}

/// Item 13: an upload whose data connection the server takes and never reads fails after
/// `--timeout` (it used to hang on the blocked send).
#[test]
fn an_upload_the_server_never_reads_times_out() {
    let (port, _t) = hostile(Misdeed::NeverReads);
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    random_file(&src, 64 << 20, 13);
    let url = format!("ftp://127.0.0.1:{port}/up");
    let (ok, err, took) = against(&[src.to_str().unwrap(), &url]);
    assert!(!ok, "{err}");
    assert!(took < Duration::from_secs(30), "took {took:?}: {err}");
}
