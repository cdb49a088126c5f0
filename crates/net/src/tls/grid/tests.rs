use super::*;
use crate::tls::testing::{grid_user, proxy_of, revoking, GridUser, INHERIT_ALL_INFO};
use rustls::pki_types::pem::PemObject;

/// The certificates of PEM text, in order.
fn certs(pem: &str) -> Vec<CertificateDer<'static>> {
    CertificateDer::pem_slice_iter(pem.as_bytes())
        .collect::<Result<_, _>>()
        .unwrap()
}

fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap()
}

/// Alice and Bob under one CA, Mallory under another of the same name; the judge trusts
/// Alice's.
fn setup() -> (
    tempfile::TempDir,
    GridUser,
    GridUser,
    GridUser,
    Arc<GridCerts>,
) {
    let dir = tempfile::tempdir().unwrap();
    let sub = |n: &str| {
        let d = dir.path().join(n);
        std::fs::create_dir(&d).unwrap();
        d
    };
    let alice = grid_user(&sub("alice"), "grid CA", "Alice").unwrap();
    let mallory = grid_user(&sub("mallory"), "grid CA", "Mallory").unwrap();
    let bob = grid_user(&sub("bob"), "grid CA", "Bob").unwrap();
    let judge = GridCerts::from_path(&alice.ca).unwrap();
    (dir, alice, bob, mallory, judge)
}

#[test]
fn a_user_certificate_and_its_proxies_speak_for_the_user() {
    let (_dir, alice, _, _, judge) = setup();
    let now = UnixTime::now();
    assert_eq!(
        judge.check(&certs(&read(&alice.cert)), now),
        Ok("/O=fatpipe/OU=People/UID=Alice".to_string())
    );
    assert_eq!(
        judge.check(&certs(&read(&alice.proxy)), now),
        Ok(alice.dn.clone())
    );
    // A proxy of the proxy, as a delegation makes: still Alice.
    let proxy_file = read(&alice.proxy);
    let key_at = proxy_file.find("-----BEGIN PRIVATE KEY").unwrap();
    let (second, _) = proxy_of(&proxy_file, &proxy_file[key_at..], INHERIT_ALL_INFO).unwrap();
    let mut chain = certs(&second);
    chain.extend(certs(&proxy_file));
    assert_eq!(judge.check(&chain, now), Ok(alice.dn.clone()));
}

#[test]
fn forged_misplaced_and_untrusted_chains_are_refused_with_a_reason() {
    let (_dir, alice, bob, mallory, judge) = setup();
    let now = UnixTime::now();
    let refused = |chain: &[CertificateDer<'_>]| judge.check(chain, now).unwrap_err();
    let with_alice = |pem: &str| {
        let mut chain = certs(pem);
        chain.extend(certs(&read(&alice.cert)));
        chain
    };
    // Another CA's user.
    let why = refused(&certs(&read(&mallory.proxy)));
    assert!(why.contains("certificate refused"), "{why}");
    // A proxy alone, without the certificate that signed it.
    let why = refused(&certs(&read(&alice.proxy))[..1]);
    assert!(
        why.contains("without the certificate that signed it"),
        "{why}"
    );
    // Alice's proxy followed by Bob's certificate: not its issuer.
    let mut chain = certs(&read(&alice.proxy))[..1].to_vec();
    chain.extend(certs(&read(&bob.cert)));
    let why = refused(&chain);
    assert!(why.contains("did not come after it"), "{why}");
    // A proxy that names Alice as its issuer, signed with Bob's key.
    let (forged, _) = proxy_of(&read(&alice.cert), &read(&bob.key), INHERIT_ALL_INFO).unwrap();
    let why = refused(&with_alice(&forged));
    assert!(
        why.contains("not signed by /O=fatpipe/OU=People/UID=Alice"),
        "{why}"
    );
    // An independent proxy holds none of Alice's rights.
    let independent = [
        0x30, 0x0c, 0x30, 0x0a, 0x06, 0x08, 0x2b, 0x06, 0x01, 0x05, 0x05, 0x07, 0x15, 0x02,
    ];
    let (indep, _) = proxy_of(&read(&alice.cert), &read(&alice.key), &independent).unwrap();
    let why = refused(&with_alice(&indep));
    assert!(why.contains("policy language 1.3.6.1.5.5.7.21.2"), "{why}");
    // A proxy that allows none below it, with one below it.
    let none_below = [
        0x30, 0x0f, 0x02, 0x01, 0x00, 0x30, 0x0a, 0x06, 0x08, 0x2b, 0x06, 0x01, 0x05, 0x05, 0x07,
        0x15, 0x01,
    ];
    let (last, last_key) = proxy_of(&read(&alice.cert), &read(&alice.key), &none_below).unwrap();
    let (below, _) = proxy_of(&last, &last_key, INHERIT_ALL_INFO).unwrap();
    let mut chain = certs(&below);
    chain.extend(with_alice(&last));
    let why = refused(&chain);
    assert!(
        why.contains("more proxies below it than it allows"),
        "{why}"
    );
    // Time: the proxy is not valid yet in 1970.
    let epoch = UnixTime::since_unix_epoch(std::time::Duration::ZERO);
    let why = judge.check(&certs(&read(&alice.proxy)), epoch).unwrap_err();
    assert!(why.contains("is not valid now"), "{why}");
}

#[test]
fn names_are_written_as_grid_mapfiles_write_them() {
    let (_dir, alice, _, _, _) = setup();
    let c = certs(&read(&alice.cert));
    let (_, parsed) = X509Certificate::from_der(&c[0]).unwrap();
    assert_eq!(dn(parsed.subject()), "/O=fatpipe/OU=People/UID=Alice");
    assert_eq!(dn(parsed.issuer()), "/CN=grid CA");
    assert_eq!(short_name("0.9.2342.19200300.100.1.25"), Some("DC"));
    assert_eq!(hex_of(&[1, 255]), "#01ff");
}

#[test]
fn a_ca_directory_is_read_file_by_file() {
    let (dir, alice, _, _, _) = setup();
    let cas = dir.path().join("certificates");
    std::fs::create_dir(&cas).unwrap();
    std::fs::copy(&alice.ca, cas.join("1a2b3c4d.0")).unwrap();
    std::fs::write(cas.join("1a2b3c4d.signing_policy"), "not a certificate").unwrap();
    let judge = GridCerts::from_path(&cas).unwrap();
    assert_eq!(
        judge.check(&certs(&read(&alice.proxy)), UnixTime::now()),
        Ok(alice.dn)
    );
    let empty = dir.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    let err = GridCerts::from_path(&empty).unwrap_err();
    assert!(err.contains("holds no CA certificate"), "{err}");
}

#[test]
fn a_client_reads_its_proxy_and_knows_when_it_expires() {
    let (dir, alice, _, _, _) = setup();
    let cert = ClientCert::load(&alice.proxy, None).unwrap();
    assert_eq!(cert.chain.len(), 2, "the proxy and the user's certificate");
    assert!(!cert.expired(1_800_000_000));
    assert!(cert.expired(u64::MAX));
    // The key apart from the certificate, and a file without a key.
    assert!(ClientCert::load(&alice.cert, Some(&alice.key)).is_ok());
    let err = ClientCert::load(&alice.cert, None).unwrap_err();
    assert!(err.contains("private key"), "{err}");
    let missing = dir.path().join("none.pem");
    assert!(ClientCert::load(&missing, None).is_err());
    // Where no proxy is, none is found.
    let nobody = u32::MAX - 7;
    if std::env::var_os("X509_USER_PROXY").is_none() {
        assert!(ClientCert::discover(nobody, 1_800_000_000).is_none());
    }
}

#[test]
fn a_revoked_user_is_refused_with_a_ca_directorys_list() {
    let (dir, alice, _, _, _) = setup();
    let cas = dir.path().join("certificates");
    std::fs::create_dir(&cas).unwrap();
    std::fs::copy(&alice.ca, cas.join("1a2b3c4d.0")).unwrap();
    let judge = GridCerts::from_path(&cas).unwrap();
    let proxy = certs(&read(&alice.proxy));
    assert!(judge.check(&proxy, UnixTime::now()).is_ok());
    std::fs::write(cas.join("1a2b3c4d.r0"), revoking(&alice).unwrap()).unwrap();
    let judge = GridCerts::from_path(&cas).unwrap();
    let why = judge.check(&proxy, UnixTime::now()).unwrap_err();
    assert!(why.contains("Revoked"), "{why}");
    // The same list in the CA's PEM file.
    let both = dir.path().join("ca-and-crl.pem");
    std::fs::write(&both, read(&alice.ca) + &revoking(&alice).unwrap()).unwrap();
    let why = GridCerts::from_path(&both)
        .unwrap()
        .check(&proxy, UnixTime::now())
        .unwrap_err();
    assert!(why.contains("Revoked"), "{why}");
}

#[test]
fn a_ca_store_reads_a_renewed_revocation_list_at_its_next_look() {
    let (dir, alice, _, _, _) = setup();
    let cas = dir.path().join("certificates");
    std::fs::create_dir(&cas).unwrap();
    std::fs::copy(&alice.ca, cas.join("1a2b3c4d.0")).unwrap();
    let t0 = Instant::now();
    let store = CaStore::load(&cas, t0).unwrap();
    let proxy = certs(&read(&alice.proxy));
    assert!(store.current(t0).check(&proxy, UnixTime::now()).is_ok());
    // File times tick coarsely: the list must come a tick after the load to be new.
    std::thread::sleep(Duration::from_millis(50));
    std::fs::write(cas.join("1a2b3c4d.r0"), revoking(&alice).unwrap()).unwrap();
    // Not before the next look; then the list counts.
    let soon = t0 + Duration::from_secs(60);
    assert!(store.current(soon).check(&proxy, UnixTime::now()).is_ok());
    let later = t0 + RELOOK;
    let why = store
        .current(later)
        .check(&proxy, UnixTime::now())
        .unwrap_err();
    assert!(why.contains("Revoked"), "{why}");
}
