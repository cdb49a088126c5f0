//! One data connection under the conductor, the I/O half of the core's connection: it reads
//! the socket's counters, carries out the core's actions on it (buffers, clamp, pacing,
//! congestion control), writes its telemetry, and keeps what the transfer summary reports
//! (peak buffer memory, caps met, what the kernel refused).

use crate::buffers::{accounted, shortfalls, Accounted};
use crate::tcpinfo::tcp_stats;
use crate::telemetry::unix_now;
use crate::{Pump, TuneSummary, TunerConfig};
use fatpipe_tune::law::{Buffers, Decision, Setup};
use fatpipe_tune::telemetry::{Event, Record};
use fatpipe_tune::transfer::Counters;
use fatpipe_tune::{CongestionControl, Pace, Role, Sample};
use std::collections::BTreeSet;
use std::io;
use std::net::TcpStream;
use std::os::fd::AsFd;
use std::sync::Arc;
use std::time::Instant;

/// A data connection's socket as the conductor drives it.
pub(super) struct DataConnection {
    role: Role,
    sock: TcpStream,
    /// This end's and the peer's port, for the records.
    ports: (u16, u16),
    /// The peer's address.
    peer: std::net::IpAddr,
    pump: Arc<Pump>,
    /// When and at what byte count the previous record was written.
    last: (Instant, u64),
    summary: TuneSummary,
    caps: BTreeSet<String>,
    /// Caps met at set-up, reported with the first record.
    initial_caps: Vec<String>,
    /// The CPU clock of the thread that moves the connection's bytes (the one that made it,
    /// on the mover's callback).
    clock: Option<crate::thread_clock::ThreadClock>,
}

impl DataConnection {
    /// Carries out the core's [`fatpipe_tune::transfer::Action::Start`] on a connected socket:
    /// the law's buffers after connecting (and the caps that held those set before), and on
    /// a sender the congestion control `cc`.
    pub(super) fn start(
        cfg: &TunerConfig,
        role: Role,
        sock: &TcpStream,
        pump: Arc<Pump>,
        setup: &Setup,
        cc: Option<&CongestionControl>,
        now: Instant,
    ) -> io::Result<DataConnection> {
        // Buffers set before connecting and kept: a cap that held them shows only now.
        let kept = Buffers {
            rcvbuf: (setup.before_connect.rcvbuf).filter(|_| setup.after_connect.rcvbuf.is_none()),
            sndbuf: (setup.before_connect.sndbuf).filter(|_| setup.after_connect.sndbuf.is_none()),
        };
        let mut initial = shortfalls(&kept, accounted(sock.as_fd())?);
        let peer = sock.peer_addr()?;
        let mut c = DataConnection {
            role,
            sock: sock.try_clone()?,
            ports: (sock.local_addr()?.port(), peer.port()),
            peer: peer.ip(),
            pump,
            last: (now, 0),
            summary: TuneSummary::default(),
            caps: BTreeSet::new(),
            initial_caps: Vec::new(),
            clock: crate::thread_clock::ThreadClock::current(),
        };
        initial.extend(cfg.control.apply(sock.as_fd(), &setup.after_connect)?);
        c.caps.extend(initial.iter().cloned());
        c.initial_caps = initial;
        if role == Role::Sender {
            c.summary.cc = crate::congestion::choose(sock.as_fd(), cc, cfg.pacing, &mut c.caps);
        }
        Ok(c)
    }

    /// The congestion control the kernel runs on the connection (a sender's), if known.
    pub(super) fn runs(&self) -> Option<CongestionControl> {
        self.summary.cc.clone()
    }

    /// The window the connection advertises now, bytes (0 when unknown).
    pub(super) fn window(&self) -> u64 {
        tcp_stats(self.sock.as_fd()).map_or(0, |s| s.rcv_wnd.into())
    }

    /// Applies a pacing; a failure is logged and kept for the summary.
    pub(super) fn pace(&mut self, pace: Pace) {
        if let Err(e) = crate::pacing::apply(self.sock.as_fd(), pace) {
            tracing::warn!("cannot pace a data connection: {e}");
            self.summary.unpaced.get_or_insert(e.to_string());
        }
    }

    /// Switches the connection to congestion control `cc` (a refusal is kept for the
    /// summary).
    pub(super) fn set_cc(&mut self, cc: &CongestionControl) {
        self.summary.cc =
            crate::congestion::choose(self.sock.as_fd(), Some(cc), None, &mut self.caps);
    }

    /// Starts the receive buffer and the window clamp at `bytes` (the law was seeded there).
    pub(super) fn seed(&mut self, cfg: &TunerConfig, bytes: u64) -> io::Result<()> {
        let fd = self.sock.as_fd();
        let set = Buffers {
            rcvbuf: Some(bytes),
            sndbuf: None,
        };
        self.caps.extend(cfg.control.apply(fd, &set)?);
        cfg.control.clamp(fd, bytes)
    }

    /// The connection's `TCP_INFO` now (zeros when it cannot be read).
    pub(super) fn tcp(&self) -> fatpipe_tune::TcpStats {
        tcp_stats(self.sock.as_fd()).unwrap_or_default()
    }

    /// CPU time the thread that moves the connection's bytes has used so far.
    pub(super) fn cpu_used(&self) -> Option<std::time::Duration> {
        self.clock.and_then(|c| c.used())
    }

    /// The send buffer as the kernel accounts it now.
    pub(super) fn send_buffer(&self) -> u64 {
        accounted(self.sock.as_fd()).map_or(0, |a| a.sndbuf)
    }

    /// This end's buffer in its role, as the kernel accounts it now.
    pub(super) fn current_buffer(&self) -> u64 {
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
    pub(super) fn peer_ip(&self) -> std::net::IpAddr {
        self.peer
    }

    /// The peer announced its buffer.
    pub(super) fn on_peer_buffer(&mut self, bytes: u64) {
        self.summary.peak_peer = Some(self.summary.peak_peer.unwrap_or(0).max(bytes));
    }

    /// The connection's counters now.
    pub(super) fn counters(&self) -> Counters {
        let fd = self.sock.as_fd();
        let bufs = accounted(fd).unwrap_or_default();
        Counters {
            bytes: self.pump.bytes(),
            max_read: self.pump.take_max_read(),
            rcvbuf: bufs.rcvbuf,
            sndbuf: bufs.sndbuf,
            tcp: tcp_stats(fd).ok(),
        }
    }

    /// Carries out a law's decision on `sample` (read at `now`): buffers, window clamp,
    /// `pace`, read size; then its live line and its telemetry record.
    pub(super) fn apply(
        &mut self,
        cfg: &TunerConfig,
        sample: &Sample,
        d: Decision,
        pace: Option<Pace>,
        now: Instant,
    ) {
        let mut capped = std::mem::take(&mut self.initial_caps);
        let clamp = self.set_buffers(cfg, &d, &mut capped);
        if let Some(p) = pace {
            self.pace(p);
        }
        if let Some(n) = d.read_buffer {
            self.pump.set_read_size(n);
        }
        let local = match self.role {
            Role::Receiver => sample.rcvbuf,
            Role::Sender => sample.sndbuf,
        };
        if let Some(live) = &cfg.live {
            live.record(self.ports, local, sample.tcp.as_ref(), now);
        }
        self.summary.peak_local = self.summary.peak_local.max(local);
        self.caps.extend(capped.iter().cloned());
        let Some(stats) = &cfg.stats else {
            return;
        };
        let (t0, b0) = std::mem::replace(&mut self.last, (now, sample.bytes));
        let dt = now.saturating_duration_since(t0).as_secs_f64().max(1e-6);
        let record = Record {
            unix_s: unix_now(),
            t: sample.now.as_secs_f64(),
            end: cfg.end.to_string(),
            port: self.ports.0,
            peer_port: self.ports.1,
            role: self.role,
            tuning: cfg.tuning.to_string(),
            bytes: sample.bytes,
            mbit_s: sample.bytes.saturating_sub(b0) as f64 * 8.0 / dt / 1e6,
            bdp: d.bdp,
            rcvbuf: sample.rcvbuf,
            sndbuf: sample.sndbuf,
            peer_buffer: sample.peer_buffer,
            probe_rtt_ms: sample.probe_rtt.map(|r| r.as_secs_f64() * 1e3),
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

    /// Sets a decision's buffers and window clamp; returns the clamp set, problems to `capped`.
    fn set_buffers(
        &self,
        cfg: &TunerConfig,
        d: &Decision,
        capped: &mut Vec<String>,
    ) -> Option<u64> {
        let fd = self.sock.as_fd();
        capped.extend(
            cfg.control
                .apply(fd, &d.set)
                .unwrap_or_else(|e| vec![format!("setting buffers failed: {e}")]),
        );
        // On Linux 6.18 a larger SO_RCVBUF alone does not reopen a window that was once held
        // small (measured: stuck at 80 KiB for minutes); the window clamp has to rise with it.
        let clamp = d.clamp.or(d.set.rcvbuf);
        if let Some(c) = clamp {
            if let Err(e) = cfg.control.clamp(fd, c) {
                capped.push(format!("window clamp failed: {e}"));
            }
        }
        clamp
    }

    /// What the tuning amounted to so far.
    pub(super) fn summary(&self) -> TuneSummary {
        TuneSummary {
            capped: self.caps.iter().cloned().collect(),
            ..self.summary.clone()
        }
    }
}
