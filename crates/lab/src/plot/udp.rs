//! A UDP transfer's `--stats` events drawn as the FOBS seed looked at them: the rate controller's
//! decisions over time beside what reached the receiver, the queueing delay the receiver saw,
//! and the packet-loss signatures (segments across, each packet's place in its segment up, a
//! dot for every packet lost on its first send).

use super::{panel, register_font, render, Picture, Series};
use anyhow::{bail, Context};
use fatpipe_tune::telemetry::{Event, RateEvent, SegmentEvent};
use plotters::coord::Shift;
use plotters::prelude::*;
use std::path::Path;

/// The UDP events of a stats file: rate decisions and segment signatures.
pub struct UdpEvents {
    rates: Vec<RateEvent>,
    segments: Vec<SegmentEvent>,
}

impl UdpEvents {
    /// Reads them from `path`; `None` when it holds no UDP transfer.
    pub fn load(path: &Path) -> anyhow::Result<Option<UdpEvents>> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read {}", path.display()))?;
        let mut out = UdpEvents {
            rates: Vec::new(),
            segments: Vec::new(),
        };
        for (i, line) in text
            .lines()
            .enumerate()
            .filter(|(_, l)| !l.trim().is_empty())
        {
            match Event::parse(line)
                .with_context(|| format!("{}:{}: not a stats record", path.display(), i + 1))?
            {
                Some(Event::Rate(r)) => out.rates.push(r),
                Some(Event::Segment(s)) => out.segments.push(s),
                _ => {}
            }
        }
        Ok((!out.rates.is_empty() || !out.segments.is_empty()).then_some(out))
    }

    /// Draws them to `out` (SVG or PNG by its extension), `size` pixels.
    pub fn draw(&self, out: &Path, size: (u32, u32)) -> anyhow::Result<()> {
        if self.rates.is_empty() {
            bail!("the stats file has no rate decisions of a UDP sender to draw");
        }
        register_font()?;
        render(out, size, self)
    }
}

impl Picture for UdpEvents {
    fn draw<DB: DrawingBackend>(&self, root: DrawingArea<DB, Shift>) -> anyhow::Result<()>
    where
        DB::ErrorType: 'static,
    {
        root.fill(&WHITE)?;
        let t_end = self.rates.iter().map(|r| r.t).fold(0.0, f64::max).max(0.1) * 1.02;
        let points = |f: &dyn Fn(&RateEvent) -> f64| -> Vec<(f64, f64)> {
            self.rates.iter().map(|r| (r.t, f(r))).collect()
        };
        let control = self.rates.first().map_or("", |r| r.control.as_str());
        let rate = [
            Series {
                name: format!("sending rate ({control})"),
                points: points(&|r| r.rate_mbit),
            },
            Series {
                name: "reached the receiver".into(),
                points: points(&|r| r.delivered_mbit),
            },
        ];
        let queue = [Series {
            name: "queueing delay at the receiver".into(),
            points: points(&|r| r.queue_ms),
        }];
        let panels = root.split_evenly((3, 1));
        let x = ("seconds since the transfer started", t_end);
        panel(&panels[0], "UDP rate decisions", "Mbit/s", &rate, x)?;
        panel(&panels[1], "Queueing delay", "ms", &queue, x)?;
        self.signatures(&panels[2])?;
        root.present()?;
        Ok(())
    }
}

impl UdpEvents {
    /// The packet-loss signatures: one column per segment, a dot per packet lost on its first
    /// send at its place in the segment.
    fn signatures<DB: DrawingBackend>(
        &self,
        area: &DrawingArea<DB, Shift>,
    ) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
        let last = self.segments.iter().map(|s| s.segment).max().unwrap_or(0) as f64 + 1.0;
        let height = self.segments.iter().map(|s| s.packets).max().unwrap_or(1) as f64;
        let lost: u64 = self.segments.iter().map(|s| s.lost.len() as u64).sum();
        let sent: u64 = self.segments.iter().map(|s| s.packets).sum();
        let title = format!(
            "Packet-loss signatures: {lost} of {sent} packets lost on their first send ({:.2} %)",
            100.0 * lost as f64 / sent.max(1) as f64
        );
        let mut chart = ChartBuilder::on(area)
            .caption(title, ("sans-serif", 18))
            .margin(8)
            .x_label_area_size(30)
            .y_label_area_size(60)
            .build_cartesian_2d(0.0..last, 0.0..height)?;
        chart
            .configure_mesh()
            .x_desc("segment (10,000 packets each)")
            .y_desc("packet in segment")
            .draw()?;
        let dots = self.segments.iter().flat_map(|s| {
            s.lost
                .iter()
                .map(move |&i| Circle::new((s.segment as f64 + 0.5, f64::from(i)), 1, RED.filled()))
        });
        chart.draw_series(dots)?;
        Ok(())
    }
}
