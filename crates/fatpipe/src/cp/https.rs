//! `fatpipe cp` with `https://` or `davs://` URLs: one file down, up, or from one server to
//! another (a third-party `COPY`: the destination pulls, the bytes never pass through here).

use super::report;
use super::Args;
use crate::credentials;
use fatpipe_ftp::client::copy::FileResult;
use fatpipe_ftp::client::failure::misuse;
use fatpipe_ftp::client::filter::is_glob;
use fatpipe_ftp::client::transport;
use fatpipe_http::client::{Client, Download, Endpoint, ThirdParty};
use indicatif::{ProgressBar, ProgressStyle};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The endpoint `arg` names, with its authorization.
fn endpoint(arg: &str, a: &Args) -> anyhow::Result<Endpoint> {
    credentials::https_endpoint(arg, &a.session)
}

/// The last component of a URL's path, a collection's without its slash (what a download
/// into a directory is named).
fn url_name(e: &Endpoint) -> anyhow::Result<String> {
    e.url
        .path_segments()
        .and_then(|mut s| s.rfind(|n| !n.is_empty()))
        .map(|n| {
            percent_encoding::percent_decode_str(n)
                .decode_utf8_lossy()
                .into_owned()
        })
        .ok_or_else(|| anyhow::anyhow!("{}: names no file", e.url))
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
    let progress = Arc::new(AtomicU64::new(0));
    let bar = bar(a.quiet());
    let rt = fatpipe_http::runtime::for_connections(connections(&client, a, src, dst))?;
    let started = Instant::now();
    let results = rt.block_on(async {
        let shown = async {
            loop {
                bar.set_position(progress.load(Ordering::Relaxed));
                tokio::time::sleep(Duration::from_millis(250)).await;
            }
        };
        tokio::select! {
            r = copy(&client, a, src, dst, &progress) => r,
            _ = shown => unreachable!("the progress loop never ends"),
        }
    });
    bar.finish_and_clear();
    let results = results?;
    let ending = report::Ending {
        results: &results,
        interrupted: false,
        seconds: started.elapsed().as_secs_f64(),
        transport: transport::Choice {
            udp: false,
            asked: false,
            leave_tcp_on_loss: false,
            why: "HTTPS moves over TCP".into(),
        },
        dry_run: false,
    };
    report::finish(a, &ending, verbose, false)
}

/// How a download goes, as the options say.
fn download(a: &Args) -> Download {
    Download {
        streams: a.parallel.fixed(),
        resume: a.resume,
        retry_for: a.retry_for,
    }
}

/// Data connections the copy `src` → `dst` may have open at once here: none of a third-party
/// copy's (the servers move its bytes), a download's for each file at once, an upload's one.
fn connections(client: &Client, a: &Args, src: &str, dst: &str) -> usize {
    let last = src.trim_end_matches('/').rsplit('/').next().unwrap_or("");
    let files = if a.files.recursive || is_glob(last) {
        at_once(a)
    } else {
        1
    };
    match (credentials::is_https(src), credentials::is_https(dst)) {
        (true, true) => 1,
        (true, false) => files * client.connections(&download(a)),
        _ => files,
    }
}

/// The copy `src` → `dst` asks for: a result per file, or why it could not begin.
async fn copy(
    client: &Client,
    a: &Args,
    src: &str,
    dst: &str,
    progress: &Arc<AtomicU64>,
) -> anyhow::Result<Vec<FileResult>> {
    let tree = a.files.recursive;
    // `-p N` asks the destination of a third-party copy for N connections; auto: its choice.
    let between = ThirdParty {
        streams: a.parallel.fixed().unwrap_or(1),
        streamed_fallback: a.streamed_fallback,
    };
    let how = download(a);
    let results = match (credentials::is_https(src), credentials::is_https(dst)) {
        (true, true) if tree => {
            let (s, mut d) = (endpoint(src, a)?, endpoint(dst, a)?);
            // Into a collection's URL with a slash: under the source's name, as cp does.
            if d.url.path().ends_with('/') {
                if let Ok(name) = url_name(&s) {
                    d = d.member(&name, true);
                }
            }
            client
                .third_party_tree(&s, &d, between, a.retry_for, at_once(a), progress)
                .await
                .map_err(anyhow::Error::msg)?
        }
        (true, true) => {
            let (s, d) = (endpoint(src, a)?, endpoint(dst, a)?);
            let copy = client.third_party_file(&s, &d, between, a.retry_for, progress);
            vec![copy.await]
        }
        (true, false) => {
            let s = endpoint(src, a)?;
            if let Some(hits) = client.matches(&s).await.map_err(anyhow::Error::msg)? {
                return matched(client, a, hits, Path::new(dst), how, progress).await;
            }
            // Into an existing directory: under the source's name, as cp does.
            let mut target = PathBuf::from(dst);
            if target.is_dir() {
                target.push(url_name(&s)?);
            }
            match tree {
                true => client
                    .download_tree(&s, &target, how, at_once(a), progress)
                    .await
                    .map_err(anyhow::Error::msg)?,
                false => vec![client.download_file(&s, &target, how, progress).await],
            }
        }
        _ => {
            let mut d = endpoint(dst, a)?;
            if d.url.path().ends_with('/') {
                let name = Path::new(src)
                    .file_name()
                    .ok_or_else(|| anyhow::anyhow!("{src}: names no file"))?;
                d = d.member(&name.to_string_lossy(), false);
            }
            match tree {
                true => client
                    .upload_tree(Path::new(src), &d, a.retry_for, at_once(a), progress)
                    .await
                    .map_err(anyhow::Error::msg)?,
                false => {
                    let sent = client.upload_file(Path::new(src), &d, a.retry_for, progress);
                    vec![sent.await]
                }
            }
        }
    };
    Ok(results)
}

/// A glob's matches down into the directory `dst`, each under its name: files side by side,
/// collections as trees with `-r` (left out with a warning without it).
async fn matched(
    client: &Client,
    a: &Args,
    hits: Vec<(Endpoint, fatpipe_http::multistatus::Resource)>,
    dst: &Path,
    how: Download,
    progress: &Arc<AtomicU64>,
) -> anyhow::Result<Vec<FileResult>> {
    if !dst.is_dir() {
        return Err(misuse(format!(
            "{} is not a directory: a glob's matches go into one",
            dst.display()
        )));
    }
    let mut files = Vec::new();
    let mut results = Vec::new();
    for (e, r) in hits {
        let to = dst.join(url_name(&e)?);
        match (r.dir, a.files.recursive) {
            (false, _) => files.push((e, to)),
            (true, true) => {
                let tree = client.download_tree(&e, &to, how, at_once(a), progress);
                results.extend(tree.await.map_err(anyhow::Error::msg)?);
            }
            (true, false) => tracing::warn!("{}: a directory, left out (use -r)", e.url),
        }
    }
    let at = at_once(a);
    results.extend(client.download_files(files, how, at, progress).await);
    Ok(results)
}

/// Files a tree copy moves side by side: `--concurrency`, else 4 (each an HTTPS connection of
/// its own).
fn at_once(a: &Args) -> usize {
    a.concurrency.fixed().map_or(4, |n| n as usize)
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
