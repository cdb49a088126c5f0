//! Replies and error codes of `fatpipe serve` on the control channel, checked line by line: the
//! sandbox, FTP-bounce protection, limits, command sequencing, ABOR, TYPE A and IPv6.

mod common;
use common::*;
use std::io::{Read, Write};
use std::os::unix::fs::symlink;
use std::time::{Duration, Instant};

fn server(extra: &[&str]) -> FatpipeServer {
    let mut args = vec!["--user", "alice:pw"];
    args.extend_from_slice(extra);
    FatpipeServer::start(&args)
}

#[test]
fn paths_never_leave_the_root() {
    let s = server(&[]);
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("secret"), b"secret").unwrap();
    symlink(outside.path().join("secret"), s.path("link_out")).unwrap();
    symlink(outside.path(), s.path("dir_out")).unwrap();
    symlink(outside.path().join("new"), s.path("dangling")).unwrap();
    std::fs::write(s.path("inside"), b"in").unwrap();
    let mut c = Raw::login(s.addr, "alice", "pw");
    for cmd in [
        "RETR ../../../../etc/passwd",
        "RETR /etc/passwd",
        "RETR %2e%2e/%2e%2e/etc/passwd",
        "RETR ..%2f..%2fetc%2fpasswd",
        "RETR link_out",
        "RETR dir_out/secret",
        "SIZE link_out",
        "CWD dir_out",
        "MLST dir_out",
        "STOR dir_out/new",
        "STOR link_out",
        "STOR dangling",
        "APPE link_out",
        "MKD dir_out/newdir",
        "DELE dir_out/secret",
        "RNFR dir_out/secret",
        "RMD dir_out",
        "LIST dir_out",
    ] {
        // Transfer commands need a data channel so that the refusal is about the path.
        if cmd.starts_with("RETR")
            || cmd.starts_with("STOR")
            || cmd.starts_with("APPE")
            || cmd.starts_with("LIST")
        {
            assert_eq!(c.cmd("PASV").0, 227);
        }
        assert_eq!(c.cmd(cmd).0, 550, "{cmd}");
    }
    // `..` at the top stays at the top, as after chroot.
    assert_eq!(c.cmd("CWD ../../..").0, 250);
    assert_eq!(c.cmd("PWD"), (257, "\"/\" is the current directory".into()));
    assert_eq!(
        std::fs::read(outside.path().join("secret")).unwrap(),
        b"secret"
    );
    assert_eq!(
        std::fs::read_dir(outside.path()).unwrap().count(),
        1,
        "nothing created outside"
    );
    // Links are listed as what they are; deleting one deletes the link, not its target.
    assert_eq!(
        c.fetch("NLST"),
        b"dangling\r\ndir_out\r\ninside\r\nlink_out\r\n"
    );
    assert_eq!(c.cmd("DELE link_out").0, 250);
    assert!(s.path("link_out").symlink_metadata().is_err());
    assert_eq!(
        std::fs::read(outside.path().join("secret")).unwrap(),
        b"secret"
    );
}

#[test]
fn port_and_eprt_only_to_the_client_itself() {
    let s = server(&[]);
    let mut c = Raw::login(s.addr, "alice", "pw");
    // 127.0.0.2 is loopback, but not the address this client connected from: a bounce.
    assert_eq!(c.cmd("PORT 127,0,0,2,200,1").0, 504);
    assert_eq!(c.cmd("EPRT |1|127.0.0.2|51201|").0, 504);
    assert_eq!(c.cmd("PORT 127,0,0,1,0,21").0, 504, "privileged port");
    assert_eq!(c.cmd("EPRT |2|::1|51201|").0, 504, "other address family");
    // To the client itself it works: an active-mode listing arrives.
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    assert_eq!(c.cmd(&format!("EPRT |1|127.0.0.1|{port}|")).0, 200);
    assert_eq!(c.cmd("LIST").0, 150);
    let (mut d, _) = l.accept().unwrap();
    let mut text = String::new();
    d.read_to_string(&mut text).unwrap();
    assert_eq!(c.reply().0, 226);
}

#[test]
fn passive_socket_binds_to_the_control_connections_local_address() {
    let s = FatpipeServer::start_in(
        tempfile::tempdir().unwrap(),
        &["--user", "alice:pw", "--listen", "0.0.0.0:0"],
    );
    for ip in ["127.0.0.1", "127.0.0.3"] {
        let addr = format!("{ip}:{}", s.addr.port()).parse().unwrap();
        let mut c = Raw::login(addr, "alice", "pw");
        let (code, text) = c.cmd("PASV");
        assert_eq!(code, 227);
        let a = fatpipe_proto::addr::parse_pasv_reply(&text).unwrap();
        assert_eq!(a.ip().to_string(), ip);
    }
}

#[test]
fn passive_ports_stay_in_the_configured_range() {
    let lo = free_port().max(20000);
    let range = format!("{lo}-{}", lo + 50);
    let s = server(&["--passive-ports", &range]);
    let mut c = Raw::login(s.addr, "alice", "pw");
    for _ in 0..5 {
        let (code, text) = c.cmd("EPSV");
        assert_eq!(code, 229);
        let p = fatpipe_proto::addr::parse_epsv_reply(&text).unwrap();
        assert!((lo..=lo + 50).contains(&p), "{p} outside {range}");
    }
}

#[test]
fn error_codes_and_sequence() {
    let s = server(&["--anonymous"]);
    let (mut c, code) = Raw::connect(s.addr);
    assert_eq!(code, 220);
    assert_eq!(c.cmd("LIST").0, 530, "login first");
    assert_eq!(c.cmd("PASS x").0, 503, "PASS before USER");
    assert_eq!(c.cmd("FOO bar").0, 500);
    assert_eq!(c.cmd("USER").0, 501);
    assert_eq!(c.cmd("USER anonymous").0, 331);
    assert_eq!(c.cmd("PASS guest@").0, 230);
    assert_eq!(c.cmd("RETR").0, 501);
    assert_eq!(c.cmd("REST x").0, 501);
    assert_eq!(c.cmd("TYPE Z").0, 501);
    assert_eq!(c.cmd("MODE B").0, 504);
    assert_eq!(c.cmd("RNTO x").0, 503, "RNTO without RNFR");
    assert_eq!(c.cmd("RETR nothing").0, 550);
    std::fs::write(s.path("f"), b"data").unwrap();
    assert_eq!(c.cmd("RETR f").0, 425, "no data channel set up");
    assert_eq!(c.cmd("STOR f").0, 550, "anonymous is read-only");
    assert_eq!(c.cmd("MKD d").0, 550);
    assert_eq!(c.cmd("SIZE f"), (213, "4".into()));
    assert_eq!(c.cmd("MDTM f").0, 213);
    assert_eq!(c.cmd("SYST"), (215, "UNIX Type: L8".into()));
    let (code, feat) = c.cmd("FEAT");
    assert_eq!(code, 211);
    for f in [
        "EPSV",
        "EPRT",
        "MLST",
        "REST STREAM",
        "SIZE",
        "MDTM",
        "UTF8",
    ] {
        assert!(feat.contains(&format!(" {f}")), "FEAT lacks {f}: {feat}");
    }
    let (code, mlst) = c.cmd("MLST f");
    assert_eq!(code, 250);
    assert!(
        mlst.contains("type=file;size=4;") && mlst.contains(" /f"),
        "{mlst}"
    );
    assert_eq!(c.cmd("OPTS UTF8 ON").0, 200);
    assert_eq!(c.cmd("OPTS NOPE").0, 501);
    assert_eq!(c.cmd("ALLO 100").0, 202);
    assert_eq!(c.cmd("HELP").0, 214);
    assert_eq!(c.cmd("STAT").0, 211);
    assert_eq!(c.cmd("ABOR").0, 226);
    assert_eq!(c.cmd("QUIT").0, 221);
}

#[test]
fn rename_delete_mkdir_rmdir() {
    let s = server(&[]);
    std::fs::write(s.path("a"), b"x").unwrap();
    let mut c = Raw::login(s.addr, "alice", "pw");
    assert_eq!(c.cmd("MKD d").0, 257);
    assert_eq!(c.cmd("MKD d").0, 550, "exists");
    assert_eq!(c.cmd("RNFR a").0, 350);
    assert_eq!(c.cmd("RNTO d/b").0, 250);
    assert!(s.path("d/b").is_file());
    assert_eq!(c.cmd("RMD d").0, 550, "not empty");
    assert_eq!(c.cmd("DELE d").0, 550, "DELE of a directory");
    assert_eq!(c.cmd("CWD d").0, 250);
    assert_eq!(c.cmd("DELE b").0, 250);
    assert_eq!(c.cmd("CDUP").0, 250);
    assert_eq!(c.cmd("RMD d").0, 250);
    assert!(!s.path("d").exists());
}

#[test]
fn line_length_limit() {
    let s = server(&[]);
    let (mut c, _) = Raw::connect(s.addr);
    let long = format!("USER {}\r\n", "x".repeat(10_000));
    c.send(long.as_bytes());
    assert_eq!(c.reply().0, 500);
    assert_eq!(
        c.cmd("NOOP").0,
        200,
        "session goes on after an over-long line"
    );
}

#[test]
fn session_limit() {
    // Logged-in sessions count; a connection is greeted and turned away at its login.
    let s = server(&["--max-sessions", "1"]);
    let _first = Raw::login(s.addr, "alice", "pw");
    let (mut second, code) = Raw::connect(s.addr);
    assert_eq!(code, 220);
    second.cmd("USER alice");
    assert_eq!(second.cmd("PASS pw").0, 421);
}

#[test]
fn idle_timeout() {
    let s = server(&["--idle-timeout", "1s"]);
    let (mut c, _) = Raw::connect(s.addr);
    let t = Instant::now();
    assert_eq!(c.reply().0, 421);
    assert!(t.elapsed() < Duration::from_secs(10));
    assert_eq!(c.reply().0, 0, "connection closed");
}

#[test]
fn failed_logins_close_the_session() {
    let s = server(&["--max-login-failures", "2"]);
    let (mut c, _) = Raw::connect(s.addr);
    c.cmd("USER alice");
    assert_eq!(c.cmd("PASS wrong").0, 530);
    c.cmd("USER alice");
    assert_eq!(c.cmd("PASS wrong").0, 421);
    assert_eq!(c.reply().0, 0, "connection closed");
    assert_eq!(
        Raw::connect(s.addr).1,
        220,
        "the server still serves others"
    );
}

#[test]
fn abor_stops_a_running_download() {
    let s = server(&[]);
    random_file(&s.path("big"), 256 << 20, 3);
    let mut c = Raw::login(s.addr, "alice", "pw");
    c.cmd("TYPE I");
    let mut d = c.data();
    assert_eq!(c.cmd("RETR big").0, 150);
    let mut buf = vec![0u8; 65536];
    d.read_exact(&mut buf).unwrap(); // running, and the reader stalls now
    let (code, _) = c.cmd("ABOR");
    assert_eq!(code, 426, "the transfer's own reply");
    assert_eq!(c.reply().0, 226, "then the ABOR reply");
    assert_eq!(c.cmd("NOOP").0, 200);
}

#[test]
fn type_a_converts_line_endings_both_ways() {
    let s = server(&[]);
    std::fs::write(s.path("t.txt"), b"one\ntwo\n").unwrap();
    let mut c = Raw::login(s.addr, "alice", "pw");
    assert_eq!(c.cmd("TYPE A").0, 200);
    assert_eq!(c.fetch("RETR t.txt"), b"one\r\ntwo\r\n");
    let mut d = c.data();
    assert_eq!(c.cmd("STOR u.txt").0, 150);
    d.write_all(b"a\r\nb\r\n").unwrap();
    drop(d);
    assert_eq!(c.reply().0, 226);
    assert_eq!(std::fs::read(s.path("u.txt")).unwrap(), b"a\nb\n");
    // The type applies per transfer: TYPE I after set-up still gives exact bytes (curl's order).
    let mut d = c.data();
    assert_eq!(c.cmd("TYPE I").0, 200);
    assert_eq!(c.cmd("RETR t.txt").0, 150);
    let mut raw = Vec::new();
    d.read_to_end(&mut raw).unwrap();
    assert_eq!(c.reply().0, 226);
    assert_eq!(raw, b"one\ntwo\n");
}

#[test]
fn ipv6_control_and_data() {
    let root = tempfile::tempdir().unwrap();
    let s = FatpipeServer::start_in(root, &["--user", "alice:pw", "--listen", "[::1]:0"]);
    random_file(&s.path("f"), (1 << 20) + 1, 11);
    let dir = tempfile::tempdir().unwrap();
    let dst = dir.path().join("f");
    let url = format!("ftp://alice:pw@[::1]:{}/f", s.addr.port());
    run_ok(&mut fatpipe_cmd(&[
        "cp",
        "--quiet",
        "--tls",
        "off",
        &url,
        dst.to_str().unwrap(),
    ]));
    assert_same(&s.path("f"), &dst);
    let mut c = Raw::login(s.addr, "alice", "pw");
    assert_eq!(c.cmd("PASV").0, 500, "PASV cannot express IPv6");
    assert_eq!(c.cmd("EPSV 1").0, 522);
    assert_eq!(c.cmd("EPSV 2").0, 229);
}

#[test]
fn users_file_from_passwd() {
    let dir = tempfile::tempdir().unwrap();
    let users = dir.path().join("users");
    let mut cmd = fatpipe_cmd(&["passwd", "bob", "--file", users.to_str().unwrap()]);
    cmd.env("FATPIPE_PASSWORD", "hunter2");
    run_ok(&mut cmd);
    let text = std::fs::read_to_string(&users).unwrap();
    assert!(
        text.starts_with("bob:$argon2") && !text.contains("hunter2"),
        "{text}"
    );
    let s = FatpipeServer::start(&["--users", users.to_str().unwrap()]);
    let (mut c, _) = Raw::connect(s.addr);
    c.cmd("USER bob");
    assert_eq!(c.cmd("PASS nope").0, 530);
    c.cmd("USER bob");
    assert_eq!(c.cmd("PASS hunter2").0, 230);
    // The client takes the password from the environment, never needing it on the command line.
    std::fs::write(s.path("f"), b"via env").unwrap();
    let mut cp = fatpipe_cmd(&["cp", "--quiet", &format!("ftp://bob@{}/f", s.addr), "-"]);
    cp.env("FATPIPE_PASSWORD", "hunter2");
    assert_eq!(run_ok(&mut cp).stdout, b"via env");
    // A second passwd for bob changes his password: one line, still private.
    let mut again = fatpipe_cmd(&["passwd", "bob", "--file", users.to_str().unwrap()]);
    again.env("FATPIPE_PASSWORD", "correct horse");
    run_ok(&mut again);
    let text = std::fs::read_to_string(&users).unwrap();
    assert_eq!(
        text.lines().filter(|l| l.starts_with("bob:")).count(),
        1,
        "{text}"
    );
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&users).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600);
    let s = FatpipeServer::start(&["--users", users.to_str().unwrap()]);
    let (mut c, _) = Raw::connect(s.addr);
    c.cmd("USER bob");
    assert_eq!(c.cmd("PASS hunter2").0, 530);
    c.cmd("USER bob");
    assert_eq!(c.cmd("PASS correct horse").0, 230);
}

#[test]
fn serve_refuses_bad_configuration() {
    let out = run(&mut fatpipe_cmd(&[
        "serve",
        "--root",
        "/nonexistent/dir",
        "--anonymous",
        "--listen",
        "127.0.0.1:0",
    ]));
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot serve /nonexistent/dir"));
    let dir = tempfile::tempdir().unwrap();
    let out = run(&mut fatpipe_cmd(&[
        "serve",
        "--root",
        dir.path().to_str().unwrap(),
        "--listen",
        "127.0.0.1:0",
    ]));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no way to log in"));
}
