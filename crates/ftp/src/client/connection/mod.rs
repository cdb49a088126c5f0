//! A client's control connection: login, commands and replies, and the data connections of
//! single transfers (passive: `EPSV`, falling back to `PASV`); MODE E transfers are gridftp.rs's,
//! the UDP channel udp.rs's, sizes, directories and listings listing.rs's.

mod ahead;
mod during;
#[cfg(test)]
mod fake_server;
mod gridftp;
mod listing;
mod login;
mod passive;
mod pipeline;
mod pipelined;
mod replies;
mod secure;
mod settings;
mod stored;
mod third_party;
mod udp;
use gridftp::Blocks;
pub use gridftp::{checksum_command, StreamsReport};
use secure::ControlStream;
pub use secure::{TlsMode, TlsPolicy};

use anyhow::{anyhow, bail, Context};
use fatpipe_net::admission::{Proof, Token};
pub use fatpipe_net::at_most::AtMost;
use fatpipe_net::mode_e::Kept;
use fatpipe_net::mover::{StreamMover, StreamWork};
use fatpipe_net::{Conductor, Moved, Mover, Pump, PumpError, TuneSummary, TunerConfig};
use fatpipe_proto::reply::ReplyParser;
use fatpipe_proto::{Command, Reply, TransferType};
use fatpipe_tune::Role;
use std::fs::File;
use std::io::{BufReader, Write};
use std::net::{Shutdown, SocketAddr, TcpStream, ToSocketAddrs};
use std::os::fd::AsFd;
use std::sync::Arc;
use std::time::Duration;

/// How many data connections a transfer uses (`cp -p`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Streams {
    /// Exactly this many (1: MODE S, which every FTP server speaks).
    Fixed(u32),
    /// Start with one and let the sender open more while buffers, not the path, hold the
    /// transfer back; at most `max`, and this end's buffers within `max_memory`.
    Auto {
        /// Most connections.
        max: u32,
        /// Bound on this end's buffer memory, bytes.
        max_memory: Option<u64>,
    },
}

/// Who logs in.
#[derive(Debug, Clone)]
pub struct Credentials {
    /// The account name.
    pub user: String,
    /// Its password.
    pub password: String,
    /// The password was written in the URL: it never goes to a server in clear unless
    /// `--tls off` says so.
    pub in_url: bool,
}

impl Credentials {
    /// The conventional anonymous login.
    pub fn anonymous() -> Self {
        Credentials {
            user: "anonymous".into(),
            password: "fatpipe@".into(),
            in_url: false,
        }
    }
}

/// An open control connection, logged in (or, in clear, its login on its way with the first
/// commands: login.rs).
#[derive(Debug)]
pub struct Connection {
    /// The control connection (plain, or TLS after `AUTH TLS`), buffered for reading replies.
    control: BufReader<ControlStream>,
    /// TLS on the control connection: how data connections are secured; kept only when the
    /// server accepted `PROT P`.
    secure: Option<fatpipe_net::tls::Secure>,
    parser: ReplyParser,
    features: Vec<String>,
    peer: SocketAddr,
    ttype: Option<TransferType>,
    epsv_failed: bool,
    timeout: Duration,
    tune: Option<TunerConfig>,
    /// Whether the server speaks the drsFTP messages (`OPTS DRS` accepted).
    drs_peer: bool,
    /// Whether a fatpipe server hashes the files it moves beside their transfers, as this end
    /// last told it (`OPTS DRS Hash=`; on until told).
    server_hashes: bool,
    /// MODE E transfers: the parallelism asked of the server and this end's policy limits.
    blocks: Option<Blocks>,
    /// Whether the server is in MODE E now.
    extended: bool,
    /// MODE E data connections are left open between files (the server has `DCREUSE`).
    reuse: bool,
    /// The MODE E connections the last transfer left open (the server keeps its ends alike).
    kept: Option<Kept>,
    /// The UDP channel: this end's side of it, and leaving TCP for it (udp.rs).
    udp: UdpSide,
    /// Commands asked ahead of (or behind) the commands waited on, and their replies (ahead.rs).
    pipe: pipeline::Pipeline,
    /// What the latest transfer did.
    last: LastTransfer,
    /// The quickest command-to-reply time seen on the control connection: about the path's
    /// round trip, where the kernel gives none.
    quickest_reply: Option<Duration>,
    /// The data token the server took (`DTOK`): every data connection shows or checks it.
    token: Option<Token>,
    /// A login sent with the session's first commands, not answered yet (login.rs).
    login: Option<login::LoginAhead>,
}

/// A session's UDP channel, and leaving TCP for it.
#[derive(Debug, Default)]
struct UdpSide {
    /// The server moves MODE S binary transfers over the UDP channel (`SITE SETNETSTACK udp`):
    /// this end's side of it.
    config: Option<fatpipe_net::udp::UdpConfig>,
    /// A download whose sending server meets random loss ends, to go on over the UDP channel
    /// (`--transport auto` on a path not known to be lossy).
    leave_on_random_loss: bool,
    /// The latest transfer ended so.
    left_on_random_loss: bool,
    /// Why transfers started on the UDP channel where the copy's plan said TCP (a long path
    /// path memory knew nothing of).
    started: Option<String>,
}

/// What a session's latest transfer did, for its file's result.
#[derive(Debug, Default)]
struct LastTransfer {
    /// Its data connections' tuning.
    tune: Option<TuneSummary>,
    /// Its MODE E connections.
    streams: Option<StreamsReport>,
    /// What its UDP channel did (`udp: …`).
    udp: Option<String>,
}

/// Longest reply line accepted from a server.
const MAX_REPLY_LINE: usize = 64 * 1024;

impl Connection {
    /// The round trip to the server: the kernel's least on the control connection (its
    /// handshake on), else the quickest reply to a command so far. Replies come late from a
    /// busy host: a clean-clone test run read a 20 ms path as 116 ms by them.
    pub fn round_trip(&self) -> Option<Duration> {
        fatpipe_net::tcpinfo::min_rtt(self.control.get_ref().tcp().as_fd()).or(self.quickest_reply)
    }

    /// Connects, reads the greeting and the server's features, secures the session as `tls`
    /// says and logs in (in clear, with the first commands: login.rs).
    pub fn open(
        host: &str,
        port: u16,
        creds: &Credentials,
        timeout: Duration,
        tls: &TlsPolicy,
    ) -> anyhow::Result<Connection> {
        Self::open_known(host, port, creds, timeout, tls, None)
    }

    /// [`Connection::open`] with the server's features `known` from an earlier session: a
    /// session that would read them before its login (an anonymous one under `--tls auto`
    /// with a server that lists no TLS, any under `--tls off`) logs in with its first commands
    /// at once, without waiting for the greeting (login.rs).
    pub fn open_known(
        host: &str,
        port: u16,
        creds: &Credentials,
        timeout: Duration,
        tls: &TlsPolicy,
        known: Option<&[String]>,
    ) -> anyhow::Result<Connection> {
        let addrs: Vec<SocketAddr> = (host, port)
            .to_socket_addrs()
            .with_context(|| format!("cannot resolve {host}"))?
            .collect();
        let mut last = anyhow!("{host} has no address");
        for a in addrs {
            match fatpipe_net::socket::connect(a, timeout) {
                Ok(s) => return Self::start(s, (host, creds, timeout, tls), known),
                Err(e) => last = anyhow::Error::new(e).context(format!("cannot connect to {a}")),
            }
        }
        Err(last)
    }

    fn start(
        stream: TcpStream,
        (host, creds, timeout, tls): (&str, &Credentials, Duration, &TlsPolicy),
        known: Option<&[String]>,
    ) -> anyhow::Result<Connection> {
        stream.set_read_timeout(Some(timeout))?;
        // Commands and replies go one at a time: a lost one is resent by the timeout alone.
        fatpipe_net::socket::for_conversation(&stream);
        let peer = stream.peer_addr()?;
        let mut c = Connection {
            control: BufReader::new(ControlStream::Plain(stream)),
            secure: None,
            parser: ReplyParser::default(),
            features: Vec::new(),
            peer,
            ttype: None,
            epsv_failed: false,
            timeout,
            tune: None,
            drs_peer: false,
            server_hashes: true,
            blocks: None,
            extended: false,
            reuse: false,
            kept: None,
            udp: UdpSide::default(),
            pipe: pipeline::Pipeline::default(),
            last: LastTransfer::default(),
            quickest_reply: None,
            token: None,
            login: None,
        };
        // An anonymous login (nothing secret in it) reads the features before the login and
        // asks for TLS where the server lists it; any other asks for TLS first (a server that
        // has TLS and does not list it still gets asked).
        let features_first = match tls.mode {
            TlsMode::Off => true,
            TlsMode::Auto => creds.user == "anonymous",
            TlsMode::Require => false,
        };
        if let Some(known) = known.filter(|k| features_first && !secure::lists_tls(k)) {
            c.features = known.to_vec();
            c.log_in_before_greeting(creds);
            c.ask_token(Token::random().ok());
            return Ok(c);
        }
        let first = match features_first {
            true => c.send_alone(&Command::Feat)?,
            false => c.ask_tls()?,
        };
        let greeting = c.read_reply()?;
        if !greeting.is_success() {
            bail!("{peer} refused the connection: {greeting}");
        }
        let listed = features_first && c.read_features(first)?;
        let tls_asked = match (tls.mode, features_first) {
            (TlsMode::Off, _) => None,
            (_, false) => Some(first),
            _ if !listed || c.lists_tls() => Some(c.ask_tls()?),
            _ => None,
        };
        let secured = c.secure_control(host, tls, tls_asked)?;
        if tls.mode == TlsMode::Auto && !secured && creds.user != "anonymous" {
            // The server refused TLS (or a man in the middle said it did).
            if creds.in_url {
                bail!(
                    "{peer} refused TLS: the password in the URL would go in clear; \
                     use --tls off to send it so, or take it out of the URL \
                     (FATPIPE_PASSWORD, ~/.netrc)"
                );
            }
            tracing::warn!(
                "{peer} refused TLS: the password of {} goes over the network in clear \
                 (--tls require refuses such servers, --tls off silences this)",
                creds.user
            );
        }
        if listed && !secured {
            c.log_in_ahead(creds);
        } else if let Some(said) = c.log_in(creds, secured)? {
            c.protect_data(tls, &said)?;
        }
        c.ask_token(Token::random().ok());
        Ok(c)
    }

    /// Peak buffers and caps of the latest tuned transfer.
    pub fn last_tune(&self) -> Option<&TuneSummary> {
        self.last.tune.as_ref()
    }

    /// The features the server lists (`FEAT`), upper-cased.
    pub fn features(&self) -> &[String] {
        &self.features
    }

    /// Whether `FEAT` listed a feature whose first word is `name`.
    pub fn has_feature(&self, name: &str) -> bool {
        self.features
            .iter()
            .any(|f| f.split(' ').next() == Some(name))
    }

    /// What `FEAT` lists after the feature `name` (upper-cased), on each line that names it
    /// with something after it: `CKSM MD5,ADLER32` gives `MD5,ADLER32`.
    pub(super) fn feature_params<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a str> {
        self.features
            .iter()
            .filter_map(move |f| f.strip_prefix(name)?.strip_prefix(' '))
    }

    /// Sends a command and returns its (first) reply.
    pub fn command(&mut self, cmd: &Command) -> anyhow::Result<Reply> {
        // Only a command sent alone times the round trip (replies asked ahead come first).
        let alone = self.pipe.is_empty();
        let sent = std::time::Instant::now();
        self.send_with_ahead(cmd)?;
        let r = self.read_reply_after_transfers()?;
        if alone {
            self.timed(sent.elapsed());
        }
        tracing::debug!("{} -> {r}", cmd.redacted());
        Ok(r)
    }

    /// A command answered `took` after it was sent: the round trip is the quickest such.
    fn timed(&mut self, took: Duration) {
        self.quickest_reply = Some(self.quickest_reply.map_or(took, |t| t.min(took)));
    }

    /// Sends a command and fails unless the reply is 2xx or 3xx.
    fn checked(&mut self, cmd: &Command) -> anyhow::Result<Reply> {
        let r = self.command(cmd)?;
        if r.is_success() || r.is_intermediate() {
            Ok(r)
        } else {
            bail!("{}: server said {r}", describe(cmd))
        }
    }

    /// Sets the type, and MODE S: every transfer but a MODE E file copy runs in it (both go
    /// out with the next command).
    fn set_type(&mut self, t: TransferType) {
        self.set_mode(false);
        self.set_type_only(t);
    }

    /// Sets the type (it goes out with the next command).
    fn set_type_only(&mut self, t: TransferType) {
        if self.ttype != Some(t) {
            self.set_ahead(Command::Type(t));
            self.ttype = Some(t);
        }
    }

    /// Runs one transfer command over a fresh data connection (MODE S): `REST` first when
    /// `offset` > 0, then `cmd`, then `work` on the data connection, then the final reply,
    /// which must be 2xx. With tuning on (`tuned`: this end's role), the connection's laws run
    /// beside the work and talk to the server; `failed` names a failure of the data side.
    fn transfer(
        &mut self,
        cmd: Command,
        offset: u64,
        tuned: Option<Role>,
        pump: &Arc<Pump>,
        work: StreamWork<'_>,
        failed: impl FnOnce(PumpError) -> anyhow::Error + Send,
    ) -> anyhow::Result<u64> {
        // Nothing is left for the transfer command to settle: its mover is a stream's.
        self.settle()?;
        let secure = self.secure.clone();
        let make = move |link, proof, _udp| {
            StreamMover::new(link, work, secure, proof) as Box<dyn Mover + '_>
        };
        self.run_mode_s(cmd, offset, tuned, pump, make, failed)
            .map(|(m, _)| m.bytes)
    }

    /// [`Connection::transfer`] with the mover `make` builds on the data connection (told
    /// whether the transfer takes the UDP channel: a `SITE SETNETSTACK udp` may go out with
    /// the command); returns what it moved and the server's final reply.
    fn run_mode_s<'w>(
        &mut self,
        cmd: Command,
        offset: u64,
        tuned: Option<Role>,
        pump: &Arc<Pump>,
        make: impl FnOnce(TcpStream, Option<Proof>, bool) -> Box<dyn Mover + 'w>,
        failed: impl FnOnce(PumpError) -> anyhow::Error + Send,
    ) -> anyhow::Result<(Moved, Reply)> {
        self.settle_before_transfer()?;
        let passive = self.ask_passive()?;
        let rest = (offset > 0).then_some(Command::Rest(offset));
        let (what, data) = self.begin(rest, &cmd, |c| c.connect_passive(passive))?;
        // What went with the command was answered before it.
        self.settle()?;
        let cfg = tuned.and(self.tune.clone());
        let conductor = Conductor::new(cfg, tuned.unwrap_or(Role::Receiver));
        // This end connected: it shows the token.
        let mover = make(data, Proof::of(self.token, true), self.uses_udp());
        // A final reply that says the server gave up ends this side too (a UDP receiver would
        // otherwise wait out its --timeout for packets that no longer come).
        let driver = &conductor;
        let (moved, fin) = self.drive(&conductor, Some(pump), move || {
            mover.run(pump, driver).map_err(failed)
        })?;
        let reply = fin.as_ref().ok().cloned();
        let moved = finish(&what, moved, fin)?;
        Ok((moved, reply.unwrap_or_else(|| Reply::new(226, ""))))
    }

    /// Sends `rest` (if any) and `cmd` in one write, runs `meanwhile` during the round trip
    /// (a passive data connection opens while the server reads the command), and reads the
    /// reply, which must be preliminary; returns the command as error messages name it, and
    /// what `meanwhile` made. When `meanwhile` fails, the server waits on a transfer this end
    /// will not run: the session ends.
    fn begin<T>(
        &mut self,
        rest: Option<Command>,
        cmd: &Command,
        meanwhile: impl FnOnce(&mut Self) -> anyhow::Result<T>,
    ) -> anyhow::Result<(String, T)> {
        self.last.tune = None;
        self.last.streams = None;
        if let Some(r) = rest {
            self.set_ahead(r);
        }
        let what = describe(cmd);
        match std::mem::take(&mut self.pipe.sent) {
            true => self.send_next()?,
            false => self.send_with_ahead(cmd)?,
        }
        let made = match meanwhile(self) {
            Ok(m) => m,
            Err(e) => {
                let _ = self.control.get_ref().tcp().shutdown(Shutdown::Both);
                return Err(e);
            }
        };
        let r = self.read_reply_after_transfers()?;
        tracing::debug!("{what} -> {r}");
        if !r.is_preliminary() {
            self.take_trailing(false)?;
            bail!("{what}: server said {r}");
        }
        self.check_in_step(cmd, &r)?;
        Ok((what, made))
    }

    /// Downloads `path` from `offset` into `sink`; `pump` counts bytes and can cancel.
    pub fn retrieve(
        &mut self,
        path: &str,
        offset: u64,
        sink: &mut (dyn Write + Send),
        pump: &Arc<Pump>,
    ) -> anyhow::Result<u64> {
        let work = StreamWork::Receive {
            into: sink,
            ascii: false,
        };
        self.retrieve_work(path, offset, work, pump)
    }

    /// A binary download of `path` from `offset`, the bytes going as `work` says.
    pub(super) fn retrieve_work(
        &mut self,
        path: &str,
        offset: u64,
        work: StreamWork<'_>,
        pump: &Arc<Pump>,
    ) -> anyhow::Result<u64> {
        self.set_type(TransferType::Image);
        let retr = Command::Retr(path.into());
        self.transfer(retr, offset, Some(Role::Receiver), pump, work, |e| {
            receive_error(path, e)
        })
    }

    /// Uploads `file` from its current position to `path` at `offset` (0 replaces the file).
    pub fn store(
        &mut self,
        path: &str,
        offset: u64,
        file: &File,
        pump: &Arc<Pump>,
    ) -> anyhow::Result<u64> {
        self.set_type(TransferType::Image);
        let work = StreamWork::SendFile { file, ascii: false };
        let stor = Command::Stor(path.into());
        self.transfer(stor, offset, Some(Role::Sender), pump, work, |e| {
            send_error(path, e)
        })
    }

    /// Says goodbye; errors are irrelevant at this point.
    pub fn quit(mut self) {
        // A server that went silent does not hold the command up for another --timeout.
        let _ = self
            .control
            .get_ref()
            .tcp()
            .set_read_timeout(Some(self.timeout.min(FINAL_GRACE)));
        // QUIT goes out with what was asked ahead (an `MFMT`, whose answer only the log would
        // show) and the connection closes: the 221 would cost a round trip. Replies owed from
        // before are read first (a socket closed with unread input resets the connection,
        // which could cut off what was just sent).
        if self.pipe.owes() {
            let _ = self.take_owed();
        }
        // Transfers sent before their turn that did not run end with the connection.
        self.pipe.queued.clear();
        // A login that never went out: nothing asked after it can run.
        if self.login.is_some() && !self.pipe.owes() {
            self.pipe.ahead.clear();
        }
        let _ = self.send_with_ahead(&Command::Quit);
    }
}

/// How long a server whose transfer already failed at the data side gets for its final reply,
/// and any server for its answer to `QUIT`.
const FINAL_GRACE: Duration = Duration::from_secs(2);

/// How long the control thread waits for a reply at a time while a transfer runs.
const POLL: Duration = Duration::from_millis(50);

/// A failed download of `path`, naming the side that failed (the local file or the network).
fn receive_error(path: &str, e: fatpipe_net::PumpError) -> anyhow::Error {
    match e {
        fatpipe_net::PumpError::Write(io) => {
            anyhow::Error::new(LocalSide(format!("writing the local copy of {path}: {io}")))
        }
        fatpipe_net::PumpError::Read(io) if timed_out(&io) => {
            anyhow!("receiving {path}: no data within the --timeout")
        }
        e => anyhow!("receiving {path}: {e}"),
    }
}

/// A failed upload of `path`, naming the side that failed (the local file or the network).
fn send_error(path: &str, e: fatpipe_net::PumpError) -> anyhow::Error {
    match e {
        fatpipe_net::PumpError::Read(io) => {
            anyhow::Error::new(LocalSide(format!("reading local file for {path}: {io}")))
        }
        fatpipe_net::PumpError::Write(io) if timed_out(&io) => {
            anyhow!("sending {path}: the server took no data within the --timeout")
        }
        e => anyhow!("sending {path}: {e}"),
    }
}

/// A transfer that failed on this machine's side (its disk, its file): the server's reply to
/// the broken transfer that follows is not the cause.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
struct LocalSide(String);

/// Whether a socket error is a timeout (`SO_RCVTIMEO` reports one as EAGAIN).
fn timed_out(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
    )
}

/// The outcome of a transfer from what the data side and the server each said.
fn finish<T>(
    what: &str,
    moved: anyhow::Result<T>,
    fin: anyhow::Result<Reply>,
) -> anyhow::Result<T> {
    match (moved, fin) {
        (Ok(n), Ok(fin)) if fin.is_success() => Ok(n),
        (Ok(_), Ok(fin)) => bail!("{what}: server said {fin}"),
        // This end failed first: its own error, the server's reply after it.
        (Err(e), Ok(fin)) if e.is::<LocalSide>() => {
            bail!("{e:#} (the server then said {fin})")
        }
        // Both ends saw the failure: the server's reply usually says why (452: disk full).
        (Err(e), Ok(fin)) if !fin.is_success() => bail!("{what}: server said {fin} ({e:#})"),
        (Err(e), _) | (Ok(_), Err(e)) => Err(e),
    }
}

/// A command as it may appear in an error message (never a password).
fn describe(cmd: &Command) -> String {
    cmd.redacted()
}
