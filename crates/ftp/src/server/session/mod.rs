//! One client's control connection: reads commands, keeps the session state (login, directory,
//! type, restart offset, data channel) and answers each command as RFC 959/2428/3659 prescribe;
//! GridFTP's partial transfers and checksums are gridftp.rs's.

mod channel;
mod control;
mod files;
mod gridftp;
mod hashing;
mod login;
mod security;
mod settings;

use control::Control;
use files::Listing;
use login::Account;
use security::Security;
use settings::Settings;

use super::data::DataSpec;
use super::transfer::{Event, Running};
use super::Shared;
use crate::inband::{self, Heard};
use fatpipe_net::admission::Token;
use fatpipe_net::mode_e::Kept;
use fatpipe_proto::command::DTOK_STREAM;
use fatpipe_proto::drs::DrsOpts;
use fatpipe_proto::gridftp::{ChecksumAlg, Parallelism};
use fatpipe_proto::line::Frame;
use fatpipe_proto::reply::quote_path;
use fatpipe_proto::{Command, Reply, TransferType, VPath};
use fatpipe_tune::{CongestionControl, Pacing, Tuning};
use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;
use tokio::net::TcpStream;

/// Whether the session goes on after a command.
#[derive(Debug, PartialEq, Eq)]
enum Flow {
    Continue,
    Close,
}

/// Commands queued while a transfer runs are answered after it; more than this is refused
/// (room for eight uploads sent ahead, each with its `SIZE`, `CKSM` and `MFMT`).
const MAX_DEFERRED: usize = 64;

const FEATURES: &[&str] = &[
    "DCREUSE",
    "DRS",
    DTOK_STREAM,
    "EPRT",
    "EPSV",
    "ERET",
    "ESTO",
    "MDTM",
    "MFMT",
    "MLST type*;size*;modify*;perm*;UNIX.mode*;",
    "PARALLEL",
    "PIPELINED STOR",
    "REST STREAM",
    "SBUF",
    "SETNETSTACK tcp,udp",
    "SIZE",
    "TVFS",
    "UDPREADY",
    "UTF8",
];

/// The `FEAT` lines: the fixed features, the checksum algorithms and `more` (FTPS's).
fn features(more: Vec<String>) -> Vec<String> {
    let mut all: Vec<String> = FEATURES.iter().map(|f| f.to_string()).collect();
    all.push(ChecksumAlg::feature());
    all.extend(more);
    all.sort();
    all
}

/// Most reply bytes held back to go out with the answers to commands that came with them.
const OUTBOX: usize = 64 << 10;

struct Session {
    shared: Arc<Shared>,
    id: u64,
    control: Control,
    /// Replies not written yet, on the wire.
    outbox: Vec<u8>,
    peer: SocketAddr,
    local: SocketAddr,
    /// When the control connection was accepted (the login timeout counts from it).
    connected: Instant,
    /// Who is logging in, or logged in.
    account: Account,
    cwd: VPath,
    rename_from: Option<VPath>,
    /// What the client set for the transfers to come.
    settings: Settings,
    /// FTPS.
    security: Security,
    data: DataSpec,
    epsv_all: bool,
    transfer: Option<Running>,
    deferred: VecDeque<Vec<u8>>,
    passive_hint: u64,
    /// The MODE E connections the last transfer left open, for the next in the same direction.
    kept: Option<Kept>,
    /// The file the last transfer moved, hashed beside it for the `CKSM` that follows.
    followed: Option<hashing::Followed>,
    /// The file the running transfer moves unhashed, its page cache let go of behind it.
    watched: Option<fatpipe_net::checksum::CacheWatch>,
    /// `DTOK`: the token every data connection of the session carries as its first bytes.
    token: Option<Token>,
    /// Rung when this connection, not logged in yet, must make room for a newer one.
    evict: Arc<tokio::sync::Notify>,
    /// Its place among the logged-in sessions, once it has one.
    slot: Option<super::SessionSlot>,
}

/// Runs a session on an accepted control connection until the client leaves or is sent away.
pub async fn run(
    shared: Arc<Shared>,
    stream: TcpStream,
    id: u64,
    evict: Arc<tokio::sync::Notify>,
) -> anyhow::Result<()> {
    let peer = stream.peer_addr()?;
    let local = stream.local_addr()?;
    stream.set_nodelay(true)?;
    let max_line = shared.config.max_line;
    let mut s = Session {
        shared: shared.clone(),
        id,
        control: Control::new(stream, max_line),
        outbox: Vec::new(),
        peer,
        local,
        connected: Instant::now(),
        account: Account::default(),
        cwd: VPath::root(),
        rename_from: None,
        settings: Settings::new(shared.config.tune.clone()),
        security: Security::clear(),
        data: DataSpec::None,
        epsv_all: false,
        transfer: None,
        deferred: VecDeque::new(),
        passive_hint: id.wrapping_mul(7919),
        kept: None,
        followed: None,
        watched: None,
        token: None,
        evict,
        slot: None,
    };
    tracing::info!(session = id, %peer, "connected");
    s.send(Reply::new(220, "fatpipe FTP server ready"));
    s.flush().await?;
    let result = s.serve().await;
    if let Some(t) = s.transfer.take() {
        t.abort().await;
    }
    tracing::info!(session = id, %peer, "disconnected");
    result
}

impl Session {
    fn send(&mut self, r: Reply) {
        self.outbox.extend(r.encode());
    }

    /// Sends the replies waiting, in one write (one segment where they fit: on a lossy path
    /// each segment is another chance to wait out a retransmission); a client that reads none
    /// of them for `--data-timeout` is gone (its session would otherwise hold a slot, blocked
    /// on the write, forever).
    async fn flush(&mut self) -> std::io::Result<()> {
        if self.outbox.is_empty() {
            return Ok(());
        }
        let wire = std::mem::take(&mut self.outbox);
        let patience = self.shared.config.data_timeout;
        tokio::time::timeout(patience, self.control.write_all(&wire))
            .await
            .map_err(|_| {
                std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    "the client read no reply for --data-timeout",
                )
            })?
    }

    /// Records a finished transfer of a file in the transfer log (`--transfer-log`).
    fn log_transfer(&self, t: &Running, code: u16, bytes: u64) {
        let (Some(log), Some(path)) = (&self.shared.transfer_log, &t.file) else {
            return;
        };
        let user = self.account.login.as_ref().map(|l| l.user.as_str());
        log.write(&crate::server::xferlog::Entry {
            when: time::OffsetDateTime::now_utc(),
            seconds: t.seconds(),
            host: self.peer.ip(),
            bytes,
            path,
            binary: self.settings.ttype == TransferType::Image,
            incoming: t.receiving,
            user: user.filter(|u| *u != "anonymous"),
            complete: code == 226,
        });
    }

    async fn serve(&mut self) -> anyhow::Result<()> {
        loop {
            let frame = if let Some(t) = self.transfer.as_mut() {
                tokio::select! {
                    event = t.next_event() => match event {
                    Event::Finished(reply, bytes) => {
                        self.transfer_ended(reply.code == 226);
                        if let Some(t) = self.transfer.take() {
                            self.kept = t
                                .take_kept()
                                .filter(|_| reply.code == 226)
                                .map(|channel| Kept { sending: !t.receiving, channel });
                            let tune = t.tune_summary().unwrap_or_default();
                            tracing::info!(
                                session = self.id, code = reply.code, bytes,
                                peak_buffer = tune.peak_local,
                                peer_buffer = tune.peak_peer.unwrap_or(0),
                                capped = tune.capped.join("; "), "{}", t.label
                            );
                            self.log_transfer(&t, reply.code, bytes);
                            // A fatpipe client learns this end's peak buffer whatever the
                            // tuning (modes that never announce one included).
                            if self.settings.drs_notify && tune.peak_local > 0 {
                                self.send(inband::buffer_announcement(tune.peak_local));
                            }
                        }
                        self.send(reply);
                        self.flush().await?;
                        continue;
                    }
                    Event::Markers(replies) => {
                        for r in replies {
                            self.send(r);
                        }
                        self.flush().await?;
                        continue;
                    }
                    Event::Announce(told) => {
                        let said = inband::server_announcement(&told, t.receiving);
                        if let Some(r) = said.filter(|_| self.settings.drs_notify) {
                            self.send(r);
                            self.flush().await?;
                        }
                        continue;
                    }
                    },
                    f = self.control.next_frame() => f?,
                }
            } else if let Some(line) = self.deferred.pop_front() {
                Some(Frame::Line(line))
            } else {
                let (wait, why) = self.patience();
                let waiting = self.slot.is_none();
                tokio::select! {
                    f = tokio::time::timeout(wait, self.control.next_frame()) => match f {
                        Ok(f) => f?,
                        Err(_) => {
                            self.send(Reply::new(421, why));
                            self.flush().await?;
                            return Ok(());
                        }
                    },
                    _ = self.evict.notified(), if waiting => {
                        tracing::info!(session = self.id, "closed for a newer connection: too many waiting to log in");
                        self.send(Reply::new(
                            421,
                            "Too many connections waiting to log in: this, the oldest, is closed",
                        ));
                        self.flush().await?;
                        return Ok(());
                    }
                }
            };
            let flow = match frame {
                None => return Ok(()),
                Some(Frame::TooLong) => {
                    self.send(Reply::new(
                        500,
                        format!(
                            "Command line too long (limit {} bytes)",
                            self.shared.config.max_line
                        ),
                    ));
                    Flow::Continue
                }
                Some(Frame::Line(line)) if self.transfer.is_some() => {
                    self.during_transfer(line).await
                }
                Some(Frame::Line(line)) => self.command(&line).await,
            };
            // Commands the client sent together are answered together (no command waits on
            // the client: a transfer's data connection is made beside the session), up to
            // [`OUTBOX`] bytes: a client that sends a thousand `STAT`s of a large directory in
            // one write and reads nothing must not make the server hold all the answers.
            if !self.control.has_pending() || flow == Flow::Close || self.outbox.len() > OUTBOX {
                self.flush().await?;
            }
            if flow == Flow::Close {
                return Ok(());
            }
        }
    }

    /// While a transfer runs only ABOR, STAT, NOOP and QUIT act at once; the rest waits its turn.
    async fn during_transfer(&mut self, line: Vec<u8>) -> Flow {
        match Command::parse(&line) {
            Ok(Command::Abor) => {
                if let Some(t) = self.transfer.take() {
                    let r = t.abort().await;
                    self.send(r);
                }
                self.send(Reply::new(226, "ABOR successful"));
            }
            Ok(Command::Stat(None)) => {
                let status = self
                    .transfer
                    .as_ref()
                    .map(Running::status)
                    .unwrap_or_default();
                self.send(Reply::new(213, status));
            }
            Ok(Command::Noop) => self.send(Reply::new(200, "NOOP ok")),
            // The client's buffer, or (an upload) that its senders pace themselves: the
            // transfer's laws hear it.
            Ok(c) if Heard::from_command(&c).is_some() => {
                if let (Some(t), Some(h)) = (self.transfer.as_ref(), Heard::from_command(&c)) {
                    let mine = t.heard(&h);
                    self.send(inband::server_answer(&h, mine));
                }
            }
            Ok(Command::Quit) => {
                if let Some(t) = self.transfer.take() {
                    let r = t.abort().await;
                    self.send(r);
                }
                self.send(Reply::new(221, "Goodbye"));
                return Flow::Close;
            }
            _ if self.deferred.len() < MAX_DEFERRED => self.deferred.push_back(line),
            _ => self.send(Reply::new(
                503,
                "Too many commands queued behind a transfer",
            )),
        }
        Flow::Continue
    }

    async fn command(&mut self, line: &[u8]) -> Flow {
        let cmd = match Command::parse(line) {
            Ok(c) => c,
            Err(e) => {
                self.send(Reply::new(e.code, e.message));
                return Flow::Continue;
            }
        };
        tracing::debug!(session = self.id, "{}", cmd.redacted());
        match self.handle(cmd).await {
            Ok(flow) => flow,
            Err(reply) => {
                self.send(reply);
                Flow::Continue
            }
        }
    }

    fn path(&self, arg: &str) -> VPath {
        self.cwd.join(arg)
    }

    async fn handle(&mut self, cmd: Command) -> Result<Flow, Reply> {
        let reply = match cmd {
            Command::User(name) => {
                self.login_allowed()?;
                self.user(name)
            }
            Command::Pass(password) => {
                self.login_allowed()?;
                return self.pass(&password).await;
            }
            Command::Auth(mechanism) => return self.auth(&mechanism).await,
            Command::Pbsz(_) => self.pbsz()?,
            Command::Prot(level) => self.prot(level)?,
            Command::Ccc => {
                return Err(Reply::new(
                    534,
                    "CCC refused: the control connection stays encrypted",
                ))
            }
            Command::Quit => {
                self.send(Reply::new(221, "Goodbye"));
                return Ok(Flow::Close);
            }
            Command::Noop => Reply::new(200, "NOOP ok"),
            Command::Syst => Reply::new(215, "UNIX Type: L8"),
            Command::Feat => Reply::multi(
                211,
                "Features:",
                features(self.security_features())
                    .iter()
                    .map(|f| format!(" {f}"))
                    .collect(),
                "End",
            ),
            Command::Opts(opt) => match opt.split_once(' ') {
                Some((name, value)) if name.eq_ignore_ascii_case("DRS") => self.drs_opts(value)?,
                Some((name, value)) if name.eq_ignore_ascii_case("DCREUSE") => {
                    self.settings.reuse = on_off(value)?;
                    self.kept = None;
                    Reply::new(200, format!("Data connection reuse {}", value.trim()))
                }
                Some((name, value)) if name.eq_ignore_ascii_case("RETR") => {
                    self.settings.parallelism =
                        Parallelism::parse_opts(value).map_err(|e| Reply::new(501, e))?;
                    Reply::new(
                        200,
                        format!("OPTS Command Successful. {}", self.settings.parallelism),
                    )
                }
                _ => opts(&opt)?,
            },
            Command::Sbuf(n) => {
                // In a drsFTP session SBUF concerns the latest transfer, which has ended; for
                // everyone else it is GridFTP's: the buffer size of the next data connections.
                if !self.settings.drs_notify {
                    self.settings.tune.tuning = Tuning::Static(n);
                }
                inband::server_answer(&Heard::Buffer(n), None)
            }
            Command::Help(_) => help(),
            Command::Dtok(token) => self.dtok(token)?,
            // Everything below needs a login.
            _ if self.account.login.is_none() => {
                return Err(Reply::new(530, "Please log in with USER and PASS"))
            }
            Command::Type(t) => {
                self.settings.ttype = t;
                match t {
                    TransferType::Ascii => Reply::new(200, "Switching to ASCII mode"),
                    TransferType::Image => Reply::new(200, "Switching to Binary mode"),
                }
            }
            Command::ModeStream => {
                self.settings.extended = false;
                self.kept = None;
                Reply::new(200, "Mode set to S")
            }
            Command::ModeExtended => {
                self.settings.extended = true;
                Reply::new(200, "Mode set to E")
            }
            Command::StruFile => Reply::new(200, "Structure set to F"),
            Command::Pwd => Reply::new(
                257,
                format!(
                    "{} is the current directory",
                    quote_path(&self.cwd.to_string())
                ),
            ),
            Command::Cwd(arg) => self.cwd_to(self.path(&arg))?,
            Command::Cdup => self.cwd_to(self.cwd.parent())?,
            Command::Size(arg) => self.size(&arg)?,
            Command::Mdtm(arg) => self.mdtm(&arg)?,
            Command::Mfmt { modified, path } => self.mfmt(modified, &path)?,
            Command::RestRanges(r) => {
                if !self.settings.extended {
                    return Err(Reply::new(501, "REST with ranges needs MODE E"));
                }
                let text = format!("Restarting with ranges {r} held. Send RETR");
                self.settings.rest_ranges = Some(r);
                Reply::new(350, text)
            }
            Command::Cksm(c) => return self.cksm(c).await,
            Command::Eret {
                offset,
                length,
                path,
            } => return self.eret(offset, length, &path),
            Command::Esto { offset, path } => return self.esto(offset, &path),
            Command::Rest(n) => {
                self.settings.rest = n;
                Reply::new(350, format!("Restarting at {n}. Send STOR or RETR"))
            }
            Command::Allo(n) => {
                // Kept as the bound of the next upload's block offsets.
                self.settings.allo = Some(n);
                Reply::new(
                    202,
                    format!("No storage allocation necessary; the next upload may write {n} bytes"),
                )
            }
            Command::Mlst(arg) => self.mlst(arg.as_deref())?,
            Command::Stat(None) => self.status(),
            Command::Stat(Some(arg)) => self.stat_of(&arg)?,
            Command::Dele(arg) => self.dele(&arg)?,
            Command::Mkd(arg) => self.mkd(&arg)?,
            Command::Rmd(arg) => self.rmd(&arg)?,
            Command::Rnfr(arg) => self.rnfr(&arg)?,
            Command::Rnto(arg) => self.rnto(&arg)?,
            Command::Pasv => self.pasv()?,
            Command::Epsv(arg) => self.epsv(arg)?,
            Command::Port(a) => self.active(SocketAddr::V4(a))?,
            Command::Eprt(a) => self.active(a)?,
            Command::Abor => {
                self.data = DataSpec::None;
                self.kept = None;
                Reply::new(226, "No transfer to abort")
            }
            Command::Site(arg) => self.site(&arg)?,
            Command::Retr(arg) => return self.retr(&arg),
            Command::Stor(arg) => return self.store(&arg, false),
            Command::Appe(arg) => return self.store(&arg, true),
            Command::List(arg) => return self.send_listing(arg, Listing::Long),
            Command::Nlst(arg) => return self.send_listing(arg, Listing::Names),
            Command::Mlsd(arg) => return self.send_listing(arg, Listing::Machine),
        };
        self.send(reply);
        Ok(Flow::Continue)
    }

    fn drs_opts(&mut self, value: &str) -> Result<Reply, Reply> {
        let o = DrsOpts::parse(value).map_err(|e| Reply::new(501, e))?;
        let tuning = o
            .tuning
            .as_deref()
            .map(Tuning::parse)
            .transpose()
            .map_err(|e| Reply::new(501, e))?;
        let pacing = o
            .pacing
            .as_deref()
            .map(Pacing::parse)
            .transpose()
            .map_err(|e| Reply::new(501, e))?;
        let cc =
            o.cc.as_deref()
                .map(str::parse::<CongestionControl>)
                .transpose()
                .map_err(|e| Reply::new(501, e))?;
        if let Some(cc) = &cc {
            fatpipe_net::congestion::check(cc).map_err(|e| Reply::new(501, e))?;
        }
        let hash = o.hash.as_deref().map(hashing::parse).transpose()?;
        if let Some(n) = o.notify {
            self.settings.drs_notify = n;
        }
        if let Some(t) = tuning {
            self.settings.tune.tuning = t;
        }
        if let Some(p) = pacing {
            self.settings.tune.pacing = Some(p);
        }
        if let Some(cc) = cc {
            self.settings.tune.cc = Some(cc);
        }
        if let Some(h) = hash {
            self.settings.hash_beside = h;
        }
        let state = DrsOpts {
            notify: Some(self.settings.drs_notify),
            tuning: Some(self.settings.tune.tuning.to_string()),
            pacing: self.settings.tune.pacing.map(|p| p.to_string()),
            cc: self
                .settings
                .tune
                .cc
                .as_ref()
                .map(|c| c.user_name().to_string()),
            paced: None,
            // Said only when changed from the default: clients that never set it see the
            // answer they always saw.
            hash: (!self.settings.hash_beside).then(|| "off".into()),
        };
        Ok(Reply::new(200, format!("OPTS {state}")))
    }
}

fn opts(opt: &str) -> Result<Reply, Reply> {
    let mut words = opt.splitn(2, ' ');
    let name = words.next().unwrap_or("").to_ascii_uppercase();
    let value = words.next().unwrap_or("").trim();
    match name.as_str() {
        "UTF8" | "UTF-8" if value.eq_ignore_ascii_case("ON") || value.is_empty() => {
            Ok(Reply::new(200, "Always in UTF8 mode"))
        }
        "MLST" => Ok(Reply::new(200, format!("MLST OPTS {value}"))),
        _ => Err(Reply::new(501, format!("Option not understood: {name}"))),
    }
}

/// `ON` or `OFF` (any case), as `OPTS DCREUSE` takes.
fn on_off(value: &str) -> Result<bool, Reply> {
    match value.trim().to_ascii_uppercase().as_str() {
        "ON" => Ok(true),
        "OFF" => Ok(false),
        v => Err(Reply::new(501, format!("Expected ON or OFF, not {v:?}"))),
    }
}

fn help() -> Reply {
    const VERBS: &str = "AUTH PBSZ PROT CCC USER PASS QUIT NOOP SYST FEAT OPTS TYPE MODE STRU PWD CWD CDUP LIST NLST MLST MLSD SIZE MDTM MFMT REST RETR STOR APPE DELE MKD RMD RNFR RNTO PASV EPSV PORT EPRT ABOR STAT HELP ALLO SBUF CKSM ERET ESTO SITE";
    Reply::multi(
        214,
        "The following commands are recognized:",
        vec![format!(" {VERBS}")],
        "Help OK",
    )
}

#[cfg(test)]
mod tests;
