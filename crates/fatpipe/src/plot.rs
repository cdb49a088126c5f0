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
    /// The path's true BDP over time, as TIME:BYTES pairs (e.g. 0:12500000,10:625000), drawn
    /// beside the estimate.
    #[arg(long, value_delimiter = ',', value_parser = stats::parse_point)]
    true_bdp: Vec<(f64, f64)>,
    /// Picture size in pixels, WIDTHxHEIGHT.
    #[arg(long, default_value = "1000x900", value_parser = parse_dims)]
    size: (u32, u32),
}

/// Runs the command.
pub fn run(a: Args) -> anyhow::Result<ExitCode> {
    match UdpEvents::load(&a.stats)? {
        Some(udp) => udp.draw(&a.out, a.size)?,
        None => stats::draw_file(&a.stats, &a.out, a.tuning.as_deref(), &a.true_bdp, a.size)?,
    }
    say!("fatpipe plot: wrote {}", a.out.display());
    Ok(ExitCode::SUCCESS)
}
