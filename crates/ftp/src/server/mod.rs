//! The FTP server: accepts control connections and runs one [`session`] per client.

pub mod auth;
mod data;
mod limits;
pub use fatpipe_net::sandbox;
mod session;
mod transfer;
pub mod users_file;
pub mod verifier;
pub mod xferlog;

use anyhow::Context;
use auth::{Anonymous, Users};
use fatpipe_net::admission::ThirdPartyNetworks;
use fatpipe_net::buffers::BufferControl;
use fatpipe_net::tls::TlsReuse;
use fatpipe_net::TunerConfig;
use fatpipe_tune::rate::RateMemory;
use limits::{HostLimits, WaitingLogins};
use sandbox::Sandbox;
use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::ops::RangeInclusive;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpListener;
use verifier::Verifier;

/// Everything a server needs to know, with the defaults of `fatpipe serve`.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// The directory served as `/`.
    pub root: PathBuf,
    /// The control-connection address.
    pub listen: SocketAddr,
    /// Named accounts.
    pub users: Users,
    /// What anonymous logins may do.
    pub anonymous: Anonymous,
    /// Ports for passive data connections (any free port when `None`).
    pub passive_ports: Option<RangeInclusive<u16>>,
    /// Ports the UDP data channel receives on (uploads; any free port when `None`).
    pub udp_ports: Option<RangeInclusive<u16>>,
    /// Concurrent logged-in sessions; a login past it is turned away with 421.
    pub max_sessions: usize,
    /// Connections not logged in yet, apart from `max_sessions`; a newcomer closes the oldest
    /// when they are all taken.
    pub max_waiting_logins: usize,
    /// Concurrent sessions from one source address (an IPv6 /64); more are turned away with 421.
    pub max_sessions_per_host: usize,
    /// Time from connecting to a successful login; a session not logged in by then is closed
    /// with 421 (commands before login do not extend it).
    pub login_timeout: Duration,
    /// Failed logins one source address may make per minute; beyond it its logins are refused
    /// without a password check until the minute has passed.
    pub max_host_login_failures: u32,
    /// Data connections one MODE E transfer may open to this server; more are closed at once.
    pub max_streams: u32,
    /// Largest file an upload may make (MODE E blocks past it are refused); always bounded by
    /// the room on the file system.
    pub max_file_size: Option<u64>,
    /// A session with no command (and no transfer) for this long is closed with 421.
    pub idle_timeout: Duration,
    /// Failed logins after which the session is closed with 421.
    pub max_login_failures: u32,
    /// Longest accepted command line, in bytes.
    pub max_line: usize,
    /// How long to wait for a data connection to be made, and how long a transfer may go
    /// without moving a byte before it fails (a link outage shorter than this is ridden through).
    pub data_timeout: Duration,
    /// Pause before answering a failed login (slows down password guessing).
    pub login_failure_delay: Duration,
    /// How data connections are tuned unless a client asks otherwise (`OPTS DRS`, `SBUF`):
    /// tuning mode, pacing, congestion control, the laws' knobs, how buffers are set, where
    /// samples go.
    pub tune: TunerConfig,
    /// FTPS: the certificate and key (`AUTH TLS` is offered only with them).
    pub tls: Option<Arc<fatpipe_net::tls::Identity>>,
    /// No login and no data connection in clear (`--require-tls`).
    pub require_tls: bool,
    /// Named users may direct data to or from another host than their own (third-party
    /// copies between servers, as FTS3 and gfal2 drive them).
    pub allow_third_party: bool,
    /// The hosts third-party copies may involve besides public addresses (never this
    /// server's loopback, private or link-local neighbours otherwise).
    pub third_party_networks: ThirdPartyNetworks,
    /// Under `PROT P`, whether a data connection without a data token must resume the
    /// control connection's TLS session.
    pub tls_reuse: TlsReuse,
    /// Where each file moved is logged in the xferlog format (`--transfer-log`).
    pub transfer_log: Option<PathBuf>,
}

impl ServerConfig {
    /// A configuration serving `root` with the defaults.
    pub fn new(root: PathBuf) -> Self {
        ServerConfig {
            root,
            listen: SocketAddr::from(([0, 0, 0, 0], 2811)),
            users: Users::default(),
            anonymous: Anonymous::Off,
            passive_ports: None,
            udp_ports: None,
            max_sessions: 64,
            max_waiting_logins: 32,
            max_sessions_per_host: 16,
            login_timeout: Duration::from_secs(30),
            max_host_login_failures: 10,
            max_streams: 64,
            max_file_size: None,
            idle_timeout: Duration::from_secs(300),
            max_login_failures: 3,
            max_line: 4096,
            // As long as the client's default --timeout: TCP's backoff after a 20 s outage
            // leaves up to about 40 s without a byte.
            data_timeout: Duration::from_secs(60),
            login_failure_delay: Duration::from_millis(300),
            tune: TunerConfig {
                control: BufferControl::new(true),
                end: "server",
                ..TunerConfig::untuned()
            },
            tls: None,
            require_tls: false,
            allow_third_party: false,
            third_party_networks: ThirdPartyNetworks::default(),
            tls_reuse: TlsReuse::Required,
            transfer_log: None,
        }
    }
}

/// The accounts of a running server, replaceable while it runs.
#[derive(Clone)]
pub struct Accounts(Arc<Shared>);

impl Accounts {
    /// Logins from now on are checked against `users`; refused when that would leave no way
    /// to log in.
    pub fn replace(&self, users: Users) -> anyhow::Result<()> {
        if users.is_empty() && self.0.config.anonymous == Anonymous::Off {
            anyhow::bail!("no account left and no anonymous logins: the old accounts stay");
        }
        self.0.verifier.set_users(users);
        Ok(())
    }
}

/// State shared by all sessions of one server.
#[derive(Debug)]
struct Shared {
    config: ServerConfig,
    sandbox: Sandbox,
    /// Logged-in sessions.
    sessions: AtomicUsize,
    next_session: AtomicU64,
    /// Connections that have not logged in yet, each with what closes it.
    waiting: Mutex<WaitingLogins<Arc<tokio::sync::Notify>>>,
    /// Sessions and failed logins per source address.
    hosts: Mutex<HostLimits>,
    /// The threads that check passwords.
    verifier: Verifier,
    /// What UDP transfers taught the sender about the path to each client address.
    udp_paths: Mutex<HashMap<IpAddr, (Instant, SharedMemory)>>,
    /// `--transfer-log`, open.
    transfer_log: Option<xferlog::TransferLog>,
}

/// One path's [`RateMemory`], shared by the transfers over it.
type SharedMemory = Arc<Mutex<RateMemory>>;

/// How long what a path taught is trusted, and how many paths are remembered.
const UDP_PATH_TRUST: Duration = Duration::from_secs(3600);
const UDP_PATHS: usize = 4096;

impl Shared {
    /// What UDP transfers taught the sender about the path to `ip`, shared with the next ones
    /// (forgotten after an hour; the oldest go first when many clients came).
    fn udp_memory(&self, ip: IpAddr) -> SharedMemory {
        let mut paths = self.udp_paths.lock().unwrap_or_else(|e| e.into_inner());
        let now = Instant::now();
        paths.retain(|_, (at, _)| now.duration_since(*at) < UDP_PATH_TRUST);
        if paths.len() >= UDP_PATHS && !paths.contains_key(&ip) {
            if let Some(oldest) = paths.iter().min_by_key(|(_, (at, _))| *at).map(|(k, _)| *k) {
                paths.remove(&oldest);
            }
        }
        let entry = paths.entry(ip).or_insert_with(|| (now, Arc::default()));
        entry.0 = now;
        entry.1.clone()
    }

    fn hosts(&self) -> std::sync::MutexGuard<'_, HostLimits> {
        self.hosts.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// A bound server, ready to [`Server::run`].
#[derive(Debug)]
pub struct Server {
    listener: TcpListener,
    shared: Arc<Shared>,
}

impl Server {
    /// Checks the configuration and binds the control port.
    pub async fn bind(config: ServerConfig) -> anyhow::Result<Server> {
        let sandbox = Sandbox::new(&config.root)
            .with_context(|| format!("cannot serve {}", config.root.display()))?;
        if config.users.is_empty() && config.anonymous == Anonymous::Off {
            anyhow::bail!(
                "no way to log in: give --user, --users, --anonymous or --anonymous-write"
            );
        }
        let listener = TcpListener::bind(config.listen)
            .await
            .with_context(|| format!("cannot listen on {}", config.listen))?;
        keep_freed_memory_short();
        // One checking thread per core: logins never take more than the machine has.
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get().min(4));
        let verifier = Verifier::start(config.users.clone(), config.anonymous, threads)
            .context("cannot start the password-checking threads")?;
        let transfer_log = match &config.transfer_log {
            Some(p) => Some(
                xferlog::TransferLog::open(p)
                    .with_context(|| format!("cannot open the transfer log {}", p.display()))?,
            ),
            None => None,
        };
        let hosts = HostLimits::new(config.max_sessions_per_host, config.max_host_login_failures);
        let max_waiting = config.max_waiting_logins;
        Ok(Server {
            listener,
            shared: Arc::new(Shared {
                config,
                sandbox,
                sessions: AtomicUsize::new(0),
                next_session: AtomicU64::new(1),
                waiting: Mutex::new(WaitingLogins::new(max_waiting)),
                hosts: Mutex::new(hosts),
                verifier,
                udp_paths: Mutex::new(HashMap::new()),
                transfer_log,
            }),
        })
    }

    /// What replaces the accounts of the running server (`SIGHUP`: the users file again).
    pub fn accounts(&self) -> Accounts {
        Accounts(self.shared.clone())
    }

    /// The address the control port is bound to (useful with port 0).
    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// Accepts clients until the task is dropped.
    pub async fn run(self) -> anyhow::Result<()> {
        loop {
            let (stream, peer) = match self.listener.accept().await {
                Ok(x) => x,
                Err(e) => {
                    // Out of descriptors and the like: back off instead of spinning.
                    tracing::warn!("accept failed: {e}");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            };
            // Commands and replies go one at a time: a lost one is resent by the timeout alone.
            fatpipe_net::socket::for_conversation(&stream);
            let shared = self.shared.clone();
            tokio::spawn(async move {
                if !shared.hosts().admit(peer.ip()) {
                    let why = format!(
                        "{} sessions from this address already",
                        shared.config.max_sessions_per_host
                    );
                    tracing::info!(%peer, "refused: {why}");
                    let mut stream = stream;
                    let _ = stream
                        .write_all(
                            format!("421 Too many sessions ({why}), try again later\r\n")
                                .as_bytes(),
                        )
                        .await;
                    return;
                }
                let _host = HostSlot(shared.clone(), peer.ip());
                let id = shared.next_session.fetch_add(1, Ordering::Relaxed);
                let evict = Arc::new(tokio::sync::Notify::new());
                let oldest = shared.waiting().arrive(id, evict.clone());
                if let Some(oldest) = oldest {
                    oldest.notify_one();
                }
                let _waiting = Waiting(shared.clone(), id);
                if let Err(e) = session::run(shared, stream, id, evict).await {
                    tracing::debug!(%peer, "session {id} ended: {e:#}");
                }
            });
        }
    }
}

/// Makes memory that transfers free go back to the system. Every MODE E connection reads
/// through a 1 MiB buffer; glibc's malloc raises its mmap threshold after the first such buffer
/// is freed and from then on keeps them in per-thread arenas, so a server that once ran many
/// streams held that memory for good (48 MB after 32 four-stream uploads on loopback, hundreds
/// of MB after bursts of many-stream transfers). A fixed threshold keeps large buffers in their
/// own mappings, returned when freed.
fn keep_freed_memory_short() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only changes allocator parameters; called before any transfer runs.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 256 * 1024);
    }
}

/// Gives a source address's session slot back when its session ends, however it ends.
struct HostSlot(Arc<Shared>, std::net::IpAddr);

impl Drop for HostSlot {
    fn drop(&mut self) {
        self.0.hosts().leave(self.1, Instant::now());
    }
}

/// Takes a connection out of the waiting logins when its session ends, however it ends.
struct Waiting(Arc<Shared>, u64);

impl Drop for Waiting {
    fn drop(&mut self) {
        self.0.waiting().leave(self.1);
    }
}

/// A logged-in session's place among `--max-sessions`, given back when the session ends.
struct SessionSlot(Arc<Shared>);

impl Drop for SessionSlot {
    fn drop(&mut self) {
        self.0.sessions.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Shared {
    fn waiting(&self) -> std::sync::MutexGuard<'_, WaitingLogins<Arc<tokio::sync::Notify>>> {
        self.waiting.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Session `id` logged in: it leaves the waiting logins and takes a place among the
    /// sessions, unless all are taken (then `None`: turned away).
    fn logged_in(self: &Arc<Self>, id: u64) -> Option<SessionSlot> {
        self.waiting().leave(id);
        let active = self.sessions.fetch_add(1, Ordering::SeqCst);
        let slot = SessionSlot(self.clone());
        (active < self.config.max_sessions).then_some(slot)
    }
}

/// How the first line `fatpipe serve` prints begins; the bound address follows.
const ANNOUNCEMENT: &str = "fatpipe serve: listening on ";

/// The line a server run from the command line prints when it is ready: scripts and tests read
/// the port from it ([`announced_addr`]).
pub fn announcement(addr: SocketAddr, root: &str) -> String {
    format!("{ANNOUNCEMENT}{addr}, root {root}")
}

/// The address in an [`announcement`].
pub fn announced_addr(line: &str) -> Option<SocketAddr> {
    line.strip_prefix(ANNOUNCEMENT)?
        .split(',')
        .next()?
        .parse()
        .ok()
}
