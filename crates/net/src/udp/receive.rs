//! The receiving end of a UDP transfer: one loop that takes batches of packets (`recvmmsg`, with
//! receive offload where the kernel has it), writes new data at its place in the file (runs of
//! adjacent packets in one write), and reports every [`REPORT_EVERY`](super::REPORT_EVERY).

use super::{
    net, size_buffers, tell, unexpected, Link, UdpConfig, UdpStatus, UdpSummary, REPORT_EVERY,
};
use crate::admission::Proof;
use crate::{Conductor, Moved, Mover, Pump, PumpError};
use fatpipe_proto::udp::{packets, DataHeader, Message, HEADER, PACKET_RANGE};
use fatpipe_tune::transfer::udp::{Arrivals, Take};
use quinn_udp::{RecvMeta, UdpSocketState};
use std::fs::File;
use std::hash::{BuildHasher, Hasher};
use std::io::{self, ErrorKind, IoSlice, IoSliceMut, Read, Seek, SeekFrom};
use std::net::{TcpStream, UdpSocket};
use std::os::fd::AsFd;
use std::os::unix::fs::FileExt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
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
}

impl Mover for UdpReceiver<'_> {
    fn run(self: Box<Self>, pump: &Arc<Pump>, _driver: &Conductor) -> Result<Moved, PumpError> {
        let r = PumpError::Read;
        pump.attach(&self.link).map_err(r)?;
        let s = *self;
        Proof::on_plain(s.proof, &s.link).map_err(r)?;
        let mut link = Link::new(s.link.try_clone().map_err(r)?);
        // Ready goes out before the sender's Hello is read: the sender, which sends its Hello
        // as it connects or accepts, finds the port waiting (a round trip fewer before the
        // first packet); a sender that waits for Ready after its Hello is served the same.
        let local = s.link.local_addr().map_err(r)?.ip();
        let ports = s.config.ports.as_ref();
        let sock = crate::socket::bind_in_range(local, ports, 0, UdpSocket::bind).map_err(r)?;
        size_buffers(&sock, s.config.force_buffers, false);
        let state = UdpSocketState::new((&sock).into()).map_err(r)?;
        let token = std::collections::hash_map::RandomState::new()
            .build_hasher()
            .finish();
        let port = sock.local_addr().map_err(r)?.port();
        link.send(&Message::Ready { port, token }).map_err(r)?;
        let (packet, length) = match link.wait(s.config.timeout).map_err(r)? {
            Message::Hello { packet, length } => (packet, length),
            m => return Err(r(unexpected(&m))),
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
        let mut run = Receiving {
            file: s.file,
            offset: s.offset,
            length,
            payload,
            arrivals: Arrivals::new(token, packets(length, payload)),
            link,
            sock,
            state,
            written: 0,
            timeout: s.config.timeout,
            start: Instant::now(),
            status: s.config.status.clone(),
            in_place: s.in_place,
        };
        let fell_back = run.go(pump)?;
        Ok(Moved {
            bytes: length,
            streams: 1,
            reused: 0,
            udp: Some(UdpSummary {
                packets: packets(length, payload),
                foreign: run.arrivals.foreign(),
                fell_back,
                ..UdpSummary::default()
            }),
        })
    }
}

/// How often the receiver reports before any packet has arrived (it tells the sender it is
/// there; nothing else is new).
const QUIET_REPORTS: Duration = Duration::from_millis(250);

/// One UDP receive in progress.
struct Receiving<'a> {
    file: &'a File,
    offset: u64,
    length: u64,
    payload: u64,
    arrivals: Arrivals,
    link: Link,
    sock: UdpSocket,
    state: UdpSocketState,
    written: u64,
    timeout: Duration,
    start: Instant,
    status: Option<Arc<Mutex<UdpStatus>>>,
    in_place: Option<Arc<AtomicU64>>,
}

impl Receiving<'_> {
    /// Receives until every byte is written; returns whether the sender fell back to TCP.
    fn go(&mut self, pump: &Pump) -> Result<bool, PumpError> {
        let r = net(false);
        let mut bufs = vec![vec![0u8; BUFFER]; BUFFERS];
        let mut meta = vec![RecvMeta::default(); BUFFERS];
        let mut next_report = Instant::now() + REPORT_EVERY;
        let mut heard = Instant::now();
        // Nothing arrived yet: a report every REPORT_EVERY would say nothing, and a round trip
        // of them took the feedback connection's whole first window, so that the one telling
        // the train waited 130 ms for acknowledgements. Until the first packet, one in a while.
        let mut arrived = false;
        let mut reported = Instant::now();
        while !self.arrivals.complete() {
            pump.check()?;
            let mut wait = next_report.saturating_duration_since(Instant::now());
            if !self.link.idle() {
                // A report is stuck in the queue: look again soon, without spinning.
                wait = wait.max(Duration::from_millis(1));
            }
            let fds = [self.sock.as_fd(), self.link.sock.as_fd()];
            crate::wake::ready(&fds, false, wait).map_err(&r)?;
            for _ in 0..64 {
                let mut slices: Vec<IoSliceMut<'_>> =
                    bufs.iter_mut().map(|b| IoSliceMut::new(b)).collect();
                match self.state.recv((&self.sock).into(), &mut slices, &mut meta) {
                    Ok(n) => {
                        heard = Instant::now();
                        arrived = true;
                        for (m, b) in meta.iter().zip(bufs.iter()).take(n) {
                            let at = arrival_us(m.timestamp, self.start);
                            self.take(&b[..m.len.min(b.len())], m.stride.max(1), at, pump)?;
                        }
                    }
                    Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                    Err(e) if e.kind() == ErrorKind::Interrupted => {}
                    // An ICMP error from an earlier send of the peer's: not ours to fail on.
                    Err(e) if e.kind() == ErrorKind::ConnectionRefused => {}
                    Err(e) => return Err(r(e)),
                }
            }
            // The sender's word: how its controller sees the transfer, or that UDP does not
            // get through.
            for m in self.link.poll().map_err(&r)? {
                match m {
                    Message::Status {
                        rate,
                        loss_ppm,
                        state,
                    } => tell(
                        &self.status,
                        UdpStatus {
                            rate: rate as f64,
                            loss: f64::from(loss_ppm) / 1e6,
                            state,
                        },
                    ),
                    Message::Fallback { offset } => {
                        self.fall_back(offset, pump)?;
                        return Ok(true);
                    }
                    m => return Err(r(unexpected(&m))),
                }
            }
            let now = Instant::now();
            self.link.push().map_err(&r)?;
            // A report waits while the previous one is still queued: what changed meanwhile
            // goes into the next.
            let quiet = !arrived && now < reported + QUIET_REPORTS;
            if quiet && now >= next_report {
                next_report = now + REPORT_EVERY;
            }
            if (now >= next_report || self.arrivals.complete()) && self.link.idle() {
                reported = now;
                let at = self.start.elapsed().as_micros() as u64;
                let report = self.arrivals.report(self.written, at);
                self.link.offer(&Message::Report(report)).map_err(&r)?;
                next_report = now + REPORT_EVERY;
                self.placed(self.arrivals.in_order() * self.payload);
            }
            if now.duration_since(heard) > self.timeout {
                return Err(r(io::Error::new(
                    ErrorKind::TimedOut,
                    "no data within the --timeout",
                )));
            }
        }
        self.placed(self.length);
        self.link
            .send(&Message::Done {
                bytes: self.written,
            })
            .map_err(&r)?;
        self.wait_for_close();
        Ok(false)
    }

    /// Books the packets of one received buffer (`stride` bytes each, the last maybe fewer)
    /// that arrived at `now_us`, and writes the new ones: each run of adjacent packets with one
    /// `pwritev` straight from the buffer (copying them into a run first cost 11 % of the
    /// receiver's time).
    fn take(
        &mut self,
        data: &[u8],
        stride: usize,
        now_us: u32,
        pump: &Pump,
    ) -> Result<(), PumpError> {
        let mut run: Vec<IoSlice<'_>> = Vec::new();
        let (mut run_at, mut run_end) = (0u64, 0u64);
        for packet in data.chunks(stride) {
            let Some((h, body)) = DataHeader::parse(packet) else {
                continue;
            };
            // A packet whose size does not match its place is not the sender's.
            let at = h.index.saturating_mul(self.payload);
            let want = self.payload.min(self.length.saturating_sub(at));
            if body.len() as u64 != want {
                let foreign = DataHeader {
                    token: !h.token,
                    ..h
                };
                self.arrivals.take(&foreign, now_us);
                continue;
            }
            if self.arrivals.take(&h, now_us) != Take::New {
                continue;
            }
            if at != run_end && !run.is_empty() {
                self.write_run(run_at, &run, pump)?;
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
            self.write_run(run_at, &run, pump)?;
        }
        Ok(())
    }

    /// Writes adjacent packets' data at `at` in the transfer.
    fn write_run(&mut self, at: u64, run: &[IoSlice<'_>], pump: &Pump) -> Result<(), PumpError> {
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
        pump.count(total);
        Ok(())
    }

    /// The sender could not reach this end over UDP: the bytes from `from` on come over the
    /// TCP connection, after whatever followed the fallback message in its buffer.
    fn fall_back(&mut self, from: u64, pump: &Pump) -> Result<(), PumpError> {
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
        self.placed(self.length);
        self.link
            .send(&Message::Done { bytes: self.length })
            .map_err(&r)?;
        self.wait_for_close();
        Ok(())
    }

    /// Says that the transfer's first `bytes` are written without a gap.
    fn placed(&self, bytes: u64) {
        if let Some(p) = &self.in_place {
            p.store(bytes.min(self.length), Ordering::Release);
        }
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

/// When a buffer arrived, in wrapping microseconds: the kernel's receive time where it tells
/// (the packet train's spacing survives a receiver that was busy when it came), else now by
/// this end's clock since `start`. One socket gives one kind or the other throughout; only
/// differences between arrivals are used.
fn arrival_us(kernel: Option<Duration>, start: Instant) -> u32 {
    match kernel {
        Some(t) => t.as_micros() as u32,
        None => start.elapsed().as_micros() as u32,
    }
}
