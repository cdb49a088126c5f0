//! The copy command as a library call: the sides of a copy, its files planned, compared
//! with what is there already (`--existing`, `--delete`), and copied over one or several
//! sessions.

use super::copy_options::CopyOptions;
use super::failure::misuse;
use super::file_result::{FileResult, Observer, DRY_RUN};
use super::mirror;
use super::plan::{self, Job};
use super::pool;
use super::room;
use super::sync;
use super::{Connection, Credentials, Location, RemoteUrl};

/// Copies `srcs` (all local, or all on one server) to `dst`; exactly one side must be remote.
/// Returns one result per file; an error return means nothing could be copied at all (no
/// connection, bad arguments, a source that is not there).
pub fn run(
    srcs: &[Location],
    dst: &Location,
    creds: &Credentials,
    opts: &CopyOptions,
    obs: &dyn Observer,
) -> anyhow::Result<Vec<FileResult>> {
    let (remote, paths, download) = sides(srcs, dst)?;
    let mut conn = pool::session(remote, creds, opts, Some(!download))?;
    let planned = match plan_files(&mut conn, (remote, &paths, download), dst, opts) {
        Ok(planned) => planned,
        Err(e) => {
            conn.quit();
            return Err(e);
        }
    };
    // Logged in by now: the features the server lists then, for the next copy.
    opts.features.see(conn.features());
    let (jobs, mut left_out) = sync::select(&mut conn, planned.jobs, opts.existing);
    let extras = match opts.delete {
        true => mirror::extras(&mut conn, &planned.walked),
        false => Vec::new(),
    };
    if opts.dry_run {
        conn.quit();
        let mut all: Vec<FileResult> = jobs.iter().map(|j| sync::left_out(j, DRY_RUN)).collect();
        all.append(&mut left_out);
        all.extend(extras.iter().map(mirror::deleted));
        return Ok(all);
    }
    left_out.extend(mirror::remove(&mut conn, &extras, download));
    if let (true, Location::Local(d)) = (download, dst) {
        if let Err(e) = room::ensure_for_tree(d, &jobs, opts.resume) {
            conn.quit();
            return Err(e);
        }
    }
    obs.planned(jobs.len(), jobs.iter().filter_map(Job::size).sum());
    let stdout = dst == &Location::Stdout;
    let sessions = pool::concurrency(opts, &jobs, stdout, conn.round_trip());
    if !starts_on_udp(&mut conn, opts, &jobs, download) {
        // One session of large files may start with several streams; many share the path.
        if let Some(size) = jobs.first().and_then(Job::size).filter(|_| sessions == 1) {
            conn.start_cold(size);
        }
    }
    let mut results = pool::run(conn, sessions, remote, creds, opts, obs, jobs);
    results.append(&mut left_out);
    Ok(results)
}

/// One file to or from a server path memory knows nothing of (`opts.udp_if_long`): whether
/// it starts on the UDP channel, the path being long ([`Connection::start_on_udp_if_long`]).
fn starts_on_udp(conn: &mut Connection, opts: &CopyOptions, jobs: &[Job], download: bool) -> bool {
    let (Some((stack, udp)), [job]) = (
        opts.udp_on_random_loss
            .as_ref()
            .filter(|_| opts.udp_if_long),
        jobs,
    ) else {
        return false;
    };
    match conn.start_on_udp_if_long(stack, udp.clone(), opts.streams, job.size()) {
        Ok(Some(_)) => {
            // A download's passive address rides with its `RETR`, as on a session that
            // started on the channel (uploads asked for it already).
            conn.expect_transfers(!download);
            true
        }
        Ok(None) => false,
        Err(e) => {
            tracing::warn!("cannot start on the UDP channel ({e:#}): the data goes over TCP");
            false
        }
    }
}

/// The files of a copy of `paths` (on `remote` or here, as `sides` found them) to `dst`, as
/// `opts` asks (a dry run makes no directory).
pub(super) fn plan_files(
    c: &mut Connection,
    (remote, paths, download): (&RemoteUrl, &[String], bool),
    dst: &Location,
    opts: &CopyOptions,
) -> anyhow::Result<plan::Planned> {
    let req = plan::Request {
        sources: paths,
        from: opts.from.as_deref(),
        recursive: opts.recursive,
        create_dirs: opts.create_dirs,
        filter: &opts.filter,
        dry_run: opts.dry_run,
    };
    match (download, dst) {
        (true, Location::Local(p)) => plan::download(c, &req, Some(p)),
        (true, _) => plan::download(c, &req, None),
        (false, _) => plan::upload(c, &req, &remote.path),
    }
}

/// The server of a copy, the source paths on the side they are on, and whether it is a
/// download; the sources must all be local, or all on the destination's other side's server.
pub(super) fn sides<'a>(
    srcs: &'a [Location],
    dst: &'a Location,
) -> anyhow::Result<(&'a RemoteUrl, Vec<String>, bool)> {
    let Some(first) = srcs.first() else {
        return Err(misuse("nothing to copy: name a source"));
    };
    let mut paths = Vec::new();
    for s in srcs {
        match (s, first) {
            (Location::Remote(r), Location::Remote(f)) => {
                if (&r.host, r.port, &r.user) != (&f.host, f.port, &f.user) {
                    return Err(misuse(
                        "the sources of one copy must all be on one server (as one user)",
                    ));
                }
                paths.push(r.path.clone());
            }
            (Location::Local(p), Location::Local(_)) => {
                paths.push(p.to_string_lossy().into_owned())
            }
            (Location::Stdout, _) => {
                return Err(misuse("'-' (standard output) can only be a destination"))
            }
            _ => {
                return Err(misuse(
                    "the sources of one copy must all be local or all remote",
                ))
            }
        }
    }
    match (first, dst) {
        (Location::Remote(r), Location::Local(_) | Location::Stdout) => Ok((r, paths, true)),
        (Location::Local(_), Location::Remote(r)) => Ok((r, paths, false)),
        _ => Err(misuse("one side of a copy must be an ftp:// URL and the other a local path, or both URLs of one file each")),
    }
}
