//! `fatpipe plot`: draws a `--stats` file (see `fatpipe_lab::plot::stats`, and `udp` for a
//! UDP transfer's rate decisions and packet-loss signatures).

use fatpipe_lab::plot::udp::UdpEvents;
use fatpipe_lab::plot::{parse_dims, stats};
use std::path::PathBuf;
use std::process::ExitCode;

/// Options of `fatpipe plot`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// A stats file written by `cp --stats` or `serve --stats` (of a UDP transfer: its rate
    /// decisions, queueing delay and packet-loss signatures are drawn).
    stats: PathBuf,
    /// The picture to write: .svg or .png.
    #[arg(short, long)]
    out: PathBuf,
    /// Draw only records of this tuning mode (a shared file may hold several transfers).
    #[arg(long)]
    tuning: Option<String>,
    /// Of a file several copies wrote (one after another), draw the Nth (from 1; default:
    /// the last).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    copy: Option<u64>,
    /// The path's true BDP over time, as TIME:BYTES pairs (e.g. 0:12500000,10:625000), drawn
    /// beside the estimate.
    #[arg(long, value_delimiter = ',', value_parser = stats::parse_point)]
    true_bdp: Vec<(f64, f64)>,
    /// Picture size in pixels, WIDTHxHEIGHT.
    #[arg(long, default_value = "1000x900", value_parser = parse_dims)]
    size: (u32, u32),
}

/// A Unix time as the time of day, UTC (`14:03:27`).
fn clock(unix_s: f64) -> String {
    let s = unix_s as u64 % 86_400;
    format!("{:02}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60)
}

/// Runs the command.
pub fn run(a: Args) -> anyhow::Result<ExitCode> {
    match UdpEvents::load(&a.stats)? {
        Some(udp) => udp.draw(&a.out, a.size)?,
        None => {
            let copy = a.copy.map(|n| usize::try_from(n).unwrap_or(usize::MAX));
            let tuning = a.tuning.as_deref();
            let drawn = stats::draw_file(&a.stats, &a.out, tuning, copy, &a.true_bdp, a.size)?;
            if drawn.starts.len() > 1 {
                say!(
                    "fatpipe plot: {} holds {} copies (begun {}); drew copy {} (--copy N picks another)",
                    a.stats.display(),
                    drawn.starts.len(),
                    drawn
                        .starts
                        .iter()
                        .map(|&s| clock(s))
                        .collect::<Vec<_>>()
                        .join(", "),
                    drawn.copy
                );
            }
        }
    }
    say!("fatpipe plot: wrote {}", a.out.display());
    Ok(ExitCode::SUCCESS)
}
