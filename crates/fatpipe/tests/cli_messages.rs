//! What a user reads: a copy's summary is one line (what moved, how fast, how many streams,
//! verified, where a resumed file resumed) unless `-v` asks for the tuning's story (`-vv` the
//! protocol); `fatpipe ls` on a file lists that file; a refused login says what to change.

mod common;

use common::*;

#[test]
fn the_summary_is_one_line_unless_asked_for_more() {
    let s = FatpipeServer::start(&["--anonymous"]);
    random_file(&s.path("f.bin"), 3 << 20, 9);
    let work = tempfile::tempdir().unwrap();
    let dst = work.path().join("f.bin");
    let out = run_ok(
        fatpipe_cmd(&["cp", "-p", "2"]).args([s.url("f.bin").as_str(), dst.to_str().unwrap()]),
    );
    assert_same(&s.path("f.bin"), &dst);
    let err = String::from_utf8_lossy(&out.stderr);
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 1, "{err}");
    assert!(
        lines[0].starts_with("fatpipe: 1 file copied, 3 MiB in "),
        "{err}"
    );
    assert!(
        lines[0].contains("up to 2 streams") && lines[0].contains("1 of 1 verified"),
        "{err}"
    );
    // -v adds how the tuning and the streams went.
    std::fs::remove_file(&dst).unwrap();
    let out = run_ok(
        fatpipe_cmd(&["cp", "-v", "-p", "2"])
            .args([s.url("f.bin").as_str(), dst.to_str().unwrap()]),
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("fatpipe: tuning drs: peak socket buffer here"),
        "{err}"
    );
    assert!(
        err.contains("fatpipe: streams: up to 2 data connection(s) per file"),
        "{err}"
    );
    // The story, not the protocol: the command's own lines, no timestamps, no replies.
    assert!(err.lines().all(|l| l.starts_with("fatpipe: ")), "{err}");
    assert!(!err.contains("RETR"), "{err}");
    // -vv adds the protocol.
    std::fs::remove_file(&dst).unwrap();
    let out = run_ok(
        fatpipe_cmd(&["cp", "-vv", "-p", "2"])
            .args([s.url("f.bin").as_str(), dst.to_str().unwrap()]),
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("RETR /f.bin -> 150"), "{err}");
}

#[test]
fn a_resumed_copy_says_where_it_resumed() {
    let s = FatpipeServer::start(&["--anonymous"]);
    random_file(&s.path("f.bin"), 3 << 20, 9);
    let work = tempfile::tempdir().unwrap();
    let dst = work.path().join("f.bin");
    let whole = std::fs::read(s.path("f.bin")).unwrap();
    std::fs::write(work.path().join("f.bin.fatpipe-part"), &whole[..1 << 20]).unwrap();
    let out = run_ok(
        fatpipe_cmd(&["cp", "--resume"]).args([s.url("f.bin").as_str(), dst.to_str().unwrap()]),
    );
    assert_same(&s.path("f.bin"), &dst);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.starts_with("fatpipe: 1 file copied (resumed at 1 MiB), 2 MiB in "),
        "{err}"
    );
}

#[test]
fn ls_on_a_file_lists_the_file() {
    let s = FatpipeServer::start(&["--anonymous"]);
    std::fs::create_dir(s.path("d")).unwrap();
    random_file(&s.path("d/one.bin"), 1234, 3);
    let out = run_ok(&mut fatpipe_cmd(&["ls", &s.url("d/one.bin")]));
    let text = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 1, "{text}");
    assert!(
        lines[0].starts_with('-') && lines[0].contains(" 1234 ") && lines[0].ends_with(" one.bin"),
        "{text}"
    );
    // A directory still lists its entries.
    let out = run_ok(&mut fatpipe_cmd(&["ls", &s.url("d")]));
    assert!(String::from_utf8_lossy(&out.stdout).contains("one.bin"));
}

#[test]
fn a_refused_anonymous_login_says_to_name_a_user() {
    let s = FatpipeServer::start(&["--user", "alice:secret-pass"]);
    let out = run(&mut fatpipe_cmd(&["ls", &s.url("")]));
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("login as anonymous failed") && err.contains("name a user in the URL"),
        "{err}"
    );
    let out = run(fatpipe_cmd(&["ls", "--tls", "off"]).arg(s.url_as("alice", "wrong", "")));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("login as alice failed")
            && err.contains("check the user name and the password"),
        "{err}"
    );
}
