//! Checking a copy: the server's checksum asked with the transfer (ahead of or behind its
//! command), this end's taken beside it, the two compared.

use super::connection::checksum_command;
use super::copy_options::Verify;
use super::Connection;
use anyhow::{bail, Context};
use fatpipe_net::checksum::{checksum, CacheWatch, Follower};
use fatpipe_net::Pump;
use fatpipe_proto::gridftp::ChecksumAlg;
use fatpipe_proto::Command;
use std::fs::File;
use std::path::Path;
use std::sync::Arc;

/// How far ahead of what has been sent an upload's hash may read (the sender reads the same
/// pages from the cache a moment later).
const LEAD: u64 = 64 << 20;

/// `file` hashed with `alg` beside its transfer, as far as `ready` says it is in place.
pub(super) fn follow(
    file: &File,
    alg: ChecksumAlg,
    ready: impl Fn() -> u64 + Send + 'static,
) -> Option<Follower> {
    match file
        .try_clone()
        .and_then(|f| Follower::start(f, alg, ready))
    {
        Ok(f) => Some(f),
        Err(e) => {
            tracing::debug!("cannot hash beside the transfer: {e}");
            None
        }
    }
}

/// `file` hashed with `alg` beside its transfer ([`follow`]) or, unverified, only its page
/// cache let go of behind it if it is large ([`CacheWatch`]); as far as `ready` says the
/// transfer has got.
pub(super) fn beside(
    file: &File,
    alg: Option<ChecksumAlg>,
    ready: impl Fn() -> u64 + Send + 'static,
) -> (Option<Follower>, Option<CacheWatch>) {
    match alg {
        Some(alg) => (follow(file, alg, ready), None),
        None => {
            let watch = file.try_clone().and_then(|f| CacheWatch::start(f, ready));
            let watch = watch.map_err(|e| tracing::debug!("cannot follow the transfer: {e}"));
            (None, watch.ok())
        }
    }
}

/// Before an upload of `file` (`len` bytes) from `have`: this end's hash, taken as the file is
/// read for sending (a few blocks ahead of what `pump` counts as gone), or unverified the watch
/// on its page cache ([`beside`]; held until the upload ends), and what the server holds
/// afterwards asked behind the `STOR` (`SIZE`, and the checksum under `alg`).
pub(super) fn prepare_upload_check(
    c: &mut Connection,
    file: &File,
    alg: Option<ChecksumAlg>,
    rpath: &str,
    (have, len): (u64, u64),
    pump: &Arc<Pump>,
) -> (Option<Follower>, Option<CacheWatch>) {
    let from = pump.bytes();
    let sent = pump.clone();
    let followed = beside(file, alg, move || {
        (have + sent.bytes().saturating_sub(from) + LEAD).min(len)
    });
    c.ask_behind(Command::Size(rpath.into()));
    ask_checksum(c, alg, rpath, false);
    followed
}

/// After an upload's data: the server's size against `len` and its checksum against this
/// end's (`hashed` beside the transfer, else read now), as `verify` says; when they agree the
/// file's modification time is set (`MFMT`). A size that differs, or a broken connection, is
/// the outer error; the checksums' verdict the inner result (`ALG:hex` when compared).
pub(super) fn check_upload(
    c: &mut Connection,
    verify: Verify,
    (rpath, local): (&str, &Path),
    len: u64,
    modified: i64,
    hashed: Option<Follower>,
) -> anyhow::Result<anyhow::Result<Option<String>>> {
    // Else SIZE goes out with the checksum (verify_copy sends both before it hashes this
    // end's copy): one round trip for both.
    if !c.is_asked(&Command::Size(rpath.into())) {
        c.ask_ahead(Command::Size(rpath.into()));
    }
    let verified = verify_copy(c, verify, rpath, local, hashed);
    if let Some(remote) = c.size(rpath)? {
        if remote != len {
            bail!("{rpath}: server has {remote} bytes after the upload, expected {len}");
        }
    }
    if verified.is_ok() && !c.set_modified(rpath, modified) {
        tracing::debug!("{rpath}: the server cannot set its modification time (no MFMT)");
    }
    Ok(verified)
}

/// Whether the `have` bytes the server holds of `rpath` are the first `have` bytes of `file`:
/// a resumed upload may only continue its own beginning (the server may hold an older file,
/// or, when a replacement failed, the file it replaced). `None` when no checksum can tell.
pub(super) fn remote_is_prefix(
    c: &mut Connection,
    rpath: &str,
    file: &File,
    have: u64,
) -> anyhow::Result<Option<bool>> {
    let Some(&alg) = c.checksum_algs().first() else {
        return Ok(None);
    };
    let theirs = match c.checksum_of_prefix(alg, rpath, have) {
        Ok(sum) => sum,
        Err(e) => {
            tracing::debug!("{rpath}: no checksum of what the server holds: {e:#}");
            return Ok(None);
        }
    };
    let mine = checksum(file, alg, 0, Some(have))?;
    Ok(Some(mine == theirs))
}

/// Whether a destination as long as the source holds the same bytes, by checksum: `Some`
/// (with `ALG:hex`, or `None` under `--no-verify`, which takes the length's word) when it
/// does; `None` when it differs or no checksum can tell.
pub(super) fn already_there(
    c: &mut Connection,
    verify: Verify,
    rpath: &str,
    local: &Path,
) -> anyhow::Result<Option<Option<String>>> {
    if verify == Verify::Off {
        return Ok(Some(None));
    }
    Ok(match verify_copy(c, Verify::On, rpath, local, None) {
        Ok(v) => Some(v),
        Err(e) => {
            tracing::info!("{e:#}");
            None
        }
    })
}

/// Compares the local file's checksum (`hashed` beside the transfer, else read now) with the
/// server's (`CKSM`), as `verify` says; returns `ALG:hex` when they were compared and agree.
pub(super) fn verify_copy(
    c: &mut Connection,
    verify: Verify,
    rpath: &str,
    local: &Path,
    hashed: Option<Follower>,
) -> anyhow::Result<Option<String>> {
    let Some(alg) = verify_alg(c, verify, rpath, local)? else {
        return Ok(None);
    };
    // The server hashes its copy while this end hashes its own.
    let cmd = checksum_command(alg, rpath);
    if !c.is_asked(&cmd) {
        c.ask_ahead(cmd);
    }
    c.send_ahead()?;
    let file = File::open(local).with_context(|| format!("cannot read {}", local.display()))?;
    // Hashed beside the transfer (`hashed`) unless that hash could not keep up.
    let len = file.metadata()?.len();
    let mine = match hashed.and_then(|f| f.finish(len).ok()) {
        Some(sum) => {
            tracing::debug!("{}: checksum taken beside the transfer", local.display());
            sum
        }
        None => checksum(&file, alg, 0, None)
            .with_context(|| format!("checksum of {}", local.display()))?,
    };
    let theirs = c.checksum(alg, rpath)?;
    if mine != theirs {
        bail!(
            "{rpath}: {alg} checksum mismatch: {} has {mine}, the server has {theirs}",
            local.display()
        );
    }
    Ok(Some(format!("{alg}:{mine}")))
}

/// Asks the server for `rpath`'s checksum with `alg` (what [`verify_alg`] chose, if any)
/// behind the next transfer command (see `Connection::ask_behind`), or where it cannot be
/// asked so, ahead of the next command if `ahead` allows.
pub(super) fn ask_checksum(c: &mut Connection, alg: Option<ChecksumAlg>, rpath: &str, ahead: bool) {
    let Some(alg) = alg else { return };
    let cmd = checksum_command(alg, rpath);
    c.ask_behind(cmd.clone());
    if ahead && !c.is_asked(&cmd) {
        c.ask_ahead(cmd);
    }
}

/// The algorithm [`verify_copy`] compares `rpath` and `local` with, if any.
pub(super) fn verify_alg(
    c: &Connection,
    verify: Verify,
    rpath: &str,
    local: &Path,
) -> anyhow::Result<Option<ChecksumAlg>> {
    let regular = std::fs::metadata(local).is_ok_and(|m| m.is_file());
    match verify {
        Verify::Off => Ok(None),
        // /dev/null and other devices hold nothing to compare.
        Verify::Auto if !regular => Ok(None),
        Verify::On if !regular => {
            bail!(
                "{rpath}: cannot verify: {} is not a regular file",
                local.display()
            )
        }
        _ => regular_file_alg(c, verify).with_context(|| format!("{rpath}: cannot verify")),
    }
}

/// The algorithm a regular file's copy is verified with, if any: under `Auto` fatpipe's
/// XXH3 when the server offers it, under `On` the fastest both ends know.
pub(super) fn regular_file_alg(
    c: &Connection,
    verify: Verify,
) -> anyhow::Result<Option<ChecksumAlg>> {
    let algs = c.checksum_algs();
    Ok(match verify {
        Verify::Off => None,
        Verify::Auto => algs
            .contains(&ChecksumAlg::Xxh3)
            .then_some(ChecksumAlg::Xxh3),
        Verify::On => Some(
            *algs
                .first()
                .with_context(|| "the server offers no CKSM algorithm fatpipe knows".to_string())?,
        ),
    })
}
