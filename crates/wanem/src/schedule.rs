//! Schedules: how the path changes during a run. A text file of lines `TIME key=value…`, e.g.
//!
//! ```text
//! # time  settings (any of rate, rtt, delay, loss, queue, cross)
//! 0s      rate=500mbit rtt=40ms
//! 10s     rate=50mbit  rtt=200ms
//! repeat 20s
//! ```
//!
//! Each line changes the named settings at its time, in both directions; `repeat PERIOD` starts
//! the list again every PERIOD.

use crate::link::LinkParams;
use crate::units::{parse_cross, parse_duration, parse_loss, parse_rate, QueueLimit};
use std::time::Duration;

/// A change of some settings.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Change {
    /// New bottleneck rate, bit/s.
    pub rate_bps: Option<u64>,
    /// One-way delay (from `rtt=` halved, or `delay=`).
    pub delay: Option<Duration>,
    /// New loss probability.
    pub loss: Option<f64>,
    /// New queue limit.
    pub queue: Option<QueueLimit>,
    /// New rate of cross traffic, bit/s (0: none).
    pub cross_bps: Option<u64>,
}

impl Change {
    /// Parses `key=value` words: `rate`, `rtt` (sets the one-way delay to half), `delay`, `loss`,
    /// `queue`, `cross` (a rate or 0).
    pub fn parse<'a>(words: impl IntoIterator<Item = &'a str>) -> Result<Change, String> {
        let mut c = Change::default();
        for w in words {
            let (k, v) = w
                .split_once('=')
                .ok_or_else(|| format!("expected key=value, got {w:?}"))?;
            match k {
                "rate" => c.rate_bps = Some(parse_rate(v)?),
                "rtt" => c.delay = Some(parse_duration(v)? / 2),
                "delay" => c.delay = Some(parse_duration(v)?),
                "loss" => c.loss = Some(parse_loss(v)?),
                "queue" => c.queue = Some(QueueLimit::parse(v)?),
                "cross" => c.cross_bps = Some(parse_cross(v)?),
                _ => {
                    return Err(format!(
                        "unknown setting {k:?} (rate, rtt, delay, loss, queue, cross)"
                    ))
                }
            }
        }
        Ok(c)
    }

    /// The settings after this change.
    pub fn apply(&self, p: LinkParams) -> LinkParams {
        LinkParams {
            rate_bps: self.rate_bps.unwrap_or(p.rate_bps),
            delay: self.delay.unwrap_or(p.delay),
            loss: self.loss.unwrap_or(p.loss),
            queue: self.queue.unwrap_or(p.queue),
            cross_bps: self.cross_bps.unwrap_or(p.cross_bps),
        }
    }
}

/// A parsed schedule.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Schedule {
    /// Changes in time order.
    pub steps: Vec<(Duration, Change)>,
    /// Period after which the steps start again.
    pub repeat: Option<Duration>,
}

impl Schedule {
    /// Reads and parses a schedule file; errors name the file (and the line).
    pub fn load(path: &std::path::Path) -> Result<Schedule, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read schedule {}: {e}", path.display()))?;
        Schedule::parse(&text).map_err(|e| format!("{}: {e}", path.display()))
    }

    /// Parses schedule text; errors name the line.
    pub fn parse(text: &str) -> Result<Schedule, String> {
        let mut s = Schedule::default();
        for (i, raw) in text.lines().enumerate() {
            let line = raw.split('#').next().unwrap_or("").trim();
            if line.is_empty() {
                continue;
            }
            let err = |m: String| format!("schedule line {}: {m}", i + 1);
            let mut words = line.split_whitespace();
            let first = words.next().unwrap_or("");
            if first == "repeat" {
                let p = parse_duration(words.next().unwrap_or("")).map_err(err)?;
                if p.is_zero() {
                    return Err(err("repeat period must be positive".into()));
                }
                s.repeat = Some(p);
                continue;
            }
            let at = parse_duration(first).map_err(err)?;
            if s.steps.last().is_some_and(|(t, _)| *t > at) {
                return Err(err("times must not go backwards".into()));
            }
            let c = Change::parse(words).map_err(err)?;
            s.steps.push((at, c));
        }
        if let (Some(p), Some((last, _))) = (s.repeat, s.steps.last()) {
            if *last >= p {
                return Err(format!(
                    "repeat period {p:?} must exceed the last step's time {last:?}"
                ));
            }
        }
        Ok(s)
    }

    /// The changes due in `(from, to]`, in order (`from = None` includes time zero).
    pub fn due(&self, from: Option<Duration>, to: Duration) -> Vec<Change> {
        let mut out = Vec::new();
        let Some(period) = self.repeat else {
            for (t, c) in &self.steps {
                if from.is_none_or(|f| *t > f) && *t <= to {
                    out.push(*c);
                }
            }
            return out;
        };
        let first_cycle = from.map_or(0, |f| (f.as_nanos() / period.as_nanos()) as u32);
        let last_cycle = (to.as_nanos() / period.as_nanos()) as u32;
        for cycle in first_cycle..=last_cycle {
            for (t, c) in &self.steps {
                let at = period * cycle + *t;
                if from.is_none_or(|f| at > f) && at <= to {
                    out.push(*c);
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn parses_and_repeats() {
        let s = Schedule::parse(
            "# path\n0s rate=500mbit rtt=40ms\n10s rate=50mbit rtt=200ms loss=1% cross=0\nrepeat 20s\n",
        )
        .unwrap();
        assert_eq!(s.steps.len(), 2);
        assert_eq!(s.steps[0].1.delay, Some(Duration::from_millis(20)));
        assert_eq!(s.steps[1].1.loss, Some(0.01));
        assert_eq!(
            (s.steps[0].1.cross_bps, s.steps[1].1.cross_bps),
            (None, Some(0))
        );
        assert_eq!(s.due(None, Duration::ZERO).len(), 1);
        assert_eq!(
            s.due(Some(Duration::from_secs(9)), Duration::from_secs(10))
                .len(),
            1
        );
        let late = s.due(Some(Duration::from_secs(29)), Duration::from_secs(30));
        assert_eq!(late, vec![s.steps[1].1]);
        assert!(s
            .due(Some(Duration::from_secs(10)), Duration::from_millis(19_999))
            .is_empty());
    }

    #[test]
    fn errors_name_the_line() {
        assert!(Schedule::parse("0s rate=fast")
            .unwrap_err()
            .starts_with("schedule line 1"));
        assert!(Schedule::parse("5s rate=1mbit\n1s rate=2mbit")
            .unwrap_err()
            .contains("backwards"));
        assert!(Schedule::parse("0s speed=1")
            .unwrap_err()
            .contains("unknown setting"));
        assert!(Schedule::parse("0s rate=1mbit\n30s rate=2mbit\nrepeat 20s").is_err());
    }

    proptest! {
        #[test]
        fn every_step_fires_exactly_once(times in proptest::collection::vec(0u64..1000, 1..8), cuts in proptest::collection::vec(1u64..500, 1..20)) {
            let mut times = times;
            times.sort();
            let text: String = times.iter().map(|t| format!("{t}ms rate=1mbit\n")).collect();
            let s = Schedule::parse(&text).unwrap();
            let mut from = None;
            let mut to = 0u64;
            let mut fired = 0;
            for c in cuts {
                to += c;
                fired += s.due(from, Duration::from_millis(to)).len();
                from = Some(Duration::from_millis(to));
            }
            let expect = times.iter().filter(|t| **t <= to).count();
            prop_assert_eq!(fired, expect);
        }
    }
}
