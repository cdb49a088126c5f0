//! Command handling of a session, unit by unit: an in-process server on loopback, a raw control
//! connection, and the reply each command earns given the state earlier commands left (RFC
//! 959/3659, the GridFTP extensions, and this server's own rules).

use crate::server::auth::Anonymous;
use crate::server::{Server, ServerConfig};
use fatpipe_proto::ranges::RangeSet;
use fatpipe_proto::reply::ReplyParser;
use fatpipe_proto::Reply;
use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::path::Path;
use std::time::Duration;

/// A server on loopback serving a temporary directory, and one control connection to it.
struct Control {
    reader: BufReader<TcpStream>,
    writer: TcpStream,
    parser: ReplyParser,
    dir: tempfile::TempDir,
    _rt: tokio::runtime::Runtime,
}

impl Control {
    /// Connects to a new server whose anonymous users may do `anonymous`; reads the greeting.
    fn new(anonymous: Anonymous) -> Control {
        let dir = tempfile::tempdir().unwrap();
        let mut config = ServerConfig::new(dir.path().to_path_buf());
        config.listen = "127.0.0.1:0".parse().unwrap();
        config.anonymous = anonymous;
        config.login_failure_delay = Duration::ZERO;
        let rt = tokio::runtime::Runtime::new().unwrap();
        let server = rt.block_on(Server::bind(config)).unwrap();
        let addr = server.local_addr().unwrap();
        rt.spawn(server.run());
        let writer = TcpStream::connect(addr).unwrap();
        writer
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        let mut c = Control {
            reader: BufReader::new(writer.try_clone().unwrap()),
            writer,
            parser: ReplyParser::default(),
            dir,
            _rt: rt,
        };
        assert_eq!(c.reply().code, 220);
        c
    }

    /// The same, logged in anonymously.
    fn logged_in(anonymous: Anonymous) -> Control {
        let mut c = Control::new(anonymous);
        assert_eq!(c.ask("USER anonymous").code, 331);
        assert_eq!(c.ask("PASS guest@").code, 230);
        c
    }

    fn reply(&mut self) -> Reply {
        let mut line = String::new();
        loop {
            line.clear();
            assert!(self.reader.read_line(&mut line).unwrap() > 0, "closed");
            let text = line.trim_end_matches(['\r', '\n']);
            if let Some(r) = self.parser.push_line(text).unwrap() {
                return r;
            }
        }
    }

    /// Sends one command line; its reply.
    fn ask(&mut self, line: &str) -> Reply {
        self.writer
            .write_all(format!("{line}\r\n").as_bytes())
            .unwrap();
        self.reply()
    }

    fn path(&self, name: &str) -> std::path::PathBuf {
        self.dir.path().join(name)
    }
}

fn write(path: &Path, bytes: &[u8]) {
    std::fs::write(path, bytes).unwrap();
}

#[test]
fn nothing_but_login_before_login() {
    let mut c = Control::new(Anonymous::ReadOnly);
    assert_eq!(c.ask("PWD").code, 530);
    assert_eq!(c.ask("PASS early").code, 503);
    assert_eq!(c.ask("USER anonymous").code, 331);
    assert_eq!(c.ask("PASS guest@").code, 230);
    assert_eq!(c.ask("PWD").code, 257);
}

#[test]
fn feat_names_the_gridftp_extensions_and_checksums() {
    let mut c = Control::logged_in(Anonymous::ReadOnly);
    let r = c.ask("FEAT");
    assert_eq!(r.code, 211);
    let text = r.lines.join("\n");
    for f in [
        "PARALLEL",
        "DCREUSE",
        "ERET",
        "ESTO",
        "DRS",
        "SBUF",
        "CKSM MD5",
        "SETNETSTACK",
        "PIPELINED STOR",
        "UDPREADY",
    ] {
        assert!(text.contains(f), "{f} missing from {text}");
    }
}

#[test]
fn setnetstack_chooses_udp_with_a_known_controller_and_refuses_the_rest() {
    let mut c = Control::new(Anonymous::ReadOnly);
    assert_eq!(c.ask("SITE SETNETSTACK udp").code, 530, "needs a login");
    let mut c = Control::logged_in(Anonymous::ReadOnly);
    let r = c.ask("SITE SETNETSTACK udp control=history rate=1000000000");
    assert_eq!(r.code, 200);
    assert!(r.text().contains("history"), "{r}");
    assert_eq!(c.ask("SITE SETNETSTACK udp control=psychic").code, 501);
    assert_eq!(c.ask("SITE SETNETSTACK udp rate=10").code, 501);
    assert_eq!(c.ask("SITE SETNETSTACK udt").code, 501);
    assert_eq!(c.ask("SITE SETNETSTACK tcp").code, 200);
    assert_eq!(c.ask("SITE CHMOD 777 x").code, 504);
    assert_eq!(c.ask("SITE").code, 501);
}

#[test]
fn udpready_notes_a_socket_for_the_next_transfer_and_refuses_nonsense() {
    let mut c = Control::new(Anonymous::ReadOnly);
    assert_eq!(
        c.ask("SITE UDPREADY 5000 7 1472 100").code,
        530,
        "needs a login"
    );
    let mut c = Control::logged_in(Anonymous::ReadOnly);
    assert_eq!(c.ask("SITE UDPREADY 5000 7 1472 100").code, 200);
    for bad in [
        "",
        "5000 7 1472",
        "0 7 1472 100",
        "5000 7 64 100",
        "5000 x 1472 100",
    ] {
        assert_eq!(c.ask(&format!("SITE UDPREADY {bad}")).code, 501, "{bad}");
    }
}

#[test]
fn mode_and_parallelism_are_checked_and_kept() {
    let mut c = Control::logged_in(Anonymous::ReadOnly);
    // An unknown mode is a parameter the command cannot parse.
    assert_eq!(c.ask("MODE X").code, 501);
    assert_eq!(c.ask("MODE E").code, 200);
    assert_eq!(c.ask("OPTS RETR Parallelism=2,1,8;").code, 200);
    assert_eq!(c.ask("OPTS RETR Parallelism=lots;").code, 501);
    assert_eq!(c.ask("OPTS DCREUSE maybe").code, 501);
    assert_eq!(c.ask("MODE S").code, 200);
}

#[test]
fn a_transfer_without_a_data_channel_touches_no_file() {
    let mut c = Control::logged_in(Anonymous::ReadWrite);
    write(&c.path("kept"), b"precious");
    // No PASV/EPSV/PORT yet: refused before the file is opened (or emptied).
    assert_eq!(c.ask("STOR kept").code, 425);
    assert_eq!(std::fs::read(c.path("kept")).unwrap(), b"precious");
    assert_eq!(c.ask("STOR new").code, 425);
    assert!(!c.path("new").exists());
    assert_eq!(c.ask("RETR kept").code, 425);
    assert_eq!(c.ask("RETR missing").code, 550);
}

#[test]
fn size_counts_only_what_an_incomplete_upload_holds_without_a_gap() {
    let mut c = Control::logged_in(Anonymous::ReadOnly);
    write(&c.path("part"), &[1u8; 1000]);
    let f = std::fs::File::open(c.path("part")).unwrap();
    let mut held = RangeSet::default();
    held.insert(0, 300);
    held.insert(500, 1000);
    if fatpipe_net::partial::mark(&f, &held).is_err() {
        // The file system keeps no extended attributes: no record to read either.
        return;
    }
    assert_eq!(c.ask("TYPE I").code, 200);
    assert_eq!(c.ask("SIZE part").text().trim(), "300");
    write(&c.path("whole"), &[2u8; 1000]);
    assert_eq!(c.ask("SIZE whole").text().trim(), "1000");
    assert_eq!(c.ask("SIZE none").code, 550);
}

#[test]
fn a_rename_never_replaces_and_needs_its_rnfr() {
    let mut c = Control::logged_in(Anonymous::ReadWrite);
    write(&c.path("a"), b"A");
    write(&c.path("b"), b"B");
    assert_eq!(c.ask("RNTO b").code, 503);
    assert_eq!(c.ask("RNFR a").code, 350);
    assert_eq!(c.ask("RNTO b").code, 553);
    assert_eq!(std::fs::read(c.path("b")).unwrap(), b"B");
    assert_eq!(c.ask("RNFR a").code, 350);
    assert_eq!(c.ask("RNTO c").code, 250);
    assert_eq!(std::fs::read(c.path("c")).unwrap(), b"A");
}

#[test]
fn a_read_only_login_may_not_write() {
    let mut c = Control::logged_in(Anonymous::ReadOnly);
    write(&c.path("a"), b"A");
    assert_eq!(c.ask("DELE a").code, 550);
    assert_eq!(c.ask("MKD d").code, 550);
    assert!(c.path("a").exists());
    assert!(!c.path("d").exists());
}

#[test]
fn mfmt_sets_a_files_time_and_mdtm_reads_it_back() {
    let mut c = Control::logged_in(Anonymous::ReadWrite);
    write(&c.path("f"), b"F");
    std::fs::create_dir(c.path("d")).unwrap();
    assert_eq!(c.ask("MFMT 20231114221320 f").code, 213);
    let m = std::fs::metadata(c.path("f")).unwrap().modified().unwrap();
    let secs = m.duration_since(std::time::UNIX_EPOCH).unwrap().as_secs();
    assert_eq!(secs, 1_700_000_000);
    assert_eq!(c.ask("MDTM f").text().trim(), "20231114221320");
    assert_eq!(c.ask("MFMT 20231114221320 d").code, 550);
    assert_eq!(c.ask("MFMT 20231114221320 none").code, 550);
    assert_eq!(c.ask("MFMT 2023 f").code, 501);
    let mut c = Control::logged_in(Anonymous::ReadOnly);
    write(&c.path("f"), b"F");
    assert_eq!(c.ask("MFMT 20231114221320 f").code, 550);
}

#[test]
fn cksm_answers_the_digest_of_the_range_asked() {
    let mut c = Control::logged_in(Anonymous::ReadOnly);
    write(&c.path("f"), b"hello world");
    let r = c.ask("CKSM MD5 0 -1 f");
    assert_eq!(r.code, 213);
    assert_eq!(r.text().trim(), "5eb63bbbe01eeed093cb22bb8f5acdc3");
    let r = c.ask("CKSM MD5 0 5 f");
    assert_eq!(r.text().trim(), "5d41402abc4b2a76b9719d911017c592");
    assert_eq!(c.ask("CKSM NOPE 0 -1 f").code, 501);
    assert_eq!(c.ask("CKSM MD5 0 -1 none").code, 550);
}
