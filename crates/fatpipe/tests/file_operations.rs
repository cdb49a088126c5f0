//! The file operations users expect of a copy tool, against fatpipe's own server: globs,
//! several sources, `--include`/`--exclude`, `--from` lists, `--create-dirs`, modification
//! times kept both ways, a re-run with `--resume` that moves nothing, `--limit-rate` (over a
//! whole tree), logins
//! from `~/.netrc`, and `fatpipe mkdir`, `rm`, `mv`.

mod common;

use common::*;
use std::path::Path;
use std::time::{Duration, UNIX_EPOCH};

/// A file's modification time, whole seconds since the epoch.
fn mtime(path: &Path) -> u64 {
    let m = std::fs::metadata(path).unwrap().modified().unwrap();
    m.duration_since(UNIX_EPOCH).unwrap().as_secs()
}

/// Gives `path` the modification time `secs`.
fn set_mtime(path: &Path, secs: u64) {
    let f = std::fs::OpenOptions::new().write(true).open(path).unwrap();
    f.set_modified(UNIX_EPOCH + Duration::from_secs(secs))
        .unwrap();
}

/// The files under `dir`, as sorted relative paths.
fn files(dir: &Path) -> Vec<String> {
    fn walk(base: &Path, dir: &Path, out: &mut Vec<String>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                walk(base, &p, out);
            } else {
                out.push(p.strip_prefix(base).unwrap().to_string_lossy().into_owned());
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, dir, &mut out);
    out.sort();
    out
}

/// A server whose `data` holds `a.h5`, `b.h5`, `notes.txt`, `run/c.h5`, `scratch/d.h5`, with
/// old modification times.
fn server_with_data() -> FatpipeServer {
    let s = FatpipeServer::start(&["--anonymous-write"]);
    for d in ["data/run", "data/scratch"] {
        std::fs::create_dir_all(s.path(d)).unwrap();
    }
    for (i, f) in ["a.h5", "b.h5", "notes.txt", "run/c.h5", "scratch/d.h5"]
        .iter()
        .enumerate()
    {
        let p = s.path(&format!("data/{f}"));
        random_file(&p, 100_000 + i as u64 * 7_000, i as u64);
        set_mtime(&p, 1_600_000_000 + i as u64);
    }
    s
}

#[test]
fn globs_filters_and_lists_pick_the_files_and_times_are_kept() {
    let s = server_with_data();
    let work = tempfile::tempdir().unwrap();
    let out = work.path().join("glob");
    run_ok(fatpipe_cmd(&["cp", &s.url("data/*.h5")]).arg(&out));
    assert_eq!(files(&out), ["a.h5", "b.h5"]);
    assert_same(&s.path("data/a.h5"), &out.join("a.h5"));
    assert_eq!(mtime(&out.join("b.h5")), 1_600_000_001);

    let out = work.path().join("tree");
    run_ok(
        fatpipe_cmd(&["cp", "-r", "--include", "*.h5", "--exclude", "scratch"])
            .arg(s.url("data"))
            .arg(&out),
    );
    assert_eq!(files(&out), ["a.h5", "b.h5", "run/c.h5"]);
    assert_eq!(mtime(&out.join("run/c.h5")), 1_600_000_003);

    let list = work.path().join("list");
    std::fs::write(&list, "# wanted\nnotes.txt\n\nrun/c.h5\n").unwrap();
    let out = work.path().join("listed");
    run_ok(
        fatpipe_cmd(&["cp", "--from"])
            .arg(&list)
            .arg(s.url("data"))
            .arg(&out),
    );
    assert_eq!(files(&out), ["notes.txt", "run/c.h5"]);
    assert_same(&s.path("data/run/c.h5"), &out.join("run/c.h5"));

    // Nothing matches: an error, nothing made.
    let none = work.path().join("none");
    let o = run(fatpipe_cmd(&["cp", &s.url("data/*.nc")]).arg(&none));
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("nothing matches"));
    assert!(!none.exists());
}

#[test]
fn uploads_make_directories_when_asked_and_keep_times() {
    let s = FatpipeServer::start(&["--anonymous-write"]);
    let work = tempfile::tempdir().unwrap();
    let (a, b) = (work.path().join("a.bin"), work.path().join("b.bin"));
    random_file(&a, 200_000, 1);
    random_file(&b, 300_000, 2);
    set_mtime(&a, 1_500_000_000);
    let o = run(fatpipe_cmd(&["cp"]).arg(&a).arg(s.url("x/y/a.bin")));
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("/x/y does not exist") && err.contains("--create-dirs"),
        "{err}"
    );
    assert!(!s.path("x").exists());
    run_ok(
        fatpipe_cmd(&["cp", "--create-dirs"])
            .arg(&a)
            .arg(s.url("x/y/a.bin")),
    );
    assert_same(&a, &s.path("x/y/a.bin"));
    assert_eq!(mtime(&s.path("x/y/a.bin")), 1_500_000_000);
    // Several sources go into a directory, made if missing.
    run_ok(fatpipe_cmd(&["cp"]).arg(&a).arg(&b).arg(s.url("many")));
    assert_eq!(files(&s.path("many")), ["a.bin", "b.bin"]);
    assert_same(&b, &s.path("many/b.bin"));
}

#[test]
fn a_rerun_with_resume_moves_nothing_and_says_so() {
    let s = server_with_data();
    let work = tempfile::tempdir().unwrap();
    // Into an existing directory, as `cp -r` does: the same command again lands in the same place.
    let out = work.path();
    run_ok(fatpipe_cmd(&["cp", "-r"]).arg(s.url("data")).arg(out));
    let o = run_ok(
        fatpipe_cmd(&["cp", "-r", "--resume", "--json"])
            .arg(s.url("data"))
            .arg(out),
    );
    let summary: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(summary["files_ok"], 5);
    assert_eq!(summary["bytes"], 0, "{summary}");
    let o = run_ok(
        fatpipe_cmd(&["cp", "-r", "--resume"])
            .arg(s.url("data"))
            .arg(out),
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("5 files copied (5 already complete)"), "{err}");
}

#[test]
fn limit_rate_holds_a_copy_back() {
    let s = FatpipeServer::start(&["--anonymous-write"]);
    random_file(&s.path("f.bin"), 4 << 20, 5);
    let work = tempfile::tempdir().unwrap();
    let dst = work.path().join("f.bin");
    // 4 MiB at 16 Mbit/s: about 2.1 s (loopback alone takes milliseconds).
    for (src, to) in [
        (s.url("f.bin"), dst.to_string_lossy().into_owned()),
        (dst.to_string_lossy().into_owned(), s.url("g.bin")),
    ] {
        let started = std::time::Instant::now();
        run_ok(&mut fatpipe_cmd(&[
            "cp",
            "--limit-rate",
            "16mbit",
            &src,
            &to,
        ]));
        let took = started.elapsed();
        assert!(
            took >= Duration::from_millis(1700),
            "{src} -> {to}: {took:?}"
        );
    }
    assert_same(&s.path("f.bin"), &s.path("g.bin"));
}

#[test]
fn limit_rate_holds_a_whole_tree_copied_four_files_at_once() {
    let s = FatpipeServer::start(&["--anonymous"]);
    std::fs::create_dir(s.path("t")).unwrap();
    for i in 0..4 {
        random_file(&s.path(&format!("t/f{i}")), 2 << 20, 20 + i);
    }
    let work = tempfile::tempdir().unwrap();
    // 8 MiB at 16 Mbit/s in all: about 4.2 s (each file held to 16 Mbit/s alone: 1.05 s).
    let started = std::time::Instant::now();
    run_ok(&mut fatpipe_cmd(&[
        "cp",
        "-r",
        "--concurrency",
        "4",
        "--limit-rate",
        "16mbit",
        &s.url("t"),
        work.path().to_str().unwrap(),
    ]));
    let took = started.elapsed();
    assert!(took >= Duration::from_millis(3500), "{took:?}");
    for i in 0..4 {
        let f = format!("t/f{i}");
        assert_same(&s.path(&f), &work.path().join(&f));
    }
}

#[test]
fn a_netrc_entry_logs_in() {
    let s = FatpipeServer::start(&["--user", "alice:secret-pass"]);
    random_file(&s.path("f.bin"), 1000, 1);
    let work = tempfile::tempdir().unwrap();
    let netrc = work.path().join("netrc");
    std::fs::write(
        &netrc,
        format!("machine {} login alice password secret-pass\n", s.addr.ip()),
    )
    .unwrap();
    let o = run_ok(fatpipe_cmd(&["ls", &s.url("")]).env("NETRC", &netrc));
    assert!(String::from_utf8_lossy(&o.stdout).contains("f.bin"));
    // Without it, the anonymous login is refused.
    assert!(!run(&mut fatpipe_cmd(&["ls", &s.url("")])).status.success());
}

#[test]
fn mkdir_rm_and_mv_change_the_servers_files() {
    let s = FatpipeServer::start(&["--anonymous-write"]);
    run_ok(&mut fatpipe_cmd(&["mkdir", &s.url("d")]));
    assert!(s.path("d").is_dir());
    // An existing directory is an error, unless -p.
    assert!(!run(&mut fatpipe_cmd(&["mkdir", &s.url("d")]))
        .status
        .success());
    run_ok(&mut fatpipe_cmd(&[
        "mkdir",
        "-p",
        &s.url("d"),
        &s.url("e/f/g"),
    ]));
    assert!(s.path("e/f/g").is_dir());
    random_file(&s.path("e/f/x.bin"), 10, 1);
    run_ok(&mut fatpipe_cmd(&["mv", &s.url("e/f/x.bin"), "y.bin"]));
    assert!(s.path("e/f/y.bin").is_file() && !s.path("e/f/x.bin").exists());
    run_ok(&mut fatpipe_cmd(&[
        "mv",
        &s.url("e/f/y.bin"),
        &s.url("d/z.bin"),
    ]));
    assert!(s.path("d/z.bin").is_file());
    // A directory needs -r.
    let o = run(&mut fatpipe_cmd(&["rm", &s.url("e")]));
    assert!(!o.status.success() && String::from_utf8_lossy(&o.stderr).contains("-r"));
    assert!(s.path("e").exists());
    run_ok(&mut fatpipe_cmd(&[
        "rm",
        "-r",
        &s.url("e"),
        &s.url("d/z.bin"),
    ]));
    assert!(!s.path("e").exists() && !s.path("d/z.bin").exists());
    assert!(!run(&mut fatpipe_cmd(&["rm", &s.url("none")]))
        .status
        .success());
}

#[test]
fn ls_and_rm_take_globs_ls_shows_sizes_for_people_and_trees() {
    let s = FatpipeServer::start(&["--anonymous-write"]);
    std::fs::create_dir_all(s.path("d/sub")).unwrap();
    random_file(&s.path("d/a.tmp"), 3 << 20, 1);
    random_file(&s.path("d/b.tmp"), 10, 2);
    random_file(&s.path("d/keep.h5"), 10, 3);
    random_file(&s.path("d/sub/deep.h5"), 10, 4);
    let ls = |args: &[&str]| {
        String::from_utf8_lossy(&run_ok(&mut fatpipe_cmd(args)).stdout).into_owned()
    };
    let globbed = ls(&["ls", "-h", &s.url("d/*.tmp")]);
    let names: Vec<&str> = globbed
        .lines()
        .filter_map(|l| l.split_whitespace().last())
        .collect();
    assert_eq!(names, ["a.tmp", "b.tmp"], "{globbed}");
    assert!(globbed.contains(" 3 MiB "), "{globbed}");
    let tree = ls(&["ls", "-R", &s.url("d")]);
    assert!(
        tree.contains("/d/sub:") && tree.contains(" deep.h5"),
        "{tree}"
    );
    run_ok(&mut fatpipe_cmd(&["rm", &s.url("d/*.tmp")]));
    assert!(!s.path("d/a.tmp").exists() && !s.path("d/b.tmp").exists());
    assert!(s.path("d/keep.h5").exists());
    // A glob that matches nothing is an error, as a missing file is.
    let o = run(&mut fatpipe_cmd(&["rm", &s.url("d/*.tmp")]));
    assert_eq!(o.status.code(), Some(5));
}

/// `key` of each file of a `--json` copy's summary, in its order.
fn each_file(o: &std::process::Output, key: &str) -> Vec<String> {
    let summary: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let files = summary["files"].as_array().unwrap().iter();
    files
        .map(|f| f[key].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn several_files_at_once_arrive_whole_and_in_plan_order() {
    let s = FatpipeServer::start(&["--anonymous-write"]);
    std::fs::create_dir(s.path("t")).unwrap();
    let names: Vec<String> = (0..12).map(|i| format!("f{i:02}.bin")).collect();
    for (i, n) in names.iter().enumerate() {
        random_file(
            &s.path(&format!("t/{n}")),
            50_000 + i as u64 * 3_001,
            i as u64,
        );
    }
    let work = tempfile::tempdir().unwrap();
    let o = run_ok(
        fatpipe_cmd(&["cp", "-r", "--json", "--concurrency", "3"])
            .arg(s.url("t"))
            .arg(work.path()),
    );
    let expected: Vec<String> = names.iter().map(|n| format!("/t/{n}")).collect();
    assert_eq!(each_file(&o, "source"), expected);
    for n in &names {
        assert_same(&s.path(&format!("t/{n}")), &work.path().join("t").join(n));
    }
    // Up: each session's files after its first go out before the replies to those before
    // them are in (pipelined); the results still come in the plan's order.
    let o = run_ok(
        fatpipe_cmd(&["cp", "-r", "--json", "--concurrency", "3"])
            .arg(work.path().join("t"))
            .arg(s.url("back")),
    );
    let expected: Vec<String> = names.iter().map(|n| format!("/back/{n}")).collect();
    assert_eq!(each_file(&o, "destination"), expected);
    for n in &names {
        assert_same(&s.path(&format!("t/{n}")), &s.path(&format!("back/{n}")));
    }
}

#[test]
fn an_upload_refused_among_those_sent_ahead_fails_alone() {
    let s = FatpipeServer::start(&["--anonymous-write"]);
    let work = tempfile::tempdir().unwrap();
    let t = work.path().join("t");
    std::fs::create_dir(&t).unwrap();
    for i in 0..10 {
        random_file(&t.join(format!("f{i}")), 40_000 + i * 1_000, i);
    }
    // Where f4 goes the server holds a directory: its STOR is refused after the files before
    // it went out, and the files behind it were already sent over the same connections.
    std::fs::create_dir_all(s.path("back/t/f4")).unwrap();
    let o = run(fatpipe_cmd(&["cp", "-r", "--json", "--concurrency", "1"])
        .arg(&t)
        .arg(s.url("back")));
    assert!(!o.status.success());
    // The connections the server closed on purpose are no warning of their own.
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!err.contains("warning"), "{err}");
    let summary: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let files = summary["files"].as_array().unwrap();
    let failed: Vec<&str> = files
        .iter()
        .filter(|f| !f["error"].is_null())
        .map(|f| f["destination"].as_str().unwrap())
        .collect();
    assert_eq!(failed, ["/back/t/f4"], "{summary}");
    let expected: Vec<String> = (0..10).map(|i| format!("/back/t/f{i}")).collect();
    assert_eq!(each_file(&o, "destination"), expected);
    for i in (0..10).filter(|i| *i != 4) {
        assert_same(&t.join(format!("f{i}")), &s.path(&format!("back/t/f{i}")));
    }
    assert!(s.path("back/t/f4").is_dir());
}

#[test]
fn sessions_the_server_refuses_leave_their_files_to_the_others() {
    let s = FatpipeServer::start(&["--anonymous", "--max-sessions-per-host", "1"]);
    std::fs::create_dir(s.path("t")).unwrap();
    for i in 0..6 {
        random_file(&s.path(&format!("t/f{i}")), 30_000, i);
    }
    let work = tempfile::tempdir().unwrap();
    let o = run_ok(
        fatpipe_cmd(&["cp", "-r", "--concurrency", "4"])
            .arg(s.url("t"))
            .arg(work.path()),
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("could not log in"), "{err}");
    assert!(err.contains("6 files copied"), "{err}");
    for i in 0..6 {
        let n = format!("t/f{i}");
        assert_same(&s.path(&n), &work.path().join(&n));
    }
}

#[test]
fn what_the_udp_sender_learned_outlives_the_copy() {
    let s = FatpipeServer::start(&["--anonymous-write"]);
    let work = tempfile::tempdir().unwrap();
    let src = work.path().join("f.bin");
    random_file(&src, 20 << 20, 4);
    let up = |name: &str, extra: &[&str]| {
        run_ok(
            fatpipe_cmd(&["cp", "--quiet"])
                .args(extra)
                .arg(&src)
                .arg(s.url(name)),
        );
        assert_same(&src, &s.path(name));
    };
    up("u1", &["--transport", "udp", "--udp-rate", "500mbit"]);
    let learned = || -> serde_json::Value {
        let text = std::fs::read(cache_home().join("fatpipe/paths.json")).unwrap();
        let all: serde_json::Value = serde_json::from_slice(&text).unwrap();
        all["servers"][s.addr.to_string()]["udp"].clone()
    };
    let rate = learned()["rate"].as_f64().unwrap_or(0.0);
    assert!(rate > 0.0, "{}", learned());
    // A copy over TCP to the same server keeps it.
    up("u2", &["-p", "2"]);
    assert_eq!(learned()["rate"].as_f64(), Some(rate));
}

#[test]
fn auto_takes_the_udp_channel_where_the_last_copy_met_random_loss_until_it_finds_none() {
    let s = FatpipeServer::start(&["--anonymous"]);
    random_file(&s.path("f.bin"), 16 << 20, 6);
    let work = tempfile::tempdir().unwrap();
    let dst = work.path().join("f.bin");
    // Path memory of its own: a copy to this server met random loss a minute ago.
    let cache = work.path().join("cache");
    let memory = cache.join("fatpipe/paths.json");
    std::fs::create_dir_all(memory.parent().unwrap()).unwrap();
    let now = std::time::SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let key = s.addr.to_string();
    let lossy = serde_json::json!({"servers": {&key: {"streams": 4, "cc": "bbr", "at": now - 60}}});
    std::fs::write(&memory, lossy.to_string()).unwrap();
    let copy = |extra: &[&str]| -> serde_json::Value {
        let out = run_ok(
            fatpipe_cmd(&["cp", "--quiet", "--json", "--udp-rate", "500mbit"])
                .args(extra)
                .arg(s.url("f.bin"))
                .arg(&dst)
                .env("XDG_CACHE_HOME", &cache),
        );
        assert_same(&s.path("f.bin"), &dst);
        std::fs::remove_file(&dst).unwrap();
        serde_json::from_slice(&out.stdout).unwrap()
    };
    // Asked for TCP: TCP, whatever the memory says.
    let asked = copy(&["--transport", "tcp"]);
    assert_eq!(asked["transport"]["name"], "tcp", "{asked}");
    assert_eq!(asked["transport"]["asked"], true);
    // With no option: the UDP channel, and why.
    let first = copy(&[]);
    assert_eq!(first["transport"]["name"], "udp", "{first}");
    assert_eq!(first["transport"]["asked"], false);
    let why = first["transport"]["why"].as_str().unwrap();
    assert!(
        why.contains(&format!("the last copy to {key} met random loss")),
        "{why}"
    );
    let udp = first["files"][0]["udp"].as_str().unwrap();
    let resent = fatpipe_net::udp::loss_in_summary(udp).unwrap();
    // What that copy found decides the next one: loopback loses nothing at 500 Mbit/s, and a
    // copy that resent (next to) nothing ends the lossy spell.
    let remembered: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&memory).unwrap()).unwrap();
    let cc = &remembered["servers"][&key]["cc"];
    let next = copy(&[]);
    if resent < fatpipe_ftp::client::transport::CLEAN_BELOW_PERCENT {
        assert!(cc.is_null(), "{remembered}");
        assert_eq!(next["transport"]["name"], "tcp", "{next}");
        let why = next["transport"]["why"].as_str().unwrap();
        assert!(why.starts_with("no random loss known"), "{why}");
    } else {
        assert_eq!(cc, "bbr", "{remembered}");
        assert_eq!(next["transport"]["name"], "udp", "{next}");
    }
}
