//! Summaries of repeated runs: median and spread, as JSON and as a markdown table.

use crate::runner::RunResult;
use serde::{Deserialize, Serialize};

/// All runs of one tool on one path, with their summary.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CaseResult {
    /// The tool's name in reports.
    pub label: String,
    /// Size of the transferred file, bytes.
    #[serde(default)]
    pub bytes: u64,
    /// Round-trip time of the path, ms.
    pub rtt_ms: f64,
    /// Bottleneck rate of the path, Mbit/s.
    pub rate_mbit: f64,
    /// TCP profile of both sides.
    pub profile: String,
    /// The link's goodput ceiling: rate × 1448/1500.
    pub ceiling_mbit: f64,
    /// Every successful run.
    pub runs: Vec<RunResult>,
    /// Runs that failed, with why.
    pub failures: Vec<String>,
}

fn median(mut v: Vec<f64>) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    Some(if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    })
}

impl CaseResult {
    /// Median, minimum and maximum throughput in Mbit/s.
    pub fn throughput(&self) -> Option<(f64, f64, f64)> {
        let v: Vec<f64> = self.runs.iter().map(|r| r.mbit_s).collect();
        let lo = v.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        median(v).map(|m| (m, lo, hi))
    }

    fn median_of(&self, f: impl Fn(&RunResult) -> f64) -> Option<f64> {
        median(self.runs.iter().map(f).collect())
    }
}

/// Milliseconds as people write them: `100`, `0.5`.
pub fn format_ms(ms: f64) -> String {
    if ms >= 10.0 || ms.fract() == 0.0 {
        format!("{ms:.0}")
    } else {
        format!("{ms:.1}")
    }
}

/// A markdown table: one row per tool and path.
pub fn markdown(results: &[CaseResult]) -> String {
    let mut out = String::from(
        "| path | profile | size | tool | runs | median Mbit/s | min–max | of ceiling | retrans (median) | peak rb recv + tb send MiB (median) | Mbit/s per MiB |\n|---|---|---|---|---|---|---|---|---|---|---|\n",
    );
    for r in results {
        let path = format!("{} ms, {:.0} Mbit/s", format_ms(r.rtt_ms), r.rate_mbit);
        let (tp, spread, pct) = match r.throughput() {
            Some((m, lo, hi)) => (
                format!("{m:.0}"),
                format!("{lo:.0}–{hi:.0}"),
                format!("{:.0} %", 100.0 * m / r.ceiling_mbit),
            ),
            None => ("failed".into(), "-".into(), "-".into()),
        };
        let retrans = r
            .median_of(|x| x.retrans as f64)
            .map_or("-".into(), |v| format!("{v:.0}"));
        let mem_mib = r.median_of(|x| (x.peak_rb_receiver + x.peak_tb_sender) as f64 / 1048576.0);
        let mem = mem_mib.map_or("-".into(), |v| format!("{v:.1}"));
        let per_mib = match (r.throughput(), mem_mib) {
            (Some((m, _, _)), Some(v)) if v > 0.0 => format!("{:.1}", m / v),
            _ => "-".into(),
        };
        let size = fatpipe_tune::size::format_size(r.bytes);
        let runs = if r.failures.is_empty() {
            r.runs.len().to_string()
        } else {
            format!("{} ({} failed)", r.runs.len(), r.failures.len())
        };
        out.push_str(&format!(
            "| {path} | {} | {size} | {} | {runs} | {tp} | {spread} | {pct} | {retrans} | {mem} | {per_mib} |\n",
            r.profile, r.label
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(mbit_s: f64, retrans: u64) -> RunResult {
        RunResult {
            mbit_s,
            data_seconds: 1.0,
            wall_seconds: 2.0,
            retrans,
            peak_rb_receiver: 1 << 20,
            peak_tb_sender: 1 << 20,
        }
    }

    #[test]
    fn medians_and_table() {
        let r = CaseResult {
            label: "x".into(),
            bytes: 256 << 20,
            rtt_ms: 100.0,
            rate_mbit: 1000.0,
            profile: "stock".into(),
            ceiling_mbit: 965.3,
            runs: vec![run(200.0, 5), run(100.0, 1), run(300.0, 9)],
            failures: vec![],
        };
        assert_eq!(r.throughput(), Some((200.0, 100.0, 300.0)));
        let t = markdown(&[r]);
        assert!(
            t.contains("| 100 ms, 1000 Mbit/s | stock | 256 MiB | x | 3 | 200 | 100–300 | 21 % | 5 | 2.0 | 100.0 |"),
            "{t}"
        );
        assert_eq!(median(vec![1.0, 2.0, 3.0, 4.0]), Some(2.5));
        assert_eq!(
            (format_ms(0.5), format_ms(25.0)),
            ("0.5".into(), "25".into())
        );
        assert_eq!(median(vec![]), None);
    }
}
