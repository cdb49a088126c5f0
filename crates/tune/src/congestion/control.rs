//! Congestion controls as a type: the only place their names are written. The kernel knows a
//! control by a name (`TCP_CONGESTION`); the command line, `OPTS DRS CC=`, the path memory and
//! the telemetry carry the same names; everything between holds a [`CongestionControl`].

use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// A TCP congestion control, as fatpipe reasons about it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(into = "String", from = "String")]
pub enum CongestionControl {
    /// Reno: loss-based, the control every unprivileged socket may pick.
    Reno,
    /// CUBIC: loss-based, Linux's usual default.
    Cubic,
    /// BBR: model-based, holds the path's rate through random loss and paces itself.
    Bbr,
    /// fatpipe's BIC, a BPF program (`crates/bpf`): with adaptive pacing in the kernel
    /// (`fatpipe_bic`) or alone under a user-space pacing law (`fatpipe_bicx`).
    Bic {
        /// Whether the program paces its connection itself.
        paced: bool,
    },
    /// Any other control the kernel offers, by its name.
    Other(String),
}

/// What the command line calls fatpipe's BIC (its pacing chosen by `--pacing`).
const BIC: &str = "bic";
const BIC_PACED: &str = "fatpipe_bic";
const BIC_PLAIN: &str = "fatpipe_bicx";

impl CongestionControl {
    /// The control taken on random loss.
    pub const FOR_RANDOM_LOSS: CongestionControl = CongestionControl::Bbr;

    /// The kernel's name (`TCP_CONGESTION`, `tcp_allowed_congestion_control`).
    pub fn kernel_name(&self) -> &str {
        match self {
            CongestionControl::Reno => "reno",
            CongestionControl::Cubic => "cubic",
            CongestionControl::Bbr => "bbr",
            CongestionControl::Bic { paced: true } => BIC_PACED,
            CongestionControl::Bic { paced: false } => BIC_PLAIN,
            CongestionControl::Other(name) => name,
        }
    }

    /// The name a user gives for it (`--cc`, `OPTS DRS CC=`): fatpipe's BIC is `bic`, its
    /// pacing being `--pacing`'s business.
    pub fn user_name(&self) -> &str {
        match self {
            CongestionControl::Bic { .. } => BIC,
            cc => cc.kernel_name(),
        }
    }

    /// Whether the control is fatpipe's own BIC (a program to register before use).
    pub fn is_fatpipe_bic(&self) -> bool {
        matches!(self, CongestionControl::Bic { .. })
    }

    /// Whether a sender that runs it paces its packets by itself (bbr, and fatpipe's BIC as a
    /// user names it: the receiving laws then read packet spacing as the pacing rate).
    pub fn paces_itself(&self) -> bool {
        matches!(self, CongestionControl::Bbr | CongestionControl::Bic { .. })
    }

    /// fatpipe's BIC under the user's pacing law `adaptive` (the program's own) or another;
    /// any other control as it is.
    pub fn paced_in_kernel(self, adaptive: bool) -> CongestionControl {
        match self {
            CongestionControl::Bic { .. } => CongestionControl::Bic { paced: adaptive },
            cc => cc,
        }
    }
}

impl From<&str> for CongestionControl {
    /// A user's or the kernel's name; `bic` is fatpipe's BIC with adaptive pacing.
    fn from(name: &str) -> Self {
        match name.trim() {
            "reno" => CongestionControl::Reno,
            "cubic" => CongestionControl::Cubic,
            "bbr" => CongestionControl::Bbr,
            BIC | BIC_PACED => CongestionControl::Bic { paced: true },
            BIC_PLAIN => CongestionControl::Bic { paced: false },
            other => CongestionControl::Other(other.to_string()),
        }
    }
}

impl From<String> for CongestionControl {
    fn from(name: String) -> Self {
        CongestionControl::from(name.as_str())
    }
}

impl From<CongestionControl> for String {
    fn from(cc: CongestionControl) -> Self {
        cc.kernel_name().to_string()
    }
}

impl FromStr for CongestionControl {
    type Err = String;

    /// A name from the command line: any the kernel might know (not checked here), not empty
    /// and without spaces or control characters.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let s = s.trim();
        if s.is_empty() || s.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(format!("{s:?} is not a congestion control's name"));
        }
        Ok(CongestionControl::from(s))
    }
}

impl fmt::Display for CongestionControl {
    /// The kernel's name: what a connection really runs.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.kernel_name())
    }
}

/// What paces a sending end's connections, as it tells its receiver (`OPTS DRS Paced=`,
/// `126 PACED`): the receiving laws then read packet spacing as the sender's pacing rate, not
/// as a train of the bottleneck's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PacedBy {
    /// TCP's own pacing of streams started together (`tcp`).
    Tcp,
    /// A congestion control that paces itself (its user name: `bbr`, `bic`).
    Control(CongestionControl),
}

/// The wire's word for TCP's pacing.
const PACED_BY_TCP: &str = "tcp";

impl PacedBy {
    /// Whether the sender runs `cc`.
    pub fn runs(&self, cc: &CongestionControl) -> bool {
        matches!(self, PacedBy::Control(c) if c == cc)
    }
}

impl From<&str> for PacedBy {
    /// The word a peer sent.
    fn from(word: &str) -> Self {
        match word.trim() {
            PACED_BY_TCP => PacedBy::Tcp,
            cc => PacedBy::Control(CongestionControl::from(cc)),
        }
    }
}

impl fmt::Display for PacedBy {
    /// The word on the wire.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PacedBy::Tcp => f.write_str(PACED_BY_TCP),
            PacedBy::Control(cc) => f.write_str(cc.user_name()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_paces_a_sender_round_trips_through_its_wire_word() {
        for by in [
            PacedBy::Tcp,
            PacedBy::Control(CongestionControl::Bbr),
            PacedBy::Control(CongestionControl::Bic { paced: true }),
        ] {
            assert_eq!(PacedBy::from(by.to_string().as_str()), by);
        }
        assert_eq!(PacedBy::Control(CongestionControl::Bbr).to_string(), "bbr");
        assert!(PacedBy::from("bbr").runs(&CongestionControl::FOR_RANDOM_LOSS));
        assert!(!PacedBy::Tcp.runs(&CongestionControl::Bbr));
    }

    #[test]
    fn names_round_trip_through_the_kernels_and_the_users() {
        for cc in [
            CongestionControl::Reno,
            CongestionControl::Cubic,
            CongestionControl::Bbr,
            CongestionControl::Bic { paced: true },
            CongestionControl::Bic { paced: false },
            CongestionControl::Other("vegas".into()),
        ] {
            assert_eq!(CongestionControl::from(cc.kernel_name()), cc);
            let json = serde_json::to_string(&cc).unwrap();
            assert_eq!(
                serde_json::from_str::<CongestionControl>(&json).unwrap(),
                cc
            );
        }
        assert_eq!(
            "bic".parse::<CongestionControl>(),
            Ok(CongestionControl::Bic { paced: true })
        );
        assert_eq!(CongestionControl::Bic { paced: false }.user_name(), "bic");
        assert_eq!(
            CongestionControl::Bic { paced: false }.to_string(),
            "fatpipe_bicx"
        );
    }

    #[test]
    fn a_name_with_spaces_or_nothing_is_refused() {
        assert!("".parse::<CongestionControl>().is_err());
        assert!("bb r".parse::<CongestionControl>().is_err());
        assert!("x\u{1}".parse::<CongestionControl>().is_err());
    }

    #[test]
    fn bic_follows_the_users_pacing() {
        let bic = CongestionControl::Bic { paced: true };
        assert_eq!(
            bic.clone().paced_in_kernel(false),
            CongestionControl::Bic { paced: false }
        );
        assert_eq!(
            bic.paced_in_kernel(true),
            CongestionControl::Bic { paced: true }
        );
        assert_eq!(
            CongestionControl::Bbr.paced_in_kernel(false),
            CongestionControl::Bbr
        );
        assert!(CongestionControl::Bbr.paces_itself());
        assert!(!CongestionControl::Cubic.paces_itself());
    }
}
