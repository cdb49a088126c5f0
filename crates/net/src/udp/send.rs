//! The sending end of a UDP transfer: one loop that reads the receiver's reports, lets the
//! controller set the rate, and sends batches of packets (resends first) as the rate allows,
//! each batch one `sendmsg` with UDP segmentation offload where the kernel has it.

use super::ledger::Ledger;
use super::{
    net, size_buffers, tell, unexpected, Link, UdpConfig, UdpStatus, UdpSummary, PROBE,
    REPORT_EVERY,
};
use crate::admission::Proof;
use crate::mode_e::OnStream;
use crate::telemetry::unix_now;
use crate::{Moved, Mover, Pump, PumpError};
use fatpipe_proto::udp::{packets, DataHeader, Message, Report, HEADER, PACKET_RANGE, TRAIN};
use fatpipe_tune::rate::{Feedback, RateControl, RateLimits};
use fatpipe_tune::telemetry::{Event, RateEvent, SegmentEvent};
use quinn_udp::{Transmit, UdpSocketState};
use std::collections::VecDeque;
use std::fs::File;
use std::io::{self, ErrorKind};
use std::net::{SocketAddr, TcpStream, UdpSocket};
use std::os::fd::AsFd;
use std::os::unix::fs::FileExt;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Most packets in one batch.
const BATCH: usize = 32;
/// Most bytes one segmentation-offload send carries: a UDP datagram's largest payload.
const GSO_BYTES: usize = 65_507;
/// The round trip of data is the lowest sample over this span: about a round trip of reports,
/// so that a queue the path holds now counts (the tail's resends wait for it) while one report
/// held back by a TCP retransmission does not.
const RTT_WINDOW: Duration = Duration::from_millis(100);
/// Longest the sender stays silent while the receiver lacks packets.
const STALL: Duration = Duration::from_secs(2);
/// How often the receiver is told how the controller sees the transfer.
const STATUS_EVERY: Duration = Duration::from_millis(250);
/// Longest the loop waits before looking at the reports again.
const TICK: Duration = Duration::from_millis(1);
/// A batch covers about this much time at the current rate (fewer, larger sends: the loop and
/// the system calls cost per batch, not per packet).
const BATCH_TIME: f64 = 0.0005;
/// Batches whose send times are kept for the tail's loss detection (a few round trips).
const SEND_LOG: usize = 1 << 16;
/// No report for this long means the reports are held up (the receiver sends one every
/// [`REPORT_EVERY`]).
const REPORTS_LATE: Duration = Duration::from_millis(3 * REPORT_EVERY.as_millis() as u64);
/// Sending time the token bucket keeps when the loop falls behind, s.
const BURST_TIME: f64 = 0.004;

/// Sends `length` bytes of `file` from `offset` as UDP packets; `link` is the transfer's TCP
/// data connection, which carries the receiver's reports.
pub struct UdpSender<'a> {
    /// The TCP data connection.
    pub link: TcpStream,
    /// The file.
    pub file: &'a File,
    /// Where the transfer starts in the file.
    pub offset: u64,
    /// Bytes to send.
    pub length: u64,
    /// Packet size, controller, limits.
    pub config: UdpConfig,
    /// The session's data token, shown or checked on the TCP connection first.
    pub proof: Option<Proof>,
}

impl Mover for UdpSender<'_> {
    fn run(self: Box<Self>, pump: &Arc<Pump>, _on_link: &OnStream) -> Result<Moved, PumpError> {
        pump.attach(&self.link).map_err(PumpError::Write)?;
        let s = *self;
        Proof::on_plain(s.proof, &s.link).map_err(PumpError::Write)?;
        let mut link = Link::new(s.link.try_clone().map_err(PumpError::Write)?);
        let packet = s
            .config
            .packet
            .unwrap_or_else(|| path_packet(&s.link))
            .clamp(*PACKET_RANGE.start(), *PACKET_RANGE.end());
        let hello = Message::Hello {
            packet,
            length: s.length,
        };
        link.send(&hello).map_err(PumpError::Write)?;
        let (port, token) = match link.wait(s.config.timeout).map_err(PumpError::Write)? {
            Message::Ready { port, token } => (port, token),
            m => return Err(PumpError::Write(unexpected(&m))),
        };
        let summary = match open(&s.link, port, s.config.force_buffers) {
            Ok(udp) => {
                let mut run = Sending::start(&s, packet, token, link, udp);
                match run.go(pump)? {
                    Some(summary) => summary,
                    None => {
                        fall_back(&mut run.link, &s, pump)?;
                        run.summary(true)
                    }
                }
            }
            Err(e) => {
                tracing::warn!("cannot send UDP to the receiver ({e}): sending over TCP");
                fall_back(&mut link, &s, pump)?;
                UdpSummary {
                    control: s.config.control.to_string(),
                    fell_back: true,
                    ..UdpSummary::default()
                }
            }
        };
        Ok(Moved {
            bytes: s.length,
            streams: 1,
            reused: 0,
            udp: Some(summary),
        })
    }
}

/// One UDP send in progress.
struct Sending<'a> {
    file: &'a File,
    offset: u64,
    length: u64,
    payload: u64,
    packet: usize,
    token: u64,
    config: UdpConfig,
    link: Link,
    sock: UdpSocket,
    state: UdpSocketState,
    to: SocketAddr,
    ledger: Ledger,
    control: Box<dyn RateControl>,
    start: Instant,
    rtt: Duration,
    /// File data of the batch being built.
    data: Vec<u8>,
    /// When each batch went out: (time, the next transmission number after it).
    sends: VecDeque<(Instant, u64)>,
    /// The round trip of a data packet and its report (the queue included): the lowest of the
    /// samples of the last [`RTT_WINDOW`].
    data_rtt: Duration,
    rtts: VecDeque<(Instant, Duration)>,
    /// Recent loss share (smoothed over about ten reports), and when the receiver is next told.
    loss: f64,
    next_status: Instant,
}

/// The sending UDP socket, connected to the receiver's `port` at the peer's address of `link`.
fn open(
    link: &TcpStream,
    port: u16,
    force: bool,
) -> io::Result<(UdpSocket, UdpSocketState, SocketAddr)> {
    let local = link.local_addr()?;
    let to = SocketAddr::new(link.peer_addr()?.ip(), port);
    let sock = UdpSocket::bind(SocketAddr::new(local.ip(), 0))?;
    sock.connect(to)?;
    size_buffers(&sock, force, true);
    let state = UdpSocketState::new((&sock).into())?;
    Ok((sock, state, to))
}

/// The largest datagram the path carries whole: its MTU as the TCP connection beside found it,
/// less the IP and UDP headers (1472 on an Ethernet path, 8972 with jumbo frames, the range's
/// top on loopback, where per-packet work then costs a sixth per byte); the seed's 1470 where
/// the MTU cannot be read.
fn path_packet(link: &TcpStream) -> u16 {
    let headers = match link.peer_addr() {
        Ok(SocketAddr::V6(_)) => 48,
        _ => 28,
    };
    crate::tcpinfo::path_mtu(link.as_fd())
        .ok()
        .filter(|&m| m > headers)
        .map_or(fatpipe_proto::udp::PACKET, |m| {
            (m - headers).min(u32::from(u16::MAX)) as u16
        })
}

/// What the path taught earlier transfers, if anything.
fn recall(config: &UdpConfig) -> fatpipe_tune::rate::RateMemory {
    config
        .memory
        .as_ref()
        .map(|m| m.lock().unwrap_or_else(|e| e.into_inner()).clone())
        .unwrap_or_default()
}

/// UDP does not get through: the bytes go over the TCP connection instead, from the start.
fn fall_back(link: &mut Link, s: &UdpSender<'_>, pump: &Pump) -> Result<(), PumpError> {
    let w = net(true);
    link.send(&Message::Fallback { offset: 0 }).map_err(&w)?;
    pump.send_range(s.file, s.offset, s.length, &link.sock)?;
    // Reports the receiver sent before it read the fallback come first.
    loop {
        match link.wait(s.config.timeout).map_err(&w)? {
            Message::Done { .. } => break,
            Message::Report(_) => {}
            m => return Err(w(unexpected(&m))),
        }
    }
    let _ = link.sock.shutdown(std::net::Shutdown::Write);
    Ok(())
}

impl<'a> Sending<'a> {
    fn start(
        s: &UdpSender<'a>,
        packet: u16,
        token: u64,
        link: Link,
        (sock, state, to): (UdpSocket, UdpSocketState, SocketAddr),
    ) -> Sending<'a> {
        let payload = u64::from(packet) - HEADER as u64;
        let rtt = crate::tcpinfo::tcp_stats(s.link.as_fd())
            .ok()
            .map(|t| Duration::from_micros(u64::from(t.min_rtt_us.max(t.rtt_us))))
            .filter(|d| !d.is_zero())
            .unwrap_or(Duration::from_millis(100));
        let limits = RateLimits {
            start: s.config.start_rate,
            max: s.config.max_rate,
        };
        Sending {
            file: s.file,
            offset: s.offset,
            length: s.length,
            payload,
            packet: usize::from(packet),
            token,
            control: s.config.control.build(limits, &recall(&s.config), token),
            config: s.config.clone(),
            link,
            sock,
            state,
            to,
            ledger: Ledger::new(packets(s.length, payload)),
            start: Instant::now(),
            rtt,
            data: Vec::new(),
            sends: VecDeque::new(),
            data_rtt: rtt,
            rtts: VecDeque::new(),
            loss: 0.0,
            next_status: Instant::now(),
        }
    }

    /// Sends until the receiver has everything; `None` when UDP does not get through (no
    /// packet arrived within [`PROBE`], or the system refuses to send it).
    fn go(&mut self, pump: &Pump) -> Result<Option<UdpSummary>, PumpError> {
        let w = PumpError::Write;
        // The rate it starts at is the first decision (a remembered one, or the default).
        self.log_rate(Duration::ZERO, &Feedback::default(), 0);
        let batch_bytes = (BATCH * self.packet) as f64;
        // The train goes out back to back, whatever the starting rate.
        let mut tokens = batch_bytes.max((TRAIN as usize * self.packet) as f64);
        let mut filled = Instant::now();
        let mut last: Option<Report> = None;
        let mut done = self.ledger.complete() && self.length == 0;
        let mut batch = Vec::with_capacity(BATCH * self.packet);
        let mut written = 0u64;
        let mut through = false;
        let mut tail = false;
        let mut last_sent = Instant::now();
        while !done {
            pump.check()?;
            for m in self.link.poll().map_err(w)? {
                match m {
                    Message::Report(r) => {
                        let now = Instant::now();
                        through |= r.received > 0;
                        self.on_report(&r, last.as_ref(), now)?;
                        if r.written > written {
                            pump.add((r.written - written) as usize);
                            written = r.written;
                        }
                        last = Some(r);
                    }
                    Message::Done { .. } => done = true,
                    m => return Err(w(unexpected(&m))),
                }
            }
            if done {
                break;
            }
            let now = Instant::now();
            if !through && now.duration_since(self.start) > PROBE {
                tracing::warn!("no UDP packet reached the receiver within 2 s: sending over TCP");
                return Ok(None);
            }
            if now.duration_since(self.link.heard) > self.config.timeout {
                return Err(w(io::Error::new(
                    ErrorKind::TimedOut,
                    "no report from the receiver within the --timeout",
                )));
            }
            let bytes_per_s = self.control.rate() / 8.0;
            // Time the loop lost (the scheduler, a full socket) is made up, within a few ms.
            let train = (TRAIN + 1).saturating_sub(self.ledger.next_tx()) as f64;
            let burst = batch_bytes
                .max(bytes_per_s * BURST_TIME)
                .max(train * self.packet as f64);
            tokens = (tokens + bytes_per_s * now.duration_since(filled).as_secs_f64()).min(burst);
            filled = now;
            let want = (bytes_per_s * BATCH_TIME / self.packet as f64).clamp(1.0, BATCH as f64);
            if tokens < want * self.packet as f64 {
                let wait = (want * self.packet as f64 - tokens) / bytes_per_s.max(1.0);
                self.wait(Duration::from_secs_f64(wait).min(TICK), false)?;
                continue;
            }
            let n = ((tokens / self.packet as f64) as usize).min(BATCH);
            // New packets wait while more are out than the controller allows beyond the last
            // one reported (start-up: a stalled report must not let an overshoot run on).
            let reported = last.as_ref().map_or(0, |r| r.max_tx);
            let out = self.ledger.next_tx().saturating_sub(1 + reported);
            let held = self
                .control
                .in_flight()
                .is_some_and(|cap| out >= cap.max(2 * TRAIN));
            let sent = self.fill(&mut batch, n, !held).map_err(PumpError::Read)?;
            if sent == 0 {
                // Nothing may go and nothing went for a while, though the receiver lacks
                // packets: whatever it still lacks is sent again (a stall is never silent).
                if now.duration_since(last_sent) > STALL {
                    tracing::warn!(
                        "udp: nothing sent for {:?} with {} packets missing at the receiver; sending them again",
                        STALL,
                        self.ledger.missing()
                    );
                    self.ledger.find_lost(self.ledger.next_tx(), 1);
                    last_sent = now;
                }
                if !tail && self.ledger.all_sent_once() {
                    tail = true;
                    tracing::debug!(
                        "udp: every packet sent once after {:.2} s ({} sends so far)",
                        self.start.elapsed().as_secs_f64(),
                        self.ledger.transmissions
                    );
                }
                // Everything is out (or the window is): nothing later arrives to show a loss, so
                // what is still missing a round trip (and a quarter) after it was sent is sent
                // again. Not while held back, nor while no report came for a few report
                // intervals (one held up by a retransmission on the connection): the reports
                // are late, not the packets, and the packets they would show arrived.
                let reports_late = now.duration_since(self.link.heard) > REPORTS_LATE;
                if held || reports_late {
                    self.wait(TICK, false)?;
                    continue;
                }
                let age = self.data_rtt + self.data_rtt / 4 + Duration::from_millis(10);
                let sends = &mut self.sends;
                while sends.len() > 1 && sends[1].0 + age <= now {
                    sends.pop_front();
                }
                if let Some(&(at, tx)) = sends.front().filter(|(at, _)| *at + age <= now) {
                    // Twice each: a lost resend here costs another round trip and more.
                    self.ledger.find_lost(tx, 2);
                    sends.retain(|s| s.0 > at);
                }
                self.wait(TICK, false)?;
                continue;
            }
            if let Err(e) = self.transmit(&batch, pump)? {
                tracing::warn!("cannot send UDP to the receiver ({e}): sending over TCP");
                return Ok(None);
            }
            last_sent = now;
            self.sends.push_back((now, self.ledger.next_tx()));
            if self.sends.len() > SEND_LOG {
                self.sends.pop_front();
            }
            tokens -= batch.len() as f64;
        }
        tracing::debug!(
            "udp: the receiver has everything after {:.2} s",
            self.start.elapsed().as_secs_f64()
        );
        // The receiver has everything: closing the connection ends the transfer at both ends.
        let _ = self.link.sock.shutdown(std::net::Shutdown::Write);
        self.remember();
        Ok(Some(self.summary(false)))
    }

    fn on_report(
        &mut self,
        r: &Report,
        last: Option<&Report>,
        now: Instant,
    ) -> Result<(), PumpError> {
        let t = now.duration_since(self.start);
        // Decisions come from segments (the seed's controllers) or from the feedback (ours).
        let (state, rate) = (self.control.state(), self.control.rate());
        let done = self
            .ledger
            .on_report(r)
            .map_err(|e| PumpError::Write(io::Error::new(ErrorKind::InvalidData, e)))?;
        for seg in done {
            self.control.on_segment(t, &seg.loss);
            if let Some(stats) = &self.config.stats {
                stats.log(&Event::Segment(SegmentEvent {
                    unix_s: unix_now(),
                    end: self.config.end.into(),
                    segment: seg.loss.segment,
                    packets: seg.loss.packets,
                    lost: seg.lost,
                }));
            }
        }
        // The batch that carried the highest transmission the receiver got: a round trip, but
        // only when that transmission is new (a report repeating an old one, at the tail, would
        // make the round trip grow while nothing is sent); the lowest of the last [`RTT_WINDOW`].
        let advanced = last.is_none_or(|b| r.max_tx > b.max_tx);
        let i = self.sends.partition_point(|s| s.1 <= r.max_tx);
        if let (true, Some((at, _))) = (advanced, self.sends.get(i)) {
            self.rtts
                .push_back((now, now.duration_since(*at).max(self.rtt / 2)));
            while self
                .rtts
                .front()
                .is_some_and(|(t, _)| now.duration_since(*t) > RTT_WINDOW)
            {
                self.rtts.pop_front();
            }
            if let Some(min) = self.rtts.iter().map(|(_, d)| *d).min() {
                self.data_rtt = min;
            }
        }
        // Intervals by the receiver's clock: reports may arrive bunched.
        let (since, before) = match last {
            Some(b) => (
                Duration::from_micros(r.at_us.saturating_sub(b.at_us)),
                (b.received, b.max_tx),
            ),
            None => (Duration::from_micros(r.at_us), (0, 0)),
        };
        if last.is_none_or(|b| b.train_packets == 0) {
            if let Some(c) = r.train_rate(self.packet as u32) {
                tracing::debug!("udp: the train arrived at {:.0} Mbit/s", c / 1e6);
                self.control.on_capacity(c);
            }
        }
        let delivered = r.received.saturating_sub(before.0);
        let fb = Feedback {
            now: t,
            interval: since,
            delivered,
            lost: r.max_tx.saturating_sub(before.1).saturating_sub(delivered),
            queue: Duration::from_micros(u64::from(r.queue_us)),
            rtt: self.rtt,
            packet: self.packet as u32,
        };
        self.control.on_feedback(&fb);
        self.loss = 0.9 * self.loss + 0.1 * fb.loss();
        if now >= self.next_status {
            self.next_status = now + STATUS_EVERY;
            let s = UdpStatus {
                rate: self.control.rate(),
                loss: self.loss,
                state: self.control.state().into(),
            };
            let m = Message::Status {
                rate: s.rate as u64,
                loss_ppm: (s.loss * 1e6) as u32,
                state: s.state.clone(),
            };
            tell(&self.config.status, s);
            self.link.offer(&m).map_err(PumpError::Write)?;
        }
        if self.control.rate() != rate {
            self.log_rate(t, &fb, r.queue_us);
            tracing::trace!(
                "udp rate {:.0} → {:.0} Mbit/s: delivered {:.0} Mbit/s over {:?}, loss {:.2} %, queue {} µs, rtt {:?}",
                rate / 1e6,
                self.control.rate() / 1e6,
                fb.delivered_rate() / 1e6,
                fb.interval,
                100.0 * fb.loss(),
                r.queue_us,
                self.rtt
            );
        }
        if self.control.state() != state {
            tracing::debug!(
                "udp rate control: {} → {} at {:.0} Mbit/s (loss {:.2} %, queue {} µs)",
                state,
                self.control.state(),
                self.control.rate() / 1e6,
                100.0 * fb.loss(),
                r.queue_us
            );
        }
        Ok(())
    }

    /// Builds up to `n` packets into `batch` (resends first, new ones only when `new`; a short
    /// last packet goes once and last, as segmentation offload requires); returns how many.
    fn fill(&mut self, batch: &mut Vec<u8>, n: usize, new: bool) -> io::Result<usize> {
        batch.clear();
        let picked = self
            .ledger
            .next_batch(n, new, !self.length.is_multiple_of(self.payload));
        let sent_us = self.start.elapsed().as_micros() as u32;
        // Adjacent packets (the first sends) are read from the file in one call.
        let mut k = 0;
        while k < picked.len() {
            let run = picked[k..]
                .windows(2)
                .take_while(|w| w[1] == w[0] + 1)
                .count()
                + 1;
            let first = picked[k] * self.payload;
            let end = ((picked[k] + run as u64) * self.payload).min(self.length);
            // The buffer only grows: zeroing it for every batch cost 8 % of the sender's time.
            let len = (end - first) as usize;
            if self.data.len() < len {
                self.data.resize(len, 0);
            }
            let data = &mut self.data[..len];
            self.file.read_exact_at(data, self.offset + first)?;
            for (j, chunk) in data.chunks(self.payload as usize).enumerate() {
                let i = picked[k + j];
                let mut head = [0u8; HEADER];
                DataHeader {
                    token: self.token,
                    tx: self.ledger.sent(i),
                    index: i,
                    sent_us,
                }
                .write(&mut head);
                batch.extend_from_slice(&head);
                batch.extend_from_slice(chunk);
            }
            k += run;
        }
        Ok(picked.len())
    }

    /// Sends one batch, waiting while the socket's buffer is full; the inner error is the
    /// system refusing to send UDP there (a route or a filter).
    fn transmit(&mut self, batch: &[u8], pump: &Pump) -> Result<io::Result<()>, PumpError> {
        let segment = self.packet.min(batch.len());
        // One send carries at most one datagram's worth (64 KiB less headers) of segments.
        let fit = (GSO_BYTES / segment).max(1);
        let max = self.state.max_gso_segments().clamp(1, fit) * segment;
        for part in batch.chunks(max) {
            let t = Transmit {
                destination: self.to,
                ecn: None,
                contents: part,
                segment_size: (part.len() > segment).then_some(segment),
                src_ip: None,
            };
            loop {
                pump.check()?;
                match self.state.try_send((&self.sock).into(), &t) {
                    Ok(()) => break,
                    Err(e) if e.kind() == ErrorKind::WouldBlock => self.wait(TICK, true)?,
                    Err(e) if e.kind() == ErrorKind::Interrupted => {}
                    // The receiver's port is closed: it gave up; its reason comes on the link.
                    Err(e) if e.kind() == ErrorKind::ConnectionRefused => break,
                    Err(e) => return Ok(Err(e)),
                }
            }
        }
        Ok(Ok(()))
    }

    /// Waits up to `wait` for a report (or, with `write`, for room in the socket's buffer).
    fn wait(&self, wait: Duration, write: bool) -> Result<(), PumpError> {
        let fd = if write {
            self.sock.as_fd()
        } else {
            self.link.sock.as_fd()
        };
        crate::wake::ready(&[fd], write, wait)
            .map(|_| ())
            .map_err(PumpError::Write)
    }

    /// Writes the controller's decision, with the feedback it was made on, to `--stats`.
    fn log_rate(&self, t: Duration, fb: &Feedback, queue_us: u32) {
        if let Some(stats) = &self.config.stats {
            stats.log(&Event::Rate(RateEvent {
                unix_s: unix_now(),
                t: t.as_secs_f64(),
                end: self.config.end.into(),
                control: self.config.control.to_string(),
                state: self.control.state().into(),
                rate_mbit: self.control.rate() / 1e6,
                delivered_mbit: fb.delivered_rate() / 1e6,
                loss: fb.loss(),
                queue_ms: f64::from(queue_us) / 1e3,
            }));
        }
    }

    /// Keeps what this transfer learned of the path for the next one: the rate it ended at
    /// (unless it never left start-up: a short file says nothing) and `history`'s odds.
    fn remember(&self) {
        let Some(m) = &self.config.memory else {
            return;
        };
        let mut m = m.lock().unwrap_or_else(|e| e.into_inner());
        if self.control.state() != "startup" {
            m.rate = Some(self.control.rate());
        }
        if let Some(odds) = self.control.odds() {
            m.odds = odds.clone();
        }
    }

    fn summary(&self, fell_back: bool) -> UdpSummary {
        UdpSummary {
            control: self.config.control.to_string(),
            packets: packets(self.length, self.payload),
            transmissions: self.ledger.transmissions,
            last_rate: self.control.rate(),
            state: self.control.state().to_string(),
            foreign: 0,
            fell_back,
        }
    }
}
