//! Checksums of a file range (`CKSM`, end-to-end verification): MD5, Adler-32 and SHA-256 as
//! GridFTP peers know them, and XXH3-128, fast enough to verify at line rate between fatpipes.

use fatpipe_proto::gridftp::ChecksumAlg;
use md5::Digest;
use nix::fcntl::{posix_fadvise, PosixFadviseAdvice};
use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
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
    /// A file larger than a quarter of the machine's memory is not kept in the page cache:
    /// past that size, its pages are let go of behind the hash ([`Behind`]).
    pub fn start(
        file: File,
        alg: ChecksumAlg,
        ready: impl Fn() -> u64 + Send + 'static,
    ) -> io::Result<Follower> {
        Follower::start_large(file, Some(alg), ready, large())
    }

    /// [`Follower::start`] for a file that counts as large past `large` bytes, hashed with
    /// `alg` or not at all (the page cache only).
    fn start_large(
        file: File,
        alg: Option<ChecksumAlg>,
        ready: impl Fn() -> u64 + Send + 'static,
        large: u64,
    ) -> io::Result<Follower> {
        let end = Arc::new(AtomicU64::new(UNSET));
        let seen = end.clone();
        let behind = Behind::new(large);
        // Named for what it does, as `top -H` shows it.
        let name = if alg.is_some() {
            "fatpipe-hash"
        } else {
            "fatpipe-cache"
        };
        let handle = std::thread::Builder::new()
            .name(name.into())
            .spawn(move || follow(&file, alg, &seen, ready, behind))?;
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

/// A large file's pages let go of behind a transfer that does not hash it (`--no-verify`, a
/// client that said `Hash=off`), as a [`Follower`] does behind its hash; it stops when
/// dropped.
#[derive(Debug)]
pub struct CacheWatch {
    _follower: Follower,
}

impl CacheWatch {
    /// Follows `file` as far as `ready` says the transfer has got (written, or sent).
    pub fn start(file: File, ready: impl Fn() -> u64 + Send + 'static) -> io::Result<CacheWatch> {
        Follower::start_large(file, None, ready, large()).map(|f| CacheWatch { _follower: f })
    }
}

/// The size past which a file counts as large: a quarter of the machine's memory.
fn large() -> u64 {
    nix::sys::sysinfo::sysinfo().map_or(u64::MAX, |i| i.ram_total() / 4)
}

/// How far behind the hash a large file's pages are let go of: past what an upload's sender
/// may still read (it runs up to 64 MiB behind its hash, `client/verify.rs`).
const DROP_LAG: u64 = 128 << 20;
/// A large file's pages are let go of in steps of this many bytes: each step's writeback
/// starts at once and its clean pages go; those still being written go at the next step
/// (written by then, on a disk that keeps up; pages still dirty stay).
const DROP_STEP: u64 = 32 << 20;

/// A large file's pages let go of behind the hash, so that a copy larger than the page cache
/// could keep does not evict what the machine holds there (its own pages would not last
/// until anyone read them again). The hash reads behind the transfer at both ends (behind
/// the receiver's writes, behind or a little ahead of the sender's reads), so what it passed
/// the transfer has done with.
#[derive(Debug)]
struct Behind {
    /// The size past which a file counts as large.
    large: u64,
    /// Writeback started up to here.
    started: u64,
    /// Let go of up to here (but for pages still being written).
    dropped: u64,
}

impl Behind {
    fn new(large: u64) -> Behind {
        Behind {
            large,
            started: 0,
            dropped: 0,
        }
    }

    /// The hash has read `file` up to `at`.
    fn passed(&mut self, file: &File, at: u64) {
        let upto = at.saturating_sub(DROP_LAG);
        if at < self.large || upto < self.started + DROP_STEP {
            return;
        }
        let fd = file.as_raw_fd();
        let (from, len) = (self.started as i64, (upto - self.started) as i64);
        // SAFETY: a plain system call on this file's descriptor, with no pointers.
        unsafe { libc::sync_file_range(fd, from, len, libc::SYNC_FILE_RANGE_WRITE) };
        // Clean pages go now; those still being written stay, and are tried again next step.
        let (from, len) = (self.dropped as i64, (upto - self.dropped) as i64);
        let _ = posix_fadvise(fd, from, len, PosixFadviseAdvice::POSIX_FADV_DONTNEED);
        self.dropped = self.started;
        self.started = upto;
    }
}

/// A [`Follower`]'s thread: hashes what `ready` says is in place until the end is set, and
/// lets go of a large file's pages `behind` it.
fn follow(
    file: &File,
    alg: Option<ChecksumAlg>,
    end: &AtomicU64,
    ready: impl Fn() -> u64,
    mut behind: Behind,
) -> io::Result<String> {
    let mut state = alg.map(State::new);
    let mut buf = vec![0u8; if state.is_some() { HASH_CHUNK } else { 0 }];
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
            match state.as_mut() {
                Some(state) => {
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
                }
                None => at = upto,
            }
            behind.passed(file, at);
            wait = LOOK;
        } else if last != UNSET {
            return Ok(state.map_or_else(String::new, State::finish));
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

    /// Which of `file`'s first `len` bytes' pages are in the page cache, page by page.
    fn resident(file: &File, len: usize) -> Vec<bool> {
        // SAFETY: the map is only handed to mincore, never read.
        let map = unsafe { memmap2::MmapOptions::new().len(len).map(file) }.unwrap();
        let page = 4096;
        let mut v = vec![0u8; len.div_ceil(page)];
        // SAFETY: a valid mapping of `len` bytes and a vector of one byte per page.
        let rc = unsafe { libc::mincore(map.as_ptr() as *mut _, len, v.as_mut_ptr()) };
        assert_eq!(rc, 0, "mincore: {}", io::Error::last_os_error());
        v.iter().map(|b| b & 1 == 1).collect()
    }

    #[test]
    fn a_large_file_leaves_the_page_cache_behind_the_hash() {
        // On a disk (the source tree's), not tmpfs, whose pages are the file itself.
        let dir = tempfile::tempdir_in(env!("CARGO_MANIFEST_DIR")).unwrap();
        let mut f = File::options()
            .create(true)
            .truncate(true)
            .read(true)
            .write(true)
            .open(dir.path().join("large"))
            .unwrap();
        let len = 256usize << 20;
        let block: Vec<u8> = (0..1 << 20).map(|i: u32| (i % 253) as u8).collect();
        for _ in 0..len >> 20 {
            f.write_all(&block).unwrap();
        }
        f.sync_all().unwrap();
        let follow = |alg, large| {
            let follower =
                Follower::start_large(f.try_clone().unwrap(), alg, move || len as u64, large)
                    .unwrap();
            follower.finish(len as u64).unwrap()
        };
        let hash = |large| follow(Some(ChecksumAlg::Xxh3), large);
        let pages = |from: usize, to: usize| {
            let r = resident(&f, len);
            r[from >> 12..to >> 12].iter().filter(|&&p| p).count()
        };
        // Kept: every page, but for the few that memory pressure from elsewhere may evict (a
        // clean-clone run once lost 2 of 65,536 beside 14 GB of tmpfs); what the follower
        // drops is every page of 96 MiB.
        let kept = |n: usize| n >= (len >> 12) - (len >> 12) / 100;
        // Not large: every page it read stays.
        let whole = hash(u64::MAX);
        assert!(kept(pages(0, len)), "a file under the size is kept whole");
        // Large from the start: 256 MiB hashed, pages let go of up to 3 steps behind the
        // last (`DROP_LAG`, `DROP_STEP`): the first 96 MiB, written and synced, are gone.
        assert_eq!(hash(0), whole);
        assert_eq!(pages(0, 96 << 20), 0, "nothing kept before 96 MiB");
        // The same without the hash (`CacheWatch`), the file read into the cache again.
        checksum(&f, ChecksumAlg::Adler32, 0, None).unwrap();
        assert!(kept(pages(0, len)));
        assert_eq!(follow(None, 0), "");
        assert_eq!(
            pages(0, 96 << 20),
            0,
            "nothing kept before 96 MiB, unhashed"
        );
        assert!(pages(224 << 20, len) > 0, "the last step is kept");
    }
}
