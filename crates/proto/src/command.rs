//! FTP commands: parsing a client's line into a [`Command`], and formatting one to send.
//!
//! Parsing is total: every byte string yields a command or a [`CommandError`] carrying the reply
//! code the server owes (500 unknown, 501 bad argument, 504 unsupported parameter).

use crate::addr;
use crate::gridftp::Cksm;
use crate::listing::{format_timeval, parse_timeval};
use crate::ranges::RangeSet;
use std::fmt;
use std::net::{SocketAddr, SocketAddrV4};

/// The `FEAT` line of a server that takes a plain MODE S data connection only once it shows
/// the session's `DTOK` token (a client may then hedge its connect against a lost handshake:
/// the spare it closes unused is not taken for the transfer).
pub const DTOK_STREAM: &str = "DTOK STREAM";

/// The representation type of a transfer (`TYPE`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TransferType {
    /// `TYPE A`: text, CRLF on the wire.
    Ascii,
    /// `TYPE I` (or `L 8`): bytes exactly as stored.
    Image,
}

/// A data-channel protection level (`PROT`, RFC 2228/4217).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProtLevel {
    /// `C`: data in clear.
    Clear,
    /// `S`: integrity only (not offered by TLS).
    Safe,
    /// `E`: confidentiality only (not offered by TLS).
    Confidential,
    /// `P`: TLS on every data connection.
    Private,
}

impl ProtLevel {
    /// The level's letter on the wire.
    pub fn letter(self) -> char {
        match self {
            ProtLevel::Clear => 'C',
            ProtLevel::Safe => 'S',
            ProtLevel::Confidential => 'E',
            ProtLevel::Private => 'P',
        }
    }
}

/// The argument of `EPSV`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EpsvArg {
    /// `EPSV ALL`: the client will use only EPSV from now on.
    All,
    /// `EPSV <n>`: network protocol 1 (IPv4) or 2 (IPv6).
    Proto(u8),
}

/// One client command with its parsed argument.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    /// USER: the account name.
    User(String),
    /// PASS: the password.
    Pass(String),
    /// QUIT: end the session.
    Quit,
    /// NOOP: do nothing (keep-alive).
    Noop,
    /// SYST: the system type.
    Syst,
    /// FEAT: list extensions (RFC 2389).
    Feat,
    /// OPTS: set an option of a command (RFC 2389).
    Opts(String),
    /// TYPE: the representation type.
    Type(TransferType),
    /// `MODE S`: the file as one byte stream, closed at its end.
    ModeStream,
    /// `MODE E` (GridFTP): extended blocks over one or more data connections.
    ModeExtended,
    /// `STRU F`; other structures are answered 504 at parse time.
    StruFile,
    /// PWD: print the working directory.
    Pwd,
    /// CWD: change the working directory.
    Cwd(String),
    /// CDUP: go to the parent directory.
    Cdup,
    /// LIST: a human-readable listing over the data connection.
    List(Option<String>),
    /// NLST: names only over the data connection.
    Nlst(Option<String>),
    /// MLST: machine-readable facts of one object, on the control connection (RFC 3659).
    Mlst(Option<String>),
    /// MLSD: machine-readable listing over the data connection (RFC 3659).
    Mlsd(Option<String>),
    /// SIZE: a file's size (RFC 3659).
    Size(String),
    /// MDTM: a file's modification time (RFC 3659).
    Mdtm(String),
    /// `MFMT <time> <path>` (draft-somers-ftp-mfxx): set a file's modification time, seconds
    /// since the Unix epoch (UTC; `YYYYMMDDHHMMSS` on the wire), so a copy keeps it.
    Mfmt {
        /// The new modification time.
        modified: i64,
        /// The file.
        path: String,
    },
    /// REST: restart the next transfer at a byte offset (STREAM mode, RFC 3659).
    Rest(u64),
    /// REST with ranges (GridFTP MODE E): the byte ranges the receiver already holds.
    RestRanges(RangeSet),
    /// CKSM (GridFTP): a checksum of part of a file.
    Cksm(Cksm),
    /// `ERET P <offset> <length> <path>` (GridFTP partial retrieve): that part of the file, in
    /// MODE E blocks whose offsets count from `offset`.
    Eret {
        /// First byte of the file to send.
        offset: u64,
        /// Bytes to send (fewer if the file ends first).
        length: u64,
        /// The file.
        path: String,
    },
    /// `ESTO A <offset> <path>` (GridFTP adjusted store): MODE E blocks written at `offset`
    /// plus their own offsets, into the file as it is (not truncated).
    Esto {
        /// Added to every block's offset.
        offset: u64,
        /// The file.
        path: String,
    },
    /// RETR: send a file to the client.
    Retr(String),
    /// STOR: store a file from the client.
    Stor(String),
    /// APPE: append to a file.
    Appe(String),
    /// DELE: delete a file.
    Dele(String),
    /// MKD: make a directory.
    Mkd(String),
    /// RMD: remove a directory.
    Rmd(String),
    /// RNFR: the object to rename.
    Rnfr(String),
    /// RNTO: its new name.
    Rnto(String),
    /// PASV: the server listens for the data connection (IPv4).
    Pasv,
    /// EPSV: extended passive mode (RFC 2428).
    Epsv(Option<EpsvArg>),
    /// PORT: the server connects to this address (IPv4).
    Port(SocketAddrV4),
    /// EPRT: the server connects to this address (RFC 2428).
    Eprt(SocketAddr),
    /// ABOR: abort the running transfer.
    Abor,
    /// STAT: session status, transfer progress, or a listing on the control connection.
    Stat(Option<String>),
    /// HELP: the commands understood.
    Help(Option<String>),
    /// ALLO: announce a size to be stored.
    Allo(u64),
    /// SBUF (GridFTP; drsFTP during a transfer): the TCP buffer size to use.
    Sbuf(u64),
    /// AUTH: start a security mechanism on the control connection (`TLS`; RFC 2228/4217).
    Auth(String),
    /// PBSZ: the protection buffer size (0 under TLS).
    Pbsz(u64),
    /// PROT: the data connections' protection level.
    Prot(ProtLevel),
    /// CCC: go back to a clear control connection.
    Ccc,
    /// SITE: a site-specific command (`SITE SETNETSTACK udp`), its words as sent.
    Site(String),
    /// DTOK (fatpipe): the session's data token, 32 hexadecimal digits (`None`: `DTOK NONE`,
    /// no token). Each later data connection carries it as its first bytes, so that a
    /// connection is taken only from whoever knows it.
    Dtok(Option<String>),
}

/// Why a line is not a valid command, with the reply code it earns.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{code} {message}")]
pub struct CommandError {
    /// The FTP reply code to answer with.
    pub code: u16,
    /// Human-readable explanation for the reply text.
    pub message: String,
}

impl CommandError {
    fn unknown(verb: &str) -> Self {
        CommandError {
            code: 500,
            message: format!("Unknown command '{}'", printable(verb)),
        }
    }
    fn syntax(what: &str) -> Self {
        CommandError {
            code: 501,
            message: what.to_string(),
        }
    }
    fn unsupported(what: &str) -> Self {
        CommandError {
            code: 504,
            message: what.to_string(),
        }
    }
}

/// Keeps a client-provided token safe to echo back in a reply (no control characters, bounded length).
fn printable(s: &str) -> String {
    s.chars().filter(|c| !c.is_control()).take(32).collect()
}

impl Command {
    /// Parses one command line (line ending already removed).
    pub fn parse(line: &[u8]) -> Result<Command, CommandError> {
        let line = String::from_utf8_lossy(line);
        let (verb, arg) = match line.find(' ') {
            Some(i) => (&line[..i], Some(&line[i + 1..])),
            None => (&line[..], None),
        };
        let verb = verb.to_ascii_uppercase();
        let arg = arg.filter(|a| !a.is_empty());
        if arg.is_some_and(|a| a.contains('\0')) {
            return Err(CommandError::syntax("NUL byte in argument"));
        }
        // A line break inside a line is never a second command (see line.rs), nor part of a name.
        if line.contains(['\r', '\n']) {
            return Err(CommandError::syntax("Line break inside a command"));
        }
        let need = |arg: Option<&str>| -> Result<String, CommandError> {
            arg.map(str::to_string)
                .ok_or_else(|| CommandError::syntax(&format!("{verb} needs an argument")))
        };
        let none = |cmd: Command| -> Result<Command, CommandError> {
            match arg {
                None => Ok(cmd),
                Some(_) => Err(CommandError::syntax(&format!("{verb} takes no argument"))),
            }
        };
        let opt = arg.map(str::to_string);
        match verb.as_str() {
            "USER" => Ok(Command::User(need(arg)?)),
            // An empty password is legal (some anonymous clients send one).
            "PASS" => Ok(Command::Pass(arg.unwrap_or("").to_string())),
            "QUIT" => none(Command::Quit),
            "NOOP" => none(Command::Noop),
            "SYST" => none(Command::Syst),
            "FEAT" => none(Command::Feat),
            "OPTS" => Ok(Command::Opts(need(arg)?)),
            "TYPE" => parse_type(&need(arg)?).map(Command::Type),
            "MODE" => match need(arg)?.to_ascii_uppercase().as_str() {
                "S" => Ok(Command::ModeStream),
                "E" => Ok(Command::ModeExtended),
                "B" | "C" => Err(CommandError::unsupported(
                    "Only MODE S and MODE E are supported",
                )),
                _ => Err(CommandError::syntax("Unknown transfer mode")),
            },
            "STRU" => match need(arg)?.to_ascii_uppercase().as_str() {
                "F" => Ok(Command::StruFile),
                "R" | "P" => Err(CommandError::unsupported("Only STRU F is supported")),
                _ => Err(CommandError::syntax("Unknown file structure")),
            },
            "PWD" | "XPWD" => none(Command::Pwd),
            "CWD" | "XCWD" => Ok(Command::Cwd(need(arg)?)),
            "CDUP" | "XCUP" => none(Command::Cdup),
            "LIST" => Ok(Command::List(strip_list_options(arg))),
            "NLST" => Ok(Command::Nlst(strip_list_options(arg))),
            "MLST" => Ok(Command::Mlst(opt)),
            "MLSD" => Ok(Command::Mlsd(opt)),
            "SIZE" => Ok(Command::Size(need(arg)?)),
            "MDTM" => Ok(Command::Mdtm(need(arg)?)),
            "MFMT" => {
                let a = need(arg)?;
                match a.split_once(' ') {
                    Some((t, p)) if !p.is_empty() => match parse_timeval(t) {
                        Some(modified) if t.len() == 14 => Ok(Command::Mfmt {
                            modified,
                            path: p.to_string(),
                        }),
                        _ => Err(CommandError::syntax("MFMT needs a time YYYYMMDDHHMMSS")),
                    },
                    _ => Err(CommandError::syntax("MFMT needs <YYYYMMDDHHMMSS> <path>")),
                }
            }
            "REST" => {
                let a = need(arg)?;
                match a.trim().parse() {
                    Ok(n) => Ok(Command::Rest(n)),
                    Err(_) => RangeSet::parse(&a)
                        .filter(|r| !r.is_empty())
                        .map(Command::RestRanges)
                        .ok_or_else(|| {
                            CommandError::syntax("REST needs a byte offset or ranges a-b,c-d")
                        }),
                }
            }
            "ERET" => {
                let a = need(arg)?;
                let mut w = a.splitn(4, ' ');
                match (w.next(), w.next(), w.next(), w.next()) {
                    (Some(m), Some(o), Some(l), Some(p)) if m.eq_ignore_ascii_case("P") => {
                        match (o.parse(), l.parse()) {
                            (Ok(offset), Ok(length)) if !p.is_empty() => Ok(Command::Eret {
                                offset,
                                length,
                                path: p.to_string(),
                            }),
                            _ => Err(CommandError::syntax(
                                "ERET P needs <offset> <length> <path>",
                            )),
                        }
                    }
                    (Some(m), ..) if !m.eq_ignore_ascii_case("P") => Err(
                        CommandError::unsupported("ERET: only module P (partial) is supported"),
                    ),
                    _ => Err(CommandError::syntax(
                        "ERET P needs <offset> <length> <path>",
                    )),
                }
            }
            "ESTO" => {
                let a = need(arg)?;
                let mut w = a.splitn(3, ' ');
                match (w.next(), w.next(), w.next()) {
                    (Some(m), Some(o), Some(p)) if m.eq_ignore_ascii_case("A") => match o.parse() {
                        Ok(offset) if !p.is_empty() => Ok(Command::Esto {
                            offset,
                            path: p.to_string(),
                        }),
                        _ => Err(CommandError::syntax("ESTO A needs <offset> <path>")),
                    },
                    (Some(m), ..) if !m.eq_ignore_ascii_case("A") => Err(
                        CommandError::unsupported("ESTO: only module A (adjusted) is supported"),
                    ),
                    _ => Err(CommandError::syntax("ESTO A needs <offset> <path>")),
                }
            }
            "CKSM" => Cksm::parse(&need(arg)?)
                .map(Command::Cksm)
                .map_err(|e| CommandError::syntax(&e)),
            "RETR" => Ok(Command::Retr(need(arg)?)),
            "STOR" => Ok(Command::Stor(need(arg)?)),
            "APPE" => Ok(Command::Appe(need(arg)?)),
            "DELE" => Ok(Command::Dele(need(arg)?)),
            "MKD" | "XMKD" => Ok(Command::Mkd(need(arg)?)),
            "RMD" | "XRMD" => Ok(Command::Rmd(need(arg)?)),
            "RNFR" => Ok(Command::Rnfr(need(arg)?)),
            "RNTO" => Ok(Command::Rnto(need(arg)?)),
            "PASV" => none(Command::Pasv),
            "EPSV" => match arg.map(str::trim) {
                None => Ok(Command::Epsv(None)),
                Some(a) if a.eq_ignore_ascii_case("ALL") => Ok(Command::Epsv(Some(EpsvArg::All))),
                Some("1") => Ok(Command::Epsv(Some(EpsvArg::Proto(1)))),
                Some("2") => Ok(Command::Epsv(Some(EpsvArg::Proto(2)))),
                Some(_) => Err(CommandError {
                    code: 522,
                    message: "Network protocol not supported, use (1,2)".into(),
                }),
            },
            "PORT" => addr::parse_host_port(&need(arg)?)
                .map(Command::Port)
                .ok_or_else(|| CommandError::syntax("PORT needs h1,h2,h3,h4,p1,p2")),
            "EPRT" => {
                let a = need(arg)?;
                match addr::parse_eprt(&a) {
                    Some(sa) => Ok(Command::Eprt(sa)),
                    None if addr::eprt_protocol(&a).is_some_and(|p| p != "1" && p != "2") => {
                        Err(CommandError {
                            code: 522,
                            message: "Network protocol not supported, use (1,2)".into(),
                        })
                    }
                    None => Err(CommandError::syntax("EPRT needs |proto|address|port|")),
                }
            }
            "ABOR" => none(Command::Abor),
            "STAT" => Ok(Command::Stat(opt)),
            "HELP" => Ok(Command::Help(opt)),
            "ALLO" => need(arg)?
                .split_whitespace()
                .next()
                .and_then(|n| n.parse().ok())
                .map(Command::Allo)
                .ok_or_else(|| CommandError::syntax("ALLO needs a byte count")),
            "SBUF" => need(arg)?
                .trim()
                .parse()
                .ok()
                .filter(|&n| n > 0)
                .map(Command::Sbuf)
                .ok_or_else(|| CommandError::syntax("SBUF needs a buffer size in bytes")),
            "SITE" => Ok(Command::Site(need(arg)?)),
            "DTOK" => match need(arg)?.trim() {
                none if none.eq_ignore_ascii_case("NONE") => Ok(Command::Dtok(None)),
                hex if hex.len() == 32 && hex.bytes().all(|b| b.is_ascii_hexdigit()) => {
                    Ok(Command::Dtok(Some(hex.to_ascii_lowercase())))
                }
                _ => Err(CommandError::syntax(
                    "DTOK needs 32 hexadecimal digits, or NONE",
                )),
            },
            "AUTH" => Ok(Command::Auth(need(arg)?.trim().to_string())),
            "PBSZ" => need(arg)?
                .trim()
                .parse()
                .map(Command::Pbsz)
                .map_err(|_| CommandError::syntax("PBSZ needs a decimal size")),
            "PROT" => match need(arg)?.trim().to_ascii_uppercase().as_str() {
                "C" => Ok(Command::Prot(ProtLevel::Clear)),
                "S" => Ok(Command::Prot(ProtLevel::Safe)),
                "E" => Ok(Command::Prot(ProtLevel::Confidential)),
                "P" => Ok(Command::Prot(ProtLevel::Private)),
                _ => Err(CommandError::unsupported("PROT takes C, S, E or P")),
            },
            "CCC" => none(Command::Ccc),
            _ => Err(CommandError::unknown(&verb)),
        }
    }

    /// The command as logs and messages may show it: a secret's argument masked.
    pub fn redacted(&self) -> String {
        match self {
            Command::Pass(_) => "PASS ****".into(),
            Command::Dtok(Some(_)) => "DTOK ****".into(),
            c => c.to_string(),
        }
    }
}

fn parse_type(arg: &str) -> Result<TransferType, CommandError> {
    let mut parts = arg.split_whitespace();
    let code = parts.next().unwrap_or("").to_ascii_uppercase();
    let param = parts.next().map(str::to_ascii_uppercase);
    match (code.as_str(), param.as_deref(), parts.next()) {
        ("A", None | Some("N"), None) => Ok(TransferType::Ascii),
        ("I", None, None) | ("L", Some("8"), None) => Ok(TransferType::Image),
        ("A" | "E", Some("T" | "C"), None) | ("E", _, None) | ("L", Some(_), None) => Err(
            CommandError::unsupported("Only TYPE A (non-print) and TYPE I are supported"),
        ),
        _ => Err(CommandError::syntax("Unknown TYPE")),
    }
}

/// `LIST -la dir` is common: option words before the path are `ls` flags, not names.
fn strip_list_options(arg: Option<&str>) -> Option<String> {
    let mut rest = arg?;
    while let Some(stripped) = rest.strip_prefix('-') {
        rest = stripped
            .split_once(' ')
            .map(|(_, r)| r.trim_start())
            .unwrap_or("");
    }
    (!rest.is_empty()).then(|| rest.to_string())
}

impl Command {
    /// The command as it goes on the wire, CRLF included; an argument the control channel
    /// cannot carry (a line break or NUL, which would end the command or start another) is an
    /// error, never sent.
    pub fn to_wire(&self) -> Result<Vec<u8>, CommandError> {
        let text = self.to_string();
        if text.contains(['\r', '\n', '\0']) {
            return Err(CommandError::syntax(&format!(
                "{} cannot be sent over FTP: its argument holds a line break or NUL byte",
                text.split(' ').next().unwrap_or("")
            )));
        }
        Ok(format!("{text}\r\n").into_bytes())
    }
}

impl fmt::Display for Command {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let with = |f: &mut fmt::Formatter<'_>, verb: &str, arg: &Option<String>| match arg {
            Some(a) => write!(f, "{verb} {a}"),
            None => f.write_str(verb),
        };
        match self {
            Command::User(a) => write!(f, "USER {a}"),
            Command::Pass(a) => write!(f, "PASS {a}"),
            Command::Quit => f.write_str("QUIT"),
            Command::Noop => f.write_str("NOOP"),
            Command::Syst => f.write_str("SYST"),
            Command::Feat => f.write_str("FEAT"),
            Command::Opts(a) => write!(f, "OPTS {a}"),
            Command::Type(TransferType::Ascii) => f.write_str("TYPE A"),
            Command::Type(TransferType::Image) => f.write_str("TYPE I"),
            Command::ModeStream => f.write_str("MODE S"),
            Command::ModeExtended => f.write_str("MODE E"),
            Command::StruFile => f.write_str("STRU F"),
            Command::Pwd => f.write_str("PWD"),
            Command::Cwd(a) => write!(f, "CWD {a}"),
            Command::Cdup => f.write_str("CDUP"),
            Command::List(a) => with(f, "LIST", a),
            Command::Nlst(a) => with(f, "NLST", a),
            Command::Mlst(a) => with(f, "MLST", a),
            Command::Mlsd(a) => with(f, "MLSD", a),
            Command::Size(a) => write!(f, "SIZE {a}"),
            Command::Mdtm(a) => write!(f, "MDTM {a}"),
            Command::Mfmt { modified, path } => {
                write!(f, "MFMT {} {path}", format_timeval(*modified))
            }
            Command::Rest(n) => write!(f, "REST {n}"),
            Command::RestRanges(r) => write!(f, "REST {r}"),
            Command::Cksm(c) => write!(f, "CKSM {c}"),
            Command::Eret {
                offset,
                length,
                path,
            } => write!(f, "ERET P {offset} {length} {path}"),
            Command::Esto { offset, path } => write!(f, "ESTO A {offset} {path}"),
            Command::Retr(a) => write!(f, "RETR {a}"),
            Command::Stor(a) => write!(f, "STOR {a}"),
            Command::Appe(a) => write!(f, "APPE {a}"),
            Command::Dele(a) => write!(f, "DELE {a}"),
            Command::Mkd(a) => write!(f, "MKD {a}"),
            Command::Rmd(a) => write!(f, "RMD {a}"),
            Command::Rnfr(a) => write!(f, "RNFR {a}"),
            Command::Rnto(a) => write!(f, "RNTO {a}"),
            Command::Pasv => f.write_str("PASV"),
            Command::Epsv(None) => f.write_str("EPSV"),
            Command::Epsv(Some(EpsvArg::All)) => f.write_str("EPSV ALL"),
            Command::Epsv(Some(EpsvArg::Proto(p))) => write!(f, "EPSV {p}"),
            Command::Port(a) => write!(f, "PORT {}", addr::format_host_port(*a)),
            Command::Eprt(a) => write!(f, "EPRT {}", addr::format_eprt(*a)),
            Command::Abor => f.write_str("ABOR"),
            Command::Stat(a) => with(f, "STAT", a),
            Command::Help(a) => with(f, "HELP", a),
            Command::Allo(n) => write!(f, "ALLO {n}"),
            Command::Sbuf(n) => write!(f, "SBUF {n}"),
            Command::Site(a) => write!(f, "SITE {a}"),
            Command::Dtok(Some(t)) => write!(f, "DTOK {t}"),
            Command::Dtok(None) => f.write_str("DTOK NONE"),
            Command::Auth(a) => write!(f, "AUTH {a}"),
            Command::Pbsz(n) => write!(f, "PBSZ {n}"),
            Command::Prot(l) => write!(f, "PROT {}", l.letter()),
            Command::Ccc => f.write_str("CCC"),
        }
    }
}

#[cfg(test)]
mod tests;
