//! Several files of a copy at once (GridFTP's `-cc`): each session logs in over a control
//! connection of its own and takes the next planned file until none is left. A file's commands
//! cost round trips of their own (`RETR`/`STOR` and its `150`, the `226`, `CKSM`, `MFMT`), a
//! second or more per file at 200 ms, which one session pays file after file; several sessions
//! pay them side by side.

use super::copy::{takes_one_more, Copier, CopyOptions, FileResult, Observer};
use super::failure::Failure;
use super::plan::Job;
use super::retry;
use super::transport::LONG_PATH;
use super::uploads_ahead::{sends_ahead, UploadsAhead};
use super::{Connection, Credentials, RemoteUrl};
use fatpipe_net::udp::UdpConfig;
use std::collections::VecDeque;
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

/// Sessions a copy of many files opens when not told.
const AUTO_SESSIONS: u32 = 4;
/// ... and on a long path ([`LONG_PATH`]), where each file's round trips outweigh its data
/// (256 files of 4 MiB at 100 ms: see docs/parallel-streams-experiments.md).
const LONG_PATH_SESSIONS: u32 = 8;
/// Files at least this large on average are copied one at a time when not told: their data
/// phase, not their round trips, takes the time, and parallel streams serve them better.
const SMALL_FILES: u64 = 64 << 20;

/// A logged-in session as `opts` want it: tuning told, UDP channel or streams chosen, and
/// `-p auto`'s first stream count; for a copy's `Some(uploads)` or downloads, its first
/// transfer's passive address asked ahead (see [`Connection::expect_transfers`]).
pub(super) fn session(
    remote: &RemoteUrl,
    creds: &Credentials,
    opts: &CopyOptions,
    copies: Option<bool>,
) -> anyhow::Result<Connection> {
    let known = opts.features.known(&remote.server());
    let mut conn = remote.open(creds, opts.timeout, &opts.tls, known)?;
    if let Some(t) = &opts.tune {
        conn.set_tuning(t.clone())?;
    }
    match &opts.udp {
        // The files of one copy share what the path taught their sender (uploads; a server
        // keeps its own per client), and so does the next copy when the caller keeps it.
        Some((stack, udp)) => match conn.use_udp(
            stack,
            UdpConfig {
                memory: udp.memory.clone().or_else(|| Some(Default::default())),
                ..udp.clone()
            },
            opts.streams,
            opts.udp_asked,
        )? {
            None => {}
            Some(why) => {
                if opts.udp_asked {
                    tracing::warn!("{why}: the data goes over TCP");
                } else {
                    tracing::info!("{why}: the data goes over TCP");
                }
                conn.set_streams(opts.streams)?;
            }
        },
        None => {
            conn.set_streams(opts.streams)?;
            if opts.udp_on_random_loss.is_some() {
                conn.leave_tcp_on_random_loss();
            }
        }
    }
    if let Some((n, why)) = &opts.first_start {
        conn.start_streams_at(*n, why.clone());
    }
    if let Some(uploads) = copies {
        conn.expect_transfers(uploads);
        if !uploads && opts.udp_if_long && opts.udp_on_random_loss.is_some() {
            conn.expect_udp_start();
        }
    }
    Ok(conn)
}

/// A session as [`session`] opens it for a copy of `uploads` or downloads, its login
/// answered.
fn logged_in(
    remote: &RemoteUrl,
    creds: &Credentials,
    opts: &CopyOptions,
    uploads: bool,
) -> anyhow::Result<Connection> {
    let mut c = session(remote, creds, opts, Some(uploads))?;
    c.confirm_login()?;
    Ok(c)
}

/// How many sessions copy `jobs`: as asked (`--concurrency`), else for four or more files of
/// less than 64 MiB on average four, or eight where the control connection's `round_trip` is
/// 50 ms or more; else one. One always for standard output (one stream of bytes) and the UDP
/// channel (one paced flow per path).
pub(super) fn concurrency(
    opts: &CopyOptions,
    jobs: &[Job],
    to_stdout: bool,
    round_trip: Option<Duration>,
) -> u32 {
    let files = u32::try_from(jobs.len()).unwrap_or(u32::MAX).max(1);
    if to_stdout || opts.udp.is_some() {
        return 1;
    }
    if let Some(n) = opts.concurrency {
        return n.clamp(1, files);
    }
    let bytes: u64 = jobs.iter().filter_map(Job::size).sum();
    if files < AUTO_SESSIONS || bytes / u64::from(files) >= SMALL_FILES {
        1
    } else if round_trip.is_some_and(|t| t >= LONG_PATH) {
        LONG_PATH_SESSIONS.min(files)
    } else {
        AUTO_SESSIONS
    }
}

/// Copies `jobs` over `first` and `sessions - 1` more sessions; one result per file, in the
/// plan's order. A session that cannot log in leaves its share to the others.
pub(super) fn run(
    first: Connection,
    sessions: u32,
    remote: &RemoteUrl,
    creds: &Credentials,
    opts: &CopyOptions,
    obs: &dyn Observer,
    jobs: Vec<Job>,
) -> Vec<FileResult> {
    let uploads = jobs.first().is_some_and(Job::is_upload);
    let queue = Mutex::new(jobs.into_iter().enumerate().collect::<VecDeque<_>>());
    let server = Server {
        remote,
        creds,
        resuming: CopyOptions {
            resume: true,
            first_start: None,
            ..opts.clone()
        },
        halted: OnceLock::new(),
    };
    let mut done = std::thread::scope(|s| {
        let others: Vec<_> = (1..sessions)
            .map(|_| {
                // Its login is confirmed before it takes a file: one that cannot log in
                // (a server's limit on sessions) leaves the file to the others.
                s.spawn(|| match logged_in(remote, creds, opts, uploads) {
                    Ok(c) => work(c, &server, opts, obs, &queue),
                    Err(e) => {
                        tracing::warn!(
                            "one more session could not log in ({e:#}); the others go on"
                        );
                        Vec::new()
                    }
                })
            })
            .collect();
        let mut done = work(first, &server, opts, obs, &queue);
        for o in others {
            match o.join() {
                Ok(d) => done.extend(d),
                Err(_) => tracing::error!("a copy session panicked; its file is missing"),
            }
        }
        done
    });
    done.sort_by_key(|(i, _)| *i);
    done.into_iter().map(|(_, r)| r).collect()
}

/// The server of a copy, for new sessions when one broke: where, who, and the options of a
/// session that continues what arrived (`--resume`).
struct Server<'a> {
    remote: &'a RemoteUrl,
    creds: &'a Credentials,
    resuming: CopyOptions,
    /// Set when a disk fills (this machine's or the server's): the files not begun stay so.
    halted: OnceLock<Failure>,
}

/// One session's loop: the next planned file until none is left; each result with its place
/// in the plan. A file whose connection broke is tried again (see [`retry`]).
fn work<'a>(
    c: Connection,
    server: &'a Server<'a>,
    opts: &'a CopyOptions,
    obs: &'a dyn Observer,
    queue: &Mutex<VecDeque<(usize, Job)>>,
) -> Vec<(usize, FileResult)> {
    let mut copier = Copier {
        c,
        opts,
        obs,
        results: Vec::new(),
        next: Vec::new(),
        halted: &server.halted,
    };
    let mut places = Vec::new();
    let take = || queue.lock().ok().and_then(|mut q| q.pop_front());
    // Small downloads after the current one are taken with it: theirs may go out behind its
    // own (pipelined).
    let mut mine = VecDeque::new();
    // Small uploads go out before the replies to those before them are in (pipelined).
    let mut ahead = UploadsAhead::default();
    while let Some((i, job)) = mine.pop_front().or_else(take) {
        if sends_ahead(&job, opts.resume) {
            while !ahead.has_room(job.size().unwrap_or(0)) && !ahead.is_empty() {
                end_oldest(&mut copier, &mut ahead, server, &mut places);
            }
            if let Some(sent) = copier.send_upload(&job) {
                ahead.push(i, job, sent);
                continue;
            }
        }
        end_all(&mut copier, &mut ahead, server, &mut places);
        let mut next: Vec<Job> = mine.iter().map(|(_, j): &(usize, Job)| j.clone()).collect();
        while takes_one_more(&job, &next, opts.resume) {
            let Some(more) = take() else { break };
            next.push(more.1.clone());
            mine.push_back(more);
        }
        copier.next = next;
        copy_one(&mut copier, server, i, job, &mut places);
    }
    end_all(&mut copier, &mut ahead, server, &mut places);
    let Copier { c, results, .. } = copier;
    c.quit();
    places.into_iter().zip(results).collect()
}

/// Copies `job` (at `place` in the plan) the normal way, retried as [`retry_file`] says.
fn copy_one<'a>(
    copier: &mut Copier<'a>,
    server: &'a Server<'a>,
    place: usize,
    job: Job,
    places: &mut Vec<usize>,
) {
    copier.run(job.clone());
    places.push(place);
    let failure = copier.results.last().and_then(|r| r.failure);
    if let Some(full @ (Failure::LocalDiskFull | Failure::ServerDiskFull)) = failure {
        let _ = server.halted.set(full);
    }
    // Standard output cannot take bytes back: a broken download there is not retried.
    if !matches!(job, Job::Download { target: None, .. }) {
        retry_file(copier, server, &job);
    }
}

/// Ends the oldest upload sent ahead. One that failed goes again the normal way once every
/// upload sent after it has ended (the server refuses those once one failed, and they go
/// again too).
fn end_oldest<'a>(
    copier: &mut Copier<'a>,
    ahead: &mut UploadsAhead,
    server: &'a Server<'a>,
    places: &mut Vec<usize>,
) {
    let Some((place, job, sent)) = ahead.oldest() else {
        return;
    };
    if copier.end_upload(sent) {
        places.push(place);
        return;
    }
    let mut again = vec![(place, job)];
    while let Some((place, job, sent)) = ahead.oldest() {
        match copier.end_upload(sent) {
            true => places.push(place),
            false => again.push((place, job)),
        }
    }
    for (place, job) in again {
        copy_one(copier, server, place, job, places);
    }
}

/// Ends every upload sent ahead (see [`end_oldest`]).
fn end_all<'a>(
    copier: &mut Copier<'a>,
    ahead: &mut UploadsAhead,
    server: &'a Server<'a>,
    places: &mut Vec<usize>,
) {
    while !ahead.is_empty() {
        end_oldest(copier, ahead, server, places);
    }
}

/// While the file's last attempt lost its connection and `--retry-for` allows: a pause, a new
/// session, the file again from what arrived. The file's result is its last attempt's; one
/// that gives up says how to continue.
fn retry_file<'a>(copier: &mut Copier<'a>, server: &'a Server<'a>, job: &Job) {
    let opts = copier.opts;
    let first_failure = Instant::now();
    let mut pause = None;
    loop {
        let Some((error, failure)) = copier
            .results
            .last()
            .and_then(|r| Some((r.error.clone()?, r.failure?)))
        else {
            return;
        };
        if !failure.transient() || copier.obs.stop_requested() {
            return;
        }
        let wait = retry::next_pause(pause);
        pause = Some(wait);
        if first_failure.elapsed() + wait > opts.retry_for {
            if let Some(r) = copier.results.last_mut() {
                r.fail_with(format!(
                    "{error} (gave up after retrying for {}, --retry-for; run the same command \
                     with --resume to continue from what arrived)",
                    humantime::format_duration(Duration::from_secs(
                        first_failure.elapsed().as_secs()
                    ))
                ));
            }
            return;
        }
        tracing::warn!(
            "{error}; trying again in {} (--retry-for)",
            humantime::format_duration(wait)
        );
        std::thread::sleep(wait);
        match session(
            server.remote,
            server.creds,
            &server.resuming,
            Some(job.is_upload()),
        ) {
            Ok(c) => {
                // The old session's connections are broken: dropped, not asked to QUIT.
                drop(std::mem::replace(&mut copier.c, c));
                copier.results.pop();
                copier.opts = &server.resuming;
                copier.run(job.clone());
                copier.opts = opts;
            }
            Err(e) => {
                if let Some(r) = copier.results.last_mut() {
                    r.fail(&e);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn options(concurrency: Option<u32>) -> CopyOptions {
        CopyOptions {
            recursive: true,
            concurrency,
            timeout: Duration::from_secs(1),
            verify: crate::client::copy::Verify::Off,
            ..CopyOptions::default()
        }
    }

    fn files(n: usize, size: u64) -> Vec<Job> {
        (0..n)
            .map(|i| Job::Download {
                rpath: format!("/f{i}"),
                target: None,
                size: Some(size),
                modified: None,
            })
            .collect()
    }

    #[test]
    fn many_small_files_go_four_at_a_time_eight_on_a_long_path_large_ones_one() {
        let auto = options(None);
        let lan = Some(Duration::from_millis(1));
        let wan = Some(Duration::from_millis(100));
        assert_eq!(concurrency(&auto, &files(256, 4 << 20), false, lan), 4);
        assert_eq!(concurrency(&auto, &files(256, 4 << 20), false, None), 4);
        assert_eq!(concurrency(&auto, &files(256, 4 << 20), false, wan), 8);
        assert_eq!(concurrency(&auto, &files(5, 4 << 20), false, wan), 5);
        assert_eq!(concurrency(&auto, &files(3, 4 << 20), false, wan), 1);
        assert_eq!(concurrency(&auto, &files(8, 1 << 30), false, wan), 1);
        // Asked for: as asked, never more than the files.
        assert_eq!(
            concurrency(&options(Some(8)), &files(256, 1 << 30), false, lan),
            8
        );
        assert_eq!(concurrency(&options(Some(8)), &files(2, 1), false, lan), 2);
        // Standard output takes one stream of bytes.
        assert_eq!(concurrency(&options(Some(8)), &files(256, 1), true, wan), 1);
    }
}
