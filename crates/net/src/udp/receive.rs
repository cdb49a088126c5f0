//! The receiving end of a UDP transfer, as a mover: it binds the UDP socket, says `Ready`,
//! reads the sender's `Hello`, hands the transfer core its receiver ([`UdpReceive`]) and lets
//! the conductor drive it ([`Conductor::receive_udp`]); what it does itself is move bytes:
//! batches of packets taken in (`recvmmsg`, with receive offload where the kernel has it),
//! new data written at its place in the file (runs of adjacent packets in one write), the
//! reports carried to the sender.

use super::{bind_receiving, net, unexpected, Link, UdpConfig, UdpSummary};
use crate::admission::Proof;
use crate::conductor::Packets;
use crate::{Conductor, Moved, Mover, Pump, PumpError};
use fatpipe_proto::udp::{packets, DataHeader, Message, HEADER, PACKET_RANGE};
use fatpipe_tune::transfer::udp::{Arrival, Take, UdpReceive};
use quinn_udp::{RecvMeta, UdpSocketState};
use std::fs::File;
use std::io::{self, ErrorKind, IoSlice, IoSliceMut, Read, Seek, SeekFrom};
use std::net::{TcpStream, UdpSocket};
use std::os::fd::AsFd;
use std::os::unix::fs::FileExt;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Receive buffers per `recvmmsg` (without receive offload, one packet each).
const BUFFERS: usize = 32;
/// Bytes per receive buffer (a whole offloaded batch).
const BUFFER: usize = 64 << 10;

/// Receives a UDP transfer into `file` from `offset`; `link` is the transfer's TCP data
/// connection, where the sender says how long the transfer is and takes the reports.
pub struct UdpReceiver<'a> {
    /// The TCP data connection.
    pub link: TcpStream,
    /// The file.
    pub file: &'a File,
    /// Where the transfer starts in the file.
    pub offset: u64,
    /// Most bytes the transfer may bring (the sender's announced length past it is an error).
    pub limit: u64,
    /// Ports, buffers, timeout.
    pub config: UdpConfig,
    /// The session's data token, shown or checked on the TCP connection first.
    pub proof: Option<Proof>,
    /// Where to keep the bytes from `offset` on that are written without a gap: how far a
    /// hash beside the transfer may read.
    pub in_place: Option<Arc<AtomicU64>>,
    /// The socket bound and named to the sender before the transfer command, if it was: the
    /// receiver starts without waiting for `Hello` (checked when it comes).
    pub ahead: Option<super::ReadyAhead>,
}

impl Mover for UdpReceiver<'_> {
    fn run(self: Box<Self>, pump: &Arc<Pump>, driver: &Conductor) -> Result<Moved, PumpError> {
        let r = PumpError::Read;
        pump.attach(&self.link).map_err(r)?;
        let s = *self;
        Proof::on_plain(s.proof, &s.link).map_err(r)?;
        let mut link = Link::new(s.link.try_clone().map_err(r)?);
        // Ready goes out before the sender's Hello is read: the sender, which sends its Hello
        // as it connects or accepts, finds the port waiting (a round trip fewer before the
        // first packet); a sender that waits for Ready after its Hello is served the same.
        let (sock, named) = match s.ahead {
            Some(a) => (a.sock, Some(a.ready)),
            None => {
                let local = s.link.local_addr().map_err(r)?.ip();
                (bind_receiving(local, &s.config).map_err(r)?, None)
            }
        };
        let state = UdpSocketState::new((&sock).into()).map_err(r)?;
        let token = named.map_or_else(super::ahead::new_token, |n| n.token);
        let port = sock.local_addr().map_err(r)?.port();
        link.send(&Message::Ready { port, token }).map_err(r)?;
        // Named before the transfer command, the sender's train may be here already: it is
        // taken in at once, and its Hello checked when it comes.
        let (packet, length) = match named {
            Some(n) => (n.packet, n.length),
            None => match link.wait(s.config.timeout).map_err(r)? {
                Message::Hello { packet, length } => (packet, length),
                m => return Err(r(unexpected(&m))),
            },
        };
        if !PACKET_RANGE.contains(&packet) {
            return Err(r(io::Error::new(
                ErrorKind::InvalidData,
                format!("the sender asked for {packet}-byte packets"),
            )));
        }
        if length > s.limit {
            return Err(PumpError::Write(io::Error::new(
                ErrorKind::FileTooLarge,
                format!(
                    "the sender announced {length} bytes, past the {} allowed",
                    s.limit
                ),
            )));
        }
        let payload = u64::from(packet) - HEADER as u64;
        let core = UdpReceive::new(token, length, payload, Instant::now());
        driver.open_udp_receiver(core, s.config.clone());
        let mut io = Receiving {
            file: s.file,
            offset: s.offset,
            length,
            payload,
            link,
            sock,
            state,
            bufs: vec![vec![0u8; BUFFER]; BUFFERS],
            meta: vec![RecvMeta::default(); BUFFERS],
            written: 0,
            timeout: s.config.timeout,
            in_place: s.in_place,
            pump: pump.clone(),
            unreached: s.config.unreached.clone(),
        };
        let fell_back = driver.receive_udp(&mut io, pump)?;
        let summary = driver.udp_summary(fell_back).unwrap_or_else(|| UdpSummary {
            packets: packets(length, payload),
            fell_back,
            ..UdpSummary::default()
        });
        Ok(Moved {
            bytes: length,
            streams: 1,
            reused: 0,
            udp: Some(summary),
        })
    }
}

/// One UDP receive in progress.
struct Receiving<'a> {
    file: &'a File,
    offset: u64,
    length: u64,
    payload: u64,
    link: Link,
    sock: UdpSocket,
    state: UdpSocketState,
    /// Where each `recvmmsg` lands, and what the kernel says of each buffer.
    bufs: Vec<Vec<u8>>,
    meta: Vec<RecvMeta>,
    written: u64,
    timeout: Duration,
    in_place: Option<Arc<AtomicU64>>,
    /// The transfer's pump: it counts what is written.
    pump: Arc<Pump>,
    /// Set and the transfer ended where UDP does not get through ([`UdpConfig::unreached`]).
    unreached: Option<Arc<AtomicBool>>,
}

/// Tries at one batch: a `recvmmsg` that an interrupt or an ICMP error of an earlier send
/// of the peer's cut short is tried again this often.
const RECEIVE_TRIES: usize = 4;

impl Receiving<'_> {
    /// One `recvmmsg` into `bufs` (see [`Packets::receive`]).
    fn receive_into(
        &mut self,
        bufs: &mut [Vec<u8>],
        meta: &mut [RecvMeta],
        take: &mut dyn FnMut(&DataHeader, usize, Arrival) -> Take,
    ) -> Result<bool, PumpError> {
        for _ in 0..RECEIVE_TRIES {
            let mut slices: Vec<IoSliceMut<'_>> =
                bufs.iter_mut().map(|b| IoSliceMut::new(b)).collect();
            match self.state.recv((&self.sock).into(), &mut slices, meta) {
                Ok(n) => {
                    let now = (Instant::now(), crate::telemetry::since_epoch());
                    for (m, b) in meta.iter().zip(bufs.iter()).take(n) {
                        let came = Arrival {
                            at: arrival(m.timestamp, now),
                            read: now.0,
                        };
                        self.take(&b[..m.len.min(b.len())], m.stride.max(1), came, take)?;
                    }
                    return Ok(true);
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => return Ok(false),
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                // An ICMP error from an earlier send of the peer's: not ours to fail on.
                Err(e) if e.kind() == ErrorKind::ConnectionRefused => {}
                Err(e) => return Err(PumpError::Read(e)),
            }
        }
        Ok(false)
    }

    /// Books the packets of one received buffer (`stride` bytes each, the last maybe fewer)
    /// that came as `came` says through `take`, and writes those it calls new: each run of
    /// adjacent packets with one `pwritev` straight from the buffer (copying them into a run
    /// first cost 11 % of the receiver's time).
    fn take(
        &mut self,
        data: &[u8],
        stride: usize,
        came: Arrival,
        take: &mut dyn FnMut(&DataHeader, usize, Arrival) -> Take,
    ) -> Result<(), PumpError> {
        let mut run: Vec<IoSlice<'_>> = Vec::new();
        let (mut run_at, mut run_end) = (0u64, 0u64);
        for packet in data.chunks(stride) {
            let Some((h, body)) = DataHeader::parse(packet) else {
                continue;
            };
            if take(&h, body.len(), came) != Take::New {
                continue;
            }
            let at = h.index.saturating_mul(self.payload);
            if at != run_end && !run.is_empty() {
                self.write_run(run_at, &run)?;
                run.clear();
            }
            if run.is_empty() {
                run_at = at;
                run_end = at;
            }
            run.push(IoSlice::new(body));
            run_end += body.len() as u64;
        }
        if !run.is_empty() {
            self.write_run(run_at, &run)?;
        }
        Ok(())
    }

    /// Writes adjacent packets' data at `at` in the transfer.
    fn write_run(&mut self, at: u64, run: &[IoSlice<'_>]) -> Result<(), PumpError> {
        let w = |e: io::Error| PumpError::Write(e);
        let total: usize = run.iter().map(|b| b.len()).sum();
        let pos = self.offset + at;
        let mut done =
            nix::sys::uio::pwritev(self.file, run, pos as i64).map_err(|e| w(e.into()))?;
        // A short write (rare on a regular file) finishes slice by slice.
        let mut skip = done;
        for b in run {
            if skip >= b.len() {
                skip -= b.len();
                continue;
            }
            self.file
                .write_all_at(&b[skip..], pos + done as u64)
                .map_err(w)?;
            done += b.len() - skip;
            skip = 0;
        }
        self.written += total as u64;
        self.pump.count(total);
        Ok(())
    }

    /// The sender could not reach this end over UDP: the bytes from `from` on come over the
    /// TCP connection, after whatever followed the fallback message in its buffer.
    fn copy_rest(&mut self, from: u64) -> Result<(), PumpError> {
        let pump = self.pump.clone();
        let r = net(false);
        let want = self.length.saturating_sub(from);
        let pending = std::mem::take(&mut self.link.buf);
        let sock = &self.link.sock;
        sock.set_read_timeout(Some(self.timeout)).map_err(&r)?;
        let mut src = (&pending[..]).chain(sock).take(want);
        let mut dst = self.file;
        dst.seek(SeekFrom::Start(self.offset + from))
            .map_err(PumpError::Write)?;
        if pump.copy(&mut src, &mut dst)? < want {
            return Err(r(io::Error::new(
                ErrorKind::UnexpectedEof,
                "the sender closed the data connection early",
            )));
        }
        self.written = self.length;
        Ok(())
    }

    /// Waits briefly for the sender to close the connection after `Done`, so that neither end
    /// reports a reset for the other's last message.
    fn wait_for_close(&mut self) {
        let _ = self
            .link
            .sock
            .set_read_timeout(Some(Duration::from_secs(2)));
        let mut b = [0u8; 4096];
        for _ in 0..1024 {
            match self.link.sock.read(&mut b) {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
        }
    }
}

impl Packets for Receiving<'_> {
    fn wait(&self, wait: Duration) -> Result<(), PumpError> {
        let fds = [self.sock.as_fd(), self.link.sock.as_fd()];
        crate::wake::ready(&fds, false, wait)
            .map(|_| ())
            .map_err(PumpError::Read)
    }

    fn receive(
        &mut self,
        take: &mut dyn FnMut(&DataHeader, usize, Arrival) -> Take,
    ) -> Result<bool, PumpError> {
        let (mut bufs, mut meta) = (
            std::mem::take(&mut self.bufs),
            std::mem::take(&mut self.meta),
        );
        let got = self.receive_into(&mut bufs, &mut meta, take);
        (self.bufs, self.meta) = (bufs, meta);
        got
    }

    fn messages(&mut self) -> io::Result<Vec<Message>> {
        self.link.poll()
    }

    fn queued(&mut self) -> io::Result<bool> {
        self.link.push()?;
        Ok(!self.link.idle())
    }

    fn offer(&mut self, m: &Message) -> io::Result<()> {
        self.link.offer(m)
    }

    fn socket_drops(&self) -> Option<(u64, u64)> {
        // `SO_MEMINFO` (not in `libc` for every architecture): the socket's memory counters.
        const SO_MEMINFO: i32 = 55;
        let m: [u32; 9] =
            crate::sockopt::get(self.sock.as_fd(), libc::SOL_SOCKET, SO_MEMINFO).ok()?;
        let at = |i: i32| usize::try_from(i).ok().and_then(|i| m.get(i)).copied();
        let dropped = at(libc::SK_MEMINFO_DROPS)?;
        let buffer = at(libc::SK_MEMINFO_RCVBUF)?;
        Some((u64::from(dropped), u64::from(buffer)))
    }

    fn written(&self) -> u64 {
        self.written
    }

    fn placed(&self, bytes: u64) {
        if let Some(p) = &self.in_place {
            p.store(bytes.min(self.length), Ordering::Release);
        }
    }

    fn fall_back(&mut self, from: u64) -> Result<(), PumpError> {
        super::leave_unreached(self.unreached.as_ref(), &self.pump)?;
        self.copy_rest(from)
    }

    fn finish(&mut self) -> Result<(), PumpError> {
        let done = Message::Done {
            bytes: self.written,
        };
        self.link.send(&done).map_err(PumpError::Read)?;
        self.wait_for_close();
        Ok(())
    }
}

/// When a buffer arrived, on this host's monotonic clock: the kernel's receive time where it
/// tells (the packet train's spacing, and a report's span, survive a receiver that was busy
/// when they came), carried over from the wall clock by how long ago it was at `now` (both
/// clocks read together); else `now`.
fn arrival(kernel: Option<Duration>, now: (Instant, Duration)) -> Instant {
    match kernel {
        Some(t) => now.0.checked_sub(now.1.saturating_sub(t)).unwrap_or(now.0),
        None => now.0,
    }
}
