//! Shared helpers of the integration tests: starting servers (ours and vsftpd) as real processes,
//! making test files, hashing, and a raw control-channel client for protocol-level checks.
#![allow(dead_code)] // each test binary uses a different subset

pub mod https;

use sha2::{Digest, Sha256};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The sizes every transfer test covers.
pub const SIZES: [u64; 4] = [0, 1, (1 << 20) + 1, 256 << 20];

/// Path of the fatpipe binary under test.
pub fn fatpipe() -> &'static str {
    env!("CARGO_BIN_EXE_fatpipe")
}

/// Fails the test (never skips it) when a required external program is missing.
pub fn require(program: &str) {
    let found = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).any(|d| d.join(program).is_file()))
        .unwrap_or(false);
    assert!(
        found,
        "{program} is not installed: run scripts/test.sh, which installs the test dependencies"
    );
}

/// Writes `size` pseudo-random bytes (seeded, so runs are reproducible) to `path`.
pub fn random_file(path: &Path, size: u64, seed: u64) {
    let mut f = std::io::BufWriter::with_capacity(1 << 20, std::fs::File::create(path).unwrap());
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut left = size;
    let mut block = vec![0u8; 1 << 16];
    while left > 0 {
        for chunk in block.chunks_mut(8) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            chunk.copy_from_slice(&x.to_le_bytes()[..chunk.len()]);
        }
        let n = left.min(block.len() as u64) as usize;
        f.write_all(&block[..n]).unwrap();
        left -= n as u64;
    }
    f.flush().unwrap();
}

/// SHA-256 of a file, hex.
pub fn sha256(path: &Path) -> String {
    let mut f =
        std::fs::File::open(path).unwrap_or_else(|e| panic!("open {}: {e}", path.display()));
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = f.read(&mut buf).unwrap();
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
    }
    hex::encode(h.finalize())
}

/// Asserts two files have identical contents (by SHA-256).
pub fn assert_same(a: &Path, b: &Path) {
    assert_eq!(
        sha256(a),
        sha256(b),
        "{} and {} differ",
        a.display(),
        b.display()
    );
}

/// A child process killed (by PID) when dropped.
pub struct Proc {
    pub child: Child,
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A `fatpipe serve` process on loopback with its own root directory.
pub struct FatpipeServer {
    pub addr: SocketAddr,
    /// The HTTPS front-end's address, when started with `--https`.
    pub https: Option<SocketAddr>,
    pub root: tempfile::TempDir,
    pub proc: Proc,
}

impl FatpipeServer {
    /// Starts `fatpipe serve --root <tmp> --listen 127.0.0.1:0 <extra>`.
    pub fn start(extra: &[&str]) -> FatpipeServer {
        let root = tempfile::tempdir().unwrap();
        Self::start_in(root, extra)
    }

    /// Starts a server on an existing root directory.
    pub fn start_in(root: tempfile::TempDir, extra: &[&str]) -> FatpipeServer {
        let mut cmd = Command::new(fatpipe());
        cmd.args(["serve", "--root"]).arg(root.path()).args(extra);
        if !extra.contains(&"--listen") {
            cmd.args(["--listen", "127.0.0.1:0"]);
        }
        Self::spawn(cmd, root)
    }

    /// Starts a server from a prepared command whose stdout announces the address.
    pub fn spawn(cmd: Command, root: tempfile::TempDir) -> FatpipeServer {
        Self::spawn_logging(cmd, root, Stdio::null())
    }

    /// [`FatpipeServer::spawn`], its log going to `log`.
    pub fn spawn_logging(mut cmd: Command, root: tempfile::TempDir, log: Stdio) -> FatpipeServer {
        let web = cmd.get_args().any(|a| a == "--https");
        let mut child = cmd
            .stdout(Stdio::piped())
            .stderr(log)
            .spawn()
            .expect("start fatpipe serve");
        let stdout = child.stdout.take().unwrap();
        let mut lines = BufReader::new(stdout);
        let mut announced = || {
            let mut line = String::new();
            lines.read_line(&mut line).unwrap();
            line.split("listening on ")
                .nth(1)
                .and_then(|r| r.split(',').next())
                .and_then(|a| a.parse().ok())
                .unwrap_or_else(|| panic!("server did not announce its address: {line:?}"))
        };
        let addr = announced();
        let https = web.then(&mut announced);
        FatpipeServer {
            addr,
            https,
            root,
            proc: Proc { child },
        }
    }

    /// `ftp://127.0.0.1:PORT/path` (path without leading slash).
    pub fn url(&self, path: &str) -> String {
        format!("ftp://{}/{path}", self.addr)
    }

    /// Same with credentials.
    pub fn url_as(&self, user: &str, password: &str, path: &str) -> String {
        format!("ftp://{user}:{password}@{}/{path}", self.addr)
    }

    /// A local path under the served root.
    pub fn path(&self, rel: &str) -> PathBuf {
        self.root.path().join(rel)
    }
}

/// A self-signed certificate for `localhost` and 127.0.0.1, written to `dir`: (cert, key).
pub fn tls_files(dir: &Path) -> (PathBuf, PathBuf) {
    fatpipe_net::tls::testing::self_signed_files(dir).unwrap()
}

/// A vsftpd on loopback serving a writable anonymous tree (the `pub` folder under its root).
pub struct Vsftpd {
    pub port: u16,
    pub root: tempfile::TempDir,
    pub proc: Proc,
}

impl Vsftpd {
    pub fn start() -> Vsftpd {
        Self::start_with("")
    }

    /// Starts one with `extra` lines added to its configuration.
    pub fn start_with(extra: &str) -> Vsftpd {
        require("vsftpd");
        let root = tempfile::tempdir().unwrap();
        let pubdir = root.path().join("pub");
        std::fs::create_dir(&pubdir).unwrap();
        // The anonymous user (ftp) writes in pub/; the root itself stays root's, as vsftpd demands.
        let status = Command::new("chown")
            .arg("ftp:ftp")
            .arg(&pubdir)
            .status()
            .unwrap();
        assert!(
            status.success(),
            "chown ftp pub/ (tests run as root, as CI does)"
        );
        std::fs::create_dir_all("/var/run/vsftpd/empty").unwrap();
        // A port outside the kernel's ephemeral range, which every other socket of the parallel
        // tests draws from (a port that was free a moment ago could be taken again before vsftpd
        // binds it); and a new one if vsftpd still could not bind.
        for attempt in 0..5 {
            let port = port_outside_ephemeral_range();
            let conf = root.path().join("vsftpd.conf");
            std::fs::write(
                &conf,
                format!(
                    "listen=YES\nlisten_ipv6=NO\nlisten_address=127.0.0.1\nlisten_port={port}\nbackground=NO\n\
                     anonymous_enable=YES\nlocal_enable=NO\nwrite_enable=YES\nanon_upload_enable=YES\n\
                     anon_mkdir_write_enable=YES\nanon_other_write_enable=YES\nanon_world_readable_only=NO\n\
                     anon_root={}\nno_anon_password=YES\nallow_writeable_chroot=YES\nanon_umask=022\n\
                     seccomp_sandbox=NO\nsecure_chroot_dir=/var/run/vsftpd/empty\nxferlog_enable=NO\n\
                     pasv_enable=YES\nconnect_from_port_20=NO\n{extra}",
                    root.path().display()
                ),
            )
            .unwrap();
            let child = Command::new("vsftpd")
                .arg(&conf)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap();
            let mut proc = Proc { child };
            if vsftpd_greets(port, &mut proc.child) {
                return Vsftpd { port, root, proc };
            }
            eprintln!("vsftpd did not come up on port {port} (attempt {attempt}); trying another");
        }
        panic!("vsftpd did not start");
    }

    /// `ftp://127.0.0.1:PORT/pub/path`.
    pub fn url(&self, path: &str) -> String {
        format!("ftp://127.0.0.1:{}/pub/{path}", self.port)
    }

    pub fn path(&self, rel: &str) -> PathBuf {
        self.root.path().join("pub").join(rel)
    }

    /// Makes files created by the test readable and writable by vsftpd's anonymous user.
    pub fn give_to_ftp(&self) {
        let status = Command::new("chown")
            .arg("-R")
            .arg("ftp:ftp")
            .arg(self.root.path().join("pub"))
            .status()
            .unwrap();
        assert!(status.success());
    }
}

/// A free port below the kernel's ephemeral range (32768 and up by default), picked from a
/// spread that differs between test processes.
fn port_outside_ephemeral_range() -> u16 {
    use std::sync::atomic::{AtomicU32, Ordering};
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let seed = std::process::id().wrapping_mul(7919);
    for _ in 0..2000 {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let port = 20000 + (seed.wrapping_add(n.wrapping_mul(104_729)) % 12000) as u16;
        if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
    free_port()
}

/// Whether vsftpd, started as `child`, answers on `port` with its greeting (bounded wait); false
/// when it exited (it could not bind) or someone else answers.
fn vsftpd_greets(port: u16, child: &mut Child) -> bool {
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        if child.try_wait().ok().flatten().is_some() {
            return false;
        }
        if let Ok(s) = TcpStream::connect(("127.0.0.1", port)) {
            let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
            let mut line = String::new();
            let _ = BufReader::new(s).read_line(&mut line);
            return line.contains("vsFTPd") && child.try_wait().ok().flatten().is_none();
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

/// A port that was free a moment ago.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Waits (bounded) until something listens on the port.
pub fn wait_for_port(port: u16) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        if TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    panic!("nothing listens on port {port}");
}

/// Runs a command to completion (bounded) and returns its output; panics with its stderr on failure.
pub fn run_ok(cmd: &mut Command) -> std::process::Output {
    let out = run(cmd);
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}\nstdout: {}\nstderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// Runs a command with a time limit of 5 minutes, returning its output whatever the status.
pub fn run(cmd: &mut Command) -> std::process::Output {
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    let mut stdout = child.stdout.take().unwrap();
    let mut stderr = child.stderr.take().unwrap();
    let out_t = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = stdout.read_to_end(&mut v);
        v
    });
    let err_t = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = stderr.read_to_end(&mut v);
        v
    });
    let deadline = Instant::now() + Duration::from_secs(300);
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("{cmd:?} did not finish in 5 minutes");
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    std::process::Output {
        status,
        stdout: out_t.join().unwrap(),
        stderr: err_t.join().unwrap(),
    }
}

/// `fatpipe` with arguments, as a command.
pub fn fatpipe_cmd(args: &[&str]) -> Command {
    let mut c = Command::new(fatpipe());
    // What fatpipe keeps between runs (`-p auto`'s path memory) stays with this test process,
    // never in the home directory.
    c.env("XDG_CACHE_HOME", cache_home());
    // Nor a login from the user's own ~/.netrc.
    c.env("NETRC", "/dev/null");
    c.args(args);
    c
}

/// This test process's `XDG_CACHE_HOME` for the fatpipe commands it runs (under target/tmp).
pub fn cache_home() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("cache-{}", std::process::id()))
}

/// A minimal control-channel client for checking replies byte by byte.
pub struct Raw {
    reader: BufReader<TcpStream>,
    writer: TcpStream,
}

impl Raw {
    /// Connects and returns the greeting's code.
    pub fn connect(addr: SocketAddr) -> (Raw, u16) {
        let s = TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        let mut r = Raw {
            reader: BufReader::new(s.try_clone().unwrap()),
            writer: s,
        };
        let code = r.reply().0;
        (r, code)
    }

    /// Connects and logs in.
    pub fn login(addr: SocketAddr, user: &str, password: &str) -> Raw {
        let (mut r, code) = Raw::connect(addr);
        assert_eq!(code, 220);
        r.cmd(&format!("USER {user}"));
        assert_eq!(r.cmd(&format!("PASS {password}")).0, 230);
        r
    }

    /// Sends raw bytes.
    pub fn send(&mut self, bytes: &[u8]) {
        self.writer.write_all(bytes).unwrap();
    }

    /// Sends a line and reads the reply.
    pub fn cmd(&mut self, line: &str) -> (u16, String) {
        self.send(format!("{line}\r\n").as_bytes());
        self.reply()
    }

    /// Reads one (possibly multi-line) reply; code 0 means the connection closed.
    pub fn reply(&mut self) -> (u16, String) {
        let mut parser = fatpipe_proto::reply::ReplyParser::default();
        loop {
            let mut line = String::new();
            match self.reader.read_line(&mut line) {
                Ok(0) | Err(_) => return (0, String::new()),
                Ok(_) => {}
            }
            if let Some(r) = parser
                .push_line(line.trim_end_matches(['\r', '\n']))
                .unwrap()
            {
                return (r.code, r.lines.join("\n"));
            }
        }
    }

    /// Runs a download command (`RETR`, `LIST`, …) over a fresh passive connection: expects 150,
    /// reads everything, expects 226, returns the bytes.
    pub fn fetch(&mut self, command: &str) -> Vec<u8> {
        let mut d = self.data();
        assert_eq!(self.cmd(command).0, 150, "{command}");
        let mut bytes = Vec::new();
        d.read_to_end(&mut bytes).unwrap();
        assert_eq!(self.reply().0, 226, "{command}");
        bytes
    }

    /// Opens a passive data connection (EPSV).
    pub fn data(&mut self) -> TcpStream {
        let (code, text) = self.cmd("EPSV");
        assert_eq!(code, 229, "{text}");
        let port = fatpipe_proto::addr::parse_epsv_reply(&text).unwrap();
        let s = TcpStream::connect(("127.0.0.1", port)).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        s
    }
}

/// A `globus-gridftp-server` on loopback without GSI (`-aa -anonymous-user nobody`), serving the
/// whole file system as user nobody; `dir` is a world-writable directory for the test's files.
pub struct GlobusServer {
    pub port: u16,
    pub dir: tempfile::TempDir,
    pub proc: Proc,
}

impl GlobusServer {
    /// Starts the server on a free port and waits until it accepts connections.
    pub fn start() -> GlobusServer {
        require("globus-gridftp-server");
        let dir = tempfile::tempdir().unwrap();
        std::fs::set_permissions(
            dir.path(),
            std::os::unix::fs::PermissionsExt::from_mode(0o777),
        )
        .unwrap();
        let port = port_outside_ephemeral_range();
        let child = Command::new("globus-gridftp-server")
            .args(["-aa", "-anonymous-user", "nobody", "-p"])
            .arg(port.to_string())
            .args([
                "-control-interface",
                "127.0.0.1",
                "-data-interface",
                "127.0.0.1",
                "-d",
                "error",
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            // A group of its own: the processes it forks per session go with it (Drop).
            .process_group(0)
            .spawn()
            .expect("start globus-gridftp-server");
        let proc = Proc { child };
        wait_for_port(port);
        GlobusServer { port, dir, proc }
    }

    /// `ftp://127.0.0.1:PORT/<absolute path of rel in dir>`.
    pub fn url(&self, rel: &str) -> String {
        format!("ftp://127.0.0.1:{}{}", self.port, self.path(rel).display())
    }

    /// Where a file of the test lives.
    pub fn path(&self, rel: &str) -> PathBuf {
        self.dir.path().join(rel)
    }
}

impl Drop for GlobusServer {
    /// Ends the server's whole process group: a session's process outlived the daemon by
    /// minutes when only the daemon was killed.
    fn drop(&mut self) {
        if let Ok(group) = i32::try_from(self.proc.child.id()) {
            // SAFETY: kill has no memory-safety preconditions; the group is the one the
            // daemon leads (started with process_group(0)).
            unsafe { libc::kill(-group, libc::SIGKILL) };
        }
    }
}

/// An emulated path (`fatpipe testbed`, root) brought up for one test and taken down when
/// dropped, even if the test fails half-way.
pub struct Testbed(pub &'static str);

impl Testbed {
    /// Brings up testbed `name` with `settings` (`--rtt`, `--rate`, …).
    pub fn up(name: &'static str, settings: &[&str]) -> Testbed {
        let guard = Testbed(name);
        run_ok(fatpipe_cmd(&["testbed", "up", "--name", name]).args(settings));
        guard
    }

    /// `fatpipe testbed exec <side> -- fatpipe <args>`.
    pub fn fatpipe(&self, side: &str, args: &[&str]) -> Command {
        let mut c = fatpipe_cmd(&["testbed", "exec", side, "--name", self.0, "--", fatpipe()]);
        c.args(args);
        c
    }
}

impl Drop for Testbed {
    fn drop(&mut self) {
        let _ = run(&mut fatpipe_cmd(&["testbed", "down", "--name", self.0]));
    }
}

/// The sample records of the sending connections written by `end` in the `--stats` file
/// `stats` (only samples carry a role).
pub fn sender_samples(stats: &Path, end: &str) -> Vec<serde_json::Value> {
    std::fs::read_to_string(stats)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|r| r["end"] == end && r["role"] == "sender")
        .collect()
}

/// Sends SIGINT to `child`, as Ctrl-C at a terminal would.
pub fn interrupt(child: &std::process::Child) {
    let pid = nix::unistd::Pid::from_raw(child.id() as i32);
    let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGINT);
}

/// Starts `fatpipe cp` of `url` into `dst` slowly and interrupts it midway (SIGINT, as
/// Ctrl-C): a partial copy, with its record.
pub fn cut_download(url: &str, dst: &Path) {
    // One stream: its part file then holds a prefix, whose length is what it holds (`-p auto`
    // would give a receiver held by its --limit-rate company on loopback).
    let mut cp = fatpipe_cmd(&[
        "cp",
        "--max-streams",
        "1",
        "--limit-rate",
        "16mbit",
        "--no-verify",
        "--tls",
        "off",
        url,
    ])
    .arg(dst)
    .stderr(Stdio::null())
    .spawn()
    .unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    interrupt(&cp);
    let _ = cp.wait();
}

/// Rewrites `path` with `size` other bytes and a modification time two minutes on: the same
/// name and size, another file.
pub fn rewrite_later(path: &Path, size: u64, seed: u64) {
    random_file(path, size, seed);
    let later = std::time::SystemTime::now() + Duration::from_secs(120);
    std::fs::File::options()
        .write(true)
        .open(path)
        .unwrap()
        .set_modified(later)
        .unwrap();
}
