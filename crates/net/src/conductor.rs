//! The conductor of one transfer: the one driver that owns the transfer's clock. It runs the
//! mover in a thread of its own ([`Conductor::run`]), starts a [`Tuner`] (the connection's
//! buffer and pacing laws) on each data connection as the mover makes it, samples them all
//! when due, runs the transfer's stream policy (`-p auto`) and asks the mover for more streams,
//! and writes the telemetry. The control side (the server's session task, the client's command
//! loop) only relays: the sizes the laws announce go to the peer, the peer's announcements and
//! round trips come in through [`Conductor::on_peer_buffer`] and [`Conductor::on_probe_rtt`].

use crate::mode_e::{growth, Grow, OnStream, Requests};
use crate::tcpinfo::tcp_stats;
use crate::{TuneSummary, Tuner, TunerConfig};
use fatpipe_tune::congestion::{CongestionControl, CongestionPolicy};
use fatpipe_tune::streams::{Observation, StreamPolicy};
use fatpipe_tune::{Pacing, Role};
use std::net::{IpAddr, TcpStream};
use std::os::fd::{AsFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// How often the stream policy looks at the streams.
const POLICY_TICK: Duration = Duration::from_millis(100);
/// How often the conductor looks while nothing is due (no connection made yet).
const IDLE_TICK: Duration = Duration::from_millis(10);

/// The stream policy of a sending transfer whose stream count grows, and the mover's handle.
struct Growing {
    policy: StreamPolicy,
    grow: Grow,
    /// Streams asked for so far.
    streams: u32,
    /// The transfer opened several streams at once (a cold start on a long path, or where an
    /// earlier transfer ended).
    together: bool,
}

/// The congestion-control policy of a sending transfer whose user chose none.
#[derive(Default)]
struct Choosing {
    policy: CongestionPolicy,
    /// The control chosen, once chosen: new connections start with it.
    chosen: Option<CongestionControl>,
    log: Vec<String>,
}

struct Shared {
    /// What tunes each connection; `None`: the caller asked for no tuning.
    cfg: Option<TunerConfig>,
    role: Role,
    pacing: Pacing,
    started: Instant,
    tuners: Mutex<Vec<Tuner>>,
    /// When the per-transfer policies look at the connections next.
    next_look: Mutex<Instant>,
    growing: Mutex<Option<Growing>>,
    /// The control connection, whose RTT a receiving end without probes of its own uses, and
    /// the address of its peer (read once: it does not change).
    control: Mutex<Option<(OwnedFd, Option<IpAddr>)>>,
    /// A sender whose user chose no congestion control: the policy that may choose one.
    choosing: Mutex<Option<Choosing>>,
    /// A receiver whose sending peer said it paces.
    peer_paces: AtomicBool,
    /// Cores this process may run on.
    cores: u32,
}

/// What a transfer's end has to tell its peer over the control channel while it runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Told {
    /// This end's buffer changed (drsFTP's `SBUF`), bytes.
    Buffer(u64),
    /// The sending end now runs a congestion control that paces itself (bbr): the receiving
    /// laws read its packets' spacing as its own pacing rate, not the bottleneck's.
    Paced(String),
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
        Self::build(cfg, role, Pacing::Off, None)
    }

    /// The conductor of a sending transfer that starts with `start` streams; with a `policy`
    /// that count grows (its streams then paced, by TCP unless `cfg` says how), and the mover
    /// takes its requests for more streams from the [`Requests`] returned.
    pub fn sending(
        cfg: Option<TunerConfig>,
        policy: Option<StreamPolicy>,
        start: u32,
    ) -> (Conductor, Option<Requests>) {
        let Some(p) = policy else {
            return (Conductor::new(cfg, Role::Sender), None);
        };
        let (grow, requests) = growth();
        let growing = Growing {
            policy: p.starting_at(start),
            grow,
            streams: start,
            together: start > 1,
        };
        let c = Self::build(cfg, Role::Sender, Pacing::Tcp, Some(growing));
        (c, Some(requests))
    }

    /// `cfg`'s pacing or else `pacing`; a sender whose user chose no congestion control
    /// chooses one as the path shows.
    fn build(
        cfg: Option<TunerConfig>,
        role: Role,
        pacing: Pacing,
        growing: Option<Growing>,
    ) -> Conductor {
        let now = Instant::now();
        let pacing = cfg.as_ref().and_then(|c| c.pacing).unwrap_or(pacing);
        let choose = role == Role::Sender && cfg.as_ref().is_some_and(|c| c.cc.is_none());
        Conductor(Arc::new(Shared {
            cfg,
            role,
            pacing,
            started: now,
            tuners: Mutex::default(),
            next_look: Mutex::new(now + POLICY_TICK),
            growing: Mutex::new(growing),
            control: Mutex::default(),
            choosing: Mutex::new(choose.then(Choosing::default)),
            peer_paces: AtomicBool::new(false),
            cores: std::thread::available_parallelism().map_or(1, |n| n.get() as u32),
        }))
    }

    fn tuners(&self) -> MutexGuard<'_, Vec<Tuner>> {
        lock(&self.0.tuners)
    }

    /// The callback for the mover: starts a tuner on each connection it makes. Connections
    /// stay untouched when neither tuning nor pacing was asked for.
    pub fn on_link(&self) -> OnStream {
        let c = self.clone();
        Arc::new(move |sock, pump, reused| {
            let s = &c.0;
            if s.cfg.is_none() && s.pacing == Pacing::Off {
                return;
            }
            let mut cfg = s.cfg.clone().unwrap_or_else(TunerConfig::untuned);
            if let Some(cc) = lock(&s.choosing).as_ref().and_then(|c| c.chosen.clone()) {
                cfg.cc = Some(cc);
            }
            match Tuner::start(
                cfg,
                c.pacing_now(),
                s.role,
                sock,
                pump.clone(),
                Instant::now(),
            ) {
                Ok(mut t) => {
                    // A receiving connection opened after its siblings have grown starts at its
                    // share of their window (the kernel accounts twice the size set) instead of growing
                    // from scratch, and one kept from the previous transfer at its own (a law
                    // started afresh would judge a window the sender has not refilled since
                    // the pause between files); connections opened together start up normally.
                    if s.role == Role::Receiver {
                        let (sibling, siblings) = {
                            let all = c.tuners();
                            (all.iter().map(Tuner::current_buffer).max(), all.len())
                        };
                        let own = t.current_buffer();
                        if let Some(b) = receiver_seed(sock, own, sibling, siblings, reused) {
                            if let Err(e) = t.seed(b) {
                                tracing::warn!("cannot seed a data connection's buffer: {e}");
                            }
                        }
                    }
                    if s.peer_paces.load(Ordering::Relaxed) {
                        t.sender_paces();
                    }
                    let mut all = c.tuners();
                    all.push(t);
                    let n = all.len() as u32;
                    all.iter_mut().for_each(|t| t.set_streams(n));
                }
                Err(e) => tracing::warn!("cannot tune a data connection: {e}"),
            }
        })
    }

    /// A receiving end that sends no RTT probes of its own (drsFTP's server: it can only
    /// answer them) takes the control connection's RTT as the path's.
    pub fn watch_control(&self, control: OwnedFd) {
        let peer = socket2::SockRef::from(&control)
            .peer_addr()
            .ok()
            .and_then(|a| a.as_socket())
            .map(|a| a.ip());
        *lock(&self.0.control) = Some((control, peer));
    }

    /// Runs `work` (the mover) in a thread of its own and drives the transfer on this one until
    /// it ends: samples and decides when due, hands what the peer must be told (a buffer size,
    /// once that the sender paces) to `announce`, and samples every connection once more at
    /// the end. Returns what `work` returned; `None` if it panicked.
    pub fn run<T: Send>(
        &self,
        work: impl FnOnce() -> T + Send,
        mut announce: impl FnMut(Told),
    ) -> Option<T> {
        let mut told_paced: Option<String> = None;
        let (done, ended) = mpsc::channel::<()>();
        let result = std::thread::scope(|scope| {
            let worker = scope.spawn(move || {
                let r = work();
                let _ = done.send(());
                r
            });
            loop {
                if let Some(n) = self.tick(Instant::now()) {
                    announce(Told::Buffer(n));
                }
                // Told again when it changes: streams started together are paced by TCP, and
                // random loss may later switch them to bbr, which the receiver (and a client
                // that leaves TCP on random loss) must hear.
                if let Some(cc) = self.paced_by().filter(|cc| told_paced.as_ref() != Some(cc)) {
                    told_paced = Some(cc.clone());
                    announce(Told::Paced(cc));
                }
                let wait = self.due_in(Instant::now()).unwrap_or(IDLE_TICK);
                match ended.recv_timeout(wait) {
                    Err(RecvTimeoutError::Timeout) => {}
                    Ok(()) | Err(RecvTimeoutError::Disconnected) => break,
                }
            }
            worker.join().ok()
        });
        self.finish(Instant::now());
        result
    }

    /// The control connection's RTT, when it stands for the data path's: its peer is the host
    /// the data comes from. In a copy between two servers the control peer is the client,
    /// often beside this server (a few microseconds away) while the data crosses the WAN: its
    /// RTT would size every buffer for a LAN.
    fn control_rtt(&self) -> Option<Duration> {
        let (peer, stats) = {
            let control = lock(&self.0.control);
            let (fd, peer) = control.as_ref()?;
            ((*peer)?, tcp_stats(fd.as_fd()).ok()?)
        };
        let data_peer = self.tuners().first().map(Tuner::peer_ip);
        (data_peer == Some(peer) && stats.min_rtt_us > 0)
            .then(|| Duration::from_micros(stats.min_rtt_us.into()))
    }

    /// Samples every connection that is due and runs the stream policy when it is due;
    /// returns a buffer size to announce, if one changed.
    fn tick(&self, now: Instant) -> Option<u64> {
        if self.0.role == Role::Receiver {
            if let Some(r) = self.control_rtt() {
                self.on_probe_rtt(r);
            }
        }
        let announce = self
            .tuners()
            .iter_mut()
            .fold(None, |announce, t| t.tick(now).or(announce));
        self.look(now);
        announce
    }

    /// The pacing a new connection starts with: the transfer's, unless it waits (see
    /// [`Conductor::waits_to_pace`]).
    fn pacing_now(&self) -> Pacing {
        let streams = lock(&self.0.growing).as_ref().map(|g| g.streams);
        if streams.is_some_and(|n| self.waits_to_pace(n)) {
            Pacing::Off
        } else {
            self.0.pacing
        }
    }

    /// Whether this sending end's connections run a congestion control that paces itself
    /// (bbr, chosen on random loss or asked for; fatpipe's BIC), or TCP paces streams that
    /// started together: their slow starts run side by side, each arriving at its own pacing
    /// rate, which the receivers would read as trains of the bottleneck and share among the
    /// streams (every window then grew about 10 % per RTT: a cold 2 GiB at 200 ms with six
    /// streams moved 664 Mbit/s against 745 starting from one). TCP's pacing of a count grown
    /// from one stream is not told: there the trains keep the memory within 3 x BDP (told, the
    /// stock profile's `-p auto` moved 582-599 Mbit/s instead of 557 but with 67-70 MiB
    /// instead of 35).
    fn paced_by(&self) -> Option<String> {
        if self.0.role != Role::Sender || self.tuners().is_empty() {
            return None;
        }
        let chosen = lock(&self.0.choosing)
            .as_ref()
            .and_then(|c| c.chosen.clone());
        let asked = self.0.cfg.as_ref().and_then(|c| c.cc.clone());
        let together = lock(&self.0.growing).as_ref().is_some_and(|g| g.together);
        chosen
            .or(asked)
            .filter(CongestionControl::paces_itself)
            .map(|cc| cc.user_name().to_string())
            .or_else(|| (together && self.0.pacing != Pacing::Off).then(|| "tcp".to_string()))
    }

    /// The sending peer said it paces its connections (`cc`: the congestion control that does,
    /// or `tcp`): every connection's law, and every later one's, is told; so are the log and
    /// the telemetry.
    pub fn on_peer_paces(&self, cc: &str) {
        self.0.peer_paces.store(true, Ordering::Relaxed);
        self.tuners().iter_mut().for_each(Tuner::sender_paces);
        let reason = format!(
            "the sender paces its connections ({cc}): packet spacing is its pacing rate, no \
             train of the bottleneck's"
        );
        tracing::debug!("{reason}");
        if let Some(cfg) = &self.0.cfg {
            if let Some(stats) = &cfg.stats {
                stats.cc(cfg.end, cc, &reason);
            }
        }
    }

    /// Whether a `-p auto` transfer at `streams` streams leaves them unpaced for now: a lone
    /// stream that TCP would pace by default, when buffers are not capped (pacing keeps
    /// siblings from ending each other's slow start; alone, it would only hide the path's
    /// capacity from the receiver's packet trains; capped, a lone stream soon gets company).
    fn waits_to_pace(&self, streams: u32) -> bool {
        let s = &self.0;
        s.cfg.as_ref().is_some_and(|cfg| {
            s.pacing == Pacing::Tcp && cfg.pacing.is_none() && cfg.control.forced()
        }) && streams <= 1
    }

    /// Every connection's `TCP_INFO` and its thread's CPU time, in the order they were made,
    /// and the send buffers' memory: what the per-transfer policies observe.
    fn streams(&self) -> (Vec<fatpipe_tune::TcpStats>, Vec<Option<Duration>>, u64) {
        let tuners = self.tuners();
        let streams: Vec<_> = tuners.iter().map(Tuner::tcp).collect();
        let cpu: Vec<_> = tuners.iter().map(Tuner::cpu_used).collect();
        (streams, cpu, tuners.iter().map(Tuner::send_buffer).sum())
    }

    /// Whether a per-transfer policy still has something to decide.
    fn deciding(&self) -> bool {
        let growing = lock(&self.0.growing)
            .as_ref()
            .is_some_and(|g| !g.policy.is_settled());
        growing
            || lock(&self.0.choosing)
                .as_ref()
                .is_some_and(|c| c.chosen.is_none())
    }

    /// The per-transfer policies' look, if one is due: one observation of every connection
    /// for the stream policy and the congestion-control policy.
    fn look(&self, now: Instant) {
        if !self.deciding() {
            return;
        }
        {
            let mut next = lock(&self.0.next_look);
            if now < *next {
                return;
            }
            *next = now + POLICY_TICK;
        }
        let (streams, cpu, memory) = self.streams();
        let obs = Observation {
            now: now.saturating_duration_since(self.0.started),
            streams: &streams,
            memory,
            cpu: &cpu,
            cores: self.0.cores,
        };
        self.choose_cc(&obs);
        self.grow_streams(&obs);
    }

    /// The congestion-control policy's decision: on random loss every connection (and every
    /// later one) switches.
    fn choose_cc(&self, obs: &Observation<'_>) {
        let mut g = lock(&self.0.choosing);
        let Some(ch) = g.as_mut().filter(|c| c.chosen.is_none()) else {
            return;
        };
        let Some(change) = ch.policy.observe(obs) else {
            return;
        };
        self.tuners().iter_mut().for_each(|t| t.set_cc(&change.cc));
        ch.chosen = Some(change.cc.clone());
        tracing::info!("{}", change.reason);
        if let Some(cfg) = &self.0.cfg {
            if let Some(stats) = &cfg.stats {
                stats.cc(cfg.end, change.cc.kernel_name(), &change.reason);
            }
        }
        ch.log.push(change.reason);
    }

    /// Whether the senders run bbr because the congestion-control policy chose it.
    fn model_based(&self) -> bool {
        lock(&self.0.choosing)
            .as_ref()
            .is_some_and(|c| c.chosen == Some(CongestionControl::FOR_RANDOM_LOSS))
    }

    /// The stream policy's decision: more streams when it says so, and its decisions to the
    /// log and the telemetry.
    fn grow_streams(&self, obs: &Observation<'_>) {
        let mut g = lock(&self.0.growing);
        let Some(gr) = g.as_mut() else {
            return;
        };
        if self.model_based() {
            gr.policy.model_based();
        }
        let settled = gr.policy.is_settled();
        let change = gr.policy.observe(obs);
        if let Some(c) = &change {
            if self.waits_to_pace(gr.streams) {
                // The lone stream ran unpaced; with company it is paced like the rest.
                self.tuners()
                    .iter_mut()
                    .for_each(|t| t.start_pacing(self.0.pacing));
            }
            gr.grow.open(c.add);
            gr.streams += c.add;
        }
        let said = match (&change, settled, gr.policy.is_settled()) {
            (Some(c), _, _) => Some(c.reason.clone()),
            (None, false, true) => gr.policy.log.last().cloned(),
            _ => None,
        };
        if let Some(reason) = said {
            tracing::info!(streams = gr.streams, "-p auto: {reason}");
            if let Some(cfg) = &self.0.cfg {
                if let Some(stats) = &cfg.stats {
                    stats.streams(cfg.end, gr.streams, &reason);
                }
            }
        }
    }

    /// Samples every connection once more, due or not, when the transfer has ended: every
    /// connection leaves at least one record, however short the transfer.
    fn finish(&self, now: Instant) {
        self.tuners().iter_mut().for_each(|t| t.final_sample(now));
    }

    /// Time until the next sample or policy look is due; `None` while nothing is to be done.
    fn due_in(&self, now: Instant) -> Option<Duration> {
        let look = self
            .deciding()
            .then(|| lock(&self.0.next_look).saturating_duration_since(now));
        let tuners = self.tuners().iter().map(|t| t.due_in(now)).min();
        tuners.into_iter().chain(look).min()
    }

    /// A control-channel round trip, for every connection.
    pub fn on_probe_rtt(&self, rtt: Duration) {
        self.tuners().iter_mut().for_each(|t| t.on_probe_rtt(rtt));
    }

    /// The peer's announced buffer, for every connection; returns this end's largest buffer.
    pub fn on_peer_buffer(&self, bytes: u64) -> Option<u64> {
        let mut g = self.tuners();
        g.iter_mut().for_each(|t| t.on_peer_buffer(bytes));
        g.iter().map(Tuner::current_buffer).max()
    }

    /// What the tuning of all connections amounted to; `None` without tuning.
    pub fn summary(&self) -> Option<TuneSummary> {
        self.0.cfg.as_ref()?;
        let all: Vec<TuneSummary> = self.tuners().iter().map(Tuner::summary).collect();
        (!all.is_empty()).then(|| TuneSummary::combine(&all))
    }

    /// The congestion control the senders switched to on random loss, if they did.
    pub fn chosen_cc(&self) -> Option<CongestionControl> {
        lock(&self.0.choosing)
            .as_ref()
            .and_then(|c| c.chosen.clone())
    }

    /// How the stream count and the congestion control were chosen, for the transfer's
    /// summary: how the streams were paced, the stream policy's decisions in order, then a
    /// change of congestion control; empty when nothing was chosen.
    pub fn decisions(&self) -> Vec<String> {
        let mut out = Vec::new();
        if let Some(gr) = lock(&self.0.growing).as_ref() {
            let unpaced = self.tuners().iter().find_map(|t| t.summary().unpaced);
            out.push(match unpaced {
                Some(e) => format!("streams not paced: {e}"),
                None => self.0.pacing.why().unwrap_or_default().to_string(),
            });
            out.extend(gr.policy.log.iter().cloned());
        }
        if let Some(ch) = lock(&self.0.choosing).as_ref() {
            out.extend(ch.log.iter().cloned());
        }
        out
    }
}

/// Where a receiving connection's law starts (a `setsockopt` size), if not from scratch: at its
/// share of the largest sibling's window when that is well above its own (`own`, `sibling`:
/// buffers as the kernel accounts them, twice the size set; `siblings`: how many there are; the
/// path does not widen with the stream count, and the new connection's start-up grows its window
/// from there), else, for a connection kept from the previous transfer, at its own window.
fn receiver_seed(
    sock: &TcpStream,
    own: u64,
    sibling: Option<u64>,
    siblings: usize,
    reused: bool,
) -> Option<u64> {
    match sibling.filter(|&b| b > 2 * own) {
        Some(b) => Some(b / 2 / (siblings as u64 + 1)),
        None if reused => {
            let window = tcp_stats(sock.as_fd()).map_or(0, |s| s.rcv_wnd.into());
            Some(window.max(own / 2))
        }
        None => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::buffers::BufferControl;
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

    #[test]
    fn a_new_receiving_connection_starts_at_its_share_of_its_siblings_window() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let s = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        // One sibling at 16 MiB as accounted (8 MiB set): the second connection gets half.
        assert_eq!(
            receiver_seed(&s, 128 << 10, Some(16 << 20), 1, false),
            Some(4 << 20)
        );
        // Beside seven: an eighth.
        assert_eq!(
            receiver_seed(&s, 128 << 10, Some(16 << 20), 7, false),
            Some(1 << 20)
        );
        // A sibling not well above its own window: from scratch.
        assert_eq!(receiver_seed(&s, 8 << 20, Some(16 << 20), 1, false), None);
    }

    /// A `-p auto` sending conductor that starts with `streams` streams, buffers forced where
    /// this process may, with one loopback connection made: its sending end and the receiver.
    fn auto_sender(streams: u32) -> (Conductor, TcpStream, TcpStream) {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let sender = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (receiver, _) = l.accept().unwrap();
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
        let (c, _requests) = Conductor::sending(Some(cfg), Some(policy), streams);
        c.on_link()(&sender, &Arc::new(Pump::default()), false);
        (c, sender, receiver)
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
        assert_eq!(auto_sender(4).0.paced_by().as_deref(), Some("tcp"));
        // A count grown from one is not told (the trains keep the memory down).
        assert_eq!(auto_sender(1).0.paced_by(), None);
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
