//! A `fatpipe lab` results file drawn. When every tool's label names a stream count (`-p N`),
//! one panel per RTT with throughput against streams, a line per tool (the seeds'
//! parallel-stream figures); otherwise one panel of throughput against RTT, a line per tool,
//! with the link's goodput ceiling.

use super::{panel, register_font, render, Picture, Series};
use crate::report::CaseResult;
use anyhow::{bail, Context};
use plotters::coord::Shift;
use plotters::prelude::*;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Draws the results files `results` together to `out`, `size` pixels.
pub fn draw_files(results: &[PathBuf], out: &Path, size: (u32, u32)) -> anyhow::Result<()> {
    register_font()?;
    let mut all: Vec<CaseResult> = Vec::new();
    for path in results {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read {}", path.display()))?;
        let more: Vec<CaseResult> = serde_json::from_str(&text)
            .with_context(|| format!("{} is not a lab results file", path.display()))?;
        all.extend(more);
    }
    let (panels, x_desc) = panels(&all);
    if panels.is_empty() {
        bail!("no successful runs to draw");
    }
    render(out, size, &Chart { panels, x_desc })
}

/// A label's tool without its `-p N`, and N.
fn split_streams(label: &str) -> Option<(String, f64)> {
    let (tool, rest) = label.split_once(" -p ")?;
    let (n, tail) = rest.split_once(' ').unwrap_or((rest, ""));
    let n: f64 = n.parse().ok()?;
    Some((format!("{tool} {tail}").trim().to_string(), n))
}

/// The points of each line of a panel, by line name.
type Lines = BTreeMap<String, Vec<(f64, f64)>>;

/// Where a result goes: its panel (an order and a title), its line, and its x.
type Placement = dyn Fn(&CaseResult) -> Option<((i64, String), String, f64)>;

/// The panels: title and lines.
fn panels(results: &[CaseResult]) -> (Vec<(String, Vec<Series>)>, &'static str) {
    let median = |r: &CaseResult| r.throughput().map(|t| t.0);
    let lines = |key: &Placement| {
        let mut by_panel: BTreeMap<(i64, String), Lines> = BTreeMap::new();
        for r in results {
            if let (Some((panel, line, x)), Some(y)) = (key(r), median(r)) {
                by_panel
                    .entry(panel)
                    .or_default()
                    .entry(line)
                    .or_default()
                    .push((x, y));
            }
        }
        by_panel
            .into_iter()
            .map(|((_, title), ls)| {
                let series = ls
                    .into_iter()
                    .map(|(name, mut points)| {
                        points.sort_by(|a, b| a.0.total_cmp(&b.0));
                        Series { name, points }
                    })
                    .collect();
                (title, series)
            })
            .collect::<Vec<_>>()
    };
    if results.iter().all(|r| split_streams(&r.label).is_some()) {
        let p = lines(&|r| {
            let (tool, n) = split_streams(&r.label)?;
            let title = format!("RTT {} ms", crate::report::format_ms(r.rtt_ms));
            Some((((r.rtt_ms * 1e3) as i64, title), tool, n))
        });
        (p, "parallel streams")
    } else {
        let mut p = lines(&|r| Some(((0, "Throughput by RTT".into()), r.label.clone(), r.rtt_ms)));
        if let (Some((_, series)), Some(first)) = (p.first_mut(), results.first()) {
            // Across the whole panel.
            let xs: Vec<f64> = results.iter().map(|r| r.rtt_ms).collect();
            series.push(Series {
                name: "link goodput (rate x 1448/1500)".into(),
                points: vec![
                    (0.0, first.ceiling_mbit),
                    (x_range(&xs), first.ceiling_mbit),
                ],
            });
        }
        (p, "RTT (ms)")
    }
}

/// The panels to draw and what their x axis is.
struct Chart {
    panels: Vec<(String, Vec<Series>)>,
    x_desc: &'static str,
}

impl Picture for Chart {
    fn draw<DB: DrawingBackend>(&self, root: DrawingArea<DB, Shift>) -> anyhow::Result<()>
    where
        DB::ErrorType: 'static,
    {
        draw(root, &self.panels, self.x_desc)
    }
}

fn draw<DB: DrawingBackend>(
    root: DrawingArea<DB, Shift>,
    panels: &[(String, Vec<Series>)],
    x_desc: &str,
) -> anyhow::Result<()>
where
    DB::ErrorType: 'static,
{
    root.fill(&WHITE).map_err(|e| anyhow::anyhow!("{e}"))?;
    let xs: Vec<f64> = panels
        .iter()
        .flat_map(|(_, s)| s.iter().flat_map(|s| s.points.iter().map(|p| p.0)))
        .collect();
    let x_max = x_range(&xs);
    for (area, (title, series)) in root.split_evenly((panels.len(), 1)).iter().zip(panels) {
        panel(area, title, "Mbit/s", series, (x_desc, x_max))
            .map_err(|e| anyhow::anyhow!("{e}"))?;
    }
    root.present().map_err(|e| anyhow::anyhow!("{e}"))?;
    Ok(())
}

/// The x axis's end: a little past the last point; where every point has one x (a lab run
/// at one RTT), twice it, so that the points stand mid-panel, clear of the legend.
fn x_range(xs: &[f64]) -> f64 {
    let hi = xs.iter().copied().fold(1.0, f64::max);
    let lo = xs.iter().copied().fold(f64::INFINITY, f64::min);
    match hi - lo < 1e-9 {
        true => hi * 2.0,
        false => hi * 1.05,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_rtt_stands_mid_panel() {
        assert_eq!(x_range(&[100.0, 100.0]), 200.0);
        assert_eq!(x_range(&[10.0, 100.0]), 105.0);
    }

    #[test]
    fn stream_counts_are_read_from_labels() {
        assert_eq!(
            split_streams("fatpipe cp --tuning drs -p 4"),
            Some(("fatpipe cp --tuning drs".into(), 4.0))
        );
        assert_eq!(
            split_streams("globus-url-copy -fast -p 4 x"),
            Some(("globus-url-copy -fast x".into(), 4.0))
        );
        assert_eq!(split_streams("fatpipe cp --tuning drs -p auto"), None);
        assert_eq!(split_streams("iperf3"), None);
    }
}
