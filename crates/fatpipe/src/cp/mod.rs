//! `fatpipe cp`: copy a file or tree, with a progress bar on a terminal and a summary at the end.

use crate::credentials;
use crate::selection::Selection;

mod https;
mod report;
use crate::progress::{Finished, Progress};
use crate::tuning::TuneArgs;
use anyhow::Context;
use fatpipe_ftp::client::auto::{self, AutoPlan};
use fatpipe_ftp::client::copy::{CopyOptions, Ending, ServerFeatures, Summary, Verify};
use fatpipe_ftp::client::copy_command;
use fatpipe_ftp::client::path_memory;
use fatpipe_ftp::client::sync::Existing;
use fatpipe_ftp::client::transport::Asked;
use fatpipe_ftp::client::{relay, Location, RemoteUrl, Streams};
use fatpipe_net::rate_budget::RateBudget;
use fatpipe_net::udp::UdpConfig;
use fatpipe_proto::udp::NetStack;
use fatpipe_tune::rate::{RateControlKind, RateMemory};
use std::process::ExitCode;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Options of `fatpipe cp`.
#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    files: Selection,
    /// Make missing directories at the destination (always done with -r and several sources).
    #[arg(long)]
    create_dirs: bool,
    /// Copy the files listed in FILE (one per line, relative to the one source directory;
    /// blank lines and lines starting with # are skipped; `-`: standard input).
    #[arg(long, value_name = "FILE")]
    from: Option<std::path::PathBuf>,
    /// Continue partial destination files instead of replacing them, and skip those already
    /// complete (same size and checksum): a re-run copies only what is missing.
    #[arg(long)]
    resume: bool,
    /// Between two HTTPS servers: where the destination cannot pull a file itself (it refuses
    /// the third-party COPY, or the copy fails), stream it through this machine instead (a GET
    /// from the source sent on as a PUT to the destination). Without it a third-party copy
    /// never passes through here.
    #[arg(long)]
    streamed_fallback: bool,
    /// Leave files that exist at the destination as they are.
    #[arg(long, conflicts_with_all = ["update", "resume"])]
    no_clobber: bool,
    /// Replace a destination only when the source is newer (or as old with another size).
    #[arg(short = 'u', long, conflicts_with = "resume")]
    update: bool,
    /// Say what would be copied, left out and deleted; change nothing, make no directory.
    #[arg(long)]
    dry_run: bool,
    /// Mirror: remove from the destination's directories what the source's do not hold
    /// (names --exclude leaves out are kept). Needs -r.
    #[arg(long, requires = "recursive")]
    delete: bool,
    /// Most this copy moves per second, over all its files, streams and sessions together
    /// (e.g. 100mbit, 1gbit).
    #[arg(long, value_name = "RATE", value_parser = fatpipe_wanem::units::parse_rate)]
    limit_rate: Option<u64>,
    /// Most each file moves per second, over all its streams.
    #[arg(long, value_name = "RATE", value_parser = fatpipe_wanem::units::parse_rate)]
    limit_rate_per_file: Option<u64>,
    /// Print a JSON summary (to standard output, or standard error when the data goes there).
    #[arg(long)]
    json: bool,
    /// Print nothing but errors: no progress, no summary, no warnings.
    #[arg(short, long)]
    quiet: bool,
    #[command(flatten)]
    session: credentials::SessionArgs,
    /// After a connection breaks (reset, refused while the server restarts, silent past
    /// --timeout), keep trying the file over new sessions, continuing from what arrived, for
    /// this long from its first failure (0: never).
    #[arg(long, default_value = "5m", value_parser = humantime::parse_duration)]
    retry_for: Duration,
    /// Data connections per file: a number, or `auto` (start with one; open more while the
    /// buffers, not the path, hold the transfer back; each later file of the copy starts with
    /// the count the previous one ended with, and the first file where the last copy to the
    /// same server ended, within the hour; streams paced). More than one uses GridFTP MODE E and
    /// needs a server with the PARALLEL feature (fatpipe, globus-gridftp-server); with other
    /// servers the copy uses one stream in MODE S.
    #[arg(short = 'p', long = "parallel", default_value = "auto", value_parser = parse_streams)]
    parallel: CountArg,
    /// Files copied at once, each over a control connection of its own: a number (1-16), or
    /// `auto` (for four or more files of less than 64 MiB on average four, or eight where the server is 50 ms or more away; else one).
    #[arg(long, default_value = "auto", value_parser = parse_concurrency)]
    concurrency: CountArg,
    /// Most data connections `-p auto` opens.
    #[arg(long, default_value_t = 16, value_parser = clap::value_parser!(u32).range(1..=64))]
    max_streams: u32,
    /// `-p auto` starts from one stream, ignoring (and not updating) the count the last copy to
    /// the same server ended with (kept for an hour in $XDG_CACHE_HOME/fatpipe/paths.json).
    #[arg(long)]
    no_path_memory: bool,
    /// Bound on this end's socket-buffer memory over all streams of `-p auto` (e.g. 256M, 1G).
    #[arg(long, default_value = "256M", value_parser = fatpipe_tune::size::parse_size)]
    max_memory: u64,
    /// Compare each file's checksum with the server's (CKSM) after the copy. Default: when
    /// the server is a fatpipe (fast XXH3 on both ends).
    #[arg(long, conflicts_with = "no_verify")]
    verify: bool,
    /// Never compare checksums.
    #[arg(long)]
    no_verify: bool,
    /// How the data moves: tcp; udp (UDP packets paced by a rate controller, lost ones resent
    /// selectively: for long paths with random loss; needs a fatpipe server, one data
    /// connection, no TLS on data); or auto: udp for one file where the last copy to the same
    /// server (within the hour, -p auto's path memory) met random loss, or where the server is
    /// new and the path long (a round trip of 50 ms or more; a file of up to 2 GiB per 100 ms
    /// of it), tcp otherwise (a download or upload that meets random loss goes on over udp)
    /// and once a copy over udp found the loss gone. A server without the channel gets tcp.
    #[arg(long, default_value = "auto", value_parser = Asked::parse)]
    transport: Asked,
    /// The UDP channel's rate controller: default (holds its rate through random loss, yields
    /// when a queue builds), history or state (the FOBS paper's two).
    #[arg(long, default_value = "default", value_parser = parse_control)]
    udp_rate_control: RateControlKind,
    /// The UDP channel's line rate: the most it sends (e.g. 1gbit, 500mbit); history and state
    /// step by a twentieth of it. Default: 100gbit for default, 1gbit for history and state.
    #[arg(long, value_parser = fatpipe_wanem::units::parse_rate)]
    udp_rate: Option<u64>,
    #[command(flatten)]
    tune: TuneArgs,
}

impl Args {
    /// `-q`: no progress, no summary, no warnings; errors only.
    pub fn quiet(&self) -> bool {
        self.quiet
    }
}

fn parse_control(s: &str) -> Result<RateControlKind, String> {
    RateControlKind::parse(s).ok_or_else(|| format!("'{s}': default, history or state"))
}

/// A count given as a number or `auto` (`-p`, `--concurrency`).
#[derive(Debug, Clone, Copy)]
enum CountArg {
    Fixed(u32),
    Auto,
}

impl CountArg {
    /// The number, or `None` for `auto`.
    fn fixed(self) -> Option<u32> {
        match self {
            CountArg::Fixed(n) => Some(n),
            CountArg::Auto => None,
        }
    }
}

/// `auto` or a number from 1 to `max` of `what`.
fn parse_count(s: &str, max: u32, what: &str) -> Result<CountArg, String> {
    if s.eq_ignore_ascii_case("auto") {
        return Ok(CountArg::Auto);
    }
    match s.parse::<u32>() {
        Ok(n) if (1..=max).contains(&n) => Ok(CountArg::Fixed(n)),
        _ => Err(format!(
            "'{s}': give a number of {what} from 1 to {max}, or auto"
        )),
    }
}

fn parse_streams(s: &str) -> Result<CountArg, String> {
    parse_count(s, 64, "streams")
}

fn parse_concurrency(s: &str) -> Result<CountArg, String> {
    parse_count(s, 16, "files")
}

/// Runs the copy; the exit code says how it failed, if it did (docs/exit-codes.md). `verbose`
/// adds how the tuning and the streams went to the summary. With `--json`, a failure before
/// the first file is a JSON object too.
pub fn run(a: Args, verbose: bool) -> anyhow::Result<ExitCode> {
    let https = |p: &String| credentials::is_https(p);
    if a.streamed_fallback && !(a.files.paths.len() == 2 && a.files.paths.iter().all(https)) {
        tracing::warn!("--streamed-fallback applies to copies between two HTTPS servers only");
    }
    let copied = match a.files.paths.iter().any(https) {
        true => https::run(&a, verbose),
        false => copy_all(&a, verbose),
    };
    match copied {
        Ok(code) => Ok(code),
        Err(e) if a.json => {
            say!("fatpipe: error: {e:#}");
            let summary = Summary::before_first_file(&e);
            report::print_json(&summary, a.files.paths.last().is_some_and(|d| d == "-"))?;
            Ok(ExitCode::from(summary.exit_code))
        }
        Err(e) => Err(e),
    }
}

/// The copy itself (see [`run`]).
fn copy_all(a: &Args, verbose: bool) -> anyhow::Result<ExitCode> {
    let ends = a.files.endpoints("fatpipe cp SRC... DST")?;
    let (srcs, dst, creds) = (&ends.srcs, &ends.dst, &ends.creds);
    let remote = ends.remote();
    let mut tune = a.tune.config("client")?;
    let sources = &a.files.paths[..a.files.paths.len().saturating_sub(1)];
    let server = remote.map(RemoteUrl::server);
    let request = auto::Request {
        srcs,
        dst,
        server: server.as_deref(),
        several: auto::several_at_once(sources, a.files.recursive || a.from.is_some()),
        transport: a.transport,
        streams_asked: matches!(a.parallel, CountArg::Fixed(_)),
    };
    // `-p auto` remembers per server where its streams ended, for the next copy.
    let remember = matches!(a.parallel, CountArg::Auto) && !a.no_path_memory;
    let memory = remember.then(path_memory::default_path).flatten();
    let plan = AutoPlan::new(&request, memory, &mut tune.cc);
    let transport = &plan.transport;
    let stats = tune.stats.clone();
    let progress = Progress::new(
        a.quiet,
        (transport.udp || transport.leave_tcp_on_loss).then(Default::default),
    )?;
    tune.live = Some(progress.live.clone());
    let udp_channel = || udp_choice(a, stats.clone(), &progress, plan.udp_learned());
    let opts = CopyOptions {
        recursive: a.files.recursive,
        create_dirs: a.create_dirs,
        filter: a.files.filter()?,
        from: a.from.as_deref().map(read_list).transpose()?,
        concurrency: a.concurrency.fixed(),
        limit_rate: a.limit_rate_per_file,
        total_rate: a.limit_rate.map(|r| Arc::new(RateBudget::new(r))),
        resume: a.resume,
        existing: match (a.no_clobber, a.update) {
            (true, _) => Existing::Keep,
            (_, true) => Existing::Older,
            _ => Existing::Replace,
        },
        dry_run: a.dry_run,
        delete: a.delete,
        timeout: a.session.timeout,
        tls: a.session.tls(),
        retry_for: a.retry_for,
        tune: Some(tune),
        streams: match a.parallel {
            CountArg::Fixed(n) => Streams::Fixed(n),
            CountArg::Auto => Streams::Auto {
                max: a.max_streams,
                max_memory: Some(a.max_memory),
            },
        },
        first_start: plan.first_start(),
        verify: if a.verify {
            Verify::On
        } else if a.no_verify {
            Verify::Off
        } else {
            Verify::Auto
        },
        udp: transport.udp.then(udp_channel),
        udp_asked: transport.asked,
        udp_on_random_loss: transport.leave_tcp_on_loss.then(udp_channel),
        udp_if_long: transport.udp_if_long,
        features: ServerFeatures::new(server.as_deref(), plan.known_features()),
    };
    let started = Instant::now();
    let results = std::thread::scope(|s| {
        s.spawn(|| progress.tick_until_done());
        let _stop = Finished(&progress.done);
        match (srcs.as_slice(), dst) {
            // Between two servers: the data goes straight from one to the other.
            ([src @ Location::Remote(_)], Location::Remote(to)) => {
                let to_creds = credentials::for_url(to)?;
                relay::relay(src, dst, (creds, &to_creds), &opts, &progress)
            }
            _ => copy_command::run(srcs, dst, creds, &opts, &progress),
        }
    })?;
    progress.bar.finish_and_clear();
    let interrupted = progress.interrupted.load(Ordering::SeqCst);
    // What the UDP sender learned, on the channel asked for or the one `auto` took.
    let channel = opts.udp.as_ref().or(opts.udp_on_random_loss.as_ref());
    let udp = channel.and_then(|(_, u)| u.memory.as_ref());
    let learned = udp.and_then(|m| m.lock().ok().map(|m| m.clone()));
    let transport = plan.finish(&results, learned, opts.features.seen());
    let ending = Ending {
        results: &results,
        interrupted,
        seconds: started.elapsed().as_secs_f64(),
        transport,
        dry_run: a.dry_run,
    };
    report::finish(a, &ending, verbose, *dst == Location::Stdout)
}

/// `--transport udp`: what the server is told and this end's side of the channel, starting
/// from what the last copy over UDP to the same server `learned` (path memory).
fn udp_choice(
    a: &Args,
    stats: Option<fatpipe_net::telemetry::StatsFile>,
    progress: &Progress,
    learned: Option<RateMemory>,
) -> (NetStack, UdpConfig) {
    let control = a.udp_rate_control;
    let line = control.line();
    // --limit-rate caps the controller (a UDP receiver that waited would lose packets).
    let max_rate = a
        .udp_rate
        .map_or(line, |r| r as f64)
        .min(a.limit_rate.map_or(f64::INFINITY, |l| l as f64))
        .min(a.limit_rate_per_file.map_or(f64::INFINITY, |l| l as f64));
    let stack = NetStack {
        udp: true,
        control: Some(control.to_string()),
        rate: Some(max_rate as u64),
        start: None,
    };
    let config = UdpConfig {
        control,
        max_rate,
        timeout: a.session.timeout,
        force_buffers: !a.tune.no_force_buffers,
        stats,
        status: progress.udp.clone(),
        memory: Some(Arc::new(Mutex::new(learned.unwrap_or_default()))),
        ..UdpConfig::default()
    };
    (stack, config)
}

/// The names of a `--from` list (`-`: standard input): one a line, blank lines and `#`
/// comments skipped.
fn read_list(path: &std::path::Path) -> anyhow::Result<Vec<String>> {
    let text = if path == std::path::Path::new("-") {
        std::io::read_to_string(std::io::stdin())?
    } else {
        std::fs::read_to_string(path)
            .with_context(|| format!("cannot read the --from list {}", path.display()))?
    };
    Ok(text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(str::to_string)
        .collect())
}
