//! The sending end of a UDP transfer, as a mover: it says `Hello`, opens the UDP socket to
//! the port the receiver's `Ready` names, hands the transfer core its sender ([`UdpSend`])
//! and lets the conductor drive it ([`Conductor::send_udp`]); what it does itself is move
//! bytes: the receiver's messages read off the TCP connection, the packets the core asks for
//! built from the file (read in runs) and sent, each batch one `sendmsg` with UDP
//! segmentation offload where the kernel has it.

use super::{net, size_buffers, unexpected, Link, UdpConfig, UdpSummary};
use crate::admission::Proof;
use crate::conductor::{Datagrams, UdpEnd};
use crate::{Conductor, Moved, Mover, Pump, PumpError};
use fatpipe_proto::udp::{DataHeader, Message, HEADER, PACKET_RANGE};
use fatpipe_tune::rate::RateLimits;
use fatpipe_tune::transfer::udp::{UdpSend, BATCH, TICK};
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
    fn run(self: Box<Self>, pump: &Arc<Pump>, driver: &Conductor) -> Result<Moved, PumpError> {
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
        let fell_back = match open(&s.link, port, s.config.force_buffers) {
            Ok(udp) => {
                let core = core(&s, packet, token);
                // The file's bytes go in packets as the core counts them.
                let payload = core.payload();
                driver.open_udp_sender(core, s.config.clone());
                let mut sending = Sending::new(&s, (packet, payload), token, link, udp, pump);
                match driver.send_udp(&mut sending, pump)? {
                    UdpEnd::Done => {
                        // The receiver has everything: closing the connection ends the
                        // transfer at both ends.
                        let _ = sending.link.sock.shutdown(std::net::Shutdown::Write);
                        false
                    }
                    UdpEnd::NotThrough => {
                        fall_back(&mut sending.link, &s, pump)?;
                        true
                    }
                }
            }
            Err(e) => {
                tracing::warn!("cannot send UDP to the receiver ({e}): sending over TCP");
                fall_back(&mut link, &s, pump)?;
                true
            }
        };
        let summary = driver.udp_summary(fell_back).unwrap_or_else(|| UdpSummary {
            control: s.config.control.to_string(),
            fell_back,
            ..UdpSummary::default()
        });
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
    /// Bytes of file data a packet carries.
    payload: u64,
    token: u64,
    link: Link,
    sock: UdpSocket,
    state: UdpSocketState,
    to: SocketAddr,
    /// The batch being built, and the file data it carries.
    batch: Vec<u8>,
    data: Vec<u8>,
    /// The transfer's pump: a send waiting for room in the socket's buffer checks it.
    pump: Arc<Pump>,
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

/// The transfer core's sender for `s`'s bytes in packets of `packet` bytes: its rate control
/// started from what the path taught earlier transfers, its round trip the TCP connection's.
fn core(s: &UdpSender<'_>, packet: u16, token: u64) -> UdpSend {
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
    UdpSend::new(s.length, packet, rtt, control, Instant::now())
}

impl<'a> Sending<'a> {
    fn new(
        s: &UdpSender<'a>,
        (packet, payload): (u16, u64),
        token: u64,
        link: Link,
        (sock, state, to): (UdpSocket, UdpSocketState, SocketAddr),
        pump: &Arc<Pump>,
    ) -> Sending<'a> {
        Sending {
            file: s.file,
            offset: s.offset,
            length: s.length,
            packet: usize::from(packet),
            payload,
            token,
            link,
            sock,
            state,
            to,
            batch: Vec::with_capacity(BATCH * usize::from(packet)),
            data: Vec::new(),
            pump: pump.clone(),
        }
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
        let payload = self.payload;
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
    fn transmit(&self, batch: &[u8]) -> Result<io::Result<()>, PumpError> {
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
                self.pump.check()?;
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
}

impl Datagrams for Sending<'_> {
    fn messages(&mut self) -> io::Result<Vec<Message>> {
        self.link.poll()
    }

    fn heard(&self) -> Instant {
        self.link.heard
    }

    fn send(
        &mut self,
        packets: &[(u64, u64)],
        sent_us: u32,
    ) -> Result<io::Result<usize>, PumpError> {
        let mut batch = std::mem::take(&mut self.batch);
        self.fill(&mut batch, packets, sent_us)
            .map_err(PumpError::Read)?;
        let sent = self.transmit(&batch)?.map(|()| batch.len());
        self.batch = batch;
        Ok(sent)
    }

    fn wait(&self, wait: Duration) -> Result<(), PumpError> {
        Sending::wait(self, wait, false)
    }

    fn offer(&mut self, m: &Message) -> io::Result<()> {
        self.link.offer(m)
    }
}
