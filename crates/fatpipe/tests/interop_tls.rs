//! FTPS (RFC 4217) with real peers: curl `--ssl-reqd`, lftp `ftp:ssl-force`, Python's
//! `ftplib.FTP_TLS` and `fatpipe cp` against `fatpipe serve --tls-cert --require-tls`;
//! `fatpipe cp` against vsftpd with `ssl_enable` (which demands TLS session reuse on data
//! connections); a loopback capture that shows neither the password nor the data under TLS
//! (and both in clear); the replies of the security commands.

mod common;
use common::*;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// A server requiring TLS, its certificate and key in the returned directory.
fn tls_server(extra: &[&str]) -> (FatpipeServer, tempfile::TempDir, PathBuf) {
    let certs = tempfile::tempdir().unwrap();
    let (cert, key) = tls_files(certs.path());
    let mut args = vec![
        "--user",
        "alice:s3cret-Pw",
        "--tls-cert",
        cert.to_str().unwrap(),
        "--tls-key",
        key.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    (FatpipeServer::start(&args), certs, cert)
}

#[test]
fn curl_downloads_uploads_and_lists_over_tls() {
    require("curl");
    let (s, dir, cert) = tls_server(&["--require-tls"]);
    random_file(&s.path("big"), 5 << 20, 1);
    let got = dir.path().join("got");
    let url = format!("ftp://alice:s3cret-Pw@localhost:{}/", s.addr.port());
    let curl = |args: &[&str]| {
        let mut c = Command::new("curl");
        c.args(["-sS", "--ssl-reqd", "--cacert", cert.to_str().unwrap()]);
        run_ok(c.args(args))
    };
    curl(&[&format!("{url}big"), "-o", got.to_str().unwrap()]);
    assert_same(&s.path("big"), &got);
    curl(&["-T", got.to_str().unwrap(), &format!("{url}up")]);
    assert_same(&got, &s.path("up"));
    let listing = String::from_utf8(curl(&[&url]).stdout).unwrap();
    assert!(
        listing.contains(" big") && listing.contains(" up"),
        "{listing}"
    );
}

#[test]
fn lftp_downloads_and_uploads_over_tls() {
    require("lftp");
    let (s, dir, cert) = tls_server(&["--require-tls"]);
    random_file(&s.path("big"), 3 << 20, 2);
    let got = dir.path().join("got");
    let script = format!(
        "set ftp:ssl-force true; set ftp:ssl-protect-data true; set ssl:ca-file {}; \
         set net:max-retries 1; get big -o {}; put {} -o up; bye",
        cert.display(),
        got.display(),
        got.display()
    );
    run_ok(Command::new("lftp").args([
        "-u",
        "alice,s3cret-Pw",
        "-e",
        &script,
        &format!("ftp://localhost:{}", s.addr.port()),
    ]));
    assert_same(&s.path("big"), &got);
    assert_same(&got, &s.path("up"));
}

const FTPLIB: &str = r#"
import ftplib, hashlib, io, ssl, sys
port, cafile = int(sys.argv[1]), sys.argv[2]
ftp = ftplib.FTP_TLS(context=ssl.create_default_context(cafile=cafile), timeout=60)
ftp.connect("localhost", port)
ftp.login("alice", "s3cret-Pw")
ftp.prot_p()
try:
    ftp.prot_c()
    print("prot c allowed")
except ftplib.error_perm as e:
    print("prot c", str(e)[:3])
got = io.BytesIO()
ftp.retrbinary("RETR big", got.write)
print("big", hashlib.sha256(got.getvalue()).hexdigest())
got.seek(0)
ftp.storbinary("STOR up", got)
print("names", sorted(ftp.nlst()))
ftp.quit()
plain = ftplib.FTP(timeout=60)
plain.connect("localhost", port)
try:
    plain.login("alice", "s3cret-Pw")
    print("clear login allowed")
except ftplib.error_perm as e:
    print("clear login", str(e)[:3])
"#;

#[test]
fn ftplib_over_tls_and_what_a_tls_only_server_refuses() {
    require("python3");
    // ftplib does not resume the control connection's TLS session on data connections.
    let (s, _dir, cert) = tls_server(&["--require-tls", "--tls-reuse", "optional"]);
    random_file(&s.path("big"), 2 << 20, 3);
    let out = run_ok(Command::new("python3").args([
        "-c",
        FTPLIB,
        &s.addr.port().to_string(),
        cert.to_str().unwrap(),
    ]));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("prot c 534"), "{text}");
    assert!(
        text.contains(&format!("big {}", sha256(&s.path("big")))),
        "{text}"
    );
    assert!(text.contains("names ['big', 'up']"), "{text}");
    assert!(text.contains("clear login 530"), "{text}");
    assert_same(&s.path("big"), &s.path("up"));
}

#[test]
fn security_commands_answer_as_rfc_4217_says() {
    // Without a certificate: no AUTH TLS in FEAT, AUTH refused, the rest out of sequence.
    let plain = FatpipeServer::start(&["--user", "alice:pw"]);
    let (mut r, _) = Raw::connect(plain.addr);
    assert!(!r.cmd("FEAT").1.contains("AUTH TLS"));
    assert_eq!(r.cmd("AUTH TLS").0, 534);
    assert_eq!(r.cmd("PBSZ 0").0, 503);
    assert_eq!(r.cmd("PROT P").0, 503);
    assert_eq!(r.cmd("CCC").0, 534);
    // With one: listed, other mechanisms refused; under --require-tls no clear login.
    let (s, _dir, _) = tls_server(&["--require-tls"]);
    let (mut r, _) = Raw::connect(s.addr);
    let feat = r.cmd("FEAT").1;
    assert!(feat.contains("AUTH TLS") && feat.contains("PROT"), "{feat}");
    assert_eq!(r.cmd("AUTH GSSAPI").0, 504);
    assert_eq!(r.cmd("USER alice").0, 530);
    assert_eq!(r.cmd("AUTH TLS").0, 234);
}

fn cp(args: &[&str]) -> std::process::Output {
    let mut all = vec!["cp", "--quiet"];
    all.extend_from_slice(args);
    run(&mut fatpipe_cmd(&all))
}

/// `fatpipe cp --tls require --ca CA FROM TO`, which must work.
fn cp_tls(ca: &str, from: &str, to: &str) {
    cp_ok(&["--tls", "require", "--ca", ca, from, to]);
}

fn cp_ok(args: &[&str]) {
    let out = cp(args);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn fatpipe_cp_over_tls_both_ways_and_an_untrusted_certificate() {
    let (s, dir, cert) = tls_server(&["--require-tls"]);
    random_file(&s.path("big"), 9 << 20, 4);
    let got = dir.path().join("got");
    let url = |p: &str| format!("ftp://alice:s3cret-Pw@localhost:{}/{p}", s.addr.port());
    let ca = cert.to_str().unwrap();
    cp_tls(ca, &url("big"), got.to_str().unwrap());
    assert_same(&s.path("big"), &got);
    // The default (auto) takes TLS when offered, MODE E's parallel connections included.
    let back = dir.path().join("back");
    for (from, to, copy) in [
        (got.display().to_string(), url("up"), s.path("up")),
        (url("up"), back.display().to_string(), back.clone()),
    ] {
        let mut c = fatpipe_cmd(&["cp", "--json", "--ca", ca, "-p", "4", &from, &to]);
        let out = run_ok(&mut c);
        let summary: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(summary["files"][0]["streams"], 4, "{summary}");
        assert_eq!(summary["files"][0]["tls"], true, "{summary}");
        assert_same(&got, &copy);
    }
    // Not trusted: an error that says what to do; nothing falls back to clear.
    let out = cp(&[&url("big"), dir.path().join("no").to_str().unwrap()]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("--ca"), "{err}");
    // A server without TLS (or a man in the middle answering AUTH TLS with 502): auto never
    // sends a password from the URL in clear, and says so loudly of any other; --tls off
    // sends it as asked; require refuses.
    let plain = FatpipeServer::start(&["--user", "alice:pw"]);
    random_file(&plain.path("f"), 1000, 5);
    let purl = format!("ftp://alice:pw@127.0.0.1:{}/f", plain.addr.port());
    let out = cp(&[&purl, dir.path().join("f").to_str().unwrap()]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success()
            && err.contains("in the URL would go in clear")
            && err.contains("--tls off"),
        "{err}"
    );
    assert!(!dir.path().join("f").exists());
    let bare = format!("ftp://alice@127.0.0.1:{}/f", plain.addr.port());
    let mut env = fatpipe_cmd(&["cp", &bare, dir.path().join("f").to_str().unwrap()]);
    env.env("FATPIPE_PASSWORD", "pw");
    let out = run_ok(&mut env);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("goes over the network in clear"), "{err}");
    cp_ok(&[
        "--tls",
        "off",
        &purl,
        dir.path().join("f2").to_str().unwrap(),
    ]);
    let out = cp(&[
        "--tls",
        "require",
        &purl,
        dir.path().join("g").to_str().unwrap(),
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("refused TLS"),
        "{err}"
    );
}

#[test]
fn fatpipe_cp_against_vsftpd_over_tls() {
    let certs = tempfile::tempdir().unwrap();
    let (cert, key) = tls_files(certs.path());
    // vsftpd's default require_ssl_reuse=YES: data connections must resume the control
    // connection's TLS session.
    let v = Vsftpd::start_with(&format!(
        "ssl_enable=YES\nallow_anon_ssl=YES\nforce_anon_logins_ssl=YES\nforce_anon_data_ssl=YES\n\
         rsa_cert_file={}\nrsa_private_key_file={}\n",
        cert.display(),
        key.display()
    ));
    random_file(&v.path("big"), 7 << 20, 6);
    v.give_to_ftp();
    let dir = tempfile::tempdir().unwrap();
    let got = dir.path().join("got");
    let url = |p: &str| format!("ftp://localhost:{}/pub/{p}", v.port);
    let ca = cert.to_str().unwrap();
    cp_tls(ca, &url("big"), got.to_str().unwrap());
    assert_same(&v.path("big"), &got);
    cp_tls(ca, got.to_str().unwrap(), &url("up"));
    assert_same(&got, &v.path("up"));
    // In clear, vsftpd refuses the login, and the error says why.
    let out = cp(&[
        "--tls",
        "off",
        &url("big"),
        dir.path().join("no").to_str().unwrap(),
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("--tls auto"), "{err}");
}

/// A loopback capture (tcpdump) running until dropped; `bytes` reads what it caught.
struct Capture {
    proc: Proc,
    file: PathBuf,
}

impl Capture {
    fn start(dir: &Path) -> Capture {
        require("tcpdump");
        let file = dir.join("lo.pcap");
        // All of loopback's TCP: MODE E downloads connect from the server to a port of the
        // client's (other tests' traffic only adds bytes that match nothing of this one's).
        let mut child = Command::new("tcpdump")
            .args([
                "-i",
                "lo",
                "--immediate-mode",
                "-U",
                "-n",
                "-Z",
                "root",
                "-s",
                "2048",
            ])
            .arg("-w")
            .arg(&file)
            .arg("tcp")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // tcpdump says "listening on lo" once it captures.
        let mut line = String::new();
        let mut err = BufReader::new(child.stderr.take().unwrap());
        err.read_line(&mut line).unwrap();
        assert!(line.contains("listening"), "{line}");
        Capture {
            proc: Proc { child },
            file,
        }
    }

    /// Stops the capture (SIGINT: tcpdump writes what it holds and exits) and returns the
    /// packets' bytes.
    fn bytes(mut self) -> Vec<u8> {
        let pid = self.proc.child.id().to_string();
        run_ok(Command::new("kill").args(["-INT", &pid]));
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while self.proc.child.try_wait().unwrap().is_none() {
            assert!(std::time::Instant::now() < deadline, "tcpdump did not stop");
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        std::fs::read(&self.file).unwrap()
    }
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

#[test]
fn a_capture_shows_neither_password_nor_data_under_tls() {
    let certs = tempfile::tempdir().unwrap();
    let (cert, key) = tls_files(certs.path());
    let password = "Wire-Visible-Pw-7391";
    let s = FatpipeServer::start(&[
        "--user",
        &format!("alice:{password}"),
        "--tls-cert",
        cert.to_str().unwrap(),
        "--tls-key",
        key.to_str().unwrap(),
    ]);
    random_file(&s.path("f"), 256 << 10, 7);
    let content = std::fs::read(s.path("f")).unwrap();
    let probe = &content[..48];
    let dir = tempfile::tempdir().unwrap();
    let url = format!("ftp://alice:{password}@localhost:{}/f", s.addr.port());
    for (tls, visible) in [("require", false), ("off", true)] {
        let cap = Capture::start(dir.path());
        let got = dir.path().join(format!("got-{tls}"));
        let ca = cert.to_str().unwrap();
        cp_ok(&["--tls", tls, "--ca", ca, &url, got.to_str().unwrap()]);
        assert_same(&s.path("f"), &got);
        let wire = cap.bytes();
        assert!(
            wire.len() > 1000,
            "the capture caught the transfer: {} bytes",
            wire.len()
        );
        assert_eq!(
            contains(&wire, password.as_bytes()),
            visible,
            "password, --tls {tls}"
        );
        assert_eq!(contains(&wire, probe), visible, "data, --tls {tls}");
    }
}
