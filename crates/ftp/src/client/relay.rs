//! `fatpipe cp ftp://A/x ftp://B/y`: one file from one server to another, the data going
//! straight between them (see `Connection::relay_to`), checked at the end by comparing the two
//! servers' checksums of it.

use super::copy_options::{CopyOptions, Verify};
use super::failure::misuse;
use super::file_result::{FileResult, Observer};
use super::{pool, Credentials, Location, RemoteUrl};
use anyhow::{bail, Context};
use fatpipe_net::Pump;
use fatpipe_proto::gridftp::parse_transfer_notes;
use std::sync::Arc;
use std::time::Instant;

/// Copies the one remote file `src` names to `dst` on another server; `creds` log in to each.
pub fn relay(
    src: &Location,
    dst: &Location,
    creds: (&Credentials, &Credentials),
    opts: &CopyOptions,
    obs: &dyn Observer,
) -> anyhow::Result<Vec<FileResult>> {
    let (Location::Remote(from), Location::Remote(to)) = (src, dst) else {
        return Err(misuse("a copy between servers needs two ftp:// URLs"));
    };
    if opts.udp.is_some() {
        return Err(misuse(
            "--transport udp moves data between this machine and one server, not between two",
        ));
    }
    if opts.recursive || opts.from.is_some() || from.path.contains(['*', '?', '[']) {
        return Err(misuse(
            "a copy between two servers takes one file (no -r, --from or globs yet)",
        ));
    }
    let mut a = pool::session(from, creds.0, opts, None)?;
    let mut b = pool::session(to, creds.1, opts, None)?;
    let target = if to.path.ends_with('/') || b.is_dir(&to.path)? {
        let name = from.path.rsplit('/').next().unwrap_or(&from.path);
        format!("{}/{name}", to.path.trim_end_matches('/'))
    } else {
        to.path.clone()
    };
    let size = a.size(&from.path)?;
    let pump = Arc::new(Pump::default());
    obs.file_started(&from.path, size, 0, &pump);
    let started = Instant::now();
    let outcome = a
        .relay_to(&from.path, &mut b, &target, &pump)
        .and_then(|relayed| {
            let stored = b.size(&target)?;
            if let (Some(s), Some(d)) = (size, stored) {
                if s != d {
                    bail!("{target} holds {d} bytes after the copy, the source {s}");
                }
            }
            let verified = verify(&mut a, &from.path, &mut b, &target, opts.verify)?;
            Ok((relayed, stored.or(size).unwrap_or(0), verified))
        });
    let seconds = started.elapsed().as_secs_f64();
    let describe = |u: &RemoteUrl, path: &str| format!("ftp://{}:{}{path}", u.host, u.port);
    let mut result = FileResult {
        source: describe(from, &from.path),
        destination: describe(to, &target),
        data_seconds: Some(seconds),
        ..FileResult::default()
    };
    match outcome {
        Ok((relayed, bytes, verified)) => {
            let notes = parse_transfer_notes(&relayed.sender);
            result.bytes = bytes;
            result.streams = relayed.extended.then(|| notes.streams.unwrap_or(1));
            result.stream_decisions = notes.decisions;
            result.verified = verified;
        }
        Err(e) => {
            result.bytes = pump.bytes();
            result.fail(&e);
        }
    }
    obs.file_finished(&result);
    a.quit();
    b.quit();
    Ok(vec![result])
}

/// Compares the two servers' checksums of the copy, with the fastest algorithm both list:
/// always with `--verify`, with XXH3 only (two fatpipe servers) by default.
fn verify(
    a: &mut super::Connection,
    from: &str,
    b: &mut super::Connection,
    to: &str,
    verify: Verify,
) -> anyhow::Result<Option<String>> {
    let theirs = b.checksum_algs();
    let common: Vec<_> = a
        .checksum_algs()
        .into_iter()
        .filter(|x| theirs.contains(x))
        .collect();
    let alg = match (verify, common.first()) {
        (Verify::Off, _) => return Ok(None),
        (Verify::Auto, Some(&x)) if x == fatpipe_proto::gridftp::ChecksumAlg::Xxh3 => x,
        (Verify::Auto, _) => return Ok(None),
        (Verify::On, Some(&x)) => x,
        (Verify::On, None) => bail!("--verify: the two servers share no checksum algorithm"),
    };
    let source = a.checksum(alg, from).context("source checksum")?;
    let copy = b.checksum(alg, to).context("destination checksum")?;
    if source != copy {
        bail!("checksums differ: {alg} {source} at the source, {copy} at the destination");
    }
    Ok(Some(format!("{alg}:{source}")))
}
