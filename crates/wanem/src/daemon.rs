//! A testbed held by a detached process, so that it outlives the command that brought it up
//! (`fatpipe testbed up`): the process records its PID, configuration and counters under
//! `/run/fatpipe/testbed/NAME`, and other processes find, read and stop it there.

use crate::link::LinkStats;
use crate::testbed::namespace;
use crate::{netns, Side, Testbed, TestbedConfig};
use anyhow::{bail, Context};
use std::io::{BufRead, BufReader, Read, Write};
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// Where the holder of testbed `name` keeps its state.
pub fn state_dir(name: &str) -> PathBuf {
    PathBuf::from("/run/fatpipe/testbed").join(name)
}

/// The names of the testbeds that are up, sorted.
pub fn up() -> Vec<String> {
    let Ok(dirs) = std::fs::read_dir("/run/fatpipe/testbed") else {
        return Vec::new();
    };
    let mut names: Vec<String> = dirs
        .filter_map(Result::ok)
        .filter(|d| d.path().join("pid").exists())
        .filter_map(|d| d.file_name().into_string().ok())
        .collect();
    names.sort();
    names
}

/// Fails unless testbed `name` is up.
pub fn require_up(name: &str) -> anyhow::Result<()> {
    if !state_dir(name).join("pid").exists() {
        bail!("no testbed {name} is up (start one with `fatpipe testbed up`)");
    }
    Ok(())
}

/// The latest counters of testbed `name`, a -> b then b -> a, and their JSON text.
pub fn stats(name: &str) -> anyhow::Result<([LinkStats; 2], String)> {
    require_up(name)?;
    let text =
        std::fs::read_to_string(state_dir(name).join("stats.json")).context("no statistics yet")?;
    Ok((serde_json::from_str(&text)?, text))
}

/// Waits for a starting holder's first line on `from` (its standard output): `ready`, or the
/// reason it failed.
pub fn wait_ready(from: impl Read) -> anyhow::Result<()> {
    let mut line = String::new();
    BufReader::new(from).read_line(&mut line)?;
    if line.trim() == "ready" {
        return Ok(());
    }
    let reason = line
        .trim()
        .strip_prefix("error: ")
        .unwrap_or("the daemon exited without a word");
    bail!("the testbed did not come up: {reason}")
}

/// Stops a testbed's daemon (by the PID it recorded) and removes its namespaces and state;
/// returns whether there was anything to remove.
pub fn down(name: &str) -> anyhow::Result<bool> {
    let dir = state_dir(name);
    let mut found = false;
    if let Ok(text) = std::fs::read_to_string(dir.join("pid")) {
        if let Ok(pid) = text.trim().parse::<i32>() {
            found = true;
            if is_our_daemon(pid) {
                stop_pid(pid);
            }
        }
    }
    for side in [Side::A, Side::B] {
        let ns = namespace(name, side);
        if netns::exists(&ns) {
            found = true;
            netns::delete(&ns)?;
        }
    }
    if dir.exists() {
        std::fs::remove_dir_all(&dir)
            .with_context(|| format!("cannot remove {}", dir.display()))?;
    }
    Ok(found)
}

/// Whether `pid` is a fatpipe testbed daemon (a recycled PID must not be killed).
fn is_our_daemon(pid: i32) -> bool {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .map(|c| {
            let args: Vec<&[u8]> = c.split(|b| *b == 0).collect();
            args.windows(2)
                .any(|w| w[0] == b"testbed" && w[1] == b"daemon")
        })
        .unwrap_or(false)
}

/// Stops `pid`: SIGTERM, then SIGKILL if it has not exited within 10 s.
fn stop_pid(pid: libc::pid_t) {
    // SAFETY: kill(2) with a PID we recorded and checked.
    unsafe { libc::kill(pid, libc::SIGTERM) };
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline && std::path::Path::new(&format!("/proc/{pid}")).exists() {
        if std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| s.contains(") Z ")) {
            break; // exited, not yet reaped by its (gone) parent
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    if std::path::Path::new(&format!("/proc/{pid}")).exists() {
        // SAFETY: as above; the daemon did not stop in time.
        unsafe { libc::kill(pid, libc::SIGKILL) };
    }
}

/// Brings the testbed `cfg` up and holds it until SIGTERM, SIGINT or SIGHUP, writing its
/// counters every 200 ms; tells `ready` (or `error: why`) on standard output, then closes it.
pub fn hold(cfg: TestbedConfig) -> anyhow::Result<()> {
    let dir = state_dir(&cfg.name);
    // Block the stop signals before any thread starts, then wait for them synchronously.
    let mut set: libc::sigset_t = unsafe { std::mem::zeroed() };
    // SAFETY: plain sigset manipulation on a local set, then masking this thread (inherited by later threads).
    unsafe {
        libc::sigemptyset(&mut set);
        for s in [libc::SIGTERM, libc::SIGINT, libc::SIGHUP] {
            libc::sigaddset(&mut set, s);
        }
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
    }
    let setup = |dir: &PathBuf| -> anyhow::Result<Testbed> {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
        let tb = Testbed::up(cfg)?;
        std::fs::write(dir.join("pid"), std::process::id().to_string())?;
        std::fs::write(
            dir.join("config.json"),
            serde_json::to_string_pretty(tb.config())?,
        )?;
        Ok(tb)
    };
    // `up` reads one line from this pipe: "ready", or the reason it failed.
    let tb = {
        let mut out = std::io::stdout().lock();
        match setup(&dir) {
            Ok(tb) => {
                writeln!(out, "ready")?;
                out.flush()?;
                tb
            }
            Err(e) => {
                writeln!(out, "error: {e:#}")?;
                out.flush()?;
                let _ = std::fs::remove_dir_all(&dir);
                return Err(e);
            }
        }
    };
    // SAFETY: closing our stdout (the pipe to `up`) so that `up` can exit; nothing prints after this.
    unsafe { libc::close(1) };
    let stats_path = dir.join("stats.json");
    let tmp = dir.join("stats.json.tmp");
    loop {
        let ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 200_000_000,
        };
        // SAFETY: waits for one of the blocked signals with a valid set and timeout.
        let sig = unsafe { libc::sigtimedwait(&set, std::ptr::null_mut(), &ts) };
        let snapshot = serde_json::to_string_pretty(&tb.stats())?;
        if std::fs::write(&tmp, snapshot).is_ok() {
            let _ = std::fs::rename(&tmp, &stats_path);
        }
        if sig > 0 {
            break;
        }
    }
    drop(tb);
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}
