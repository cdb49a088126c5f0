//! Rate control of the UDP data channel (FOBS, shared/seeds/fobs.txt): how fast the sender puts
//! packets on the path, decided from what the receiver reports. Three controllers behind one
//! trait, pure (feedback and time in, a rate out): the seed's two ([`history`], per chunk with
//! learned odds of an increase hurting; [`state`], Green/Yellow/Red per segment) and fatpipe's
//! own ([`steady`]), which tells random loss from congestion by the queueing delay.

pub mod history;
pub mod state;
pub mod steady;

use serde::{Deserialize, Serialize};
use std::fmt;
use std::time::Duration;

/// The queueing delay that means a queue is building: a tenth of the round trip, within
/// 4–25 ms (a path's own jitter stays below it). Below it, what the path loses is its own
/// (random) loss; above it, a queue may be overflowing.
pub fn queue_limit(rtt: Duration) -> Duration {
    (rtt / 10).clamp(Duration::from_millis(4), Duration::from_millis(25))
}

/// What the receiver's reports said over one interval, as the sender sums them up.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Feedback {
    /// Time since the transfer started.
    pub now: Duration,
    /// How long the interval was.
    pub interval: Duration,
    /// Packets the receiver got in the interval (resends and duplicates included).
    pub delivered: u64,
    /// Packets sent before the last one the receiver got that it did not get, in the interval.
    pub lost: u64,
    /// Queueing delay: the lowest one-way delay in the interval above the lowest of the transfer.
    pub queue: Duration,
    /// The path's round trip (the feedback connection's lowest RTT).
    pub rtt: Duration,
    /// Bytes per packet on the wire (UDP payload).
    pub packet: u32,
}

impl Feedback {
    /// The rate that reached the receiver, bits/s.
    pub fn delivered_rate(&self) -> f64 {
        let secs = self.interval.as_secs_f64();
        if secs <= 0.0 {
            return 0.0;
        }
        self.delivered as f64 * f64::from(self.packet) * 8.0 / secs
    }

    /// Lost packets over packets sent in the interval (0 when nothing was sent).
    pub fn loss(&self) -> f64 {
        let all = self.delivered + self.lost;
        if all == 0 {
            0.0
        } else {
            self.lost as f64 / all as f64
        }
    }

    /// Adds a later interval's feedback to this one.
    pub fn absorb(&mut self, later: &Feedback) {
        if self.interval.is_zero() && self.delivered == 0 && self.lost == 0 {
            *self = *later;
            return;
        }
        self.now = later.now;
        self.interval += later.interval;
        self.delivered += later.delivered;
        self.lost += later.lost;
        self.queue = self.queue.min(later.queue);
        self.rtt = later.rtt;
        self.packet = later.packet;
    }
}

/// One segment's first pass: how many of its packets were sent once, and how many of those
/// were lost (its packet-loss signature, counted).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SegmentLoss {
    /// The segment.
    pub segment: u64,
    /// Its packets.
    pub packets: u64,
    /// Packets lost on their first send.
    pub lost: u64,
}

impl SegmentLoss {
    /// The loss fraction of the segment's first pass.
    pub fn fraction(&self) -> f64 {
        if self.packets == 0 {
            0.0
        } else {
            self.lost as f64 / self.packets as f64
        }
    }
}

/// Bounds and starting point of a controller, bits/s.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RateLimits {
    /// The rate to start at (the seed's controllers: half of `max` when 0).
    pub start: f64,
    /// The line rate: the most the sender sends; the seed's controllers scale their steps by it.
    pub max: f64,
}

/// Lowest rate any controller sends at, bits/s.
pub const MIN_RATE: f64 = 1e6;

/// How often the UDP receiver reports: the feedback's cadence, and so the shortest span a
/// controller's decision can be seen over.
pub const REPORT_EVERY: std::time::Duration = std::time::Duration::from_millis(10);

/// What a path taught its UDP sender, kept for the next transfer over it (the seed's second kind
/// of history): the rate the last transfer ended at (the seed's "next optimal rate is often
/// close to the last one") and `history`'s odds.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RateMemory {
    /// The rate the last transfer ended at, bits/s.
    pub rate: Option<f64>,
    /// What increases from each rate led to.
    pub odds: history::Odds,
}

/// A rate controller: feedback in, the sending rate out.
pub trait RateControl: Send {
    /// Takes a report interval's feedback.
    fn on_feedback(&mut self, _fb: &Feedback) {}
    /// Takes a segment whose first pass is over.
    fn on_segment(&mut self, _now: Duration, _seg: &SegmentLoss) {}
    /// Takes the bottleneck's rate as the packet train at the start of the transfer showed it,
    /// bits/s (the path's capacity, not what others leave of it).
    fn on_capacity(&mut self, _bps: f64) {}
    /// Time passes, feedback or not (`now`: since the transfer began): a rate meant to hold
    /// for a span of the sender's own clock ends here.
    fn on_tick(&mut self, _now: Duration) {}
    /// The rate to send at now, bits/s.
    fn rate(&self) -> f64;
    /// The controller's state, for progress and telemetry.
    fn state(&self) -> &'static str;
    /// The most packets that may be out beyond the last one the receiver reported, if the
    /// controller bounds them (a report stalled on the feedback connection must not leave a
    /// rate that overshoots running on).
    fn in_flight(&self) -> Option<u64> {
        None
    }
    /// What the controller learned that outlives the transfer, beyond its rate.
    fn odds(&self) -> Option<&history::Odds> {
        None
    }
}

/// Which controller a UDP transfer runs (`--udp-rate-control`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RateControlKind {
    /// fatpipe's own ([`steady`]).
    #[default]
    Default,
    /// The seed's history-based controller ([`history`]).
    History,
    /// The seed's state-based controller ([`state`]).
    State,
}

impl RateControlKind {
    /// The most a sender of this kind sends when not told (bits/s): the default controller
    /// follows what the path delivers, so its ceiling only has to stay out of the way (10 Gbit/s
    /// held a loopback copy at 8 where 14 went through with the ceiling raised, docs/cpu-cost.md);
    /// the seed's controllers step by a twentieth of theirs, which must be near the path's rate.
    pub fn line(self) -> f64 {
        match self {
            RateControlKind::Default => 100e9,
            RateControlKind::History | RateControlKind::State => 1e9,
        }
    }

    /// Reads a name as the option takes it.
    pub fn parse(s: &str) -> Option<RateControlKind> {
        match s {
            "default" | "steady" => Some(RateControlKind::Default),
            "history" => Some(RateControlKind::History),
            "state" => Some(RateControlKind::State),
            _ => None,
        }
    }

    /// A controller of this kind, starting from what `memory` holds of the path; `seed`
    /// drives the history controller's coin. The seed's controllers start at the remembered
    /// rate; the default one at half of it (its start-up passes it within a round trip).
    pub fn build(self, limits: RateLimits, memory: &RateMemory, seed: u64) -> Box<dyn RateControl> {
        let steady = RateLimits {
            start: memory
                .rate
                .map_or(limits.start, |r| (r / 2.0).max(limits.start)),
            ..limits
        };
        // The seed's controllers have no start-up: half the line rate when nothing is known.
        let seeds = RateLimits {
            start: memory.rate.unwrap_or(0.0),
            ..limits
        };
        match self {
            RateControlKind::Default => Box::new(steady::Steady::new(steady)),
            RateControlKind::History => {
                Box::new(history::History::new(seeds, memory.odds.clone(), seed))
            }
            RateControlKind::State => Box::new(state::States::new(seeds)),
        }
    }
}

impl fmt::Display for RateControlKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            RateControlKind::Default => "default",
            RateControlKind::History => "history",
            RateControlKind::State => "state",
        })
    }
}

/// Where the seed's controllers start: `limits.start` (a remembered rate), or half the line rate
/// when none is given (the seed gives them no start-up).
fn seed_start(limits: &RateLimits) -> f64 {
    if limits.start > 0.0 {
        limits.start
    } else {
        limits.max / 2.0
    }
}

/// Keeps a rate within the limits and above [`MIN_RATE`].
fn bounded(rate: f64, limits: &RateLimits) -> f64 {
    rate.min(limits.max).max(MIN_RATE.min(limits.max))
}

#[cfg(test)]
pub(crate) mod testing;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn controllers_start_from_what_the_path_taught() {
        let limits = RateLimits {
            start: 10e6,
            max: 1e9,
        };
        let fresh = RateMemory::default();
        let known = RateMemory {
            rate: Some(800e6),
            ..RateMemory::default()
        };
        let start = |k: RateControlKind, m: &RateMemory| k.build(limits, m, 1).rate();
        assert_eq!(start(RateControlKind::Default, &fresh), 10e6);
        assert_eq!(start(RateControlKind::Default, &known), 400e6);
        assert_eq!(start(RateControlKind::History, &fresh), 500e6);
        assert_eq!(start(RateControlKind::History, &known), 800e6);
        assert_eq!(start(RateControlKind::State, &known), 800e6);
        assert!(RateControlKind::History
            .build(limits, &known, 1)
            .odds()
            .is_some());
        assert!(RateControlKind::Default
            .build(limits, &known, 1)
            .odds()
            .is_none());
    }
}
