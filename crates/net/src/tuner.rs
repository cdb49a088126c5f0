//! How a transfer's connections are tuned here ([`TunerConfig`]), what their tuning amounted
//! to ([`TuneSummary`]), and the buffers set before a socket connects. The conductor drives
//! the laws on the connections.

use crate::buffers::BufferControl;
use crate::live::Live;
use crate::telemetry::StatsFile;
use fatpipe_tune::{CongestionControl, Pacing, Params, Role, Tuning};
use std::io;
use std::os::fd::AsFd;
use std::sync::Arc;

/// Everything a tuner needs besides the socket.
#[derive(Debug, Clone)]
pub struct TunerConfig {
    /// The mode.
    pub tuning: Tuning,
    /// The laws' knobs.
    pub params: Params,
    /// How buffers are set here.
    pub control: BufferControl,
    /// Where samples go, if anywhere.
    pub stats: Option<StatsFile>,
    /// `client` or `server`, for the records.
    pub end: &'static str,
    /// How a sending connection is paced; `None`: TCP pacing when the stream count grows,
    /// none otherwise.
    pub pacing: Option<Pacing>,
    /// The congestion control of a sending connection (`TCP_CONGESTION`); `None`: the
    /// system's default.
    pub cc: Option<CongestionControl>,
    /// Where each connection leaves its latest sample for a progress line, if anywhere.
    pub live: Option<Arc<Live>>,
}

impl TunerConfig {
    /// Buffers left to the kernel and no telemetry: what a connection runs when the caller
    /// asked for no tuning (its pacing law still runs).
    pub fn untuned() -> TunerConfig {
        TunerConfig {
            tuning: Tuning::Kernel,
            params: Params::default(),
            control: BufferControl::new(false),
            stats: None,
            end: "",
            pacing: None,
            cc: None,
            live: None,
        }
    }
}

/// What a finished transfer's tuning amounted to.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TuneSummary {
    /// Peak of this end's buffer in its role (receive buffer of a receiver, send buffer of a
    /// sender), as the kernel accounts it.
    pub peak_local: u64,
    /// Peak buffer the peer announced, if it announced any.
    pub peak_peer: Option<u64>,
    /// System limits that held a buffer below what the law asked.
    pub capped: Vec<String>,
    /// Why a connection could not be paced as its pacing law asked, if one could not.
    pub unpaced: Option<String>,
    /// The congestion control the sending connections ran (the first one's).
    pub cc: Option<CongestionControl>,
}

impl TuneSummary {
    /// One summary for a transfer over several connections: buffers summed (memory in use at
    /// once), the peer's largest announcement, every cap met.
    pub fn combine(all: &[TuneSummary]) -> TuneSummary {
        let mut capped: Vec<String> = all.iter().flat_map(|s| s.capped.clone()).collect();
        capped.sort();
        capped.dedup();
        TuneSummary {
            peak_local: all.iter().map(|s| s.peak_local).sum(),
            peak_peer: all.iter().filter_map(|s| s.peak_peer).max(),
            capped,
            unpaced: all.iter().find_map(|s| s.unpaced.clone()),
            cc: all.iter().find_map(|s| s.cc.clone()),
        }
    }
}

/// Sets the buffers a mode wants before `connect`/`listen` (they fix the window scale). A cap
/// that held them is reported once the conductor starts the connection, from the buffers kept.
pub fn before_connect(cfg: &TunerConfig, sock: impl AsFd) -> io::Result<()> {
    // Every mode's pre-connect buffers are the same for both roles.
    let setup = cfg.tuning.law(Role::Receiver, &cfg.params).setup();
    cfg.control.apply(sock.as_fd(), &setup.before_connect)?;
    match setup.clamp_before_connect {
        Some(bytes) => cfg.control.clamp(sock.as_fd(), bytes),
        None => Ok(()),
    }
}
