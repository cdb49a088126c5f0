//! Checksums taken while a transfer moves the file: a fatpipe client's `--verify` asks for the
//! whole file's XXH3 right after the `226`; hashed beside the transfer, the answer is ready then
//! instead of after another pass over the file.

use super::Session;
use crate::server::transfer::Running;
use fatpipe_net::checksum::{CacheWatch, Follower};
use fatpipe_proto::gridftp::{ChecksumAlg, Cksm};
use fatpipe_proto::{Reply, TransferType, VPath};

/// The file the session's last transfer moved, hashed as it went.
pub(super) struct Followed {
    path: VPath,
    follower: Follower,
    /// The transfer failed (a client that leaves TCP ends it so): nobody waits for its hash.
    failed: bool,
}

/// The algorithm a fatpipe client verifies with by default.
const ALG: ChecksumAlg = ChecksumAlg::Xxh3;

/// Whether `OPTS DRS Hash=<value>` asks for hashing beside transfers.
pub(super) fn parse(value: &str) -> Result<bool, Reply> {
    if value.eq_ignore_ascii_case("off") {
        Ok(false)
    } else if value.eq_ignore_ascii_case(&ALG.to_string()) {
        Ok(true)
    } else {
        Err(Reply::new(
            501,
            format!(
                "Hash={value}: this server hashes beside transfers with {ALG} or not at all (off)"
            ),
        ))
    }
}

impl Session {
    /// Hashes `path`, whose bytes before `base` are in place and the rest moved by the
    /// transfer just begun, beside the transfer, for a fatpipe client (`OPTS DRS ON`): it
    /// verifies with XXH3 unless told not to. `reader` is a handle on the file being moved (an
    /// upload's is not under its name yet).
    /// Unhashed (another client, or `Hash=off`), a large file's pages are still let go of
    /// behind the transfer ([`CacheWatch`]).
    pub(super) fn follow(&mut self, path: VPath, reader: std::fs::File, base: u64) {
        if self.settings.ttype == TransferType::Ascii {
            return;
        }
        let Some(progress) = self.transfer.as_ref().and_then(Running::progress) else {
            return;
        };
        let ready = move || base + progress();
        if !(self.settings.drs_notify && self.settings.hash_beside) {
            self.watched = CacheWatch::start(reader, ready)
                .map_err(|e| tracing::debug!(session = self.id, "cannot follow {path}: {e}"))
                .ok();
            return;
        }
        match Follower::start(reader, ALG, ready) {
            Ok(follower) => {
                self.followed = Some(Followed {
                    path,
                    follower,
                    failed: false,
                })
            }
            Err(e) => tracing::debug!(
                session = self.id,
                "cannot hash {path} beside its transfer: {e}"
            ),
        }
    }

    /// The last transfer ended, `complete` or not.
    pub(super) fn transfer_ended(&mut self, complete: bool) {
        self.watched = None;
        if let Some(f) = self.followed.as_mut() {
            f.failed = !complete;
        }
    }

    /// The hash taken beside the last transfer, when `c` (for `path`) asks for it: the whole
    /// file, with the algorithm it was taken with, that transfer over. Where that transfer
    /// failed, a `451` at once: only a fatpipe client has its transfers hashed beside, and it
    /// drops the answers to what it asked behind a transfer that failed (after leaving TCP it
    /// would otherwise wait for a pass over the whole file before its next command is read).
    pub(super) fn followed(&mut self, c: &Cksm, path: &VPath) -> Result<Option<Follower>, Reply> {
        let Some(f) = self.followed.take() else {
            return Ok(None);
        };
        let asked = &f.path == path && c.alg == ALG && c.offset == 0 && c.length.is_none();
        let taken = asked && self.transfer.is_none();
        tracing::debug!(
            session = self.id,
            taken,
            failed = f.failed,
            "CKSM of {path}: the hash taken beside the transfer of {}",
            f.path
        );
        match (taken, f.failed) {
            (true, true) => Err(Reply::new(
                451,
                format!("Checksum not taken: the transfer of {path} before it failed; ask again"),
            )),
            (true, false) => Ok(Some(f.follower)),
            (false, _) => Ok(None),
        }
    }
}
