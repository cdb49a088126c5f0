//! How many parallel streams a transfer needs (`-p auto`), decided by the sending end from
//! what its sockets report: while the streams spend most of their busy time held by buffers
//! (the peer's receive window or the send buffer, both capped by the system) and each step
//! paid, open more; once a step stops paying, the path is the limit and the count stays.

use crate::sample::TcpStats;
use std::time::Duration;

/// The knobs of the policy.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StreamLimits {
    /// Most streams to open.
    pub max: u32,
    /// Bound on this end's buffer memory, bytes (`--max-memory`); `None` for no bound.
    pub max_memory: Option<u64>,
}

/// What the sender sees at one instant.
#[derive(Debug, Clone, Copy)]
pub struct Observation<'a> {
    /// Time since the transfer began.
    pub now: Duration,
    /// Payload bytes sent so far over all streams.
    pub bytes: u64,
    /// `TCP_INFO` of every open stream.
    pub streams: &'a [TcpStats],
    /// This end's buffer memory over all streams, bytes as the kernel accounts them.
    pub memory: u64,
}

/// A change the policy asks for.
#[derive(Debug, Clone, PartialEq)]
pub struct StreamChange {
    /// Streams to open now.
    pub add: u32,
    /// Why (for telemetry and the summary).
    pub reason: String,
}

/// Share of busy time held by buffers above which a stream counts as buffer-limited.
const LIMITED: f64 = 0.5;
/// Rate gain a step must bring to go on growing.
const PAYS: f64 = 1.10;
/// Shortest evaluation period, and RTTs per period (a new stream needs its slow start).
const MIN_PERIOD: Duration = Duration::from_millis(500);
const RTTS_PER_PERIOD: u32 = 10;

#[derive(Debug, Clone)]
struct Mark {
    at: Duration,
    bytes: u64,
    limited_us: u64,
    rwnd_us: u64,
    busy_us: u64,
}

/// The stream-count policy of one transfer.
#[derive(Debug, Clone)]
pub struct StreamPolicy {
    limits: StreamLimits,
    mark: Option<Mark>,
    /// Rate before the latest step and the stream count it started from.
    step: Option<(f64, u32)>,
    settled: bool,
    /// Every decision so far, for the summary.
    pub log: Vec<String>,
}

impl StreamPolicy {
    /// A policy that grows up to `limits`.
    pub fn new(limits: StreamLimits) -> StreamPolicy {
        StreamPolicy {
            limits,
            mark: None,
            step: None,
            settled: false,
            log: Vec::new(),
        }
    }

    /// Whether the policy has stopped growing.
    pub fn is_settled(&self) -> bool {
        self.settled
    }

    /// Takes an observation; answers how many streams to open, if any.
    pub fn observe(&mut self, o: &Observation<'_>) -> Option<StreamChange> {
        if self.settled || o.streams.is_empty() {
            return None;
        }
        let sum = |f: fn(&TcpStats) -> u64| o.streams.iter().map(f).sum::<u64>();
        let now = Mark {
            at: o.now,
            bytes: o.bytes,
            limited_us: sum(|s| s.rwnd_limited_us + s.sndbuf_limited_us),
            rwnd_us: sum(|s| s.rwnd_limited_us),
            busy_us: sum(|s| s.busy_us),
        };
        let Some(prev) = self.mark.clone() else {
            self.mark = Some(now);
            return None;
        };
        let rtt = o.streams.iter().map(|s| s.rtt_us).max().unwrap_or(0);
        let period = (Duration::from_micros(rtt.into()) * RTTS_PER_PERIOD).max(MIN_PERIOD);
        if o.now < prev.at + period {
            return None;
        }
        self.mark = Some(now.clone());
        let secs = (now.at - prev.at).as_secs_f64();
        let rate = now.bytes.saturating_sub(prev.bytes) as f64 * 8.0 / secs / 1e6;
        let busy = now.busy_us.saturating_sub(prev.busy_us).max(1) as f64;
        let limited = (now.limited_us.saturating_sub(prev.limited_us) as f64 / busy).min(1.0);
        let rwnd = (now.rwnd_us.saturating_sub(prev.rwnd_us) as f64 / busy).min(1.0);
        let n = o.streams.len() as u32;
        let stepped = self.step.take();
        if let Some((before, from)) = stepped {
            if rate < before * PAYS {
                return self.settle(format!(
                    "{from}->{n} streams raised the rate from {before:.0} to {rate:.0} Mbit/s \
                     (< {:.0} %): the path is the limit, staying at {n}",
                    (PAYS - 1.0) * 100.0
                ));
            }
        }
        if limited < LIMITED {
            // After a step, streams no longer held by buffers mean the path holds them now.
            return match stepped {
                Some(_) => self.settle(format!(
                    "with {n} streams buffers hold them only {:.0} % of busy time at {rate:.0} \
                     Mbit/s: the path is the limit",
                    limited * 100.0
                )),
                None => None,
            };
        }
        let per_stream = o.memory / u64::from(n).max(1);
        let by_memory = match self.limits.max_memory {
            Some(m) if per_stream > 0 => (m.saturating_sub(o.memory) / per_stream) as u32,
            _ => u32::MAX,
        };
        let add = n.min(self.limits.max.saturating_sub(n)).min(by_memory);
        let held = format!(
            "buffer-limited {:.0} % of busy time (peer's window {:.0} %, send buffer {:.0} %) \
             at {rate:.0} Mbit/s with {n}",
            limited * 100.0,
            rwnd * 100.0,
            (limited - rwnd).max(0.0) * 100.0
        );
        if add == 0 {
            let why = if by_memory == 0 {
                "--max-memory"
            } else {
                "the stream limit"
            };
            return self.settle(format!("{held}, but {why} allows no more streams"));
        }
        self.step = Some((rate, n));
        let reason = format!("{held}: opening {add} more");
        self.log.push(reason.clone());
        Some(StreamChange { add, reason })
    }

    fn settle(&mut self, reason: String) -> Option<StreamChange> {
        self.settled = true;
        self.log.push(reason);
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A toy path: each stream moves at most `window / rtt`, all together at most `path`.
    /// Returns the policy's decisions over `secs` seconds, sampled every 100 ms.
    fn run(
        path_mbit: f64,
        window: f64,
        rtt_ms: u32,
        limits: StreamLimits,
        secs: u32,
    ) -> (u32, StreamPolicy) {
        let mut p = StreamPolicy::new(limits);
        let mut streams: Vec<TcpStats> = vec![TcpStats::default()];
        let mut bytes = 0.0;
        let per_stream_cap = window * 8.0 / (f64::from(rtt_ms) / 1000.0) / 1e6;
        for tick in 1..=secs * 10 {
            let n = streams.len() as f64;
            let each = per_stream_cap.min(path_mbit / n);
            let held_by_buffer = per_stream_cap <= path_mbit / n;
            for s in &mut streams {
                s.rtt_us = rtt_ms * 1000;
                s.busy_us += 100_000;
                if held_by_buffer {
                    s.rwnd_limited_us += 90_000;
                }
            }
            bytes += each * n * 1e6 / 8.0 * 0.1;
            let obs = Observation {
                now: Duration::from_millis(u64::from(tick) * 100),
                bytes: bytes as u64,
                streams: &streams,
                memory: (window as u64) * 2 * streams.len() as u64,
            };
            if let Some(c) = p.observe(&obs) {
                streams.extend((0..c.add).map(|_| TcpStats::default()));
            }
        }
        (streams.len() as u32, p)
    }

    const WIDE: StreamLimits = StreamLimits {
        max: 16,
        max_memory: None,
    };

    #[test]
    fn opens_streams_until_the_path_is_the_limit() {
        // 4.4 MB window at 100 ms = 352 Mbit/s a stream; 1 Gbit/s needs 3.
        let (n, p) = run(950.0, 4.4e6, 100, WIDE, 20);
        assert_eq!(n, 4, "{:?}", p.log);
        assert!(p.is_settled());
        assert!(p
            .log
            .last()
            .is_some_and(|l| l.contains("the path is the limit")));
        // 200 ms: 176 Mbit/s a stream, needs 6: grows to 8, then stops.
        let (n, p) = run(950.0, 4.4e6, 200, WIDE, 30);
        assert_eq!(n, 8, "{:?}", p.log);
    }

    #[test]
    fn a_stream_that_fills_the_path_stays_alone() {
        let (n, p) = run(950.0, 50e6, 50, WIDE, 10);
        assert_eq!(n, 1, "{:?}", p.log);
    }

    #[test]
    fn memory_and_count_limits_hold() {
        let (n, p) = run(
            950.0,
            4.4e6,
            200,
            StreamLimits {
                max: 3,
                max_memory: None,
            },
            30,
        );
        assert_eq!(n, 3, "{:?}", p.log);
        assert!(p.is_settled());
        // 8.8 MB of buffers a stream, 20 MB allowed: two streams.
        let (n, p) = run(
            950.0,
            4.4e6,
            200,
            StreamLimits {
                max: 16,
                max_memory: Some(20_000_000),
            },
            30,
        );
        assert_eq!(n, 2, "{:?}", p.log);
        assert!(p.log.last().is_some_and(|l| l.contains("--max-memory")));
    }
}
