//! `fatpipe cp` with `https://` or `davs://` URLs: one file down, up, or from one server to
//! another (a third-party `COPY`: the destination pulls, the bytes never pass through here).

use super::report;
use super::Args;
use crate::credentials;
use fatpipe_ftp::client::copy::Ending;
use fatpipe_ftp::client::transport;
use fatpipe_http::client::{Client, CopyPlan, Download, Place, ThirdParty};
use indicatif::{ProgressBar, ProgressStyle};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The place `arg` names: a remote endpoint with its authorization, or a local path.
fn place(arg: &str, a: &Args) -> anyhow::Result<Place> {
    Ok(match credentials::is_https(arg) {
        true => Place::Remote(credentials::https_endpoint(arg, &a.session)?),
        false => Place::Local(PathBuf::from(arg)),
    })
}

/// Copies one file, or with `-r` one tree, as the two paths say; the results are told as an
/// FTP copy's are (`verbose`: with the tuning's name).
pub fn run(a: &Args, verbose: bool) -> anyhow::Result<ExitCode> {
    let [src, dst] = a.files.paths.as_slice() else {
        anyhow::bail!("with https:// or davs:// URLs, give one SRC and one DST");
    };
    if a.from.is_some() {
        anyhow::bail!("with https:// or davs:// URLs, --from is not supported yet");
    }
    let download = credentials::is_https(src) && !credentials::is_https(dst);
    if a.resume && !download {
        tracing::warn!("--resume over HTTPS continues downloads only: this copy is sent whole");
    }
    let cert = a.session.client_cert()?;
    let client = Client::new(
        a.session.ca.as_deref(),
        cert.as_ref(),
        a.tune.config("client")?,
    )
    .map_err(anyhow::Error::msg)?;
    let (src, dst) = (place(src, a)?, place(dst, a)?);
    let plan = CopyPlan {
        tree: a.files.recursive,
        // Files a tree copy moves side by side: `--concurrency`, else 4 (each an HTTPS
        // connection of its own).
        at_once: a.concurrency.fixed().map_or(4, |n| n as usize),
        download: Download {
            streams: a.parallel.fixed(),
            resume: a.resume,
            retry_for: a.retry_for,
        },
        // `-p N` asks the destination of a third-party copy for N connections.
        between: ThirdParty {
            streams: a.parallel.fixed().unwrap_or(1),
            streamed_fallback: a.streamed_fallback,
        },
    };
    let progress = Arc::new(AtomicU64::new(0));
    let bar = bar(a.quiet());
    let connections = client.connections_for(&src, &dst, &plan);
    let rt = fatpipe_http::runtime::for_connections(connections)?;
    let started = Instant::now();
    let results = rt.block_on(async {
        let shown = async {
            loop {
                bar.set_position(progress.load(Ordering::Relaxed));
                tokio::time::sleep(Duration::from_millis(250)).await;
            }
        };
        tokio::select! {
            r = client.copy(&src, &dst, &plan, &progress) => r,
            _ = shown => unreachable!("the progress loop never ends"),
        }
    });
    bar.finish_and_clear();
    let results = results?;
    let ending = Ending {
        results: &results,
        interrupted: false,
        seconds: started.elapsed().as_secs_f64(),
        transport: transport::Choice {
            udp: false,
            asked: false,
            leave_tcp_on_loss: false,
            udp_if_long: false,
            why: "HTTPS moves over TCP".into(),
        },
        dry_run: false,
    };
    report::finish(a, &ending, verbose, false)
}

/// A byte counter on standard error, hidden when quiet.
fn bar(quiet: bool) -> ProgressBar {
    if quiet {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new_spinner();
    if let Ok(style) = ProgressStyle::with_template("{spinner} {bytes} {binary_bytes_per_sec}") {
        bar.set_style(style);
    }
    bar
}
