//! Time-windowed extremes and a byte-count history: the estimators the laws share.

use std::collections::VecDeque;
use std::time::Duration;

/// The maximum (or minimum) of values seen within the last `span`.
#[derive(Debug, Clone)]
pub struct Extreme {
    span: Duration,
    max: bool,
    points: VecDeque<(Duration, f64)>,
}

impl Extreme {
    /// Keeps the largest value of the last `span`.
    pub fn max(span: Duration) -> Extreme {
        Extreme {
            span,
            max: true,
            points: VecDeque::new(),
        }
    }

    /// Keeps the smallest value of the last `span`.
    pub fn min(span: Duration) -> Extreme {
        Extreme {
            span,
            max: false,
            points: VecDeque::new(),
        }
    }

    /// Adds a value seen at `now`; returns the current extreme.
    pub fn push(&mut self, now: Duration, v: f64) -> f64 {
        let beaten = |old: f64| if self.max { old <= v } else { old >= v };
        while self.points.back().is_some_and(|&(_, old)| beaten(old)) {
            self.points.pop_back();
        }
        self.points.push_back((now, v));
        while self
            .points
            .front()
            .is_some_and(|&(t, _)| now.saturating_sub(t) > self.span)
        {
            self.points.pop_front();
        }
        self.get().unwrap_or(v)
    }

    /// The current extreme, if any value was seen.
    pub fn get(&self) -> Option<f64> {
        self.points.front().map(|&(_, v)| v)
    }
}

/// Cumulative byte counts over time, to ask how many bytes moved during the last `d`.
#[derive(Debug, Clone, Default)]
pub struct History {
    points: VecDeque<(Duration, u64)>,
}

/// How much history is kept.
const KEEP: Duration = Duration::from_secs(5);

impl History {
    /// Records the cumulative count at `now`.
    pub fn push(&mut self, now: Duration, bytes: u64) {
        self.points.push_back((now, bytes));
        while self.points.len() > 2
            && self
                .points
                .get(1)
                .is_some_and(|&(t, _)| now.saturating_sub(t) > KEEP)
        {
            self.points.pop_front();
        }
    }

    /// Bytes moved from the newest point at or before `now - d` until now, and the time that
    /// actually covers; `None` until two points exist.
    pub fn since(&self, d: Duration) -> Option<(u64, Duration)> {
        let &(now, last) = self.points.back()?;
        let from = now.saturating_sub(d);
        let &(t, b) = self
            .points
            .iter()
            .rev()
            .find(|&&(t, _)| t <= from)
            .or_else(|| self.points.front())?;
        (t < now).then(|| (last.saturating_sub(b), now - t))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn extremes_forget_old_values() {
        let mut hi = Extreme::max(ms(100));
        assert_eq!(hi.push(ms(0), 5.0), 5.0);
        assert_eq!(hi.push(ms(50), 3.0), 5.0);
        assert_eq!(hi.push(ms(120), 1.0), 3.0);
        assert_eq!(hi.push(ms(200), 2.0), 2.0);
        let mut lo = Extreme::min(ms(100));
        lo.push(ms(0), 5.0);
        assert_eq!(lo.push(ms(10), 7.0), 5.0);
        assert_eq!(lo.push(ms(150), 9.0), 9.0);
    }

    #[test]
    fn history_answers_bytes_over_a_span() {
        let mut h = History::default();
        assert_eq!(h.since(ms(10)), None);
        for i in 0..=10 {
            h.push(ms(i * 10), i * 1000);
        }
        assert_eq!(h.since(ms(30)), Some((3000, ms(30))));
        assert_eq!(h.since(ms(35)), Some((4000, ms(40))));
        assert_eq!(h.since(ms(1000)), Some((10000, ms(100))));
    }
}
