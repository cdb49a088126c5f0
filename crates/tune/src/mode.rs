//! The tuning modes a user picks (`--tuning MODE`) and the laws they stand for.

use crate::law::{classic::Classic, drs::Drs, fixed::Fixed, follow::Follow, probe::Probe};
use crate::law::{Law, Params, STOCK_BUFFER};
use crate::sample::Role;
use crate::size::parse_size;
use std::fmt;

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
