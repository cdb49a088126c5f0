//! What a finished copy tells its user: one line per failed file (those stopped by Ctrl-C or a
//! full disk in one line), the headline, with `-v` how the tuning and the streams went; or with
//! `--json` one object, also for a copy that failed before its first file (docs/json.md).

use crate::progress::rate_text;
use crate::tuning;
use fatpipe_ftp::client::copy::{deleted, Ending, FileResult, Summary, DRY_RUN};
use fatpipe_ftp::client::failure::Failure;
use fatpipe_tune::size::format_size;
use std::fmt::Display;

/// Tells the user on standard error how `end` went: the failures always; unless `quiet` the
/// headline and limits met; with `verbose` (the tuning's name) how the tuning and the streams
/// went.
fn tell(end: &Ending<'_>, quiet: bool, verbose: Option<&dyn Display>) {
    let results = end.results;
    if end.dry_run {
        return dry_run(results);
    }
    for r in results.iter().filter(|r| !r.stopped()) {
        if let Some(e) = &r.error {
            let name = if r.deleted { &r.destination } else { &r.source };
            say!("fatpipe: failed: {name}: {e}");
        }
    }
    let not_begun = results.iter().filter(|r| r.never_begun()).count();
    if end.interrupted {
        // Begun and stopped: what arrived is kept (a part file here, the server's file).
        let partial = results
            .iter()
            .filter(|r| r.stopped() && !r.never_begun())
            .count();
        say!(
            "fatpipe: interrupted: {} of {} file(s) copied, {partial} in part (kept), \
             {not_begun} not begun; run the same command with --resume to continue",
            end.copied(),
            results.len() - end.left_out() - deleted(results)
        );
    } else if let Some(r) = results.iter().find(|r| r.stopped()) {
        let why = r.error.as_deref().unwrap_or_default();
        let full = matches!(
            r.failure,
            Some(Failure::LocalDiskFull | Failure::ServerDiskFull)
        );
        let then = if full { "make room and run" } else { "run" };
        say!(
            "fatpipe: {not_begun} file(s) {why}; {then} the same command with --resume to \
             continue"
        );
    }
    if quiet {
        return;
    }
    let stopped = results.iter().filter(|r| r.stopped()).count();
    say!(
        "fatpipe: {}",
        headline(results, stopped, end.bytes(), end.seconds)
    );
    // What held the copy back is the user's business; how the tuning went, only asked for.
    for cap in caps(results) {
        say!("fatpipe: limit: {cap}");
    }
    // The UDP channel: what it did (of the last file that used it).
    if let Some(udp) = results.iter().rev().find_map(|r| r.udp.as_deref()) {
        say!("fatpipe: {udp}");
    }
    if let Some(tuning) = verbose {
        say!("fatpipe: {}", end.transport);
        if let Some(line) = tune_line(results) {
            say!("fatpipe: tuning {tuning}: {line}");
        }
        for line in streams_lines(results) {
            say!("fatpipe: {line}");
        }
    }
}

/// A `--dry-run`'s plan on standard output, one line a file: what would be copied where, what
/// would be left out and why; then the totals on standard error.
fn dry_run(results: &[FileResult]) {
    let size = |r: &FileResult| r.size.map_or("size unknown".into(), format_size);
    for r in results {
        match r.skipped.as_deref() {
            _ if r.deleted => out!("delete {}", r.destination),
            Some(DRY_RUN) => out!("copy {} -> {} ({})", r.source, r.destination, size(r)),
            Some(why) => out!("leave {} -> {}: {why}", r.source, r.destination),
            None => {}
        }
    }
    let planned: Vec<&FileResult> = results
        .iter()
        .filter(|r| r.skipped.as_deref() == Some(DRY_RUN))
        .collect();
    let bytes: u64 = planned.iter().filter_map(|r| r.size).sum();
    let deleted = deleted(results);
    say!(
        "fatpipe: dry run: {} file(s), {} would be copied; {} left out; {deleted} would be \
         deleted; nothing changed",
        planned.len(),
        format_size(bytes),
        results.len() - planned.len() - deleted
    );
}

/// Tells how `ending` went (the `--json` object, or the lines for the user; `verbose`: how
/// the tuning and streams went) and returns the exit code it says; `data_on_stdout`: the
/// copy's data went to standard output.
pub(super) fn finish(
    a: &super::Args,
    ending: &Ending<'_>,
    verbose: bool,
    data_on_stdout: bool,
) -> anyhow::Result<std::process::ExitCode> {
    if a.json {
        print_json(&ending.summary(), data_on_stdout)?;
    } else {
        tell(
            ending,
            a.quiet,
            verbose.then_some(&a.tune.tuning as &dyn std::fmt::Display),
        );
    }
    let code = ending.failure().map_or(0, Failure::exit_code);
    Ok(std::process::ExitCode::from(code))
}

/// Prints the `--json` summary: on standard output, or standard error when the data goes there.
pub(super) fn print_json(summary: &Summary, data_on_stdout: bool) -> anyhow::Result<()> {
    let text = serde_json::to_string_pretty(summary)?;
    if data_on_stdout {
        say!("{text}");
    } else {
        out!("{text}");
    }
    Ok(())
}

/// The buffer summary over all files: peaks, Mbit/s per MiB over the data phases, caps met.
fn tune_line(results: &[FileResult]) -> Option<String> {
    let local = results.iter().filter_map(|r| r.peak_buffer).max()?;
    let peer = results.iter().filter_map(|r| r.peer_peak_buffer).max();
    let bytes: u64 = results.iter().map(|r| r.bytes).sum();
    let secs = results.iter().filter_map(|r| r.data_seconds).sum::<f64>();
    // Nothing moved (or too fast to time): no rate per MiB worth printing.
    let mbit_s = (bytes > 0 && secs > 0.0).then(|| bytes as f64 * 8.0 / secs / 1e6);
    Some(tuning::describe(local, peer, mbit_s))
}

/// The summary's one line: what moved, how fast, over how many streams, verified or not; the
/// files `stopped` (interrupted, not begun) are not counted as failed.
fn headline(results: &[FileResult], stopped: usize, bytes: u64, seconds: f64) -> String {
    let failed = results.iter().filter(|r| r.error.is_some()).count();
    let skipped: Vec<&str> = results
        .iter()
        .filter_map(|r| r.skipped.as_deref())
        .collect();
    let copied = results.iter().filter(|r| r.copied()).count();
    let deletions = match deleted(results) {
        0 => String::new(),
        n => format!(", {n} deleted"),
    };
    // Those stopped before or while they ran have their own line.
    let failed = failed - stopped;
    let left_out = match skipped.first() {
        None => String::new(),
        Some(why) if skipped.iter().all(|w| w == why) => {
            format!(", {} left out: {why}", skipped.len())
        }
        Some(_) => format!(", {} left out", skipped.len()),
    };
    // A re-run with --resume: files found complete moved nothing.
    let complete = results
        .iter()
        .filter(|r| r.error.is_none() && r.bytes == 0 && r.resumed_from > 0)
        .count();
    // Continued from what an earlier run left: from where.
    let resumed: Vec<u64> = results
        .iter()
        .filter(|r| r.error.is_none() && r.bytes > 0 && r.resumed_from > 0)
        .map(|r| r.resumed_from)
        .collect();
    let resumed = match resumed.as_slice() {
        [] => String::new(),
        [at] => format!(" (resumed at {})", format_size(*at)),
        all => format!(
            " ({} resumed, {} already there)",
            all.len(),
            format_size(all.iter().sum())
        ),
    };
    let mut line = format!(
        "{copied} file{} copied{}{resumed}{left_out}{deletions}{}, {} in {seconds:.2} s ({})",
        if copied == 1 { "" } else { "s" },
        if complete > 0 {
            format!(" ({complete} already complete)")
        } else {
            String::new()
        },
        if failed > 0 {
            format!(", {failed} failed")
        } else {
            String::new()
        },
        format_size(bytes),
        rate_text(bytes as f64 * 8.0 / seconds.max(1e-9)),
    );
    if let Some(n) = results
        .iter()
        .filter_map(|r| r.streams)
        .max()
        .filter(|&n| n > 1)
    {
        line.push_str(&format!(", up to {n} streams"));
    }
    if results.iter().any(|r| r.tls) {
        line.push_str(", TLS");
    }
    let verified: Vec<&str> = results
        .iter()
        .filter_map(|r| r.verified.as_deref())
        .collect();
    if let Some(first) = verified.first() {
        let alg = first.split(':').next().unwrap_or("");
        line.push_str(&format!(
            "; {} of {copied} verified ({alg})",
            verified.len()
        ));
    }
    line
}

/// The system limits that held a buffer below what the tuning asked, over all files.
fn caps(results: &[FileResult]) -> Vec<String> {
    let mut capped: Vec<String> = results.iter().flat_map(|r| r.capped.clone()).collect();
    capped.sort();
    capped.dedup();
    capped
}

/// What the streams did and what was verified, over all files.
fn streams_lines(results: &[FileResult]) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(n) = results.iter().filter_map(|r| r.streams).max() {
        out.push(format!(
            "streams: up to {n} data connection(s) per file (MODE E)"
        ));
    }
    let reusing = results.iter().filter(|r| r.reused_streams > 0).count();
    if reusing > 0 {
        out.push(format!(
            "streams: {reusing} file(s) moved over the connections the previous file left open"
        ));
    }
    out.extend(auto_lines(results));
    out
}

/// `-p auto`'s decisions, short for a tree: every decision of the first file that has any;
/// of later files only their steps (named), and how many started where the previous ended.
fn auto_lines(results: &[FileResult]) -> Vec<String> {
    let mut out = Vec::new();
    let mut resumed = 0;
    let mut first = true;
    for r in results.iter().filter(|r| !r.stream_decisions.is_empty()) {
        for d in &r.stream_decisions {
            if d.starts_with("started with") && !first {
                resumed += 1;
            } else if first {
                out.push(format!("-p auto: {d}"));
            } else if d.contains("opening") {
                out.push(format!("-p auto ({}): {d}", r.source));
            }
        }
        first = false;
    }
    if resumed > 0 {
        out.push(format!(
            "-p auto: {resumed} later file(s) started with the streams the previous one ended with"
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(source: &str, decisions: &[&str]) -> FileResult {
        FileResult {
            source: source.into(),
            stream_decisions: decisions.iter().map(|d| d.to_string()).collect(),
            ..FileResult::default()
        }
    }

    #[test]
    fn a_tree_lists_the_first_files_decisions_and_only_the_later_steps() {
        let results = [
            file(
                "/a",
                &[
                    "paced",
                    "1 stream(s) …: opening 7 more",
                    "8 stream(s) … staying at 8",
                ],
            ),
            file(
                "/b",
                &[
                    "started with 8 streams, where …",
                    "paced",
                    "8 stream(s) … staying at 8",
                ],
            ),
            file(
                "/c",
                &[
                    "started with 8 streams, where …",
                    "paced",
                    "8 stream(s) …: opening 8 more",
                ],
            ),
            file("/d", &[]),
        ];
        assert_eq!(
            auto_lines(&results),
            [
                "-p auto: paced",
                "-p auto: 1 stream(s) …: opening 7 more",
                "-p auto: 8 stream(s) … staying at 8",
                "-p auto (/c): 8 stream(s) …: opening 8 more",
                "-p auto: 2 later file(s) started with the streams the previous one ended with",
            ]
        );
        // One file: everything it said.
        assert_eq!(auto_lines(&results[1..2]).len(), 3);
    }
}
