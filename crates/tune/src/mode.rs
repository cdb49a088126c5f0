//! The tuning modes a user picks (`--tuning MODE`) and the laws they stand for.

use crate::law::{classic::Classic, drs::Drs, fixed::Fixed, follow::Follow, probe::Probe, Law};
use crate::sample::Role;
use crate::size::parse_size;
use std::fmt;
use std::time::Duration;

/// How the data channel's socket buffers are sized.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tuning {
    /// Fixed 64 KiB send and receive buffers at both ends (the seeds' stock FTP).
    Stock,
    /// Fixed buffers of the given size at both ends (manual tuning).
    Static(u64),
    /// Measure RTT and rate once at the start, then fix 2 × BDP (AutoNcFTP/Enable).
    Probe,
    /// Set nothing: the operating system's autotuning decides.
    Kernel,
    /// drsFTP as published: bytes per sampling interval × control-channel RTT, receive buffer
    /// raised to 2 × BDP whenever below it; the sender follows over the control channel.
    DrsClassic,
    /// The drs-grid-performance variant: ×4 whenever one read exceeds half the buffer.
    DrsGrid,
    /// DRS fed by `TCP_INFO` at RTT granularity at both ends, growing and shrinking.
    Drs,
}

/// Size of the stock buffers.
pub const STOCK_BUFFER: u64 = 64 << 10;

impl Tuning {
    /// Every mode name, for help texts.
    pub const NAMES: &'static str = "stock, static:SIZE, probe, kernel, drs-classic, drs-grid, drs";

    /// Parses a mode name as written on the command line or in `OPTS DRS`.
    pub fn parse(s: &str) -> Result<Tuning, String> {
        let t = s.trim().to_ascii_lowercase();
        Ok(match t.as_str() {
            "stock" => Tuning::Stock,
            "probe" => Tuning::Probe,
            "kernel" => Tuning::Kernel,
            "drs-classic" => Tuning::DrsClassic,
            "drs-grid" => Tuning::DrsGrid,
            "drs" => Tuning::Drs,
            _ => match t.strip_prefix("static:") {
                Some(size) => Tuning::Static(parse_size(size)?),
                None => return Err(format!("unknown tuning mode {s:?}; use {}", Self::NAMES)),
            },
        })
    }

    /// Whether the peer's announcements drive this end's send buffer (the seeds' sender).
    pub fn sender_follows_peer(self) -> bool {
        matches!(self, Tuning::DrsClassic | Tuning::DrsGrid | Tuning::Probe)
    }

    /// The law one end runs in this mode.
    pub fn law(self, role: Role, params: &Params) -> Box<dyn Law> {
        match (self, role) {
            (Tuning::Stock, _) => Box::new(Fixed::new(Some(STOCK_BUFFER))),
            (Tuning::Static(n), _) => Box::new(Fixed::new(Some(n))),
            (Tuning::Kernel, _) => Box::new(Fixed::new(None)),
            (Tuning::Drs, role) => Box::new(Drs::new(role, params)),
            (Tuning::DrsClassic | Tuning::DrsGrid, Role::Receiver) => {
                Box::new(Classic::new(params, self == Tuning::DrsGrid))
            }
            (Tuning::Probe, Role::Receiver) => Box::new(Probe::new(params)),
            (Tuning::Probe, Role::Sender) => Box::new(Follow::new(None)),
            (_, Role::Sender) => Box::new(Follow::new(Some(params.preconnect))),
        }
    }
}

impl fmt::Display for Tuning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Tuning::Stock => f.write_str("stock"),
            Tuning::Static(n) => write!(f, "static:{}", exact_size(*n)),
            Tuning::Probe => f.write_str("probe"),
            Tuning::Kernel => f.write_str("kernel"),
            Tuning::DrsClassic => f.write_str("drs-classic"),
            Tuning::DrsGrid => f.write_str("drs-grid"),
            Tuning::Drs => f.write_str("drs"),
        }
    }
}

/// A size in the largest binary unit that divides it exactly (`32M`, `1025K`, `1000`).
fn exact_size(n: u64) -> String {
    match n {
        n if n % (1 << 20) == 0 => format!("{}M", n >> 20),
        n if n % (1 << 10) == 0 => format!("{}K", n >> 10),
        n => n.to_string(),
    }
}

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

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn parses_every_mode() {
        for (s, t) in [
            ("stock", Tuning::Stock),
            ("STATIC:32M", Tuning::Static(32 << 20)),
            ("probe", Tuning::Probe),
            ("kernel", Tuning::Kernel),
            ("drs-classic", Tuning::DrsClassic),
            ("drs-grid", Tuning::DrsGrid),
            ("drs", Tuning::Drs),
        ] {
            assert_eq!(Tuning::parse(s), Ok(t));
        }
        assert!(Tuning::parse("static:").is_err());
        assert!(Tuning::parse("turbo").is_err());
    }

    proptest! {
        #[test]
        fn display_parses_back(k in 1u64..(1 << 30)) {
            for t in [Tuning::Stock, Tuning::Static(k), Tuning::Drs, Tuning::DrsGrid] {
                prop_assert_eq!(Tuning::parse(&t.to_string()), Ok(t));
            }
        }
    }
}
