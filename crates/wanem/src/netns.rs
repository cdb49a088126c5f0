//! Network namespaces and their settings, through iproute2 (`ip`): create, address, route,
//! per-namespace TCP sysctls, delete.

use anyhow::{bail, Context};
use std::process::Command;

/// Runs `ip ARGS…` and fails with its error text.
pub fn ip(args: &[&str]) -> anyhow::Result<()> {
    let out = Command::new("ip")
        .args(args)
        .output()
        .context("cannot run ip (install iproute2)")?;
    if !out.status.success() {
        bail!(
            "ip {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(())
}

/// Whether a named namespace exists.
pub fn exists(name: &str) -> bool {
    std::path::Path::new(&format!("/var/run/netns/{name}")).exists()
}

/// Creates a namespace with its loopback up; an existing one of that name is removed first.
pub fn create(name: &str) -> anyhow::Result<()> {
    if exists(name) {
        delete(name)?;
    }
    ip(&["netns", "add", name])?;
    // IPv4 only: no router solicitations or other IPv6 chatter on the emulated path.
    for key in [
        "net/ipv6/conf/all/disable_ipv6",
        "net/ipv6/conf/default/disable_ipv6",
    ] {
        sysctl(name, key, "1")?;
    }
    ip(&["-n", name, "link", "set", "lo", "up"])
}

/// Deletes a namespace (processes still inside keep it alive until they exit) and its
/// /etc/netns files.
pub fn delete(name: &str) -> anyhow::Result<()> {
    if exists(name) {
        ip(&["netns", "delete", name])?;
    }
    let etc = format!("/etc/netns/{name}");
    if std::path::Path::new(&etc).exists() {
        std::fs::remove_dir_all(&etc).with_context(|| format!("cannot remove {etc}"))?;
    }
    Ok(())
}

/// Writes /etc/netns/NAME/hosts: localhost, this machine's host name at `own`, and `names`.
pub fn write_hosts(
    name: &str,
    own: std::net::Ipv4Addr,
    names: &[(std::net::Ipv4Addr, &str)],
) -> anyhow::Result<()> {
    let dir = format!("/etc/netns/{name}");
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {dir}"))?;
    let host = nix::unistd::gethostname()
        .map(|h| h.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut text = format!("127.0.0.1 localhost\n{own} {host}\n");
    for (ip, n) in names {
        text.push_str(&format!("{ip} {n}\n"));
    }
    std::fs::write(format!("{dir}/hosts"), text)
        .with_context(|| format!("cannot write {dir}/hosts"))
}

/// Writes a sysctl inside a namespace (`key` as a /proc/sys path below `net/`).
pub fn sysctl(ns: &str, key: &str, value: &str) -> anyhow::Result<()> {
    let path = format!("/proc/sys/{key}");
    let out = Command::new("ip")
        .args([
            "netns",
            "exec",
            ns,
            "sh",
            "-c",
            "printf '%s' \"$1\" > \"$0\"",
            &path,
            value,
        ])
        .output()
        .context("cannot run ip netns exec")?;
    if !out.status.success() {
        bail!(
            "setting {key} = {value} in {ns}: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(())
}

/// Gives `dev` in `ns` the point-to-point address `local` towards `peer`, brings it up, and
/// routes to the peer with congestion control `cc` (a route attribute, because the namespace
/// default cannot be set to every algorithm the kernel has).
pub fn configure_p2p(ns: &str, dev: &str, local: &str, peer: &str, cc: &str) -> anyhow::Result<()> {
    ip(&["-n", ns, "addr", "add", local, "peer", peer, "dev", dev])?;
    // A deep device queue: the emulated queue must be the only place packets are dropped, not the
    // TUN's own 500-packet queue when the emulator's reader falls behind for a moment.
    ip(&["-n", ns, "link", "set", dev, "txqueuelen", "20000", "up"])?;
    ip(&[
        "-n", ns, "route", "replace", peer, "dev", dev, "congctl", cc,
    ])
}

/// Runs `f` on a new thread inside namespace `ns`. Sockets and devices made there belong to that
/// namespace and stay usable from any thread afterwards; the caller's namespace is untouched.
pub fn spawn_in<T: Send + 'static>(
    ns: &str,
    f: impl FnOnce() -> anyhow::Result<T> + Send + 'static,
) -> std::thread::JoinHandle<anyhow::Result<T>> {
    let path = format!("/var/run/netns/{ns}");
    std::thread::spawn(move || {
        let file = std::fs::File::open(&path).with_context(|| format!("cannot open {path}"))?;
        nix::sched::setns(&file, nix::sched::CloneFlags::CLONE_NEWNET)
            .with_context(|| format!("cannot enter network namespace {path} (needs root)"))?;
        f()
    })
}

/// [`spawn_in`] and wait for the result.
pub fn run_in<T: Send + 'static>(
    ns: &str,
    f: impl FnOnce() -> anyhow::Result<T> + Send + 'static,
) -> anyhow::Result<T> {
    spawn_in(ns, f)
        .join()
        .map_err(|_| anyhow::anyhow!("thread in namespace {ns} panicked"))?
}
