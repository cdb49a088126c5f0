//! Checksums taken while a transfer moves the file: a fatpipe client's `--verify` asks for the
//! whole file's XXH3 right after the `226`; hashed beside the transfer, the answer is ready then
//! instead of after another pass over the file.

use super::Session;
use crate::server::transfer::Running;
use fatpipe_net::checksum::Follower;
use fatpipe_proto::gridftp::{ChecksumAlg, Cksm};
use fatpipe_proto::{Reply, VPath};

/// The file the session's last transfer moved, hashed as it went.
pub(super) struct Followed {
    path: VPath,
    follower: Follower,
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
    /// Hashes `path`, moved whole by the transfer just begun, beside the transfer, for a
    /// client that runs fatpipe's extensions in MODE E (`OPTS DRS ON`): it verifies with XXH3
    /// unless told not to. `reader` is a handle on the file being moved (an upload's is not
    /// under its name yet).
    pub(super) fn follow(&mut self, path: VPath, reader: std::fs::File) {
        if !(self.drs_notify && self.extended && self.hash_beside) {
            return;
        }
        let Some(progress) = self.transfer.as_ref().and_then(Running::progress) else {
            return;
        };
        match Follower::start(reader, ALG, progress) {
            Ok(follower) => self.followed = Some(Followed { path, follower }),
            Err(e) => tracing::debug!(
                session = self.id,
                "cannot hash {path} beside its transfer: {e}"
            ),
        }
    }

    /// The hash taken beside the last transfer, when `c` (for `path`) asks for it: the whole
    /// file, with the algorithm it was taken with, that transfer over.
    pub(super) fn followed(&mut self, c: &Cksm, path: &VPath) -> Option<Follower> {
        let f = self.followed.take()?;
        let asked = &f.path == path && c.alg == ALG && c.offset == 0 && c.length.is_none();
        let taken = asked && self.transfer.is_none();
        tracing::debug!(
            session = self.id,
            taken,
            "CKSM of {path}: the hash taken beside the transfer of {}",
            f.path
        );
        taken.then_some(f.follower)
    }
}
