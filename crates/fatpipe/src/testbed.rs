//! `fatpipe testbed`: the WAN emulator from the shell. `up` starts a detached daemon (this
//! binary's `testbed daemon`, `fatpipe_wanem::daemon::hold`) that holds the path; the other
//! subcommands find it through `fatpipe_wanem::daemon`.

use anyhow::{bail, Context};
use fatpipe_wanem::link::LinkParams;
use fatpipe_wanem::schedule::{Change, Schedule};
use fatpipe_wanem::testbed::{namespace, Profile};
use fatpipe_wanem::units::{self, QueueLimit};
use fatpipe_wanem::{daemon, Side, Testbed, TestbedConfig};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Command, ExitCode, Stdio};
use std::time::Duration;

/// Subcommands of `fatpipe testbed`.
#[derive(clap::Subcommand, Debug)]
pub enum Cmd {
    /// Build the emulated path (namespaces a and b joined by the delay line) and keep it up.
    Up(PathArgs),
    /// Print a side's IPv4 address; without a side, every testbed that is up with both
    /// sides' addresses and namespaces.
    Addr {
        #[arg(value_parser = parse_side)]
        side: Option<Side>,
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
    /// Constant cross traffic in the a -> b direction, e.g. 640mbit: 1428-byte packets that enter
    /// the bottleneck queue at exact times and leave the path there (a UDP background that no
    /// scheduling on this host makes bursty; b -> a takes it with --reverse cross=RATE).
    #[arg(long, default_value = "0", value_parser = units::parse_cross)]
    cross: u64,
    /// Settings of the b -> a direction where they differ, e.g. "rate=20mbit delay=30ms loss=0.001"
    /// (keys rate, delay, rtt, loss, queue, cross; the rest as for a -> b, without its cross traffic).
    #[arg(long, value_name = "KEY=VALUE …")]
    reverse: Option<String>,
    /// Schedule file of `TIME key=value…` lines (rate, rtt, delay, loss, queue, cross; `repeat PERIOD`).
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
            format!("--cross={}", self.cross),
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

/// Runs a testbed subcommand.
pub fn run(cmd: Cmd) -> anyhow::Result<ExitCode> {
    match cmd {
        Cmd::Up(a) => up(a),
        Cmd::Daemon(a) => {
            daemon::hold(config(&a)?)?;
            Ok(ExitCode::SUCCESS)
        }
        Cmd::Addr {
            side: Some(side),
            name,
        } => {
            daemon::require_up(&name)?;
            out!("{}", Testbed::addr(side));
            Ok(ExitCode::SUCCESS)
        }
        Cmd::Addr { side: None, .. } => {
            let up = daemon::up();
            if up.is_empty() {
                say!("fatpipe: no testbed is up (start one with `fatpipe testbed up`)");
            }
            for name in up {
                out!(
                    "{name}: a = {} (netns {}), b = {} (netns {})",
                    Testbed::addr(Side::A),
                    namespace(&name, Side::A),
                    Testbed::addr(Side::B),
                    namespace(&name, Side::B)
                );
            }
            Ok(ExitCode::SUCCESS)
        }
        Cmd::Exec {
            side,
            name,
            command,
        } => {
            daemon::require_up(&name)?;
            let err = Command::new("ip")
                .args(["netns", "exec", &namespace(&name, side)])
                .args(&command)
                .exec();
            Err(err).context("cannot run ip netns exec")
        }
        Cmd::Stats { name, json } => stats(&name, json),
        Cmd::Down { name } => {
            if daemon::down(&name)? {
                say!("testbed {name} is down");
            } else {
                say!("no testbed {name} was up");
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}

fn config(a: &PathArgs) -> anyhow::Result<TestbedConfig> {
    let mut c = TestbedConfig::new(&a.name, a.rtt, a.rate);
    c.link.queue = a.queue;
    c.link.loss = a.loss;
    c.link.cross_bps = a.cross;
    c.profile = a.profile;
    c.seed = a.seed;
    let back = LinkParams {
        cross_bps: 0,
        ..c.link
    };
    if let Some(r) = &a.reverse {
        let change =
            Change::parse(r.split_whitespace()).map_err(|e| anyhow::anyhow!("--reverse: {e}"))?;
        c.reverse = Some(change.apply(back));
    } else if a.cross > 0 {
        c.reverse = Some(back);
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
    if daemon::down(&a.name)? {
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
    let ready = match child.stdout.take() {
        Some(out) => daemon::wait_ready(out),
        None => Err(anyhow::anyhow!("the testbed daemon has no output")),
    };
    if let Err(e) = ready {
        let _ = child.wait();
        return Err(e);
    }
    out!(
        "testbed {} up: a = {} (netns {}), b = {} (netns {}); rtt {}, rate {}, queue {}, loss {}, cross traffic a->b {}, profile {}",
        cfg.name,
        Testbed::addr(Side::A),
        namespace(&cfg.name, Side::A),
        Testbed::addr(Side::B),
        namespace(&cfg.name, Side::B),
        humantime::format_duration(a.rtt),
        crate::progress::rate_text(a.rate as f64),
        a.queue,
        a.loss,
        crate::progress::rate_text(a.cross as f64),
        a.profile.name()
    );
    Ok(ExitCode::SUCCESS)
}

fn stats(name: &str, json: bool) -> anyhow::Result<ExitCode> {
    let (s, text) = daemon::stats(name)?;
    if json {
        out!("{text}");
        return Ok(ExitCode::SUCCESS);
    }
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
        if d.cross_bytes_in > 0 {
            out!(
                "{label:<6} cross traffic: {} bytes offered, {} packets dropped by the full queue",
                d.cross_bytes_in,
                d.cross_drops_queue
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}
