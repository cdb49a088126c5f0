//! What the transfer core keeps of one data connection: its plan, when it wants its next
//! sample, and what it knows of the peer and the kernel.

use crate::congestion::CongestionControl;
use crate::pacing::Pacing;
use crate::plan::Plan;
use crate::sample::Role;
use crate::{Params, Tuning};
use std::time::{Duration, Instant};

/// One data connection under the core.
pub(super) struct Connection {
    pub(super) plan: Plan,
    /// When it was made: its samples' times count from here.
    pub(super) started: Instant,
    /// When its law wants the next sample.
    pub(super) next_at: Instant,
    /// Kept from the previous transfer.
    pub(super) reused: bool,
    /// This end's buffer in its role as last read, bytes as accounted.
    pub(super) buffer: u64,
    /// The congestion control the kernel runs on it, if known.
    pub(super) runs: Option<CongestionControl>,
    /// The latest control-channel round trip.
    pub(super) probe_rtt: Option<Duration>,
    /// The peer's latest announced buffer.
    pub(super) peer_buffer: Option<u64>,
    /// It could not be set up: no longer tuned.
    pub(super) dropped: bool,
}

impl Connection {
    /// A connection made at `now`, its laws those of `tuning` and `pacing`.
    pub(super) fn new(
        tuning: Tuning,
        role: Role,
        params: &Params,
        pacing: Pacing,
        reused: bool,
        now: Instant,
    ) -> Connection {
        Connection {
            plan: Plan::new(tuning, role, params, pacing),
            started: now,
            next_at: now,
            reused,
            buffer: 0,
            runs: None,
            probe_rtt: None,
            peer_buffer: None,
            dropped: false,
        }
    }

    /// Whether the kernel paces the connection itself (fatpipe's BPF congestion control): no
    /// pacing is set on it from outside.
    pub(super) fn paced_in_kernel(&self) -> bool {
        self.runs == Some(CongestionControl::Bic { paced: true })
    }
}
