//! What goes in and out of the transfer core: the driver's and the front-end's [`Input`]s,
//! the core's [`Action`]s, what the peer is to be [`Told`] and the [`Note`]s of decisions.

use super::udp::{LedgerError, UdpEvent};
use super::ConnId;
use crate::congestion::{CongestionControl, PacedBy};
use crate::law::{Decision, Setup};
use crate::pacing::Pace;
use crate::sample::{Sample, TcpStats};
use fatpipe_proto::udp::Report;
use std::time::Duration;

/// Something that happened, handed in by the driver or the front-end.
#[derive(Debug, Clone)]
pub enum Input<'a> {
    /// A connection's set-up was carried out ([`Action::Start`]): what it now runs.
    Started {
        /// The connection.
        conn: ConnId,
        /// The congestion control the kernel runs on it (a sender's), if known.
        runs: Option<CongestionControl>,
        /// This end's buffer in its role, as the kernel accounts it (twice the size set).
        buffer: u64,
        /// The window it advertises now (`TCP_INFO` `rcv_wnd`), bytes.
        window: u64,
    },
    /// A connection's counters, read for an [`Action::Sample`].
    Counters {
        /// The connection.
        conn: ConnId,
        /// What was read.
        counters: Counters,
    },
    /// Every connection's view, read for an [`Action::Observe`], in the order they were made.
    Observed {
        /// `TCP_INFO` of each connection.
        streams: &'a [TcpStats],
        /// CPU time of each connection's thread, where it can be read.
        cpu: &'a [Option<Duration>],
        /// This end's send-buffer memory over all connections, bytes as accounted.
        memory: u64,
    },
    /// The kernel now runs `runs` on a connection (after an [`Action::SetCc`]).
    Runs {
        /// The connection.
        conn: ConnId,
        /// What it runs, if known.
        runs: Option<CongestionControl>,
    },
    /// A control-channel round trip: a probe the peer answered.
    ProbeRtt(Duration),
    /// The control connection's lowest RTT, where its peer is the data's: the path's own round
    /// trip, seen before this transfer's data (or a neighbour's) queued on it. A sender's
    /// policies read queues against it; a receiver takes it as its probe (drsFTP's server
    /// sends none of its own).
    ControlRtt(Duration),
    /// The peer announced its buffer, bytes.
    PeerBuffer(u64),
    /// A connection could not be set up: it is no longer tuned.
    Dropped(ConnId),
    /// The sending peer said what paces its connections.
    PeerPaces(PacedBy),
    /// The transfer ended: every connection is sampled once more.
    Ended,
    /// The UDP channel's receiver reported (see [`Transfer::open_udp_sender`](super::Transfer::open_udp_sender)).
    UdpReport(Report),
    /// The driver sent the batch [`Transfer::poll_transmit`](super::Transfer::poll_transmit)
    /// asked for, this many bytes.
    UdpSent(usize),
}

/// A connection's counters at one instant (what a [`Sample`] holds besides what the core
/// knows itself).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Counters {
    /// Payload bytes moved so far.
    pub bytes: u64,
    /// Largest single read since the previous sample.
    pub max_read: u64,
    /// Receive buffer as the kernel accounts it.
    pub rcvbuf: u64,
    /// Send buffer as the kernel accounts it.
    pub sndbuf: u64,
    /// `TCP_INFO`, when it could be read.
    pub tcp: Option<TcpStats>,
}

/// What the driver is to do.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// Set up a new connection: its law's buffers after connecting, and on a sender this
    /// congestion control (`None`: the system's); then hand in [`Input::Started`].
    Start {
        /// The connection.
        conn: ConnId,
        /// The law's buffers around set-up (those before connecting were set by the caller).
        setup: Setup,
        /// The congestion control a sender is to run.
        cc: Option<CongestionControl>,
    },
    /// Read the connection's counters and hand them in as [`Input::Counters`].
    Sample(ConnId),
    /// Carry out a law's decision on a connection (buffers, window clamp, read size) and
    /// record it with the sample it answers.
    Apply {
        /// The connection.
        conn: ConnId,
        /// The sample decided on.
        sample: Box<Sample>,
        /// The decision.
        decision: Decision,
        /// The pacing to set now (the decision's, unless the kernel paces the connection).
        pace: Option<Pace>,
    },
    /// Start the connection's receive buffer (and window clamp) at this size.
    Seed {
        /// The connection.
        conn: ConnId,
        /// A `setsockopt` size.
        bytes: u64,
    },
    /// Pace the connection.
    Pace {
        /// The connection.
        conn: ConnId,
        /// How.
        pace: Pace,
    },
    /// Switch the connection's congestion control; then hand in [`Input::Runs`].
    SetCc {
        /// The connection.
        conn: ConnId,
        /// The control.
        cc: CongestionControl,
    },
    /// Read every connection's view and hand it in as [`Input::Observed`].
    Observe,
    /// Open this many more streams.
    OpenStreams(u32),
    /// Tell the peer over the control channel.
    Tell(Told),
    /// Log and record a decision of the transfer's.
    Note(Note),
    /// Log, record or tell the UDP channel's receiver what its sender decided.
    Udp(UdpEvent),
    /// The UDP channel's receiver reported what cannot be: the transfer fails.
    UdpFailed(LedgerError),
}

/// What a transfer's end has to tell its peer over the control channel while it runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Told {
    /// This end's buffer changed (drsFTP's `SBUF`), bytes.
    Buffer(u64),
    /// The sending end now runs a congestion control that paces itself (bbr), or TCP paces
    /// streams started together: the receiving laws read its packets' spacing as its own
    /// pacing rate, not the bottleneck's.
    Paced(PacedBy),
}

/// A decision of the transfer's, for the log and the telemetry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Note {
    /// The stream policy opened streams, or settled.
    Streams {
        /// Streams asked for so far.
        streams: u32,
        /// Why.
        reason: String,
    },
    /// The senders switched congestion control.
    Control {
        /// The control from now on.
        cc: CongestionControl,
        /// Why.
        reason: String,
    },
    /// The sending peer paces.
    PeerPaces {
        /// What paces it, as the peer said.
        by: PacedBy,
        /// What that means here.
        reason: String,
    },
}
