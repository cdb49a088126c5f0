//! `fatpipe plot`: draws a `--stats` file as the seeds' Figures 5–7 do: throughput (over
//! half-second spans), socket buffers and the advertised window against the BDP estimate, and
//! RTT over time, one line per end (summed over its data connections when a MODE E transfer
//! has several), and the `-p auto` stream count when the file holds its decisions. SVG or PNG
//! by the output's extension.

use anyhow::{bail, Context};
use fatpipe_tune::telemetry::{Event, Record as Rec, StreamsEvent};
use fatpipe_tune::Role;
use plotters::coord::Shift;
use plotters::prelude::*;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// Options of `fatpipe plot`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// A stats file written by `cp --stats` or `serve --stats`.
    stats: PathBuf,
    /// The picture to write: .svg or .png.
    #[arg(short, long)]
    out: PathBuf,
    /// Draw only records of this tuning mode (a shared file may hold several transfers).
    #[arg(long)]
    tuning: Option<String>,
    /// The path's true BDP over time, as TIME:BYTES pairs (e.g. 0:12500000,10:625000), drawn
    /// beside the estimate.
    #[arg(long, value_delimiter = ',', value_parser = parse_point)]
    true_bdp: Vec<(f64, f64)>,
    /// Picture size in pixels, WIDTHxHEIGHT.
    #[arg(long, default_value = "1000x900", value_parser = parse_dims)]
    size: (u32, u32),
}

/// Throughput is averaged over this span: a sender's bytes advance in sendfile-sized steps.
const RATE_SPAN: f64 = 0.5;

/// Mbit/s of each record over the preceding `RATE_SPAN` (from its cumulative byte count).
fn smoothed_rates(rs: &[&Rec], t0: f64) -> Vec<(f64, f64)> {
    let mut out = Vec::new();
    let mut from = 0;
    for (i, r) in rs.iter().enumerate() {
        while rs[from].unix_s < r.unix_s - RATE_SPAN && from + 1 < i {
            from += 1;
        }
        let dt = r.unix_s - rs[from].unix_s;
        if dt >= RATE_SPAN / 2.0 {
            let bits = r.bytes.saturating_sub(rs[from].bytes) as f64 * 8.0;
            out.push((r.unix_s - t0, bits / dt / 1e6));
        }
    }
    out
}

fn parse_point(s: &str) -> Result<(f64, f64), String> {
    let (t, b) = s.split_once(':').ok_or("expected TIME:BYTES")?;
    let t: f64 = t
        .trim()
        .parse()
        .map_err(|e| format!("bad time {t:?}: {e}"))?;
    let b = fatpipe_tune::size::parse_size(b)?;
    Ok((t, b as f64))
}

pub(crate) fn parse_dims(s: &str) -> Result<(u32, u32), String> {
    let (w, h) = s.split_once('x').ok_or("expected WIDTHxHEIGHT")?;
    let w: u32 = w.parse().map_err(|e| format!("bad width: {e}"))?;
    let h: u32 = h.parse().map_err(|e| format!("bad height: {e}"))?;
    if !(200..=8000).contains(&w) || !(200..=8000).contains(&h) {
        return Err("each side must be 200 to 8000 pixels".into());
    }
    Ok((w, h))
}

/// One line of one panel.
pub(crate) struct Series {
    pub name: String,
    pub points: Vec<(f64, f64)>,
}

/// The panels' lines, time in seconds from the first record.
struct Figure {
    throughput: Vec<Series>,
    buffers: Vec<Series>,
    rtt: Vec<Series>,
    streams: Vec<Series>,
}

/// How the records name a role.
fn role_name(r: Role) -> &'static str {
    match r {
        Role::Sender => "sender",
        Role::Receiver => "receiver",
    }
}

/// What names one data connection among an end's records.
#[derive(PartialEq, Eq, PartialOrd, Ord)]
enum Conn {
    /// This end's and the peer's port.
    Ports(u16, u16),
    /// When it began, in 10 ms.
    Began(i64),
}

/// A connection whose last record is older than this has ended.
const ENDED: f64 = 2.0;

/// One end's records merged over its data connections: each merged record carries the sums,
/// over the connections still alive, of their latest bytes, buffers, windows and BDP estimates.
fn merged(rs: &[&Rec]) -> Vec<Rec> {
    let mut latest: BTreeMap<Conn, Rec> = BTreeMap::new();
    let mut out = Vec::new();
    for r in rs {
        // A connection is named by its ports, or in older files by when it began (which
        // merges connections opened together).
        let key = match (r.port, r.peer_port) {
            (0, 0) => Conn::Began(((r.unix_s - r.t) * 100.0).round() as i64),
            (p, q) => Conn::Ports(p, q),
        };
        latest.insert(key, (*r).clone());
        latest.retain(|_, x| r.unix_s - x.unix_s < ENDED);
        let sum = |f: fn(&Rec) -> u64| latest.values().map(f).sum::<u64>();
        let mut m = (*r).clone();
        m.bytes = sum(|x| x.bytes);
        m.rcvbuf = sum(|x| x.rcvbuf);
        m.sndbuf = sum(|x| x.sndbuf);
        m.bdp = r.bdp.map(|_| sum(|x| x.bdp.unwrap_or(0)));
        if let Some(t) = m.tcp.as_mut() {
            t.rcv_wnd = sum(|x| x.tcp.map_or(0, |t| t.rcv_wnd.into())) as u32;
        }
        out.push(m);
    }
    out
}

fn load(path: &Path, tuning: Option<&str>) -> anyhow::Result<(Vec<Rec>, Vec<StreamsEvent>)> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    let mut recs = Vec::new();
    let mut events = Vec::new();
    for (i, line) in text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
    {
        let event = Event::parse(line)
            .with_context(|| format!("{}:{}: not a stats record", path.display(), i + 1))?;
        match event {
            Some(Event::Sample(r)) if tuning.is_none_or(|t| t == r.tuning) => recs.push(*r),
            Some(Event::Streams(e)) => events.push(e),
            _ => {}
        }
    }
    if recs.is_empty() {
        bail!("{} has no records to draw", path.display());
    }
    Ok((recs, events))
}

fn figure(recs: &[Rec], events: &[StreamsEvent], true_bdp: &[(f64, f64)]) -> Figure {
    let t0 = recs.iter().map(|r| r.unix_s).fold(f64::INFINITY, f64::min);
    let mut by_end: BTreeMap<String, Vec<&Rec>> = BTreeMap::new();
    for r in recs {
        by_end
            .entry(format!("{} ({})", r.end, role_name(r.role)))
            .or_default()
            .push(r);
    }
    let mib = |b: u64| b as f64 / f64::from(1 << 20);
    let line = |name: String, rs: &[&Rec], f: &dyn Fn(&Rec) -> Option<f64>| Series {
        name,
        points: rs
            .iter()
            .filter_map(|r| f(r).map(|v| (r.unix_s - t0, v)))
            .collect(),
    };
    let mut fig = Figure {
        throughput: Vec::new(),
        buffers: Vec::new(),
        rtt: Vec::new(),
        streams: Vec::new(),
    };
    let mut by_end_events: BTreeMap<&str, Vec<(f64, f64)>> = BTreeMap::new();
    for e in events {
        by_end_events
            .entry(e.end.as_str())
            .or_insert_with(|| vec![(0.0, 1.0)])
            .push((e.unix_s - t0, f64::from(e.streams)));
    }
    for (end, points) in by_end_events {
        // Steps: the count holds until the next decision.
        let mut steps: Vec<(f64, f64)> = Vec::new();
        for w in points.windows(2) {
            steps.push(w[0]);
            steps.push((w[1].0, w[0].1));
        }
        steps.extend(points.last().copied());
        fig.streams.push(Series {
            name: format!("data connections, {end} (sender)"),
            points: steps,
        });
    }
    for (name, rs) in &by_end {
        let merged = merged(rs);
        let all: Vec<&Rec> = merged.iter().collect();
        let rs = &all;
        fig.throughput.push(Series {
            name: name.clone(),
            points: smoothed_rates(rs, t0),
        });
        let receiver = rs.first().is_some_and(|r| r.role == Role::Receiver);
        let (what, buf): (&str, &dyn Fn(&Rec) -> u64) = if receiver {
            ("receive buffer", &|r| r.rcvbuf)
        } else {
            ("send buffer", &|r| r.sndbuf)
        };
        fig.buffers
            .push(line(format!("{what}, {name}"), rs, &|r| Some(mib(buf(r)))));
        if receiver {
            fig.buffers
                .push(line(format!("advertised window, {name}"), rs, &|r| {
                    r.tcp.map(|t| mib(t.rcv_wnd.into())).filter(|&w| w > 0.0)
                }));
        }
        fig.buffers
            .push(line(format!("BDP estimate, {name}"), rs, &|r| {
                r.bdp.map(mib)
            }));
        let rtt: &dyn Fn(&Rec) -> Option<f64> = if receiver {
            &|r| {
                r.tcp
                    .map(|t| f64::from(t.rcv_rtt_us) / 1e3)
                    .filter(|&v| v > 0.0)
            }
        } else {
            &|r| {
                r.tcp
                    .map(|t| f64::from(t.rtt_us) / 1e3)
                    .filter(|&v| v > 0.0)
            }
        };
        fig.rtt.push(line(format!("RTT, {name}"), rs, rtt));
    }
    if !true_bdp.is_empty() {
        let end = recs.iter().map(|r| r.unix_s - t0).fold(0.0, f64::max);
        let mut points = Vec::new();
        for (i, &(t, b)) in true_bdp.iter().enumerate() {
            let until = true_bdp.get(i + 1).map_or(end, |p| p.0);
            points.push((t, b / f64::from(1 << 20)));
            points.push((until, b / f64::from(1 << 20)));
        }
        fig.buffers.push(Series {
            name: "true BDP".into(),
            points,
        });
    }
    fig
}

/// Where a TrueType font for the labels is looked for (`FATPIPE_FONT` first).
const FONTS: &[&str] = &[
    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/TTF/DejaVuSans.ttf",
];

/// Registers the labels' font (plotters draws text with a font it is given).
pub(crate) fn register_font() -> anyhow::Result<()> {
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

/// Runs the command.
pub fn run(a: Args) -> anyhow::Result<ExitCode> {
    register_font()?;
    let (recs, events) = load(&a.stats, a.tuning.as_deref())?;
    let fig = figure(&recs, &events, &a.true_bdp);
    render(&a.out, a.size, &fig)?;
    say!("fatpipe plot: wrote {}", a.out.display());
    Ok(ExitCode::SUCCESS)
}

/// Something drawable on any plotters backend.
pub(crate) trait Picture {
    /// Draws on `root`.
    fn draw<DB: DrawingBackend>(&self, root: DrawingArea<DB, Shift>) -> anyhow::Result<()>
    where
        DB::ErrorType: 'static;
}

/// Writes `picture` to `out`, SVG or PNG by its extension, `size` pixels.
pub(crate) fn render(out: &Path, size: (u32, u32), picture: &impl Picture) -> anyhow::Result<()> {
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

impl Picture for Figure {
    fn draw<DB: DrawingBackend>(&self, root: DrawingArea<DB, Shift>) -> anyhow::Result<()>
    where
        DB::ErrorType: 'static,
    {
        draw(root, self)
    }
}

fn draw<DB: DrawingBackend>(root: DrawingArea<DB, Shift>, fig: &Figure) -> anyhow::Result<()>
where
    DB::ErrorType: 'static,
{
    root.fill(&WHITE).map_err(|e| anyhow::anyhow!("{e}"))?;
    let rows = if fig.streams.is_empty() { 3 } else { 4 };
    let panels = root.split_evenly((rows, 1));
    let t_end = fig
        .throughput
        .iter()
        .chain(&fig.buffers)
        .flat_map(|s| s.points.iter().map(|p| p.0))
        .fold(0.1, f64::max);
    let parts = [
        ("Throughput", "Mbit/s", &fig.throughput),
        ("Socket buffers and BDP", "MiB", &fig.buffers),
        ("Round-trip time", "ms", &fig.rtt),
        ("Data connections (-p auto)", "streams", &fig.streams),
    ];
    for (area, (title, unit, series)) in panels.iter().zip(parts) {
        panel(area, title, unit, series, ("time (s)", t_end))
            .map_err(|e| anyhow::anyhow!("{e}"))?;
    }
    root.present().map_err(|e| anyhow::anyhow!("{e}"))?;
    Ok(())
}

/// One chart: `series` as lines against x from 0 to `x.1` (described by `x.0`).
pub(crate) fn panel<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    title: &str,
    unit: &str,
    series: &[Series],
    x: (&str, f64),
) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
    let (x_desc, t_end) = x;
    let y_max = series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.1))
        .fold(0.0, f64::max)
        * 1.1;
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

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(unix_s: f64, t: f64, ports: Option<(u16, u16)>, bytes: u64) -> Rec {
        let (port, peer_port) = ports.unwrap_or_default();
        Rec {
            unix_s,
            t,
            port,
            peer_port,
            end: "client".into(),
            role: Role::Receiver,
            tuning: "drs".into(),
            bytes,
            mbit_s: 0.0,
            bdp: None,
            rcvbuf: 1,
            sndbuf: 0,
            peer_buffer: None,
            probe_rtt_ms: None,
            tcp: None,
            set_rcvbuf: None,
            set_sndbuf: None,
            clamp: None,
            pace: None,
            note: None,
            capped: Vec::new(),
        }
    }

    #[test]
    fn connections_accepted_on_one_port_at_once_are_summed_apart() {
        // Two connections accepted on port 2000 in the same instant, from two peer ports.
        let rs = [
            rec(10.0, 0.0, Some((2000, 5001)), 100),
            rec(10.0, 0.0, Some((2000, 5002)), 200),
            rec(10.1, 0.1, Some((2000, 5001)), 300),
        ];
        let refs: Vec<&Rec> = rs.iter().collect();
        let m = merged(&refs);
        assert_eq!(
            m.iter().map(|r| r.bytes).collect::<Vec<_>>(),
            [100, 300, 500]
        );
        assert_eq!(m[2].rcvbuf, 2);
        // Older files without ports: connections that began together are one.
        let rs = [rec(10.0, 0.0, None, 100), rec(10.0, 0.0, None, 200)];
        let refs: Vec<&Rec> = rs.iter().collect();
        assert_eq!(merged(&refs)[1].bytes, 200);
    }
}
