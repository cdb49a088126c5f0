//! `fatpipe check SRC... DST`: compares a copy with its source without moving data, and prints
//! what differs (rclone's `check`, `diff -r` for a remote tree).

use crate::credentials;
use crate::selection::Selection;
use fatpipe_ftp::client::check::{self, Compared, Verdict};
use fatpipe_ftp::client::copy::CopyOptions;
use fatpipe_ftp::client::failure::Failure;
use std::process::ExitCode;

/// Options of `fatpipe check`.
#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    files: Selection,
    /// Compare sizes only, no checksums.
    #[arg(long)]
    size_only: bool,
    /// Print the files that are the same too.
    #[arg(long)]
    all: bool,
    /// Print one JSON object: every file with its verdict.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    session: credentials::SessionArgs,
}

/// Prints what differs, one line a file on standard output, and a summary on standard error;
/// exits 0 when every copy is the same, 5 when only some are missing, 10 when only some
/// differ, 1 for both.
pub fn run(a: Args) -> anyhow::Result<ExitCode> {
    let ends = a.files.endpoints("fatpipe check SRC... DST")?;
    let opts = CopyOptions {
        recursive: a.files.recursive,
        filter: a.files.filter()?,
        timeout: a.session.timeout,
        tls: a.session.tls(),
        ..CopyOptions::default()
    };
    let files = check::check(&ends.srcs, &ends.dst, &ends.creds, &opts, a.size_only)?;
    let failure = Failure::common(files.iter().filter_map(|f| kind(&f.verdict)));
    if a.json {
        let report = serde_json::json!({
            "same": failure.is_none(),
            "exit_code": failure.map_or(0, Failure::exit_code),
            "files": files,
        });
        out!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        for f in &files {
            if let Some(line) = line(f, a.all) {
                out!("{line}");
            }
        }
    }
    let count = |p: fn(&Verdict) -> bool| files.iter().filter(|f| p(&f.verdict)).count();
    say!(
        "fatpipe: check: {} file(s): {} same, {} missing, {} differ, {} not compared",
        files.len(),
        count(|v| matches!(v, Verdict::Same(_))),
        count(|v| matches!(v, Verdict::Missing)),
        count(|v| matches!(v, Verdict::Size(..) | Verdict::Content(_))),
        count(|v| matches!(v, Verdict::Unknown(_))),
    );
    Ok(ExitCode::from(failure.map_or(0, Failure::exit_code)))
}

/// The kind of failure a verdict is, if any.
fn kind(v: &Verdict) -> Option<Failure> {
    match v {
        Verdict::Same(_) => None,
        Verdict::Missing => Some(Failure::NotFound),
        Verdict::Size(..) | Verdict::Content(_) => Some(Failure::Checksum),
        Verdict::Unknown(why) => Some(Failure::of(why)),
    }
}

/// The line a file gets (a copy that is the same only with `all`).
fn line(f: &Compared, all: bool) -> Option<String> {
    let d = &f.destination;
    Some(match &f.verdict {
        Verdict::Same(sum) if all => match sum {
            Some(sum) => format!("same     {d} ({sum})"),
            None => format!("same     {d} (size)"),
        },
        Verdict::Same(_) => return None,
        Verdict::Missing => format!("missing  {d} (source {})", f.source),
        Verdict::Size(s, c) => format!("size     {d}: {c} bytes, the source {s}"),
        Verdict::Content(_) => format!("differs  {d}: same size, another checksum"),
        Verdict::Unknown(why) => format!("unknown  {d}: {why}"),
    })
}
