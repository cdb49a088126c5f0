//! A throwaway identity for tests of TLS, this crate's and the binaries' alike.

use std::path::{Path, PathBuf};

/// Writes a self-signed certificate for `localhost` and 127.0.0.1 and its key to `dir` as
/// `cert.pem` and `key.pem`; returns their paths (cert, key).
pub fn self_signed_files(dir: &Path) -> Result<(PathBuf, PathBuf), Box<dyn std::error::Error>> {
    let names = vec!["localhost".to_string(), "127.0.0.1".to_string()];
    let ck = rcgen::generate_simple_self_signed(names)?;
    let (cert, key) = (dir.join("cert.pem"), dir.join("key.pem"));
    std::fs::write(&cert, ck.cert.pem())?;
    std::fs::write(&key, ck.key_pair.serialize_pem())?;
    Ok((cert, key))
}
