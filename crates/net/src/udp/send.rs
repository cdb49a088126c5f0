//! The sending end of a UDP transfer: the driver of `fatpipe_tune`'s sans-IO sender
//! ([`UdpSend`]): it reads the receiver's reports off the TCP connection and hands them in,
//! sends the packets the core asks for (file data read in runs, each batch one `sendmsg` with
//! UDP segmentation offload where the kernel has it), and logs and relays the core's events.

use super::{
    net, size_buffers, tell, unexpected, Link, UdpConfig, UdpStatus, UdpSummary, PROBE,
    REPORT_EVERY,
};
use crate::admission::Proof;
use crate::mode_e::OnStream;
use crate::telemetry::unix_now;
use crate::{Moved, Mover, Pump, PumpError};
use fatpipe_proto::udp::{packets, DataHeader, Message, HEADER, PACKET_RANGE};
use fatpipe_tune::rate::{Feedback, RateLimits};
use fatpipe_tune::telemetry::{Event, RateEvent, SegmentEvent};
use fatpipe_tune::transfer::udp::{Next, UdpEvent, UdpSend, BATCH, TICK};
use quinn_udp::{Transmit, UdpSocketState};
use std::fs::File;
use std::io::{self, ErrorKind};
use std::net::{SocketAddr, TcpStream, UdpSocket};
use std::os::fd::AsFd;
use std::os::unix::fs::FileExt;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Most bytes one segmentation-offload send carries: a UDP datagram's largest payload.
const GSO_BYTES: usize = 65_507;
/// No report for this long means the reports are held up (the receiver sends one every
/// [`REPORT_EVERY`]).
const REPORTS_LATE: Duration = Duration::from_millis(3 * REPORT_EVERY.as_millis() as u64);

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
    packet: usize,
    token: u64,
    config: UdpConfig,
    link: Link,
    sock: UdpSocket,
    state: UdpSocketState,
    to: SocketAddr,
    core: UdpSend,
    /// File data of the batch being built.
    data: Vec<u8>,
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
        let rtt = crate::tcpinfo::tcp_stats(s.link.as_fd())
            .ok()
            .map(|t| Duration::from_micros(u64::from(t.min_rtt_us.max(t.rtt_us))))
            .filter(|d| !d.is_zero())
            .unwrap_or(Duration::from_millis(100));
        let limits = RateLimits {
            start: s.config.start_rate,
            max: s.config.max_rate,
        };
        let control = s.config.control.build(limits, &recall(&s.config), token);
        Sending {
            file: s.file,
            offset: s.offset,
            length: s.length,
            packet: usize::from(packet),
            token,
            config: s.config.clone(),
            link,
            sock,
            state,
            to,
            core: UdpSend::new(s.length, packet, rtt, control, Instant::now()),
            data: Vec::new(),
        }
    }

    /// Sends until the receiver has everything; `None` when UDP does not get through (no
    /// packet arrived within [`PROBE`], or the system refuses to send it).
    fn go(&mut self, pump: &Pump) -> Result<Option<UdpSummary>, PumpError> {
        let w = PumpError::Write;
        let start = Instant::now();
        let mut done = self.core.is_empty();
        let mut batch = Vec::with_capacity(BATCH * self.packet);
        let mut written = 0u64;
        while !done {
            pump.check()?;
            for m in self.link.poll().map_err(w)? {
                match m {
                    Message::Report(r) => {
                        if r.written > written {
                            pump.add((r.written - written) as usize);
                            written = r.written;
                        }
                        self.core
                            .on_report(r, Instant::now())
                            .map_err(|e| w(io::Error::new(ErrorKind::InvalidData, e)))?;
                    }
                    Message::Done { .. } => done = true,
                    m => return Err(w(unexpected(&m))),
                }
            }
            self.carry_out_events()?;
            if done {
                break;
            }
            let now = Instant::now();
            if !self.core.through() && now.duration_since(start) > PROBE {
                tracing::warn!("no UDP packet reached the receiver within 2 s: sending over TCP");
                return Ok(None);
            }
            if now.duration_since(self.link.heard) > self.config.timeout {
                return Err(w(io::Error::new(
                    ErrorKind::TimedOut,
                    "no report from the receiver within the --timeout",
                )));
            }
            let reports_late = now.duration_since(self.link.heard) > REPORTS_LATE;
            match self.core.poll_send(now, reports_late) {
                Next::Wait(d) => {
                    self.carry_out_events()?;
                    self.wait(d, false)?;
                }
                Next::Send { packets, sent_us } => {
                    self.fill(&mut batch, &packets, sent_us)
                        .map_err(PumpError::Read)?;
                    if let Err(e) = self.transmit(&batch, pump)? {
                        tracing::warn!("cannot send UDP to the receiver ({e}): sending over TCP");
                        return Ok(None);
                    }
                    self.core.on_sent(batch.len(), now);
                }
            }
        }
        tracing::debug!(
            "udp: the receiver has everything after {:.2} s",
            start.elapsed().as_secs_f64()
        );
        // The receiver has everything: closing the connection ends the transfer at both ends.
        let _ = self.link.sock.shutdown(std::net::Shutdown::Write);
        self.remember();
        Ok(Some(self.summary(false)))
    }

    /// Logs, records and relays what the core decided.
    fn carry_out_events(&mut self) -> Result<(), PumpError> {
        while let Some(e) = self.core.poll_event() {
            match e {
                UdpEvent::Rate {
                    t,
                    before,
                    after,
                    state,
                    feedback,
                    queue_us,
                } => {
                    self.log_rate(t, after, state, &feedback, queue_us);
                    tracing::trace!(
                        "udp rate {:.0} → {:.0} Mbit/s: delivered {:.0} Mbit/s over {:?}, loss {:.2} %, queue {} µs, rtt {:?}",
                        before / 1e6,
                        after / 1e6,
                        feedback.delivered_rate() / 1e6,
                        feedback.interval,
                        100.0 * feedback.loss(),
                        queue_us,
                        feedback.rtt
                    );
                }
                UdpEvent::State {
                    from,
                    to,
                    feedback,
                    queue_us,
                } => tracing::debug!(
                    "udp rate control: {from} → {to} at {:.0} Mbit/s (loss {:.2} %, queue {queue_us} µs)",
                    self.core.control().rate() / 1e6,
                    100.0 * feedback.loss(),
                ),
                UdpEvent::Segment {
                    segment,
                    packets,
                    lost,
                } => {
                    if let Some(stats) = &self.config.stats {
                        stats.log(&Event::Segment(SegmentEvent {
                            unix_s: unix_now(),
                            end: self.config.end.into(),
                            segment,
                            packets,
                            lost,
                        }));
                    }
                }
                UdpEvent::Train(c) => {
                    tracing::debug!("udp: the train arrived at {:.0} Mbit/s", c / 1e6);
                }
                UdpEvent::Status { rate, loss, state } => {
                    let m = Message::Status {
                        rate: rate as u64,
                        loss_ppm: (loss * 1e6) as u32,
                        state: state.into(),
                    };
                    let s = UdpStatus {
                        rate,
                        loss,
                        state: state.into(),
                    };
                    tell(&self.config.status, s);
                    self.link.offer(&m).map_err(PumpError::Write)?;
                }
                UdpEvent::Stalled(missing) => tracing::warn!(
                    "udp: nothing sent for 2 s with {missing} packets missing at the receiver; sending them again"
                ),
                UdpEvent::AllSent(after, sends) => tracing::debug!(
                    "udp: every packet sent once after {:.2} s ({sends} sends so far)",
                    after.as_secs_f64()
                ),
            }
        }
        Ok(())
    }

    /// Builds the batch of `packets` (index, transmission number) stamped `sent_us` into
    /// `batch`, reading adjacent packets (the first sends) from the file in one call.
    fn fill(
        &mut self,
        batch: &mut Vec<u8>,
        packets: &[(u64, u64)],
        sent_us: u32,
    ) -> io::Result<()> {
        batch.clear();
        let payload = self.core.payload();
        let mut k = 0;
        while k < packets.len() {
            let run = packets[k..]
                .windows(2)
                .take_while(|w| w[1].0 == w[0].0 + 1)
                .count()
                + 1;
            let first = packets[k].0 * payload;
            let end = ((packets[k].0 + run as u64) * payload).min(self.length);
            // The buffer only grows: zeroing it for every batch cost 8 % of the sender's time.
            let len = (end - first) as usize;
            if self.data.len() < len {
                self.data.resize(len, 0);
            }
            let data = &mut self.data[..len];
            self.file.read_exact_at(data, self.offset + first)?;
            for (chunk, &(index, tx)) in data.chunks(payload as usize).zip(&packets[k..k + run]) {
                let mut head = [0u8; HEADER];
                DataHeader {
                    token: self.token,
                    tx,
                    index,
                    sent_us,
                }
                .write(&mut head);
                batch.extend_from_slice(&head);
                batch.extend_from_slice(chunk);
            }
            k += run;
        }
        Ok(())
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

    /// Writes the controller's decision (`rate` bits/s, in `state`), with the feedback it was
    /// made on, to `--stats`.
    fn log_rate(&self, t: Duration, rate: f64, state: &str, fb: &Feedback, queue_us: u32) {
        if let Some(stats) = &self.config.stats {
            stats.log(&Event::Rate(RateEvent {
                unix_s: unix_now(),
                t: t.as_secs_f64(),
                end: self.config.end.into(),
                control: self.config.control.to_string(),
                state: state.into(),
                rate_mbit: rate / 1e6,
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
        let control = self.core.control();
        if control.state() != "startup" {
            m.rate = Some(control.rate());
        }
        if let Some(odds) = control.odds() {
            m.odds = odds.clone();
        }
    }

    fn summary(&self, fell_back: bool) -> UdpSummary {
        let control = self.core.control();
        UdpSummary {
            control: self.config.control.to_string(),
            packets: packets(self.length, self.core.payload()),
            transmissions: self.core.transmissions(),
            last_rate: control.rate(),
            state: control.state().to_string(),
            foreign: 0,
            fell_back,
        }
    }
}
