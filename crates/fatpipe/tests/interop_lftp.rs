//! lftp (Debian's) against `fatpipe serve`: get, put, mirror both ways, and pget -n 4.

mod common;
use common::*;
use std::path::Path;
use std::process::Command;

fn lftp(s: &FatpipeServer, script: &str) -> std::process::Output {
    require("lftp");
    let settings = "set net:max-retries 1; set net:timeout 20; set net:reconnect-interval-base 1; set xfer:clobber on; set cmd:fail-exit yes;";
    run_ok(Command::new("lftp").args([
        "-u",
        "alice,pw",
        "-p",
        &s.addr.port().to_string(),
        "-e",
        &format!("{settings} {script}; bye"),
        "127.0.0.1",
    ]))
}

fn server() -> FatpipeServer {
    FatpipeServer::start(&["--user", "alice:pw"])
}

/// Builds a tree with nested folders and every test size; returns its files (relative paths).
fn make_tree(root: &Path) -> Vec<String> {
    let mut files = Vec::new();
    for (i, size) in SIZES.iter().enumerate() {
        let rel = match i % 3 {
            0 => format!("f{i}"),
            1 => format!("a/f{i}"),
            _ => format!("a/b c/f{i}"),
        };
        let p = root.join(&rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        random_file(&p, *size, 40 + i as u64);
        files.push(rel);
    }
    std::fs::create_dir_all(root.join("a/empty")).unwrap();
    files
}

#[test]
fn lftp_get_and_put_every_size() {
    let s = server();
    let dir = tempfile::tempdir().unwrap();
    for (i, size) in SIZES.iter().enumerate() {
        random_file(&s.path(&format!("g{i}")), *size, i as u64);
        let local = dir.path().join(format!("g{i}"));
        lftp(&s, &format!("get /g{i} -o {}", local.display()));
        assert_same(&s.path(&format!("g{i}")), &local);
        lftp(&s, &format!("put {} -o /p{i}", local.display()));
        assert_same(&local, &s.path(&format!("p{i}")));
    }
}

#[test]
fn lftp_mirrors_nested_trees_both_ways() {
    let s = server();
    let files = make_tree(&s.path("tree"));
    let dir = tempfile::tempdir().unwrap();
    let local = dir.path().join("copy");
    lftp(&s, &format!("mirror /tree {}", local.display()));
    for f in &files {
        assert_same(&s.path(&format!("tree/{f}")), &local.join(f));
    }
    assert!(local.join("a/empty").is_dir());

    lftp(&s, &format!("mirror -R {} /back", local.display()));
    for f in &files {
        assert_same(&local.join(f), &s.path(&format!("back/{f}")));
    }
    assert!(s.path("back/a/empty").is_dir());
}

#[test]
fn lftp_pget_with_four_connections() {
    let s = server();
    random_file(&s.path("big"), 256 << 20, 9);
    let dir = tempfile::tempdir().unwrap();
    let local = dir.path().join("big");
    lftp(&s, &format!("pget -n 4 /big -o {}", local.display()));
    assert_same(&s.path("big"), &local);
}
