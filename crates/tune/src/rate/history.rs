//! The seed's history-based controller (fobs.txt §3.1). Feedback once per chunk (about 100 MB:
//! seven segments): above 0.5 % loss the rate falls by a fixed step (50 Mbit/s on a gigabit
//! line: a twentieth of the line rate); otherwise it rises by that step, but only with the
//! probability that an increase from this rate did not raise the loss, learned from every
//! earlier increase and kept across sessions ([`Odds`]).

use super::{bounded, seed_start, RateControl, RateLimits, SegmentLoss};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::time::Duration;

/// Segments per chunk: 7 × 10,000 × 1,470 bytes ≈ the seed's 100 MB.
pub const CHUNK_SEGMENTS: u64 = 7;
/// Loss above which the rate falls (the seed's half of one percent).
pub const THRESHOLD: f64 = 0.005;
/// The step, as a share of the line rate.
const STEP: f64 = 0.05;

/// What increases from each rate led to: tries and how many raised the loss, by rate in
/// steps. Serialisable, so that a path's odds outlive the session.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Odds {
    /// Rate step → (increases tried, increases that raised the loss).
    pub table: BTreeMap<u64, (u32, u32)>,
}

impl Odds {
    /// The learned probability that an increase from step `at` raises the loss.
    pub fn hurt(&self, at: u64) -> f64 {
        match self.table.get(&at) {
            Some(&(tries, hurt)) if tries > 0 => f64::from(hurt) / f64::from(tries),
            _ => 0.0,
        }
    }

    fn tried(&mut self, at: u64, hurt: bool) {
        let e = self.table.entry(at).or_default();
        e.0 = e.0.saturating_add(1);
        if hurt {
            e.1 = e.1.saturating_add(1);
        }
    }
}

/// The history controller's state.
#[derive(Debug, Clone)]
pub struct History {
    limits: RateLimits,
    rate: f64,
    chunk: (u64, u64, u64),
    /// An increase from this step awaits its chunk's verdict.
    raised_from: Option<u64>,
    last_loss: f64,
    odds: Odds,
    coin: u64,
    state: &'static str,
}

impl History {
    /// A controller starting at `limits.start` (a remembered rate), or half the line rate if
    /// none is given (the seed gives no start-up), with the path's `odds` so far; `seed` seeds
    /// its coin.
    pub fn new(limits: RateLimits, odds: Odds, seed: u64) -> History {
        History {
            limits,
            rate: bounded(seed_start(&limits), &limits),
            chunk: (0, 0, 0),
            raised_from: None,
            last_loss: 0.0,
            odds,
            coin: seed | 1,
            state: "hold",
        }
    }

    /// What increases did on this path, to keep for the next session.
    pub fn odds(&self) -> &Odds {
        &self.odds
    }

    fn step(&self) -> f64 {
        self.limits.max * STEP
    }

    fn at(&self) -> u64 {
        (self.rate / self.step()).round() as u64
    }

    /// A uniform draw in [0, 1) (xorshift: the law stays pure and its runs repeatable).
    fn draw(&mut self) -> f64 {
        self.coin ^= self.coin << 13;
        self.coin ^= self.coin >> 7;
        self.coin ^= self.coin << 17;
        (self.coin >> 11) as f64 / (1u64 << 53) as f64
    }

    fn decide(&mut self, loss: f64) {
        if let Some(from) = self.raised_from.take() {
            let hurt = loss > THRESHOLD && loss > 2.0 * self.last_loss;
            self.odds.tried(from, hurt);
        }
        if loss > THRESHOLD {
            self.rate -= self.step();
            self.state = "decrease";
        } else if self.draw() >= self.odds.hurt(self.at()) {
            self.raised_from = Some(self.at());
            self.rate += self.step();
            self.state = "increase";
        } else {
            self.state = "hold";
        }
        self.rate = bounded(self.rate, &self.limits);
        self.last_loss = loss;
    }
}

impl RateControl for History {
    fn on_segment(&mut self, _now: Duration, seg: &SegmentLoss) {
        self.chunk.0 += 1;
        self.chunk.1 += seg.packets;
        self.chunk.2 += seg.lost;
        if self.chunk.0 >= CHUNK_SEGMENTS {
            let (_, packets, lost) = std::mem::take(&mut self.chunk);
            self.decide(lost as f64 / packets.max(1) as f64);
        }
    }

    fn rate(&self) -> f64 {
        self.rate
    }

    fn state(&self) -> &'static str {
        self.state
    }

    fn odds(&self) -> Option<&Odds> {
        Some(&self.odds)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rate::testing::UdpPath;

    fn loss(lost: u64) -> SegmentLoss {
        SegmentLoss {
            segment: 0,
            packets: 10_000,
            lost,
        }
    }

    fn chunk(c: &mut History, lost: u64) {
        for _ in 0..CHUNK_SEGMENTS {
            c.on_segment(Duration::ZERO, &loss(lost));
        }
    }

    const GIGABIT: RateLimits = RateLimits {
        start: 0.0,
        max: 1e9,
    };

    #[test]
    fn decides_once_per_chunk_by_fixed_steps() {
        let mut c = History::new(GIGABIT, Odds::default(), 7);
        assert_eq!(c.rate(), 500e6);
        for _ in 0..CHUNK_SEGMENTS - 1 {
            c.on_segment(Duration::ZERO, &loss(100));
        }
        assert_eq!(c.rate(), 500e6, "no decision before the chunk ends");
        c.on_segment(Duration::ZERO, &loss(100));
        assert_eq!(c.rate(), 450e6, "1 % loss: down 50 Mbit/s");
        chunk(&mut c, 10);
        assert_eq!(c.rate(), 500e6, "0.1 %: up (no history says otherwise)");
    }

    #[test]
    fn learns_that_an_increase_hurts_and_stays() {
        let mut c = History::new(GIGABIT, Odds::default(), 7);
        // From 500 Mbit/s an increase always brings loss: after a few tries it mostly holds.
        let mut raised = 0;
        for _ in 0..40 {
            if c.rate() > 500e6 {
                chunk(&mut c, 200);
            } else {
                let before = c.rate();
                chunk(&mut c, 0);
                raised += usize::from(c.rate() > before);
            }
        }
        assert!(c.odds().hurt(10) > 0.9, "{:?}", c.odds());
        assert!(raised < 8, "raised {raised} times out of ~20 chances");
    }

    #[test]
    fn finds_the_rate_a_path_takes() {
        let mut path = UdpPath::new(600e6, 0.064, 0.0);
        let mut c = History::new(GIGABIT, Odds::default(), 3);
        let run = path.run(&mut c, 60.0);
        let got = run.goodput_after(20.0);
        assert!(got > 0.45e9 && got <= 0.6e9, "{got:.3e}");
    }
}
