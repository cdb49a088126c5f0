//! fatpipe's own rate controller for the UDP channel. Random loss is not a signal here: a
//! lossy path drops packets at the same share whatever the rate, and slowing down would only
//! lose the transfer time. Congestion shows otherwise: the one-way delay rises as a queue
//! builds, or (a policer, no queue) the loss grows well past the share seen at lower rates.
//!
//! Start-up begins at the bottleneck's rate as the packet train that opens the transfer showed
//! it (the first report carries it), and sends at 2.89 times what reached the receiver (BBR's
//! start-up gain), taken every few reports, so the rate grows about that much per round trip,
//! smoothly, no further than a little over the train's rate (raised by half each round trip
//! whose rate crossed whole with no queue: the train read the path low), until the delivered
//! rate stops growing by a quarter per round trip (three in a row) or a queue shows; a queue
//! start-up built drains within about a round trip, at half the rate at least. Once per
//! round trip it looks at what the receiver got; after start-up it sends at the bottleneck
//! estimate (the highest delivered rate of the last ten round trips, the random
//! loss share added back), probing 25 % above it one round trip in four and draining below it
//! the next, each for a round trip of its own clock (reports held up on the feedback
//! connection neither stretch a probe nor cut it short). Where the round trip is shorter than
//! the receiver's report interval (10 ms: loopback, a LAN), a round is that interval, and a
//! probe's gain is cut to leave the path about a round trip's worth of bytes (a fifth at
//! least). At a sign of congestion it falls to 90 % of what the receiver got (of the estimate,
//! not of a drain round's rate), and the estimate and its trend start again from there; signs
//! that arrive before the back-off could show (a round trip and the queue) are the same
//! congestion. A delivered rate measured over less than half a round trip never becomes the
//! estimate (a receiver that ran late counts a burst into a few milliseconds).

use super::{bounded, queue_limit, Feedback, RateControl, RateLimits};
use std::collections::VecDeque;
use std::time::Duration;

/// Loss over the lowest of the recent intervals that marks congestion without delay.
const LOSS_JUMP: f64 = 0.05;
/// Below this loss an interval is never congested by loss alone.
const LOSS_MIN: f64 = 0.10;
/// Round trips the lowest recent loss and the highest delivered rate are taken over.
const WINDOW: usize = 10;
/// Start-up goes on while the delivered rate grows by this much per round trip.
const STARTUP_GROWTH: f64 = 1.25;
/// Start-up sends at this multiple of the delivered rate (BBR's 2/ln 2: the rate grows by about
/// this much per round trip).
const STARTUP_GAIN: f64 = 2.89;
/// Start-up takes the delivered rate over at least this much of the receiver's time (a few
/// reports: one alone holds too few packets at the first rates).
const STARTUP_SPAN: Duration = Duration::from_millis(20);
/// The probing cycle: rate over the bottleneck estimate, one entry per round trip.
const CYCLE: [f64; 4] = [1.25, 0.75, 1.0, 1.0];
/// Round trips without growth that end start-up (the delivered rate lags the sent one by one).
const PLATEAU: u32 = 3;
/// Start-up and drain: packets out beyond the last reported, in round trips of the bottleneck
/// estimate (start-up runs at its gain times the estimate; more out means the reports stalled).
const IN_FLIGHT: f64 = 4.0;
/// Leaving start-up: the least share of the bottleneck estimate sent while the queue start-up
/// built drains, and the most round trips that may take. The queue shows a round trip late, so
/// the drain takes about a round trip whatever its rate: it sends what empties the queue in
/// one (the queue seen, and what the rate above the delivered one added since), not less (at
/// half the rate a 10 ms queue left the link idle for 60 ms).
const DRAIN: f64 = 0.5;
const DRAIN_ROUNDS: u32 = 3;
/// The drain's rate is at least this share below the estimate.
const LEAST_DRAIN: f64 = 0.1;
/// Start-up jumps to the rate the packet train showed (the bottleneck's: a queue that others
/// keep shows within a round trip and start-up drains it), and grows no further than
/// [`TRAIN_CAP`] times it (more than the bottleneck takes only builds a queue; a measurement
/// that was low leaves the rest to cruise's probing).
const TRAIN_CAP: f64 = 1.05;
/// Start-up held at the train's reading for a round trip in which this share of its rate
/// crossed the path (random loss added back) and no queue formed: the train read the path low.
/// At the reading's [`TRAIN_CAP`] over a bottleneck the train read right, 0.95 crosses.
const TRAIN_LOW: f64 = 0.98;
/// What such a round trip multiplies the train's reading by (2 overflowed the queue where the
/// train was nearly right).
const TRAIN_RAISE: f64 = 1.5;
/// Back-off: the share of the delivered rate sent after a sign of congestion.
const BACKOFF: f64 = 0.9;
/// A queue someone else keeps full (a loss-based TCP flow fills any buffer) does not push the
/// rate below this share of the highest bottleneck estimate since the last congestion loss.
const SHARE_FLOOR: f64 = 0.25;
/// Round trips the bottleneck estimate's trend is taken over, and the growth over them that
/// means the path is giving more.
const TREND: usize = 4;
const GROWING: f64 = 1.1;
/// The shortest round the controller acts over: on a path shorter than the receiver's report
/// interval (loopback, a LAN) a round trip holds no report, and a probe, a drain or start-up's
/// packets out must last a report interval to show in one.
const LEAST_ROUND: Duration = super::REPORT_EVERY;
/// The least share of a probe's or drain's gain a round longer than the round trip keeps.
const LEAST_GAIN: f64 = 0.2;
/// Loss above this share is overload, whatever the queue says.
const OVERLOAD: f64 = 0.3;
/// Below this share of that estimate, with the queue empty, the rate grows every round trip
/// (the competitor left).
const RECOVER: f64 = 0.8;
/// A delivered rate counts toward the bottleneck estimate only when measured over at least
/// this share of a round trip (by the receiver's clock): a receiver that ran late counts a
/// burst of packets into a few milliseconds (1.4 Gbit/s "delivered" on a gigabit path), and the
/// estimate, the highest of its window, kept such outliers for ten round trips.
const SAMPLE_SPAN: f64 = 0.5;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Startup,
    Drain,
    Cruise,
    Backoff,
}

/// The default controller's state.
#[derive(Debug, Clone)]
pub struct Steady {
    limits: RateLimits,
    rate: f64,
    phase: Phase,
    pending: Feedback,
    losses: VecDeque<f64>,
    delivered: VecDeque<f64>,
    cycle: usize,
    /// The queueing delay of the previous round trip.
    last_queue: Duration,
    /// Start-up: round trips in a row the delivered rate did not grow; drain: round trips so far.
    flat: u32,
    /// The highest bottleneck estimate since the last loss that was congestion.
    peak: f64,
    /// The bottleneck estimate of the last few round trips (is the path giving more?).
    trend: VecDeque<f64>,
    /// Start-up: the feedback since the rate last grew, and the highest rate it delivered.
    ramp: Feedback,
    fastest: f64,
    /// The bottleneck's rate as the packet train showed it (0: not measured).
    capacity: f64,
    /// The round trip and packet size of the latest feedback.
    rtt: Duration,
    packet: u32,
    /// When cruise's gain of this round trip (a probe's, a drain's) ends by the sender's clock.
    gain_until: Option<Duration>,
    /// When the rate last fell on a sign of congestion: its effect shows a round trip later,
    /// and the signs before then (reports bunched behind a loss on the feedback connection)
    /// are the same congestion.
    backed_off: Option<Duration>,
    /// When the last round was decided, by the sender's clock.
    decided_at: Option<Duration>,
}

impl Steady {
    /// A controller starting at `limits.start`.
    pub fn new(limits: RateLimits) -> Steady {
        Steady {
            limits,
            rate: bounded(limits.start, &limits),
            phase: Phase::Startup,
            pending: Feedback::default(),
            losses: VecDeque::new(),
            delivered: VecDeque::new(),
            cycle: 0,
            last_queue: Duration::ZERO,
            flat: 0,
            peak: 0.0,
            trend: VecDeque::new(),
            ramp: Feedback::default(),
            fastest: 0.0,
            capacity: 0.0,
            rtt: Duration::ZERO,
            packet: 0,
            gain_until: None,
            backed_off: None,
            decided_at: None,
        }
    }

    /// The span one decision acts over: a round trip, or a report interval where that is
    /// longer.
    fn round(rtt: Duration) -> Duration {
        rtt.max(LEAST_ROUND)
    }

    /// A gain meant for a round trip, held for a round (longer where the round trip is shorter
    /// than a report interval): as far off 1 as leaves the path about the bytes a round trip
    /// of it would, [`LEAST_GAIN`] of it at least (a queue of a round trip holds them; a
    /// probe that added a quarter of a report interval's bytes overflowed one of 2 ms).
    fn scaled(gain: f64, rtt: Duration) -> f64 {
        let share = rtt.as_secs_f64() / Self::round(rtt).as_secs_f64();
        1.0 + (gain - 1.0) * share.max(LEAST_GAIN)
    }

    /// The share of the bottleneck estimate that drains, within about a round, the queue `f`
    /// shows and what sending at `rate` above the `delivered` rate added since.
    fn drain(f: &Feedback, rate: f64, delivered: f64) -> f64 {
        let round = Self::round(f.rtt).as_secs_f64();
        if delivered <= 0.0 {
            return DRAIN;
        }
        let added = (rate / delivered - 1.0).max(0.0) * round;
        let queue = f.queue.as_secs_f64() + added;
        (1.0 - queue / round).clamp(DRAIN, 1.0 - LEAST_DRAIN)
    }

    /// Whether start-up's rate is held at the packet train's reading ([`TRAIN_CAP`]).
    fn held_by_train(&self) -> bool {
        self.capacity > 0.0 && self.rate >= 0.99 * TRAIN_CAP * self.capacity
    }

    /// The bottleneck estimate: the highest delivered rate of the window.
    fn bottleneck(&self) -> f64 {
        self.delivered.iter().copied().fold(0.0, f64::max)
    }

    fn remember(q: &mut VecDeque<f64>, v: f64) {
        q.push_back(v);
        if q.len() > WINDOW {
            q.pop_front();
        }
    }

    /// What crossed the bottleneck in `f`, the path's own random loss (the lowest share of
    /// the recent intervals and this one) added back; and that share.
    fn crossed(&self, f: &Feedback) -> (f64, f64) {
        let floor = self.losses.iter().copied().fold(f.loss(), f64::min);
        (f.delivered_rate() / (1.0 - floor.min(0.5)), floor)
    }

    fn decide(&mut self, f: &Feedback) {
        self.gain_until = None;
        self.decided_at = Some(f.now);
        let loss = f.loss();
        let (delivered, loss_floor) = self.crossed(f);
        // A short interval's rate is noise: it may set a drain, never the estimate.
        let counts = f.interval.as_secs_f64() >= SAMPLE_SPAN * f.rtt.as_secs_f64();
        // The same congestion as the last back-off's, seen before its effect could show: the
        // packets sent after it are reported a round trip (and the queue) later.
        let settling = self
            .backed_off
            .is_some_and(|at| f.now < at + Self::round(f.rtt) + f.queue);
        Self::remember(&mut self.losses, loss);
        let limit = queue_limit(f.rtt);
        let before = self.bottleneck();
        // A queue that is draining (after a back-off) is no new sign, nor the one the last
        // round trip's probe built.
        let probed = self.phase == Phase::Cruise && self.cycle == 0;
        let queued = f.queue > limit
            && f.queue.as_secs_f64() >= 0.9 * self.last_queue.as_secs_f64()
            && !probed;
        self.last_queue = f.queue;
        let lossy = loss > LOSS_MIN && loss > loss_floor + LOSS_JUMP;
        if self.phase == Phase::Startup && (lossy || queued) {
            // Start-up overshot by up to its gain: what reached the receiver is the
            // bottleneck, and the queue start-up built drains below it.
            if counts {
                Self::remember(&mut self.delivered, delivered);
            }
            let estimate = match counts {
                true => self.bottleneck(),
                false => self.bottleneck().max(delivered),
            };
            self.peak = self.peak.max(self.bottleneck());
            self.phase = Phase::Drain;
            self.flat = 0;
            self.rate = Self::drain(f, self.rate, delivered) * estimate;
        } else if self.phase == Phase::Drain {
            if counts {
                Self::remember(&mut self.delivered, delivered);
            }
            self.flat += 1;
            if f.queue <= limit / 2 || self.flat >= DRAIN_ROUNDS {
                self.phase = Phase::Cruise;
                self.cycle = 2;
                self.rate = self.bottleneck();
            }
        } else if (lossy || queued) && settling {
            // Held: the last back-off has not reached the receiver yet.
        } else if lossy || queued {
            self.backed_off = Some(f.now);
            // From what the path carries (the estimate, or less where less reached the
            // receiver), not from the rate of the moment: a drain round's 0.75 or a back-off
            // just before would compound (0.9 × 0.75 of the estimate left the link idle).
            let mut rate = self.rate.max(self.bottleneck()).min(delivered) * BACKOFF;
            // Loss without a queue (a policer), or most packets lost at a full one (the path
            // has far less room than the floor): the path itself has less room now. Loss at a
            // queue shared with others is theirs as much as this flow's.
            if (lossy && f.queue <= limit) || loss > OVERLOAD {
                self.peak = rate;
            } else {
                rate = rate.max(SHARE_FLOOR * self.peak);
            }
            self.rate = rate;
            self.delivered.clear();
            Self::remember(&mut self.delivered, rate);
            // The estimate starts again from the rate backed off to: measured against it, the
            // path would look as if it gave more (cruise probed every round trip and rebuilt
            // the queue), so the trend starts again after it.
            self.trend.clear();
            self.phase = Phase::Backoff;
        } else {
            // A round trip the sender had less to send than the rate allows (the tail of the
            // transfer, resends only) says nothing about the path.
            if counts && (delivered >= 0.5 * self.rate || self.phase == Phase::Startup) {
                Self::remember(&mut self.delivered, delivered);
            }
            self.peak = self.peak.max(self.bottleneck());
            match self.phase {
                Phase::Startup if self.flat < PLATEAU => {
                    // The rate itself grows with every few reports (`grow`).
                    if delivered >= before * STARTUP_GROWTH {
                        self.flat = 0;
                    } else if self.held_by_train() && delivered >= TRAIN_LOW * self.rate {
                        // The path took all the train's reading allowed, and no queue formed
                        // (or this round would have been the drain's): the train read it low
                        // (a host that put the sender, the receiver or the path aside while
                        // it passed: a gigabit read as 331 Mbit/s). Start-up goes on, the
                        // reading raised by half each such round trip (doubling it overflowed
                        // the queue where the train was nearly right).
                        self.capacity *= TRAIN_RAISE;
                        self.flat = 0;
                    } else {
                        self.flat += 1;
                    }
                }
                Phase::Startup => {
                    self.phase = Phase::Cruise;
                    self.cycle = 1;
                    self.rate = self.bottleneck() * CYCLE[1];
                }
                Phase::Cruise | Phase::Backoff | Phase::Drain => {
                    self.phase = Phase::Cruise;
                    self.cycle = (self.cycle + 1) % CYCLE.len();
                    let btl = self.bottleneck();
                    // The path gives more with every probe and no queue forms: someone left,
                    // or the path grew; probe every round trip until it stops.
                    let growing = self.trend.front().is_some_and(|&b| btl > GROWING * b);
                    let empty = f.queue <= limit / 4;
                    let gain = if f.queue > limit / 2 {
                        // Probing waits until the queue has drained.
                        0.95
                    } else if empty && (growing || btl < RECOVER * self.peak) {
                        CYCLE[0]
                    } else {
                        CYCLE[self.cycle]
                    };
                    self.rate = btl * Self::scaled(gain, f.rtt);
                    self.gain_until = (gain != 1.0).then_some(f.now + Self::round(f.rtt));
                }
            }
        }
        if self.phase != Phase::Backoff {
            self.trend.push_back(self.bottleneck());
        }
        if self.trend.len() > TREND {
            self.trend.pop_front();
        }
        self.rate = bounded(self.rate, &self.limits);
    }

    /// Start-up: the rate follows what reaches the receiver, [`STARTUP_GAIN`] times over.
    fn grow(&mut self, fb: &Feedback) {
        self.ramp.absorb(fb);
        if self.ramp.interval < STARTUP_SPAN {
            return;
        }
        let ramp = std::mem::take(&mut self.ramp);
        let (delivered, _) = self.crossed(&ramp);
        self.fastest = self.fastest.max(delivered);
        let mut rate = self.rate.max(STARTUP_GAIN * delivered);
        if self.capacity > 0.0 {
            rate = rate.min(TRAIN_CAP * self.capacity).max(self.rate);
        }
        self.rate = bounded(rate, &self.limits);
    }
}

impl RateControl for Steady {
    fn on_feedback(&mut self, fb: &Feedback) {
        self.rtt = fb.rtt;
        self.packet = fb.packet;
        if self.phase == Phase::Startup {
            self.grow(fb);
        }
        self.pending.absorb(fb);
        let every = Self::round(self.pending.rtt);
        // In start-up a queue ends the round trip at once, and so does its end in the drain.
        let limit = queue_limit(fb.rtt);
        let early = match self.phase {
            Phase::Startup => fb.queue > limit,
            Phase::Drain => fb.queue <= limit / 2,
            _ => false,
        };
        // Cruise's rounds last a round of the sender's time too: reports that come bunched
        // (held up behind a loss on the feedback connection) join the round they came in, not
        // rounds of their own (a probe cut to 3-40 ms so and the drain after it left the link
        // idle for a quarter of a round trip).
        let held = matches!(self.phase, Phase::Cruise | Phase::Backoff)
            && self.decided_at.is_some_and(|at| fb.now < at + every);
        if self.pending.interval >= every && !held || early {
            let f = std::mem::take(&mut self.pending);
            self.decide(&f);
        }
    }

    fn on_tick(&mut self, now: Duration) {
        // A round's gain lasts a round of the sender's time, whatever the reports
        // do: held up behind a loss on the feedback connection (a round trip and more at
        // 1 % loss), they let a probe run on at 1.25 and build a queue cruise then backed
        // off from.
        if self.gain_until.is_some_and(|until| now >= until) {
            self.gain_until = None;
            self.rate = bounded(self.bottleneck(), &self.limits);
        }
    }

    fn on_capacity(&mut self, bps: f64) {
        if self.phase == Phase::Startup {
            self.capacity = bps;
            self.rate = bounded(self.rate.max(bps), &self.limits);
        }
    }

    fn rate(&self) -> f64 {
        self.rate
    }

    fn in_flight(&self) -> Option<u64> {
        if !matches!(self.phase, Phase::Startup | Phase::Drain) || self.packet == 0 {
            return None;
        }
        let estimate = self
            .bottleneck()
            .max(self.fastest)
            .max(self.capacity)
            .max(self.limits.start);
        let bits = IN_FLIGHT * estimate * Self::round(self.rtt).as_secs_f64();
        Some((bits / (8.0 * f64::from(self.packet))).max(64.0) as u64)
    }

    fn state(&self) -> &'static str {
        match self.phase {
            Phase::Startup => "startup",
            Phase::Drain => "drain",
            Phase::Cruise => "cruise",
            Phase::Backoff => "backoff",
        }
    }
}

#[cfg(test)]
mod tests;
