//! `fatpipe ls`, `mkdir`, `rm` and `mv` on `https://` and `davs://` URLs: the same commands
//! over WebDAV (PROPFIND, MKCOL, DELETE, MOVE), with the credentials `cp` uses.

use crate::credentials::{self, SessionArgs};
use anyhow::bail;
use fatpipe_ftp::client::failure::Failure;
use fatpipe_http::client::{member_of, Client, Endpoint, MAX_DEPTH};
use fatpipe_http::multistatus::Resource;
use fatpipe_net::TunerConfig;
use fatpipe_proto::listing::{Entry, EntryKind};
use std::process::ExitCode;
use std::time::UNIX_EPOCH;

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

/// `e` as `ls` prints it: its name (the last path component), kind, size and time.
fn entry(r: &Resource) -> Entry {
    let name = r
        .path
        .trim_end_matches('/')
        .rsplit('/')
        .next()
        .unwrap_or("");
    Entry {
        name: if name.is_empty() {
            "/".into()
        } else {
            name.into()
        },
        kind: if r.dir {
            EntryKind::Dir
        } else {
            EntryKind::File
        },
        size: r.size.unwrap_or(0),
        modified: r
            .modified
            .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
            .map_or(0, |d| d.as_secs() as i64),
        mode: 0,
    }
}

/// The entries `url` lists: a collection's members, a file itself, or a glob's matches.
pub fn list(url: &str, how: &SessionArgs) -> anyhow::Result<Vec<Entry>> {
    let e = credentials::https_endpoint(url, how)?;
    with_client(how, async |c| {
        // A glob lists its matches themselves.
        if let Some(hits) = c.matches(&e).await.map_err(anyhow::Error::msg)? {
            return Ok(hits.iter().map(|(_, r)| entry(r)).collect());
        }
        let listed = c.list(&e).await.map_err(anyhow::Error::msg)?;
        Ok(match listed.itself {
            Some(file) if !file.dir => vec![entry(&file)],
            None if listed.members.is_empty() => bail!("{url}: the server listed nothing"),
            _ => listed.members.iter().map(entry).collect(),
        })
    })
}

/// `ls -R` on a collection: `show` gets its entries, then each collection's below it under its
/// heading (its path), depth first in the order listed, as for FTP; at most [`MAX_DEPTH`]
/// levels, and only members that are plain names in the collection listed.
pub fn list_tree(
    url: &str,
    how: &SessionArgs,
    mut show: impl FnMut(Option<&str>, &[Entry]),
) -> anyhow::Result<()> {
    let top = credentials::https_endpoint(url, how)?;
    with_client(how, async |c| {
        let mut todo = vec![(top, None, 0)];
        while let Some((mut dir, heading, depth)) = todo.pop() {
            if depth > MAX_DEPTH {
                bail!("{}: tree deeper than {MAX_DEPTH} levels", dir.url);
            }
            let listed = c.list(&dir).await.map_err(anyhow::Error::msg)?;
            if let (None, Some(file)) = (&heading, listed.itself.as_ref().filter(|f| !f.dir)) {
                show(None, &[entry(file)]);
                continue;
            }
            // A collection's members are named below its path with a slash.
            if !dir.url.path().ends_with('/') {
                let path = format!("{}/", dir.url.path());
                dir.url.set_path(&path);
            }
            let entries: Vec<Entry> = listed.members.iter().map(entry).collect();
            show(heading.as_deref(), &entries);
            let below = listed.members.iter().filter(|r| r.dir).rev();
            for r in below {
                let sub = member_of(&dir, r).map_err(anyhow::Error::msg)?;
                let path = percent_encoding::percent_decode_str(sub.url.path())
                    .decode_utf8_lossy()
                    .trim_end_matches('/')
                    .to_string();
                todo.push((sub, Some(path), depth + 1));
            }
        }
        Ok(())
    })
}

/// Makes each collection; `parents`: the missing ones above too, and those there are fine.
pub fn mkdir(urls: &[String], parents: bool, how: &SessionArgs) -> anyhow::Result<ExitCode> {
    each(urls, how, async |c, e| {
        if parents {
            for above in ancestors(e) {
                c.make_dir(&above, true).await?;
            }
        }
        c.make_dir(e, parents).await
    })
}

/// Removes each file (a glob in the last component: its matches); a collection only with
/// `recursive` (DELETE removes it whole).
pub fn rm(urls: &[String], recursive: bool, how: &SessionArgs) -> anyhow::Result<ExitCode> {
    each(urls, how, async |c, e| {
        let named = match c.matches(e).await? {
            Some(hits) => hits.into_iter().map(|(e, r)| (e, r.dir)).collect(),
            None => vec![(e.clone(), c.stat(e).await?.dir)],
        };
        for (e, dir) in named {
            if dir && !recursive {
                return Err(format!(
                    "{} is a directory (use -r to remove it and everything in it)",
                    e.url
                ));
            }
            c.remove(&e).await?;
        }
        Ok(())
    })
}

/// Renames `from` to `to`: a URL on the same server, or a path (absolute, or relative to
/// `from`'s directory).
pub fn mv(from: &str, to: &str, how: &SessionArgs) -> anyhow::Result<ExitCode> {
    let src = credentials::https_endpoint(from, how)?;
    let dst = match credentials::is_https(to) {
        true => credentials::https_endpoint(to, how)?,
        false => Endpoint {
            url: src.url.join(to)?,
            authorization: src.authorization.clone(),
        },
    };
    if (dst.url.host_str(), dst.url.port_or_known_default())
        != (src.url.host_str(), src.url.port_or_known_default())
    {
        bail!("{to}: mv moves within one server");
    }
    with_client(how, async |c| {
        c.rename(&src, &dst).await.map_err(anyhow::Error::msg)
    })?;
    Ok(ExitCode::SUCCESS)
}

/// The collections above `e`, outermost first (not the root).
fn ancestors(e: &Endpoint) -> Vec<Endpoint> {
    let path = e.url.path().trim_end_matches('/');
    let mut out = Vec::new();
    let mut at = 0;
    while let Some(i) = path[at + 1..].find('/') {
        at += i + 1;
        let mut url = e.url.clone();
        url.set_path(&format!("{}/", &path[..at]));
        out.push(Endpoint {
            url,
            authorization: e.authorization.clone(),
        });
    }
    out
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_paths_ancestors_are_its_collections_outermost_first() {
        let e = Endpoint {
            url: url::Url::parse("https://h:8443/a/b/c").unwrap(),
            authorization: None,
        };
        let got: Vec<String> = ancestors(&e)
            .iter()
            .map(|a| a.url.path().to_string())
            .collect();
        assert_eq!(got, ["/a/", "/a/b/"]);
    }
}
