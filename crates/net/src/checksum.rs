//! Checksums of a file range (`CKSM`, end-to-end verification): MD5, Adler-32 and SHA-256 as
//! GridFTP peers know them, and XXH3-128, fast enough to verify at line rate between fatpipes.

use fatpipe_proto::gridftp::ChecksumAlg;
use md5::Digest;
use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// Bytes read and hashed at a time: small enough that the copy out of the page cache is still
/// in the core's cache when the hash reads it (a 1 GiB file from tmpfs, XXH3: 0.64 s with
/// 1 MiB reads, 0.24 s with 256 KiB, docs/cpu-cost.md).
const HASH_CHUNK: usize = 256 << 10;

/// The lowercase hex checksum of `length` bytes of `file` from `offset` (`None`: to the end).
pub fn checksum(
    file: &File,
    alg: ChecksumAlg,
    offset: u64,
    length: Option<u64>,
) -> io::Result<String> {
    let size = file.metadata()?.len();
    if offset > size {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("offset {offset} is beyond the file's end ({size})"),
        ));
    }
    let end = length.map_or(size, |l| offset.saturating_add(l).min(size));
    let mut state = State::new(alg);
    let mut buf = vec![0u8; HASH_CHUNK];
    let mut at = offset;
    while at < end {
        let want = ((end - at) as usize).min(buf.len());
        let n = file.read_at(&mut buf[..want], at)?;
        if n == 0 {
            break;
        }
        state.update(&buf[..n]);
        at += n as u64;
    }
    Ok(state.finish())
}

/// A file hashed from its start while a transfer writes (or sends) it, as far as the transfer
/// says it has got: the checksum `--verify` compares is ready when the data is, instead of
/// taking another pass over the file after it.
#[derive(Debug)]
pub struct Follower {
    /// [`UNSET`] while the transfer runs, then the file's length, or [`DROPPED`].
    end: Arc<AtomicU64>,
    handle: Option<JoinHandle<io::Result<String>>>,
}

/// The transfer has not ended yet.
const UNSET: u64 = u64::MAX;
/// The follower was dropped: its thread stops.
const DROPPED: u64 = u64::MAX - 1;
/// How soon a follower that caught up with the transfer looks again; each look that finds
/// nothing new doubles the wait ([`Follower::finish`] wakes it at once).
const LOOK: Duration = Duration::from_millis(2);
/// The longest wait between looks (a session left idle after its transfer).
const IDLE_LOOK: Duration = Duration::from_millis(128);

impl Follower {
    /// Hashes `file` with `alg` from its first byte, never past what `ready` says is in place
    /// (a prefix of the file that no longer changes; asked again whenever the hash caught up).
    pub fn start(
        file: File,
        alg: ChecksumAlg,
        ready: impl Fn() -> u64 + Send + 'static,
    ) -> io::Result<Follower> {
        let end = Arc::new(AtomicU64::new(UNSET));
        let seen = end.clone();
        let handle = std::thread::Builder::new()
            .name("fatpipe-hash".into())
            .spawn(move || follow(&file, alg, &seen, ready))?;
        Ok(Follower {
            end,
            handle: Some(handle),
        })
    }

    /// The checksum of the file's first `len` bytes, all in place now.
    pub fn finish(mut self, len: u64) -> io::Result<String> {
        self.end.store(len.min(DROPPED - 1), Ordering::SeqCst);
        self.wake();
        self.handle
            .take()
            .map_or(Err(io::Error::other("no hashing thread")), |h| {
                h.join()
                    .unwrap_or_else(|_| Err(io::Error::other("the hashing thread panicked")))
            })
    }

    fn wake(&self) {
        if let Some(h) = &self.handle {
            h.thread().unpark();
        }
    }
}

impl Drop for Follower {
    fn drop(&mut self) {
        if self.handle.is_some() {
            self.end.store(DROPPED, Ordering::SeqCst);
            self.wake();
        }
    }
}

/// A [`Follower`]'s thread: hashes what `ready` says is in place until the end is set.
fn follow(
    file: &File,
    alg: ChecksumAlg,
    end: &AtomicU64,
    ready: impl Fn() -> u64,
) -> io::Result<String> {
    let mut state = State::new(alg);
    let mut buf = vec![0u8; HASH_CHUNK];
    let mut at = 0u64;
    let mut wait = LOOK;
    loop {
        let last = end.load(Ordering::SeqCst);
        if last == DROPPED {
            return Err(io::Error::new(
                io::ErrorKind::Interrupted,
                "hashing dropped",
            ));
        }
        let upto = if last == UNSET { ready() } else { last };
        if at < upto {
            let want = ((upto - at) as usize).min(buf.len());
            let n = file.read_at(&mut buf[..want], at)?;
            if n == 0 {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    format!("the file ends at {at} bytes, before {upto}"),
                ));
            }
            state.update(&buf[..n]);
            at += n as u64;
            wait = LOOK;
        } else if last != UNSET {
            return Ok(state.finish());
        } else {
            std::thread::park_timeout(wait);
            wait = (wait * 2).min(IDLE_LOOK);
        }
    }
}

enum State {
    Md5(md5::Md5),
    Adler(adler2::Adler32),
    Sha(sha2::Sha256),
    Xxh3(Box<xxhash_rust::xxh3::Xxh3>),
}

impl State {
    fn new(alg: ChecksumAlg) -> State {
        match alg {
            ChecksumAlg::Md5 => State::Md5(md5::Md5::new()),
            ChecksumAlg::Adler32 => State::Adler(adler2::Adler32::new()),
            ChecksumAlg::Sha256 => State::Sha(sha2::Sha256::new()),
            ChecksumAlg::Xxh3 => State::Xxh3(Box::default()),
        }
    }

    fn update(&mut self, b: &[u8]) {
        match self {
            State::Md5(h) => h.update(b),
            State::Adler(h) => h.write_slice(b),
            State::Sha(h) => h.update(b),
            State::Xxh3(h) => h.update(b),
        }
    }

    fn finish(self) -> String {
        match self {
            State::Md5(h) => hex::encode(h.finalize()),
            State::Adler(h) => format!("{:08x}", h.checksum()),
            State::Sha(h) => hex::encode(h.finalize()),
            State::Xxh3(h) => format!("{:032x}", h.digest128()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn known_answers() {
        let mut f = tempfile::tempfile().unwrap();
        f.write_all(b"xxabcxx").unwrap();
        let ck = |alg| checksum(&f, alg, 2, Some(3)).unwrap();
        assert_eq!(ck(ChecksumAlg::Md5), "900150983cd24fb0d6963f7d28e17f72");
        assert_eq!(ck(ChecksumAlg::Adler32), "024d0127");
        assert_eq!(
            ck(ChecksumAlg::Sha256),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert_eq!(ck(ChecksumAlg::Xxh3).len(), 32);
        assert_eq!(
            checksum(&f, ChecksumAlg::Md5, 0, None).unwrap(),
            checksum(&f, ChecksumAlg::Md5, 0, Some(100)).unwrap()
        );
        assert!(checksum(&f, ChecksumAlg::Md5, 8, None).is_err());
    }

    /// A file written in pieces while it is hashed: the follower never reads past what it is
    /// told is in place, and ends with the checksum of the whole.
    #[test]
    fn a_follower_hashes_a_file_as_it_is_written() {
        let f = tempfile::tempfile().unwrap();
        let data: Vec<u8> = (0..3_000_000u32).map(|i| (i % 251) as u8).collect();
        let ready = Arc::new(AtomicU64::new(0));
        let r = ready.clone();
        let follower = Follower::start(f.try_clone().unwrap(), ChecksumAlg::Xxh3, move || {
            r.load(Ordering::SeqCst)
        })
        .unwrap();
        for piece in data.chunks(700_000) {
            let at = ready.load(Ordering::SeqCst);
            // What is not yet in place may hold anything: a sparse hole, a half-written block.
            f.write_all_at(piece, at).unwrap();
            ready.store(at + piece.len() as u64, Ordering::SeqCst);
            std::thread::sleep(Duration::from_millis(5));
        }
        let sum = follower.finish(data.len() as u64).unwrap();
        assert_eq!(sum, checksum(&f, ChecksumAlg::Xxh3, 0, None).unwrap());
        // A file shorter than its end is an error, not a checksum.
        let short = Follower::start(f.try_clone().unwrap(), ChecksumAlg::Md5, || 0).unwrap();
        assert!(short.finish(data.len() as u64 + 1).is_err());
        // Dropped while waiting for more: its thread ends.
        drop(Follower::start(f, ChecksumAlg::Md5, || 0).unwrap());
    }
}
