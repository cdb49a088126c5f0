//! What an install ships beside the binary, generated from the command line's definition:
//! shell completions and manual pages that know every subcommand and option.

mod common;

use common::*;

#[test]
fn completions_and_manual_pages_know_the_commands() {
    for (shell, mark) in [
        ("bash", "_fatpipe"),
        ("zsh", "#compdef fatpipe"),
        ("fish", "complete -c fatpipe"),
    ] {
        let out = run_ok(&mut fatpipe_cmd(&["completions", shell]));
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(text.contains(mark), "{shell}: {text:.200}");
        assert!(text.contains("limit-rate-per-file"), "{shell}");
    }
    let dir = tempfile::tempdir().unwrap();
    let man = dir.path().join("man1");
    run_ok(&mut fatpipe_cmd(&["man", "--dir", man.to_str().unwrap()]));
    for page in [
        "fatpipe.1",
        "fatpipe-cp.1",
        "fatpipe-serve.1",
        "fatpipe-testbed-up.1",
    ] {
        assert!(man.join(page).is_file(), "{page} missing");
    }
    let cp = std::fs::read_to_string(man.join("fatpipe-cp.1")).unwrap();
    assert!(cp.contains("Exit codes: 0 all arrived"), "{cp:.300}");
    assert!(cp.contains("resume"), "{cp:.300}");
    // Without --dir: the main page on standard output.
    let out = run_ok(&mut fatpipe_cmd(&["man"]));
    assert!(String::from_utf8_lossy(&out.stdout).starts_with(".ie"));
}
