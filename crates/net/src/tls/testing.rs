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

/// A test CA and a certificate it signed for `localhost`, 127.0.0.1 and the two ends of an
/// emulated path (`fatpipe testbed`: 198.18.0.1 and 198.18.0.2), written to `dir`:
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
    let names = ["localhost", "127.0.0.1", "198.18.0.1", "198.18.0.2"];
    let mut leaf_params = rcgen::CertificateParams::new(names.map(String::from).to_vec())?;
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

/// `id-pe-proxyCertInfo`.
const PROXY_CERT_INFO: &[u64] = &[1, 3, 6, 1, 5, 5, 7, 1, 14];
/// The value of `ProxyCertInfo` for an inherit-all proxy without a path length (DER).
pub const INHERIT_ALL_INFO: &[u8] = &[
    0x30, 0x0c, 0x30, 0x0a, 0x06, 0x08, 0x2b, 0x06, 0x01, 0x05, 0x05, 0x07, 0x15, 0x01,
];

/// A grid user's credentials for tests: a CA, a user certificate it signed and an RFC 3820
/// proxy of it, as PEM files in one directory.
pub struct GridUser {
    /// The CA's certificate (`ca.pem`), to trust.
    pub ca: PathBuf,
    /// The CA's key (`cakey.pem`), to sign revocation lists with.
    pub ca_key: PathBuf,
    /// The user's subject as grid-mapfiles write it.
    pub dn: String,
    /// The user certificate (`usercert.pem`) and its key (`userkey.pem`).
    pub cert: PathBuf,
    /// The user certificate's key.
    pub key: PathBuf,
    /// The proxy as `voms-proxy-init` writes one (`proxy.pem`): the proxy certificate, its
    /// key, the user certificate.
    pub proxy: PathBuf,
}

/// Makes a CA named `ca_name` and a user `user` with a proxy, written to `dir`.
pub fn grid_user(
    dir: &Path,
    ca_name: &str,
    user: &str,
) -> Result<GridUser, Box<dyn std::error::Error>> {
    use rcgen::{
        BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair,
        KeyUsagePurpose,
    };
    let mut ca_params = CertificateParams::new(Vec::<String>::new())?;
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(DnType::CommonName, ca_name);
    let ca_key = KeyPair::generate()?;
    let ca = ca_params.self_signed(&ca_key)?;
    let mut user_params = CertificateParams::new(Vec::<String>::new())?;
    user_params.distinguished_name = rcgen::DistinguishedName::new();
    let name = &mut user_params.distinguished_name;
    name.push(DnType::OrganizationName, "fatpipe");
    name.push(DnType::OrganizationalUnitName, "People");
    // The user's name as a UID: rcgen keeps one attribute of each type, and a proxy of a
    // proxy needs two more CNs.
    name.push(
        DnType::CustomDnType(vec![0, 9, 2342, 19200300, 100, 1, 1]),
        user,
    );
    user_params.is_ca = IsCa::ExplicitNoCa;
    user_params.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
    ];
    user_params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
    let user_key = KeyPair::generate()?;
    let user_cert = user_params.signed_by(&user_key, &ca, &ca_key)?;
    let (proxy, proxy_key) = proxy_of(
        &user_cert.pem(),
        &user_key.serialize_pem(),
        INHERIT_ALL_INFO,
    )?;
    let files = GridUser {
        ca: dir.join("ca.pem"),
        ca_key: dir.join("cakey.pem"),
        dn: format!("/O=fatpipe/OU=People/UID={user}"),
        cert: dir.join("usercert.pem"),
        key: dir.join("userkey.pem"),
        proxy: dir.join("proxy.pem"),
    };
    std::fs::write(&files.ca, ca.pem())?;
    std::fs::write(&files.ca_key, ca_key.serialize_pem())?;
    std::fs::write(&files.cert, user_cert.pem())?;
    std::fs::write(&files.key, user_key.serialize_pem())?;
    std::fs::write(
        &files.proxy,
        format!("{proxy}{proxy_key}{}", user_cert.pem()),
    )?;
    Ok(files)
}

/// A proxy certificate of the certificate `issuer_pem` signed with `signer_key_pem` (the
/// issuer's key, or another for a forgery) whose `ProxyCertInfo` is `info` (DER): its subject
/// is the issuer's plus one CN. Returns the proxy's certificate and key, PEM.
pub fn proxy_of(
    issuer_pem: &str,
    signer_key_pem: &str,
    info: &[u8],
) -> Result<(String, String), Box<dyn std::error::Error>> {
    use rcgen::{CertificateParams, CustomExtension, DnType, IsCa, KeyPair, KeyUsagePurpose};
    let signer_key = KeyPair::from_pem(signer_key_pem)?;
    let issuer_params = CertificateParams::from_ca_cert_pem(issuer_pem)?;
    let mut params = CertificateParams::new(Vec::<String>::new())?;
    params.distinguished_name = issuer_params.distinguished_name.clone();
    // One more CN; rcgen keeps one attribute a key, so a second one goes under another key.
    let cn = if params.distinguished_name.get(&DnType::CommonName).is_some() {
        DnType::CustomDnType(vec![2, 5, 4, 3])
    } else {
        DnType::CommonName
    };
    params.distinguished_name.push(cn, "1234567");
    params.is_ca = IsCa::ExplicitNoCa;
    params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    let mut ext = CustomExtension::from_oid_content(PROXY_CERT_INFO, info.to_vec());
    ext.set_criticality(true);
    params.custom_extensions = vec![ext];
    // The issuer as rcgen signs with it: its name and the signer's key.
    let issuer = issuer_params.self_signed(&signer_key)?;
    let key = KeyPair::generate()?;
    let proxy = params.signed_by(&key, &issuer, &signer_key)?;
    Ok((proxy.pem(), key.serialize_pem()))
}

/// A revocation list (PEM) of `user`'s CA that revokes `user`'s certificate.
pub fn revoking(user: &GridUser) -> Result<String, Box<dyn std::error::Error>> {
    use rcgen::{
        CertificateParams, CertificateRevocationListParams, KeyIdMethod, KeyPair, RevocationReason,
        RevokedCertParams, SerialNumber,
    };
    let ca_key = KeyPair::from_pem(&std::fs::read_to_string(&user.ca_key)?)?;
    let ca = CertificateParams::from_ca_cert_pem(&std::fs::read_to_string(&user.ca)?)?
        .self_signed(&ca_key)?;
    let cert = CertificateParams::from_ca_cert_pem(&std::fs::read_to_string(&user.cert)?)?;
    let serial = cert
        .serial_number
        .ok_or("the certificate has no serial number")?;
    let crl = CertificateRevocationListParams {
        this_update: rcgen::date_time_ymd(2020, 1, 1),
        next_update: rcgen::date_time_ymd(2099, 1, 1),
        crl_number: SerialNumber::from(1u64),
        issuing_distribution_point: None,
        revoked_certs: vec![RevokedCertParams {
            serial_number: serial,
            revocation_time: rcgen::date_time_ymd(2021, 1, 1),
            reason_code: Some(RevocationReason::KeyCompromise),
            invalidity_date: None,
        }],
        key_identifier_method: KeyIdMethod::Sha256,
    }
    .signed_by(&ca, &ca_key)?;
    Ok(crl.pem()?)
}
