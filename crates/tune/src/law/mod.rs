//! The laws: one per tuning mode and role. A law says which buffers to set around connection
//! set-up ([`Setup`]) and then answers each [`Sample`] with a [`Decision`], telling its driver
//! when it wants the next sample. Buffer sizes in decisions are `setsockopt` values (Linux
//! doubles them for its own accounting); sizes in samples are the kernel's accounting.

pub mod classic;
pub mod drs;
pub mod fixed;
pub mod follow;
mod holes;
mod lag;
pub mod probe;
mod trains;
pub(crate) mod window;

use crate::sample::Sample;
use std::time::Duration;

/// Size of the stock buffers.
pub const STOCK_BUFFER: u64 = 64 << 10;

/// Knobs shared by the laws.
#[derive(Debug, Clone, PartialEq)]
pub struct Params {
    /// Sampling interval of `drs-classic`/`drs-grid` (drsFTP used 1 s).
    pub interval: Duration,
    /// How long `probe` measures before fixing its buffers.
    pub probe_period: Duration,
    /// Buffers set before connect/listen by the classic modes, so the window scale allows them.
    pub preconnect: u64,
}

impl Default for Params {
    fn default() -> Self {
        Params {
            interval: Duration::from_secs(1),
            probe_period: Duration::from_secs(2),
            preconnect: 16 << 20,
        }
    }
}

/// Send/receive buffer sizes to set (`None`: leave as is).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Buffers {
    /// `SO_RCVBUF` value.
    pub rcvbuf: Option<u64>,
    /// `SO_SNDBUF` value.
    pub sndbuf: Option<u64>,
}

impl Buffers {
    /// The same size for both buffers.
    pub fn both(n: u64) -> Buffers {
        Buffers {
            rcvbuf: Some(n),
            sndbuf: Some(n),
        }
    }
}

/// What to set around connection set-up. Buffers set before `connect`/`listen` fix the window
/// scale the connection can ever use; the classic modes set large ones there and reset after.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Setup {
    /// Set on the socket before it connects or listens.
    pub before_connect: Buffers,
    /// Set on the connected socket.
    pub after_connect: Buffers,
    /// `TCP_WINDOW_CLAMP` before connecting: it bounds the window scale the SYN announces
    /// (Linux otherwise takes it from the system's largest buffer), so that a window can close
    /// in the small steps a delayed ACK covers.
    pub clamp_before_connect: Option<u64>,
}

/// A law's answer to one sample.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Decision {
    /// New buffer sizes, if any change.
    pub set: Buffers,
    /// New `TCP_WINDOW_CLAMP` (the largest window to advertise), if any change.
    pub clamp: Option<u64>,
    /// Tell the peer this buffer size over the control channel (the drsFTP message).
    pub announce: Option<u64>,
    /// Application read buffer the law needs (drs-grid reads a whole buffer at once).
    pub read_buffer: Option<u64>,
    /// A new pacing for the connection's sender (a pacing law's; buffer laws leave it).
    pub pace: Option<crate::pacing::Pace>,
    /// The law's bandwidth-delay-product estimate, bytes.
    pub bdp: Option<u64>,
    /// Why, in a few words, when something changes.
    pub note: Option<String>,
    /// When the law wants the next sample.
    pub next: Duration,
}

/// A buffer-sizing law for one end of a data connection.
pub trait Law: Send {
    /// Buffers to set before and just after the connection is made.
    fn setup(&self) -> Setup;
    /// Takes one sample and decides.
    fn on_sample(&mut self, s: &Sample) -> Decision;
    /// Starts from `bytes` (a `setsockopt` size) instead of growing from the kernel's: a new
    /// connection of a transfer whose other connections have already grown theirs.
    /// Returns whether the law took it (laws that size nothing ignore it).
    fn seed(&mut self, _bytes: u64) -> bool {
        false
    }
    /// The transfer now runs `streams` connections in all, this one among them: a law that
    /// sizes from the capacity of the whole path takes its share of it.
    fn set_streams(&mut self, _streams: u32) {}

    /// The peer that sends the data paces its connections (it said so on the control
    /// channel): its packets arrive at its pacing rate, not in trains at the bottleneck's.
    fn sender_paces(&mut self) {}
}

/// Rate in bytes/s of `bytes` over `dt`.
fn rate(bytes: u64, dt: Duration) -> f64 {
    bytes as f64 / dt.as_secs_f64().max(1e-6)
}
