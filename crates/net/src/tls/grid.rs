//! Client certificates as grid sites issue them: an end-entity certificate (EEC) from a CA the
//! operator trusts, presented as it is or through RFC 3820 proxy certificates it signed (what
//! `voms-proxy-init` and `grid-proxy-init` make, and what gfal2, FTS3 and davix present). A
//! proxy is signed by the certificate above it, which is no CA, so a plain path validation
//! refuses it: [`GridCerts::check`] checks the proxies itself and hands the EEC and its CAs to
//! rustls's own verifier. The handshake only proves that the client holds its certificate's
//! key; the chain is judged after it, so that a refusal reaches the client as an HTTP answer
//! with its reason rather than as a TLS alert. Clients without a certificate are served too:
//! they authenticate in HTTP. On the client's side, [`ClientCert`] is the certificate (a proxy,
//! found where the grid's tools look for one) that `fatpipe cp` shows servers that ask.

use crate::reload::Reloading;
use rustls::client::danger::HandshakeSignatureValid;
use rustls::crypto::{verify_tls13_signature_with_raw_key, CryptoProvider};
use rustls::pki_types::{CertificateDer, SubjectPublicKeyInfoDer, UnixTime};
use rustls::pki_types::{CertificateRevocationListDer, PrivateKeyDer};
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::server::WebPkiClientVerifier;
use rustls::{
    CertificateError, DigitallySignedStruct, DistinguishedName, Error, RootCertStore,
    SignatureScheme,
};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};
use x509_parser::der_parser::ber::BerObjectContent;
use x509_parser::der_parser::der::parse_der;
use x509_parser::prelude::{FromDer, X509Certificate, X509Name};

/// `id-pe-proxyCertInfo` (RFC 3820 §3.8): the extension that makes a certificate a proxy.
const PROXY_CERT_INFO: &str = "1.3.6.1.5.5.7.1.14";
/// `id-ppl-inheritAll`: the proxy holds all its issuer's rights. The other languages
/// (`id-ppl-independent`, site policies) hold fewer, which a mapping to an account cannot
/// express: such proxies are refused.
const INHERIT_ALL: &str = "1.3.6.1.5.5.7.21.1";
/// Proxies in one chain at most (delegations of delegations).
const MAX_PROXIES: usize = 10;

/// The operator's CAs for client certificates, and the judge of a client's chain.
#[derive(Debug)]
pub struct GridCerts {
    /// rustls's verifier for the EEC and its CAs.
    eec: Arc<dyn ClientCertVerifier>,
    provider: Arc<CryptoProvider>,
}

impl GridCerts {
    /// Client certificates checked against the CAs in `roots`, none of them on one of `crls`
    /// (a CA without a list is taken at its word).
    pub fn new(
        roots: RootCertStore,
        crls: Vec<CertificateRevocationListDer<'static>>,
    ) -> Result<Arc<GridCerts>, String> {
        if roots.is_empty() {
            return Err("no CA certificate to check client certificates against".into());
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let eec = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider.clone())
            .with_crls(crls)
            .allow_unknown_revocation_status()
            .allow_unauthenticated()
            .build()
            .map_err(|e| format!("cannot check client certificates: {e}"))?;
        Ok(Arc::new(GridCerts { eec, provider }))
    }

    /// Client certificates checked against the CA certificates in `path`: a PEM file, or a
    /// directory of them (`/etc/grid-security/certificates`: every `*.pem`, `*.crt` and
    /// `*.0`…`*.9` in it), with the revocation lists there (`*.r0`…`*.r9`, `*.crl`, or CRLs
    /// in the PEM file).
    pub fn from_path(path: &Path) -> Result<Arc<GridCerts>, String> {
        let mut roots = RootCertStore::empty();
        let mut crls = Vec::new();
        let (cas, lists) = if path.is_dir() {
            let entries = std::fs::read_dir(path)
                .map_err(|e| format!("cannot read CA directory {}: {e}", path.display()))?;
            let mut files: Vec<_> = entries.filter_map(Result::ok).map(|e| e.path()).collect();
            files.sort();
            let lists = files.iter().filter(|p| is_crl_file(p)).cloned().collect();
            files.retain(|p| is_ca_file(p));
            (files, lists)
        } else {
            (vec![path.to_path_buf()], vec![path.to_path_buf()])
        };
        for file in &cas {
            let certs = read_pem_certs(file)?;
            let (_, refused) = roots.add_parsable_certificates(certs);
            if refused > 0 {
                tracing::warn!(
                    "{}: {refused} certificate(s) not usable as a CA",
                    file.display()
                );
            }
        }
        for file in &lists {
            crls.extend(read_pem_crls(file)?);
        }
        if roots.is_empty() {
            return Err(format!("{} holds no CA certificate", path.display()));
        }
        GridCerts::new(roots, crls)
    }

    /// Judges the chain a client showed (its certificate first) at `now`: the proxies at its
    /// head, each against the certificate after it, then the EEC by path validation to one of the CAs.
    /// Returns whom it speaks for, the EEC's subject in the form grid-mapfiles use
    /// (`/DC=org/DC=example/CN=Alice`), or why it is refused.
    pub fn check(&self, chain: &[CertificateDer<'_>], now: UnixTime) -> Result<String, String> {
        let refs: Vec<&CertificateDer<'_>> = chain.iter().collect();
        let proxies = check_proxies(&refs, now)?;
        let eec = chain.get(proxies).ok_or("no certificate")?;
        self.eec
            .verify_client_cert(eec, &chain[proxies + 1..], now)
            .map_err(|e| format!("certificate refused: {e}"))?;
        let (_, c) = X509Certificate::from_der(eec).map_err(|_| "unparsable certificate")?;
        Ok(dn(c.subject()))
    }
}

/// How often the CA files are looked at again for changes.
const RELOOK: Duration = Duration::from_secs(600);

/// The CAs of a path ([`GridCerts::from_path`]), read again when its files change: fetch-crl
/// renews the revocation lists of a CA directory every few hours, and a server runs for months.
#[derive(Debug)]
pub struct CaStore(Reloading<Arc<GridCerts>>);

impl CaStore {
    /// Reads the CAs of `path` at `now`.
    pub fn load(path: &Path, now: Instant) -> Result<CaStore, String> {
        let at = path.to_path_buf();
        let read = move || GridCerts::from_path(&at);
        Reloading::load("client CAs", vec![path.to_path_buf()], RELOOK, now, read).map(CaStore)
    }

    /// The CAs at `now`: read again if [`RELOOK`] passed since the last look and a file changed
    /// (a reading that fails keeps the previous CAs, and says why).
    pub fn current(&self, now: Instant) -> Arc<GridCerts> {
        self.0.current(now)
    }
}

/// A client's certificate for servers that ask for one: a grid proxy (its certificate, then the
/// user's that signed it) or a user certificate, with its key.
#[derive(Debug)]
pub struct ClientCert {
    /// The chain, the client's own certificate first.
    pub chain: Vec<CertificateDer<'static>>,
    /// Its key.
    pub key: PrivateKeyDer<'static>,
    /// The file it came from.
    pub from: PathBuf,
    /// When it stops being valid, seconds since the epoch.
    pub not_after: i64,
}

impl ClientCert {
    /// Reads the certificates of `cert` and the key of `key` (`None`: `cert`'s own, as a proxy
    /// file holds it); an unreadable file, no certificate or no key is an error naming it.
    pub fn load(cert: &Path, key: Option<&Path>) -> Result<ClientCert, String> {
        use rustls::pki_types::pem::PemObject;
        let chain = read_pem_certs(cert)?;
        let first = chain
            .first()
            .ok_or_else(|| format!("{} holds no PEM certificate", cert.display()))?;
        let (_, parsed) = X509Certificate::from_der(first)
            .map_err(|_| format!("{}: its certificate does not parse", cert.display()))?;
        let not_after = parsed.validity().not_after.timestamp();
        let key_file = key.unwrap_or(cert);
        let key = PrivateKeyDer::from_pem_file(key_file)
            .map_err(|e| format!("cannot read a private key from {}: {e}", key_file.display()))?;
        Ok(ClientCert {
            chain,
            key,
            from: cert.to_path_buf(),
            not_after,
        })
    }

    /// The proxy the grid's tools would show: `$X509_USER_PROXY`, else `/tmp/x509up_u<uid>`;
    /// `None` where neither is, or where it cannot be read or has expired (said in a warning:
    /// a server that takes tokens or Basic does not need it).
    pub fn discover(uid: u32, now_unix: u64) -> Option<ClientCert> {
        let path = std::env::var_os("X509_USER_PROXY")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from(format!("/tmp/x509up_u{uid}")));
        if !path.exists() {
            return None;
        }
        let cert = ClientCert::load(&path, None)
            .map_err(|e| tracing::warn!("leaving the grid proxy out: {e}"))
            .ok()?;
        if cert.expired(now_unix) {
            tracing::warn!(
                "leaving the grid proxy {} out: it has expired",
                path.display()
            );
            return None;
        }
        Some(cert)
    }

    /// Whether it is no longer valid at `now_unix` (seconds since the epoch).
    pub fn expired(&self, now_unix: u64) -> bool {
        i64::try_from(now_unix).unwrap_or(i64::MAX) > self.not_after
    }
}

/// Whether a file in a CA directory holds a certificate, by its name.
fn is_ca_file(p: &Path) -> bool {
    let ext = p.extension().and_then(|e| e.to_str()).unwrap_or("");
    p.is_file()
        && (matches!(ext, "pem" | "crt") || (ext.len() == 1 && ext.as_bytes()[0].is_ascii_digit()))
}

/// Whether a file in a CA directory holds a revocation list, by its name.
fn is_crl_file(p: &Path) -> bool {
    let ext = p.extension().and_then(|e| e.to_str()).unwrap_or("");
    let numbered = ext.len() == 2 && ext.starts_with('r') && ext.as_bytes()[1].is_ascii_digit();
    p.is_file() && (numbered || ext == "crl")
}

/// The revocation lists of a PEM file; an unreadable file is an error naming it.
fn read_pem_crls(file: &Path) -> Result<Vec<CertificateRevocationListDer<'static>>, String> {
    use rustls::pki_types::pem::PemObject;
    CertificateRevocationListDer::pem_file_iter(file)
        .and_then(|crls| crls.collect::<Result<Vec<_>, _>>())
        .map_err(|e| format!("cannot read revocation lists from {}: {e}", file.display()))
}

/// The certificates of a PEM file; an unreadable file is an error naming it.
fn read_pem_certs(file: &Path) -> Result<Vec<CertificateDer<'static>>, String> {
    use rustls::pki_types::pem::PemObject;
    CertificateDer::pem_file_iter(file)
        .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
        .map_err(|e| format!("cannot read certificates from {}: {e}", file.display()))
}

/// At the handshake any chain is taken, once the client proved it holds the key of the
/// certificate it shows; [`GridCerts::check`] judges the chain after.
impl ClientCertVerifier for GridCerts {
    fn offer_client_auth(&self) -> bool {
        true
    }

    fn client_auth_mandatory(&self) -> bool {
        false
    }

    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        self.eec.root_hint_subjects()
    }

    fn verify_client_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _now: UnixTime,
    ) -> Result<ClientCertVerified, Error> {
        Ok(ClientCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, Error> {
        let spki = spki_of(cert)?;
        let key = webpki::RawPublicKeyEntity::try_from(&spki)
            .map_err(|e| bad(format!("unusable public key: {e}")))?;
        let algs = self
            .provider
            .signature_verification_algorithms
            .mapping
            .iter()
            .find(|(scheme, _)| *scheme == dss.scheme)
            .map(|(_, algs)| *algs)
            .unwrap_or(&[]);
        // The scheme's algorithms for each kind of key: the one that fits this key decides.
        if algs
            .iter()
            .any(|alg| key.verify_signature(*alg, message, dss.signature()).is_ok())
        {
            Ok(HandshakeSignatureValid::assertion())
        } else {
            Err(Error::InvalidCertificate(CertificateError::BadSignature))
        }
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, Error> {
        let spki = spki_of(cert)?;
        verify_tls13_signature_with_raw_key(
            message,
            &spki,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.eec.supported_verify_schemes()
    }
}

/// A refusal of the client's chain, with the reason.
fn bad(reason: impl Into<String>) -> Error {
    Error::InvalidCertificate(CertificateError::Other(rustls::OtherError(Arc::new(
        Refused(reason.into()),
    ))))
}

/// Why a client chain was refused.
#[derive(Debug)]
struct Refused(String);

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Refused {}

/// The public key a certificate (a proxy's too) holds.
fn spki_of(cert: &CertificateDer<'_>) -> Result<SubjectPublicKeyInfoDer<'static>, Error> {
    let (_, c) = X509Certificate::from_der(cert).map_err(|_| bad("unparsable certificate"))?;
    Ok(SubjectPublicKeyInfoDer::from(c.public_key().raw.to_vec()))
}

/// Checks the proxies at the head of `chain` (the client's certificate first, then what it
/// sent with it), each against the certificate it names as its issuer: that certificate
/// follows it, signed it, is no CA and may sign; its subject is the issuer's plus one `CN`;
/// it is valid at `now`, inherits all rights, and no more proxies lie below it than it
/// allows. Returns how many proxies there are (0: the client's certificate is an EEC).
pub fn check_proxies(chain: &[&CertificateDer<'_>], now: UnixTime) -> Result<usize, String> {
    let parsed = chain
        .iter()
        .take(MAX_PROXIES + 2)
        .map(|c| X509Certificate::from_der(c).map(|(_, c)| c))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|_| "an unparsable certificate in the client's chain".to_string())?;
    let mut n = 0;
    while let Some(proxy) = parsed.get(n) {
        let Some(info) = proxy_info(proxy)? else {
            break;
        };
        let Some(issuer) = parsed.get(n + 1) else {
            return Err(format!(
                "proxy {} came without the certificate that signed it",
                dn(proxy.subject())
            ));
        };
        check_proxy(proxy, issuer, &info, n, now)?;
        n += 1;
        if n > MAX_PROXIES {
            return Err(format!("more than {MAX_PROXIES} proxies in one chain"));
        }
    }
    Ok(n)
}

/// What a proxy's `ProxyCertInfo` says.
struct ProxyInfo {
    /// Proxies it allows below it.
    path_len: Option<u64>,
    /// The policy language's OID.
    language: String,
}

/// The proxy extension of `c`, if it is a proxy.
fn proxy_info(c: &X509Certificate<'_>) -> Result<Option<ProxyInfo>, String> {
    let Some(ext) = c
        .extensions()
        .iter()
        .find(|e| e.oid.to_id_string() == PROXY_CERT_INFO)
    else {
        return Ok(None);
    };
    let malformed = || format!("proxy {}: malformed ProxyCertInfo", dn(c.subject()));
    // ProxyCertInfo ::= SEQUENCE { pCPathLenConstraint INTEGER OPTIONAL,
    //                              proxyPolicy SEQUENCE { policyLanguage OID, policy OCTET STRING OPTIONAL } }
    let (_, info) = parse_der(ext.value).map_err(|_| malformed())?;
    let BerObjectContent::Sequence(items) = info.content else {
        return Err(malformed());
    };
    let (path_len, policy) = match items.as_slice() {
        [len, policy] => (Some(len.as_u64().map_err(|_| malformed())?), policy),
        [policy] => (None, policy),
        _ => return Err(malformed()),
    };
    let BerObjectContent::Sequence(policy) = &policy.content else {
        return Err(malformed());
    };
    let language = policy
        .first()
        .and_then(|l| l.as_oid().ok())
        .ok_or_else(malformed)?
        .to_id_string();
    Ok(Some(ProxyInfo { path_len, language }))
}

/// Checks one proxy (`below` proxies lie under it) against the certificate after it.
fn check_proxy(
    proxy: &X509Certificate<'_>,
    issuer: &X509Certificate<'_>,
    info: &ProxyInfo,
    below: usize,
    now: UnixTime,
) -> Result<(), String> {
    let name = dn(proxy.subject());
    if info.language != INHERIT_ALL {
        return Err(format!(
            "proxy {name}: policy language {} is not accepted (only inherit-all proxies map to an account)",
            info.language
        ));
    }
    if info.path_len.is_some_and(|l| (below as u64) > l) {
        return Err(format!(
            "proxy {name}: more proxies below it than it allows"
        ));
    }
    if proxy.issuer().as_raw() != issuer.subject().as_raw() {
        return Err(format!(
            "proxy {name}: its issuer {} did not come after it",
            dn(proxy.issuer())
        ));
    }
    if !extends_by_one_cn(proxy.subject(), issuer.subject()) {
        return Err(format!(
            "proxy {name}: its subject is not its issuer's plus one CN"
        ));
    }
    if is_ca(proxy) || is_ca(issuer) {
        return Err(format!(
            "proxy {name}: a CA is neither a proxy nor signs one"
        ));
    }
    let may_sign = issuer
        .key_usage()
        .ok()
        .flatten()
        .is_none_or(|ku| ku.value.digital_signature());
    if !may_sign {
        return Err(format!(
            "proxy {name}: its issuer's key usage forbids signing"
        ));
    }
    let secs = i64::try_from(now.as_secs()).unwrap_or(i64::MAX);
    let validity = proxy.validity();
    if secs < validity.not_before.timestamp() || secs > validity.not_after.timestamp() {
        return Err(format!(
            "proxy {name} is not valid now (from {} to {})",
            validity.not_before, validity.not_after
        ));
    }
    proxy
        .verify_signature(Some(issuer.public_key()))
        .map_err(|_| format!("proxy {name}: not signed by {}", dn(issuer.subject())))
}

/// Whether a certificate says it is a CA.
fn is_ca(c: &X509Certificate<'_>) -> bool {
    c.basic_constraints()
        .ok()
        .flatten()
        .is_some_and(|b| b.value.ca)
}

/// Whether `subject` is `issuer` with one more RDN, a lone `CN`.
fn extends_by_one_cn(subject: &X509Name<'_>, issuer: &X509Name<'_>) -> bool {
    let s: Vec<_> = subject.iter().collect();
    let i: Vec<_> = issuer.iter().collect();
    let Some((last, head)) = s.split_last() else {
        return false;
    };
    let same = |a: &x509_parser::x509::RelativeDistinguishedName<'_>,
                b: &x509_parser::x509::RelativeDistinguishedName<'_>| {
        a.iter()
            .map(|t| (t.attr_type(), t.attr_value().data))
            .eq(b.iter().map(|t| (t.attr_type(), t.attr_value().data)))
    };
    let cn = x509_parser::oid_registry::OID_X509_COMMON_NAME;
    head.len() == i.len()
        && head.iter().zip(&i).all(|(a, b)| same(a, b))
        && last.iter().count() == 1
        && last.iter().all(|t| *t.attr_type() == cn)
}

/// A name in OpenSSL's one-line form (`/C=CH/O=CERN/CN=Alice`), as grid-mapfiles write it.
fn dn(name: &X509Name<'_>) -> String {
    let mut out = String::new();
    for rdn in name.iter() {
        let parts: Vec<String> = rdn
            .iter()
            .map(|t| {
                let oid = t.attr_type().to_id_string();
                let key = short_name(&oid).map_or(oid.clone(), str::to_string);
                let value = t
                    .as_str()
                    .map_or_else(|_| hex_of(t.attr_value().data), str::to_string);
                format!("{key}={value}")
            })
            .collect();
        out.push('/');
        out.push_str(&parts.join("+"));
    }
    out
}

/// OpenSSL's short names of the attributes grid DNs use.
fn short_name(oid: &str) -> Option<&'static str> {
    Some(match oid {
        "2.5.4.3" => "CN",
        "2.5.4.6" => "C",
        "2.5.4.7" => "L",
        "2.5.4.8" => "ST",
        "2.5.4.10" => "O",
        "2.5.4.11" => "OU",
        "2.5.4.5" => "serialNumber",
        "2.5.4.4" => "SN",
        "2.5.4.42" => "GN",
        "0.9.2342.19200300.100.1.25" => "DC",
        "0.9.2342.19200300.100.1.1" => "UID",
        "1.2.840.113549.1.9.1" => "emailAddress",
        _ => return None,
    })
}

/// A value that is no string, as OpenSSL prints one: `#` and its bytes in hex.
fn hex_of(data: &[u8]) -> String {
    format!("#{}", hex::encode(data))
}

#[cfg(test)]
mod tests;
