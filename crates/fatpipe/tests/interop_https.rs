//! The HTTPS/WebDAV front-end against the real clients sites use: curl (Basic and bearer
//! tokens, ranges, digests, WebDAV methods), the litmus WebDAV suite, davix, rclone, and gfal2
//! driving third-party copies (pull and push) between two fatpipe servers with tokens, its
//! fallback to streaming through the client turned off.

mod common;

use common::*;
use fatpipe_http::testing::TestIssuer;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{SystemTime, UNIX_EPOCH};

const ISSUER: &str = "https://issuer.test";
/// Third-party copies allowed, between servers on loopback (listed: loopback is never reached
/// otherwise).
const TPC: [&str; 3] = [
    "--allow-third-party",
    "--third-party-networks",
    "127.0.0.1/32",
];

/// Certificates and token keys for one test, in a directory of its own.
struct Pki {
    dir: tempfile::TempDir,
    ca: PathBuf,
    chain: PathBuf,
    key: PathBuf,
    issuer: TestIssuer,
    jwks: PathBuf,
}

impl Pki {
    fn new() -> Pki {
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

    fn cadir(&self) -> PathBuf {
        self.dir.path().join("cadir")
    }

    /// A token with `scope`, valid for ten minutes (or expired, with `valid_s` < 0).
    fn token(&self, scope: &str, valid_s: i64) -> String {
        self.issuer.token(scope, now(), valid_s)
    }

    /// `fatpipe serve` with FTP and HTTPS on loopback, alice:pw, tokens from the issuer.
    fn server(&self, extra: &[&str]) -> FatpipeServer {
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
    fn log_of(&self, s: &FatpipeServer) -> PathBuf {
        let port = s.https.unwrap().port();
        self.dir.path().join(format!("server-{port}.log"))
    }
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

fn base(s: &FatpipeServer) -> String {
    format!("https://localhost:{}", s.https.unwrap().port())
}

/// curl with the test CA, quiet, failing on nothing (the status is checked).
fn curl(pki: &Pki, args: &[&str]) -> (u16, Vec<u8>) {
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

fn adler32_hex(p: &Path) -> String {
    let mut a = adler2::Adler32::new();
    a.write_slice(&std::fs::read(p).unwrap());
    format!("{:08x}", a.checksum())
}

#[test]
fn curl_moves_files_and_walks_the_tree_with_basic_auth() {
    require("curl");
    let pki = Pki::new();
    let s = pki.server(&[]);
    let u = base(&s);
    let work = tempfile::tempdir().unwrap();
    let f = work.path().join("f");
    random_file(&f, (3 << 20) + 7, 1);
    let f_s = f.to_str().unwrap();
    let basic = ["-u", "alice:pw"];
    let with = |more: &[&str]| -> Vec<String> {
        basic.iter().chain(more).map(|s| s.to_string()).collect()
    };
    let c = |more: &[&str]| {
        let a = with(more);
        curl(&pki, &a.iter().map(String::as_str).collect::<Vec<_>>())
    };
    // Fixed-length and chunked uploads; a second PUT replaces (204).
    assert_eq!(c(&["-T", f_s, &format!("{u}/f")]).0, 201);
    assert_same(&f, &s.path("f"));
    assert_eq!(
        c(&[
            "-T",
            "-",
            "-H",
            "Transfer-Encoding: chunked",
            &format!("{u}/f")
        ])
        .0,
        204
    );
    assert_eq!(std::fs::metadata(s.path("f")).unwrap().len(), 0);
    assert_eq!(c(&["-T", f_s, &format!("{u}/f")]).0, 204);
    // Whole, one range, several ranges.
    let all = std::fs::read(&f).unwrap();
    let (code, got) = c(&[&format!("{u}/f")]);
    assert_eq!(code, 200);
    assert!(got == all, "the download differs");
    let (code, part) = c(&["-r", "100-199", &format!("{u}/f")]);
    assert_eq!((code, &part[..]), (206, &all[100..200]));
    let (code, multi) = c(&["-r", "0-9,1000-1009", &format!("{u}/f")]);
    assert_eq!(code, 206);
    let text = String::from_utf8_lossy(&multi);
    assert!(text.contains("Content-Range: bytes 1000-1009/"), "{text}");
    assert_eq!(c(&["-r", "99999999-", &format!("{u}/f")]).0, 416);
    // HEAD with Want-Digest: the adler32 gfal2 and FTS3 compare.
    let (code, head) = c(&["-I", "-H", "Want-Digest: adler32", &format!("{u}/f")]);
    assert_eq!(code, 200);
    let head = String::from_utf8_lossy(&head).to_ascii_lowercase();
    assert!(
        head.contains(&format!("digest: adler32={}", adler32_hex(&f))),
        "{head}"
    );
    // Collections: MKCOL, PROPFIND, MOVE, COPY, DELETE.
    assert_eq!(c(&["-X", "MKCOL", &format!("{u}/d")]).0, 201);
    assert_eq!(c(&["-X", "MKCOL", &format!("{u}/d")]).0, 405);
    assert_eq!(c(&["-X", "MKCOL", &format!("{u}/no/such")]).0, 409);
    let dest = |p: &str| format!("Destination: {u}{p}");
    assert_eq!(
        c(&["-X", "COPY", "-H", &dest("/d/g"), &format!("{u}/f")]).0,
        201
    );
    assert_eq!(
        c(&[
            "-X",
            "MOVE",
            "-H",
            &dest("/d/g"),
            "-H",
            "Overwrite: F",
            &format!("{u}/f")
        ])
        .0,
        412
    );
    assert_eq!(
        c(&["-X", "MOVE", "-H", &dest("/d/h"), &format!("{u}/f")]).0,
        201
    );
    assert_same(&s.path("d/g"), &s.path("d/h"));
    let (code, xml) = c(&["-X", "PROPFIND", "-H", "Depth: 1", &format!("{u}/d/")]);
    assert_eq!(code, 207);
    let xml = String::from_utf8_lossy(&xml);
    assert!(xml.contains("<D:href>/d/g</D:href>") && xml.contains("<D:href>/d/h</D:href>"));
    assert!(xml.contains(&format!(
        "<D:getcontentlength>{}</D:getcontentlength>",
        all.len()
    )));
    assert_eq!(
        c(&["-X", "PROPFIND", &format!("{u}/d/")]).0,
        403,
        "Depth infinity"
    );
    assert_eq!(c(&["-X", "DELETE", &format!("{u}/d")]).0, 204);
    assert!(!s.path("d").exists());
    assert_eq!(c(&["-X", "DELETE", &format!("{u}/d")]).0, 404);
    // A wrong password, no credentials: 401 with the schemes offered.
    let (code, _) = curl(&pki, &["-u", "alice:nope", &format!("{u}/")]);
    assert_eq!(code, 401);
    let (code, head) = curl(&pki, &["-I", &format!("{u}/")]);
    assert_eq!(code, 401);
    let head = String::from_utf8_lossy(&head);
    assert!(
        head.contains("Basic realm") && head.contains("Bearer realm"),
        "{head}"
    );
    // Names that try to climb out stay inside.
    let (code, _) = c(&["--path-as-is", &format!("{u}/../../../../etc/passwd")]);
    assert_eq!(code, 404);
}

#[test]
fn an_upload_cut_short_leaves_nothing_and_the_old_file_whole() {
    require("curl");
    let pki = Pki::new();
    let s = pki.server(&[]);
    let u = base(&s);
    random_file(&s.path("keep"), 1000, 3);
    let before = sha256(&s.path("keep"));
    // Announces more than it sends, then hangs up.
    let out = run(Command::new("curl")
        .args(["-sS", "--cacert"])
        .arg(&pki.ca)
        .args([
            "-u",
            "alice:pw",
            "-X",
            "PUT",
            "-H",
            "Content-Length: 100000",
        ])
        .args([
            "--data-binary",
            "short",
            "--max-time",
            "2",
            &format!("{u}/keep"),
        ]));
    assert!(!out.status.success());
    let names = || -> Vec<String> {
        std::fs::read_dir(s.root.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect()
    };
    // The server learns of the hang-up at once; give it a bounded moment.
    for _ in 0..100 {
        if names().len() == 1 {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert_eq!(names(), vec!["keep".to_string()], "no temporary file left");
    assert_eq!(sha256(&s.path("keep")), before);
}

#[test]
fn tokens_allow_what_their_scopes_say_and_refusals_say_why() {
    require("curl");
    let pki = Pki::new();
    let s = pki.server(&[]);
    let u = base(&s);
    std::fs::create_dir(s.path("data")).unwrap();
    random_file(&s.path("data/x"), 5000, 2);
    random_file(&s.path("secret"), 10, 2);
    let bearer = |t: &str| format!("Authorization: Bearer {t}");
    let put = |t: &str, path: &str| {
        let b = bearer(t);
        curl(
            &pki,
            &["-H", &b, "-T", "/etc/hostname", &format!("{u}{path}")],
        )
        .0
    };
    let read = pki.token("storage.read:/data", 600);
    assert_eq!(
        curl(&pki, &["-H", &bearer(&read), &format!("{u}/data/x")]).0,
        200
    );
    // Outside the token's path, and a write with a read-only token: 403.
    let (code, body) = curl(&pki, &["-H", &bearer(&read), &format!("{u}/secret")]);
    assert_eq!(code, 403, "{}", String::from_utf8_lossy(&body));
    assert_eq!(put(&read, "/data/y"), 403);
    assert!(!s.path("data/y").exists());
    let create = pki.token("storage.create:/data", 600);
    assert_eq!(put(&create, "/data/y"), 201);
    // Create does not overwrite; modify does.
    assert_eq!(put(&create, "/data/y"), 403);
    let modify = pki.token("storage.modify:/data", 600);
    assert_eq!(
        curl(
            &pki,
            &[
                "-H",
                &bearer(&modify),
                "-X",
                "DELETE",
                &format!("{u}/data/y")
            ]
        )
        .0,
        204
    );
    // Expired, from an unknown issuer, forged: 401, and WWW-Authenticate says why.
    let stranger = TestIssuer::new("https://stranger.test").unwrap();
    let forged = TestIssuer::new(ISSUER).unwrap();
    for (token, why) in [
        (pki.token("storage.read:/", -600), "token expired"),
        (
            stranger.token("storage.read:/", now(), 600),
            "unknown issuer",
        ),
        (forged.token("storage.read:/", now(), 600), "bad signature"),
    ] {
        let (code, head) = curl(&pki, &["-I", "-H", &bearer(&token), &format!("{u}/data/x")]);
        assert_eq!(code, 401);
        let head = String::from_utf8_lossy(&head);
        assert!(
            head.contains("invalid_token") && head.contains(why),
            "{why}: {head}"
        );
    }
}

#[test]
fn litmus_basic_and_copymove_pass() {
    require("litmus");
    let pki = Pki::new();
    let s = pki.server(&[]);
    std::fs::create_dir(s.path("litmus")).unwrap();
    let home = tempfile::tempdir().unwrap();
    // litmus writes its logs into the working directory.
    let out = run(Command::new("litmus")
        .current_dir(home.path())
        .env("TESTS", "basic copymove")
        .env("HOME", home.path())
        // neon (litmus's HTTP library) trusts the CA through OpenSSL's default locations.
        .env("SSL_CERT_FILE", &pki.ca)
        .args([&format!("{}/litmus/", base(&s)), "alice", "pw"]));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("summary for `basic': of 16 tests run: 16 passed")
            && text.contains("summary for `copymove': of 13 tests run: 13 passed"),
        "{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// gfal2 as FTS3 drives it: a bearer token per endpoint, checksums (ADLER32) compared at both
/// ends, and the copy mode forced with no fallback to streaming through the client.
const GFAL2_COPY: &str = r#"
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

fn gfal2(pki: &Pki, args: &[&str]) -> std::process::Output {
    run(Command::new("/usr/bin/python3")
        .env("X509_CERT_DIR", pki.cadir())
        .args(["-c", GFAL2_COPY])
        .args(args))
}

#[test]
fn gfal2_pulls_and_pushes_between_two_fatpipe_servers_with_tokens() {
    require("gfal-copy");
    let pki = Pki::new();
    let (a, b) = (pki.server(&TPC), pki.server(&TPC));
    let (ua, ub) = (
        format!("davs://localhost:{}", a.https.unwrap().port()),
        format!("davs://localhost:{}", b.https.unwrap().port()),
    );
    random_file(&a.path("x"), (24 << 20) + 5, 7);
    let rw = pki.token("storage.read:/ storage.modify:/", 600);
    for mode in ["pull", "push"] {
        let dst = format!("{ub}/{mode}");
        let out = gfal2(&pki, &[&format!("{ua}/x"), &dst, &ua, &ub, &rw, &rw, mode]);
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            text.starts_with("copied "),
            "{mode}: {text}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_same(&a.path("x"), &b.path(mode));
    }
    // Third-party indeed: each server logged its side of the copy.
    let log = |s: &FatpipeServer| std::fs::read_to_string(pki.log_of(s)).unwrap();
    assert!(log(&b).contains("third-party pull"), "{}", log(&b));
    assert!(log(&a).contains("third-party push"), "{}", log(&a));
    // Up and down through the client (gfal-copy's streamed mode) with the same tokens.
    let work = tempfile::tempdir().unwrap();
    let local = format!("file://{}", work.path().join("down").display());
    let out = gfal2(
        &pki,
        &[&format!("{ub}/pull"), &local, &ub, &ub, &rw, &rw, "stream"],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_same(&a.path("x"), &work.path().join("down"));
}

#[test]
fn third_party_copies_are_refused_without_scope_or_towards_loopback() {
    require("gfal-copy");
    let pki = Pki::new();
    let a = pki.server(&TPC);
    let b = pki.server(&TPC);
    let closed = pki.server(&["--allow-third-party"]);
    random_file(&a.path("x"), 1000, 7);
    let (ua, ub) = (base(&a), base(&b));
    let bearer = |t: &str| format!("Authorization: Bearer {t}");
    let read = pki.token("storage.read:/", 600);
    let rw = pki.token("storage.read:/ storage.modify:/", 600);
    let pull = |server: &str, token: &str, source: &str| {
        curl(
            &pki,
            &[
                "-X",
                "COPY",
                "-H",
                &bearer(token),
                "-H",
                &format!("Source: {source}"),
                "-H",
                &format!("TransferHeaderAuthorization: Bearer {rw}"),
                &format!("{server}/y"),
            ],
        )
    };
    // A read-only token may not make the destination file.
    assert_eq!(pull(&ub, &read, &format!("{ua}/x")).0, 403);
    assert!(!b.path("y").exists());
    // A server not told to reach loopback refuses a source there.
    let (code, body) = pull(&base(&closed), &rw, &format!("{ua}/x"));
    assert_eq!(code, 403, "{}", String::from_utf8_lossy(&body));
    assert!(String::from_utf8_lossy(&body).contains("may not reach"));
    // A token with only storage.read may start a push from the source.
    let (code, body) = curl(
        &pki,
        &[
            "-X",
            "COPY",
            "-H",
            &bearer(&read),
            "-H",
            &format!("Destination: {ub}/pushed"),
            "-H",
            &format!("TransferHeaderAuthorization: Bearer {rw}"),
            &format!("{ua}/x"),
        ],
    );
    let body = String::from_utf8_lossy(&body);
    assert_eq!(code, 202);
    assert!(
        body.starts_with("Perf Marker") && body.ends_with("success: Created\n"),
        "{body}"
    );
    assert_same(&a.path("x"), &b.path("pushed"));
    // Nobody in particular may not make a server fetch or send: anonymous requests are refused
    // third-party copies even where anonymous writes are allowed.
    let anon = pki.server(&["--anonymous-write", TPC[0], TPC[1], TPC[2]]);
    let (code, body) = curl(
        &pki,
        &[
            "-X",
            "COPY",
            "-H",
            &format!("Source: {ua}/x"),
            &format!("{}/y", base(&anon)),
        ],
    );
    assert_eq!(code, 403, "{}", String::from_utf8_lossy(&body));
    assert!(!anon.path("y").exists());
    // A source that fails is reported in the body, and nothing is left at the destination.
    let (code, body) = pull(&ub, &rw, &format!("{ua}/missing"));
    assert_eq!(code, 202);
    let body = String::from_utf8_lossy(&body);
    assert!(body.contains("failure: ") && body.contains("404"), "{body}");
    assert!(!b.path("y").exists());
}

#[test]
fn davix_and_rclone_move_files_and_trees() {
    require("davix-put");
    require("rclone");
    let pki = Pki::new();
    let s = pki.server(&[]);
    let u = base(&s);
    let work = tempfile::tempdir().unwrap();
    // davix with a bearer token.
    let token = format!(
        "Authorization: Bearer {}",
        pki.token("storage.read:/ storage.modify:/", 600)
    );
    let davix = |tool: &str, args: &[&str]| {
        run_ok(
            Command::new(tool)
                .arg("--capath")
                .arg(pki.cadir())
                .args(["-H", &token])
                .args(args),
        )
    };
    let f = work.path().join("f");
    random_file(&f, (5 << 20) + 3, 11);
    davix("davix-put", &[f.to_str().unwrap(), &format!("{u}/f")]);
    assert_same(&f, &s.path("f"));
    let back = work.path().join("back");
    davix("davix-get", &[&format!("{u}/f"), back.to_str().unwrap()]);
    assert_same(&f, &back);
    let listed = davix("davix-ls", &["-l", &format!("{u}/")]);
    let listed = String::from_utf8_lossy(&listed.stdout);
    assert!(
        listed.contains(&format!("{}", (5 << 20) + 3)) && listed.contains(" f"),
        "{listed}"
    );
    // rclone's WebDAV remote with Basic: a tree up, then down again.
    let up = work.path().join("up");
    std::fs::create_dir_all(up.join("a/b")).unwrap();
    random_file(&up.join("a/one"), 1 << 20, 12);
    random_file(&up.join("a/b/two"), 3, 13);
    random_file(&up.join("three"), 0, 14);
    let pass = run_ok(Command::new("rclone").args(["obscure", "pw"]));
    let pass = String::from_utf8_lossy(&pass.stdout).trim().to_string();
    let rclone = |args: &[&str]| {
        run_ok(
            Command::new("rclone")
                .env("RCLONE_CONFIG", "/dev/null")
                .env("RCLONE_CONFIG_FP_TYPE", "webdav")
                .env("RCLONE_CONFIG_FP_URL", format!("{u}/"))
                .env("RCLONE_CONFIG_FP_VENDOR", "other")
                .env("RCLONE_CONFIG_FP_USER", "alice")
                .env("RCLONE_CONFIG_FP_PASS", &pass)
                .arg("--ca-cert")
                .arg(&pki.ca)
                .args(args),
        )
    };
    rclone(&["copy", up.to_str().unwrap(), "fp:tree"]);
    for f in ["a/one", "a/b/two", "three"] {
        assert_same(&up.join(f), &s.path(&format!("tree/{f}")));
    }
    let down = work.path().join("down");
    rclone(&["copy", "fp:tree", down.to_str().unwrap()]);
    for f in ["a/one", "a/b/two", "three"] {
        assert_same(&up.join(f), &down.join(f));
    }
}

#[test]
fn fatpipe_cp_moves_files_over_https_and_between_servers() {
    let pki = Pki::new();
    let (a, b) = (pki.server(&TPC), pki.server(&TPC));
    random_file(&a.path("x"), (17 << 20) + 1, 21);
    let work = tempfile::tempdir().unwrap();
    let token = work.path().join("token");
    std::fs::write(&token, pki.token("storage.read:/ storage.modify:/", 600)).unwrap();
    let ca = pki.ca.to_str().unwrap();
    let cp = |args: &[&str]| {
        let mut c = fatpipe_cmd(&["cp", "--quiet", "--ca", ca]);
        c.args(args);
        c
    };
    // Down with a token file; into a directory, the URL's name.
    let (ua, ub) = (base(&a), base(&b));
    let t = token.to_str().unwrap();
    run_ok(&mut cp(&[
        "--bearer-token",
        t,
        &format!("{ua}/x"),
        work.path().to_str().unwrap(),
    ]));
    assert_same(&a.path("x"), &work.path().join("x"));
    // Up with Basic: the user in the URL, the password from the environment.
    let up = format!("https://alice@localhost:{}/up", a.https.unwrap().port());
    run_ok(cp(&[work.path().join("x").to_str().unwrap(), &up]).env("FATPIPE_PASSWORD", "pw"));
    assert_same(&a.path("x"), &a.path("up"));
    // Server to server, the token from BEARER_TOKEN, two connections asked.
    let davs =
        |s: &FatpipeServer, p: &str| format!("davs://localhost:{}/{p}", s.https.unwrap().port());
    let rw = std::fs::read_to_string(&token).unwrap();
    run_ok(cp(&["-p", "2", &davs(&a, "x"), &davs(&b, "y")]).env("BEARER_TOKEN", &rw));
    assert_same(&a.path("x"), &b.path("y"));
    let log = std::fs::read_to_string(pki.log_of(&b)).unwrap();
    assert!(log.contains("third-party pull"), "{log}");
    assert!(log.contains("in 2 parts at once"), "{log}");
    // A refused token: a failure that says why, nothing written.
    let out = run(
        cp(&[&format!("{ub}/y"), work.path().join("z").to_str().unwrap()])
            .env("BEARER_TOKEN", pki.token("storage.read:/", -600)),
    );
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("401") && err.contains("expired"), "{err}");
    assert!(!work.path().join("z").exists());
    let _ = ua;
}

/// XRootD's HTTPS server with its third-party-copy handler (XrdHttp, XrdTpc), anonymous, as
/// user nobody (xrootd refuses to run as root), on a tree of its own.
struct Xrootd {
    port: u16,
    dir: tempfile::TempDir,
    _proc: Proc,
}

impl Xrootd {
    fn start(pki: &Pki) -> Xrootd {
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

    fn path(&self, rel: &str) -> PathBuf {
        self.dir.path().join("data").join(rel)
    }
}

#[test]
fn third_party_copies_both_ways_with_xrootd() {
    require("xrootd");
    let pki = Pki::new();
    let f = pki.server(&TPC);
    let x = Xrootd::start(&pki);
    random_file(&f.path("x"), (5 << 20) + 9, 31);
    std::fs::copy(f.path("x"), x.path("x")).unwrap();
    run_ok(Command::new("chown").arg("nobody").arg(x.path("x")));
    let uf = format!("davs://localhost:{}", f.https.unwrap().port());
    let ux = format!("davs://localhost:{}", x.port);
    let rw = pki.token("storage.read:/ storage.modify:/", 600);
    // fatpipe pushing into XRootD is left out: once in seven runs under the suite's load the
    // PUT got no answer from XRootD 5.5.3 for a minute (not reproduced in 13 more runs; see
    // docs/http-tpc.md). Pushes are covered between fatpipe servers and from XRootD here.
    for (src, dst, mode, name) in [
        (&uf, &ux, "pull", "from-fatpipe-pull"),
        (&ux, &uf, "pull", "from-xrootd-pull"),
        (&ux, &uf, "push", "from-xrootd-push"),
    ] {
        let out = gfal2(
            &pki,
            &[
                &format!("{src}/x"),
                &format!("{dst}/{name}"),
                src,
                dst,
                &rw,
                &rw,
                mode,
            ],
        );
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            text.starts_with("copied "),
            "{name}: {text}\n{}\n{}",
            String::from_utf8_lossy(&out.stderr),
            std::fs::read_to_string(x.dir.path().join("xrootd.log")).unwrap_or_default()
        );
        let landed = if dst == &ux {
            x.path(name)
        } else {
            f.path(name)
        };
        assert_same(&f.path("x"), &landed);
    }
    // Each copy went between the servers: fatpipe ran its pull, and served XRootD's GET and
    // PUT with the token gfal2 handed XRootD to forward.
    let log = std::fs::read_to_string(pki.log_of(&f)).unwrap();
    for line in [
        "third-party pull dest=/from-xrootd-pull",
        "who=token:tester method=GET path=/x status=200",
        "who=token:tester method=PUT path=/from-xrootd-push status=201",
    ] {
        assert!(log.contains(line), "{line}: {log}");
    }
}

/// A remote that takes the connection and then never answers (`openssl s_server`: TLS, no
/// HTTP) fails the copy after `--data-timeout` without progress, instead of holding it open.
#[test]
fn a_silent_remote_fails_the_copy_after_the_data_timeout() {
    require("openssl");
    let pki = Pki::new();
    let a = pki.server(&[TPC[0], TPC[1], TPC[2], "--data-timeout", "2s"]);
    random_file(&a.path("x"), 1 << 20, 51);
    let port = free_port();
    let silent = Command::new("openssl")
        .args([
            "s_server",
            "-quiet",
            "-accept",
            &format!("127.0.0.1:{port}"),
        ])
        .arg("-cert")
        .arg(&pki.chain)
        .arg("-key")
        .arg(&pki.key)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let _silent = Proc { child: silent };
    wait_for_port(port);
    let token = format!("Authorization: Bearer {}", pki.token("storage.read:/", 600));
    let dest = format!("Destination: https://localhost:{port}/y");
    let (code, body) = curl(
        &pki,
        &[
            "-X",
            "COPY",
            "-H",
            &token,
            "-H",
            &dest,
            &format!("{}/x", base(&a)),
        ],
    );
    let body = String::from_utf8_lossy(&body);
    assert_eq!(code, 202);
    assert!(
        body.contains("failure: the remote moved nothing for 2 s"),
        "{body}"
    );
}
