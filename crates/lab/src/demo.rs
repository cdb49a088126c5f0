//! The demonstration behind `fatpipe demo`, the README's first command. Across an emulated long fat path (100 ms, 1 Gbit/s)
//! it sends one file with the kernel's stock settings, with hand-tuned sysctls, and with fatpipe's
//! own tuning on the stock host (as root, and within an unprivileged user's limits with
//! `-p auto`), and prints each rate against the link's ceiling: the "wizard gap" and how much of
//! it fatpipe closes by itself. Without root
//! (namespaces need it) it falls back to a loopback transfer and says so.

use anyhow::{bail, Context};
use fatpipe_ftp::client::copy::{CopyOptions, FileResult, Observer, Verify};
use fatpipe_ftp::client::copy_command;
use fatpipe_ftp::client::{Credentials, Location, RemoteUrl, TlsMode, TlsPolicy};
use fatpipe_ftp::server::auth::Anonymous;
use fatpipe_ftp::server::{Server, ServerConfig};
use fatpipe_net::Pump;
use fatpipe_wanem::testbed::Profile;
use fatpipe_wanem::{Side, Testbed, TestbedConfig};
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, Stdio};
use std::sync::Arc;
use std::time::Duration;

/// Where the demonstration writes: its results, and notices.
pub struct Output<'a> {
    /// The results (standard output).
    pub out: &'a mut dyn Write,
    /// Notices (standard error).
    pub err: &'a mut dyn Write,
}

/// What to demonstrate.
#[derive(Debug, Clone)]
pub struct Args {
    /// Size of the demonstration file in MiB.
    pub size_mib: u64,
    /// Round-trip time of the emulated path.
    pub rtt: Duration,
    /// Bottleneck rate of the emulated path, bit/s.
    pub rate: u64,
    /// Skip the emulated WAN and transfer over loopback.
    pub loopback: bool,
    /// Copies per row; each row prints their medians.
    pub runs: u32,
}

/// Runs the demonstration; `exe` is the fatpipe binary whose `serve` and `cp` it runs on the
/// emulated path.
pub fn run(a: &Args, exe: &Path, o: &mut Output<'_>) -> anyhow::Result<()> {
    let dir = tempfile::tempdir().context("cannot create a temporary directory")?;
    // Readable by the server whichever namespace it runs in.
    std::fs::set_permissions(
        dir.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )?;
    make_file(&dir.path().join("demo.bin"), a.size_mib << 20)?;
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    if !a.loopback && root && Path::new("/dev/net/tun").exists() {
        wan(a, exe, dir.path(), o.out)
    } else {
        if !a.loopback {
            writeln!(o.err, "fatpipe demo: the emulated WAN needs root (network namespaces); showing a loopback transfer instead")?;
        }
        loopback(a, dir.path(), o.out)
    }
}

/// Writes a file of `bytes` patterned (not all-zero) bytes.
pub fn make_file(path: &Path, bytes: u64) -> anyhow::Result<()> {
    let mut f = std::io::BufWriter::new(std::fs::File::create(path)?);
    let block: Vec<u8> = (0..1u32 << 20)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8)
        .collect();
    let mut left = bytes;
    while left > 0 {
        let n = left.min(block.len() as u64);
        f.write_all(&block[..n as usize])?;
        left -= n;
    }
    f.flush()?;
    Ok(())
}

/// A child process killed (by PID) when dropped.
struct Reaped(Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn wan(a: &Args, exe: &Path, dir: &Path, out: &mut dyn Write) -> anyhow::Result<()> {
    let ceiling = a.rate as f64 * 1448.0 / 1500.0 / 1e6;
    writeln!(
        out,
        "fatpipe demo: {} MiB across an emulated WAN: RTT {:?}, {:.0} Mbit/s bottleneck, queue 1 BDP, no loss",
        a.size_mib,
        a.rtt,
        a.rate as f64 / 1e6
    )?;
    writeln!(
        out,
        "  link goodput ceiling (rate x 1448/1500): {ceiling:.0} Mbit/s"
    )?;
    // Options of both ends, then of the client only.
    let runs: [(Profile, &str, &[&str], &[&str]); 4] = [
        (
            Profile::Stock,
            "stock: kernel defaults and autotuning",
            &["--tuning", "kernel", "--no-force-buffers"],
            &["-p", "1"],
        ),
        (
            Profile::Tuned,
            "tuned by hand: sysctls up to 256 MiB",
            &["--tuning", "kernel"],
            &["-p", "1"],
        ),
        (
            Profile::Stock,
            "fatpipe drs, one stream, as root",
            &["--tuning", "drs"],
            &["-p", "1"],
        ),
        (
            Profile::Stock,
            "fatpipe drs -p auto, unprivileged limits",
            &["--tuning", "drs", "--no-force-buffers"],
            &["-p", "auto"],
        ),
    ];
    for (profile, label, flags, client_flags) in runs {
        let mut cfg = TestbedConfig::new("fpdemo", a.rtt, a.rate);
        cfg.profile = profile;
        let tb = Testbed::up(cfg)?;
        let mut server = tb.command(Side::B, &exe.to_string_lossy());
        server
            .args(["serve", "--anonymous", "--listen", "198.18.0.2:0", "--root"])
            .arg(dir)
            .args(flags)
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        let mut server = Reaped(server.spawn().context("cannot start the server")?);
        let mut line = String::new();
        if let Some(out) = server.0.stdout.take() {
            BufReader::new(out).read_line(&mut line)?;
        }
        let addr = fatpipe_ftp::server::announced_addr(&line)
            .with_context(|| format!("the server did not start: {line:?}"))?;
        let mut seen = Vec::new();
        for run in 0..a.runs.max(1) {
            let done = tb
                .command(Side::A, &exe.to_string_lossy())
                // Each run starts cold and nothing lands in the user's own cache (path memory).
                .env("XDG_CACHE_HOME", dir.join(format!("cache-{label}-{run}")))
                .args([
                    "cp",
                    "--json",
                    "--quiet",
                    &format!("ftp://{addr}/demo.bin"),
                    "/dev/null",
                ])
                .args(flags)
                .args(client_flags)
                .output()?;
            if !done.status.success() {
                bail!(
                    "demo transfer failed: {}",
                    String::from_utf8_lossy(&done.stderr).trim()
                );
            }
            let summary: serde_json::Value = serde_json::from_slice(&done.stdout)?;
            seen.push(Run::from_json(&summary["files"][0]));
        }
        let row = Run::median(&seen);
        let spread = match (
            seen.iter().map(|r| r.mbit_s).reduce(f64::min),
            seen.iter().map(|r| r.mbit_s).reduce(f64::max),
        ) {
            (Some(lo), Some(hi)) if seen.len() > 1 => format!(" ({lo:.0}-{hi:.0})"),
            _ => String::new(),
        };
        let mib = |b: Option<f64>| {
            b.map_or("?".to_string(), |b| {
                format!("{:.0}", b / f64::from(1 << 20))
            })
        };
        let streams = row
            .streams
            .map_or(String::new(), |n| format!(", {n:.0} streams"));
        writeln!(
            out,
            "  {label:<40} {:>6.0} Mbit/s{spread:<10} {:>3.0} % of the ceiling, peak buffers {} + {} MiB{streams}",
            row.mbit_s,
            100.0 * row.mbit_s / ceiling,
            mib(row.local),
            mib(row.peer),
        )?;
        drop(server);
        tb.down()?;
    }
    writeln!(
        out,
        "  (medians of {} runs, lowest-highest in brackets; rates are for the data phase; peak buffers: the client's receive buffers + the server's send buffers, summed over streams)",
        a.runs.max(1)
    )?;
    Ok(())
}

/// What one demonstration copy reached.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Run {
    mbit_s: f64,
    local: Option<f64>,
    peer: Option<f64>,
    streams: Option<f64>,
}

impl Run {
    /// From a file's entry of `fatpipe cp --json`.
    fn from_json(file: &serde_json::Value) -> Run {
        let bytes = file["bytes"].as_f64().unwrap_or(0.0);
        let secs = file["data_seconds"].as_f64().unwrap_or(f64::NAN);
        Run {
            mbit_s: bytes * 8.0 / secs / 1e6,
            local: file["peak_buffer"].as_f64(),
            peer: file["peer_peak_buffer"].as_f64(),
            streams: file["streams"].as_f64(),
        }
    }

    /// Each figure's median over `runs` (the upper one of an even count).
    fn median(runs: &[Run]) -> Run {
        let mid = |get: &dyn Fn(&Run) -> Option<f64>| {
            let mut v: Vec<f64> = runs
                .iter()
                .filter_map(get)
                .filter(|x| !x.is_nan())
                .collect();
            v.sort_by(f64::total_cmp);
            v.get(v.len() / 2).copied()
        };
        Run {
            mbit_s: mid(&|r| Some(r.mbit_s)).unwrap_or(f64::NAN),
            local: mid(&|r| r.local),
            peer: mid(&|r| r.peer),
            streams: mid(&|r| r.streams),
        }
    }
}

struct Quiet;

impl Observer for Quiet {
    fn file_started(&self, _: &str, _: Option<u64>, _: u64, _: &Arc<Pump>) {}
    fn file_finished(&self, _: &FileResult) {}
}

fn loopback(a: &Args, dir: &Path, out: &mut dyn Write) -> anyhow::Result<()> {
    let mut config = ServerConfig::new(dir.to_path_buf());
    config.listen = "127.0.0.1:0".parse()?;
    config.anonymous = Anonymous::ReadOnly;
    let rt = tokio::runtime::Runtime::new()?;
    let server = rt.block_on(Server::bind(config))?;
    let addr = server.local_addr()?;
    rt.spawn(server.run());
    writeln!(
        out,
        "fatpipe demo: {} MiB over loopback (ftp://{addr}/demo.bin -> /dev/null)",
        a.size_mib
    )?;
    let src = Location::Remote(RemoteUrl {
        host: addr.ip().to_string(),
        port: addr.port(),
        port_given: true,
        user: None,
        password: None,
        path: "/demo.bin".into(),
    });
    let dst = Location::Local("/dev/null".into());
    let opts = CopyOptions {
        concurrency: None,
        // The demo server has no certificate: no AUTH TLS round trip.
        tls: TlsPolicy::new(TlsMode::Off, None),
        verify: Verify::Off,
        ..CopyOptions::default()
    };
    let results = copy_command::run(&[src], &dst, &Credentials::anonymous(), &opts, &Quiet)?;
    let r = results.first().context("nothing was copied")?;
    if let Some(err) = &r.error {
        bail!("demo transfer failed: {err}");
    }
    let secs = r.data_seconds.unwrap_or(f64::NAN);
    writeln!(
        out,
        "fatpipe demo: {} bytes, data phase {secs:.2} s = {:.0} Mbit/s",
        r.bytes,
        r.bytes as f64 * 8.0 / secs / 1e6
    )?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_row_shows_each_figures_median() {
        let run = |mbit_s, local, peer| Run {
            mbit_s,
            local: Some(local),
            peer,
            streams: None,
        };
        let rows = [
            run(600.0, 30.0, Some(9.0)),
            run(300.0, 10.0, None),
            run(650.0, 20.0, Some(7.0)),
        ];
        let m = Run::median(&rows);
        assert_eq!((m.mbit_s, m.local, m.peer), (600.0, Some(20.0), Some(9.0)));
        assert_eq!(m.streams, None);
        let one = Run::median(&rows[1..2]);
        assert_eq!((one.mbit_s, one.peer), (300.0, None));
    }
}
