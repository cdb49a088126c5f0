//! `fatpipe lab`: run tools across emulated paths, several times each, and write the results
//! (JSON and a markdown table).

use anyhow::{bail, Context};
use fatpipe_lab::report::{markdown, CaseResult};
use fatpipe_lab::runner::run_once;
use fatpipe_lab::tools::{preset, Case, Context as ToolContext, PRESETS};
use fatpipe_tune::size::parse_size;
use fatpipe_wanem::schedule::Schedule;
use fatpipe_wanem::testbed::Profile;
use fatpipe_wanem::units::{self, QueueLimit};
use fatpipe_wanem::TestbedConfig;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

/// Options of `fatpipe lab`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Round-trip times to test (repeatable).
    #[arg(long = "rtt", required = true, value_parser = units::parse_duration)]
    rtts: Vec<Duration>,
    /// Bottleneck rate.
    #[arg(long, default_value = "1gbit", value_parser = units::parse_rate)]
    rate: u64,
    /// Drop-tail queue limit (1bdp, 100p, 256kb).
    #[arg(long, default_value = "1bdp", value_parser = QueueLimit::parse)]
    queue: QueueLimit,
    /// Random loss per direction (0.01 or 1%).
    #[arg(long, default_value = "0", value_parser = units::parse_loss)]
    loss: f64,
    /// TCP profile of both sides: stock or tuned.
    #[arg(long, default_value = "stock", value_parser = Profile::parse)]
    profile: Profile,
    /// A schedule file of path changes during each run (the `testbed up --schedule` format).
    #[arg(long)]
    schedule: Option<PathBuf>,
    /// Runs per tool and path.
    #[arg(long, default_value_t = 3)]
    runs: usize,
    /// Size of the transferred file in MiB.
    #[arg(long, default_value_t = 256, conflicts_with = "sizes")]
    size_mib: u64,
    /// Sizes of the transferred file (repeatable; 8K, 64M, ...); overrides --size-mib.
    #[arg(long = "size", value_parser = parse_size)]
    sizes: Vec<u64>,
    /// Tools to run (repeatable): iperf3, curl, globus, globus-p4, globus-p8, fatpipe,
    /// fatpipe:MODE (fatpipe with --tuning MODE at both ends), fatpipe:MODE/pN (and `cp -p N`;
    /// N may be auto). A suffix @tuned or @stock runs that tool on that TCP profile instead of
    /// --profile's (e.g. iperf3@tuned: the path's ceiling with buffers far above the BDP).
    /// Default: the first six.
    #[arg(long = "tool")]
    tools: Vec<String>,
    /// Extra options for every fatpipe command (e.g. "--stats /tmp/s.jsonl"). With the stock
    /// profile fatpipe also gets --no-force-buffers (the limits of an unprivileged user)
    /// unless --as-root says otherwise.
    #[arg(long, default_value = "", allow_hyphen_values = true)]
    fatpipe_args: String,
    /// Run fatpipe as a server usually runs: with root's power to force buffers past
    /// `rmem_max`, whatever the profile.
    #[arg(long)]
    as_root: bool,
    /// Measure each run warm: the client runs once unmeasured first on the same path, with the
    /// same cache (fatpipe's path memory, the kernel's TCP metrics). Default: cold.
    #[arg(long)]
    warm: bool,
    /// A server command for side b (shell; `{file}` and `{bytes}` are replaced), with --client and --port.
    #[arg(long, requires_all = ["client", "port"])]
    server: Option<String>,
    /// The client command for side a (shell); the run lasts while it runs and it must exit 0.
    #[arg(long, requires = "server")]
    client: Option<String>,
    /// The TCP or UDP port the --server command listens on.
    #[arg(long)]
    port: Option<u16>,
    /// Name of the custom case in the report.
    #[arg(long, default_value = "custom")]
    label: String,
    /// Give up on a run after this long.
    #[arg(long, default_value = "10m", value_parser = humantime::parse_duration)]
    timeout: Duration,
    /// Directory for results.json and results.md.
    #[arg(long, default_value = "results/lab")]
    out: PathBuf,
}

/// The cases `a` asks for, set up for one file, each with the TCP profile it runs on.
fn cases_for(
    a: &Args,
    ctx: &ToolContext,
    file: &std::path::Path,
) -> anyhow::Result<Vec<(Case, Profile)>> {
    let mut cases: Vec<(Case, Profile)> = Vec::new();
    let names: Vec<String> = if a.tools.is_empty() && a.server.is_none() {
        PRESETS.iter().map(|s| s.to_string()).collect()
    } else {
        a.tools.clone()
    };
    for n in &names {
        let (name, profile) = match n.rsplit_once('@') {
            Some((name, p)) => (name, Profile::parse(p).map_err(anyhow::Error::msg)?),
            None => (n.as_str(), a.profile),
        };
        let mut case = preset(name, ctx)
            .with_context(|| format!("unknown tool {n:?}; known: {}", PRESETS.join(", ")))?;
        if profile != a.profile {
            case.label = format!("{} @{}", case.label, profile_name(profile));
        }
        cases.push((case, profile));
    }
    if let (Some(server), Some(client), Some(port)) = (&a.server, &a.client, a.port) {
        let fill = |s: &str| {
            s.replace("{file}", &file.display().to_string())
                .replace("{bytes}", &ctx.bytes.to_string())
        };
        cases.push((
            Case {
                label: a.label.clone(),
                server: fill(server),
                port,
                client: fill(client),
            },
            a.profile,
        ));
    }
    if cases.is_empty() {
        bail!("nothing to run: give --tool or --server/--client/--port");
    }
    Ok(cases)
}

fn profile_name(p: Profile) -> &'static str {
    match p {
        Profile::Stock => "stock",
        Profile::Tuned => "tuned",
    }
}

/// Runs every case on every path and writes the results.
pub fn run(a: Args) -> anyhow::Result<ExitCode> {
    fatpipe_lab::runner::catch_interrupts()?;
    let dir = tempfile::Builder::new().prefix("fatpipe-lab").tempdir()?;
    std::fs::set_permissions(
        dir.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )?;
    let sizes = if a.sizes.is_empty() {
        vec![a.size_mib << 20]
    } else {
        a.sizes.clone()
    };
    let schedule = match &a.schedule {
        Some(f) => Some(Schedule::load(f).map_err(anyhow::Error::msg)?),
        None => None,
    };
    let file = dir.path().join("file");
    let exe = std::env::current_exe()?;
    let mut flags = a.fatpipe_args.clone();
    if a.profile == Profile::Stock && !a.as_root {
        flags.push_str(" --no-force-buffers");
    }
    std::fs::create_dir_all(&a.out)
        .with_context(|| format!("cannot create {}", a.out.display()))?;
    let mut results = Vec::new();
    for &bytes in &sizes {
        fatpipe_lab::demo::make_file(&file, bytes)?;
        std::fs::set_permissions(&file, std::os::unix::fs::PermissionsExt::from_mode(0o644))?;
        let ctx = ToolContext {
            dir: dir.path(),
            bytes,
            fatpipe: &exe,
            fatpipe_flags: &flags,
        };
        let cases = cases_for(&a, &ctx, &file)?;
        for rtt in &a.rtts {
            let mut cfg = TestbedConfig::new(
                &format!("lab{}", std::process::id() % 100_000),
                *rtt,
                a.rate,
            );
            cfg.link.queue = a.queue;
            cfg.link.loss = a.loss;
            cfg.schedule = schedule.clone();
            for (case, profile) in &cases {
                cfg.profile = *profile;
                let mut r = CaseResult {
                    label: case.label.clone(),
                    bytes,
                    rtt_ms: rtt.as_secs_f64() * 1e3,
                    rate_mbit: a.rate as f64 / 1e6,
                    profile: profile_name(*profile).into(),
                    ceiling_mbit: a.rate as f64 * 1448.0 / 1500.0 / 1e6,
                    runs: Vec::new(),
                    failures: Vec::new(),
                };
                for i in 0..a.runs {
                    eprint!(
                        "lab: {} at {:?}, run {}/{} ... ",
                        case.label,
                        rtt,
                        i + 1,
                        a.runs
                    );
                    std::io::stderr().flush()?;
                    match run_once(&cfg, case, bytes, a.timeout, a.warm) {
                        Ok(run) => {
                            say!("{:.0} Mbit/s, {} retransmissions", run.mbit_s, run.retrans);
                            r.runs.push(run);
                        }
                        Err(e) if fatpipe_lab::runner::interrupted() => {
                            say!("{e:#}");
                            bail!("interrupted; results so far are in {}", a.out.display());
                        }
                        Err(e) => {
                            say!("failed: {e:#}");
                            r.failures.push(format!("{e:#}"));
                        }
                    }
                }
                results.push(r);
                // Written after every case, so an interrupted lab keeps what it measured.
                std::fs::write(
                    a.out.join("results.json"),
                    serde_json::to_string_pretty(&results)?,
                )?;
                std::fs::write(a.out.join("results.md"), markdown(&results))?;
            }
        }
    }
    out!("{}", markdown(&results));
    say!(
        "lab: results in {}/results.json and results.md",
        a.out.display()
    );
    let failed = results.iter().any(|r| !r.failures.is_empty());
    Ok(if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}
