//! `fatpipe testbed` from the shell, as scripts use it: up, addr, exec, stats, down, and
//! recovery from a daemon that died without cleaning up (needs root, as CI has).

mod common;
use common::*;

fn tb(name: &str, args: &[&str]) -> std::process::Output {
    let mut all = vec!["testbed"];
    all.extend_from_slice(args);
    all.extend_from_slice(&["--name", name]);
    run(&mut fatpipe_cmd(&all))
}

fn ok(out: std::process::Output) -> String {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// Takes the testbed down even if the test fails half-way.
struct Down(&'static str);

impl Drop for Down {
    fn drop(&mut self) {
        let _ = run(&mut fatpipe_cmd(&["testbed", "down", "--name", self.0]));
    }
}

#[test]
fn testbed_lifecycle_from_the_shell() {
    let name = "fptcli";
    let _guard = Down(name);
    let up = ok(tb(
        name,
        &[
            "up",
            "--rtt",
            "20ms",
            "--rate",
            "100mbit",
            "--queue",
            "100p",
            "--loss",
            "0",
            "--reverse",
            "delay=30ms",
        ],
    ));
    assert!(
        up.contains("198.18.0.1") && up.contains("198.18.0.2"),
        "{up}"
    );
    assert_eq!(
        ok(run(&mut fatpipe_cmd(&[
            "testbed", "addr", "b", "--name", name
        ])))
        .trim(),
        "198.18.0.2"
    );
    // Without a side: every testbed that is up.
    let all = ok(run(&mut fatpipe_cmd(&["testbed", "addr"])));
    assert!(
        all.lines()
            .any(|l| l.starts_with(&format!("{name}: a = 198.18.0.1"))),
        "{all}"
    );
    // A command in namespace a reaches b through the emulator: a TCP connect to a closed port is
    // refused by b's stack, one round trip later: 10 ms there, 30 ms back (--reverse).
    let probe = "import socket,time\nt=time.time()\ntry:\n socket.create_connection(('198.18.0.2',9),timeout=5)\nexcept ConnectionRefusedError:\n print('refused %.1f' % ((time.time()-t)*1000))\n";
    let out = ok(run(&mut fatpipe_cmd(&[
        "testbed", "exec", "a", "--name", name, "--", "python3", "-c", probe,
    ])));
    let ms: f64 = out
        .trim()
        .strip_prefix("refused ")
        .expect("connection refused by b")
        .parse()
        .unwrap();
    assert!(
        (39.0..60.0).contains(&ms),
        "round trip {ms} ms on a 10 + 30 ms path"
    );
    std::thread::sleep(std::time::Duration::from_millis(300));
    let stats: serde_json::Value =
        serde_json::from_str(&ok(tb(name, &["stats", "--json"]))).unwrap();
    assert!(stats[0]["packets_in"].as_u64().unwrap() >= 1, "{stats}");
    assert!(stats[1]["packets_out"].as_u64().unwrap() >= 1, "{stats}");
    let table = ok(tb(name, &["stats"]));
    assert!(
        table.contains("a->b") && table.contains("drop queue"),
        "{table}"
    );

    // A daemon killed hard leaves namespaces behind; the next `up` finds and removes them.
    let pid: i32 = std::fs::read_to_string(format!("/run/fatpipe/testbed/{name}/pid"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert_eq!(kill_hard(pid), 0);
    std::thread::sleep(std::time::Duration::from_millis(200));
    let again = tb(
        name,
        &[
            "up", "--rtt", "10ms", "--rate", "50mbit", "--cross", "20mbit",
        ],
    );
    assert!(
        String::from_utf8_lossy(&again.stderr).contains("removed a leftover"),
        "{}",
        String::from_utf8_lossy(&again.stderr)
    );
    ok(again);
    // Cross traffic runs a -> b only; the queue takes it as packets of a pass.
    ok(run(&mut fatpipe_cmd(&[
        "testbed", "exec", "a", "--name", name, "--", "python3", "-c", probe,
    ])));
    std::thread::sleep(std::time::Duration::from_millis(300));
    let stats: serde_json::Value =
        serde_json::from_str(&ok(tb(name, &["stats", "--json"]))).unwrap();
    assert!(stats[0]["cross_bytes_in"].as_u64().unwrap() > 0, "{stats}");
    assert_eq!(stats[1]["cross_bytes_in"].as_u64(), Some(0), "{stats}");
    ok(tb(name, &["down"]));
    assert!(!std::path::Path::new("/var/run/netns/fptcli-a").exists());
    assert!(!std::path::Path::new("/run/fatpipe/testbed/fptcli").exists());
    let out = ok(tb(name, &["down"]));
    assert!(out.is_empty());
    let out = tb(name, &["addr", "a"]);
    assert!(
        !out.status.success()
            && String::from_utf8_lossy(&out.stderr).contains("no testbed fptcli is up")
    );
}

#[test]
fn testbed_rejects_bad_settings_before_touching_anything() {
    for (args, msg) in [
        (
            vec!["up", "--rtt", "fast", "--rate", "1gbit"],
            "bad duration",
        ),
        (
            vec!["up", "--rtt", "10ms", "--rate", "1zbit"],
            "bad rate unit",
        ),
        (
            vec!["up", "--rtt", "10ms", "--rate", "1gbit", "--loss", "2"],
            "between 0 and 1",
        ),
        (
            vec!["up", "--rtt", "10ms", "--rate", "1gbit", "--cross", "lots"],
            "bad rate",
        ),
        (
            vec![
                "up",
                "--rtt",
                "10ms",
                "--rate",
                "1gbit",
                "--profile",
                "fast",
            ],
            "unknown profile",
        ),
        (
            vec![
                "up",
                "--rtt",
                "10ms",
                "--rate",
                "1gbit",
                "--schedule",
                "/nonexistent",
            ],
            "cannot read schedule",
        ),
    ] {
        let out = tb("fptbad", &args);
        assert!(!out.status.success());
        assert!(
            String::from_utf8_lossy(&out.stderr).contains(msg),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    assert!(!std::path::Path::new("/var/run/netns/fptbad-a").exists());
}

#[test]
fn testbed_failures_say_why() {
    // A failure inside the daemon reaches the user.
    let out = run(&mut fatpipe_cmd(&[
        "testbed",
        "up",
        "--rtt",
        "10ms",
        "--rate",
        "1gbit",
        "--name",
        "waytoolongname1",
    ]));
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("did not come up") && err.contains("must be 1 to 12"),
        "{err}"
    );
    assert!(!std::path::Path::new("/run/fatpipe/testbed/waytoolongname1").exists());
    // Without root it says so before trying.
    require("setpriv");
    let mut cmd = std::process::Command::new("setpriv");
    cmd.args([
        "--reuid=65534",
        "--regid=65534",
        "--clear-groups",
        fatpipe(),
        "testbed",
        "up",
        "--rtt",
        "10ms",
        "--rate",
        "1gbit",
    ]);
    let out = run(&mut cmd);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("needs root"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn kill_hard(pid: i32) -> i32 {
    // Kill by the PID the daemon recorded, as a crash would end it.
    let out = std::process::Command::new("kill")
        .args(["-KILL", &pid.to_string()])
        .status()
        .unwrap();
    if out.success() {
        0
    } else {
        1
    }
}
