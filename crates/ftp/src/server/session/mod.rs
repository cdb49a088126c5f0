//! One client's control connection: reads commands, keeps the session state (login, directory,
//! type, restart offset, data channel) and answers each command as RFC 959/2428/3659 prescribe;
//! GridFTP's partial transfers and checksums are gridftp.rs's.

mod gridftp;

use super::auth::{Anonymous, Login};
use super::data::{self, same_host, DataSpec};
use super::sandbox::{self, FsError, WriteAt};
use super::transfer::{BlockLimit, Endpoints, Event, Job, Running};
use super::Shared;
use fatpipe_net::mode_e::Kept;
use fatpipe_net::partial;
use fatpipe_net::tuner::before_connect;
use fatpipe_net::TunerConfig;
use fatpipe_proto::command::EpsvArg;
use fatpipe_proto::drs::{sbuf_text, DrsOpts};
use fatpipe_proto::gridftp::{ChecksumAlg, Parallelism};
use fatpipe_proto::line::{Frame, LineFramer};
use fatpipe_proto::listing::{format_list_line, format_mlsx, format_timeval};
use fatpipe_proto::ranges::RangeSet;
use fatpipe_proto::reply::quote_path;
use fatpipe_proto::{addr, Command, Reply, TransferType, VPath};
use fatpipe_tune::Tuning;
use std::collections::VecDeque;
use std::io::{ErrorKind, Seek, SeekFrom};
use std::net::SocketAddr;
use std::os::fd::AsFd;
use std::sync::Arc;
use std::time::Instant;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::TcpStream;

/// Whether the session goes on after a command.
#[derive(Debug, PartialEq, Eq)]
enum Flow {
    Continue,
    Close,
}

/// Commands queued while a transfer runs are answered after it; more than this is refused.
const MAX_DEFERRED: usize = 32;

const FEATURES: &[&str] = &[
    "DCREUSE",
    "DRS",
    "EPRT",
    "EPSV",
    "ERET",
    "ESTO",
    "MDTM",
    "MLST type*;size*;modify*;perm*;UNIX.mode*;",
    "PARALLEL",
    "REST STREAM",
    "SBUF",
    "SIZE",
    "TVFS",
    "UTF8",
];

/// The `FEAT` lines: the fixed features and the checksum algorithms.
fn features() -> Vec<String> {
    let mut all: Vec<String> = FEATURES.iter().map(|f| f.to_string()).collect();
    all.push(ChecksumAlg::feature());
    all.sort();
    all
}

/// The reading side of the control connection, framed into lines.
struct ControlIn {
    reader: OwnedReadHalf,
    framer: LineFramer,
    pending: VecDeque<Frame>,
    buf: Vec<u8>,
}

impl ControlIn {
    /// The next frame, or `None` at end of stream. Cancel-safe: the only await is a socket read.
    async fn next_frame(&mut self) -> std::io::Result<Option<Frame>> {
        loop {
            if let Some(f) = self.pending.pop_front() {
                return Ok(Some(f));
            }
            let n = self.reader.read(&mut self.buf).await?;
            if n == 0 {
                return Ok(None);
            }
            self.pending.extend(self.framer.push(&self.buf[..n]));
        }
    }
}

struct Session {
    shared: Arc<Shared>,
    id: u64,
    input: ControlIn,
    writer: OwnedWriteHalf,
    outbox: Vec<Reply>,
    peer: SocketAddr,
    local: SocketAddr,
    /// When the control connection was accepted (the login timeout counts from it).
    connected: Instant,
    user: Option<String>,
    login: Option<Login>,
    failures: u32,
    cwd: VPath,
    ttype: TransferType,
    rest: u64,
    rename_from: Option<VPath>,
    data: DataSpec,
    epsv_all: bool,
    transfer: Option<Running>,
    deferred: VecDeque<Vec<u8>>,
    passive_hint: u64,
    tuning: Tuning,
    drs_notify: bool,
    /// `MODE E` in effect.
    extended: bool,
    /// `OPTS RETR Parallelism=…` for MODE E sends.
    parallelism: Parallelism,
    /// `REST` ranges for the next MODE E `RETR`.
    rest_ranges: Option<RangeSet>,
    /// The client reuses MODE E data connections (`OPTS DCREUSE ON`): sends leave them open.
    reuse: bool,
    /// The MODE E connections the last transfer left open, for the next in the same direction.
    kept: Option<Kept>,
    /// `ALLO`: the size the next upload announced.
    allo: Option<u64>,
}

/// Runs a session on an accepted control connection until the client leaves or is sent away.
pub async fn run(shared: Arc<Shared>, stream: TcpStream, id: u64) -> anyhow::Result<()> {
    let peer = stream.peer_addr()?;
    let local = stream.local_addr()?;
    stream.set_nodelay(true)?;
    let (reader, writer) = stream.into_split();
    let max_line = shared.config.max_line;
    let mut s = Session {
        shared: shared.clone(),
        id,
        input: ControlIn {
            reader,
            framer: LineFramer::new(max_line),
            pending: VecDeque::new(),
            buf: vec![0; 8192],
        },
        writer,
        outbox: Vec::new(),
        peer,
        local,
        connected: Instant::now(),
        user: None,
        login: None,
        failures: 0,
        cwd: VPath::root(),
        ttype: TransferType::Ascii,
        rest: 0,
        rename_from: None,
        data: DataSpec::None,
        epsv_all: false,
        transfer: None,
        deferred: VecDeque::new(),
        passive_hint: id.wrapping_mul(7919),
        tuning: shared.config.tuning,
        drs_notify: false,
        extended: false,
        parallelism: Parallelism::fixed(1),
        rest_ranges: None,
        reuse: false,
        kept: None,
        allo: None,
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
        self.outbox.push(r);
    }

    async fn flush(&mut self) -> std::io::Result<()> {
        for r in self.outbox.drain(..) {
            self.writer.write_all(&r.encode()).await?;
        }
        Ok(())
    }

    async fn serve(&mut self) -> anyhow::Result<()> {
        loop {
            let frame = if let Some(t) = self.transfer.as_mut() {
                tokio::select! {
                    event = t.next_event() => match event {
                    Event::Finished(reply, bytes) => {
                        if let Some(t) = self.transfer.take() {
                            self.kept = t
                                .take_kept()
                                .filter(|_| reply.code == 226)
                                .map(|channel| Kept { sending: !t.receiving, channel });
                            let tune = t.tune_summary().unwrap_or_default();
                            tracing::info!(
                                session = self.id, code = reply.code, bytes,
                                peak_buffer = tune.peak_local, peer_buffer = ?tune.peak_peer,
                                capped = ?tune.capped, "{}", t.label
                            );
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
                    Event::Announce(n) => {
                        if self.drs_notify && t.receiving {
                            self.send(Reply::new(126, sbuf_text(n)));
                            self.flush().await?;
                        }
                        continue;
                    }
                    },
                    f = self.input.next_frame() => f?,
                }
            } else if let Some(line) = self.deferred.pop_front() {
                Some(Frame::Line(line))
            } else {
                let (wait, why) = self.patience();
                match tokio::time::timeout(wait, self.input.next_frame()).await {
                    Ok(f) => f?,
                    Err(_) => {
                        self.send(Reply::new(421, why));
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
            self.flush().await?;
            if flow == Flow::Close {
                return Ok(());
            }
        }
    }

    /// How long the session waits for the next command, and what it says when that runs out:
    /// the idle timeout once logged in; before, what is left of the login timeout, counted from
    /// the connection (commands do not extend it: nobody holds a slot without logging in).
    fn patience(&self) -> (std::time::Duration, String) {
        let c = &self.shared.config;
        if self.login.is_some() {
            let why = format!(
                "Idle for {} s, closing control connection",
                c.idle_timeout.as_secs()
            );
            return (c.idle_timeout, why);
        }
        let left = c.login_timeout.saturating_sub(self.connected.elapsed());
        let why = format!(
            "No login within {} s, closing control connection",
            c.login_timeout.as_secs()
        );
        (left.min(c.idle_timeout), why)
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
            Ok(Command::Sbuf(n)) => {
                let mine = self.transfer.as_ref().and_then(|t| t.peer_buffer(n));
                self.send(Reply::new(200, sbuf_text(mine.unwrap_or(n))));
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
        if cmd.is_secret() {
            tracing::debug!(session = self.id, "PASS ****");
        } else {
            tracing::debug!(session = self.id, "{cmd}");
        }
        match self.handle(cmd).await {
            Ok(flow) => flow,
            Err(reply) => {
                self.send(reply);
                Flow::Continue
            }
        }
    }

    fn login(&self) -> Result<&Login, Reply> {
        self.login
            .as_ref()
            .ok_or_else(|| Reply::new(530, "Please log in with USER and PASS"))
    }

    fn writable(&self) -> Result<(), Reply> {
        if self.login()?.writable {
            Ok(())
        } else {
            Err(Reply::new(
                550,
                "Permission denied: this session is read-only",
            ))
        }
    }

    fn path(&self, arg: &str) -> VPath {
        self.cwd.join(arg)
    }

    async fn handle(&mut self, cmd: Command) -> Result<Flow, Reply> {
        let fs = &self.shared.sandbox;
        let reply = match cmd {
            Command::User(name) => {
                self.login = None;
                let anonymous =
                    name.eq_ignore_ascii_case("anonymous") || name.eq_ignore_ascii_case("ftp");
                // Only a server that takes anonymous logins says so.
                let text = if anonymous && self.shared.config.anonymous != Anonymous::Off {
                    "Anonymous login ok, send any password".to_string()
                } else {
                    format!("Password required for {name}")
                };
                self.user = Some(name);
                Reply::new(331, text)
            }
            Command::Pass(password) => return self.pass(&password).await,
            Command::Quit => {
                self.send(Reply::new(221, "Goodbye"));
                return Ok(Flow::Close);
            }
            Command::Noop => Reply::new(200, "NOOP ok"),
            Command::Syst => Reply::new(215, "UNIX Type: L8"),
            Command::Feat => Reply::multi(
                211,
                "Features:",
                features().iter().map(|f| format!(" {f}")).collect(),
                "End",
            ),
            Command::Opts(opt) => match opt.split_once(' ') {
                Some((name, value)) if name.eq_ignore_ascii_case("DRS") => self.drs_opts(value)?,
                Some((name, value)) if name.eq_ignore_ascii_case("DCREUSE") => {
                    self.reuse = on_off(value)?;
                    self.kept = None;
                    Reply::new(200, format!("Data connection reuse {}", value.trim()))
                }
                Some((name, value)) if name.eq_ignore_ascii_case("RETR") => {
                    self.parallelism =
                        Parallelism::parse_opts(value).map_err(|e| Reply::new(501, e))?;
                    Reply::new(
                        200,
                        format!("OPTS Command Successful. {}", self.parallelism),
                    )
                }
                _ => opts(&opt)?,
            },
            Command::Sbuf(n) => {
                // In a drsFTP session SBUF concerns the latest transfer, which has ended; for
                // everyone else it is GridFTP's: the buffer size of the next data connections.
                if !self.drs_notify {
                    self.tuning = Tuning::Static(n);
                }
                Reply::new(200, sbuf_text(n))
            }
            Command::Help(_) => help(),
            // Everything below needs a login.
            _ if self.login.is_none() => {
                return Err(Reply::new(530, "Please log in with USER and PASS"))
            }
            Command::Type(t) => {
                self.ttype = t;
                match t {
                    TransferType::Ascii => Reply::new(200, "Switching to ASCII mode"),
                    TransferType::Image => Reply::new(200, "Switching to Binary mode"),
                }
            }
            Command::ModeStream => {
                self.extended = false;
                self.kept = None;
                Reply::new(200, "Mode set to S")
            }
            Command::ModeExtended => {
                self.extended = true;
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
            Command::Size(arg) => {
                let (file, _) = fs.open_read(&self.path(&arg))?;
                // A file a cut upload left incomplete is as long as it holds in order:
                // a client resuming from SIZE leaves no hole.
                let held = partial::held(&file).map_err(FsError::from)?;
                Reply::new(213, held.prefix().to_string())
            }
            Command::Mdtm(arg) => {
                let (_, m) = fs.metadata(&self.path(&arg))?;
                Reply::new(
                    213,
                    format_timeval(std::os::unix::fs::MetadataExt::mtime(&m)),
                )
            }
            Command::RestRanges(r) => {
                if !self.extended {
                    return Err(Reply::new(501, "REST with ranges needs MODE E"));
                }
                let text = format!("Restarting with ranges {r} held. Send RETR");
                self.rest_ranges = Some(r);
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
                self.rest = n;
                Reply::new(350, format!("Restarting at {n}. Send STOR or RETR"))
            }
            Command::Allo(n) => {
                // Kept as the bound of the next upload's block offsets.
                self.allo = Some(n);
                Reply::new(
                    202,
                    format!("No storage allocation necessary; the next upload may write {n} bytes"),
                )
            }
            Command::Mlst(arg) => {
                let v = arg.as_deref().map_or(self.cwd.clone(), |a| self.path(a));
                let (_, m) = fs.metadata(&v)?;
                let e = sandbox::entry(v.to_string(), &m);
                Reply::multi(
                    250,
                    format!("Listing {v}"),
                    vec![format!(" {}", format_mlsx(&e, self.login()?.writable))],
                    "End",
                )
            }
            Command::Stat(None) => self.status(),
            Command::Stat(Some(arg)) => {
                let lines = self.listing(Some(&arg), Listing::Long)?;
                Reply::multi(
                    213,
                    format!("Status of {}", self.path(&arg)),
                    lines,
                    "End of status",
                )
            }
            Command::Dele(arg) => {
                self.writable()?;
                let v = self.path(&arg);
                let p = fs.creatable(&v)?;
                if p.is_dir() {
                    return Err(Reply::new(550, "Is a directory; use RMD"));
                }
                std::fs::remove_file(p).map_err(FsError::from)?;
                Reply::new(250, format!("Deleted {v}"))
            }
            Command::Mkd(arg) => {
                self.writable()?;
                let v = self.path(&arg);
                std::fs::create_dir(fs.creatable(&v)?).map_err(FsError::from)?;
                Reply::new(257, format!("{} created", quote_path(&v.to_string())))
            }
            Command::Rmd(arg) => {
                self.writable()?;
                let v = self.path(&arg);
                let p = fs.existing(&v)?;
                if v.is_root() || !p.is_dir() {
                    return Err(Reply::new(550, "Not a removable directory"));
                }
                std::fs::remove_dir(p).map_err(FsError::from)?;
                Reply::new(250, format!("Removed {v}"))
            }
            Command::Rnfr(arg) => {
                self.writable()?;
                let v = self.path(&arg);
                fs.creatable(&v)?
                    .symlink_metadata()
                    .map_err(FsError::from)?;
                self.rename_from = Some(v);
                Reply::new(350, "Ready for RNTO")
            }
            Command::Rnto(arg) => {
                let from = self
                    .rename_from
                    .take()
                    .ok_or_else(|| Reply::new(503, "RNFR first"))?;
                self.writable()?;
                let to = self.path(&arg);
                // An existing target is never replaced: nothing is lost to a rename (RNTO
                // onto a file answers 553; delete it first to replace it).
                sandbox::rename_no_replace(&fs.creatable(&from)?, &fs.creatable(&to)?).map_err(
                    |e| match e.kind() {
                        ErrorKind::AlreadyExists => {
                            Reply::new(553, format!("{to} exists; delete it first to replace it"))
                        }
                        _ => FsError::from(e).into(),
                    },
                )?;
                Reply::new(250, format!("Renamed {from} to {to}"))
            }
            Command::Pasv => self.pasv()?,
            Command::Epsv(arg) => self.epsv(arg)?,
            Command::Port(a) => self.active(SocketAddr::V4(a))?,
            Command::Eprt(a) => self.active(a)?,
            Command::Abor => {
                self.data = DataSpec::None;
                self.kept = None;
                Reply::new(226, "No transfer to abort")
            }
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

    async fn pass(&mut self, password: &str) -> Result<Flow, Reply> {
        if self.login.is_some() {
            return Err(Reply::new(503, "Already logged in"));
        }
        let user = self
            .user
            .take()
            .ok_or_else(|| Reply::new(503, "Login with USER first"))?;
        let ip = self.peer.ip();
        if !self.shared.hosts().may_try(ip, Instant::now()) {
            tracing::warn!(session = self.id, peer = %self.peer, "too many failed logins from this address");
            self.send(Reply::new(
                421,
                "Too many failed logins from your address, try again in a minute",
            ));
            return Ok(Flow::Close);
        }
        let checked = match self.shared.verifier.check(&user, password).await {
            Ok(login) => login,
            Err(busy) => {
                tracing::warn!(session = self.id, ?busy, "password checks are saturated");
                self.send(Reply::new(421, "Too many logins at once, try again later"));
                return Ok(Flow::Close);
            }
        };
        match checked {
            Some(login) => {
                tracing::info!(session = self.id, user = %login.user, writable = login.writable, "logged in");
                self.login = Some(login);
                self.cwd = VPath::root();
                self.send(Reply::new(230, "Login successful"));
                Ok(Flow::Continue)
            }
            None => {
                self.failures += 1;
                self.shared.hosts().failed(ip, Instant::now());
                tracing::warn!(session = self.id, peer = %self.peer, %user, "login failed");
                tokio::time::sleep(self.shared.config.login_failure_delay).await;
                if self.failures >= self.shared.config.max_login_failures {
                    self.send(Reply::new(421, "Too many failed logins, closing"));
                    return Ok(Flow::Close);
                }
                Err(Reply::new(530, "Login incorrect"))
            }
        }
    }

    fn drs_opts(&mut self, value: &str) -> Result<Reply, Reply> {
        let o = DrsOpts::parse(value).map_err(|e| Reply::new(501, e))?;
        let tuning = o
            .tuning
            .as_deref()
            .map(Tuning::parse)
            .transpose()
            .map_err(|e| Reply::new(501, e))?;
        if let Some(n) = o.notify {
            self.drs_notify = n;
        }
        if let Some(t) = tuning {
            self.tuning = t;
        }
        let state = DrsOpts {
            notify: Some(self.drs_notify),
            tuning: Some(self.tuning.to_string()),
        };
        Ok(Reply::new(200, format!("OPTS {state}")))
    }

    /// The tuner configuration of this session's next data connection.
    fn tuner_config(&self) -> TunerConfig {
        let c = &self.shared.config;
        TunerConfig {
            tuning: self.tuning,
            params: c.tune_params.clone(),
            control: c.buffer_control,
            stats: c.stats.clone(),
            end: "server",
        }
    }

    fn cwd_to(&mut self, v: VPath) -> Result<Reply, Reply> {
        let (_, m) = self.shared.sandbox.metadata(&v)?;
        if !m.is_dir() {
            return Err(Reply::new(550, "Not a directory"));
        }
        let text = format!("Directory changed to {v}");
        self.cwd = v;
        Ok(Reply::new(250, text))
    }

    fn status(&self) -> Reply {
        let user = self.login.as_ref().map_or("-", |l| l.user.as_str());
        let ttype = self.mode_word();
        Reply::multi(
            211,
            "fatpipe FTP server status:",
            vec![
                format!(" Connected to {}", self.peer),
                format!(" Logged in as {user}"),
                format!(
                    " TYPE: {ttype}; MODE: {}; STRU: FILE",
                    if self.extended {
                        "EXTENDED BLOCK"
                    } else {
                        "STREAM"
                    }
                ),
                " No data transfer in progress".to_string(),
            ],
            "End of status",
        )
    }

    fn bind_passive(&mut self) -> Result<u16, Reply> {
        if self.transfer.is_some() {
            return Err(Reply::new(503, "A transfer is in progress"));
        }
        self.passive_hint = self.passive_hint.wrapping_add(1);
        let listener = fatpipe_net::socket::bind_in_range(
            self.local.ip(),
            self.shared.config.passive_ports.as_ref(),
            self.passive_hint,
        )
        .and_then(|l| {
            let c = &self.shared.config;
            before_connect(self.tuning, &c.tune_params, &c.buffer_control, &l)?;
            let port = l.local_addr()?.port();
            Ok((data::passive(l)?, port))
        });
        match listener {
            Ok((spec, port)) => {
                self.data = spec;
                self.kept = None;
                Ok(port)
            }
            Err(e) => Err(Reply::new(
                425,
                format!("Cannot open passive connection: {e}"),
            )),
        }
    }

    fn pasv(&mut self) -> Result<Reply, Reply> {
        if self.epsv_all {
            return Err(Reply::new(503, "EPSV ALL in effect, use EPSV"));
        }
        let std::net::IpAddr::V4(ip) = self.local.ip().to_canonical() else {
            return Err(Reply::new(500, "PASV is IPv4 only; use EPSV"));
        };
        let port = self.bind_passive()?;
        let hp = addr::format_host_port(std::net::SocketAddrV4::new(ip, port));
        Ok(Reply::new(227, format!("Entering Passive Mode ({hp})")))
    }

    fn epsv(&mut self, arg: Option<EpsvArg>) -> Result<Reply, Reply> {
        let family = if self.local.ip().to_canonical().is_ipv4() {
            1
        } else {
            2
        };
        match arg {
            Some(EpsvArg::All) => {
                self.epsv_all = true;
                Ok(Reply::new(200, "EPSV ALL ok"))
            }
            Some(EpsvArg::Proto(p)) if p != family => Err(Reply::new(
                522,
                format!("Network protocol not supported, use ({family})"),
            )),
            _ => {
                let port = self.bind_passive()?;
                Ok(Reply::new(
                    229,
                    format!("Entering Extended Passive Mode (|||{port}|)"),
                ))
            }
        }
    }

    /// PORT/EPRT: only to the control connection's own peer and an unprivileged port (RFC 2577).
    fn active(&mut self, target: SocketAddr) -> Result<Reply, Reply> {
        if self.epsv_all {
            return Err(Reply::new(503, "EPSV ALL in effect, use EPSV"));
        }
        if !same_host(target.ip(), self.peer.ip()) {
            return Err(Reply::new(
                504,
                "Refused: the data address must be the client's own",
            ));
        }
        if target.port() < 1024 {
            return Err(Reply::new(504, "Refused: privileged data port"));
        }
        if self.transfer.is_some() {
            return Err(Reply::new(503, "A transfer is in progress"));
        }
        self.data = DataSpec::Active(target);
        self.kept = None;
        Ok(Reply::new(200, "PORT command successful"))
    }

    /// Whether a transfer (MODE E or not, `receiving` or sending) has a data channel: a new data
    /// address, or the MODE E connections the last transfer in the same direction left open.
    /// Checked before a file is opened, so that nothing is touched when the transfer cannot start.
    /// Kept connections that this transfer will not use are closed here, as `begin` would.
    fn data_ready(&mut self, blocks: bool, receiving: bool) -> Result<(), Reply> {
        let fresh = !matches!(self.data, DataSpec::None);
        let usable = self
            .kept
            .as_ref()
            .is_some_and(|k| blocks && k.sending != receiving && !fresh);
        if !usable {
            self.kept = None;
        }
        if usable || fresh {
            Ok(())
        } else {
            Err(Reply::new(425, "Use PORT, EPRT, PASV or EPSV first"))
        }
    }

    fn begin(&mut self, job: Job, opening: String, label: String) -> Result<Flow, Reply> {
        self.data_ready(job.blocks(), job.receiving())?;
        // With no new data address, a MODE E transfer in the direction of the last one uses
        // the connections it left open; anything else closes them.
        let kept = self
            .kept
            .take()
            .filter(|k| {
                job.blocks() && k.sending != job.receiving() && matches!(self.data, DataSpec::None)
            })
            .map(|k| k.channel);
        let c = &self.shared.config;
        let (tuning, params, control) = (self.tuning, c.tune_params.clone(), c.buffer_control);
        let ends = Endpoints {
            spec: std::mem::take(&mut self.data),
            peer_ip: self.peer.ip(),
            local_ip: self.local.ip(),
            timeout: c.data_timeout,
            prepare: Arc::new(move |fd| before_connect(tuning, &params, &control, fd)),
            kept,
            keep_open: self.reuse,
            max_streams: c.max_streams,
        };
        let tune = (!matches!(job, Job::SendBytes(_))).then(|| self.tuner_config());
        self.send(Reply::new(150, opening));
        let control = self.writer.as_ref().as_fd().try_clone_to_owned().ok();
        self.transfer = Some(Running::start(job, ends, label, tune, control));
        Ok(Flow::Continue)
    }

    fn mode_word(&self) -> &'static str {
        match self.ttype {
            TransferType::Ascii => "ASCII",
            TransferType::Image => "BINARY",
        }
    }

    fn retr(&mut self, arg: &str) -> Result<Flow, Reply> {
        let offset = std::mem::take(&mut self.rest);
        let held = self.rest_ranges.take();
        let v = self.path(arg);
        let (file, meta) = self.shared.sandbox.open_read(&v)?;
        self.data_ready(self.extended, false)?;
        if offset > meta.len() {
            return Err(Reply::new(
                554,
                format!(
                    "Restart offset {offset} is beyond the file's end ({})",
                    meta.len()
                ),
            ));
        }
        (&file)
            .seek(SeekFrom::Start(offset))
            .map_err(FsError::from)?;
        let opening = format!(
            "Opening {} mode data connection for {v} ({} bytes)",
            self.mode_word(),
            meta.len() - offset
        );
        let ascii = self.ttype == TransferType::Ascii;
        let job = if self.extended {
            let ranges = match held {
                Some(h) => h.gaps(0, meta.len()),
                None => vec![(offset, meta.len())],
            };
            Job::SendBlocks {
                file,
                ranges,
                shift: 0,
                parallelism: self.parallelism,
            }
        } else {
            Job::SendFile { file, ascii }
        };
        self.begin(job, opening, format!("RETR {v} from {offset}"))
    }

    fn store(&mut self, arg: &str, append: bool) -> Result<Flow, Reply> {
        let offset = std::mem::take(&mut self.rest);
        self.writable()?;
        self.data_ready(self.extended, true)?;
        let v = self.path(arg);
        let at = match (append, offset) {
            (true, _) => WriteAt::End,
            (false, 0) => WriteAt::Start,
            (false, n) => WriteAt::Offset(n),
        };
        let (file, start) = self
            .shared
            .sandbox
            .open_write(&v, at)
            .map_err(|e| match e {
                FsError::WrongKind(m) if m.starts_with("Restart") => Reply::new(554, m),
                e => e.into(),
            })?;
        let opening = format!("Ok to send data for {v} ({} mode)", self.mode_word());
        let ascii = self.ttype == TransferType::Ascii;
        let verb = if append { "APPE" } else { "STOR" };
        let job = if self.extended {
            // Blocks arrive out of order: until the transfer completes, the file carries the
            // record of what it holds, from before its first byte.
            let mut held = RangeSet::default();
            held.insert(0, start);
            let record = match partial::mark(&file, &held) {
                Ok(()) => Some(held),
                Err(e) => {
                    tracing::warn!(session = self.id, "cannot record what {v} holds ({e}): a cut upload resumes from its first gap only while the server runs");
                    None
                }
            };
            let limit = self.block_limit(&file, 0);
            Job::ReceiveBlocks {
                file,
                base: 0,
                limit,
                record,
            }
        } else {
            // Written in order from a point it held: its length is the truth again.
            partial::clear(&file).map_err(FsError::from)?;
            Job::Receive { file, ascii }
        };
        self.begin(job, opening, format!("{verb} {v} at {start}"))
    }

    /// One past the last byte a MODE E upload into `file` may write, block offsets counted from
    /// `base`: what `ALLO` announced, and never past the room on the file system (or
    /// `--max-file-size`), so that no block offset makes a huge sparse file.
    fn block_limit(&mut self, file: &std::fs::File, base: u64) -> BlockLimit {
        let room = sandbox::room(file).unwrap_or(u64::MAX);
        let cap = self.shared.config.max_file_size.unwrap_or(u64::MAX);
        let announced = self.allo.take().unwrap_or(u64::MAX);
        let end = room.min(cap).min(announced);
        BlockLimit {
            end: end.saturating_sub(base),
            disk: end == room && room < cap.min(announced),
        }
    }

    fn send_listing(&mut self, arg: Option<String>, style: Listing) -> Result<Flow, Reply> {
        let lines = self.listing(arg.as_deref(), style)?;
        let mut bytes = Vec::new();
        for l in lines {
            bytes.extend_from_slice(l.trim_start().as_bytes());
            bytes.extend_from_slice(b"\r\n");
        }
        let label = format!(
            "listing of {}",
            arg.as_deref().map_or(self.cwd.clone(), |a| self.path(a))
        );
        self.begin(
            Job::SendBytes(bytes),
            "Here comes the directory listing".into(),
            label,
        )
    }

    /// Listing lines for LIST/NLST/MLSD/STAT; each is indented by one space (for STAT's reply body).
    fn listing(&self, arg: Option<&str>, style: Listing) -> Result<Vec<String>, Reply> {
        let v = arg.map_or(self.cwd.clone(), |a| self.path(a));
        let fs = &self.shared.sandbox;
        let (_, meta) = fs.metadata(&v)?;
        let writable = self.login()?.writable;
        let now = unix_now();
        let entries = if meta.is_dir() {
            fs.list_dir(&v)?
        } else if style == Listing::Machine {
            return Err(Reply::new(501, "Not a directory; use MLST for a file"));
        } else {
            vec![sandbox::entry(
                v.file_name().unwrap_or("/").to_string(),
                &meta,
            )]
        };
        Ok(entries
            .iter()
            .map(|e| match style {
                Listing::Long => format!(" {}", format_list_line(e, now)),
                Listing::Machine => format!(" {}", format_mlsx(e, writable)),
                Listing::Names => match arg {
                    Some(a) if meta.is_dir() => format!(" {}/{}", a.trim_end_matches('/'), e.name),
                    Some(a) => format!(" {a}"),
                    None => format!(" {}", e.name),
                },
            })
            .collect())
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Listing {
    Long,
    Names,
    Machine,
}

fn unix_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
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
    const VERBS: &str = "USER PASS QUIT NOOP SYST FEAT OPTS TYPE MODE STRU PWD CWD CDUP LIST NLST MLST MLSD SIZE MDTM REST RETR STOR APPE DELE MKD RMD RNFR RNTO PASV EPSV PORT EPRT ABOR STAT HELP ALLO SBUF CKSM ERET ESTO";
    Reply::multi(
        214,
        "The following commands are recognized:",
        vec![format!(" {VERBS}")],
        "Help OK",
    )
}

impl From<FsError> for Reply {
    fn from(e: FsError) -> Reply {
        match e {
            FsError::NotFound | FsError::Outside | FsError::WrongKind(_) => {
                Reply::new(550, e.to_string())
            }
            FsError::Io(io) => match (io.kind(), io.raw_os_error()) {
                (_, Some(libc::ENOSPC)) | (_, Some(libc::EDQUOT)) => {
                    Reply::new(452, format!("Insufficient storage space: {io}"))
                }
                (ErrorKind::NotFound, _) => Reply::new(550, "No such file or directory"),
                (ErrorKind::PermissionDenied, _) => Reply::new(550, "Permission denied"),
                (ErrorKind::AlreadyExists, _) => Reply::new(550, "File exists"),
                (ErrorKind::DirectoryNotEmpty, _) => Reply::new(550, "Directory not empty"),
                _ => Reply::new(451, format!("Local error: {io}")),
            },
        }
    }
}
