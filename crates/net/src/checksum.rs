//! Checksums of a file range (`CKSM`, end-to-end verification): MD5, Adler-32 and SHA-256 as
//! GridFTP peers know them, and XXH3-128, fast enough to verify at line rate between fatpipes.

use fatpipe_proto::gridftp::ChecksumAlg;
use md5::Digest;
use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;

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
    let mut buf = vec![0u8; 1 << 20];
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
}
