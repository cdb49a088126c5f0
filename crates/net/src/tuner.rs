//! One data connection under the conductor: it samples `TCP_INFO`, the buffers and the pump,
//! feeds the connection's plan (buffer law and pacing law), applies its decisions, writes
//! telemetry, and keeps what the transfer summary reports (peak buffer memory, caps met). Time
//! comes in as an argument.

use crate::buffers::{accounted, shortfalls, Accounted, BufferControl};
use crate::live::Live;
use crate::tcpinfo::tcp_stats;
use crate::telemetry::{unix_now, StatsFile};
use crate::Pump;
use fatpipe_tune::law::Buffers;
use fatpipe_tune::telemetry::{Event, Record};
use fatpipe_tune::{CongestionControl, Pacing, Params, Plan, Role, Sample, Tuning};
use std::collections::BTreeSet;
use std::io;
use std::net::TcpStream;
use std::os::fd::AsFd;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Everything a tuner needs besides the socket.
#[derive(Debug, Clone)]
pub struct TunerConfig {
    /// The mode.
    pub tuning: Tuning,
    /// The laws' knobs.
    pub params: Params,
    /// How buffers are set here.
    pub control: BufferControl,
    /// Where samples go, if anywhere.
    pub stats: Option<StatsFile>,
    /// `client` or `server`, for the records.
    pub end: &'static str,
    /// How a sending connection is paced; `None`: TCP pacing when the stream count grows,
    /// none otherwise.
    pub pacing: Option<Pacing>,
    /// The congestion control of a sending connection (`TCP_CONGESTION`); `None`: the
    /// system's default.
    pub cc: Option<CongestionControl>,
    /// Where each connection leaves its latest sample for a progress line, if anywhere.
    pub live: Option<Arc<Live>>,
}

impl TunerConfig {
    /// Buffers left to the kernel and no telemetry: what a connection runs when the caller
    /// asked for no tuning (its pacing law still runs).
    pub fn untuned() -> TunerConfig {
        TunerConfig {
            tuning: Tuning::Kernel,
            params: Params::default(),
            control: BufferControl::new(false),
            stats: None,
            end: "",
            pacing: None,
            cc: None,
            live: None,
        }
    }
}

/// What a finished transfer's tuning amounted to.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TuneSummary {
    /// Peak of this end's buffer in its role (receive buffer of a receiver, send buffer of a
    /// sender), as the kernel accounts it.
    pub peak_local: u64,
    /// Peak buffer the peer announced, if it announced any.
    pub peak_peer: Option<u64>,
    /// System limits that held a buffer below what the law asked.
    pub capped: Vec<String>,
    /// Why a connection could not be paced as its pacing law asked, if one could not.
    pub unpaced: Option<String>,
    /// The congestion control the sending connections ran (the first one's).
    pub cc: Option<CongestionControl>,
}

impl TuneSummary {
    /// One summary for a transfer over several connections: buffers summed (memory in use at
    /// once), the peer's largest announcement, every cap met.
    pub fn combine(all: &[TuneSummary]) -> TuneSummary {
        let mut capped: Vec<String> = all.iter().flat_map(|s| s.capped.clone()).collect();
        capped.sort();
        capped.dedup();
        TuneSummary {
            peak_local: all.iter().map(|s| s.peak_local).sum(),
            peak_peer: all.iter().filter_map(|s| s.peak_peer).max(),
            capped,
            unpaced: all.iter().find_map(|s| s.unpaced.clone()),
            cc: all.iter().find_map(|s| s.cc.clone()),
        }
    }
}

/// The plan of one data connection, driven on its socket.
pub struct Tuner {
    plan: Plan,
    cfg: TunerConfig,
    role: Role,
    sock: TcpStream,
    /// This end's and the peer's port of the data connection, for the records.
    ports: (u16, u16),
    /// The peer's address.
    peer: std::net::IpAddr,
    pump: Arc<Pump>,
    started: Instant,
    next_at: Instant,
    probe_rtt: Option<Duration>,
    peer_buffer: Option<u64>,
    last: (Instant, u64),
    summary: TuneSummary,
    caps: BTreeSet<String>,
    /// Caps met at set-up, reported with the first record.
    initial_caps: Vec<String>,
    /// The CPU clock of the thread that moves the connection's bytes (the one that started
    /// the tuner, on the connection's callback).
    clock: Option<crate::thread_clock::ThreadClock>,
}

impl Tuner {
    /// Starts the plan on a connected socket: applies the buffer law's after-connect buffers
    /// and the pacing law's first pacing (a failure to pace is reported, not fatal).
    pub fn start(
        cfg: TunerConfig,
        pacing: Pacing,
        role: Role,
        sock: &TcpStream,
        pump: Arc<Pump>,
        now: Instant,
    ) -> io::Result<Tuner> {
        let plan = Plan::new(cfg.tuning, role, &cfg.params, pacing);
        let setup = plan.setup();
        // Buffers set before connecting and kept: a cap that held them shows only now.
        let kept = Buffers {
            rcvbuf: setup
                .before_connect
                .rcvbuf
                .filter(|_| setup.after_connect.rcvbuf.is_none()),
            sndbuf: setup
                .before_connect
                .sndbuf
                .filter(|_| setup.after_connect.sndbuf.is_none()),
        };
        let mut initial = shortfalls(&kept, accounted(sock.as_fd())?);
        let peer = sock.peer_addr()?;
        let mut t = Tuner {
            plan,
            cfg,
            role,
            sock: sock.try_clone()?,
            ports: (sock.local_addr()?.port(), peer.port()),
            peer: peer.ip(),
            pump,
            started: now,
            next_at: now,
            probe_rtt: None,
            peer_buffer: None,
            last: (now, 0),
            summary: TuneSummary::default(),
            caps: BTreeSet::new(),
            initial_caps: Vec::new(),
            clock: crate::thread_clock::ThreadClock::current(),
        };
        initial.extend(t.cfg.control.apply(sock.as_fd(), &setup.after_connect)?);
        t.caps.extend(initial.iter().cloned());
        t.initial_caps = initial;
        if role == Role::Sender {
            t.summary.cc = crate::congestion::choose(
                sock.as_fd(),
                t.cfg.cc.as_ref(),
                t.cfg.pacing,
                &mut t.caps,
            );
        }
        if let Some(pace) = t.plan.pace_at_setup() {
            t.pace(pace);
        }
        Ok(t)
    }

    /// Applies a pacing; a failure is logged and kept for the summary. A connection running
    /// fatpipe's BPF congestion control is left alone: the program paces it itself.
    fn pace(&mut self, pace: fatpipe_tune::Pace) {
        if self.summary.cc == Some(CongestionControl::Bic { paced: true }) {
            return;
        }
        if let Err(e) = crate::pacing::apply(self.sock.as_fd(), pace) {
            tracing::warn!("cannot pace a data connection: {e}");
            self.summary.unpaced.get_or_insert(e.to_string());
        }
    }

    /// Paces the connection as `pacing`'s law starts (a connection started unpaced that gets
    /// siblings).
    pub fn start_pacing(&mut self, pacing: Pacing) {
        if let Some(pace) = pacing.law().setup() {
            self.pace(pace);
        }
    }

    /// Switches the connection to congestion control `cc` (a refusal is kept for the
    /// summary).
    pub fn set_cc(&mut self, cc: &CongestionControl) {
        self.summary.cc =
            crate::congestion::choose(self.sock.as_fd(), Some(cc), None, &mut self.caps);
    }

    /// Starts the law at `bytes` (a `setsockopt` size) and applies it at once if the law
    /// took it: a MODE E connection opened after its siblings had grown their windows.
    pub fn seed(&mut self, bytes: u64) -> io::Result<()> {
        if self.plan.seed(bytes) {
            let fd = self.sock.as_fd();
            let set = Buffers {
                rcvbuf: Some(bytes),
                sndbuf: None,
            };
            self.caps.extend(self.cfg.control.apply(fd, &set)?);
            self.cfg.control.clamp(fd, bytes)?;
        }
        Ok(())
    }

    /// The transfer now runs `streams` connections in all (see `Law::set_streams`).
    pub fn set_streams(&mut self, streams: u32) {
        self.plan.set_streams(streams);
    }

    /// The sending peer paces its connections (see `Law::sender_paces`).
    pub fn sender_paces(&mut self) {
        self.plan.sender_paces();
    }

    /// Time until the law wants its next sample.
    pub fn due_in(&self, now: Instant) -> Duration {
        self.next_at.saturating_duration_since(now)
    }

    /// A control-channel round trip just measured (an `SBUF` answered by the peer).
    pub fn on_probe_rtt(&mut self, rtt: Duration) {
        self.probe_rtt = Some(rtt);
    }

    /// The peer announced its buffer size.
    pub fn on_peer_buffer(&mut self, bytes: u64) {
        self.peer_buffer = Some(bytes);
        self.summary.peak_peer = Some(self.summary.peak_peer.unwrap_or(0).max(bytes));
    }

    /// The connection's `TCP_INFO` now (zeros when it cannot be read).
    pub fn tcp(&self) -> fatpipe_tune::TcpStats {
        tcp_stats(self.sock.as_fd()).unwrap_or_default()
    }

    /// CPU time the thread that moves the connection's bytes has used so far.
    pub fn cpu_used(&self) -> Option<Duration> {
        self.clock.and_then(|c| c.used())
    }

    /// The send buffer as the kernel accounts it now.
    pub fn send_buffer(&self) -> u64 {
        accounted(self.sock.as_fd()).map_or(0, |a| a.sndbuf)
    }

    /// This end's buffer in its role, as the kernel accounts it now.
    pub fn current_buffer(&self) -> u64 {
        self.in_role(accounted(self.sock.as_fd()).unwrap_or_default())
    }

    /// Of both buffers, the one this end's role sizes.
    fn in_role(&self, a: Accounted) -> u64 {
        match self.role {
            Role::Receiver => a.rcvbuf,
            Role::Sender => a.sndbuf,
        }
    }

    /// The address of the connection's peer.
    pub fn peer_ip(&self) -> std::net::IpAddr {
        self.peer
    }

    /// Samples now, due or not (the transfer has ended).
    pub fn final_sample(&mut self, now: Instant) {
        self.next_at = self.next_at.min(now);
        let _ = self.tick(now);
    }

    /// Samples if due; returns a buffer size to announce to the peer, if the law wants one.
    pub fn tick(&mut self, now: Instant) -> Option<u64> {
        if now < self.next_at {
            return None;
        }
        let fd = self.sock.as_fd();
        let bufs = accounted(fd).unwrap_or_default();
        let bytes = self.pump.bytes();
        let tcp = tcp_stats(fd).ok();
        // Timed when the kernel's counters were read, not when the tick was due: the laws
        // time packet trains over a few milliseconds.
        let read_at = Instant::now();
        let sample = Sample {
            now: read_at.saturating_duration_since(self.started),
            bytes,
            max_read: self.pump.take_max_read(),
            rcvbuf: bufs.rcvbuf,
            sndbuf: bufs.sndbuf,
            tcp,
            probe_rtt: self.probe_rtt,
            peer_buffer: self.peer_buffer,
        };
        let d = self.plan.on_sample(&sample);
        self.next_at = now + d.next.max(Duration::from_millis(1));
        let mut capped = std::mem::take(&mut self.initial_caps);
        capped.extend(
            self.cfg
                .control
                .apply(fd, &d.set)
                .unwrap_or_else(|e| vec![format!("setting buffers failed: {e}")]),
        );
        // On Linux 6.18 a larger SO_RCVBUF alone does not reopen a window that was once held
        // small (measured: stuck at 80 KiB for minutes); the window clamp has to rise with it.
        let clamp = d.clamp.or(d.set.rcvbuf);
        if let Some(c) = clamp {
            if let Err(e) = self.cfg.control.clamp(fd, c) {
                capped.push(format!("window clamp failed: {e}"));
            }
        }
        if let Some(pace) = d.pace {
            self.pace(pace);
        }
        if let Some(n) = d.read_buffer {
            self.pump.set_read_size(n);
        }
        let local = self.in_role(bufs);
        if let Some(live) = &self.cfg.live {
            live.record(self.ports, local, sample.tcp.as_ref(), read_at);
        }
        self.summary.peak_local = self.summary.peak_local.max(local);
        self.caps.extend(capped.iter().cloned());
        if let Some(stats) = &self.cfg.stats {
            let (t0, b0) = std::mem::replace(&mut self.last, (now, bytes));
            let dt = now.saturating_duration_since(t0).as_secs_f64().max(1e-6);
            let record = Record {
                unix_s: unix_now(),
                t: sample.now.as_secs_f64(),
                end: self.cfg.end.to_string(),
                port: self.ports.0,
                peer_port: self.ports.1,
                role: self.role,
                tuning: self.cfg.tuning.to_string(),
                bytes,
                mbit_s: bytes.saturating_sub(b0) as f64 * 8.0 / dt / 1e6,
                bdp: d.bdp,
                rcvbuf: bufs.rcvbuf,
                sndbuf: bufs.sndbuf,
                peer_buffer: self.peer_buffer,
                probe_rtt_ms: self.probe_rtt.map(|r| r.as_secs_f64() * 1e3),
                tcp: sample.tcp,
                set_rcvbuf: d.set.rcvbuf,
                set_sndbuf: d.set.sndbuf,
                clamp,
                pace: d.pace,
                cc: self.summary.cc.clone(),
                note: d.note,
                capped,
                kernel_pace: crate::congestion::kernel_pace(
                    self.sock.as_fd(),
                    self.summary.cc.as_ref(),
                ),
            };
            if let Err(e) = stats.write(&Event::Sample(Box::new(record))) {
                tracing::warn!("cannot write stats: {e}");
            }
        }
        d.announce
    }

    /// What the tuning amounted to so far.
    pub fn summary(&self) -> TuneSummary {
        TuneSummary {
            capped: self.caps.iter().cloned().collect(),
            ..self.summary.clone()
        }
    }
}

/// Sets the buffers a mode wants before `connect`/`listen` (they fix the window scale). A cap
/// that held them is reported by [`Tuner::start`] once connected, from the buffers kept.
pub fn before_connect(cfg: &TunerConfig, sock: impl AsFd) -> io::Result<()> {
    // Every mode's pre-connect buffers are the same for both roles.
    let setup = cfg.tuning.law(Role::Receiver, &cfg.params).setup();
    cfg.control.apply(sock.as_fd(), &setup.before_connect)?;
    match setup.clamp_before_connect {
        Some(bytes) => cfg.control.clamp(sock.as_fd(), bytes),
        None => Ok(()),
    }
}
