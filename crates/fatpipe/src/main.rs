//! `fatpipe`: the command-line front end. Each subcommand lives in its own module and only turns
//! arguments into calls on the `fatpipe-ftp` library.

/// `eprintln!` that never panics: a closed standard error (`fatpipe … 2>&1 | head`) is no
/// reason to crash; the command goes on and ends in order.
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}

/// `println!` that never panics (see `say!`).
macro_rules! out {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout(), $($arg)*);
    }};
}

mod cp;
mod credentials;
mod demo;
mod lab;
mod log;
mod ls;
mod passwd;
mod plot;
mod plot_lab;
mod progress;
mod remote;
mod serve;
mod testbed;
mod tuning;

use clap::{Parser, Subcommand};
use std::process::ExitCode;

/// Fast file transfer over long fat networks: an FTP/GridFTP server and client.
#[derive(Parser, Debug)]
#[command(name = "fatpipe", version, about)]
struct Cli {
    /// Say more: -v what the copy chose and why (the plan, the tuning, streams, resumes);
    /// -vv the protocol too; -vvv everything. FATPIPE_LOG overrides (tracing filter syntax).
    #[arg(short, long, action = clap::ArgAction::Count, global = true)]
    verbose: u8,
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// Serve a directory over FTP.
    Serve(serve::Args),
    /// Copy files or trees between this machine and an FTP server.
    #[command(override_usage = "fatpipe cp [OPTIONS] SRC... DST")]
    Cp(cp::Args),
    /// List a remote directory.
    Ls(ls::Args),
    /// Make remote directories.
    Mkdir(remote::MkdirArgs),
    /// Remove remote files (and, with -r, trees).
    Rm(remote::RmArgs),
    /// Rename or move a remote file or directory.
    Mv(remote::MvArgs),
    /// Write a users-file entry with a salted argon2 password hash.
    Passwd(passwd::Args),
    /// Demonstration transfer on this machine, with the rate it reached.
    Demo(demo::Args),
    /// Experiments: run tools across emulated paths and report throughput, retransmissions, memory.
    Lab(lab::Args),
    /// Draw a --stats file: throughput, buffers against the BDP, and RTT over time (SVG/PNG).
    Plot(plot::Args),
    /// Draw a `fatpipe lab` results.json: throughput against RTT, or against parallel streams.
    PlotLab(plot_lab::Args),
    /// The WAN emulator: an emulated long fat path between two network namespaces (needs root).
    #[command(subcommand)]
    Testbed(testbed::Cmd),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    // The server logs sessions at info; client commands stay quiet unless asked.
    // The server logs sessions at info, -v adds the protocol. A client says only what went
    // wrong; -v adds its story (the plan, what was chosen and why), -vv the protocol.
    let serving = matches!(cli.command, Cmd::Serve(_));
    let levels: &[&str] = match &cli.command {
        Cmd::Serve(_) => &["info", "debug", "trace"],
        // -q: nothing but errors.
        Cmd::Cp(a) if a.quiet() => &["error", "info", "debug", "trace"],
        _ => &["warn", "info", "debug", "trace"],
    };
    let default = levels[usize::from(cli.verbose).min(levels.len() - 1)];
    log::init(default, !serving && cli.verbose <= 1);
    let result = match cli.command {
        Cmd::Serve(a) => serve::run(a),
        Cmd::Cp(a) => cp::run(a, cli.verbose > 0),
        Cmd::Ls(a) => ls::run(a),
        Cmd::Mkdir(a) => remote::mkdir(a),
        Cmd::Rm(a) => remote::rm(a),
        Cmd::Mv(a) => remote::mv(a),
        Cmd::Passwd(a) => passwd::run(a),
        Cmd::Demo(a) => demo::run(a),
        Cmd::Testbed(c) => testbed::run(c),
        Cmd::Lab(a) => lab::run(a),
        Cmd::Plot(a) => plot::run(a),
        Cmd::PlotLab(a) => plot_lab::run(a),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            say!("fatpipe: error: {e:#}");
            ExitCode::from(fatpipe_ftp::client::failure::Failure::of_error(&e).exit_code())
        }
    }
}
