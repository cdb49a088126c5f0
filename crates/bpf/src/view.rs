//! What `fatpipe_bic` shows user space of a connection's pacing law: its state, `eab` and
//! pacing ceiling, kept by the program in the socket's storage (the `pace_views` map) whenever
//! they change, and read here by the socket's descriptor. The telemetry records them, so that
//! `fatpipe plot` can draw the kernel's law as it draws the user-space one.

use libbpf_rs::{MapCore, MapFlags, MapHandle, MapType};
use std::os::fd::{AsRawFd, BorrowedFd};
use std::sync::OnceLock;

/// The map's name in the program (`bic.bpf.c`).
const MAP: &str = "pace_views";

/// The pacing law's states (the seed's CWP_A, CWP_B and EABP).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PaceState {
    /// Paced at cwnd/RTT; EABP may start.
    CwpA,
    /// Paced at cwnd/RTT after an EABP period ran out, until the next loss.
    CwpB,
    /// Paced at `eab`, the window held.
    Eabp,
}

impl PaceState {
    /// The seed's name of the state.
    pub fn name(self) -> &'static str {
        match self {
            PaceState::CwpA => "CWP_A",
            PaceState::CwpB => "CWP_B",
            PaceState::Eabp => "EABP",
        }
    }
}

/// One connection's pacing law as the program last showed it (`struct pace_view`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PaceView {
    /// The rate at the last loss, bytes per second (0: no loss yet).
    pub eab: u64,
    /// The pacing ceiling the program set, bytes per second.
    pub ceiling: u32,
    /// The law's state.
    pub state: PaceState,
    /// The length of the next EABP period, ms.
    pub time_eabp_ms: u32,
}

impl PaceView {
    /// The view from the map's value bytes (`u64 eab; u32 ceiling, state, time_eabp_ms`, in the
    /// host's byte order); `None` for bytes of another shape.
    pub fn from_bytes(b: &[u8]) -> Option<PaceView> {
        let u32_at = |i: usize| Some(u32::from_ne_bytes(b.get(i..i + 4)?.try_into().ok()?));
        let state = match u32_at(12)? {
            0 => PaceState::CwpA,
            1 => PaceState::CwpB,
            2 => PaceState::Eabp,
            _ => return None,
        };
        Some(PaceView {
            eab: u64::from_ne_bytes(b.get(0..8)?.try_into().ok()?),
            ceiling: u32_at(8)?,
            state,
            time_eabp_ms: u32_at(16)?,
        })
    }
}

/// The view of the connection on `sock`, if it runs `fatpipe_bic` and the program has shown
/// one yet.
pub fn pace_view(sock: BorrowedFd<'_>) -> Option<PaceView> {
    let key = sock.as_raw_fd().to_ne_bytes();
    let bytes = views()?.lookup(&key, MapFlags::ANY).ok()??;
    PaceView::from_bytes(&bytes)
}

/// The program's map, found among the kernel's once it is there (the program may have been
/// registered by another fatpipe process).
fn views() -> Option<&'static MapHandle> {
    static VIEWS: OnceLock<MapHandle> = OnceLock::new();
    if let Some(m) = VIEWS.get() {
        return Some(m);
    }
    let info = libbpf_rs::query::MapInfoIter::default()
        .find(|m| m.ty == MapType::SkStorage && m.name.to_str() == Some(MAP))?;
    let handle = MapHandle::from_map_id(info.id).ok()?;
    Some(VIEWS.get_or_init(|| handle))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_view_reads_from_the_programs_bytes() {
        let mut b = Vec::new();
        b.extend(125_000_000u64.to_ne_bytes());
        b.extend(110_000_000u32.to_ne_bytes());
        b.extend(2u32.to_ne_bytes());
        b.extend(2000u32.to_ne_bytes());
        b.extend([0u8; 4]);
        let v = PaceView::from_bytes(&b).unwrap();
        assert_eq!(v.eab, 125_000_000);
        assert_eq!(v.ceiling, 110_000_000);
        assert_eq!(v.state, PaceState::Eabp);
        assert_eq!(v.time_eabp_ms, 2000);
        b[12] = 7;
        assert_eq!(PaceView::from_bytes(&b), None, "no such state");
        assert_eq!(PaceView::from_bytes(&b[..10]), None, "too short");
    }
}
