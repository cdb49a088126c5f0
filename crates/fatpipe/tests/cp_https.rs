//! `fatpipe cp` and `ls`/`mkdir`/`mv`/`rm` with https:// and davs:// URLs against fatpipe's
//! HTTPS front-end: files and trees down, up and between servers, partial files resumed, a
//! copy between servers streamed through the client only when asked. The front-end against
//! other clients: interop_https.rs; third-party copies between servers: https_third_party.rs.

mod common;

use common::https::*;
use common::*;
use std::process::Command;

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
    // Down over three connections asked: ranged GETs, two parts of at least 8 MiB.
    let three = work.path().join("x3");
    let out = run_ok(&mut cp(&[
        "-v",
        "-p",
        "3",
        "--bearer-token",
        t,
        &format!("{ua}/x"),
        three.to_str().unwrap(),
    ]));
    assert_same(&a.path("x"), &three);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("in 2 parts at once"), "{err}");
    // Into a pipe (as into /dev/null): written straight in, the pipe left a pipe.
    let fifo = work.path().join("fifo");
    run_ok(std::process::Command::new("mkfifo").arg(&fifo));
    let reader = {
        let fifo = fifo.clone();
        std::thread::spawn(move || std::fs::read(fifo).unwrap())
    };
    run_ok(&mut cp(&[
        "--bearer-token",
        t,
        &format!("{ua}/x"),
        fifo.to_str().unwrap(),
    ]));
    // (Asked first: had the pipe been replaced, its reader would wait for ever.)
    use std::os::unix::fs::FileTypeExt;
    assert!(std::fs::metadata(&fifo).unwrap().file_type().is_fifo());
    let through = reader.join().unwrap();
    assert!(
        through == std::fs::read(a.path("x")).unwrap(),
        "other bytes through the pipe"
    );
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

#[test]
fn ls_mkdir_mv_and_rm_work_on_https_urls() {
    let pki = Pki::new();
    let s = pki.server(&TPC);
    let work = tempfile::tempdir().unwrap();
    let token = work.path().join("token");
    std::fs::write(&token, pki.token("storage.read:/ storage.modify:/", 600)).unwrap();
    let (ca, t) = (pki.ca.to_str().unwrap(), token.to_str().unwrap());
    let cmd = |args: &[&str]| {
        let mut c = fatpipe_cmd(args);
        c.args(["--ca", ca, "--bearer-token", t]);
        c
    };
    let u = |p: &str| format!("{}/{p}", base(&s));
    run_ok(&mut cmd(&["mkdir", "-p", &u("a/b/c")]));
    assert!(s.path("a/b/c").is_dir());
    // Made again without -p: the server says it exists.
    assert!(!run(&mut cmd(&["mkdir", &u("a/b/c")])).status.success());
    random_file(&s.path("a/b/c/f"), 12345, 3);
    let out = run_ok(&mut cmd(&["ls", &u("a/b/c/")]));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.lines()
            .any(|l| l.starts_with('-') && l.contains(" 12345 ") && l.ends_with(" f")),
        "{text}"
    );
    let out = run_ok(&mut cmd(&["ls", &u("a/b")]));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.lines()
            .any(|l| l.starts_with('d') && l.ends_with(" c")),
        "{text}"
    );
    // -R: each collection below under its heading, depth first, as over FTP.
    random_file(&s.path("a/top"), 7, 4);
    std::fs::create_dir(s.path("a/x")).unwrap();
    let out = run_ok(&mut cmd(&["ls", "-R", &u("a")]));
    let headings: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| l.ends_with(':'))
        .map(str::to_string)
        .collect();
    assert_eq!(headings, ["/a/b:", "/a/b/c:", "/a/x:"], "{out:?}");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.lines().any(|l| l.contains(" 12345 ")), "{text}");
    // A glob in the last component: its matches, for ls and rm.
    let out = run_ok(&mut cmd(&["ls", &u("a/t*")]));
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(text.lines().count(), 1, "{text}");
    assert!(text.trim_end().ends_with(" top"), "{text}");
    let none = run(&mut cmd(&["ls", &u("a/zz*")]));
    assert_eq!(none.status.code(), Some(5), "nothing matches: not found");
    run_ok(&mut cmd(&["rm", &u("a/t[o]p")]));
    assert!(!s.path("a/top").exists() && s.path("a/x").is_dir());
    run_ok(&mut cmd(&["mv", &u("a/b/c/f"), "g"]));
    assert!(!s.path("a/b/c/f").exists() && s.path("a/b/c/g").is_file());
    // A directory is not removed without -r; with it, the whole tree goes.
    let out = run(&mut cmd(&["rm", &u("a")]));
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("-r"));
    assert!(s.path("a/b/c/g").is_file());
    run_ok(&mut cmd(&["rm", "-r", &u("a")]));
    assert!(!s.path("a").exists());
}

/// Every file below `root` (relative path, SHA-256) and every directory, sorted.
fn tree_of(root: &std::path::Path) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut todo = vec![root.to_path_buf()];
    while let Some(dir) = todo.pop() {
        for e in std::fs::read_dir(&dir).unwrap() {
            let p = e.unwrap().path();
            let rel = p.strip_prefix(root).unwrap().to_string_lossy().into_owned();
            if p.is_dir() {
                out.push((rel, "dir".into()));
                todo.push(p);
            } else {
                out.push((rel, sha256(&p)));
            }
        }
    }
    out.sort();
    out
}

#[test]
fn cp_r_moves_trees_down_and_up_over_https() {
    let pki = Pki::new();
    let s = pki.server(&TPC);
    for (f, size) in [
        ("d/a", 3 << 20),
        ("d/sub/b c#1", 1000),
        ("d/sub/deeper/e", 0),
    ] {
        std::fs::create_dir_all(s.path(f).parent().unwrap()).unwrap();
        random_file(&s.path(f), size, size + 7);
    }
    std::fs::create_dir_all(s.path("d/empty")).unwrap();
    let work = tempfile::tempdir().unwrap();
    let token = work.path().join("token");
    std::fs::write(&token, pki.token("storage.read:/ storage.modify:/", 600)).unwrap();
    let cp = |args: &[&str]| {
        let mut c = fatpipe_cmd(&["cp", "-r", "--ca", pki.ca.to_str().unwrap()]);
        c.args(["--bearer-token", token.to_str().unwrap()])
            .args(args);
        c
    };
    let down = work.path().join("down");
    let out = run_ok(&mut cp(&[
        &format!("{}/d", base(&s)),
        down.to_str().unwrap(),
    ]));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("3 files copied"),
        "{out:?}"
    );
    assert_eq!(tree_of(&down), tree_of(&s.path("d")));
    // The same in --json, a file each (the FTP copy's summary).
    let again = work.path().join("again");
    let out = run_ok(&mut cp(&[
        "--json",
        &format!("{}/d", base(&s)),
        again.to_str().unwrap(),
    ]));
    let v = json_of(&out);
    assert_eq!(
        (v["ok"].as_bool(), v["files_ok"].as_u64()),
        (Some(true), Some(3)),
        "{v}"
    );
    let total: u64 = v["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["bytes"].as_u64().unwrap())
        .sum();
    assert_eq!(v["bytes"].as_u64(), Some(total));
    // Into an existing collection's URL with a slash: under the source's name.
    std::fs::create_dir(s.path("up")).unwrap();
    run_ok(&mut cp(&[
        down.to_str().unwrap(),
        &format!("{}/up/", base(&s)),
    ]));
    assert_eq!(tree_of(&s.path("up/down")), tree_of(&down));
    // One file at a time (the default is four side by side): the same tree.
    let one = work.path().join("one");
    let src = format!("{}/up/down", base(&s));
    run_ok(&mut cp(&[
        "--concurrency",
        "1",
        &src,
        one.to_str().unwrap(),
    ]));
    assert_eq!(tree_of(&one), tree_of(&down));
    // A glob's matches into a directory: the file, and with -r the collections as trees.
    let globbed = work.path().join("globbed");
    std::fs::create_dir(&globbed).unwrap();
    let out = run_ok(&mut cp(&[
        "--json",
        &format!("{}/d/*", base(&s)),
        globbed.to_str().unwrap(),
    ]));
    assert_eq!(json_of(&out)["files_ok"].as_u64(), Some(3));
    assert_eq!(tree_of(&globbed), tree_of(&s.path("d")));
    // From one server to another: collections made there, each file pulled by it (its log
    // shows the pulls); into a URL with a slash, under the source's name.
    let b = pki.server(&TPC);
    std::fs::create_dir(b.path("into")).unwrap();
    let to = format!("davs://localhost:{}/into/", b.https.unwrap().port());
    let out = run_ok(&mut cp(&["--json", &format!("{}/d", base(&s)), &to]));
    assert_eq!(json_of(&out)["files_ok"].as_u64(), Some(3));
    assert_eq!(tree_of(&b.path("into/d")), tree_of(&s.path("d")));
    assert!(b.path("into/d/empty").is_dir(), "empty collections too");
    let log = std::fs::read_to_string(pki.log_of(&b)).unwrap();
    assert_eq!(log.matches("third-party pull").count(), 3, "{log}");
}

/// `fatpipe cp --json`'s object.
fn json_of(out: &std::process::Output) -> serde_json::Value {
    serde_json::from_slice(&out.stdout).unwrap()
}

/// The bytes `fatpipe cp --json` says it moved, and those it resumed from.
fn moved_bytes(out: &std::process::Output) -> (u64, u64) {
    let v = json_of(out);
    let f = &v["files"][0];
    (
        f["bytes"].as_u64().unwrap(),
        f["resumed_from"].as_u64().unwrap(),
    )
}

#[test]
fn a_cut_https_download_keeps_what_arrived_and_resumes_from_there() {
    let pki = Pki::new();
    let s = pki.server(&[]);
    let size = 20u64 << 20;
    random_file(&s.path("f"), size, 31);
    let work = tempfile::tempdir().unwrap();
    let dst = work.path().join("f");
    let part = work.path().join("f.fatpipe-part");
    let ca = pki.ca.to_str().unwrap();
    let token = pki.token("storage.read:/", 600);
    let cp = |args: &[&str]| {
        let mut c = fatpipe_cmd(&["cp", "--json", "--ca", ca]);
        c.args(args).env("BEARER_TOKEN", &token);
        c
    };
    let real = format!("{}/f", base(&s));
    let dst_s = dst.to_str().unwrap();
    // A link that breaks after 3 MiB of each body, one connection and then two (the first
    // part to break ends the others where they are: what they had is kept too).
    for streams in ["1", "2"] {
        let cutting = cutter(&pki, &s.path("f"), 3 << 20, u32::MAX);
        let cut = format!("https://localhost:{}/f", cutting.port);
        let out = run(&mut cp(&["--retry-for", "0", "-p", streams, &cut, dst_s]));
        // A lost connection (exit 11), the bytes kept said in the file's error.
        assert_eq!(out.status.code(), Some(11));
        let v = json_of(&out);
        assert_eq!(v["failure"], "lost", "{v}");
        let error = v["files"][0]["error"].as_str().unwrap();
        assert!(error.contains("run again with --resume"), "{error}");
        let kept = v["files"][0]["bytes"].as_u64().unwrap();
        assert!(kept >= 3 << 20, "{v}");
        assert!(!dst.exists(), "nothing under the destination's name");
        assert!(part.exists(), "what arrived is kept");
        // Resumed from the real server: only what is missing moves.
        let out = run_ok(&mut cp(&["--resume", "-p", streams, &real, dst_s]));
        assert_eq!(moved_bytes(&out), (size - kept, kept), "-p {streams}");
        assert_same(&s.path("f"), &dst);
        assert!(!part.exists());
        std::fs::remove_file(&dst).unwrap();
    }
    // The server's file changed since the partial copy was begun: copied again in full.
    let cutting = cutter(&pki, &s.path("f"), 3 << 20, u32::MAX);
    let cut = format!("https://localhost:{}/f", cutting.port);
    let once = |c: &mut Command| {
        !run(c.args(["--retry-for", "0", &cut, dst_s]))
            .status
            .success()
    };
    assert!(once(&mut cp(&[])));
    random_file(&s.path("f"), size, 32);
    let later = std::time::SystemTime::now() + std::time::Duration::from_secs(60);
    std::fs::File::options()
        .write(true)
        .open(s.path("f"))
        .unwrap()
        .set_modified(later)
        .unwrap();
    let out = run_ok(&mut cp(&["--resume", &real, dst_s]));
    assert_eq!(moved_bytes(&out), (size, 0));
    assert_same(&s.path("f"), &dst);
    // Without --resume a partial copy is not taken: all of it again, nothing left over.
    std::fs::remove_file(&dst).unwrap();
    assert!(once(&mut cp(&[])));
    let out = run_ok(&mut cp(&[&real, dst_s]));
    assert_eq!(moved_bytes(&out), (size, 0));
    assert_same(&s.path("f"), &dst);
    assert!(!part.exists());
    // A file the server does not have: its kind and exit code, as over FTP (5: not found).
    let out = run(&mut cp(&[&format!("{}/nope", base(&s)), dst_s]));
    assert_eq!(out.status.code(), Some(5));
    assert_eq!(json_of(&out)["failure"], "not_found");
    // A server whose ranged bodies run past their range (zeros): refused, and nothing past a
    // range is kept, so a resume from the real server ends with the source's bytes.
    std::fs::remove_file(&dst).unwrap();
    let hostile = overrunner(&pki, &s.path("f"), 64 << 10);
    let over = format!("https://localhost:{}/f", hostile.port);
    let out = run(&mut cp(&["--retry-for", "0", "-p", "2", &over, dst_s]));
    assert!(!out.status.success());
    run_ok(&mut cp(&["--resume", &real, dst_s]));
    assert_same(&s.path("f"), &dst);
    // With --retry-for (5 minutes by default) a broken link is ridden through: after a pause
    // the download goes on from what arrived, and the result counts both attempts.
    std::fs::remove_file(&dst).unwrap();
    let flaky = cutter(&pki, &s.path("f"), 3 << 20, 1);
    let out = run_ok(&mut cp(&[
        &format!("https://localhost:{}/f", flaky.port),
        dst_s,
    ]));
    assert_eq!(moved_bytes(&out), (size, 0));
    assert_same(&s.path("f"), &dst);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("trying again in 1s"), "{err}");
}

#[test]
fn a_copy_between_servers_goes_through_here_only_when_asked() {
    let pki = Pki::new();
    // The destination makes no third-party copies: it refuses the COPY.
    let (a, b) = (pki.server(&TPC), pki.server(&[]));
    random_file(&a.path("x"), (5 << 20) + 3, 41);
    let token = pki.token("storage.read:/ storage.modify:/", 600);
    let davs = |p: u16, f: &str| format!("davs://localhost:{p}/{f}");
    let (pa, pb) = (a.https.unwrap().port(), b.https.unwrap().port());
    let cp = |args: &[&str]| {
        let mut c = fatpipe_cmd(&["cp", "--retry-for", "0", "--ca", pki.ca.to_str().unwrap()]);
        c.args(args).env("BEARER_TOKEN", &token);
        c
    };
    let out = run(&mut cp(&[&davs(pa, "x"), &davs(pb, "y")]));
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("403") && err.contains("third-party"), "{err}");
    assert!(!b.path("y").exists());
    // Asked for: the file streams through here, the same bytes arrive.
    let out = run_ok(&mut cp(&[
        "--streamed-fallback",
        &davs(pa, "x"),
        &davs(pb, "y"),
    ]));
    assert_same(&a.path("x"), &b.path("y"));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("streaming"), "{err}");
    // A source whose body breaks: the destination keeps nothing of it.
    let cutting = cutter(&pki, &a.path("x"), 3 << 20, u32::MAX);
    let cut = format!("https://localhost:{}/x", cutting.port);
    let out = run(&mut cp(&["--streamed-fallback", &cut, &davs(pb, "z")]));
    assert!(!out.status.success());
    // The server drops the partial upload once it reads the broken body, which may come a
    // moment after this client has exited.
    let names = || -> Vec<_> {
        std::fs::read_dir(b.root.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect()
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while names() != ["y"] && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert_eq!(names(), ["y"], "left at the destination: {:?}", names());
}
