//! What the client set for the session's transfers to come: the representation and restart
//! point of the next one, MODE E and its parallelism, the UDP channel, and how the data
//! connections are tuned and what the client is told about them.

use fatpipe_net::udp::UdpConfig;
use fatpipe_net::TunerConfig;
use fatpipe_proto::gridftp::Parallelism;
use fatpipe_proto::ranges::RangeSet;
use fatpipe_proto::udp::UdpReady;
use fatpipe_proto::TransferType;

/// The settings of a session's transfers (see the module's text).
pub(super) struct Settings {
    /// `TYPE`.
    pub(super) ttype: TransferType,
    /// `REST` offset for the next MODE S transfer.
    pub(super) rest: u64,
    /// `REST` ranges for the next MODE E `RETR`.
    pub(super) rest_ranges: Option<RangeSet>,
    /// `ALLO`: the size the next upload announced.
    pub(super) allo: Option<u64>,
    /// `MODE E` in effect.
    pub(super) extended: bool,
    /// `OPTS RETR Parallelism=…` for MODE E sends.
    pub(super) parallelism: Parallelism,
    /// The client reuses MODE E data connections (`OPTS DCREUSE ON`): sends leave them open.
    pub(super) reuse: bool,
    /// `SITE SETNETSTACK udp`: MODE S binary transfers move over the UDP channel.
    pub(super) udp: Option<UdpConfig>,
    /// `SITE UDPREADY`: the socket the client's receiver named for the next transfer, a
    /// download over the UDP channel whose train then leaves as its `RETR` is read.
    pub(super) udp_ready: Option<UdpReady>,
    /// How this session's data connections are tuned: the server's defaults, changed by the
    /// client (`OPTS DRS Tuning=`, `Pacing=`, `CC=`; `SBUF`).
    pub(super) tune: TunerConfig,
    /// The client hears the drsFTP messages (`OPTS DRS Notify`).
    pub(super) drs_notify: bool,
    /// Whole files moved in MODE E are hashed beside their transfer for the client's next
    /// `CKSM` (`OPTS DRS Hash=`; a fatpipe client verifies unless told not to).
    pub(super) hash_beside: bool,
}

impl Settings {
    /// A new session's: ASCII, MODE S, tuned as the server's `tune` says.
    pub(super) fn new(tune: TunerConfig) -> Settings {
        Settings {
            ttype: TransferType::Ascii,
            rest: 0,
            rest_ranges: None,
            allo: None,
            extended: false,
            parallelism: Parallelism::fixed(1),
            reuse: false,
            udp: None,
            udp_ready: None,
            tune,
            drs_notify: false,
            hash_beside: true,
        }
    }
}
