//! A scripted control-connection server on loopback for the connection's unit tests: it
//! reads the client's command lines in the rounds a test expects and answers each round.

use super::{Connection, Credentials, TlsMode, TlsPolicy};
use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::time::Duration;

/// A server that reads `n` command lines before it answers with `replies`: only a client
/// that sent them in one go gets past it. Returns the lines.
pub(super) fn take(
    r: &mut BufReader<TcpStream>,
    w: &mut TcpStream,
    n: usize,
    replies: &str,
) -> Vec<String> {
    let lines = (0..n)
        .map(|_| {
            let mut line = String::new();
            r.read_line(&mut line).unwrap();
            line.trim_end().to_string()
        })
        .collect();
    w.write_all(replies.as_bytes()).unwrap();
    lines
}

/// [`take`] for each of `rounds` in turn: the lines of all.
pub(super) fn rounds(
    r: &mut BufReader<TcpStream>,
    w: &mut TcpStream,
    rounds: &[(usize, &str)],
) -> Vec<String> {
    rounds
        .iter()
        .flat_map(|&(n, replies)| take(r, w, n, replies))
        .collect()
}

/// A one-connection server on loopback that runs `script` on what it accepts: its port and
/// its thread.
pub(super) fn fake_server<T: Send + 'static>(
    script: impl FnOnce(&mut BufReader<TcpStream>, &mut TcpStream) -> T + Send + 'static,
) -> (u16, std::thread::JoinHandle<T>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let server = std::thread::spawn(move || {
        let (s, _) = l.accept().unwrap();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let mut w = s.try_clone().unwrap();
        script(&mut BufReader::new(s), &mut w)
    });
    (port, server)
}

/// Tells the session a tuning mode and `-p auto` (settings asked ahead: `OPTS DRS`,
/// `OPTS RETR Parallelism`, `OPTS DCREUSE ON`).
pub(super) fn tuned_auto(c: &mut Connection) {
    c.set_tuning(fatpipe_net::TunerConfig::untuned()).unwrap();
    let auto = super::Streams::Auto {
        max: 8,
        max_memory: None,
    };
    c.set_streams(auto).unwrap();
}

/// The features a fatpipe server lists, less the UDP channel.
const FEATURES: &[&str] = &[
    "CKSM XXH3",
    "MDTM",
    "MFMT",
    "DRS",
    "PARALLEL",
    "DCREUSE",
    "PIPELINED STOR",
];

/// Runs `script` as the server of a client logged in with `user_reply` to `USER` and `PASS`
/// (which come with `FEAT` and its first commands: the script reads those).
pub(super) fn with_server(
    user_reply: &'static str,
    script: impl FnOnce(&mut BufReader<TcpStream>, &mut TcpStream) -> Vec<String> + Send + 'static,
    client: impl FnOnce(Connection),
) -> Vec<String> {
    with_features(&[], user_reply, script, client)
}

/// [`with_server`] for a server that lists `more` features besides [`FEATURES`].
pub(super) fn with_features(
    more: &[&str],
    user_reply: &'static str,
    script: impl FnOnce(&mut BufReader<TcpStream>, &mut TcpStream) -> Vec<String> + Send + 'static,
    client: impl FnOnce(Connection),
) -> Vec<String> {
    let lines: String = FEATURES
        .iter()
        .chain(more)
        .map(|f| format!(" {f}\r\n"))
        .collect();
    let (port, server) = fake_server(move |r, w| {
        w.write_all(b"220 hi\r\n").unwrap();
        let feat = format!("211-Features:\r\n{lines}211 End\r\n");
        let mut got = take(r, w, 1, &feat);
        // The login comes with the client's first commands, which the script reads.
        got.extend(take(r, w, 3, &format!("{user_reply}{feat}")));
        got.extend(script(r, w));
        got
    });
    let off = TlsPolicy::new(TlsMode::Off, None);
    let creds = Credentials::anonymous();
    let c = Connection::open("127.0.0.1", port, &creds, Duration::from_secs(5), &off).unwrap();
    assert!(c.has_feature("MDTM"), "FEAT read before the login");
    client(c);
    server.join().unwrap()
}
