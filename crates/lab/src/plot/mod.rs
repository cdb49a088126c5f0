//! Figures: what `fatpipe plot` draws from a stats file ([`stats`] for TCP connections, [`udp`]
//! for the UDP channel) and `fatpipe plot-lab` from a lab's results ([`results`]), with the
//! plotters plumbing they share.

pub mod results;
pub mod stats;
pub mod udp;

use anyhow::{bail, Context};
use plotters::coord::Shift;
use plotters::prelude::*;
use std::path::{Path, PathBuf};

/// Reads a picture size, `WIDTHxHEIGHT` pixels.
pub fn parse_dims(s: &str) -> Result<(u32, u32), String> {
    let (w, h) = s.split_once('x').ok_or("expected WIDTHxHEIGHT")?;
    let w: u32 = w.parse().map_err(|e| format!("bad width: {e}"))?;
    let h: u32 = h.parse().map_err(|e| format!("bad height: {e}"))?;
    if !(200..=8000).contains(&w) || !(200..=8000).contains(&h) {
        return Err("each side must be 200 to 8000 pixels".into());
    }
    Ok((w, h))
}

/// One line of one panel.
pub struct Series {
    /// The legend's name.
    pub name: String,
    /// (x, y) in drawing order.
    pub points: Vec<(f64, f64)>,
}

/// Where a TrueType font for the labels is looked for (`FATPIPE_FONT` first).
const FONTS: &[&str] = &[
    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/TTF/DejaVuSans.ttf",
];

/// Registers the labels' font (plotters draws text with a font it is given).
pub fn register_font() -> anyhow::Result<()> {
    let env = std::env::var_os("FATPIPE_FONT").map(PathBuf::from);
    let path = env
        .into_iter()
        .chain(FONTS.iter().map(PathBuf::from))
        .find(|p| p.is_file())
        .context(
            "no font for the labels: install fonts-dejavu-core or set FATPIPE_FONT to a .ttf file",
        )?;
    let bytes = std::fs::read(&path).with_context(|| format!("cannot read {}", path.display()))?;
    // plotters keeps fonts for the life of the process.
    let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
    plotters::style::register_font("sans-serif", FontStyle::Normal, bytes)
        .map_err(|_| anyhow::anyhow!("{} is not a usable font", path.display()))
}

/// Something drawable on any plotters backend.
pub trait Picture {
    /// Draws on `root`.
    fn draw<DB: DrawingBackend>(&self, root: DrawingArea<DB, Shift>) -> anyhow::Result<()>
    where
        DB::ErrorType: 'static;
}

/// Writes `picture` to `out`, SVG or PNG by its extension, `size` pixels.
pub fn render(out: &Path, size: (u32, u32), picture: &impl Picture) -> anyhow::Result<()> {
    let ext = out
        .extension()
        .and_then(|e| e.to_str())
        .map(str::to_ascii_lowercase);
    match ext.as_deref() {
        Some("svg") => picture.draw(SVGBackend::new(out, size).into_drawing_area()),
        Some("png") => picture.draw(BitMapBackend::new(out, size).into_drawing_area()),
        _ => bail!("the output must end in .svg or .png"),
    }
}

/// One chart: `series` as lines against x from 0 to `x.1` (described by `x.0`).
pub fn panel<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    title: &str,
    unit: &str,
    series: &[Series],
    x: (&str, f64),
) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
    let (x_desc, t_end) = x;
    // Headroom above the highest point for the legend (upper right), a line per series.
    let y_max = series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.1))
        .fold(0.0, f64::max)
        * (1.1 + 0.07 * series.len() as f64);
    let mut chart = ChartBuilder::on(area)
        .caption(title, ("sans-serif", 18))
        .margin(8)
        .x_label_area_size(30)
        .y_label_area_size(60)
        .build_cartesian_2d(0.0..t_end, 0.0..y_max.max(1e-3))?;
    chart.configure_mesh().x_desc(x_desc).y_desc(unit).draw()?;
    for (i, s) in series.iter().enumerate() {
        let color = Palette99::pick(i).to_rgba();
        chart
            .draw_series(
                LineSeries::new(s.points.iter().copied(), color.stroke_width(2))
                    .point_size(if s.points.len() < 12 { 3 } else { 0 }),
            )?
            .label(s.name.clone())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], color));
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .position(SeriesLabelPosition::UpperRight)
        .draw()
}
