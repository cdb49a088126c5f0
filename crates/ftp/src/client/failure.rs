//! What kind of failure ended a file or a copy: one classification serves the retry rule (only
//! a lost connection is tried again), each file's `failure` in the `--json` report and the
//! command's exit code (docs/exit-codes.md). Errors reach here as the text a user reads (a
//! file's result keeps its error as text), so the markers below are the phrases this client
//! writes and the reply codes servers send; misuse is typed ([`Misuse`]).

use serde::Serialize;

/// The kind of a failure, each with its own exit code.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Failure {
    /// Not classified here (a server's refusal of another kind, a local I/O error).
    Other,
    /// The command line asks for something that cannot be done.
    Usage,
    /// The server cannot be reached (refused, no route, unknown host).
    Connect,
    /// The server refused the login.
    Login,
    /// A source is missing (a file, a glob with no match, a directory).
    NotFound,
    /// A file or directory may not be read or written.
    Permission,
    /// This machine's disk (or quota) is full.
    LocalDiskFull,
    /// The server's disk (or quota) is full (`452`, `552`).
    ServerDiskFull,
    /// TLS was refused or the server's certificate is not trusted.
    Tls,
    /// The copy differs from the source (checksums, sizes).
    Checksum,
    /// The connection was lost and `--retry-for` ran out.
    Lost,
    /// A signal (Ctrl-C, SIGTERM) stopped the copy.
    Interrupted,
}

/// Markers of each kind in an error's text, checked in this order (the first match wins: a
/// full disk reported with a broken connection is a full disk).
const MARKERS: &[(Failure, &[&str])] = &[
    (
        Failure::ServerDiskFull,
        &[
            "said 452",
            "said 552",
            "the server's disk is full",
            "answered 507",
        ],
    ),
    (Failure::Interrupted, &["interrupted"]),
    (
        Failure::LocalDiskFull,
        &[
            "this machine's disk is full",
            "room on this machine's disk",
            "(os error 28)",
            "(os error 122)",
        ],
    ),
    (
        Failure::Checksum,
        &[
            "checksum",
            "the copy is incomplete",
            "after the copy, the source",
        ],
    ),
    (Failure::Tls, &["TLS", "certificate"]),
    (
        Failure::Login,
        &["said 530", "login as", "said 332", "answered 401"],
    ),
    (
        Failure::Permission,
        &[
            "(os error 13)",
            "(os error 1)",
            "ermission denied",
            "said 553",
            "said 532",
            "answered 403",
        ],
    ),
    (
        Failure::NotFound,
        &[
            "(os error 2)",
            "No such file",
            "nothing matches",
            "does not exist",
            "not found",
            "answered 404",
            "answered 410",
        ],
    ),
    // A server's other refusals and this machine's other I/O errors, even when they quote a
    // broken connection: not cured by trying again.
    (
        Failure::Other,
        &[
            "said 45",
            "said 5",
            "writing the local copy",
            "reading local file",
            "answered 4",
            "answered 5",
        ],
    ),
    (
        Failure::Connect,
        &[
            "cannot connect to",
            "cannot resolve",
            "has no address",
            "refused the connection",
        ],
    ),
    (
        Failure::Lost,
        &[
            "(os error 32)",  // broken pipe
            "(os error 101)", // network unreachable
            "(os error 103)", // connection aborted
            "(os error 104)", // connection reset
            "(os error 110)", // timed out
            "(os error 111)", // connection refused: a server restarting
            "(os error 113)", // no route to host
            "closed the control connection",
            "no reply from",
            "within the --timeout",
            "timed out",
            "stalled",
            "closed before its EOD",
            "closed inside a block",
            "closed the data connection",
            "said 421",
            "said 425",
            "said 426",
            "the body was cut",
            "moved nothing for",
        ],
    ),
];

impl Failure {
    /// The kind of the failure an error's text (`{e:#}`) describes.
    pub fn of(error: &str) -> Failure {
        MARKERS
            .iter()
            .find(|(_, markers)| markers.iter().any(|m| error.contains(m)))
            .map_or(Failure::Other, |(kind, _)| *kind)
    }

    /// The kind of a copy's error: misuse by its type, the rest by its text.
    pub fn of_error(error: &anyhow::Error) -> Failure {
        if error.chain().any(|e| e.is::<Misuse>()) {
            return Failure::Usage;
        }
        Failure::of(&format!("{error:#}"))
    }

    /// The process exit code of a command that failed so (docs/exit-codes.md).
    pub fn exit_code(self) -> u8 {
        match self {
            Failure::Other => 1,
            Failure::Usage => 2,
            Failure::Connect => 3,
            Failure::Login => 4,
            Failure::NotFound => 5,
            Failure::Permission => 6,
            Failure::LocalDiskFull => 7,
            Failure::ServerDiskFull => 8,
            Failure::Tls => 9,
            Failure::Checksum => 10,
            Failure::Lost => 11,
            Failure::Interrupted => 130,
        }
    }

    /// The failure of a command whose files failed as `failures`: their kind if they share
    /// one, else [`Failure::Other`]; `None` when none failed.
    pub fn common(failures: impl IntoIterator<Item = Failure>) -> Option<Failure> {
        let mut kinds = failures.into_iter();
        let first = kinds.next()?;
        Some(match kinds.all(|k| k == first) {
            true => first,
            false => Failure::Other,
        })
    }

    /// Whether a new session may cure it: a connection lost or refused mid-copy (a server
    /// restarting); a refusal (a missing file, a login, a full disk, a checksum) never is.
    pub fn transient(self) -> bool {
        matches!(self, Failure::Lost | Failure::Connect)
    }
}

/// How the error of a file that never began starts (the copy stopped before its turn).
pub const NOT_BEGUN: &str = "not begun";

/// A copy the command line asks for that cannot be done (exit code 2, as for a bad option).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct Misuse(pub String);

/// A [`Misuse`] error saying `why`.
pub fn misuse(why: impl Into<String>) -> anyhow::Error {
    anyhow::Error::new(Misuse(why.into()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_message_this_client_writes_has_its_kind() {
        for (text, kind) in [
            ("cannot open a session with h:21: cannot connect to 127.0.0.1:2198: Connection refused (os error 111)", Failure::Connect),
            ("cannot open a session with nohost.invalid:21: cannot resolve nohost.invalid: failed to lookup address information: Name or service not known", Failure::Connect),
            ("cannot open a session with h:21: login as bob failed: h:21 said 530 Login incorrect", Failure::Login),
            ("RETR /nope: server said 550 No such file or directory", Failure::NotFound),
            ("nothing matches /*.zz", Failure::NotFound),
            ("cannot read /nonexist: No such file or directory (os error 2)", Failure::NotFound),
            ("remote directory /x does not exist (add --create-dirs to make it, or `fatpipe mkdir`)", Failure::NotFound),
            ("STOR /x: server said 553 Permission denied", Failure::Permission),
            ("cannot write /ro/x.fatpipe-part: Permission denied (os error 13)", Failure::Permission),
            ("writing the local copy of /x: No space left on device (os error 28)", Failure::LocalDiskFull),
            ("/big: this machine's disk is full: 5 MiB free in /mnt, the file needs 1 GiB", Failure::LocalDiskFull),
            ("STOR /x: server said 452 Insufficient storage space (os error 104)", Failure::ServerDiskFull),
            ("checksums differ: XXH3 /a at the source, /b at the destination", Failure::Checksum),
            ("/x: received 5 of 9 bytes; the copy is incomplete (run again with --resume)", Failure::Checksum),
            ("cannot open a session with h:21: h:21 refused TLS: the password in the URL would go in clear", Failure::Tls),
            ("TLS handshake with h:21 failed: invalid peer certificate: UnknownIssuer", Failure::Tls),
            ("RETR /x: server said 426 Data connection broken, transfer aborted (gave up after retrying for 5m, --retry-for)", Failure::Lost),
            ("receiving /x: MODE E transfer stalled: no data and no connection", Failure::Lost),
            ("receiving /x: read failed: the peer closed the data connection", Failure::Lost),
            ("not begun: interrupted", Failure::Interrupted),
            ("not begun: this machine's disk is full", Failure::LocalDiskFull),
            ("not begun: the server's disk is full", Failure::ServerDiskFull),
            ("interrupted", Failure::Interrupted),
            ("STOR /up: server said 452 Insufficient storage space (sending /up: transfer cancelled)", Failure::ServerDiskFull),
            ("RETR /x: server said 504 Command not implemented", Failure::Other),
            ("STOR /x: server said 451 Local error (os error 104)", Failure::Other),
            // The HTTPS client's.
            ("the server answered 401 Unauthorized token expired", Failure::Login),
            ("the server answered 403 Forbidden", Failure::Permission),
            ("the server answered 404 Not Found", Failure::NotFound),
            ("PUT https://h/x answered 507 Insufficient Storage", Failure::ServerDiskFull),
            ("the server answered 500 Internal Server Error", Failure::Other),
            ("cannot connect to 127.0.0.1:1: Connection refused (os error 111)", Failure::Connect),
            ("the body was cut: connection reset; 3145728 bytes kept in f.fatpipe-part (run again with --resume)", Failure::Lost),
        ] {
            assert_eq!(Failure::of(text), kind, "{text}");
        }
    }

    #[test]
    fn only_lost_connections_are_tried_again() {
        for lost in [
            "receiving /x: read failed: Connection reset by peer (os error 104)",
            "cannot open a session with h:2811: cannot connect to 10.0.0.1:2811: Connection refused (os error 111)",
            "no reply from 10.0.0.1:2811 within 1m (--timeout)",
            "10.0.0.1:2811 closed the control connection",
            "RETR /x: server said 426 Data connection broken, transfer aborted",
        ] {
            assert!(Failure::of(lost).transient(), "{lost}");
        }
        for refused in [
            "RETR /x: server said 550 No such file",
            "writing the local copy of /x: No space left on device (os error 28)",
            "STOR /x: server said 452 Insufficient storage space (os error 104)",
            "login as bob failed: 10.0.0.1:2811 said 530 Login incorrect",
            "checksums differ after the copy",
            "not begun: interrupted",
        ] {
            assert!(!Failure::of(refused).transient(), "{refused}");
        }
    }

    #[test]
    fn a_command_fails_with_its_files_kind_when_they_share_one() {
        use Failure::*;
        let code = |f: &[Failure]| Failure::common(f.iter().copied()).map_or(0, Failure::exit_code);
        assert_eq!(code(&[]), 0);
        assert_eq!(code(&[NotFound, NotFound]), 5);
        assert_eq!(code(&[NotFound, LocalDiskFull]), 1);
        assert_eq!(code(&[Interrupted]), 130);
        let misuse = misuse("several files cannot go to standard output");
        assert_eq!(Failure::of_error(&misuse.context("cp")), Usage);
    }
}
