//! `fatpipe ls`: list remote directories, files or globs.

use crate::credentials;
use anyhow::bail;
use fatpipe_ftp::client::plan::remote_matches;
use fatpipe_ftp::client::Connection;
use fatpipe_proto::listing::{format_timeval, Entry, EntryKind};
use fatpipe_tune::size::format_size;
use std::process::ExitCode;

/// Trees deeper than this are not listed (a link loop, or a hostile listing).
const MAX_DEPTH: usize = 64;

/// Options of `fatpipe ls`.
#[derive(clap::Args, Debug)]
#[command(disable_help_flag = true)]
pub struct Args {
    /// ftp://[user[:password]@]host[:port]/path: a directory, a file, or a glob in the last
    /// component (quote it: 'ftp://host/data/*.h5'); or an https:// (davs://) URL.
    url: String,
    /// The long format: kind, size, time, name (the default; accepted for habit).
    #[arg(short = 'l')]
    long: bool,
    /// Sizes for people: 1.5 MiB, 3 GiB.
    #[arg(short = 'h', long = "human-readable")]
    human: bool,
    /// Print help (-h is --human-readable, as for ls).
    #[arg(long, action = clap::ArgAction::Help)]
    help: Option<bool>,
    /// List the directories below too, each under a `PATH:` heading.
    #[arg(short = 'R', long)]
    recursive: bool,
    #[command(flatten)]
    session: credentials::SessionArgs,
}

/// Prints one line per entry: kind, size, modification time (UTC), name.
pub fn run(a: Args) -> anyhow::Result<ExitCode> {
    if credentials::is_https(&a.url) {
        if a.recursive {
            crate::dav::list_tree(&a.url, &a.session, |heading, entries| {
                if let Some(h) = heading {
                    out!("");
                    out!("{h}:");
                }
                for e in entries {
                    out!("{}", line(e, a.human));
                }
            })?;
            return Ok(ExitCode::SUCCESS);
        }
        for e in crate::dav::list(&a.url, &a.session)? {
            out!("{}", line(&e, a.human));
        }
        return Ok(ExitCode::SUCCESS);
    }
    let url = credentials::remote(&a.url)?;
    let mut c = credentials::open(&url, &a.session)?;
    let listed = list_all(&mut c, &url.path, &a);
    c.quit();
    listed?;
    Ok(ExitCode::SUCCESS)
}

/// Lists each path `path` names (a glob: its matches).
fn list_all(c: &mut Connection, path: &str, a: &Args) -> anyhow::Result<()> {
    let paths = remote_matches(c, path)?;
    let several = paths.len() > 1;
    for p in paths {
        let entries = c.list(&p)?;
        // A match that is a file lists as itself; a directory under its heading.
        let name = p.rsplit('/').next().unwrap_or(&p);
        let file = matches!(entries.as_slice(), [e] if e.kind != EntryKind::Dir && e.name == name);
        if several && !file {
            out!("{p}:");
        }
        print_dir(c, &p, entries, a, 0)?;
    }
    Ok(())
}

/// Prints `entries` of `dir`, then with `-R` each subdirectory's under its heading.
fn print_dir(
    c: &mut Connection,
    dir: &str,
    entries: Vec<Entry>,
    a: &Args,
    depth: usize,
) -> anyhow::Result<()> {
    for e in &entries {
        out!("{}", line(e, a.human));
    }
    if !a.recursive {
        return Ok(());
    }
    if depth >= MAX_DEPTH {
        bail!("{dir}: tree deeper than {MAX_DEPTH} levels");
    }
    for e in entries.iter().filter(|e| e.kind == EntryKind::Dir) {
        if e.name.contains('/') || e.name == "." || e.name == ".." {
            continue;
        }
        let sub = format!("{}/{}", dir.trim_end_matches('/'), e.name);
        out!("");
        out!("{sub}:");
        let below = c.list(&sub)?;
        print_dir(c, &sub, below, a, depth + 1)?;
    }
    Ok(())
}

/// One entry's line: kind, size (in bytes, or for people with `-H`), time, name.
fn line(e: &Entry, human: bool) -> String {
    let kind = match e.kind {
        EntryKind::Dir => 'd',
        EntryKind::File => '-',
        EntryKind::Link => 'l',
        EntryKind::Other => '?',
    };
    let when = if e.modified > 0 {
        format_timeval(e.modified)
    } else {
        "-".repeat(14)
    };
    let size = match human {
        true => format_size(e.size),
        false => e.size.to_string(),
    };
    format!("{kind} {size:>14} {when} {}", e.name)
}
