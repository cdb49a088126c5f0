//! The path models the laws and policies are tested on (test builds only): one shared set of
//! traces, so that a new law is judged on the paths the existing ones were.

use crate::law::drs::rcvbuf_for;
use crate::law::Law;
use crate::sample::{Sample, TcpStats};
use crate::streams::{Observation, StreamLimits, StreamPolicy};
use std::time::Duration;

/// A model of one path: capacity `rate` bytes/s, base RTT `base`, a drop-tail queue of `queue`
/// bytes (one BDP of the first rate, kept when the rate changes, as a router's), and an unpaced sender in rounds of one RTT. Each round it sends what its congestion
/// window and the advertised window allow, back to back: the bottleneck spaces that train at
/// its rate, and what exceeds the BDP queues and stretches the RTT. The congestion window
/// doubles per round in slow start, grows by a segment later, and halves when a round
/// overflows the queue (counted in `losses`).
pub struct FluidPath {
    /// Capacity, bytes/s.
    pub rate: f64,
    /// Base RTT, s.
    pub base: f64,
    /// The advertised window, bytes.
    pub window: f64,
    /// Bytes delivered so far.
    pub bytes: f64,
    /// Time, s.
    pub t: f64,
    /// The rate trains arrive at, bytes/s, when this flow has only a share (`rate`) of a
    /// faster bottleneck beside others; `None`: `rate`.
    pub burst: Option<f64>,
    /// The bottleneck's queue, bytes.
    pub queue: f64,
    /// Rounds that overflowed the queue.
    pub losses: u32,
    /// The segment size the receiver's kernel sees (`rcv_mss`; 64 KiB on loopback).
    pub segment: u32,
    /// Random loss: every round leaves holes that hold the window's left edge back this many
    /// RTTs (the sender, model-based, keeps its rate through them); `None`: a clean path.
    pub holes: Option<f64>,
    /// Packets that arrived out of order so far (the receiver's `rcv_ooopack`).
    pub out_of_order: u32,
    /// With holes: the in-order count moves only every this many rounds, all at once, as a
    /// filled hole releases what waited behind it; `None`: smoothly.
    pub released_every: Option<u32>,
    /// Bytes the reader leaves unread (it comes late): the window the sender gets is that
    /// much smaller than the one the receiver offers.
    pub unread: f64,
    /// Bytes that arrived behind a hole, not yet in order.
    behind: f64,
    rounds: u32,
    cwnd: f64,
    ssthresh: f64,
    rtt: f64,
    /// The RTT of the handshake: a receiver's kernel keeps it as its minimum RTT.
    handshake: f64,
    round_end: f64,
    train_end: f64,
}

/// The sender's segment and first congestion window (ten segments), bytes.
const SEGMENT: f64 = 1448.0;

impl FluidPath {
    /// A path of `rate` bytes/s and `base` s RTT, the window at the kernel's first 64 KiB.
    pub fn new(rate: f64, base: f64) -> FluidPath {
        FluidPath {
            rate,
            base,
            window: 65536.0,
            bytes: 0.0,
            t: 0.0,
            burst: None,
            queue: rate * base,
            losses: 0,
            segment: SEGMENT as u32,
            holes: None,
            out_of_order: 0,
            released_every: None,
            unread: 0.0,
            behind: 0.0,
            rounds: 0,
            cwnd: 10.0 * SEGMENT,
            ssthresh: f64::INFINITY,
            rtt: base,
            handshake: base,
            round_end: 0.0,
            train_end: 0.0,
        }
    }

    /// Starts a round: the sender's flight leaves as one train.
    fn round(&mut self) {
        let bdp = self.rate * self.base;
        // Holes hold part of the window: what flies is the window over the RTTs it covers.
        let window = (self.window - self.unread).max(SEGMENT) / (1.0 + self.holes.unwrap_or(0.0));
        if self.holes.is_some() {
            self.out_of_order += 10;
        }
        self.rounds += 1;
        if self
            .released_every
            .is_some_and(|n| self.rounds.is_multiple_of(n.max(1)))
        {
            self.bytes += std::mem::take(&mut self.behind);
        }
        let flight = self.cwnd.min(window);
        if flight > bdp + self.queue {
            self.losses += 1;
            self.ssthresh = self.cwnd / 2.0;
            self.cwnd = self.ssthresh;
        }
        let flight = self.cwnd.min(window).min(bdp + self.queue);
        self.rtt = self.base + (flight - bdp).max(0.0) / self.rate;
        self.round_end = self.t + self.rtt;
        self.train_end = self.t + flight / self.burst.unwrap_or(self.rate);
        // A window that held the round back is not grown.
        if self.cwnd <= window {
            self.cwnd = if self.cwnd < self.ssthresh {
                2.0 * self.cwnd
            } else {
                self.cwnd + SEGMENT
            };
        }
    }

    /// Runs the receiver law until `until` seconds; returns the windows it chose, with times.
    pub fn run(&mut self, law: &mut dyn Law, until: f64) -> Vec<(f64, f64)> {
        let mut chosen = Vec::new();
        let mut next = 0.0;
        let dt = 0.0005;
        while self.t < until {
            if self.t >= self.round_end {
                self.round();
            }
            if self.t < self.train_end {
                let arrived = self.burst.unwrap_or(self.rate) * dt;
                match self.released_every {
                    Some(_) => self.behind += arrived,
                    None => self.bytes += arrived,
                }
            }
            self.t += dt;
            if self.t < next {
                continue;
            }
            let tcp = TcpStats {
                min_rtt_us: (self.handshake * 1e6) as u32,
                rcv_rtt_us: (self.rtt * 1e6) as u32,
                rcv_ssthresh: self.window as u32,
                rcv_wnd: (self.window - self.unread).max(SEGMENT) as u32,
                bytes_received: self.bytes as u64,
                rcv_mss: self.segment,
                rcv_ooopack: self.out_of_order,
                ..TcpStats::default()
            };
            let s = Sample {
                now: Duration::from_secs_f64(self.t),
                bytes: self.bytes as u64,
                tcp: Some(tcp),
                ..Sample::default()
            };
            let d = law.on_sample(&s);
            if let Some(w) = d.clamp {
                // The buffer always holds the window already advertised.
                assert!(d.set.rcvbuf >= Some(rcvbuf_for(tcp.rcv_wnd.into())));
                self.window = w as f64;
                chosen.push((self.t, self.window));
            }
            next = self.t + d.next.as_secs_f64();
        }
        chosen
    }
}

/// A toy path: each stream moves at most `window / rtt` once out of slow start (which
/// takes 5 RTTs, at half that rate), all together at most `path`, shared equally.
/// Returns the stream count and the policy after `secs` seconds sampled every 100 ms.
pub fn run_streams(
    path_mbit: f64,
    window: f64,
    rtt_ms: u32,
    limits: StreamLimits,
    secs: u32,
) -> (u32, StreamPolicy) {
    let mut p = StreamPolicy::new(limits);
    let mut streams: Vec<(TcpStats, f64)> = vec![(TcpStats::default(), 0.0)];
    let cap = window * 8.0 / (f64::from(rtt_ms) / 1000.0) / 1e6;
    let ramp = f64::from(rtt_ms) * 5.0 / 1000.0;
    for tick in 1..=secs * 10 {
        let now = f64::from(tick) / 10.0;
        let wants: Vec<f64> = streams
            .iter()
            .map(|(_, born)| if now - born < ramp { cap / 2.0 } else { cap })
            .collect();
        let total: f64 = wants.iter().sum();
        let share = (path_mbit / total).min(1.0);
        for ((s, _), want) in streams.iter_mut().zip(&wants) {
            s.min_rtt_us = rtt_ms * 1000;
            // A full path queues: the RTT grows by half.
            s.rtt_us = if share < 1.0 {
                rtt_ms * 1500
            } else {
                rtt_ms * 1000
            };
            s.busy_us += 100_000;
            // A receiver sized just above its stream's rate keeps it window-limited.
            s.rwnd_limited_us += 90_000;
            s.bytes_acked += (want * share * 1e6 / 8.0 * 0.1) as u64;
            s.delivery_rate = (want * share * 1e6 / 8.0) as u64;
        }
        let obs: Vec<TcpStats> = streams.iter().map(|(s, _)| *s).collect();
        let o = Observation {
            now: Duration::from_millis(u64::from(tick) * 100),
            streams: &obs,
            memory: (window as u64) * 2 * streams.len() as u64,
            ..Observation::default()
        };
        if let Some(c) = p.observe(&o) {
            streams.extend((0..c.add).map(|_| (TcpStats::default(), now)));
        }
    }
    (streams.len() as u32, p)
}
