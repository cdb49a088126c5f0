//! `fatpipe ls`: list a remote directory.

use crate::credentials;
use fatpipe_proto::listing::{format_timeval, EntryKind};
use std::process::ExitCode;

/// Options of `fatpipe ls`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// ftp://[user[:password]@]host[:port]/dir
    url: String,
    #[command(flatten)]
    session: credentials::SessionArgs,
}

/// Prints one line per entry: kind, size, modification time (UTC), name.
pub fn run(a: Args) -> anyhow::Result<ExitCode> {
    let url = credentials::remote(&a.url)?;
    let mut c = credentials::open(&url, &a.session)?;
    let entries = c.list(&url.path)?;
    c.quit();
    for e in entries {
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
        out!("{kind} {:>14} {when} {}", e.size, e.name);
    }
    Ok(ExitCode::SUCCESS)
}
