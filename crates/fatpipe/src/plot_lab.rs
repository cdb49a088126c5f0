//! `fatpipe plot-lab`: draws a `fatpipe lab` results file (see `fatpipe_lab::plot::results`).

use fatpipe_lab::plot::{parse_dims, results};
use std::path::PathBuf;
use std::process::ExitCode;

/// Options of `fatpipe plot-lab`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// results.json files written by `fatpipe lab` (drawn together).
    #[arg(required = true)]
    results: Vec<PathBuf>,
    /// The picture to write: .svg or .png.
    #[arg(short, long)]
    out: PathBuf,
    /// Picture size in pixels, WIDTHxHEIGHT.
    #[arg(long, default_value = "1000x900", value_parser = parse_dims)]
    size: (u32, u32),
}

/// Runs the command.
pub fn run(a: Args) -> anyhow::Result<ExitCode> {
    results::draw_files(&a.results, &a.out, a.size)?;
    say!("fatpipe plot-lab: wrote {}", a.out.display());
    Ok(ExitCode::SUCCESS)
}
