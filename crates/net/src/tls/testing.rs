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

/// A test CA and a certificate it signed for `localhost` and 127.0.0.1, written to `dir`:
/// (the CA's certificate, the chain leaf first, the leaf's key). Clients that refuse a
/// self-signed server certificate (davix, gfal2) trust the CA.
pub fn ca_signed_files(
    dir: &Path,
) -> Result<(PathBuf, PathBuf, PathBuf), Box<dyn std::error::Error>> {
    let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new())?;
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "fatpipe test CA");
    let ca_key = rcgen::KeyPair::generate()?;
    let ca = ca_params.self_signed(&ca_key)?;
    let mut leaf_params =
        rcgen::CertificateParams::new(vec!["localhost".to_string(), "127.0.0.1".to_string()])?;
    leaf_params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "localhost");
    let leaf_key = rcgen::KeyPair::generate()?;
    let leaf = leaf_params.signed_by(&leaf_key, &ca, &ca_key)?;
    let (ca_file, chain, key) = (
        dir.join("ca.pem"),
        dir.join("chain.pem"),
        dir.join("key.pem"),
    );
    std::fs::write(&ca_file, ca.pem())?;
    std::fs::write(&chain, format!("{}{}", leaf.pem(), ca.pem()))?;
    std::fs::write(&key, leaf_key.serialize_pem())?;
    Ok((ca_file, chain, key))
}
