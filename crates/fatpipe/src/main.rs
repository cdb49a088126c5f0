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

mod check;
mod config_file;
mod cp;
mod credentials;
mod dav;
mod demo;
mod lab;
mod log;
mod ls;
mod manual;
mod passwd;
mod plot;
mod plot_lab;
mod progress;
mod remote;
mod selection;
mod serve;
mod testbed;
mod tuning;

use clap::{CommandFactory, Parser, Subcommand};
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

/// The exit codes of the client commands, for their help and manual pages
/// (docs/exit-codes.md).
const EXIT_CODES: &str = "Exit codes: 0 all arrived; 1 failures of several kinds; 2 usage; \
3 cannot connect; 4 login refused; 5 not found; 6 permission denied; 7 this machine's disk \
full; 8 the server's disk full; 9 TLS refused or untrusted; 10 checksum or size differs; \
11 connection lost, retries spent; 130 interrupted.";

#[derive(Subcommand, Debug)]
enum Cmd {
    /// Serve a directory over FTP.
    #[command(args_override_self = true)]
    Serve(Box<serve::Args>),
    /// Copy files or trees between this machine and an FTP server.
    #[command(override_usage = "fatpipe cp [OPTIONS] SRC... DST", after_help = EXIT_CODES)]
    Cp(cp::Args),
    /// Compare copies with their sources (size, then checksum) and print what differs.
    #[command(override_usage = "fatpipe check [OPTIONS] SRC... DST")]
    Check(check::Args),
    /// List a remote directory.
    #[command(after_help = EXIT_CODES)]
    Ls(ls::Args),
    /// Make remote directories.
    #[command(after_help = EXIT_CODES)]
    Mkdir(remote::MkdirArgs),
    /// Remove remote files (and, with -r, trees).
    #[command(after_help = EXIT_CODES)]
    Rm(remote::RmArgs),
    /// Rename or move a remote file or directory.
    #[command(after_help = EXIT_CODES)]
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
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell).
    Completions(manual::CompletionArgs),
    /// Write the manual pages (fatpipe.1, fatpipe-cp.1, …).
    Man(manual::ManArgs),
}

fn main() -> ExitCode {
    let args = match config_file::expand(std::env::args_os().collect()) {
        Ok(args) => args,
        Err(e) => {
            say!("fatpipe: error: {e:#}");
            return ExitCode::from(2);
        }
    };
    let cli = Cli::parse_from(args);
    // The server logs sessions at info, -v adds the protocol. A client says only what went
    // wrong; -v adds its story (the plan, what was chosen and why), -vv the protocol.
    let levels: &[&str] = match &cli.command {
        Cmd::Serve(_) => &["info", "debug", "trace"],
        // -q: nothing but errors.
        Cmd::Cp(a) if a.quiet() => &["error", "info", "debug", "trace"],
        _ => &["warn", "info", "debug", "trace"],
    };
    let default = levels[usize::from(cli.verbose).min(levels.len() - 1)];
    let style = match &cli.command {
        Cmd::Serve(a) if a.json_log() => log::Style::Json,
        Cmd::Serve(_) => log::Style::Timed,
        _ if cli.verbose <= 1 => log::Style::Story,
        _ => log::Style::Timed,
    };
    log::init(default, style);
    let result = match cli.command {
        Cmd::Serve(a) => serve::run(*a),
        Cmd::Cp(a) => cp::run(a, cli.verbose > 0),
        Cmd::Check(a) => check::run(a),
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
        Cmd::Completions(a) => manual::completions(a, Cli::command()),
        Cmd::Man(a) => manual::man(a, Cli::command()),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            say!("fatpipe: error: {e:#}");
            ExitCode::from(fatpipe_ftp::client::failure::Failure::of_error(&e).exit_code())
        }
    }
}
