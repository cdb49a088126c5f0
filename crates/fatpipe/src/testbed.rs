//! `fatpipe testbed`: the WAN emulator from the shell. `up` starts a detached daemon that holds
//! the path (state in /run/fatpipe/testbed/NAME); the other subcommands find it there.

use anyhow::{bail, Context};
use fatpipe_wanem::link::LinkStats;
use fatpipe_wanem::schedule::{Change, Schedule};
use fatpipe_wanem::testbed::{namespace, Profile};
use fatpipe_wanem::units::{self, QueueLimit};
use fatpipe_wanem::{netns, Side, Testbed, TestbedConfig};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

/// Subcommands of `fatpipe testbed`.
#[derive(clap::Subcommand, Debug)]
pub enum Cmd {
    /// Build the emulated path (namespaces a and b joined by the delay line) and keep it up.
    Up(PathArgs),
    /// Print a side's IPv4 address.
    Addr {
        #[arg(value_parser = parse_side)]
        side: Side,
        #[arg(long, default_value = "fatpipe")]
        name: String,
    },
    /// Run a command inside a side's namespace: `fatpipe testbed exec a -- iperf3 -c …`.
    Exec {
        #[arg(value_parser = parse_side)]
        side: Side,
        #[arg(long, default_value = "fatpipe")]
        name: String,
        #[arg(trailing_var_arg = true, required = true)]
        command: Vec<String>,
    },
    /// Per-direction counters: packets, bytes, drops by cause, release lateness.
    Stats {
        #[arg(long, default_value = "fatpipe")]
        name: String,
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Take the path down and remove its namespaces.
    Down {
        #[arg(long, default_value = "fatpipe")]
        name: String,
    },
    /// The process that holds the path (started by `up`).
    #[command(hide = true)]
    Daemon(PathArgs),
}

/// The path's settings.
#[derive(clap::Args, Debug, Clone)]
pub struct PathArgs {
    /// Round-trip time (each direction gets half), e.g. 100ms.
    #[arg(long, value_parser = units::parse_duration)]
    rtt: Duration,
    /// Bottleneck rate per direction, e.g. 1gbit, 200mbit.
    #[arg(long, value_parser = units::parse_rate)]
    rate: u64,
    /// Drop-tail queue limit: 1bdp, 0.5bdp, 100p (packets), 256kb.
    #[arg(long, default_value = "1bdp", value_parser = QueueLimit::parse)]
    queue: QueueLimit,
    /// Random loss per direction: 0.01 or 1%.
    #[arg(long, default_value = "0", value_parser = units::parse_loss)]
    loss: f64,
    /// Settings of the b -> a direction where they differ, e.g. "rate=20mbit delay=30ms loss=0.001"
    /// (keys rate, delay, rtt, loss, queue; the rest as for a -> b).
    #[arg(long, value_name = "KEY=VALUE …")]
    reverse: Option<String>,
    /// Schedule file of `TIME key=value…` lines (rate, rtt, delay, loss, queue; `repeat PERIOD`).
    #[arg(long)]
    schedule: Option<PathBuf>,
    /// TCP profile of both namespaces: stock (kernel defaults, cubic) or tuned (256 MiB buffer maximum, cubic).
    #[arg(long, default_value = "stock", value_parser = Profile::parse)]
    profile: Profile,
    /// Seed of the loss pattern.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Name of the testbed (namespaces NAME-a and NAME-b); several can be up at once.
    #[arg(long, default_value = "fatpipe")]
    name: String,
}

impl PathArgs {
    /// The same settings as command-line arguments (for the daemon).
    fn to_args(&self) -> anyhow::Result<Vec<String>> {
        let mut v = vec![
            format!("--rtt={}us", self.rtt.as_micros()),
            format!("--rate={}bit", self.rate),
            format!("--queue={}", self.queue),
            format!("--loss={}", self.loss),
            format!(
                "--profile={}",
                if self.profile == Profile::Tuned {
                    "tuned"
                } else {
                    "stock"
                }
            ),
            format!("--seed={}", self.seed),
            format!("--name={}", self.name),
        ];
        if let Some(r) = &self.reverse {
            v.push(format!("--reverse={r}"));
        }
        if let Some(f) = &self.schedule {
            let abs = f
                .canonicalize()
                .with_context(|| format!("cannot read schedule {}", f.display()))?;
            v.push(format!("--schedule={}", abs.display()));
        }
        Ok(v)
    }
}

fn parse_side(s: &str) -> Result<Side, String> {
    match s {
        "a" | "A" => Ok(Side::A),
        "b" | "B" => Ok(Side::B),
        _ => Err(format!("side {s:?}: a or b")),
    }
}

fn state_dir(name: &str) -> PathBuf {
    PathBuf::from("/run/fatpipe/testbed").join(name)
}

/// Runs a testbed subcommand.
pub fn run(cmd: Cmd) -> anyhow::Result<ExitCode> {
    match cmd {
        Cmd::Up(a) => up(a),
        Cmd::Daemon(a) => daemon(a),
        Cmd::Addr { side, name } => {
            require_up(&name)?;
            out!("{}", Testbed::addr(side));
            Ok(ExitCode::SUCCESS)
        }
        Cmd::Exec {
            side,
            name,
            command,
        } => {
            require_up(&name)?;
            let err = Command::new("ip")
                .args(["netns", "exec", &namespace(&name, side)])
                .args(&command)
                .exec();
            Err(err).context("cannot run ip netns exec")
        }
        Cmd::Stats { name, json } => stats(&name, json),
        Cmd::Down { name } => {
            if down(&name)? {
                say!("testbed {name} is down");
            } else {
                say!("no testbed {name} was up");
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}

fn require_up(name: &str) -> anyhow::Result<()> {
    if !state_dir(name).join("pid").exists() {
        bail!("no testbed {name} is up (start one with `fatpipe testbed up`)");
    }
    Ok(())
}

fn config(a: &PathArgs) -> anyhow::Result<TestbedConfig> {
    let mut c = TestbedConfig::new(&a.name, a.rtt, a.rate);
    c.link.queue = a.queue;
    c.link.loss = a.loss;
    c.profile = a.profile;
    c.seed = a.seed;
    if let Some(r) = &a.reverse {
        let change =
            Change::parse(r.split_whitespace()).map_err(|e| anyhow::anyhow!("--reverse: {e}"))?;
        c.reverse = Some(change.apply(c.link));
    }
    if let Some(f) = &a.schedule {
        c.schedule = Some(Schedule::load(f).map_err(anyhow::Error::msg)?);
    }
    Ok(c)
}

fn up(a: PathArgs) -> anyhow::Result<ExitCode> {
    let cfg = config(&a)?; // check everything before touching the system
                           // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        bail!("fatpipe testbed needs root: it creates network namespaces and TUN devices");
    }
    if down(&a.name)? {
        say!("removed a leftover testbed {}", a.name);
    }
    let exe = std::env::current_exe()?;
    let mut cmd = Command::new(exe);
    cmd.args(["testbed", "daemon"]).args(a.to_args()?);
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .process_group(0);
    let mut child = cmd.spawn().context("cannot start the testbed daemon")?;
    let mut line = String::new();
    if let Some(out) = child.stdout.take() {
        BufReader::new(out).read_line(&mut line)?;
    }
    if line.trim() != "ready" {
        let _ = child.wait();
        let reason = line
            .trim()
            .strip_prefix("error: ")
            .unwrap_or("the daemon exited without a word");
        bail!("the testbed did not come up: {reason}");
    }
    out!(
        "testbed {} up: a = {} (netns {}), b = {} (netns {}); rtt {:?}, rate {} bit/s, queue {}, loss {}, profile {:?}",
        cfg.name,
        Testbed::addr(Side::A),
        namespace(&cfg.name, Side::A),
        Testbed::addr(Side::B),
        namespace(&cfg.name, Side::B),
        a.rtt,
        a.rate,
        a.queue,
        a.loss,
        a.profile
    );
    Ok(ExitCode::SUCCESS)
}

/// Stops a testbed's daemon (by the PID it recorded) and removes its namespaces and state;
/// returns whether there was anything to remove.
fn down(name: &str) -> anyhow::Result<bool> {
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

fn daemon(a: PathArgs) -> anyhow::Result<ExitCode> {
    let dir = state_dir(&a.name);
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
    let setup = || -> anyhow::Result<Testbed> {
        std::fs::create_dir_all(&dir)
            .with_context(|| format!("cannot create {}", dir.display()))?;
        let tb = config(&a).and_then(Testbed::up)?;
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
        match setup() {
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
    Ok(ExitCode::SUCCESS)
}

fn stats(name: &str, json: bool) -> anyhow::Result<ExitCode> {
    require_up(name)?;
    let text =
        std::fs::read_to_string(state_dir(name).join("stats.json")).context("no statistics yet")?;
    if json {
        out!("{text}");
        return Ok(ExitCode::SUCCESS);
    }
    let s: [LinkStats; 2] = serde_json::from_str(&text)?;
    out!(
        "{:<6} {:>12} {:>14} {:>12} {:>14} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10}",
        "dir",
        "pkts in",
        "bytes in",
        "pkts out",
        "bytes out",
        "drop loss",
        "drop queue",
        "drop write",
        "late max",
        "late mean",
        ">1ms late"
    );
    for (label, d) in ["a->b", "b->a"].iter().zip(s.iter()) {
        let mean = d.late_sum_us.checked_div(d.packets_out).unwrap_or(0);
        out!(
            "{label:<6} {:>12} {:>14} {:>12} {:>14} {:>10} {:>10} {:>10} {:>8}us {:>8}us {:>10}",
            d.packets_in,
            d.bytes_in,
            d.packets_out,
            d.bytes_out,
            d.drops_loss,
            d.drops_queue,
            d.drops_write,
            d.late_max_us,
            mean,
            d.late_over_1ms
        );
    }
    Ok(ExitCode::SUCCESS)
}
