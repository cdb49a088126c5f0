//! HTTP third-party copies (WLCG HTTP-TPC) as FTS3 drives them through gfal2: pull and push
//! between two fatpipe servers with tokens and no fallback to streaming, both ways with XRootD's
//! XrdHttp/XrdTpc, and the refusals (scope, loopback, anonymous) and the watchdog on a silent
//! remote.

mod common;

use common::https::*;
use common::*;
use std::process::Command;

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
    // `fatpipe ls` reads XRootD's PROPFIND answer: the files, their sizes.
    let token = x.dir.path().join("ls-token");
    std::fs::write(&token, &rw).unwrap();
    let out = run_ok(fatpipe_cmd(&["ls"]).args([
        "--ca",
        pki.ca.to_str().unwrap(),
        "--bearer-token",
        token.to_str().unwrap(),
        &format!("{ux}/"),
    ]));
    let text = String::from_utf8_lossy(&out.stdout);
    let size = ((5 << 20) + 9).to_string();
    for name in ["x", "from-fatpipe-pull"] {
        assert!(
            text.lines().any(|l| l.starts_with('-')
                && l.contains(&size)
                && l.ends_with(&format!(" {name}"))),
            "{name}: {text}"
        );
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

/// A source that redirects (a dCache door sending GETs on to a pool) is followed, by a pull and
/// by `fatpipe cp`, without the credentials when the redirect leads to another host:port; a
/// redirect a third-party copy may not follow (to an address outside its networks) fails it.
#[test]
fn redirects_are_followed_within_what_a_copy_may_reach() {
    require("python3");
    let pki = Pki::new();
    let a = pki.server(&["--anonymous"]);
    let b = pki.server(&TPC);
    random_file(&a.path("x"), (9 << 20) + 3, 61);
    let door = redirector(&pki, &base(&a));
    let via = format!("https://localhost:{}", door.port);
    let rw = pki.token("storage.read:/ storage.modify:/", 600);
    let work = tempfile::tempdir().unwrap();
    for (p, name) in [("1", "one"), ("2", "two")] {
        let dst = work.path().join(name);
        let mut c = fatpipe_cmd(&["cp", "--quiet", "-p", p, "--ca", pki.ca.to_str().unwrap()]);
        run_ok(
            c.args([&format!("{via}/x"), dst.to_str().unwrap()])
                .env("BEARER_TOKEN", &rw),
        );
        assert_same(&a.path("x"), &dst);
    }
    // The pull: B follows the door to A.
    let copy = |source: &str, name: &str| {
        let headers = [
            format!("Source: {source}"),
            format!("TransferHeaderAuthorization: Bearer {rw}"),
        ];
        copy_request(&pki, &rw, &headers, &format!("{}/{name}", base(&b)))
    };
    let (code, body) = copy(&format!("{via}/x"), "y");
    let body = String::from_utf8_lossy(&body);
    assert!(
        code == 202 && body.ends_with("success: Created\n"),
        "{code} {body}"
    );
    assert_same(&a.path("x"), &b.path("y"));
    // A saw every GET without the token: it went to the door's host:port only.
    let log = std::fs::read_to_string(pki.log_of(&a)).unwrap();
    assert!(log.contains("method=GET path=/x status="), "{log}");
    assert!(!log.contains("who=token"), "{log}");
    // A door that sends B to [::1], outside B's networks (127.0.0.1/32): refused, nothing kept.
    let port = a.https.unwrap().port();
    let outside = redirector(&pki, &format!("https://[::1]:{port}"));
    let (code, body) = copy(&format!("https://localhost:{}/x", outside.port), "z");
    let body = String::from_utf8_lossy(&body);
    assert!(
        code == 202 && body.contains("failure: ") && body.contains("may not reach"),
        "{body}"
    );
    assert!(!b.path("z").exists());
}

/// A PUT sent on by a 307 (a dCache door sends an upload to a pool, a capability in the URL)
/// follows it, an upload and a push alike; a push may not follow it out of its networks.
#[test]
fn puts_follow_a_door_to_its_pool() {
    require("python3");
    let pki = Pki::new();
    let a = pki.server(&TPC);
    random_file(&a.path("x"), (6 << 20) + 5, 71);
    let work = tempfile::tempdir().unwrap();
    let stored = work.path().join("pool");
    std::fs::create_dir(&stored).unwrap();
    let pool = pool(&pki, &stored);
    let door = redirector(&pki, &format!("https://localhost:{}", pool.port));
    let via = format!("https://localhost:{}", door.port);
    let rw = pki.token("storage.read:/ storage.modify:/", 600);
    // An upload.
    let mut c = fatpipe_cmd(&["cp", "--quiet", "--retry-for", "0"]);
    c.args(["--ca", pki.ca.to_str().unwrap()]);
    run_ok(
        c.args([a.path("x").to_str().unwrap(), &format!("{via}/up")])
            .env("BEARER_TOKEN", &rw),
    );
    assert_same(&a.path("x"), &stored.join("up"));
    // A push from A.
    let push = |to: &str| {
        let headers = [format!("Destination: {to}")];
        copy_request(&pki, &rw, &headers, &format!("{}/x", base(&a)))
    };
    let (code, body) = push(&format!("{via}/pushed"));
    let body = String::from_utf8_lossy(&body);
    assert!(
        code == 202 && body.ends_with("success: Created\n"),
        "{code} {body}"
    );
    assert_same(&a.path("x"), &stored.join("pushed"));
    // A door that sends the push to [::1], outside A's networks: refused, nothing stored.
    let outside = redirector(&pki, &format!("https://[::1]:{}", pool.port));
    let (code, body) = push(&format!("https://localhost:{}/far", outside.port));
    let body = String::from_utf8_lossy(&body);
    assert!(
        code == 202 && body.contains("failure: ") && body.contains("may not reach"),
        "{body}"
    );
    assert!(!stored.join("far").exists());
}
