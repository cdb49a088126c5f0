//! The seed's state-based controller (fobs.txt §3.2): three states for excellent, moderate and
//! poor conditions, each with its own range of rates, steps and exits; feedback once per
//! segment. The seed names the states but not their numbers; these are ours, as shares of the
//! line rate `M`:
//!
//! | state  | rates       | loss < 0.5 %         | 0.5–5 %                  | ≥ 5 %             |
//! |--------|-------------|----------------------|--------------------------|-------------------|
//! | Green  | 0.3–1.0 M   | +5 % M               | → Yellow, −5 % M         | → Red, halve      |
//! | Yellow | 0.1–0.9 M   | +2 % M; 2nd → Green  | −5 % M                   | → Red, halve      |
//! | Red    | 0.01–0.5 M  | → Yellow, +2 % M     | → Yellow, +2 % M         | halve             |

use super::{bounded, seed_start, RateControl, RateLimits, SegmentLoss};
use std::time::Duration;

/// Low loss: below it a segment went well.
const LOW: f64 = 0.005;
/// Massive loss: at or above it the state is Red.
const HIGH: f64 = 0.05;

/// The three states.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Light {
    /// Excellent conditions.
    Green,
    /// Moderate.
    Yellow,
    /// Poor.
    Red,
}

impl Light {
    /// The state's range of rates, as shares of the line rate.
    fn range(self) -> (f64, f64) {
        match self {
            Light::Green => (0.3, 1.0),
            Light::Yellow => (0.1, 0.9),
            Light::Red => (0.01, 0.5),
        }
    }
}

/// The state controller's state.
#[derive(Debug, Clone)]
pub struct States {
    limits: RateLimits,
    rate: f64,
    light: Light,
    good_in_yellow: u32,
}

impl States {
    /// A controller starting in Yellow at `limits.start` (a remembered rate), or half the line
    /// rate if none is given.
    pub fn new(limits: RateLimits) -> States {
        States {
            limits,
            rate: bounded(seed_start(&limits), &limits),
            light: Light::Yellow,
            good_in_yellow: 0,
        }
    }

    /// The current state.
    pub fn light(&self) -> Light {
        self.light
    }

    fn decide(&mut self, loss: f64) {
        let m = self.limits.max;
        let (light, rate) = match (self.light, loss) {
            (_, l) if l >= HIGH => (Light::Red, self.rate / 2.0),
            (Light::Green, l) if l < LOW => (Light::Green, self.rate + 0.05 * m),
            (Light::Green, _) => (Light::Yellow, self.rate - 0.05 * m),
            (Light::Yellow, l) if l < LOW && self.good_in_yellow >= 1 => {
                (Light::Green, self.rate + 0.02 * m)
            }
            (Light::Yellow, l) if l < LOW => (Light::Yellow, self.rate + 0.02 * m),
            (Light::Yellow, _) => (Light::Yellow, self.rate - 0.05 * m),
            (Light::Red, _) => (Light::Yellow, self.rate + 0.02 * m),
        };
        self.good_in_yellow = match (light, loss < LOW) {
            (Light::Yellow, true) => self.good_in_yellow + 1,
            _ => 0,
        };
        let (lo, hi) = light.range();
        self.light = light;
        self.rate = bounded(rate.clamp(lo * m, hi * m), &self.limits);
    }
}

impl RateControl for States {
    fn on_segment(&mut self, _now: Duration, seg: &SegmentLoss) {
        self.decide(seg.fraction());
    }

    fn rate(&self) -> f64 {
        self.rate
    }

    fn state(&self) -> &'static str {
        match self.light {
            Light::Green => "green",
            Light::Yellow => "yellow",
            Light::Red => "red",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rate::testing::UdpPath;

    const GIGABIT: RateLimits = RateLimits {
        start: 0.0,
        max: 1e9,
    };

    fn segment(c: &mut States, lost: u64) {
        c.on_segment(
            Duration::ZERO,
            &SegmentLoss {
                segment: 0,
                packets: 10_000,
                lost,
            },
        );
    }

    #[test]
    fn walks_the_states_as_the_table_says() {
        let mut c = States::new(GIGABIT);
        assert_eq!((c.light(), c.rate()), (Light::Yellow, 500e6));
        segment(&mut c, 0);
        assert_eq!((c.light(), c.rate()), (Light::Yellow, 520e6));
        segment(&mut c, 0);
        assert_eq!((c.light(), c.rate()), (Light::Green, 540e6));
        segment(&mut c, 10);
        assert_eq!((c.light(), c.rate()), (Light::Green, 590e6));
        segment(&mut c, 100);
        assert_eq!((c.light(), c.rate()), (Light::Yellow, 540e6));
        segment(&mut c, 2000);
        assert_eq!((c.light(), c.rate()), (Light::Red, 270e6));
        segment(&mut c, 2000);
        assert_eq!((c.light(), c.rate()), (Light::Red, 135e6));
        segment(&mut c, 0);
        assert_eq!((c.light(), c.rate()), (Light::Yellow, 155e6));
    }

    #[test]
    fn oscillates_above_the_rate_a_path_takes() {
        // The seed saw this instability: without memory it keeps trying just above the optimum.
        let mut path = UdpPath::new(600e6, 0.064, 0.0);
        let mut c = States::new(GIGABIT);
        let run = path.run(&mut c, 60.0);
        let got = run.goodput_after(20.0);
        assert!(got > 0.3e9 && got <= 0.6e9, "{got:.3e}");
        assert!(run.overflow_share_after(5.0) > 0.005, "{run:?}");
    }
}
