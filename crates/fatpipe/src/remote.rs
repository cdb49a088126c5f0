//! `fatpipe mkdir`, `rm` and `mv`: the changes to a server's files users expect beside `cp`.

use crate::credentials;
use anyhow::bail;
use fatpipe_ftp::client::failure::Failure;
use fatpipe_ftp::client::plan::remote_matches;
use fatpipe_ftp::client::{Connection, Location, RemoteUrl};
use std::process::ExitCode;

/// Options of `fatpipe mkdir`.
#[derive(clap::Args, Debug)]
pub struct MkdirArgs {
    /// ftp://[user[:password]@]host[:port]/dir, one or more (on one server); or https:// URLs.
    #[arg(required = true)]
    urls: Vec<String>,
    /// Make missing parents too, and accept directories that exist.
    #[arg(short, long)]
    parents: bool,
    #[command(flatten)]
    session: credentials::SessionArgs,
}

/// Options of `fatpipe rm`.
#[derive(clap::Args, Debug)]
pub struct RmArgs {
    /// ftp://[user[:password]@]host[:port]/path, one or more (on one server); the last
    /// component may be a glob (quote it: 'ftp://host/tmp/*.part'); or https:// URLs (no globs).
    #[arg(required = true)]
    urls: Vec<String>,
    /// Remove directories and everything in them.
    #[arg(short, long)]
    recursive: bool,
    #[command(flatten)]
    session: credentials::SessionArgs,
}

/// Options of `fatpipe mv`.
#[derive(clap::Args, Debug)]
pub struct MvArgs {
    /// ftp://[user[:password]@]host[:port]/path (or an https:// URL): what to move.
    url: String,
    /// The new path on the same server: absolute, relative to the source's directory, or an
    /// ftp:// URL. An existing name is never replaced.
    to: String,
    #[command(flatten)]
    session: credentials::SessionArgs,
}

/// Makes each directory.
pub fn mkdir(a: MkdirArgs) -> anyhow::Result<ExitCode> {
    if a.urls.iter().any(|u| credentials::is_https(u)) {
        return crate::dav::mkdir(&a.urls, a.parents, &a.session);
    }
    each(&a.urls, &a.session, |c, path| {
        if a.parents {
            c.mkdir_all(path)
        } else {
            c.make_dir(path)
        }
    })
}

/// Removes each file (and, with -r, each tree); a glob in a path's last component removes
/// what it matches.
pub fn rm(a: RmArgs) -> anyhow::Result<ExitCode> {
    if a.urls.iter().any(|u| credentials::is_https(u)) {
        return crate::dav::rm(&a.urls, a.recursive, &a.session);
    }
    each(&a.urls, &a.session, |c, path| {
        for p in remote_matches(c, path)? {
            if !c.is_dir(&p)? {
                c.delete(&p)?;
            } else if a.recursive {
                c.remove_tree(&p)?;
            } else {
                bail!("{p} is a directory (use -r to remove it and everything in it)");
            }
        }
        Ok(())
    })
}

/// Renames one file or directory.
pub fn mv(a: MvArgs) -> anyhow::Result<ExitCode> {
    if credentials::is_https(&a.url) {
        return crate::dav::mv(&a.url, &a.to, &a.session);
    }
    let from = credentials::remote(&a.url)?;
    let to = match Location::parse(&a.to)? {
        Location::Remote(u) if same_server(&u, &from) => u.path,
        Location::Remote(_) => bail!("{}: mv moves within one server", a.to),
        _ if a.to.starts_with('/') => a.to.clone(),
        _ => {
            let dir = from
                .path
                .trim_end_matches('/')
                .rsplit_once('/')
                .map_or("", |(d, _)| d);
            format!("{dir}/{}", a.to)
        }
    };
    each(std::slice::from_ref(&a.url), &a.session, |c, path| {
        c.rename(path, &to)
    })
}

/// Whether two URLs name one server and login.
fn same_server(a: &RemoteUrl, b: &RemoteUrl) -> bool {
    (&a.host, a.port, &a.user) == (&b.host, b.port, &b.user)
}

/// Logs in to the server of `urls` once and runs `op` on each path; every failure is reported,
/// the exit code is the failures' kind (docs/exit-codes.md).
fn each(
    urls: &[String],
    how: &credentials::SessionArgs,
    mut op: impl FnMut(&mut Connection, &str) -> anyhow::Result<()>,
) -> anyhow::Result<ExitCode> {
    let urls = urls
        .iter()
        .map(|u| credentials::remote(u))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let Some(first) = urls.first() else {
        bail!("name a remote path");
    };
    if let Some(u) = urls.iter().find(|u| !same_server(u, first)) {
        bail!(
            "{}: all paths must be on {}:{}",
            u.path,
            first.host,
            first.port
        );
    }
    let mut c = credentials::open(first, how)?;
    let mut failures = Vec::new();
    for u in &urls {
        if let Err(e) = op(&mut c, &u.path) {
            say!("fatpipe: {e:#}");
            failures.push(Failure::of_error(&e));
        }
    }
    c.quit();
    Ok(ExitCode::from(
        Failure::common(failures).map_or(0, Failure::exit_code),
    ))
}
