//! Server-to-server copies: `fatpipe cp ftp://A/x ftp://B/y`, globus-url-copy and gfal2 (the
//! library FTS3 runs for each transfer) driving a copy between two `fatpipe serve
//! --allow-third-party` on different loopback addresses (client 127.0.0.1, servers 127.0.0.2
//! and .3, so each server's data peer is not its client); between fatpipe and
//! globus-gridftp-server; and the refusals without the option or for anonymous users.

mod common;
use common::*;
use std::process::Command;

/// A server on `ip` with user alice, allowing third-party copies unless `extra` says otherwise.
fn server_on(ip: &str, extra: &[&str]) -> FatpipeServer {
    let listen = format!("{ip}:0");
    let mut args = vec![
        "--listen",
        &listen,
        "--user",
        "alice:pw",
        "--data-timeout",
        "5s",
    ];
    args.extend_from_slice(extra);
    FatpipeServer::start(&args)
}

/// Third-party copies allowed, between the test's loopback addresses (which, as a site's
/// private network, must be listed to be reached).
const THIRD: &[&str] = &[
    "--allow-third-party",
    "--third-party-networks",
    "127.0.0.0/8",
];

fn url(s: &FatpipeServer, path: &str) -> String {
    format!("ftp://alice:pw@{}/{path}", s.addr)
}

fn json_cp(args: &[&str]) -> serde_json::Value {
    let mut all = vec!["cp", "--json", "--tls", "off"];
    all.extend_from_slice(args);
    let out = run_ok(&mut fatpipe_cmd(&all));
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn fatpipe_cp_between_two_servers_mode_e_and_mode_s() {
    let a = server_on("127.0.0.2", THIRD);
    let b = server_on("127.0.0.3", THIRD);
    random_file(&a.path("x"), 20 << 20, 1);
    let s = json_cp(&["-p", "4", &url(&a, "x"), &url(&b, "y")]);
    assert_same(&a.path("x"), &b.path("y"));
    assert_eq!(s["files"][0]["streams"], 4, "{s}");
    assert!(
        s["files"][0]["verified"]
            .as_str()
            .unwrap()
            .starts_with("XXH3:"),
        "{s}"
    );
    // One stream in MODE S, into a directory.
    std::fs::create_dir(b.path("dir")).unwrap();
    let s = json_cp(&["-p", "1", &url(&a, "x"), &url(&b, "dir/")]);
    assert_same(&a.path("x"), &b.path("dir/x"));
    assert!(s["files"][0]["streams"].is_null(), "{s}");
}

#[test]
fn without_the_option_or_as_anonymous_a_server_refuses() {
    // Bounce protection stays: PORT to a host other than the client's.
    let plain = server_on("127.0.0.2", &["--anonymous"]);
    let mut r = Raw::login(plain.addr, "alice", "pw");
    assert_eq!(r.cmd("PORT 127,0,0,3,200,10").0, 504);
    let open = server_on("127.0.0.2", &[THIRD, &["--anonymous"]].concat());
    let mut r = Raw::login(open.addr, "anonymous", "x");
    assert_eq!(r.cmd("PORT 127,0,0,3,200,10").0, 504);
    let mut r = Raw::login(open.addr, "alice", "pw");
    assert_eq!(r.cmd("PORT 127,0,0,3,200,10").0, 200);
    assert_eq!(r.cmd("PORT 127,0,0,3,0,80").0, 504, "privileged port");
    // fatpipe cp between servers when the source does not allow it: an error naming the option.
    let b = server_on("127.0.0.3", THIRD);
    random_file(&plain.path("x"), 1000, 2);
    let out = run(&mut fatpipe_cmd(&[
        "cp",
        "--tls",
        "off",
        &url(&plain, "x"),
        &url(&b, "y"),
    ]));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("--allow-third-party"),
        "{err}"
    );
}

#[test]
fn globus_url_copy_drives_a_copy_between_two_fatpipe_servers() {
    require("globus-url-copy");
    let a = server_on("127.0.0.2", THIRD);
    let b = server_on("127.0.0.3", THIRD);
    random_file(&a.path("x"), 12 << 20, 3);
    for p in ["1", "4"] {
        let to = format!("y{p}");
        run_ok(Command::new("globus-url-copy").args(["-p", p, &url(&a, "x"), &url(&b, &to)]));
        assert_same(&a.path("x"), &b.path(&to));
    }
}

#[test]
fn globus_url_copy_between_fatpipe_and_globus_gridftp_server() {
    require("globus-url-copy");
    let f = server_on("127.0.0.2", THIRD);
    let g = GlobusServer::start();
    random_file(&f.path("x"), 6 << 20, 4);
    run_ok(Command::new("globus-url-copy").args([
        "-p",
        "4",
        &url(&f, "x"),
        &g.url("from-fatpipe"),
    ]));
    assert_same(&f.path("x"), &g.path("from-fatpipe"));
    run_ok(Command::new("globus-url-copy").args([&g.url("from-fatpipe"), &url(&f, "back")]));
    assert_same(&f.path("x"), &f.path("back"));
}

/// gfal2's Python binding as FTS3 uses the library: credentials per server, checksums at both
/// ends compared (ADLER32, gfal2's default), then the copy.
const GFAL2: &str = r#"
import gfal2, sys
src, dst, a, b = sys.argv[1:5]
ctx = gfal2.creat_context()
for host in (a, b):
    ctx.cred_set(host, ctx.cred_new("USER", "alice"))
    ctx.cred_set(host, ctx.cred_new("PASSWORD", "pw"))
params = ctx.transfer_parameters()
params.set_checksum(gfal2.checksum_mode.both, "ADLER32", "")
params.timeout = 60
ctx.filecopy(params, src, dst)
print("copied", ctx.checksum(dst, "ADLER32"))
"#;

#[test]
fn gfal2_drives_a_copy_between_two_fatpipe_servers() {
    // Debian's python3-gfal2 is built for the system's Python.
    require("gfal-copy");
    let a = server_on("127.0.0.2", THIRD);
    let b = server_on("127.0.0.3", THIRD);
    random_file(&a.path("x"), 8 << 20, 5);
    let base = |s: &FatpipeServer| format!("ftp://{}", s.addr);
    let plain = |s: &FatpipeServer, p: &str| format!("ftp://{}/{p}", s.addr);
    let out = run_ok(Command::new("/usr/bin/python3").args([
        "-c",
        GFAL2,
        &plain(&a, "x"),
        &plain(&b, "y"),
        &base(&a),
        &base(&b),
    ]));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.starts_with("copied "), "{text}");
    assert_same(&a.path("x"), &b.path("y"));
}

/// Item 6 of the trust issue: `--allow-third-party` does not make the server a proxy to hosts
/// on its own loopback or private networks (a local-only service); a listed network is
/// reached, a public address is.
#[test]
fn third_party_targets_exclude_the_servers_own_networks_unless_listed() {
    let open = server_on("127.0.0.2", &["--allow-third-party"]);
    let mut r = Raw::login(open.addr, "alice", "pw");
    for private in [
        "PORT 127,0,0,3,200,10",
        "PORT 10,0,0,1,200,10",
        "PORT 192,168,1,1,200,10",
        "PORT 169,254,1,1,200,10",
        "EPRT |2|::1|51210|",
    ] {
        assert_eq!(r.cmd(private).0, 504, "{private}");
    }
    assert_eq!(r.cmd("PORT 192,0,43,10,200,10").0, 200, "a public address");
    let listed = server_on(
        "127.0.0.2",
        &[
            "--allow-third-party",
            "--third-party-networks",
            "127.0.0.3,10.0.0.0/8",
        ],
    );
    let mut r = Raw::login(listed.addr, "alice", "pw");
    assert_eq!(r.cmd("PORT 127,0,0,3,200,10").0, 200);
    assert_eq!(r.cmd("PORT 10,9,8,7,200,10").0, 200);
    assert_eq!(r.cmd("PORT 127,0,0,4,200,10").0, 504);
}

/// Item 4 of the trust issue: with third-party copies allowed, a passive listener takes
/// connections from other hosts; a session that set a data token (fatpipe's clients, and both
/// ends of a fatpipe-to-fatpipe copy) gives nothing to a host that connects first without it,
/// and the transfer goes to the connection that shows it, which came after.
#[test]
fn a_third_party_listener_gives_nothing_to_a_connection_without_the_token() {
    use std::io::{Read, Write};
    let s = server_on("127.0.0.2", THIRD);
    random_file(&s.path("secret"), 1 << 20, 9);
    let token = "00112233445566778899aabbccddeeff";
    let mut c = Raw::login(s.addr, "alice", "pw");
    assert_eq!(c.cmd(&format!("DTOK {token}")).0, 200);
    assert_eq!(c.cmd("TYPE I").0, 200);
    let (code, text) = c.cmd("EPSV");
    assert_eq!(code, 229, "{text}");
    let port = fatpipe_proto::addr::parse_epsv_reply(&text).unwrap();
    // Another host of the allowed network connects first, and shows nothing.
    let thief = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    thief
        .bind(
            &"127.0.0.3:0"
                .parse::<std::net::SocketAddr>()
                .unwrap()
                .into(),
        )
        .unwrap();
    thief
        .connect(&std::net::SocketAddr::from(([127, 0, 0, 2], port)).into())
        .unwrap();
    let mut thief: std::net::TcpStream = thief.into();
    thief
        .set_read_timeout(Some(std::time::Duration::from_secs(20)))
        .unwrap();
    // The client itself, showing the token, gets the file.
    let mut d = std::net::TcpStream::connect(("127.0.0.2", port)).unwrap();
    d.write_all(&hex::decode(token).unwrap()).unwrap();
    assert_eq!(c.cmd("RETR secret").0, 150);
    let mut got = Vec::new();
    d.read_to_end(&mut got).unwrap();
    assert_eq!(c.reply().0, 226);
    assert_eq!(got, std::fs::read(s.path("secret")).unwrap());
    let mut stolen = Vec::new();
    let _ = thief.read_to_end(&mut stolen);
    assert!(
        stolen.is_empty(),
        "{} bytes went to a stranger",
        stolen.len()
    );
}

/// A copy between servers across an emulated WAN (100 ms), its client beside the receiving
/// server as an FTS3 node often is: the receiver sizes its buffers for the data's path, not for
/// its client's few microseconds (it once took the control connection's RTT for the path's and
/// held every window near 80 KB: 104 Mbit/s where a download made 908).
#[test]
fn the_receiving_server_sizes_its_buffers_for_the_data_path_not_for_its_client() {
    let tb = Testbed::up("fp3rdwan", &["--rtt", "100ms", "--rate", "1gbit"]);
    let stats = tempfile::tempdir().unwrap();
    let start = |side: &str, ip: &str| {
        let root = tempfile::tempdir().unwrap();
        let listen = format!("{ip}:0");
        let file = stats.path().join(format!("{side}.jsonl"));
        let mut args = vec![
            "serve",
            "--root",
            root.path().to_str().unwrap(),
            "--listen",
            &listen,
        ];
        args.extend(["--user", "alice:pw", "--stats", file.to_str().unwrap()]);
        args.extend([
            "--allow-third-party",
            "--third-party-networks",
            "198.18.0.0/15",
        ]);
        FatpipeServer::spawn(tb.fatpipe(side, &args), root)
    };
    let (src, dst) = (start("b", "198.18.0.2"), start("a", "198.18.0.1"));
    random_file(&src.path("x"), 48 << 20, 41);
    let at = |s: &FatpipeServer, p: &str| format!("ftp://alice@{}/{p}", s.addr);
    run_ok(
        tb.fatpipe("a", &["cp", "--tls", "off", "--no-path-memory", "-p", "1"])
            .args([at(&src, "x"), at(&dst, "y")])
            .env("FATPIPE_PASSWORD", "pw"),
    );
    assert_same(&src.path("x"), &dst.path("y"));
    let peak = std::fs::read_to_string(stats.path().join("a.jsonl"))
        .unwrap()
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|r| r["role"] == "receiver")
        .filter_map(|r| r["rcvbuf"].as_u64())
        .max()
        .unwrap_or(0);
    // The path's BDP is 12.5 MB; a buffer sized for the client's RTT stays near 150 KB.
    assert!(
        peak > 4 << 20,
        "the receiver's buffer peaked at {peak} bytes"
    );
}
