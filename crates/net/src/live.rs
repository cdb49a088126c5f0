//! What the data connections of a running transfer are doing, for the progress line: each
//! tuner leaves its connection's latest sample here, the progress thread reads one summary
//! (how many streams, their buffers, the RTT, retransmissions, pacing).

use fatpipe_tune::size::format_size;
use fatpipe_tune::TcpStats;
use std::collections::BTreeMap;
use std::fmt;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// A connection not heard from for this long has ended (or idles between files).
const STALE: Duration = Duration::from_secs(2);

/// The latest sample of every data connection of this end, shared by its tuners.
#[derive(Debug, Default)]
pub struct Live {
    conns: Mutex<BTreeMap<(u16, u16), Conn>>,
}

/// One connection's latest sample.
#[derive(Debug, Clone, Copy)]
struct Conn {
    at: Instant,
    buffer: u64,
    rtt_us: u32,
    retrans: u32,
    paced: bool,
}

/// The data connections at one moment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LiveSummary {
    /// Connections heard from lately.
    pub streams: usize,
    /// Their buffers in this end's role, summed, as the kernel accounts them.
    pub buffer: u64,
    /// The largest smoothed RTT among them, µs (0 when no sender side measured one).
    pub rtt_us: u32,
    /// Segments they retransmitted.
    pub retrans: u64,
    /// Whether any of them is paced.
    pub paced: bool,
}

impl Live {
    /// The connection between `ports` (this end's, the peer's) was sampled at `now`.
    pub fn record(&self, ports: (u16, u16), buffer: u64, tcp: Option<&TcpStats>, now: Instant) {
        let Ok(mut conns) = self.conns.lock() else {
            return;
        };
        conns.retain(|_, c| now.saturating_duration_since(c.at) < STALE);
        let tcp = tcp.cloned().unwrap_or_default();
        conns.insert(
            ports,
            Conn {
                at: now,
                buffer,
                rtt_us: tcp.rtt_us,
                retrans: tcp.total_retrans,
                paced: tcp.max_pacing_rate != 0 && tcp.max_pacing_rate != u64::MAX,
            },
        );
    }

    /// The connections sampled within the last two seconds before `now`; `None` if none was.
    pub fn summary(&self, now: Instant) -> Option<LiveSummary> {
        let conns = self.conns.lock().ok()?;
        let fresh: Vec<&Conn> = conns
            .values()
            .filter(|c| now.saturating_duration_since(c.at) < STALE)
            .collect();
        (!fresh.is_empty()).then(|| LiveSummary {
            streams: fresh.len(),
            buffer: fresh.iter().map(|c| c.buffer).sum(),
            rtt_us: fresh.iter().map(|c| c.rtt_us).max().unwrap_or(0),
            retrans: fresh.iter().map(|c| u64::from(c.retrans)).sum(),
            paced: fresh.iter().any(|c| c.paced),
        })
    }
}

impl fmt::Display for LiveSummary {
    /// `8 streams, buffers 34.5 MiB, RTT 101 ms, 12 retransmits, paced`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = if self.streams == 1 { "" } else { "s" };
        write!(
            f,
            "{} stream{s}, buffers {}",
            self.streams,
            format_size(self.buffer)
        )?;
        if self.rtt_us > 0 {
            write!(f, ", RTT {:.0} ms", f64::from(self.rtt_us) / 1e3)?;
        }
        if self.retrans > 0 {
            write!(f, ", {} retransmits", self.retrans)?;
        }
        if self.paced {
            write!(f, ", paced")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sums_fresh_connections_and_forgets_stale_ones() {
        let live = Live::default();
        let t0 = Instant::now();
        let tcp = |rtt_us, total_retrans, max_pacing_rate| TcpStats {
            rtt_us,
            total_retrans,
            max_pacing_rate,
            ..TcpStats::default()
        };
        assert_eq!(live.summary(t0), None);
        live.record((1, 9), 1 << 20, Some(&tcp(100_000, 2, u64::MAX)), t0);
        live.record((2, 9), 3 << 20, Some(&tcp(120_000, 1, 1 << 27)), t0);
        let s = live.summary(t0 + Duration::from_secs(1)).unwrap();
        assert_eq!(
            s,
            LiveSummary {
                streams: 2,
                buffer: 4 << 20,
                rtt_us: 120_000,
                retrans: 3,
                paced: true
            }
        );
        assert_eq!(
            s.to_string(),
            "2 streams, buffers 4 MiB, RTT 120 ms, 3 retransmits, paced"
        );
        // One goes quiet: only the other counts.
        live.record((1, 9), 1 << 20, None, t0 + Duration::from_secs(3));
        let s = live.summary(t0 + Duration::from_secs(3)).unwrap();
        assert_eq!((s.streams, s.buffer, s.paced), (1, 1 << 20, false));
        assert_eq!(s.to_string(), "1 stream, buffers 1 MiB");
        assert_eq!(live.summary(t0 + Duration::from_secs(9)), None);
    }
}
