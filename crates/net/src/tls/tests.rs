use super::*;
use std::net::TcpListener;
use std::thread;

/// A self-signed certificate for `localhost` and 127.0.0.1 in `dir`: (cert, key) paths.
fn identity_files(dir: &Path) -> (PathBuf, PathBuf) {
    testing::self_signed_files(dir).unwrap()
}

use std::path::{Path, PathBuf};

/// Connects a client link to a server link over loopback; returns both ends' results.
fn pair(client: Secure, server: Secure) -> (io::Result<TlsLink>, io::Result<TlsLink>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let t = thread::spawn(move || {
        let (s, _) = l.accept().unwrap();
        server.wrap(s)
    });
    let c = client.wrap(TcpStream::connect(addr).unwrap());
    (c, t.join().unwrap())
}

fn server(config: Arc<ServerConfig>) -> Secure {
    Secure::Server {
        config,
        must_resume: false,
    }
}

fn client(config: Arc<ClientConfig>, name: &str) -> Secure {
    Secure::Client {
        config,
        name: ServerName::try_from(name.to_string()).unwrap(),
    }
}

#[test]
fn carries_bytes_both_ways_and_ends_at_close_notify() {
    let dir = tempfile::tempdir().unwrap();
    let (cert, key) = identity_files(dir.path());
    let id = Identity::load(&cert, &key).unwrap();
    let cc = client_config(Some(&cert)).unwrap();
    let (c, s) = pair(client(cc, "localhost"), server(id.config().data));
    let (mut c, mut s) = (c.unwrap(), s.unwrap());
    let data: Vec<u8> = (0..3_000_000u32).map(|i| (i * 7 % 251) as u8).collect();
    let sent = data.clone();
    let t = thread::spawn(move || {
        c.write_all(&sent).unwrap();
        c.flush().unwrap();
        c.close().unwrap();
        let mut back = Vec::new();
        c.read_to_end(&mut back).unwrap();
        back
    });
    let mut got = Vec::new();
    s.read_to_end(&mut got).unwrap();
    assert_eq!(got, data);
    s.write_all(b"reply").unwrap();
    s.close().unwrap();
    assert_eq!(t.join().unwrap(), b"reply");
}

#[test]
fn data_connections_resume_the_control_session_and_hand_out_no_tickets() {
    let dir = tempfile::tempdir().unwrap();
    let (cert, key) = identity_files(dir.path());
    let id = Identity::load(&cert, &key).unwrap();
    let cc = client_config(Some(&cert)).unwrap();
    let tls = id.config();
    let (c1, s1) = pair(client(cc.clone(), "127.0.0.1"), server(tls.control));
    let (mut c1, mut s1) = (c1.unwrap(), s1.unwrap());
    assert!(!c1.resumed());
    // TLS 1.3 tickets follow the handshake: let the client read them before it reconnects.
    s1.write_all(b"x").unwrap();
    s1.flush().unwrap();
    let mut one = [0u8; 1];
    c1.read_exact(&mut one).unwrap();
    let data = server(tls.data);
    let (c2, s2) = pair(client(cc, "127.0.0.1"), data);
    let (c2, s2) = (c2.unwrap(), s2.unwrap());
    assert!(c2.resumed() && s2.resumed());
    // Nothing waits unread at a client that only sends: its close would reset the connection.
    drop(s2);
    let mut rest = Vec::new();
    let mut raw = c2.socket();
    raw.read_to_end(&mut rest).unwrap();
    assert!(
        rest.is_empty(),
        "{} bytes the data connection's server sent",
        rest.len()
    );
}

/// Item 4 of the trust issue: a data connection under `--tls-reuse required` is taken only
/// when it resumes its own session's control connection: a full handshake, or a ticket that
/// another session handed out, is refused.
#[test]
fn a_data_connection_must_resume_its_own_sessions_control_connection() {
    let dir = tempfile::tempdir().unwrap();
    let (cert, key) = identity_files(dir.path());
    let id = Identity::load(&cert, &key).unwrap();
    let (mine, theirs) = (
        id.config().for_session().unwrap(),
        id.config().for_session().unwrap(),
    );
    let required = |c: &Arc<ServerConfig>| Secure::Server {
        config: c.clone(),
        must_resume: true,
    };
    // A client that logged in to `theirs` only: its tickets are no good for `mine`.
    let stranger = client_config(Some(&cert)).unwrap();
    let (c, s) = pair(
        client(stranger.clone(), "127.0.0.1"),
        server(theirs.control),
    );
    let (mut c, mut s) = (c.unwrap(), s.unwrap());
    s.write_all(b"x").unwrap();
    let mut one = [0u8; 1];
    c.read_exact(&mut one).unwrap();
    let (_, refused) = pair(client(stranger, "127.0.0.1"), required(&mine.data));
    let e = refused.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::PermissionDenied, "{e}");
    // A full handshake is refused too.
    let fresh = client_config(Some(&cert)).unwrap();
    let (_, refused) = pair(client(fresh.clone(), "127.0.0.1"), required(&mine.data));
    assert!(refused.is_err());
    // The session's own client resumes its control connection's session.
    let (c, s) = pair(
        client(fresh.clone(), "127.0.0.1"),
        server(mine.control.clone()),
    );
    let (mut c, mut s) = (c.unwrap(), s.unwrap());
    s.write_all(b"x").unwrap();
    c.read_exact(&mut one).unwrap();
    let (c2, s2) = pair(client(fresh, "127.0.0.1"), required(&mine.data));
    assert!(c2.unwrap().resumed() && s2.unwrap().resumed());
}

/// The handshake bounds its own wait, then gives the socket back its timeouts (a client's
/// `--timeout` on a data connection outlives the handshake).
#[test]
fn the_handshake_keeps_the_sockets_timeouts() {
    let dir = tempfile::tempdir().unwrap();
    let (cert, key) = identity_files(dir.path());
    let id = Identity::load(&cert, &key).unwrap();
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let data = id.config().data;
    let t = thread::spawn(move || server(data).wrap(l.accept().unwrap().0));
    let sock = TcpStream::connect(addr).unwrap();
    let five = Some(std::time::Duration::from_secs(5));
    sock.set_read_timeout(five).unwrap();
    sock.set_write_timeout(five).unwrap();
    let link = client(client_config(Some(&cert)).unwrap(), "localhost")
        .wrap(sock)
        .unwrap();
    assert_eq!(link.socket().read_timeout().unwrap(), five);
    assert_eq!(link.socket().write_timeout().unwrap(), five);
    let served = t.join().unwrap().unwrap();
    assert_eq!(served.socket().read_timeout().unwrap(), None);
}

#[test]
fn an_untrusted_certificate_fails_the_handshake_with_a_reason() {
    let dir = tempfile::tempdir().unwrap();
    let (cert, key) = identity_files(dir.path());
    let other = tempfile::tempdir().unwrap();
    let (stranger, _) = identity_files(other.path());
    let id = Identity::load(&cert, &key).unwrap();
    let cc = client_config(Some(&stranger)).unwrap();
    let (c, _) = pair(client(cc, "localhost"), server(id.config().data));
    let e = c.unwrap_err().to_string();
    assert!(
        // Same subject as the trusted one, another key: the signature does not verify.
        e.contains("TLS handshake failed") && e.contains("signature is wrong"),
        "{e}"
    );
}

/// A CA in `dir` and a certificate for `localhost` it signed: (ca, leaf cert, leaf key).
fn ca_and_leaf(dir: &Path) -> (PathBuf, PathBuf, PathBuf) {
    let ca_key = rcgen::KeyPair::generate().unwrap();
    let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    let ca = params.self_signed(&ca_key).unwrap();
    let key = rcgen::KeyPair::generate().unwrap();
    let leaf = rcgen::CertificateParams::new(vec!["localhost".to_string()])
        .unwrap()
        .signed_by(&key, &ca, &ca_key)
        .unwrap();
    let files = (
        dir.join("ca.pem"),
        dir.join("leaf.pem"),
        dir.join("leaf.key"),
    );
    std::fs::write(&files.0, ca.pem()).unwrap();
    std::fs::write(&files.1, leaf.pem()).unwrap();
    std::fs::write(&files.2, key.serialize_pem()).unwrap();
    files
}

#[test]
fn a_ca_vouches_for_its_names_only_and_a_pinned_certificate_for_itself() {
    let dir = tempfile::tempdir().unwrap();
    let (ca, cert, key) = ca_and_leaf(dir.path());
    let id = Identity::load(&cert, &key).unwrap();
    let by_ca = client_config(Some(&ca)).unwrap();
    let (c, _) = pair(client(by_ca.clone(), "localhost"), server(id.config().data));
    assert!(c.is_ok());
    let (c, _) = pair(client(by_ca, "example.org"), server(id.config().data));
    let e = c.unwrap_err().to_string();
    assert!(e.contains("issued for another name"), "{e}");
    // The server's own certificate given as --ca: trusted as itself, for its names only.
    let pinned = client_config(Some(&cert)).unwrap();
    let (c, _) = pair(
        client(pinned.clone(), "localhost"),
        server(id.config().data),
    );
    assert!(c.is_ok());
    let (c, _) = pair(client(pinned, "127.0.0.1"), server(id.config().data));
    assert!(c.is_err(), "the leaf names localhost only");
}

/// Item 16 of the trust issue: a certificate given with `--ca` that the server shows as its
/// own is trusted only for the names it carries and while it is valid.
#[test]
fn a_pinned_certificate_is_checked_for_its_name_and_its_validity() {
    let dir = tempfile::tempdir().unwrap();
    let (cert, key) = identity_files(dir.path());
    let id = Identity::load(&cert, &key).unwrap();
    let pinned = client_config(Some(&cert)).unwrap();
    let (c, _) = pair(client(pinned, "example.org"), server(id.config().data));
    let e = c.unwrap_err().to_string();
    assert!(e.contains("issued for another name"), "{e}");
    // An expired self-signed certificate for localhost.
    let old = dir.path().join("old");
    std::fs::create_dir(&old).unwrap();
    let key_pair = rcgen::KeyPair::generate().unwrap();
    let mut params = rcgen::CertificateParams::new(vec!["localhost".to_string()]).unwrap();
    params.not_before = rcgen::date_time_ymd(2020, 1, 1);
    params.not_after = rcgen::date_time_ymd(2021, 1, 1);
    let expired = params.self_signed(&key_pair).unwrap();
    let (cert, key) = (old.join("cert.pem"), old.join("key.pem"));
    std::fs::write(&cert, expired.pem()).unwrap();
    std::fs::write(&key, key_pair.serialize_pem()).unwrap();
    let id = Identity::load(&cert, &key).unwrap();
    let pinned = client_config(Some(&cert)).unwrap();
    let (c, _) = pair(client(pinned, "localhost"), server(id.config().data));
    let e = c.unwrap_err().to_string();
    assert!(e.contains("expired"), "{e}");
}

#[test]
fn a_renewed_certificate_is_read_again_and_bad_files_are_named() {
    let dir = tempfile::tempdir().unwrap();
    let (cert, key) = identity_files(dir.path());
    let id = Identity::load(&cert, &key).unwrap();
    let first = id.config().control;
    assert!(Arc::ptr_eq(&first, &id.config().control));
    // A new pair, written with a later modification time.
    let renewed = tempfile::tempdir().unwrap();
    let (c2, k2) = identity_files(renewed.path());
    let later = std::time::SystemTime::now() + std::time::Duration::from_secs(5);
    for (from, to) in [(&c2, &cert), (&k2, &key)] {
        std::fs::copy(from, to).unwrap();
        std::fs::File::options()
            .write(true)
            .open(to)
            .unwrap()
            .set_modified(later)
            .unwrap();
    }
    assert!(!Arc::ptr_eq(&first, &id.config().control));
    // A broken file: named in the error; a key that belongs to another certificate refused.
    std::fs::write(dir.path().join("empty.pem"), "").unwrap();
    let e = Identity::load(&dir.path().join("empty.pem"), &key).unwrap_err();
    assert!(e.contains("empty.pem"), "{e}");
    let (_, other_key) = identity_files(tempfile::tempdir().unwrap().path());
    assert!(Identity::load(&cert, &other_key).is_err());
}
