//! TLS configurations: the server's identity (certificate chain and key from PEM files, read
//! again when the files change, so a renewed certificate takes effect without a restart) and
//! the client's trust (the system's roots plus `--ca`), both on the ring provider.

use crate::reload::Reloading;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::{ResolvesClientCert, WebPkiServerVerifier};
use rustls::crypto::ring::default_provider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::server::danger::ClientCertVerifier;
use rustls::server::ServerSessionMemoryCache;
use rustls::sign::CertifiedKey;
use rustls::{ClientConfig, DigitallySignedStruct, RootCertStore, ServerConfig, SignatureScheme};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A server's certificate and key files and the configuration made from them, read again when
/// either file changes.
#[derive(Debug)]
pub struct Identity {
    cert: PathBuf,
    key: PathBuf,
    loaded: Reloading<ServerTls>,
}

/// A server's two configurations, sharing one session cache: the control connection's
/// hands out session tickets, which data connections resume; a data connection's hands out
/// none (a client that only sends on it would leave them unread, and closing a socket with
/// unread bytes resets it, cutting the upload's tail: lftp does so).
#[derive(Debug, Clone)]
pub struct ServerTls {
    /// For `AUTH TLS` on the control connection.
    pub control: Arc<ServerConfig>,
    /// For the data connections of a session.
    pub data: Arc<ServerConfig>,
}

/// Tickets a control connection hands out (a client that uses each once, as rustls's does,
/// keeps 8 per server; OpenSSL's and GnuTLS's use one for every data connection).
const CONTROL_TICKETS: usize = 8;
/// TLS 1.2 sessions one control session remembers for resumption.
const SESSION_CACHE: usize = 64;

/// Whether a data connection under `PROT P` must resume the control connection's TLS session
/// (vsftpd's `require_ssl_reuse`, ProFTPD's default): the proof that a client which sets no
/// data token owns the connection. `Optional` is for clients that cannot (Python's ftplib).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum TlsReuse {
    /// Refuse a data connection that does not resume the session.
    #[default]
    Required,
    /// Take it either way.
    Optional,
}

impl std::str::FromStr for TlsReuse {
    type Err = String;
    fn from_str(s: &str) -> Result<TlsReuse, String> {
        match s {
            "required" => Ok(TlsReuse::Required),
            "optional" => Ok(TlsReuse::Optional),
            _ => Err(format!("{s:?}: use required or optional")),
        }
    }
}

impl ServerTls {
    /// The configurations of one session: a session cache and a ticket key of its own, so that
    /// the only TLS session its data connections can resume is its control connection's (not
    /// another client's, nor another session's of the same client).
    pub fn for_session(&self) -> Result<ServerTls, String> {
        let ticketer = rustls::crypto::ring::Ticketer::new().map_err(|e| e.to_string())?;
        let cache = ServerSessionMemoryCache::new(SESSION_CACHE);
        let own = |c: &ServerConfig| {
            let mut c = c.clone();
            c.session_storage = cache.clone();
            c.ticketer = ticketer.clone();
            Arc::new(c)
        };
        Ok(ServerTls {
            control: own(&self.control),
            data: own(&self.data),
        })
    }
}

impl Identity {
    /// Reads the files; an unreadable file, no certificate or a key that does not match is an
    /// error that names the file.
    pub fn load(cert: &Path, key: &Path) -> Result<Identity, String> {
        Self::asking(cert, key, None)
    }

    /// The same identity, asking clients for a certificate that `clients` checks (grid
    /// certificates and proxies: [`super::grid::GridCerts`]).
    pub fn asking_clients(&self, clients: Arc<dyn ClientCertVerifier>) -> Result<Identity, String> {
        Self::asking(&self.cert, &self.key, Some(clients))
    }

    fn asking(
        cert: &Path,
        key: &Path,
        clients: Option<Arc<dyn ClientCertVerifier>>,
    ) -> Result<Identity, String> {
        let (c, k) = (cert.to_path_buf(), key.to_path_buf());
        let paths = vec![c.clone(), k.clone()];
        let read = move || server_config(&c, &k, clients.clone());
        Ok(Identity {
            cert: cert.to_path_buf(),
            key: key.to_path_buf(),
            loaded: Reloading::load(
                "TLS certificate",
                paths,
                Duration::ZERO,
                Instant::now(),
                read,
            )?,
        })
    }

    /// The configuration for a new control connection: read again first if either file
    /// changed since (a reload that fails keeps the previous one and says why).
    pub fn config(&self) -> ServerTls {
        self.loaded.current(Instant::now())
    }
}

/// A server's configurations from PEM files: the chain (leaf first) and its private key;
/// `clients` asks clients for certificates.
fn server_config(
    cert: &Path,
    key: &Path,
    clients: Option<Arc<dyn ClientCertVerifier>>,
) -> Result<ServerTls, String> {
    let chain = CertificateDer::pem_file_iter(cert)
        .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
        .map_err(|e| format!("cannot read certificates from {}: {e}", cert.display()))?;
    if chain.is_empty() {
        return Err(format!("{} holds no PEM certificate", cert.display()));
    }
    let key_der = PrivateKeyDer::from_pem_file(key)
        .map_err(|e| format!("cannot read a private key from {}: {e}", key.display()))?;
    let builder = ServerConfig::builder_with_provider(Arc::new(default_provider()))
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?;
    let builder = match clients {
        Some(v) => builder.with_client_cert_verifier(v),
        None => builder.with_no_client_auth(),
    };
    let mut control = builder.with_single_cert(chain, key_der).map_err(|e| {
        format!(
            "{} and {} do not make a usable identity: {e}",
            cert.display(),
            key.display()
        )
    })?;
    control.session_storage = ServerSessionMemoryCache::new(SESSION_CACHE);
    control.send_tls13_tickets = CONTROL_TICKETS;
    let mut data = control.clone();
    data.send_tls13_tickets = 0;
    Ok(ServerTls {
        control: Arc::new(control),
        data: Arc::new(data),
    })
}

/// The client's configuration: the system's trusted roots (those it can parse) plus the
/// certificates in `ca`, each of which is also trusted as itself when a server shows it (a
/// self-signed server certificate, even one marked as a CA, as `openssl req -x509` makes).
/// Sessions are cached, so data connections resume the control connection's session (servers
/// such as vsftpd with `require_ssl_reuse` demand it).
pub fn client_config(ca: Option<&Path>) -> Result<Arc<ClientConfig>, String> {
    client_config_showing(ca, None)
}

/// [`client_config`], showing `cert` to servers that ask for a client certificate.
pub fn client_config_showing(
    ca: Option<&Path>,
    cert: Option<&super::grid::ClientCert>,
) -> Result<Arc<ClientConfig>, String> {
    let provider = Arc::new(default_provider());
    let mut roots = RootCertStore::empty();
    let native = rustls_native_certs::load_native_certs();
    roots.add_parsable_certificates(native.certs);
    let mut pinned = Vec::new();
    if let Some(ca) = ca {
        pinned = CertificateDer::pem_file_iter(ca)
            .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
            .map_err(|e| format!("cannot read certificates from {}: {e}", ca.display()))?;
        if pinned.is_empty() {
            return Err(format!("{} holds no PEM certificate", ca.display()));
        }
        for c in &pinned {
            roots
                .add(c.clone())
                .map_err(|e| format!("{}: unusable certificate: {e}", ca.display()))?;
        }
    }
    if roots.is_empty() {
        return Err(
            "no trusted certificates: the system has none (install ca-certificates) and no --ca was given"
                .into(),
        );
    }
    let webpki = WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider.clone())
        .build()
        .map_err(|e| e.to_string())?;
    let builder = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(Pinned { pinned, webpki }));
    let config = match cert {
        Some(c) => {
            // Not `with_client_auth_cert`: it parses the certificate as WebPKI does, which
            // refuses a proxy's critical ProxyCertInfo; the server judges the chain.
            let key = default_provider()
                .key_provider
                .load_private_key(c.key.clone_key())
                .map_err(|e| format!("{}: unusable private key: {e}", c.from.display()))?;
            let shown = CertifiedKey::new(c.chain.clone(), key);
            builder.with_client_cert_resolver(Arc::new(ShowCert(Arc::new(shown))))
        }
        None => builder.with_no_client_auth(),
    };
    Ok(Arc::new(config))
}

/// Shows one certificate (chain and key) to every server that asks for one.
#[derive(Debug)]
struct ShowCert(Arc<CertifiedKey>);

impl ResolvesClientCert for ShowCert {
    fn resolve(
        &self,
        _root_hint_subjects: &[&[u8]],
        _sigschemes: &[SignatureScheme],
    ) -> Option<Arc<CertifiedKey>> {
        Some(self.0.clone())
    }

    fn has_certs(&self) -> bool {
        true
    }
}

/// Whether `cert` is issued for `name` and valid at `now` (what a chain check would say of a
/// certificate that is its own anchor).
fn check_name_and_time(
    cert: &CertificateDer<'_>,
    name: &ServerName<'_>,
    now: UnixTime,
) -> Result<(), rustls::Error> {
    use rustls::CertificateError as E;
    let bad = |e: E| rustls::Error::InvalidCertificate(e);
    let (_, parsed) =
        x509_parser::parse_x509_certificate(cert.as_ref()).map_err(|_| bad(E::BadEncoding))?;
    let validity = parsed.validity();
    let now_secs = now.as_secs() as i64;
    if now_secs < validity.not_before.timestamp() {
        return Err(bad(E::NotValidYet));
    }
    if now_secs > validity.not_after.timestamp() {
        return Err(bad(E::Expired));
    }
    webpki::EndEntityCert::try_from(cert)
        .map_err(|_| bad(E::BadEncoding))?
        .verify_is_valid_for_subject_name(name)
        .map_err(|_| bad(E::NotValidForName))
}

/// The usual chain and name checks, except that a certificate given with `--ca` is accepted
/// when the server shows exactly it (its name and validity period still checked).
#[derive(Debug)]
struct Pinned {
    pinned: Vec<CertificateDer<'static>>,
    webpki: Arc<WebPkiServerVerifier>,
}

impl ServerCertVerifier for Pinned {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        if self
            .pinned
            .iter()
            .any(|c| c.as_ref() == end_entity.as_ref())
        {
            // Trusted as itself, as curl trusts it: for the names it carries, while it is valid.
            check_name_and_time(end_entity, server_name, now)?;
            return Ok(ServerCertVerified::assertion());
        }
        self.webpki
            .verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now)
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.webpki.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.webpki.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.webpki.supported_verify_schemes()
    }
}
