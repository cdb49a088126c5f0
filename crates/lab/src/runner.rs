//! One measured run: a fresh emulated path, the server in b, the client in a, samplers of
//! socket memory in both, then the measurements and a full teardown.

use crate::measure::{retrans_segs, sum_skmem, BufferSums};
use crate::tools::Case;
use anyhow::{bail, Context};
use fatpipe_wanem::{Side, Testbed, TestbedConfig};
use serde::{Deserialize, Serialize};
use std::io::Read;
use std::os::unix::process::CommandExt;
use std::process::{Child, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

/// What one run measured.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RunResult {
    /// Payload bytes over the data phase (first to last full-size packet in the direction that
    /// carried the data), Mbit/s.
    pub mbit_s: f64,
    /// Length of the data phase, seconds.
    pub data_seconds: f64,
    /// Wall time of the client command, seconds (includes login and set-up).
    pub wall_seconds: f64,
    /// Segments retransmitted by the sending side (its namespace's TCP counters).
    pub retrans: u64,
    /// Peak of the receive buffers summed over the receiving side's sockets, bytes.
    pub peak_rb_receiver: u64,
    /// Peak of the send buffers summed over the sending side's sockets, bytes.
    pub peak_tb_sender: u64,
}

const SAMPLE_EVERY: Duration = Duration::from_millis(100);

/// Set by SIGINT, SIGTERM or SIGHUP once [`catch_interrupts`] ran: the run in progress stops and
/// cleans up (processes, namespaces) instead of dying with them in place.
static INTERRUPTED: OnceLock<Arc<AtomicBool>> = OnceLock::new();

/// Turns SIGINT, SIGTERM and SIGHUP into a request to stop after cleaning up.
pub fn catch_interrupts() -> std::io::Result<()> {
    let flag = INTERRUPTED.get_or_init(Arc::default);
    for sig in [
        signal_hook::consts::SIGINT,
        signal_hook::consts::SIGTERM,
        signal_hook::consts::SIGHUP,
    ] {
        signal_hook::flag::register(sig, flag.clone())?;
    }
    Ok(())
}

/// Whether a stop was requested (see [`catch_interrupts`]).
pub fn interrupted() -> bool {
    INTERRUPTED.get().is_some_and(|f| f.load(Ordering::SeqCst))
}

/// A process group started for a run, killed (by its PID) when dropped.
struct Group(Child);

impl Drop for Group {
    fn drop(&mut self) {
        // SAFETY: kill(2) on the process group this run created (negative PID = its group).
        unsafe { libc::kill(-(self.0.id() as libc::pid_t), libc::SIGKILL) };
        let _ = self.0.wait();
    }
}

/// Runs `case` once on a fresh path built from `cfg`; the test file has `bytes` bytes. `warm`:
/// the client runs once unmeasured first, on the same path and with the same cache (what a
/// tool remembers of the path, fatpipe's path memory, and the kernel's TCP metrics).
pub fn run_once(
    cfg: &TestbedConfig,
    case: &Case,
    bytes: u64,
    timeout: Duration,
    warm: bool,
) -> anyhow::Result<RunResult> {
    let tb = Testbed::up(cfg.clone())?;
    // Runs are independent: nothing a tool keeps between invocations (fatpipe's path memory)
    // carries from one run to the next.
    let cache_dir = tempfile::tempdir().context("cannot make the run's cache directory")?;
    let cache = cache_dir.path();
    let _server = if case.server.is_empty() {
        None
    } else {
        let g = start(&tb, Side::B, &case.server, cache, Stdio::null())
            .context("cannot start the server")?;
        wait_listening(&tb, case.port, Duration::from_secs(15))
            .with_context(|| format!("server of {} did not start", case.label))?;
        Some(g)
    };
    // Retransmissions of the warm-up, per side, left out of the run's.
    let mut retrans_before = [0, 0];
    if warm {
        let mut first = start(&tb, Side::A, &case.client, cache, Stdio::null())
            .context("cannot start the client")?;
        let status = wait_for(&mut first, &case.label, timeout)?;
        if !status.success() {
            bail!("{}'s warm-up run failed ({status})", case.label);
        }
        for (i, side) in [Side::A, Side::B].into_iter().enumerate() {
            retrans_before[i] = retransmitted(&tb, side)?;
        }
    }
    let stop = Arc::new(AtomicBool::new(false));
    let samplers = [Side::A, Side::B].map(|side| {
        let stop = stop.clone();
        tb.spawn_in(side, move || sample(&stop))
    });
    let started = Instant::now();
    let mut client = start(&tb, Side::A, &case.client, cache, Stdio::piped())
        .context("cannot start the client")?;
    let status = wait_for(&mut client, &case.label, timeout)?;
    let wall = started.elapsed().as_secs_f64();
    stop.store(true, Ordering::SeqCst);
    let [a, b] = samplers.map(|h| {
        h.join()
            .map_err(|_| anyhow::anyhow!("sampler panicked"))
            .and_then(|r| r)
    });
    let (a, b) = (a?, b?);
    if !status.success() {
        let mut err = String::new();
        if let Some(mut e) = client.0.stderr.take() {
            let _ = e.read_to_string(&mut err);
        }
        bail!("{} failed ({status}): {}", case.label, err.trim());
    }
    std::thread::sleep(Duration::from_millis(250)); // the emulator publishes its counters every 100 ms
                                                    // The data direction is the one that carried the bulk: b -> a for downloads, a -> b for uploads.
    let [ab, ba] = tb.stats();
    let (data, sender, recv_peak, send_peak) = if ab.bulk_bytes > ba.bulk_bytes {
        (ab, Side::A, b, a)
    } else {
        (ba, Side::B, a, b)
    };
    // The emulator's counters span the warm-up too: a warm run's data phase is its command.
    let phase = if warm {
        wall
    } else {
        data.bulk_phase()
            .context("no data crossed the path")?
            .as_secs_f64()
    };
    let before = retrans_before[usize::from(sender == Side::B)];
    let retrans = retransmitted(&tb, sender)?.saturating_sub(before);
    drop(client);
    tb.down()?;
    Ok(RunResult {
        mbit_s: bytes as f64 * 8.0 / phase / 1e6,
        data_seconds: phase,
        wall_seconds: wall,
        retrans,
        peak_rb_receiver: recv_peak.rb,
        peak_tb_sender: send_peak.tb,
    })
}

/// Segments retransmitted so far in `side`'s namespace (its TCP counters).
fn retransmitted(tb: &Testbed, side: Side) -> anyhow::Result<u64> {
    let snmp = tb.run_in(side, || {
        Ok(std::fs::read_to_string("/proc/thread-self/net/snmp")?)
    })?;
    Ok(retrans_segs(&snmp).unwrap_or(0))
}

/// Waits for a client started for a run to exit, `timeout` at most (or until interrupted).
fn wait_for(
    client: &mut Group,
    label: &str,
    timeout: Duration,
) -> anyhow::Result<std::process::ExitStatus> {
    let started = Instant::now();
    loop {
        if let Some(s) = client.0.try_wait()? {
            return Ok(s);
        }
        if started.elapsed() > timeout {
            bail!("{label} did not finish within {timeout:?}");
        }
        if interrupted() {
            bail!("interrupted");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Peaks of `ss -tm` buffer sums (and of UDP sockets) in the calling thread's namespace until
/// `stop`.
fn sample(stop: &AtomicBool) -> anyhow::Result<BufferSums> {
    let mut peak = BufferSums::default();
    let deadline = Instant::now() + Duration::from_secs(3600);
    while !stop.load(Ordering::SeqCst) && Instant::now() < deadline {
        // Connected TCP sockets, and every UDP socket (a UDP data channel's are unconnected).
        let mut listing = String::new();
        for args in ["-tmH", "-uamH"] {
            let out = std::process::Command::new("ss")
                .arg(args)
                .output()
                .context("cannot run ss (install iproute2)")?;
            listing.push_str(&String::from_utf8_lossy(&out.stdout));
        }
        let s = sum_skmem(&listing);
        peak.rb = peak.rb.max(s.rb);
        peak.tb = peak.tb.max(s.tb);
        std::thread::sleep(SAMPLE_EVERY);
    }
    Ok(peak)
}

/// Waits until something listens on TCP or UDP `port` in side b (checked with `ss`, not by
/// connecting: one-shot servers such as `iperf3 -s -1` would take a probe for their client;
/// UDP servers such as UDT4's count as listening once bound).
fn wait_listening(tb: &Testbed, port: u16, limit: Duration) -> anyhow::Result<()> {
    let filter = format!("sport = :{port}");
    tb.run_in(Side::B, move || {
        let deadline = Instant::now() + limit;
        while Instant::now() < deadline {
            let out = std::process::Command::new("ss")
                .args(["-ltunH", &filter])
                .output()?;
            if !out.stdout.is_empty() {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        bail!("nothing listens on port {port} after {limit:?}")
    })
}

/// Starts a shell command line in its own process group inside a side's namespace, with
/// `cache` as its `XDG_CACHE_HOME`.
fn start(
    tb: &Testbed,
    side: Side,
    script: &str,
    cache: &std::path::Path,
    stderr: Stdio,
) -> std::io::Result<Group> {
    let mut cmd = tb.command(side, "sh");
    cmd.args(["-c", script])
        .env("XDG_CACHE_HOME", cache)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(stderr)
        .process_group(0);
    cmd.spawn().map(Group)
}
