//! `fatpipe demo`: the README's first command (see `fatpipe_lab::demo`).

use fatpipe_lab::demo::{self, Output};
use fatpipe_wanem::units;
use std::process::ExitCode;
use std::time::Duration;

/// Options of `fatpipe demo`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Size of the demonstration file in MiB.
    #[arg(long, default_value_t = 256)]
    size_mib: u64,
    /// Round-trip time of the emulated path.
    #[arg(long, default_value = "100ms", value_parser = units::parse_duration)]
    rtt: Duration,
    /// Bottleneck rate of the emulated path.
    #[arg(long, default_value = "1gbit", value_parser = units::parse_rate)]
    rate: u64,
    /// Skip the emulated WAN and transfer over loopback.
    #[arg(long)]
    loopback: bool,
    /// Copies per row (each row shows their median, lowest and highest).
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=20))]
    runs: u32,
}

/// Runs the demonstration.
pub fn run(a: Args) -> anyhow::Result<ExitCode> {
    let args = demo::Args {
        size_mib: a.size_mib,
        rtt: a.rtt,
        rate: a.rate,
        loopback: a.loopback,
        runs: a.runs,
    };
    let exe = std::env::current_exe()?;
    let mut o = Output {
        out: &mut std::io::stdout(),
        err: &mut std::io::stderr(),
    };
    demo::run(&args, &exe, &mut o)?;
    Ok(ExitCode::SUCCESS)
}
