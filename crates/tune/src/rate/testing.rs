//! A fluid model of a path for the rate controllers' tests: a bottleneck of `capacity` bits/s
//! with a drop-tail queue, random loss after it, optional cross traffic, and the receiver's
//! feedback reaching the sender one round trip late.

use super::{Feedback, RateControl, SegmentLoss};
use crate::rate::MIN_RATE;
use std::collections::VecDeque;
use std::time::Duration;

/// Packets per segment (as the UDP channel's wire format has it).
const SEGMENT: u64 = 10_000;

/// Bytes per packet in the model.
const PACKET: f64 = 1470.0;

/// The path.
pub struct UdpPath {
    /// Bottleneck rate, bits/s.
    pub capacity: f64,
    /// Base round trip, s.
    pub rtt: f64,
    /// Random loss after the bottleneck.
    pub loss: f64,
    /// Queue, bits (one BDP unless set).
    pub buffer: f64,
    /// Competing traffic that never backs off, bits/s.
    pub cross: f64,
    /// The capacity changes to this many bits/s at this time (s), the queue kept in seconds.
    pub step: Option<(f64, f64)>,
    /// A competing loss-based flow (cubic-like: +2 % of the capacity per round trip, × 0.7 after
    /// a round trip with a drop), running until this time, s.
    pub tcp_until: Option<f64>,
    /// The rate the packet train at the start shows (told a round trip in), bits/s.
    pub train: Option<f64>,
    /// The model's time step, s (1 ms unless set): the sender's clock ticks this often.
    pub tick: f64,
}

/// What a run moved, per step of the model: time (s), bits sent, delivered, dropped at the full queue.
#[derive(Default)]
pub struct Run {
    steps: Vec<(f64, f64, f64, f64)>,
    /// The model's time step, s.
    tick: f64,
    /// Bits the competing loss-based flow got through.
    pub tcp_bits: f64,
    /// Every 100 ms: time (s), the controller's rate (bit/s) and state, the queue (s).
    pub trace: Vec<(f64, f64, &'static str, f64)>,
}

impl std::fmt::Debug for Run {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "goodput after 5 s {:.3e} bit/s, dropped at the queue after 5 s {:.2} %",
            self.goodput_after(5.0),
            100.0 * self.overflow_share_after(5.0)
        )
    }
}

impl Run {
    fn after(&self, t: f64) -> impl Iterator<Item = &(f64, f64, f64, f64)> {
        self.steps.iter().filter(move |s| s.0 >= t)
    }

    /// Delivered bits/s after `t` s.
    pub fn goodput_after(&self, t: f64) -> f64 {
        let (bits, n) = self
            .after(t)
            .fold((0.0, 0usize), |(b, n), s| (b + s.2, n + 1));
        bits / (n as f64 * self.tick).max(1e-9)
    }

    /// Share of what was sent after `t` s that the full queue dropped.
    pub fn overflow_share_after(&self, t: f64) -> f64 {
        let (sent, over) = self
            .after(t)
            .fold((0.0, 0.0), |(a, b), s| (a + s.1, b + s.3));
        over / sent.max(1.0)
    }
}

impl UdpPath {
    /// A path with a one-BDP queue and no cross traffic.
    pub fn new(capacity: f64, rtt: f64, loss: f64) -> UdpPath {
        UdpPath {
            capacity,
            rtt,
            loss,
            buffer: capacity * rtt,
            cross: 0.0,
            tcp_until: None,
            step: None,
            train: None,
            tick: 0.001,
        }
    }

    /// Runs `c` for `secs` seconds.
    pub fn run(&mut self, c: &mut dyn RateControl, secs: f64) -> Run {
        let dt = self.tick;
        let mut run = Run {
            tick: dt,
            ..Run::default()
        };
        // Packets sent, and those the reports that reached the sender covered (the
        // controller's in-flight bound counts what is out beyond them).
        let (mut sent, mut reported) = (0.0f64, 0.0f64);
        let mut queue = 0.0f64;
        let mut pending: VecDeque<(f64, Feedback, f64)> = VecDeque::new();
        let mut segments: VecDeque<(f64, SegmentLoss)> = VecDeque::new();
        let mut report = (0.0, 0.0, 0.0); // delivered, lost packets, lowest queue (s)
        let mut report_queue = f64::MAX;
        let mut seg = (0u64, 0.0f64, 0.0f64); // index, packets sent, packets lost
        let (mut t, mut last_report) = (0.0, 0.0);
        let (mut tcp, mut tcp_dropped, mut tcp_round) = (self.capacity * 0.1, false, 0.0);
        while t < secs {
            t += dt;
            if let Some((_, capacity)) = self.step.filter(|(at, _)| t >= *at) {
                self.buffer *= capacity / self.capacity;
                self.capacity = capacity;
                self.step = None;
            }
            c.on_tick(Duration::from_secs_f64(t));
            let mut ours = c.rate().max(MIN_RATE) * dt;
            if let Some(most) = c.in_flight() {
                let room = (most as f64 - (sent - reported)).max(0.0);
                ours = ours.min(room * PACKET * 8.0);
            }
            sent += ours / (PACKET * 8.0);
            let tcp_on = self.tcp_until.is_some_and(|end| t < end);
            if tcp_on && t - tcp_round >= self.rtt {
                tcp = if tcp_dropped {
                    tcp * 0.7
                } else {
                    tcp + 0.02 * self.capacity
                };
                tcp_dropped = false;
                tcp_round = t;
            }
            let theirs = if tcp_on { tcp * dt } else { 0.0 };
            let cross = self.cross * dt + theirs;
            queue += ours + cross;
            let served = queue.min(self.capacity * dt);
            queue -= served;
            let over = (queue - self.buffer).max(0.0);
            queue -= over;
            let share = ours / (ours + cross).max(1e-9);
            let (our_over, our_served) = (over * share, served * share);
            tcp_dropped |= over > 0.0 && theirs > 0.0;
            run.tcp_bits += served * theirs / (ours + cross).max(1e-9);
            let delivered = our_served * (1.0 - self.loss);
            let lost = our_over + our_served * self.loss;
            run.steps.push((t, ours, delivered, our_over));
            if run
                .steps
                .len()
                .is_multiple_of((0.1 / dt).round().max(1.0) as usize)
            {
                run.trace
                    .push((t, c.rate(), c.state(), queue / self.capacity));
            }
            report.0 += delivered / (PACKET * 8.0);
            report.1 += lost / (PACKET * 8.0);
            report_queue = report_queue.min(queue / self.capacity);
            seg.1 += ours / (PACKET * 8.0);
            seg.2 += lost / (PACKET * 8.0);
            if seg.1 >= SEGMENT as f64 {
                let s = SegmentLoss {
                    segment: seg.0,
                    packets: SEGMENT,
                    lost: (seg.2 * SEGMENT as f64 / seg.1) as u64,
                };
                segments.push_back((t + self.rtt, s));
                seg = (seg.0 + 1, 0.0, 0.0);
            }
            if t - last_report >= 0.01 {
                let fb = Feedback {
                    now: Duration::ZERO,
                    interval: Duration::from_secs_f64(t - last_report),
                    delivered: report.0 as u64,
                    lost: report.1 as u64,
                    queue: Duration::from_secs_f64(report_queue),
                    rtt: Duration::from_secs_f64(self.rtt),
                    packet: PACKET as u32,
                };
                pending.push_back((t + self.rtt, fb, sent - queue / (PACKET * 8.0)));
                report = (0.0, 0.0, 0.0);
                report_queue = f64::MAX;
                last_report = t;
            }
            if t >= self.rtt {
                if let Some(shows) = self.train.take() {
                    c.on_capacity(shows);
                }
            }
            while pending.front().is_some_and(|(at, _, _)| *at <= t) {
                if let Some((_, mut fb, covered)) = pending.pop_front() {
                    reported = reported.max(covered);
                    fb.now = Duration::from_secs_f64(t);
                    c.on_feedback(&fb);
                }
            }
            while segments.front().is_some_and(|(at, _)| *at <= t) {
                if let Some((_, s)) = segments.pop_front() {
                    c.on_segment(Duration::from_secs_f64(t), &s);
                }
            }
        }
        run
    }
}
