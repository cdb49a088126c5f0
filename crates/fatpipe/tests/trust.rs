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

/// Item 1: one session swaps `a` for a link out of the tree with `RNFR`/`RNTO` alone, as fast
/// as it can, while another works through `a`: 20,000 tries of each command find nothing.
#[test]
fn a_directory_swapped_for_a_link_mid_command_leads_nowhere() {
    const TRIES: usize = 20_000;
    let out = outside_dir();
    let s = server_beside(out.path(), &[]);
    let stop = AtomicBool::new(false);
    let swaps = std::thread::scope(|scope| {
        let swapper = scope.spawn(|| {
            let mut c = Raw::login(s.addr, "anonymous", "x");
            let mut n = 0u64;
            while !stop.load(Ordering::Relaxed) {
                for (from, to) in [
                    ("a", "a.real"),
                    ("evil", "a"),
                    ("a", "evil"),
                    ("a.real", "a"),
                ] {
                    c.cmd(&format!("RNFR {from}"));
                    c.cmd(&format!("RNTO {to}"));
                }
                n += 1;
            }
            n
        });
        let mut c = Raw::login(s.addr, "anonymous", "x");
        for i in 0..TRIES {
            c.cmd("MKD a/made");
            c.cmd("DELE a/victim");
            c.cmd("RMD a/empty");
            // `secret` exists only outside: any answer about it is a read beyond the root.
            let (code, _) = c.cmd("CKSM MD5 0 -1 a/secret");
            assert_ne!(code, 213, "read a file outside the tree after {i} tries");
            let (code, _) = c.cmd("SIZE a/secret");
            assert_ne!(code, 213, "found a file outside the tree after {i} tries");
        }
        stop.store(true, Ordering::Relaxed);
        swapper.join().unwrap()
    });
    assert!(
        swaps > 50,
        "the swapping session hardly ran ({swaps} rounds)"
    );
    assert_eq!(names(out.path()), ["empty", "secret", "victim"]);
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
