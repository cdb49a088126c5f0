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
//! connection do not stretch a probe). At a sign of congestion it falls to 90 % of what the
//! receiver got (of the estimate, not of a drain round's rate), and the estimate and its trend
//! start again from there; signs that arrive before the back-off could show (a round trip and
//! the queue) are the same congestion. A delivered
//! rate measured over less than half a round trip never becomes the estimate (a receiver that
//! ran late counts a burst into a few milliseconds).

use super::{bounded, Feedback, RateControl, RateLimits};
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
        }
    }

    /// The queueing delay that means a queue is building: a tenth of the round trip, within
    /// 4–25 ms (a path's own jitter stays below it).
    fn queue_limit(rtt: Duration) -> Duration {
        (rtt / 10).clamp(Duration::from_millis(4), Duration::from_millis(25))
    }

    /// The share of the bottleneck estimate that drains, within about a round trip, the queue
    /// `f` shows and what sending at `rate` above the `delivered` rate added since.
    fn drain(f: &Feedback, rate: f64, delivered: f64) -> f64 {
        let rtt = f.rtt.as_secs_f64();
        if rtt <= 0.0 || delivered <= 0.0 {
            return DRAIN;
        }
        let added = (rate / delivered - 1.0).max(0.0) * rtt;
        let queue = f.queue.as_secs_f64() + added;
        (1.0 - queue / rtt).clamp(DRAIN, 1.0 - LEAST_DRAIN)
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
        let loss = f.loss();
        let (delivered, loss_floor) = self.crossed(f);
        // A short interval's rate is noise: it may set a drain, never the estimate.
        let counts = f.interval.as_secs_f64() >= SAMPLE_SPAN * f.rtt.as_secs_f64();
        // The same congestion as the last back-off's, seen before its effect could show: the
        // packets sent after it are reported a round trip (and the queue) later.
        let settling = self
            .backed_off
            .is_some_and(|at| f.now < at + f.rtt + f.queue);
        Self::remember(&mut self.losses, loss);
        let limit = Self::queue_limit(f.rtt);
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
                    self.rate = btl * gain;
                    self.gain_until = (gain != 1.0).then_some(f.now + f.rtt);
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
        let every = self.pending.rtt.max(Duration::from_millis(10));
        // In start-up a queue ends the round trip at once, and so does its end in the drain.
        let limit = Self::queue_limit(fb.rtt);
        let early = match self.phase {
            Phase::Startup => fb.queue > limit,
            Phase::Drain => fb.queue <= limit / 2,
            _ => false,
        };
        if self.pending.interval >= every || early {
            let f = std::mem::take(&mut self.pending);
            self.decide(&f);
        }
    }

    fn on_tick(&mut self, now: Duration) {
        // A round trip's gain lasts a round trip of the sender's time, whatever the reports
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
        let bits = IN_FLIGHT * estimate * self.rtt.as_secs_f64();
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
mod tests {
    use super::*;
    use crate::rate::testing::UdpPath;

    fn limits() -> RateLimits {
        RateLimits {
            start: 10e6,
            max: 10e9,
        }
    }

    #[test]
    fn holds_the_line_rate_through_random_loss() {
        for loss in [0.0, 0.01, 0.05] {
            let mut path = UdpPath::new(1e9, 0.1, loss);
            let mut c = Steady::new(limits());
            let run = path.run(&mut c, 20.0);
            let goodput = run.goodput_after(5.0);
            assert!(
                goodput > 0.9e9 * (1.0 - loss),
                "{loss}: goodput {goodput:.3e}"
            );
            assert!(run.overflow_share_after(5.0) < 0.01, "{loss}: {:?}", run);
        }
    }

    #[test]
    fn starts_up_at_bbrs_gain_and_settles_at_the_bottleneck() {
        let mut path = UdpPath::new(1e9, 0.1, 0.01);
        let mut c = Steady::new(limits());
        let run = path.run(&mut c, 4.0);
        let at = |t: f64| run.trace.iter().find(|s| s.0 >= t).map_or(0.0, |s| s.1);
        // From 10 Mbit/s past the gigabit in seven round trips (doubling took ten), then
        // below it while the queue start-up built drains, and back at the bottleneck.
        assert!(at(0.3) < 0.2e9 && at(0.7) > 1.2e9, "{:?}", run.trace);
        assert!(at(0.8) < 0.6e9 && at(1.2) > 0.95e9, "{:?}", run.trace);
        let (_, _, state, _) = run.trace[run.trace.len() - 1];
        assert_ne!(state, "startup");
        let settled: Vec<f64> = run
            .trace
            .iter()
            .filter(|s| s.0 > 2.0)
            .map(|s| s.1)
            .collect();
        assert!(
            settled.iter().all(|&r| r > 0.7e9 && r < 1.3e9),
            "{settled:?}"
        );
    }

    #[test]
    fn a_packet_train_starts_it_at_the_bottleneck_and_a_wrong_one_is_corrected() {
        // A gigabit path at 100 ms with 1 % loss, the train showing `shows`.
        let with_train = |shows: f64| {
            let mut path = UdpPath::new(1e9, 0.1, 0.01);
            path.train = Some(shows);
            path.run(&mut Steady::new(limits()), 3.0)
        };
        let at = |run: &crate::rate::testing::Run, t: f64| {
            run.trace.iter().find(|s| s.0 >= t).map_or(0.0, |s| s.1)
        };
        // The train told the truth: at the gigabit a round trip in, no queue overflows.
        let run = with_train(0.99e9);
        assert!(at(&run, 0.2) > 0.95e9, "{:?}", run.trace);
        assert!(run.overflow_share_after(0.0) < 0.001, "{run:?}");
        assert!(run.goodput_after(0.3) > 0.95 * 0.99e9, "{run:?}");
        // Twice the truth: what reached the receiver brings it down within a few round trips.
        let run = with_train(2e9);
        assert!(at(&run, 0.6) < 1.1e9, "{:?}", run.trace);
        assert!(run.goodput_after(1.0) > 0.9 * 0.99e9, "{run:?}");
        // Half the truth: start-up and cruise's probing find the rest.
        let run = with_train(0.5e9);
        assert!(run.goodput_after(1.5) > 0.9 * 0.99e9, "{:?}", run.trace);
    }

    #[test]
    fn a_train_that_read_the_path_low_holds_start_up_back_for_a_round_trip_only() {
        // A gigabit path read as a third of it: held at the reading, start-up ended there and
        // cruise's probing took seconds to find the rest (0.67 Gbit/s over the first 3 s).
        let mut path = UdpPath::new(1e9, 0.1, 0.01);
        path.train = Some(0.33e9);
        let run = path.run(&mut Steady::new(limits()), 3.0);
        assert!(run.goodput_after(0.2) > 0.8e9, "{:?}", run.trace);
        assert_eq!(run.overflow_share_after(0.0), 0.0, "{run:?}");
    }

    #[test]
    fn the_drain_after_a_start_up_at_the_train_s_rate_keeps_the_link_busy() {
        // The train told the truth, or a tenth more: start-up overshot by a few percent, the
        // queue it built shows a round trip late, and a drain at half the rate for that round
        // trip left the link idle for most of it (0.957-0.959 Gbit/s over the first 2 s).
        for shows in [0.99e9, 1.1e9] {
            let mut path = UdpPath::new(1e9, 0.1, 0.01);
            path.train = Some(shows);
            let run = path.run(&mut Steady::new(limits()), 2.0);
            assert!(
                run.goodput_after(0.2) > 0.968e9,
                "{shows:e}: {:?}",
                run.trace
            );
            assert_eq!(run.overflow_share_after(0.0), 0.0, "{shows:e}: {run:?}");
        }
    }

    /// A report of `ms` receiver milliseconds at `now_ms` (sender's clock) in which `mbit`
    /// Mbit/s arrived, with `queue_ms` of queue, 1 % lost, on a 100 ms path.
    fn report(now_ms: u64, ms: u64, mbit: f64, queue_ms: u64) -> Feedback {
        let packets = (mbit * 1e6 * ms as f64 / 1e3 / (1442.0 * 8.0)) as u64;
        Feedback {
            now: Duration::from_millis(now_ms),
            interval: Duration::from_millis(ms),
            delivered: packets,
            lost: packets / 100,
            queue: Duration::from_millis(queue_ms),
            rtt: Duration::from_millis(100),
            packet: 1442,
        }
    }

    #[test]
    fn a_burst_counted_into_a_short_report_does_not_become_the_estimate() {
        // Start-up on a gigabit path: a round trip at 600 Mbit/s, then one at the gigabit.
        let mut c = Steady::new(limits());
        c.on_capacity(1e9);
        c.on_feedback(&report(200, 100, 600.0, 0));
        c.on_feedback(&report(300, 100, 980.0, 0));
        // A receiver that ran late counts 14 ms of packets into 10: "1.4 Gbit/s", and the
        // queue start-up built shows: start-up ends on this short report.
        c.on_feedback(&report(310, 10, 1400.0, 15));
        assert_eq!(c.state(), "drain");
        // The queue drains at the bottleneck's rate over the next round trip.
        c.on_feedback(&report(410, 100, 980.0, 1));
        assert_eq!(c.state(), "cruise");
        // Cruise goes on from the gigabit the path delivered, not from the burst.
        assert!(c.rate() < 1.05e9, "{}", c.rate());
    }

    #[test]
    fn reports_bunched_behind_a_stalled_feedback_connection_back_off_once() {
        let mut path = UdpPath::new(1e9, 0.1, 0.01);
        let mut c = Steady::new(limits());
        path.run(&mut c, 3.0);
        // Five round trips of reports held up by a loss on the feedback connection arrive at
        // once, each showing the queue of the same moment: one back-off (to at least 0.9 of
        // the cruise cycle's lowest rate, 0.75 of the gigabit), not one per report (0.49).
        for i in 0..5 {
            c.on_feedback(&report(3_100 + i, 100, 980.0, 40));
        }
        assert_eq!(c.state(), "backoff");
        assert!(c.rate() > 0.65e9, "{}", c.rate());
    }

    #[test]
    fn a_probe_lasts_a_round_trip_of_the_sender_s_time_though_the_reports_stall() {
        let mut path = UdpPath::new(1e9, 0.1, 0.01);
        let mut c = Steady::new(limits());
        path.run(&mut c, 3.0);
        // Round trips of reports at the gigabit with no queue, until cruise probes.
        let mut now = 3_000;
        while c.rate() < 1.2e9 {
            now += 100;
            c.on_feedback(&report(now, 100, 980.0, 0));
            assert!(now < 4_000, "no probe: {}", c.rate());
        }
        // Then the reports stall behind a loss on the feedback connection: the probe goes on
        // for its round trip, and ends there (run on at 1.25, it built 25 ms of queue a round
        // trip).
        c.on_tick(Duration::from_millis(now + 90));
        assert!(c.rate() > 1.2e9, "{}", c.rate());
        c.on_tick(Duration::from_millis(now + 100));
        assert!((0.95e9..1.05e9).contains(&c.rate()), "{}", c.rate());
    }

    /// A controller cruising on a gigabit path at 1 % loss, in the round trip that drains
    /// what its last probe queued (0.75 of the estimate); and the time of its last report.
    fn in_a_drain_round() -> (Steady, u64) {
        let mut path = UdpPath::new(1e9, 0.1, 0.01);
        let mut c = Steady::new(limits());
        path.run(&mut c, 3.0);
        let mut now = 3_000;
        while c.rate() > 0.8e9 {
            now += 100;
            c.on_feedback(&report(now, 100, 980.0, 0));
            assert!(now < 4_000, "no drain round: {}", c.rate());
        }
        (c, now)
    }

    #[test]
    fn a_back_off_in_a_drain_round_falls_from_the_estimate_not_from_the_drain_s_rate() {
        let (mut c, now) = in_a_drain_round();
        // A queue stands (someone else's, or an estimate a little high): back off to 0.9 of
        // what the path carries, not to 0.9 of the drain's 0.75 (0.66 of the gigabit, which
        // left the link idle once the queue was gone).
        c.on_feedback(&report(now + 100, 100, 980.0, 40));
        assert_eq!(c.state(), "backoff");
        assert!((0.85e9..0.95e9).contains(&c.rate()), "{}", c.rate());
    }

    #[test]
    fn after_a_back_off_cruise_probes_once_a_cycle_not_every_round_trip() {
        let (mut c, mut now) = in_a_drain_round();
        now += 100;
        c.on_feedback(&report(now, 100, 980.0, 40));
        assert_eq!(c.state(), "backoff");
        // The queue drains and the path delivers the gigabit: measured against the rate it
        // backed off to, the path looked as if it gave more, and cruise probed at 1.25 every
        // round trip (each building 25 ms of queue).
        let mut probes = 0;
        for _ in 0..8 {
            now += 100;
            c.on_feedback(&report(now, 100, 980.0, 1));
            probes += usize::from(c.rate() > 1.2e9);
        }
        assert!(probes <= 2, "{probes} probes in 8 round trips");
    }

    #[test]
    fn start_up_bounds_the_packets_out_and_cruise_does_not() {
        let mut c = Steady::new(limits());
        assert_eq!(c.in_flight(), None, "nothing known yet");
        // 173 packets of 1,442 bytes in 20 ms: 99.8 Mbit/s reached the receiver.
        c.on_feedback(&Feedback {
            now: Duration::from_millis(120),
            interval: Duration::from_millis(20),
            delivered: 173,
            lost: 0,
            queue: Duration::ZERO,
            rtt: Duration::from_millis(100),
            packet: 1442,
        });
        assert!((c.rate() - 2.89 * 99.8e6).abs() < 1e6, "{}", c.rate());
        // Four round trips of that: 3,460 packets.
        let cap = c.in_flight().unwrap_or(0);
        assert!((3400..3500).contains(&cap), "{cap}");
        let mut path = UdpPath::new(1e9, 0.1, 0.01);
        path.run(&mut c, 3.0);
        assert_eq!((c.state(), c.in_flight()), ("cruise", None));
    }

    #[test]
    fn shares_with_a_loss_based_flow_without_stalling_and_takes_the_path_back_when_it_leaves() {
        // A cubic-like flow fills the queue for 20 s (100 ms, 1 Gbit/s), then leaves.
        let mut path = UdpPath::new(1e9, 0.1, 0.0);
        path.tcp_until = Some(20.0);
        let mut c = Steady::new(limits());
        let run = path.run(&mut c, 30.0);
        let beside = run
            .trace
            .iter()
            .filter(|s| s.0 > 5.0 && s.0 < 20.0)
            .map(|s| s.1)
            .sum::<f64>()
            / 150.0;
        let tcp = run.tcp_bits / 20.0;
        // The loss-based flow keeps most of the path; this one keeps a share, and together
        // they fill it.
        assert!(tcp > 0.3e9, "tcp {tcp:.3e}, udp {beside:.3e}");
        assert!(beside > 0.15e9 && beside < 0.7e9, "udp {beside:.3e}");
        // Within two seconds of its leaving, the path is this flow's again.
        assert!(run.goodput_after(22.0) > 0.85e9, "{run:?}");
    }

    #[test]
    fn follows_the_path_down_when_its_capacity_falls_below_the_floor() {
        // 1 Gbit/s, then 100 Mbit/s from 5 s on: far below a quarter of the first estimate.
        let mut path = UdpPath::new(1e9, 0.1, 0.0);
        path.step = Some((5.0, 100e6));
        let mut c = Steady::new(limits());
        let run = path.run(&mut c, 20.0);
        let late: Vec<f64> = run
            .trace
            .iter()
            .filter(|s| s.0 > 12.0)
            .map(|s| s.1)
            .collect();
        assert!(late.iter().all(|&r| r < 0.15e9), "{late:?}");
        assert!(run.goodput_after(12.0) > 80e6, "{run:?}");
        assert!(run.overflow_share_after(12.0) < 0.05, "{run:?}");
    }

    #[test]
    fn yields_to_a_queue_it_did_not_build() {
        // A competing flow takes 600 Mbit/s of the gigabit: this one settles into the rest.
        let mut path = UdpPath::new(1e9, 0.1, 0.0);
        path.cross = 0.6e9;
        let mut c = Steady::new(limits());
        let run = path.run(&mut c, 20.0);
        let goodput = run.goodput_after(5.0);
        assert!(goodput > 0.3e9 && goodput < 0.42e9, "{goodput:.3e}");
    }

    #[test]
    fn backs_off_from_a_policer_that_drops_without_queueing() {
        // No buffer: excess is dropped at once, and the loss grows with the rate.
        let mut path = UdpPath::new(200e6, 0.05, 0.0);
        path.buffer = 0.0;
        let mut c = Steady::new(limits());
        let run = path.run(&mut c, 20.0);
        assert!(run.goodput_after(5.0) > 0.15e9, "{:?}", run);
        assert!(run.overflow_share_after(5.0) < 0.15, "{:?}", run);
    }
}
