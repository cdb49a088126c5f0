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
use std::io::{self, ErrorKind, IoSliceMut};
use std::net::{IpAddr, SocketAddr, TcpStream, UdpSocket};
use std::os::fd::AsFd;
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
    /// The packet train already sent to the socket the receiver named on the control
    /// connection ([`super::launch`]), if it was.
    pub launched: Option<super::Launched>,
}

impl Mover for UdpSender<'_> {
    fn run(self: Box<Self>, pump: &Arc<Pump>, driver: &Conductor) -> Result<Moved, PumpError> {
        pump.attach(&self.link).map_err(PumpError::Write)?;
        let mut s = *self;
        Proof::on_plain(s.proof, &s.link).map_err(PumpError::Write)?;
        let mut link = Link::new(s.link.try_clone().map_err(PumpError::Write)?);
        let launched = s.launched.take();
        let packet = match &launched {
            Some(l) => l.packet(),
            None => packet_size(&s.config, &s.link),
        };
        let hello = Message::Hello {
            packet,
            length: s.length,
        };
        link.send(&hello).map_err(PumpError::Write)?;
        let (port, token) = match link.wait(s.config.timeout).map_err(PumpError::Write)? {
            Message::Ready { port, token } => (port, token),
            m => return Err(PumpError::Write(unexpected(&m))),
        };
        let started = match launched {
            // The receiver named the same socket twice, or the transfer ends here.
            Some(l) => {
                let from = s.link.peer_addr().map_err(PumpError::Write)?.ip();
                Ok(l.confirm(port, token, from).map_err(PumpError::Write)?)
            }
            None => open(&s.link, port, s.config.force_buffers).map(|udp| {
                let core = core(&s.config, s.length, packet, token, round_trip(&s.link));
                (Wire::new(core.payload(), token, udp), core)
            }),
        };
        let fell_back = match started {
            Ok((wire, core)) => {
                driver.open_udp_sender(core, s.config.clone());
                let mut sending = Sending {
                    file: s.file,
                    offset: s.offset,
                    length: s.length,
                    wire,
                    link,
                    pump: pump.clone(),
                };
                match driver.send_udp(&mut sending, pump)? {
                    UdpEnd::Done => {
                        // The receiver has everything: closing the connection ends the
                        // transfer at both ends.
                        let _ = sending.link.sock.shutdown(std::net::Shutdown::Write);
                        false
                    }
                    UdpEnd::NotThrough => {
                        super::leave_unreached(s.config.unreached.as_ref(), pump)?;
                        fall_back(&mut sending.link, &s, pump)?;
                        true
                    }
                }
            }
            Err(e) => {
                tracing::warn!("cannot send UDP to the receiver ({e}): sending over TCP");
                super::leave_unreached(s.config.unreached.as_ref(), pump)?;
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
    wire: Wire,
    link: Link,
    /// The transfer's pump: a send waiting for room in the socket's buffer checks it.
    pump: Arc<Pump>,
}

/// The sending UDP socket and the packets put on it: each batch built from the file and sent.
pub(super) struct Wire {
    /// Bytes of file data a packet carries.
    payload: u64,
    token: u64,
    sock: UdpSocket,
    state: UdpSocketState,
    to: SocketAddr,
    /// The batch being built: packets, headers and data, back to back.
    batch: Vec<u8>,
}

/// What a send's packets carry: the file, where the transfer starts in it, and its bytes.
pub(super) type Source<'a> = (&'a File, u64, u64);

/// The sending UDP socket, connected to the receiver's `port` at the peer's address of `link`.
fn open(
    link: &TcpStream,
    port: u16,
    force: bool,
) -> io::Result<(UdpSocket, UdpSocketState, SocketAddr)> {
    let local = link.local_addr()?;
    let to = SocketAddr::new(link.peer_addr()?.ip(), port);
    open_to(local.ip(), to, force)
}

/// A sending UDP socket on `local`, connected to `to`, its buffers sized.
pub(super) fn open_to(
    local: IpAddr,
    to: SocketAddr,
    force: bool,
) -> io::Result<(UdpSocket, UdpSocketState, SocketAddr)> {
    let sock = UdpSocket::bind(SocketAddr::new(local, 0))?;
    sock.connect(to)?;
    size_buffers(&sock, force, true);
    let state = UdpSocketState::new((&sock).into())?;
    Ok((sock, state, to))
}

/// The packet size a transfer takes: what `config` says, else the largest datagram the path
/// beside `link` carries whole; within [`PACKET_RANGE`].
pub(super) fn packet_size(config: &UdpConfig, link: &TcpStream) -> u16 {
    config
        .packet
        .unwrap_or_else(|| path_packet(link))
        .clamp(*PACKET_RANGE.start(), *PACKET_RANGE.end())
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

/// A TCP connection's round trip (its least, or the smoothed one), where the system tells it.
pub fn round_trip(link: impl AsFd) -> Option<Duration> {
    crate::tcpinfo::tcp_stats(link.as_fd())
        .ok()
        .map(|t| Duration::from_micros(u64::from(t.min_rtt_us.max(t.rtt_us))))
        .filter(|d| !d.is_zero())
}

/// The transfer core's sender for `length` bytes in packets of `packet` bytes: its rate
/// control started from what the path taught earlier transfers, its round trip `rtt` (a TCP
/// connection's beside; 100 ms where unknown).
pub(super) fn core(
    config: &UdpConfig,
    length: u64,
    packet: u16,
    token: u64,
    rtt: Option<Duration>,
) -> UdpSend {
    let rtt = rtt.unwrap_or(Duration::from_millis(100));
    let limits = RateLimits {
        start: config.start_rate,
        max: config.max_rate,
    };
    let control = config.control.build(limits, &recall(config), token);
    UdpSend::new(length, packet, rtt, control, Instant::now())
}

impl Wire {
    /// Packets of `payload` bytes of data stamped with `token`, sent on `udp`.
    pub(super) fn new(
        payload: u64,
        token: u64,
        (sock, state, to): (UdpSocket, UdpSocketState, SocketAddr),
    ) -> Wire {
        Wire {
            payload,
            token,
            sock,
            state,
            to,
            batch: Vec::with_capacity(BATCH * (HEADER + payload as usize)),
        }
    }

    /// Where the packets go.
    pub(super) fn to(&self) -> SocketAddr {
        self.to
    }

    /// Sends `packets` (index, transmission number) of `source` stamped `sent_us`, waiting
    /// while the socket's buffer is full (`pump` cancels); the bytes put on the wire. The
    /// inner error is the system refusing to send UDP there (a route or a filter).
    pub(super) fn send(
        &mut self,
        source: Source<'_>,
        packets: &[(u64, u64)],
        sent_us: u32,
        pump: &Pump,
    ) -> Result<io::Result<usize>, PumpError> {
        let mut batch = std::mem::take(&mut self.batch);
        let filled = self.fill(&mut batch, source, packets, sent_us);
        let sent = match filled {
            Ok(len) => self.transmit(&batch[..len], pump).map(|r| r.map(|()| len)),
            Err(e) => Err(PumpError::Read(e)),
        };
        self.batch = batch;
        sent
    }

    /// Builds the batch of `packets` (index, transmission number) stamped `sent_us` in
    /// `batch` (which only grows: zeroing it per batch cost 8 % of the sender's time) and
    /// returns its length: each packet's header, then its data read from the file straight
    /// into its place, adjacent packets (the first sends) in one `preadv` (reading them
    /// elsewhere and copying them in cost 6 %).
    fn fill(
        &self,
        batch: &mut Vec<u8>,
        (file, offset, length): Source<'_>,
        packets: &[(u64, u64)],
        sent_us: u32,
    ) -> io::Result<usize> {
        let payload = self.payload as usize;
        let need = packets.len() * (HEADER + payload);
        if batch.len() < need {
            batch.resize(need, 0);
        }
        let mut used = 0;
        let mut k = 0;
        while k < packets.len() {
            let run = packets[k..]
                .windows(2)
                .take_while(|w| w[1].0 == w[0].0 + 1)
                .count()
                + 1;
            let first = packets[k].0 * self.payload;
            let end = ((packets[k].0 + run as u64) * self.payload).min(length);
            let mut left = end.saturating_sub(first) as usize;
            let mut bodies = Vec::with_capacity(run);
            let mut rest = &mut batch[used..];
            for &(index, tx) in &packets[k..k + run] {
                let body = left.min(payload);
                left -= body;
                let (slot, after) = std::mem::take(&mut rest).split_at_mut(HEADER + body);
                rest = after;
                let (head, body) = slot.split_at_mut(HEADER);
                let mut h = [0u8; HEADER];
                DataHeader {
                    token: self.token,
                    tx,
                    index,
                    sent_us,
                }
                .write(&mut h);
                head.copy_from_slice(&h);
                used += HEADER + body.len();
                bodies.push(IoSliceMut::new(body));
            }
            read_exact_vectored_at(file, &mut bodies, offset + first)?;
            k += run;
        }
        Ok(used)
    }

    /// Sends one batch, waiting while the socket's buffer is full; the inner error is the
    /// system refusing to send UDP there (a route or a filter).
    fn transmit(&self, batch: &[u8], pump: &Pump) -> Result<io::Result<()>, PumpError> {
        let segment = (HEADER + self.payload as usize).min(batch.len());
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
                    Err(e) if e.kind() == ErrorKind::WouldBlock => {
                        crate::wake::ready(&[self.sock.as_fd()], true, TICK)
                            .map_err(PumpError::Write)?;
                    }
                    Err(e) if e.kind() == ErrorKind::Interrupted => {}
                    // The receiver's port is closed: it gave up; its reason comes on the link.
                    Err(e) if e.kind() == ErrorKind::ConnectionRefused => break,
                    Err(e) => return Ok(Err(e)),
                }
            }
        }
        Ok(Ok(()))
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
        let source = (self.file, self.offset, self.length);
        self.wire.send(source, packets, sent_us, &self.pump)
    }

    fn wait(&self, wait: Duration) -> Result<(), PumpError> {
        crate::wake::ready(&[self.link.sock.as_fd()], false, wait)
            .map(|_| ())
            .map_err(PumpError::Write)
    }

    fn offer(&mut self, m: &Message) -> io::Result<()> {
        self.link.offer(m)
    }
}

/// Fills `bufs` from `file` at `at`, as `read_exact_at` does for one buffer: a short read
/// goes on where it stopped; the end of the file before the buffers are full is an error.
fn read_exact_vectored_at(file: &File, bufs: &mut [IoSliceMut<'_>], at: u64) -> io::Result<()> {
    let mut bufs = bufs;
    let mut at = at;
    while !bufs.is_empty() {
        let n = match nix::sys::uio::preadv(file, bufs, at as i64) {
            Ok(0) => return Err(ErrorKind::UnexpectedEof.into()),
            Ok(n) => n,
            Err(nix::errno::Errno::EINTR) => continue,
            Err(e) => return Err(e.into()),
        };
        at += n as u64;
        IoSliceMut::advance_slices(&mut bufs, n);
    }
    Ok(())
}
