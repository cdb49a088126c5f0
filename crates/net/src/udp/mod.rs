//! The UDP data channel (FOBS, shared/seeds/fobs.txt): the file's bytes in UDP packets paced by a
//! rate controller, the receiver's per-segment bitmaps back over the transfer's TCP data
//! connection, lost packets resent selectively. Two movers, [`UdpSender`] and [`UdpReceiver`],
//! behind the same [`Mover`](crate::Mover) trait as the TCP ones. What they decide is pure and
//! lives in `fatpipe_tune::transfer::udp`: the sender's core (`UdpSend`: its ledger, the rate
//! law's feedback, what to send when) and the receiver's books (`Arrivals`); these movers
//! only move packets, write the file and carry the messages.
//!
//! On the TCP connection: the sender says how long the transfer is (`Hello`), the receiver
//! answers with its UDP port and the transfer's token (`Ready`), then reports every
//! [`REPORT_EVERY`] until it has every byte (`Done`). When no packet gets through within
//! [`PROBE`], the sender says `Fallback` and sends the bytes over the TCP connection itself.
//! A download may name the receiver's socket on the control connection before its transfer
//! command, and its sender then sends the train a round trip sooner ([`launch`], [`ReadyAhead`]).

mod ahead;
mod receive;
mod send;

pub use ahead::{launch, Launched, ReadyAhead};
pub use receive::UdpReceiver;
pub use send::{round_trip, UdpSender};

use crate::{Pump, PumpError};
use fatpipe_proto::udp::Message;
use fatpipe_tune::rate::{RateControlKind, RateMemory};
use std::fmt;
use std::io::{self, ErrorKind, Write};
use std::net::TcpStream;
use std::ops::RangeInclusive;
use std::os::fd::AsFd;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub use fatpipe_tune::transfer::udp::REPORT_EVERY;
/// How long the sender waits for a first packet to get through before falling back to TCP.
pub const PROBE: Duration = Duration::from_secs(2);
/// The receiving socket's buffer asked for (8 MiB: 67 ms at 1 Gbit/s of a receiver put aside).
/// Root's forced 16 MiB (32 accounted) made a clean 100 ms path's copy hold 3.4 x BDP; at 8 MiB
/// it holds 2.0 x and moved as fast at 0, 1 and 5 % loss and at 200 ms (docs/auto-plan.md).
const RECEIVE_BUFFER: u64 = 8 << 20;
/// The sending socket's: the sender paces, and the kernel frees a datagram's memory once it
/// has left (4 MiB: 33 ms at 1 Gbit/s). Root's forced 16 MiB on both sockets made the channel
/// hold 64 MiB accounted on a 12.5 MB path (5.4 x BDP); unprivileged runs with 4 MiB were as
/// fast (docs/auto-plan.md).
const SEND_BUFFER: u64 = 4 << 20;

/// How a UDP transfer runs.
#[derive(Debug, Clone)]
pub struct UdpConfig {
    /// UDP payload per data packet, header included; `None`: as large as the path's MTU
    /// (what the TCP connection beside found) lets a datagram be without fragments.
    pub packet: Option<u16>,
    /// The sender's rate controller.
    pub control: RateControlKind,
    /// The most the sender sends, bits/s (the seed's controllers scale their steps by it).
    pub max_rate: f64,
    /// The rate to start at, bits/s.
    pub start_rate: f64,
    /// Ports the receiver may bind (any when `None`).
    pub ports: Option<RangeInclusive<u16>>,
    /// Longest silence from the peer before the transfer fails.
    pub timeout: Duration,
    /// Root may set socket buffers past `net.core.rmem_max`/`wmem_max`.
    pub force_buffers: bool,
    /// Where the sender writes its rate decisions and packet-loss signatures (`--stats`).
    pub stats: Option<crate::telemetry::StatsFile>,
    /// `client` or `server`, for the telemetry.
    pub end: &'static str,
    /// What earlier transfers over this path taught the sender (its start, `history`'s odds);
    /// the sender brings it up to date when it ends.
    pub memory: Option<Arc<Mutex<RateMemory>>>,
    /// Where either end keeps the rate controller's latest view, for a progress line.
    pub status: Option<Arc<Mutex<UdpStatus>>>,
    /// Where no packet gets through: `None`, the bytes go over the TCP connection instead;
    /// `Some` (a channel chosen, not asked for), this end sets it and ends the transfer
    /// ([`PumpError::Cancelled`]), for the copy to go on over TCP streams, which carry a long
    /// path better than the one connection does.
    pub unreached: Option<Arc<AtomicBool>>,
}

/// Where the transfer's config asks for it (`unreached`, [`UdpConfig::unreached`]): says that
/// no packet got through and ends the transfer, its `pump` cancelled (its data connection shut,
/// so that the peer gives up at once and says so).
fn leave_unreached(unreached: Option<&Arc<AtomicBool>>, pump: &Pump) -> Result<(), PumpError> {
    match unreached {
        None => Ok(()),
        Some(flag) => {
            tracing::info!("no UDP packet got through: the copy goes on over TCP streams");
            flag.store(true, std::sync::atomic::Ordering::SeqCst);
            pump.cancel();
            Err(PumpError::Cancelled)
        }
    }
}

/// The rate controller's latest view of a running transfer (the sender's, told to the receiver).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct UdpStatus {
    /// The sending rate, bits/s.
    pub rate: f64,
    /// Recent loss share.
    pub loss: f64,
    /// The controller's state (empty until the first word from the sender).
    pub state: String,
}

impl fmt::Display for UdpStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.state.is_empty() {
            return Ok(());
        }
        write!(
            f,
            "udp {:.0} Mbit/s, {}, loss {:.2} %",
            self.rate / 1e6,
            self.state,
            100.0 * self.loss
        )
    }
}

/// Puts `s` in `slot`, if there is one.
pub(crate) fn tell(slot: &Option<Arc<Mutex<UdpStatus>>>, s: UdpStatus) {
    if let Some(slot) = slot {
        *slot.lock().unwrap_or_else(|e| e.into_inner()) = s;
    }
}

impl Default for UdpConfig {
    fn default() -> Self {
        UdpConfig {
            packet: None,
            control: RateControlKind::Default,
            max_rate: RateControlKind::Default.line(),
            start_rate: 10e6,
            ports: None,
            timeout: Duration::from_secs(60),
            force_buffers: true,
            stats: None,
            end: "client",
            memory: None,
            status: None,
            unreached: None,
        }
    }
}

/// What a UDP transfer did, for its summary and the final reply.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct UdpSummary {
    /// The rate controller.
    pub control: String,
    /// Packets the transfer needed (the seed's N).
    pub packets: u64,
    /// Packets sent, resends included (the seed's T).
    pub transmissions: u64,
    /// The share (%) of packets the path lost while no queue stood on it (the sender's
    /// reading of its random loss); `None` where the sender had none.
    pub path_loss: Option<f64>,
    /// The rate at the end, bits/s, and the controller's state then.
    pub last_rate: f64,
    /// See `last_rate`.
    pub state: String,
    /// Packets the receiver dropped as not this transfer's.
    pub foreign: u32,
    /// No packet got through: the bytes went over the TCP connection.
    pub fell_back: bool,
}

impl UdpSummary {
    /// The seed's loss percentage R = (T − N) / N.
    pub fn loss_percent(&self) -> f64 {
        if self.packets == 0 {
            return 0.0;
        }
        100.0 * self.transmissions.saturating_sub(self.packets) as f64 / self.packets as f64
    }
}

/// The resend share (R, %) a summary as [`UdpSummary`] writes it says, if it says one: a
/// download's summary comes from the server as text.
pub fn loss_in_summary(text: &str) -> Option<f64> {
    share_in_summary(text, "(R = ")
}

/// The path's own loss (%) a summary says (what it lost while no queue stood: a clean path
/// whose start-up overflowed the queue says 0), else its resend share (a server before this
/// reading, or a sender that had no report without a queue).
pub fn path_loss_in_summary(text: &str) -> Option<f64> {
    share_in_summary(text, PATH_LOSS).or_else(|| loss_in_summary(text))
}

/// How a summary names the path's own loss.
const PATH_LOSS: &str = "path loss ";

/// The percentage a summary gives after `label`.
fn share_in_summary(text: &str, label: &str) -> Option<f64> {
    let (_, rest) = text.split_once(label)?;
    let (r, _) = rest.split_once(" %")?;
    r.trim().parse().ok()
}

impl fmt::Display for UdpSummary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.fell_back {
            return f
                .write_str("udp: UDP did not get through to the receiver; the data went over TCP");
        }
        write!(
            f,
            "udp: {} rate control, {} packets, {} resent (R = {:.2} %",
            self.control,
            self.packets,
            self.transmissions.saturating_sub(self.packets),
            self.loss_percent(),
        )?;
        if let Some(p) = self.path_loss {
            write!(f, ", {PATH_LOSS}{p:.3} %")?;
        }
        write!(
            f,
            "), last {:.0} Mbit/s ({})",
            self.last_rate / 1e6,
            self.state
        )
    }
}

/// The TCP connection beside the packets: messages in both directions.
struct Link {
    sock: TcpStream,
    buf: Vec<u8>,
    /// Bytes queued by [`Link::offer`] that the socket has not taken yet.
    out: Vec<u8>,
    /// Where each read lands first.
    scratch: Vec<u8>,
    /// Last time anything arrived.
    heard: Instant,
}

/// Most bytes read from the connection at once.
const READ: usize = 256 << 10;

impl Link {
    /// The link over the transfer's data connection. Reports are small and frequent: they go
    /// out at once (no Nagle), a lost one is resent sooner (the last ones have nothing behind
    /// them to show the loss), and the connection runs bbr where it may, so that random loss
    /// on the way back does not starve them (cubic would carry less than the reports need at a
    /// few percent of loss).
    fn new(sock: TcpStream) -> Link {
        if let Err(e) = sock.set_nodelay(true) {
            tracing::debug!("cannot set TCP_NODELAY on the UDP channel's connection: {e}");
        }
        crate::socket::for_conversation(&sock);
        let mut problems = Vec::new();
        let bbr = fatpipe_tune::CongestionControl::Bbr;
        crate::congestion::choose(sock.as_fd(), Some(&bbr), None, &mut problems);
        for p in problems {
            tracing::debug!("UDP channel's connection: {p}");
        }
        Link {
            sock,
            buf: Vec::new(),
            out: Vec::new(),
            scratch: Vec::new(),
            heard: Instant::now(),
        }
    }

    /// Sends a message, waiting until the socket has taken it (and what was offered before).
    fn send(&mut self, m: &Message) -> io::Result<()> {
        let pending = std::mem::take(&mut self.out);
        self.sock.write_all(&pending)?;
        self.sock.write_all(&m.encode())
    }

    /// Whether everything offered has gone to the socket.
    fn idle(&self) -> bool {
        self.out.is_empty()
    }

    /// Queues a message and sends what the socket takes without waiting: a receive loop must
    /// never stall on its reports (a TCP connection recovering from loss takes nothing for a
    /// while, and meanwhile packets would overflow the UDP socket).
    fn offer(&mut self, m: &Message) -> io::Result<()> {
        self.out.extend_from_slice(&m.encode());
        self.push()
    }

    /// Sends what the socket takes of the queued bytes, without waiting.
    fn push(&mut self) -> io::Result<()> {
        while !self.out.is_empty() {
            match nix::sys::socket::send(
                std::os::fd::AsRawFd::as_raw_fd(&self.sock),
                &self.out,
                nix::sys::socket::MsgFlags::MSG_DONTWAIT | nix::sys::socket::MsgFlags::MSG_NOSIGNAL,
            ) {
                Ok(n) => {
                    self.out.drain(..n);
                }
                Err(nix::errno::Errno::EAGAIN) => break,
                Err(nix::errno::Errno::EINTR) => {}
                Err(e) => return Err(e.into()),
            }
        }
        Ok(())
    }

    /// The next complete message already buffered.
    fn buffered(&mut self) -> io::Result<Option<Message>> {
        match Message::decode(&self.buf) {
            Ok(Some((m, used))) => {
                self.buf.drain(..used);
                Ok(Some(m))
            }
            Ok(None) => Ok(None),
            Err(e) => Err(io::Error::new(ErrorKind::InvalidData, e)),
        }
    }

    /// Reads what the socket has without waiting; the messages complete so far.
    fn poll(&mut self) -> io::Result<Vec<Message>> {
        while self.read_some(nix::sys::socket::MsgFlags::MSG_DONTWAIT)? == READ {}
        let mut out = Vec::new();
        while let Some(m) = self.buffered()? {
            // After a fallback the connection carries the file's bytes, not messages.
            let last = matches!(m, Message::Fallback { .. });
            out.push(m);
            if last {
                break;
            }
        }
        Ok(out)
    }

    /// Waits up to `timeout` for the next message.
    fn wait(&mut self, timeout: Duration) -> io::Result<Message> {
        let until = Instant::now() + timeout;
        loop {
            if let Some(m) = self.buffered()? {
                return Ok(m);
            }
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(io::Error::new(
                    ErrorKind::TimedOut,
                    "no message from the peer within the --timeout",
                ));
            }
            self.sock.set_read_timeout(Some(left))?;
            self.read_some(nix::sys::socket::MsgFlags::empty())?;
        }
    }

    /// One read into the buffer (`flags` say whether it may wait); the bytes it took, 0 when
    /// there were none yet; the peer closing the connection is an error.
    fn read_some(&mut self, flags: nix::sys::socket::MsgFlags) -> io::Result<usize> {
        // One buffer for every read (a fresh zeroed 256 KiB for each look cost 8 to 10 % of
        // either end's time).
        if self.scratch.is_empty() {
            self.scratch = vec![0u8; READ];
        }
        loop {
            let fd = std::os::fd::AsRawFd::as_raw_fd(&self.sock);
            return match nix::sys::socket::recv(fd, &mut self.scratch, flags) {
                Ok(0) => Err(io::Error::new(
                    ErrorKind::UnexpectedEof,
                    "the peer closed the data connection",
                )),
                Ok(n) => {
                    self.buf.extend_from_slice(&self.scratch[..n]);
                    self.heard = Instant::now();
                    Ok(n)
                }
                Err(nix::errno::Errno::EAGAIN) => Ok(0),
                Err(nix::errno::Errno::EINTR) => continue,
                Err(e) => Err(e.into()),
            };
        }
    }
}

/// A message that has no place at this point of the exchange.
pub(crate) fn unexpected(m: &Message) -> io::Error {
    let name = match m {
        Message::Hello { .. } => "Hello",
        Message::Ready { .. } => "Ready",
        Message::Report(_) => "Report",
        Message::Done { .. } => "Done",
        Message::Fallback { .. } => "Fallback",
        Message::Status { .. } => "Status",
    };
    io::Error::new(
        ErrorKind::InvalidData,
        format!("unexpected {name} message on the UDP channel's connection"),
    )
}

/// Sets the buffer a UDP socket moves data through (the channel runs one way: the send
/// buffer of the `sending` end, the receive buffer of the other), as large as its role wants
/// and this host lets it.
fn size_buffers(sock: &std::net::UdpSocket, force: bool, sending: bool) {
    let ask = if sending {
        fatpipe_tune::law::Buffers {
            rcvbuf: None,
            sndbuf: Some(SEND_BUFFER),
        }
    } else {
        fatpipe_tune::law::Buffers {
            rcvbuf: Some(RECEIVE_BUFFER),
            sndbuf: None,
        }
    };
    match crate::buffers::BufferControl::new(force).apply(sock.as_fd(), &ask) {
        Ok(short) => {
            for s in short {
                tracing::debug!("UDP socket: {s}");
            }
        }
        Err(e) => tracing::debug!("cannot size the UDP socket's buffers: {e}"),
    }
}

/// A receiving socket on `local`, in the ports `config` allows, its buffer sized: where a
/// receiver names its socket ahead of the transfer command and where it answers `Hello`.
fn bind_receiving(local: std::net::IpAddr, config: &UdpConfig) -> io::Result<std::net::UdpSocket> {
    let ports = config.ports.as_ref();
    let sock = crate::socket::bind_in_range(local, ports, 0, std::net::UdpSocket::bind)?;
    size_buffers(&sock, config.force_buffers, false);
    Ok(sock)
}

/// A network failure of the side that `sending` says this end is, as the pumps report it.
fn net(sending: bool) -> impl Fn(io::Error) -> PumpError {
    move |e| {
        if sending {
            PumpError::Write(e)
        } else {
            PumpError::Read(e)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_summary_s_resend_share_reads_back_from_its_text() {
        let s = UdpSummary {
            control: "default".into(),
            packets: 10_000,
            transmissions: 10_123,
            last_rate: 9e8,
            state: "steady".into(),
            ..UdpSummary::default()
        };
        assert_eq!(loss_in_summary(&s.to_string()), Some(1.23));
        // Without a reading of the path's own loss, the resends stand for it.
        assert_eq!(path_loss_in_summary(&s.to_string()), Some(1.23));
        let calm = UdpSummary {
            path_loss: Some(0.0),
            ..s.clone()
        };
        assert_eq!(loss_in_summary(&calm.to_string()), Some(1.23));
        assert_eq!(path_loss_in_summary(&calm.to_string()), Some(0.0));
        let fell_back = UdpSummary {
            fell_back: true,
            ..s
        };
        assert_eq!(loss_in_summary(&fell_back.to_string()), None);
        assert_eq!(path_loss_in_summary(&fell_back.to_string()), None);
        assert_eq!(loss_in_summary("udp: (R = x %)"), None);
    }

    proptest::proptest! {
        /// Whatever a server writes, reading a summary's shares never fails the copy.
        #[test]
        fn any_text_reads_as_a_share_or_none(text in ".{0,200}") {
            let _ = loss_in_summary(&text);
            let _ = path_loss_in_summary(&text);
        }

        /// A summary's shares read back as written (R to 0.01, the path loss to 0.001).
        #[test]
        fn a_summary_s_shares_read_back(
            packets in 1u64..10_000_000,
            resent in 0u64..1_000_000,
            path in proptest::option::of(0.0f64..100.0),
        ) {
            let s = UdpSummary {
                control: "default".into(),
                packets,
                transmissions: packets + resent,
                path_loss: path,
                ..UdpSummary::default()
            };
            let text = s.to_string();
            let r = loss_in_summary(&text).unwrap_or(f64::NAN);
            proptest::prop_assert!((r - s.loss_percent()).abs() <= 0.005 + 1e-9, "{text}");
            let p = path_loss_in_summary(&text).unwrap_or(f64::NAN);
            let want = path.unwrap_or(r);
            proptest::prop_assert!((p - want).abs() <= 0.0005 + 1e-9, "{text}");
        }
    }
}
