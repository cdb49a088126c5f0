//! The conductor: the one driver of a transfer's [`Transfer`] core on live sockets. It starts
//! each data connection the mover makes ([`Conductor::on_link`]), wakes when the core's
//! timeout is due, and carries out the core's actions: reads a connection's counters, sets
//! buffers, pacing and congestion control, asks the mover for more streams, writes the
//! telemetry, and keeps what the peer must be told. [`Conductor::run`] runs the mover in a
//! thread of its own and drives the transfer on this one; [`Conductor::step`] is one wake of
//! that loop for a caller with its own (an HTTP body on the runtime). The front-ends (the FTP
//! server's session, the FTP client's command loop, the HTTPS server) only relay: what the
//! core tells goes to the peer, the peer's announcements and round trips come in through
//! [`Conductor::on_peer_buffer`], [`Conductor::on_probe_rtt`] and [`Conductor::on_peer_paces`].

mod connection;
mod udp;

use crate::mode_e::{growth, Grow, OnStream, Requests};
use crate::{Pump, TuneSummary, TunerConfig};
use connection::DataConnection;
use fatpipe_tune::streams::StreamPolicy;
use fatpipe_tune::transfer::{Action, ConnId, Input, Note, Transfer, TransferSetup};
use fatpipe_tune::{CongestionControl, PacedBy, Pacing, Role};
use std::net::{IpAddr, TcpStream};
use std::os::fd::{AsFd, OwnedFd};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

pub use fatpipe_tune::transfer::Told;
pub use udp::{Datagrams, Packets, UdpEnd};

/// How often the conductor looks while nothing is due (no connection made yet).
const IDLE_TICK: Duration = Duration::from_millis(10);
/// Most actions carried out in one go (the core answers a handful per connection).
const MOST_ACTIONS: usize = 100_000;

/// The state the conductor drives, behind one lock (the mover's threads make connections
/// while the conductor's thread samples them).
struct Driven {
    core: Transfer,
    /// Each connection the core knows, by its [`ConnId`]; `None` where set-up failed.
    conns: Vec<Option<DataConnection>>,
    /// The mover's handle for more streams, on a sender whose stream count grows.
    grow: Option<Grow>,
    /// What the peer is to be told, kept until the conductor's loop hands it on.
    told: Vec<Told>,
    /// The control connection, whose RTT a receiving end without probes of its own uses, and
    /// the address of its peer (read once: it does not change).
    control: Option<(OwnedFd, Option<IpAddr>)>,
    /// A UDP channel's sending end, once opened ([`Conductor::open_udp_sender`]).
    udp: Option<udp::DrivenUdp>,
}

struct Shared {
    /// Whether the caller asked for tuning (else buffers are the kernel's and no summary).
    tuned: bool,
    /// How connections are tuned here (the untuned configuration when none was asked).
    cfg: TunerConfig,
    role: Role,
    driven: Mutex<Driven>,
}

/// Cores this process may run on (1 when unknown): the stream policy grows streams held by
/// the CPU up to them, and a cold start on a short path plans by them.
pub fn host_cores() -> u32 {
    std::thread::available_parallelism().map_or(1, |n| n.get() as u32)
}

/// The driver of one transfer, shared with the mover's connection callback.
#[derive(Clone)]
pub struct Conductor(Arc<Shared>);

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Conductor {
    /// A conductor for the `role` end of a transfer, its connections tuned as `cfg` says.
    pub fn new(cfg: Option<TunerConfig>, role: Role) -> Conductor {
        Self::build(cfg, role, Pacing::Off, None, true).0
    }

    /// A conductor for one connection of a front-end with no stream policy (an HTTP body):
    /// its buffer and pacing laws, and a sender's congestion control chosen as the path shows
    /// (random loss: bbr, as on an FTP data connection).
    pub fn one_connection(cfg: TunerConfig, role: Role) -> Conductor {
        Self::build(Some(cfg), role, Pacing::Off, None, true).0
    }

    /// The conductor of a sending transfer that starts with `start` streams; with a `policy`
    /// that count grows (its streams then paced, by TCP unless `cfg` says how), and the mover
    /// takes its requests for more streams from the [`Requests`] returned.
    pub fn sending(
        cfg: Option<TunerConfig>,
        policy: Option<StreamPolicy>,
        start: u32,
    ) -> (Conductor, Option<Requests>) {
        match policy {
            None => (Conductor::new(cfg, Role::Sender), None),
            Some(p) => Self::build(cfg, Role::Sender, Pacing::Tcp, Some((p, start)), true),
        }
    }

    /// The core for `cfg` (`default_pacing` where it names none); a sender whose user chose
    /// no congestion control chooses one as the path shows, where `choose_cc`.
    fn build(
        cfg: Option<TunerConfig>,
        role: Role,
        default_pacing: Pacing,
        streams: Option<(StreamPolicy, u32)>,
        choose_cc: bool,
    ) -> (Conductor, Option<Requests>) {
        let tuned = cfg.is_some();
        let cfg = cfg.unwrap_or_else(TunerConfig::untuned);
        let setup = TransferSetup {
            role,
            tuning: tuned.then(|| (cfg.tuning, cfg.params.clone())),
            pacing: cfg.pacing,
            default_pacing,
            cc: cfg.cc.clone(),
            forced: cfg.control.forced(),
            choose_cc,
            cores: host_cores(),
        };
        let (grow, requests) = match streams {
            Some(_) => {
                let (g, r) = growth();
                (Some(g), Some(r))
            }
            None => (None, None),
        };
        let driven = Driven {
            core: Transfer::new(setup, streams, Instant::now()),
            conns: Vec::new(),
            grow,
            told: Vec::new(),
            control: None,
            udp: None,
        };
        let shared = Shared {
            tuned,
            cfg,
            role,
            driven: Mutex::new(driven),
        };
        (Conductor(Arc::new(shared)), requests)
    }

    fn driven(&self) -> MutexGuard<'_, Driven> {
        lock(&self.0.driven)
    }

    /// Starts a connection a mover made (`reused`: kept from the previous transfer) under the
    /// core. Connections stay untouched when neither tuning nor pacing was asked for.
    pub fn link(&self, sock: &TcpStream, pump: &Arc<Pump>, reused: bool) {
        let mut d = self.driven();
        if d.core.open(reused, Instant::now()).is_some() {
            self.carry_out(&mut d, Some((sock, pump)));
        }
    }

    /// [`Conductor::link`] as a callback, for the MODE E channel's connections.
    pub fn on_link(&self) -> OnStream {
        let c = self.clone();
        Arc::new(move |sock, pump, reused| c.link(sock, pump, reused))
    }

    /// Which end of the transfer this conductor drives.
    pub fn role(&self) -> Role {
        self.0.role
    }

    /// The control connection, whose lowest RTT is the path's own where its peer is the
    /// data's ([`Input::ControlRtt`]): a sender's policies read queues against it, and a
    /// receiver takes it as its RTT probe. A receiver that times probes of its own (the client)
    /// does not watch it.
    pub fn watch_control(&self, control: OwnedFd) {
        let peer = socket2::SockRef::from(&control)
            .peer_addr()
            .ok()
            .and_then(|a| a.as_socket())
            .map(|a| a.ip());
        self.driven().control = Some((control, peer));
    }

    /// Runs `work` (the mover) in a thread of its own and drives the transfer on this one until
    /// it ends (see [`Conductor::step`]), then samples every connection once more and
    /// announces what is still to be told (a connection opened after the last step). Returns
    /// what `work` returned; `None` if it panicked.
    pub fn run<T: Send>(
        &self,
        work: impl FnOnce() -> T + Send,
        mut announce: impl FnMut(Told),
    ) -> Option<T> {
        let (done, ended) = mpsc::channel::<()>();
        let result = std::thread::scope(|scope| {
            let worker = scope.spawn(move || {
                let r = work();
                let _ = done.send(());
                r
            });
            loop {
                let wait = self.step(&mut announce);
                match ended.recv_timeout(wait) {
                    Err(RecvTimeoutError::Timeout) => {}
                    Ok(()) | Err(RecvTimeoutError::Disconnected) => break,
                }
            }
            worker.join().ok()
        });
        self.finish();
        let told = std::mem::take(&mut self.driven().told);
        told.into_iter().for_each(announce);
        result
    }

    /// One wake of the transfer: the core takes the control connection's RTT, does
    /// what is due, and what the peer must be told (a buffer size, that the sender paces) goes
    /// to `announce`. Returns how long to wait before the next step.
    pub fn step(&self, announce: &mut impl FnMut(Told)) -> Duration {
        let (told, wait) = {
            let mut d = self.driven();
            if let Some(rtt) = control_rtt(&d) {
                d.core.handle(Input::ControlRtt(rtt), Instant::now());
            }
            let now = Instant::now();
            d.core.handle_timeout(now);
            self.carry_out(&mut d, None);
            let due = d.core.poll_timeout();
            let wait = due.map_or(IDLE_TICK, |t| t.saturating_duration_since(Instant::now()));
            (std::mem::take(&mut d.told), wait)
        };
        told.into_iter().for_each(announce);
        wait
    }

    /// Samples every connection once more, due or not, when the transfer has ended: every
    /// connection leaves at least one record, however short the transfer.
    pub fn finish(&self) {
        let mut d = self.driven();
        d.core.handle(Input::Ended, Instant::now());
        self.carry_out(&mut d, None);
    }

    /// Carries out the core's actions until it has none; `new`: the socket and pump of the
    /// connection just opened, for its start.
    fn carry_out(&self, d: &mut Driven, mut new: Option<(&TcpStream, &Arc<Pump>)>) {
        let cfg = &self.0.cfg;
        for _ in 0..MOST_ACTIONS {
            let Some(action) = d.core.poll_action() else {
                return;
            };
            match action {
                Action::Start { conn, setup, cc } => {
                    let Some((sock, pump)) = new.take() else {
                        d.core.handle(Input::Dropped(conn), Instant::now());
                        continue;
                    };
                    let made = DataConnection::start(
                        cfg,
                        self.0.role,
                        sock,
                        pump.clone(),
                        &setup,
                        cc.as_ref(),
                        Instant::now(),
                    );
                    let input = match &made {
                        Ok(c) => Input::Started {
                            conn,
                            runs: c.runs(),
                            buffer: c.current_buffer(),
                            // Only a receiver kept from the previous transfer starts there.
                            window: match self.0.role {
                                Role::Receiver => c.window(),
                                Role::Sender => 0,
                            },
                        },
                        // One the peer closed already (a server refusing a transfer sent
                        // ahead) is no warning: the transfer's own answer says why.
                        Err(e) if gone(e) => {
                            tracing::debug!("a data connection closed before it was tuned: {e}");
                            Input::Dropped(conn)
                        }
                        Err(e) => {
                            tracing::warn!("cannot tune a data connection: {e}");
                            Input::Dropped(conn)
                        }
                    };
                    d.conns.resize_with(conn.0 + 1, || None);
                    d.conns[conn.0] = made.ok();
                    d.core.handle(input, Instant::now());
                }
                Action::Sample(conn) => {
                    if let Some(c) = conn_mut(d, conn) {
                        let counters = c.counters();
                        // Timed when the kernel's counters were read, not when the sample
                        // was due: the laws time packet trains over a few milliseconds.
                        let input = Input::Counters { conn, counters };
                        d.core.handle(input, Instant::now());
                    }
                }
                Action::Apply {
                    conn,
                    sample,
                    decision,
                    pace,
                } => {
                    if let Some(c) = conn_mut(d, conn) {
                        c.apply(cfg, &sample, decision, pace, Instant::now());
                    }
                }
                Action::Seed { conn, bytes } => {
                    if let Some(Err(e)) = conn_mut(d, conn).map(|c| c.seed(cfg, bytes)) {
                        tracing::warn!("cannot seed a data connection's buffer: {e}");
                    }
                }
                Action::Pace { conn, pace } => {
                    if let Some(c) = conn_mut(d, conn) {
                        c.pace(pace);
                    }
                }
                Action::SetCc { conn, cc } => {
                    if let Some(c) = conn_mut(d, conn) {
                        c.set_cc(&cc);
                        let runs = c.runs();
                        d.core.handle(Input::Runs { conn, runs }, Instant::now());
                    }
                }
                Action::Observe => {
                    let live = d.conns.iter().flatten();
                    let streams: Vec<_> = live.clone().map(DataConnection::tcp).collect();
                    let cpu: Vec<_> = live.clone().map(DataConnection::cpu_used).collect();
                    let memory = live.map(DataConnection::send_buffer).sum();
                    let input = Input::Observed {
                        streams: &streams,
                        cpu: &cpu,
                        memory,
                    };
                    d.core.handle(input, Instant::now());
                }
                Action::OpenStreams(n) => {
                    if let Some(g) = &d.grow {
                        g.open(n);
                    }
                }
                Action::Tell(t) => d.told.push(t),
                Action::Note(note) => self.note(note),
                Action::Udp(e) => self.udp_event(d, e),
                Action::UdpFailed(e) => self.udp_failed(d, e),
            }
        }
        tracing::warn!("the transfer core kept asking; its actions wait for the next wake");
    }

    /// Logs a decision of the transfer's and writes it to the telemetry.
    fn note(&self, note: Note) {
        let cfg = &self.0.cfg;
        let (cc, reason) = match note {
            Note::Streams { streams, reason } => {
                tracing::info!(streams, "-p auto: {reason}");
                if let Some(s) = &cfg.stats {
                    s.streams(cfg.end, streams, &reason);
                }
                return;
            }
            Note::Control { cc, reason } => {
                tracing::info!("{reason}");
                (cc.kernel_name().to_string(), reason)
            }
            Note::PeerPaces { by, reason } => {
                tracing::debug!("{reason}");
                (by.to_string(), reason)
            }
        };
        if let Some(s) = &cfg.stats {
            s.cc(cfg.end, &cc, &reason);
        }
    }

    /// The sending peer said what paces its connections: every connection's law, and every
    /// later one's, is told; so are the log and the telemetry.
    pub fn on_peer_paces(&self, by: &PacedBy) {
        let mut d = self.driven();
        d.core.handle(Input::PeerPaces(by.clone()), Instant::now());
        self.carry_out(&mut d, None);
    }

    /// A control-channel round trip, for every connection.
    pub fn on_probe_rtt(&self, rtt: Duration) {
        self.driven()
            .core
            .handle(Input::ProbeRtt(rtt), Instant::now());
    }

    /// The peer's announced buffer, for every connection; returns this end's largest buffer.
    pub fn on_peer_buffer(&self, bytes: u64) -> Option<u64> {
        let mut d = self.driven();
        d.core.handle(Input::PeerBuffer(bytes), Instant::now());
        let live = d.conns.iter_mut().flatten();
        live.map(|c| {
            c.on_peer_buffer(bytes);
            c.current_buffer()
        })
        .max()
    }

    /// What the tuning of all connections amounted to; `None` without tuning.
    pub fn summary(&self) -> Option<TuneSummary> {
        if !self.0.tuned {
            return None;
        }
        let d = self.driven();
        let all: Vec<TuneSummary> = d.conns.iter().flatten().map(|c| c.summary()).collect();
        (!all.is_empty()).then(|| TuneSummary::combine(&all))
    }

    /// The congestion control the senders switched to on random loss, if they did.
    pub fn chosen_cc(&self) -> Option<CongestionControl> {
        self.driven().core.chosen_cc()
    }

    /// How the stream count and the congestion control were chosen, for the transfer's
    /// summary: how the streams were paced, the stream policy's decisions in order, then a
    /// change of congestion control; empty when nothing was chosen.
    pub fn decisions(&self) -> Vec<String> {
        let d = self.driven();
        let unpaced = d.conns.iter().flatten().find_map(|c| c.summary().unpaced);
        d.core.decisions(unpaced)
    }
}

/// Whether `e` says the connection is gone (closed or reset by the peer).
fn gone(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        std::io::ErrorKind::NotConnected
            | std::io::ErrorKind::ConnectionReset
            | std::io::ErrorKind::BrokenPipe
    )
}

/// A connection the core names, if its set-up succeeded.
fn conn_mut(d: &mut Driven, conn: ConnId) -> Option<&mut DataConnection> {
    d.conns.get_mut(conn.0).and_then(Option::as_mut)
}

/// The control connection's RTT, when it stands for the data path's: its peer is the host the
/// data comes from. In a copy between two servers the control peer is the client, often
/// beside this server (a few microseconds away) while the data crosses the WAN: its RTT would
/// size every buffer for a LAN.
fn control_rtt(d: &Driven) -> Option<Duration> {
    let (fd, peer) = d.control.as_ref()?;
    let data_peer = d.conns.iter().flatten().next().map(DataConnection::peer_ip);
    (data_peer == Some((*peer)?))
        .then(|| crate::tcpinfo::min_rtt(fd.as_fd()))
        .flatten()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::buffers::BufferControl;
    use crate::tcpinfo::tcp_stats;
    use crate::Pump;
    use fatpipe_tune::{Params, Tuning};
    use std::net::TcpListener;

    /// The receiving end of a loopback connection, its receive buffer set to 1 MiB (2 MiB as
    /// the kernel accounts it), and its window clamp after `starter` saw it.
    fn clamp_after_start(reused: bool) -> i32 {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let _sender = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (receiver, _) = l.accept().unwrap();
        let control = BufferControl::new(false);
        let cfg = TunerConfig {
            tuning: Tuning::Drs,
            params: Params::default(),
            control,
            stats: None,
            end: "test",
            pacing: None,
            cc: None,
            live: None,
        };
        let set = fatpipe_tune::law::Buffers {
            rcvbuf: Some(1 << 20),
            sndbuf: None,
        };
        control.apply(receiver.as_fd(), &set).unwrap();
        let start = Conductor::new(Some(cfg), Role::Receiver).on_link();
        start(&receiver, &Arc::new(Pump::default()), reused);
        crate::sockopt::get(receiver.as_fd(), libc::IPPROTO_TCP, libc::TCP_WINDOW_CLAMP).unwrap()
    }

    #[test]
    fn a_kept_receiving_connection_starts_its_law_at_its_own_window() {
        // Kept from the previous transfer: the law starts at the 1 MiB the connection has
        // (and clamps the window there, as a seeded law does).
        assert_eq!(clamp_after_start(true), 1 << 20);
        // A new connection starts its law from scratch: no clamp set.
        assert!(clamp_after_start(false) < 1 << 20);
    }

    /// A `-p auto` sending conductor that starts with `streams` streams, buffers forced where
    /// this process may, with one loopback connection made: its sending end and the receiver.
    fn auto_sender(streams: u32) -> (Conductor, TcpStream, TcpStream) {
        let c = auto_conductor(streams);
        let (sender, receiver) = link(&c);
        (c, sender, receiver)
    }

    /// A loopback connection made for `c`: its sending end and the receiver.
    fn link(c: &Conductor) -> (TcpStream, TcpStream) {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let sender = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (receiver, _) = l.accept().unwrap();
        c.on_link()(&sender, &Arc::new(Pump::default()), false);
        (sender, receiver)
    }

    /// A `-p auto` sending conductor that starts with `streams` streams, buffers forced where
    /// this process may.
    fn auto_conductor(streams: u32) -> Conductor {
        let policy = StreamPolicy::new(fatpipe_tune::streams::StreamLimits {
            max: 16,
            max_memory: None,
        });
        let cfg = TunerConfig {
            tuning: Tuning::Drs,
            params: Params::default(),
            control: BufferControl::new(true),
            stats: None,
            end: "test",
            pacing: None,
            cc: None,
            live: None,
        };
        Conductor::sending(Some(cfg), Some(policy), streams).0
    }

    /// Whether TCP paces the sending end of a new connection of a `-p auto` transfer that
    /// starts with `streams` streams.
    fn paced_from_the_start(streams: u32) -> bool {
        let (_c, sender, _receiver) = auto_sender(streams);
        tcp_stats(sender.as_fd()).unwrap().max_pacing_rate != u64::MAX
    }

    #[test]
    fn auto_streams_are_paced_once_there_are_several() {
        // A lone stream's line-rate bursts show the receiver the path's capacity: unpaced where
        // its buffers are not capped (root forces them).
        let forced = BufferControl::new(true).forced();
        assert_eq!(paced_from_the_start(1), !forced);
        // A transfer that starts with several (a copy's later file) paces them all.
        assert!(paced_from_the_start(4));
    }

    #[test]
    fn streams_started_together_tell_the_receiver_they_are_paced() {
        // Their arrivals show each one's pacing rate, no train of the bottleneck's.
        let told = |streams| {
            let (c, _sender, _receiver) = auto_sender(streams);
            let mut told = Vec::new();
            c.step(&mut |t| told.push(t));
            told
        };
        assert!(told(4).contains(&Told::Paced(PacedBy::Tcp)));
        // A count grown from one is not told (the trains keep the memory down).
        assert!(!told(1).iter().any(|t| matches!(t, Told::Paced(_))));
    }

    #[test]
    fn what_a_connection_made_after_the_last_step_tells_is_announced() {
        // A short transfer's connection, made after the conductor's first step, ends before
        // the next one: what it tells (that its streams are paced) is still announced.
        let c = auto_conductor(4);
        let mut told = Vec::new();
        c.run(
            || {
                std::thread::sleep(std::time::Duration::from_millis(30));
                link(&c)
            },
            |t| told.push(t),
        );
        assert!(told.contains(&Told::Paced(PacedBy::Tcp)), "told {told:?}");
    }

    #[test]
    fn run_returns_the_work_s_result_and_survives_its_panic() {
        let c = Conductor::new(None, Role::Sender);
        let mut told = Vec::new();
        let r = c.run(
            || {
                std::thread::sleep(std::time::Duration::from_millis(50));
                7
            },
            |n| told.push(n),
        );
        assert_eq!(r, Some(7));
        assert!(told.is_empty(), "nothing to announce without connections");
        let r: Option<()> = c.run(|| panic!("a mover's bug"), |_| {});
        assert_eq!(r, None);
        assert!(c.summary().is_none(), "untuned");
        assert!(c.decisions().is_empty(), "a fixed count has no decisions");
    }
}
