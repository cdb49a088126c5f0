//! The HTTPS/WebDAV front-end against the clients sites use: curl (Basic and bearer tokens,
//! ranges, digests, WebDAV methods), the litmus WebDAV suite, davix and rclone. fatpipe's own
//! client: cp_https.rs; third-party copies: https_third_party.rs.

mod common;

use common::https::*;
use common::*;
use fatpipe_http::testing::TestIssuer;
use std::process::Command;

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
fn a_large_collection_is_listed_whole_in_pieces() {
    // 3,000 members with long names: about 2 MB of XML, written as the listing is read.
    let pki = Pki::new();
    let s = pki.server(&[]);
    std::fs::create_dir(s.path("big")).unwrap();
    for i in 0..3000 {
        std::fs::write(
            s.path(&format!("big/member-{i:05}-{}", "x".repeat(100))),
            b"1",
        )
        .unwrap();
    }
    let (code, xml) = curl(
        &pki,
        &[
            "-u",
            "alice:pw",
            "-X",
            "PROPFIND",
            "-H",
            "Depth: 1",
            &format!("{}/big/", base(&s)),
        ],
    );
    assert_eq!(code, 207);
    let xml = String::from_utf8_lossy(&xml);
    assert!(xml.len() > 1 << 20, "{} bytes", xml.len());
    assert!(xml.starts_with("<?xml") && xml.ends_with("</D:multistatus>\n"));
    assert_eq!(xml.matches("<D:response>").count(), 3001);
    for i in [0, 1234, 2999] {
        let href = format!("<D:href>/big/member-{i:05}-{}</D:href>", "x".repeat(100));
        assert_eq!(xml.matches(&href).count(), 1, "{href}");
    }
}
