//! How many streams a `-p auto` transfer opens at once when nothing is known of its path but
//! what login showed: the control connection's round trip and this host's buffer cap. One
//! stream carries at most its window per round trip; where that is well below the rate a long
//! fat path offers, starting with one costs a step later (the companions' slow start, seconds at
//! 200 ms). Where one stream can fill such a path, or the file ends within slow start, one it is.
//! On a short path (loopback, a LAN) no window holds a stream back: a core does, the sending
//! thread's, and a copy there lasts a fraction of a second, shorter than the stream policy's
//! first look: a large file starts with two, one a core at each end, and the policy takes it on.

use std::time::Duration;

/// The rate a cold start plans for, bit/s: a gigabit path, the common wide-area link of the
/// data sets this tool moves. Faster paths are found by the stream policy's doubling; on a
/// slower one the streams share what there is (each paced, so they do not flood it).
pub const PLANNED_RATE: f64 = 1e9;
/// Most streams a cold start opens (the stream policy's first step from one).
pub const MOST: u32 = 8;
/// The share of a socket's receive buffer (as the kernel accounts it, twice what was set)
/// that Linux advertises as window: the rest pays for the buffers' overhead.
const WINDOW_SHARE: f64 = 0.5;
/// Streams' worth of the planned BDP one stream fewer may leave uncovered.
const SLACK: f64 = 0.1;
/// A login round trip below this is a short path (loopback, a LAN) ...
const SHORT_PATH: Duration = Duration::from_millis(1);
/// ... where a file of this size or more starts with [`SHORT_PATH_STREAMS`] on a host of as
/// many cores (measured on 2 cores over loopback, 1 GiB: one stream 13 Gbit/s whole command,
/// its thread 93 % busy; two 30; `-p auto` from one 18, its first look 100 ms into a 0.4 s copy).
const SHORT_PATH_SIZE: u64 = 64 << 20;
const SHORT_PATH_STREAMS: u32 = 2;

/// A cold start's stream count and why.
#[derive(Debug, Clone, PartialEq)]
pub struct ColdStart {
    /// Streams to open at once.
    pub streams: u32,
    /// Completes "started with N streams, …".
    pub why: String,
}

/// The streams to start a file of `size` bytes with, at a round trip of `rtt`, when a socket's
/// buffer cannot pass `buffer_cap` bytes as the kernel accounts them (`None`: no cap this end
/// knows of), within `max`, on a host of `cores`; `None` when one stream is the start.
pub fn cold_start(
    rtt: Duration,
    buffer_cap: Option<u64>,
    size: u64,
    max: u32,
    cores: u32,
) -> Option<ColdStart> {
    if rtt < SHORT_PATH {
        let streams = SHORT_PATH_STREAMS.min(cores).min(max);
        return (size >= SHORT_PATH_SIZE && streams > 1).then(|| ColdStart {
            streams,
            why: format!(
                "as on a {} µs path a core, not a window, holds a stream (one a core at each end)",
                rtt.as_micros()
            ),
        });
    }
    let cap = buffer_cap.filter(|&c| c > 0)? as f64 * WINDOW_SHARE;
    let bdp = PLANNED_RATE / 8.0 * rtt.as_secs_f64();
    // A file within one planned BDP is moved in slow start whatever the count.
    if (size as f64) < bdp {
        return None;
    }
    // A login's round trip a little above the path's (a busy server) adds no stream.
    let streams = ((bdp / cap - SLACK).ceil() as u32).clamp(1, MOST.min(max.max(1)));
    (streams > 1).then(|| ColdStart {
        streams,
        why: format!(
            "as one stream's window stops at {:.1} MB (the buffer cap) and carries at most {:.0} \
             Mbit/s at the control connection's {} ms round trip",
            cap / 1e6,
            cap * 8.0 / rtt.as_secs_f64() / 1e6,
            rtt.as_millis()
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const CAP: Option<u64> = Some(8 << 20);
    const BIG: u64 = 2 << 30;

    fn count(rtt_ms: u64, cap: Option<u64>, size: u64) -> u32 {
        cold_start(Duration::from_millis(rtt_ms), cap, size, 64, 16).map_or(1, |c| c.streams)
    }

    #[test]
    fn the_longer_the_round_trip_the_more_streams_a_capped_host_starts_with() {
        assert_eq!(count(25, CAP, BIG), 1);
        assert_eq!(count(50, CAP, BIG), 2);
        assert_eq!(count(100, CAP, BIG), 3);
        assert_eq!(count(102, CAP, BIG), 3, "a login a little slow");
        assert_eq!(count(200, CAP, BIG), 6);
        assert_eq!(count(600, CAP, BIG), MOST);
    }

    #[test]
    fn no_cap_a_small_file_or_a_low_limit_start_with_fewer() {
        assert_eq!(count(200, None, BIG), 1, "a host that sets its own buffers");
        assert_eq!(count(200, Some(0), BIG), 1);
        assert_eq!(count(200, CAP, 4 << 20), 1, "a file done within slow start");
        let low = cold_start(Duration::from_millis(200), CAP, BIG, 4, 16).map(|c| c.streams);
        assert_eq!(low, Some(4));
    }

    #[test]
    fn on_a_short_path_a_large_file_starts_with_a_stream_a_core_at_each_end() {
        let short = |us: u64, cap, size, max, cores| {
            cold_start(Duration::from_micros(us), cap, size, max, cores).map_or(1, |c| c.streams)
        };
        assert_eq!(short(50, None, BIG, 64, 16), 2, "root: no cap");
        assert_eq!(short(900, CAP, BIG, 64, 2), 2);
        assert_eq!(short(50, None, 32 << 20, 64, 16), 1, "a file of a few ms");
        assert_eq!(short(50, None, BIG, 64, 1), 1, "one core");
        assert_eq!(short(50, None, BIG, 1, 16), 1, "-p auto limited to one");
        assert_eq!(
            short(1_000, CAP, BIG, 64, 16),
            1,
            "1 ms: a window's path again"
        );
        let why = cold_start(Duration::from_micros(50), None, BIG, 64, 2)
            .unwrap()
            .why;
        assert!(why.contains("50 µs path"), "{why}");
    }

    #[test]
    fn the_reason_names_the_cap_and_the_round_trip() {
        let c = cold_start(Duration::from_millis(100), CAP, BIG, 16, 16);
        let why = c.map(|c| c.why).unwrap_or_default();
        assert!(why.contains("4.2 MB"), "{why}");
        assert!(why.contains("100 ms"), "{why}");
        assert!(why.contains("336 Mbit/s"), "{why}");
    }
}
