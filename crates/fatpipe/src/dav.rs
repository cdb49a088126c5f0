//! `fatpipe ls`, `mkdir`, `rm` and `mv` on `https://` and `davs://` URLs: the same commands
//! over WebDAV (PROPFIND, MKCOL, DELETE, MOVE; `fatpipe_http::client`'s commands), with the
//! credentials `cp` uses.

use crate::credentials::{self, SessionArgs};
use anyhow::bail;
use fatpipe_ftp::client::failure::Failure;
use fatpipe_http::client::{Client, Endpoint};
use fatpipe_net::TunerConfig;
use fatpipe_proto::listing::Entry;
use std::process::ExitCode;

/// Runs `op` with a client for `how` on a runtime of its own.
fn with_client<T>(
    how: &SessionArgs,
    op: impl AsyncFnOnce(&Client) -> anyhow::Result<T>,
) -> anyhow::Result<T> {
    let cert = how.client_cert()?;
    let client = Client::new(how.ca.as_deref(), cert.as_ref(), TunerConfig::untuned())
        .map_err(anyhow::Error::msg)?;
    fatpipe_http::runtime::for_connections(1)?.block_on(op(&client))
}

/// The entries `url` lists: a collection's members, a file itself, or a glob's matches.
pub fn list(url: &str, how: &SessionArgs) -> anyhow::Result<Vec<Entry>> {
    let e = credentials::https_endpoint(url, how)?;
    with_client(how, async |c| {
        c.entries(&e).await.map_err(anyhow::Error::msg)
    })
}

/// `ls -R` on a collection: `show` gets its entries, then each collection's below it under its
/// heading ([`Client::list_tree`]).
pub fn list_tree(
    url: &str,
    how: &SessionArgs,
    show: impl FnMut(Option<&str>, &[Entry]),
) -> anyhow::Result<()> {
    let top = credentials::https_endpoint(url, how)?;
    with_client(how, async |c| {
        c.list_tree(&top, show).await.map_err(anyhow::Error::msg)
    })
}

/// Makes each collection; `parents`: the missing ones above too, and those there are fine.
pub fn mkdir(urls: &[String], parents: bool, how: &SessionArgs) -> anyhow::Result<ExitCode> {
    each(urls, how, async |c, e| c.make_dirs(e, parents).await)
}

/// Removes each file (a glob in the last component: its matches); a collection only with
/// `recursive`.
pub fn rm(urls: &[String], recursive: bool, how: &SessionArgs) -> anyhow::Result<ExitCode> {
    each(urls, how, async |c, e| c.remove_named(e, recursive).await)
}

/// Renames `from` to `to`: a URL on the same server, or a path (absolute, or relative to
/// `from`'s directory).
pub fn mv(from: &str, to: &str, how: &SessionArgs) -> anyhow::Result<ExitCode> {
    let src = credentials::https_endpoint(from, how)?;
    let dst: Endpoint = match credentials::is_https(to) {
        true => credentials::https_endpoint(to, how)?,
        false => src.beside(to).map_err(anyhow::Error::msg)?,
    };
    if !src.same_server(&dst) {
        bail!("{to}: mv moves within one server");
    }
    with_client(how, async |c| {
        c.rename(&src, &dst).await.map_err(anyhow::Error::msg)
    })?;
    Ok(ExitCode::SUCCESS)
}

/// Runs `op` on each URL; every failure is reported, the exit code is the failures' kind
/// (docs/exit-codes.md).
fn each(
    urls: &[String],
    how: &SessionArgs,
    op: impl AsyncFn(&Client, &Endpoint) -> Result<(), String>,
) -> anyhow::Result<ExitCode> {
    let all = urls
        .iter()
        .map(|u| credentials::https_endpoint(u, how))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let failures = with_client(how, async |c| {
        let mut failures = Vec::new();
        for e in &all {
            if let Err(why) = op(c, e).await {
                say!("fatpipe: {why}");
                failures.push(Failure::of_error(&anyhow::anyhow!(why)));
            }
        }
        Ok(failures)
    })?;
    Ok(ExitCode::from(
        Failure::common(failures).map_or(0, Failure::exit_code),
    ))
}
