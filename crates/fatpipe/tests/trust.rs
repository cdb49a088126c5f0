//! The server's trust boundary under attack, over raw sockets: a path checked is the path used
//! (a directory swapped for a link out of the tree mid-command leads nowhere), deleting a link
//! deletes the link, listings show links as links, and an upload that cannot start or fails
//! leaves the old file as it was.

mod common;
use common::*;
use std::io::Write;
use std::os::unix::fs::symlink;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// A writable server whose root holds `evil -> OUTSIDE` (absolute) and a directory `a`.
fn server_beside(outside: &std::path::Path, extra: &[&str]) -> FatpipeServer {
    let root = tempfile::tempdir().unwrap();
    std::fs::create_dir(root.path().join("a")).unwrap();
    symlink(outside, root.path().join("evil")).unwrap();
    let mut args = vec!["--anonymous-write"];
    args.extend_from_slice(extra);
    FatpipeServer::start_in(root, &args)
}

fn outside_dir() -> tempfile::TempDir {
    let out = tempfile::tempdir().unwrap();
    std::fs::write(out.path().join("secret"), b"outside secret").unwrap();
    std::fs::write(out.path().join("victim"), b"v").unwrap();
    std::fs::create_dir(out.path().join("empty")).unwrap();
    out
}

fn names(dir: &std::path::Path) -> Vec<String> {
    let mut n: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    n.sort();
    n
}

/// Item 1: while `a` keeps being exchanged with a link out of the tree (what `RNFR`/`RNTO`
/// can do; here a local thread does it with `renameat2(RENAME_EXCHANGE)`, far faster, so that
/// `a` is a link about half the time), a session works through `a`: 20,000 tries of each
/// command reach nothing outside. (d5ad3b7, which checked a path then used it by name, made
/// directories outside and deleted an outside file within the first tries.)
#[test]
fn a_directory_swapped_for_a_link_mid_command_leads_nowhere() {
    use nix::fcntl::{renameat2, RenameFlags};
    const TRIES: usize = 20_000;
    let out = outside_dir();
    let s = server_beside(out.path(), &[]);
    let stop = AtomicBool::new(false);
    let swaps = std::thread::scope(|scope| {
        let swapper = scope.spawn(|| {
            let (a, evil) = (s.path("a"), s.path("evil"));
            let mut n = 0u64;
            while !stop.load(Ordering::Relaxed) {
                renameat2(None, &a, None, &evil, RenameFlags::RENAME_EXCHANGE).unwrap();
                n += 1;
            }
            n
        });
        let mut c = Raw::login(s.addr, "anonymous", "x");
        let mut found = None;
        for i in 0..TRIES {
            c.cmd("MKD a/made");
            c.cmd("DELE a/victim");
            c.cmd("RMD a/empty");
            // `secret` exists only outside: any answer about it is a read beyond the root.
            if c.cmd("CKSM MD5 0 -1 a/secret").0 == 213 || c.cmd("SIZE a/secret").0 == 213 {
                found = Some(i);
                break;
            }
            c.cmd("RNFR a/victim");
            c.cmd("RNTO stolen");
        }
        stop.store(true, Ordering::Relaxed);
        (swapper.join().unwrap(), found)
    });
    let (swaps, found) = swaps;
    assert_eq!(found, None, "read a file outside the tree (try number)");
    assert!(
        swaps > 1000,
        "the swapping thread hardly ran ({swaps} swaps)"
    );
    assert_eq!(names(out.path()), ["empty", "secret", "victim"]);
    assert!(!s.path("stolen").exists());
}

/// Item 2: `DELE` of a link removes the link, `RMD` refuses a link to a directory, a listing
/// names links as such, and `fatpipe rm -r` never crosses one.
#[test]
fn deleting_a_link_deletes_the_link_and_listings_show_links() {
    let out = outside_dir();
    let s = server_beside(out.path(), &[]);
    symlink(out.path().join("secret"), s.path("file_link")).unwrap();
    std::fs::create_dir(s.path("top")).unwrap();
    std::fs::write(s.path("top/mine"), b"m").unwrap();
    symlink(out.path(), s.path("top/ln")).unwrap();
    symlink("../a", s.path("top/inside")).unwrap();
    let mut c = Raw::login(s.addr, "anonymous", "x");
    let mlsd = String::from_utf8(c.fetch("MLSD")).unwrap();
    let line = |name: &str| {
        mlsd.lines()
            .find(|l| l.ends_with(&format!(" {name}")))
            .unwrap_or_else(|| panic!("{name} not listed: {mlsd}"))
            .to_string()
    };
    assert!(line("evil").contains("type=OS.unix=symlink;"), "{mlsd}");
    assert!(
        line("file_link").contains("type=OS.unix=symlink;"),
        "{mlsd}"
    );
    assert!(line("a").contains("type=dir;"), "{mlsd}");
    let list = String::from_utf8(c.fetch("LIST")).unwrap();
    assert!(
        list.lines()
            .any(|l| l.starts_with('l') && l.ends_with(" evil")),
        "{list}"
    );

    assert_eq!(c.cmd("RMD evil").0, 550);
    assert_eq!(c.cmd("DELE file_link").0, 250);
    assert!(s.path("file_link").symlink_metadata().is_err());
    assert_eq!(
        std::fs::read(out.path().join("secret")).unwrap(),
        b"outside secret"
    );

    let rm = run(&mut fatpipe_cmd(&["rm", "-r", &s.url("top")]));
    assert!(
        rm.status.success(),
        "{}",
        String::from_utf8_lossy(&rm.stderr)
    );
    assert!(!s.path("top").exists());
    assert!(s.path("a").is_dir(), "rm -r followed a link into the tree");
    assert_eq!(names(out.path()), ["empty", "secret", "victim"]);
}

/// Item 3: a `STOR` (or `REST` + `STOR`, or `APPE`) whose data connection never comes, or whose
/// client connects and leaves without data, leaves the old file as it was.
#[test]
fn an_upload_that_never_gets_data_leaves_the_old_file() {
    let s = FatpipeServer::start(&["--anonymous-write", "--data-timeout", "1s"]);
    std::fs::write(s.path("keep"), b"precious content").unwrap();
    let mut c = Raw::login(s.addr, "anonymous", "x");
    assert_eq!(c.cmd("TYPE I").0, 200);
    // PASV, and nobody connects.
    for (rest, verb) in [(None, "STOR"), (Some("REST 5"), "STOR"), (None, "APPE")] {
        let _ = c.cmd("EPSV");
        if let Some(r) = rest {
            assert_eq!(c.cmd(r).0, 350);
        }
        assert_eq!(c.cmd(&format!("{verb} keep")).0, 150);
        assert_eq!(c.reply().0, 425, "{rest:?} {verb}");
        assert_eq!(std::fs::read(s.path("keep")).unwrap(), b"precious content");
    }
    // PORT to a closed port.
    let closed = free_port();
    let hp = fatpipe_proto::addr::format_host_port(std::net::SocketAddrV4::new(
        std::net::Ipv4Addr::LOCALHOST,
        closed,
    ));
    assert_eq!(c.cmd(&format!("PORT {hp}")).0, 200);
    assert_eq!(c.cmd("REST 5").0, 350);
    assert_eq!(c.cmd("STOR keep").0, 150);
    assert_eq!(c.reply().0, 425);
    assert_eq!(std::fs::read(s.path("keep")).unwrap(), b"precious content");
    // MODE E, PASV, and nobody connects.
    assert_eq!(c.cmd("MODE E").0, 200);
    let _ = c.cmd("EPSV");
    assert_eq!(c.cmd("REST 3").0, 350);
    assert_eq!(c.cmd("STOR keep").0, 150);
    assert_ne!(c.reply().0, 226);
    assert_eq!(std::fs::read(s.path("keep")).unwrap(), b"precious content");
    let f = std::fs::File::open(s.path("keep")).unwrap();
    assert!(
        fatpipe_net::partial::read(&f).unwrap().is_none(),
        "a partial record was put on a file nothing was written to"
    );
    assert_eq!(
        names(s.root.path()),
        ["keep"],
        "a temporary file was left behind"
    );
}

/// Item 3: a whole-file upload that fails midway leaves the old file as it was; one that
/// completes replaces it; one into a new name keeps what arrived (so it can be resumed).
#[test]
fn a_failed_replacement_keeps_the_old_file_and_a_complete_one_replaces_it() {
    let s = FatpipeServer::start(&["--anonymous-write", "--data-timeout", "1s"]);
    std::fs::write(s.path("keep"), b"precious content").unwrap();
    let mut c = Raw::login(s.addr, "anonymous", "x");
    assert_eq!(c.cmd("TYPE I").0, 200);
    // ABOR mid-upload: the transfer fails with data written to the temporary file only.
    let mut d = c.data();
    assert_eq!(c.cmd("STOR keep").0, 150);
    d.write_all(b"half of a new version").unwrap();
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(c.cmd("ABOR").0, 426, "the transfer's own reply");
    assert_eq!(c.reply().0, 226, "then the ABOR reply");
    drop(d);
    assert_eq!(std::fs::read(s.path("keep")).unwrap(), b"precious content");

    let mut d = c.data();
    assert_eq!(c.cmd("STOR keep").0, 150);
    d.write_all(b"new").unwrap();
    drop(d);
    assert_eq!(c.reply().0, 226);
    assert_eq!(std::fs::read(s.path("keep")).unwrap(), b"new");

    let mut d = c.data();
    assert_eq!(c.cmd("STOR fresh").0, 150);
    d.write_all(b"first part").unwrap();
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(c.cmd("ABOR").0, 426);
    assert_eq!(c.reply().0, 226);
    drop(d);
    assert_eq!(std::fs::read(s.path("fresh")).unwrap(), b"first part");
    assert_eq!(c.cmd("SIZE fresh").1, "10");
    assert_eq!(names(s.root.path()), ["fresh", "keep"]);
}

/// Item 3: a data connection under `PROT P` whose TLS handshake fails changes nothing.
#[test]
fn a_failed_tls_handshake_on_the_data_connection_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let (cert, key) = tls_files(dir.path());
    let s = FatpipeServer::start(&[
        "--anonymous-write",
        "--data-timeout",
        "2s",
        "--tls-cert",
        cert.to_str().unwrap(),
        "--tls-key",
        key.to_str().unwrap(),
        "--tls-reuse",
        "optional",
    ]);
    std::fs::write(s.path("keep"), b"precious content").unwrap();
    let out = python_ftps_store_with_bad_handshake(s.addr.port(), &cert);
    assert!(out.contains("refused") || out.contains("ok"), "{out}");
    assert_eq!(std::fs::read(s.path("keep")).unwrap(), b"precious content");
    assert_eq!(names(s.root.path()), ["keep"]);
}

/// Logs in over FTPS with Python, asks for `REST 5` + `STOR keep` under `PROT P` and answers
/// the data connection's handshake with garbage.
fn python_ftps_store_with_bad_handshake(port: u16, cert: &std::path::Path) -> String {
    require("python3");
    let script = format!(
        r#"
import ftplib, ssl, socket
ctx = ssl.create_default_context(cafile={cert:?})
f = ftplib.FTP_TLS(context=ctx, timeout=10)
f.connect("127.0.0.1", {port})
f.login("anonymous", "x")
f.prot_p()
f.voidcmd("TYPE I")
host, p = f.makepasv()
d = socket.create_connection((host, p))
f.sendcmd("REST 5")
f.putcmd("STOR keep")
print(f.getresp())
d.sendall(b"this is not a TLS client hello\r\n" * 4)
d.close()
try:
    print(f.getresp())
except ftplib.all_errors as e:
    print("refused", e)
"#,
        cert = cert.to_str().unwrap()
    );
    let out = run(std::process::Command::new("python3").args(["-c", &script]));
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    if text.contains("150") {
        "ok".to_string() + &text
    } else {
        text
    }
}

/// Item 5: while a client downloads in MODE E (the server connects to the client's listener),
/// another session on the same server (an anonymous user at the same address) sends `PORT
/// <that listener>` and `RETR` of its own file: its blocks are refused (they do not show the
/// victim's data token) and the victim's file arrives intact.
#[test]
fn another_session_cannot_feed_blocks_into_a_clients_listener() {
    use std::io::Read;
    let s = FatpipeServer::start(&["--user", "alice:pw", "--anonymous"]);
    random_file(&s.path("big"), 16 << 20, 11);
    // -p auto (the default): the client takes more streams than it began with, so only the
    // token tells the server's own from the stranger's.
    std::fs::write(s.path("evil"), vec![0xEE; 16 << 20]).unwrap();
    let out = tempfile::tempdir().unwrap();
    let dst = out.path().join("big");
    let mut victim = fatpipe_cmd(&[
        "cp",
        "--limit-rate",
        "24mbit",
        "--retry-for",
        "0",
        "--tls",
        "off",
        &s.url_as("alice", "pw", "big"),
        dst.to_str().unwrap(),
    ])
    .stderr(std::process::Stdio::piped())
    .spawn()
    .unwrap();
    let pid = victim.id();
    // The victim's data listener, as `ss` shows it.
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    let port = loop {
        let ss = run(std::process::Command::new("ss").args(["-Hltnp"]));
        let text = String::from_utf8_lossy(&ss.stdout).to_string();
        let found = text
            .lines()
            .filter(|l| l.contains(&format!("pid={pid},")))
            .filter_map(|l| {
                l.split_whitespace()
                    .nth(3)?
                    .rsplit(':')
                    .next()?
                    .parse()
                    .ok()
            })
            .next();
        if let Some(p) = found {
            break p;
        }
        assert!(std::time::Instant::now() < deadline, "no listener: {text}");
        std::thread::sleep(Duration::from_millis(20));
    };
    let hp = fatpipe_proto::addr::format_host_port(std::net::SocketAddrV4::new(
        std::net::Ipv4Addr::LOCALHOST,
        port,
    ));
    let mut attacker = Raw::login(s.addr, "anonymous", "x");
    assert_eq!(attacker.cmd("TYPE I").0, 200);
    assert_eq!(attacker.cmd("MODE E").0, 200);
    assert_eq!(attacker.cmd(&format!("PORT {hp}")).0, 200);
    attacker.cmd("RETR evil");
    let _ = attacker.reply();
    let status = victim.wait().unwrap();
    let mut err = String::new();
    victim
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    assert!(status.success(), "{err}");
    assert_same(&s.path("big"), &dst);
}

/// Item 15: a server reached on one of several addresses (127.0.0.2 here) makes its MODE E
/// connections from that address, so the client, which takes data only from the server it
/// talks to, takes them.
#[test]
fn a_multi_homed_server_connects_from_the_address_it_was_reached_on() {
    let s = FatpipeServer::start(&["--user", "alice:pw", "--listen", "127.0.0.2:0"]);
    random_file(&s.path("x"), 3 << 20, 12);
    let out = tempfile::tempdir().unwrap();
    let dst = out.path().join("x");
    run_ok(&mut fatpipe_cmd(&[
        "cp",
        "-p",
        "4",
        "--retry-for",
        "0",
        "--tls",
        "off",
        &s.url_as("alice", "pw", "x"),
        dst.to_str().unwrap(),
    ]));
    assert_same(&s.path("x"), &dst);
}

/// Item 10: `fatpipe passwd` run eight times at once into one users file keeps all eight
/// entries (each run holds a lock beside the file while it reads and replaces it).
#[test]
fn concurrent_passwd_runs_keep_every_entry() {
    let dir = tempfile::tempdir().unwrap();
    let users = dir.path().join("users");
    let runs: Vec<_> = (0..8)
        .map(|i| {
            let mut cmd = fatpipe_cmd(&["passwd", &format!("user{i}"), "--file"]);
            cmd.arg(&users)
                .env("FATPIPE_PASSWORD", format!("pw{i}"))
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null());
            cmd.spawn().unwrap()
        })
        .collect();
    for mut r in runs {
        assert!(r.wait().unwrap().success());
    }
    let text = std::fs::read_to_string(&users).unwrap();
    for i in 0..8 {
        assert!(
            text.contains(&format!("user{i}:$argon2")),
            "user{i} lost: {text}"
        );
    }
}

/// Item 11: a client that takes a download's data connection and never reads it does not
/// hold its session (and its slot) forever: after `--data-timeout` without progress the
/// transfer fails with a reply that says so.
#[test]
fn a_client_that_stops_reading_is_let_go_after_the_data_timeout() {
    let s = FatpipeServer::start(&["--anonymous", "--data-timeout", "2s"]);
    random_file(&s.path("big"), 64 << 20, 14);
    let mut c = Raw::login(s.addr, "anonymous", "x");
    assert_eq!(c.cmd("TYPE I").0, 200);
    let _d = c.data();
    let started = std::time::Instant::now();
    assert_eq!(c.cmd("RETR big").0, 150);
    let (code, text) = c.reply();
    assert_eq!(code, 426, "{text}");
    assert!(text.contains("--data-timeout"), "{text}");
    assert!(started.elapsed() < Duration::from_secs(15));
    assert_eq!(c.cmd("NOOP").0, 200);
}

/// Item 7: a resume whose source changed since the partial copy began (same size, new bytes
/// and time) starts over instead of joining old and new bytes, also with --no-verify.
#[test]
fn a_resume_after_the_source_changed_starts_over() {
    let s = FatpipeServer::start(&["--anonymous"]);
    random_file(&s.path("f"), 8 << 20, 15);
    let out = tempfile::tempdir().unwrap();
    let dst = out.path().join("f");
    cut_download(&s.url("f"), &dst);
    let part = out.path().join("f.fatpipe-part");
    let held = std::fs::metadata(&part).map_or(0, |m| m.len());
    assert!(held > 0 && held < 8 << 20, "{held} bytes held");
    rewrite_later(&s.path("f"), 8 << 20, 16);
    let o = run_ok(&mut fatpipe_cmd(&[
        "cp",
        "--resume",
        "--no-verify",
        &s.url("f"),
        dst.to_str().unwrap(),
    ]));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("changed since"), "{err}");
    assert_same(&s.path("f"), &dst);
}

/// Item 7, the other way: a resumed upload continues only its own beginning. The server kept
/// an older file (a replacement that failed leaves the old file, as it should): `--resume`
/// finds it is not a prefix of the local file and copies it again in full, `--no-verify`
/// included.
#[test]
fn a_resumed_upload_continues_only_its_own_beginning() {
    let s = FatpipeServer::start(&["--anonymous-write"]);
    random_file(&s.path("f"), 1 << 20, 17);
    let work = tempfile::tempdir().unwrap();
    let local = work.path().join("f");
    random_file(&local, 3 << 20, 18);
    let o = run_ok(&mut fatpipe_cmd(&[
        "cp",
        "--resume",
        "--no-verify",
        local.to_str().unwrap(),
        &s.url("f"),
    ]));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("not the beginning of"), "{err}");
    assert_same(&local, &s.path("f"));
}
