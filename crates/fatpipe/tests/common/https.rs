//! Helpers of the HTTPS tests: a CA and token issuer per test (`Pki`), fatpipe servers with
//! HTTPS, curl and gfal2 as the tests drive them, and an XRootD HTTPS server.

use super::*;
use fatpipe_http::testing::TestIssuer;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{SystemTime, UNIX_EPOCH};

pub const ISSUER: &str = "https://issuer.test";
/// Third-party copies allowed, between servers on loopback (listed: loopback is never reached
/// otherwise).
pub const TPC: [&str; 3] = [
    "--allow-third-party",
    "--third-party-networks",
    "127.0.0.1/32",
];

/// Certificates and token keys for one test, in a directory of its own.
pub struct Pki {
    pub dir: tempfile::TempDir,
    pub ca: PathBuf,
    pub chain: PathBuf,
    pub key: PathBuf,
    pub issuer: TestIssuer,
    pub jwks: PathBuf,
}

impl Pki {
    pub fn new() -> Pki {
        let dir = tempfile::tempdir().unwrap();
        let (ca, chain, key) = fatpipe_net::tls::testing::ca_signed_files(dir.path()).unwrap();
        // An OpenSSL CA directory (hashed names) for davix and gfal2.
        let cadir = dir.path().join("cadir");
        std::fs::create_dir(&cadir).unwrap();
        std::fs::copy(&ca, cadir.join("ca.pem")).unwrap();
        run_ok(Command::new("openssl").arg("rehash").arg(&cadir));
        let issuer = TestIssuer::new(ISSUER).unwrap();
        let jwks = issuer.jwks_file(dir.path()).unwrap();
        Pki {
            dir,
            ca,
            chain,
            key,
            issuer,
            jwks,
        }
    }

    pub fn cadir(&self) -> PathBuf {
        self.dir.path().join("cadir")
    }

    /// A token with `scope`, valid for ten minutes (or expired, with `valid_s` < 0).
    pub fn token(&self, scope: &str, valid_s: i64) -> String {
        self.issuer.token(scope, now(), valid_s)
    }

    /// `fatpipe serve` with FTP and HTTPS on loopback, alice:pw, tokens from the issuer.
    pub fn server(&self, extra: &[&str]) -> FatpipeServer {
        let issuer = format!("{ISSUER}={}", self.jwks.display());
        let mut args: Vec<&str> = vec![
            "--https",
            "127.0.0.1:0",
            "--user",
            "alice:pw",
            "--token-issuer",
            &issuer,
        ];
        args.extend(["--tls-cert", self.chain.to_str().unwrap()]);
        args.extend(["--tls-key", self.key.to_str().unwrap()]);
        args.extend(["--ca", self.ca.to_str().unwrap()]);
        args.extend(extra);
        let root = tempfile::tempdir().unwrap();
        let log = self.dir.path().join("starting.log");
        let mut cmd = Command::new(fatpipe());
        cmd.args(["serve", "--listen", "127.0.0.1:0", "--root"])
            .arg(root.path())
            .args(&args);
        let file = std::fs::File::create(&log).unwrap();
        let s = FatpipeServer::spawn_logging(cmd, root, file.into());
        std::fs::rename(&log, self.log_of(&s)).unwrap();
        s
    }

    /// Where server `s` logs.
    pub fn log_of(&self, s: &FatpipeServer) -> PathBuf {
        let port = s.https.unwrap().port();
        self.dir.path().join(format!("server-{port}.log"))
    }
}

pub fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

pub fn base(s: &FatpipeServer) -> String {
    format!("https://localhost:{}", s.https.unwrap().port())
}

/// curl's `COPY` of `url` with the bearer `token` and `headers` (`Source: …`, `Destination:
/// …`, `TransferHeaderAuthorization: …`): its status and body.
pub fn copy_request(pki: &Pki, token: &str, headers: &[String], url: &str) -> (u16, Vec<u8>) {
    let auth = format!("Authorization: Bearer {token}");
    let mut args = vec!["-X", "COPY", "-H", auth.as_str()];
    for h in headers {
        args.extend(["-H", h.as_str()]);
    }
    args.push(url);
    curl(pki, &args)
}

/// curl with the test CA, quiet, failing on nothing (the status is checked).
pub fn curl(pki: &Pki, args: &[&str]) -> (u16, Vec<u8>) {
    let out = run_ok(
        Command::new("curl")
            .args(["-sS", "--cacert"])
            .arg(&pki.ca)
            .args(["-o", "-", "-w", "\n%{http_code}"])
            .args(args),
    );
    let mut body = out.stdout;
    let split = body.iter().rposition(|&b| b == b'\n').unwrap();
    let code = String::from_utf8_lossy(&body[split + 1..]).parse().unwrap();
    body.truncate(split);
    (code, body)
}

pub fn adler32_hex(p: &Path) -> String {
    let mut a = adler2::Adler32::new();
    a.write_slice(&std::fs::read(p).unwrap());
    format!("{:08x}", a.checksum())
}

/// gfal2 as FTS3 drives it: a bearer token per endpoint, checksums (ADLER32) compared at both
/// ends, and the copy mode forced with no fallback to streaming through the client.
pub const GFAL2_COPY: &str = r#"
import gfal2, sys
src, dst, a, b, token_a, token_b, mode = sys.argv[1:8]
ctx = gfal2.creat_context()
ctx.cred_set(a, ctx.cred_new("BEARER", token_a))
ctx.cred_set(b, ctx.cred_new("BEARER", token_b))
ctx.set_opt_boolean("HTTP PLUGIN", "RETRIEVE_BEARER_TOKEN", False)
if mode == "stream":
    ctx.set_opt_boolean("HTTP PLUGIN", "ENABLE_REMOTE_COPY", False)
else:
    ctx.set_opt_boolean("HTTP PLUGIN", "ENABLE_REMOTE_COPY", True)
    ctx.set_opt_boolean("HTTP PLUGIN", "ENABLE_FALLBACK_TPC_COPY", False)
    ctx.set_opt_boolean("HTTP PLUGIN", "ENABLE_STREAM_COPY", False)
    ctx.set_opt_string("HTTP PLUGIN", "DEFAULT_COPY_MODE", "3rd " + mode)
params = ctx.transfer_parameters()
params.set_checksum(gfal2.checksum_mode.both, "ADLER32", "")
params.timeout = 60
params.overwrite = True
ctx.filecopy(params, src, dst)
print("copied", ctx.checksum(dst, "ADLER32"), [e for e in ctx.listdir(b + "/")])
"#;

pub fn gfal2(pki: &Pki, args: &[&str]) -> std::process::Output {
    run(Command::new("/usr/bin/python3")
        .env("X509_CERT_DIR", pki.cadir())
        .args(["-c", GFAL2_COPY])
        .args(args))
}

/// XRootD's HTTPS server with its third-party-copy handler (XrdHttp, XrdTpc), anonymous, as
/// user nobody (xrootd refuses to run as root), on a tree of its own.
pub struct Xrootd {
    pub port: u16,
    pub dir: tempfile::TempDir,
    _proc: Proc,
}

impl Xrootd {
    pub fn start(pki: &Pki) -> Xrootd {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        for sub in ["data", "admin", "run", "tls"] {
            std::fs::create_dir(d.join(sub)).unwrap();
        }
        // Its TLS files: the key readable by nobody alone, the CA directory not writable.
        std::fs::copy(&pki.chain, d.join("tls/chain.pem")).unwrap();
        std::fs::copy(&pki.key, d.join("tls/key.pem")).unwrap();
        run_ok(
            Command::new("cp")
                .arg("-r")
                .arg(pki.cadir())
                .arg(d.join("tls/cadir")),
        );
        run_ok(Command::new("chown").args(["-R", "nobody"]).arg(d));
        let mode = |p: &Path, m: u32| {
            std::fs::set_permissions(p, std::fs::Permissions::from_mode(m)).unwrap()
        };
        mode(d, 0o755);
        mode(&d.join("tls/key.pem"), 0o600);
        mode(&d.join("tls/cadir"), 0o755);
        let port = free_port();
        let cfg = format!(
            "xrd.port {xport}\nxrd.protocol XrdHttp:{port} libXrdHttp.so\n\
             xrd.tls {d}/tls/chain.pem {d}/tls/key.pem\nxrd.tlsca certdir {d}/tls/cadir\n\
             all.export /\noss.localroot {d}/data\nall.adminpath {d}/admin\nall.pidpath {d}/run\n\
             xrootd.chksum adler32\nhttp.exthandler xrdtpc libXrdHttpTPC.so\n",
            d = d.display(),
            xport = free_port(),
        );
        let cfg_file = d.join("xrd.cfg");
        std::fs::write(&cfg_file, cfg).unwrap();
        let log = std::fs::File::create(d.join("xrootd.log")).unwrap();
        let child = Command::new("xrootd")
            .args(["-R", "nobody", "-c"])
            .arg(&cfg_file)
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap();
        let proc = Proc { child };
        wait_for_port(port);
        Xrootd {
            port,
            dir,
            _proc: proc,
        }
    }

    pub fn path(&self, rel: &str) -> PathBuf {
        self.dir.path().join("data").join(rel)
    }
}

/// An HTTPS server written in Python (the test's certificate), as long as it lives.
pub struct PyTls {
    child: std::process::Child,
    /// Its port on 127.0.0.1.
    pub port: u16,
}

impl PyTls {
    /// Runs `script`, its arguments the certificate chain, the key and `args`; it prints its
    /// port first.
    fn start(pki: &Pki, script: &str, args: &[&std::ffi::OsStr]) -> PyTls {
        let mut child = Command::new("python3")
            .args(["-c", script])
            .arg(&pki.chain)
            .arg(&pki.key)
            .args(args)
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        let out = child.stdout.take().unwrap();
        std::io::BufRead::read_line(&mut std::io::BufReader::new(out), &mut line).unwrap();
        let port = line.trim().parse().unwrap();
        PyTls { child, port }
    }
}

impl Drop for PyTls {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// What every script's server does once its handler is defined: listen on loopback with TLS
/// and print its port.
const SERVE: &str = r#"
s = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain(sys.argv[1], sys.argv[2])
s.socket = ctx.wrap_socket(s.socket, server_side=True)
print(s.server_address[1], flush=True)
s.serve_forever()
"#;

/// An HTTPS server that answers every GET and HEAD with `307 Location: <target><path>`, as a
/// dCache door sends clients on to a pool.
pub fn redirector(pki: &Pki, target: &str) -> PyTls {
    let handler = r#"
import http.server, ssl, sys
target = sys.argv[3]
class H(http.server.BaseHTTPRequestHandler):
    def moved(self):
        self.send_response(307)
        self.send_header("Location", target + self.path)
        self.send_header("Content-Length", "0")
        self.end_headers()
    do_GET = moved
    do_HEAD = moved
    def do_PUT(self):
        self.rfile.read(int(self.headers.get("Content-Length", "0")))
        self.moved()
    def log_message(self, *a):
        pass
"#;
    PyTls::start(pki, &format!("{handler}{SERVE}"), &[target.as_ref()])
}

/// An HTTPS server that stores each PUT's body under `dir` (as a dCache pool takes an upload
/// its door sent there) and answers 201; it asks for no credentials.
pub fn pool(pki: &Pki, dir: &Path) -> PyTls {
    let handler = r#"
import http.server, os, ssl, sys
root = sys.argv[3]
class H(http.server.BaseHTTPRequestHandler):
    def do_PUT(self):
        data = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        with open(os.path.join(root, os.path.basename(self.path.split("?")[0])), "wb") as f:
            f.write(data)
        self.send_response(201)
        self.send_header("Content-Length", "0")
        self.end_headers()
    def log_message(self, *a):
        pass
"#;
    PyTls::start(pki, &format!("{handler}{SERVE}"), &[dir.as_os_str()])
}

/// An HTTPS server that serves one file as a plain web server does (`Accept-Ranges`,
/// `Last-Modified` of the file, ranged GETs answered 206) but ends the first `cuts` bodies
/// after `cut` bytes: a link that breaks mid-download.
pub fn cutter(pki: &Pki, file: &Path, cut: u64, cuts: u32) -> PyTls {
    served(pki, file, cut, cuts, 0)
}

/// The same server, hostile: every body carries `extra` zero bytes past what its headers'
/// range says (its `Content-Length` counts them).
pub fn overrunner(pki: &Pki, file: &Path, extra: u64) -> PyTls {
    served(pki, file, u64::MAX >> 1, 0, extra)
}

fn served(pki: &Pki, file: &Path, cut: u64, cuts: u32, extra: u64) -> PyTls {
    let handler = r#"
import http.server, os, re, ssl, sys, email.utils
path, cut, cuts, extra = sys.argv[3], int(sys.argv[4]), [int(sys.argv[5])], int(sys.argv[6])
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def head(self):
        st = os.stat(path)
        size, first, last = st.st_size, 0, st.st_size - 1
        m = re.match(r"bytes=(\d+)-(\d*)$", self.headers.get("Range", ""))
        if m:
            first = int(m.group(1))
            last = int(m.group(2)) if m.group(2) else size - 1
            self.send_response(206)
            self.send_header("Content-Range", "bytes %d-%d/%d" % (first, last, size))
        else:
            self.send_response(200)
        self.send_header("Accept-Ranges", "bytes")
        self.send_header("Last-Modified", email.utils.formatdate(st.st_mtime, usegmt=True))
        self.send_header("Content-Length", str(last - first + 1 + extra))
        self.end_headers()
        return first, last
    def do_HEAD(self):
        self.head()
    def do_GET(self):
        first, last = self.head()
        n = last - first + 1
        if cuts[0] > 0:
            cuts[0] -= 1
            n = min(cut, n)
        with open(path, "rb") as f:
            f.seek(first)
            self.wfile.write(f.read(n) + bytes(extra))
        self.wfile.flush()
        self.close_connection = True
    def log_message(self, *a):
        pass
"#;
    let (cut, cuts, extra) = (cut.to_string(), cuts.to_string(), extra.to_string());
    let args = [
        file.as_os_str(),
        cut.as_ref(),
        cuts.as_ref(),
        extra.as_ref(),
    ];
    PyTls::start(pki, &format!("{handler}{SERVE}"), &args)
}
