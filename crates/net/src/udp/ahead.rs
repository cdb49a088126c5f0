//! A download's UDP channel begun a round trip early. The receiver binds its socket before
//! the transfer command and names it on the control connection (`SITE UDPREADY`, with the
//! token, the packet size it takes and the bytes it expects: [`ReadyAhead`]); the sender sends
//! the packet train as it reads the command ([`launch`]), before the data connection is up,
//! and the receiver takes packets in as soon as its data connection is. `Hello` and `Ready`
//! still cross on the data connection: each end checks the other's against what was named.

use super::send::{core, open_to, packet_size, Source, Wire};
use super::{bind_receiving, UdpConfig};
use crate::Pump;
use fatpipe_proto::udp::{UdpReady, PACKET_RANGE, TRAIN};
use fatpipe_tune::transfer::udp::{Next, UdpSend, BATCH};
use std::hash::{BuildHasher, Hasher};
use std::io::{self, ErrorKind};
use std::net::{IpAddr, SocketAddr, TcpStream, UdpSocket};
use std::time::{Duration, Instant};

/// The receiver's socket, bound before the transfer command, and what it names.
#[derive(Debug)]
pub struct ReadyAhead {
    pub(super) sock: UdpSocket,
    pub(super) ready: UdpReady,
}

impl ReadyAhead {
    /// Binds the receiving socket on the address of `control` (the control connection) for a
    /// transfer of `length` bytes, its packets as `config` says or as the path's MTU allows.
    pub fn bind(control: &TcpStream, config: &UdpConfig, length: u64) -> io::Result<ReadyAhead> {
        let sock = bind_receiving(control.local_addr()?.ip(), config)?;
        let ready = UdpReady {
            port: sock.local_addr()?.port(),
            token: new_token(),
            packet: packet_size(config, control),
            length,
        };
        Ok(ReadyAhead { sock, ready })
    }

    /// What `SITE UDPREADY` tells the sender.
    pub fn ready(&self) -> UdpReady {
        self.ready
    }
}

/// A transfer's token: random, so that packets of another transfer are told apart.
pub(super) fn new_token() -> u64 {
    std::collections::hash_map::RandomState::new()
        .build_hasher()
        .finish()
}

/// The sender's channel begun before its data connection: the socket to the receiver's named
/// one, and the core that sent the packet train on it.
pub struct Launched {
    wire: Wire,
    core: UdpSend,
    ready: UdpReady,
}

impl std::fmt::Debug for Launched {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Launched")
            .field("ready", &self.ready)
            .finish()
    }
}

impl Launched {
    /// The packet size the receiver named.
    pub fn packet(&self) -> u16 {
        self.ready.packet
    }

    /// The channel, for the receiver's `Ready` (`port`, `token`) on a data connection from
    /// `from`: it must name the socket it named before, at the address the train went to (a
    /// data connection of someone else's, or from elsewhere, would not).
    pub(super) fn confirm(
        self,
        port: u16,
        token: u64,
        from: IpAddr,
    ) -> io::Result<(Wire, UdpSend)> {
        let named = (self.ready.port, self.ready.token, self.wire.to().ip());
        if (port, token, from) != named {
            return Err(io::Error::new(
                ErrorKind::InvalidData,
                "the receiver's Ready names another socket than its UDPREADY",
            ));
        }
        Ok((self.wire, self.core))
    }
}

/// Sends the packet train of `source` (the file, where the transfer starts, its bytes) to the
/// socket `ready` names at `peer` (the control connection's peer; from `local`), packets as it
/// asks; `rtt` is the control connection's round trip ([`super::round_trip`]). Refused where
/// the receiver expects another length (the file changed since it asked its size): that
/// transfer goes the usual way, and the receiver finds the difference in `Hello`.
pub fn launch(
    ready: UdpReady,
    (peer, local): (IpAddr, IpAddr),
    rtt: Option<Duration>,
    source: Source<'_>,
    config: &UdpConfig,
    pump: &Pump,
) -> io::Result<Launched> {
    let length = source.2;
    if ready.length != length {
        return Err(io::Error::new(
            ErrorKind::InvalidData,
            format!(
                "the receiver expects {} bytes, the transfer has {length}",
                ready.length
            ),
        ));
    }
    if !PACKET_RANGE.contains(&ready.packet) {
        return Err(io::Error::new(ErrorKind::InvalidInput, "packet size"));
    }
    let udp = open_to(
        local,
        SocketAddr::new(peer, ready.port),
        config.force_buffers,
    )?;
    let mut core = core(config, length, ready.packet, ready.token, rtt);
    let mut wire = Wire::new(core.payload(), ready.token, udp);
    // The train: what the core asks for at once, a batch at a time (a few more tries than
    // it takes, should the core ask for less).
    for _ in 0..2 * TRAIN.div_ceil(BATCH as u64) {
        let now = Instant::now();
        let Next::Send { packets, sent_us } = core.poll_send(now, false) else {
            break;
        };
        match wire.send(source, &packets, sent_us, pump) {
            Ok(Ok(bytes)) => core.on_sent(bytes, now),
            Ok(Err(e)) => return Err(e),
            Err(e) => return Err(io::Error::other(e.to_string())),
        }
    }
    Ok(Launched { wire, core, ready })
}
