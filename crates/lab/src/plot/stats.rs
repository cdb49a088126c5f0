//! A `--stats` file drawn as the seeds' Figures 5–7 do: throughput (over half-second spans),
//! socket buffers and the advertised window against the BDP estimate, and RTT over time, one
//! line per end (summed over its data connections when a MODE E transfer has several), and the
//! `-p auto` stream count when the file holds its decisions. SVG or PNG by the output's
//! extension.

use super::{panel, register_font, render, Picture, Series};
use anyhow::{bail, Context};
use fatpipe_tune::telemetry::{Event, KernelPace, Record as Rec, StreamsEvent};
use fatpipe_tune::{Pace, Role};
use plotters::coord::Shift;
use plotters::prelude::*;
use std::collections::BTreeMap;
use std::path::Path;

/// Records further apart than this belong to different copies (a file several runs shared).
const COPY_GAP: f64 = 1.0;

/// Which copy of a shared stats file was drawn, of how many, and when each began.
pub struct Drawn {
    /// The copy drawn, from 1.
    pub copy: usize,
    /// When each copy's first record was taken (Unix seconds).
    pub starts: Vec<f64>,
}

/// Draws the stats file `stats` (only records of `tuning`, if given; `true_bdp` as
/// TIME:BYTES steps beside the estimate) to `out`, `size` pixels. A file that several copies
/// wrote holds their records one after another: `copy` picks one (from 1; the last if not
/// given), drawn from its own start.
pub fn draw_file(
    stats: &Path,
    out: &Path,
    tuning: Option<&str>,
    copy: Option<usize>,
    true_bdp: &[(f64, f64)],
    size: (u32, u32),
) -> anyhow::Result<Drawn> {
    register_font()?;
    let (recs, events) = load(stats, tuning)?;
    let copies = copies(recs);
    let starts: Vec<f64> = copies
        .iter()
        .filter_map(|c| c.first())
        .map(|r| r.unix_s)
        .collect();
    let n = copy.unwrap_or(copies.len());
    let Some(recs) = n.checked_sub(1).and_then(|i| copies.get(i)) else {
        let count = copies.len();
        bail!(
            "{} holds {count} copies: pick one from 1 to {count}",
            stats.display()
        );
    };
    let (from, to) = (recs[0].unix_s, recs[recs.len() - 1].unix_s);
    let events: Vec<StreamsEvent> = events
        .into_iter()
        .filter(|e| e.unix_s >= from - COPY_GAP && e.unix_s <= to + COPY_GAP)
        .collect();
    let fig = figure(recs, &events, true_bdp);
    render(out, size, &fig)?;
    Ok(Drawn { copy: n, starts })
}

/// The records split into copies: in time order, a pause of more than [`COPY_GAP`] with no
/// record from either end begins the next.
fn copies(mut recs: Vec<Rec>) -> Vec<Vec<Rec>> {
    recs.sort_by(|a, b| a.unix_s.total_cmp(&b.unix_s));
    let mut out: Vec<Vec<Rec>> = Vec::new();
    for r in recs {
        match out.last_mut() {
            Some(c) if c.last().is_some_and(|l| r.unix_s - l.unix_s <= COPY_GAP) => c.push(r),
            _ => out.push(vec![r]),
        }
    }
    out
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

/// Reads a `TIME:BYTES` point of the true BDP.
pub fn parse_point(s: &str) -> Result<(f64, f64), String> {
    let (t, b) = s.split_once(':').ok_or("expected TIME:BYTES")?;
    let t: f64 = t
        .trim()
        .parse()
        .map_err(|e| format!("bad time {t:?}: {e}"))?;
    let b = fatpipe_tune::size::parse_size(b)?;
    Ok((t, b as f64))
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
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Conn {
    /// This end's and the peer's port.
    Ports(u16, u16),
    /// When it began, in 10 ms.
    Began(i64),
}

/// A connection whose last record is older than this has ended.
const ENDED: f64 = 2.0;

/// One end's records merged over its data connections: each merged record carries the sums,
/// over the connections still alive, of their latest bytes, buffers, windows, BDP estimates and
/// pacing rates, beside the sum of their congestion windows per RTT (bytes/s).
fn merged(rs: &[&Rec]) -> Vec<(Rec, f64)> {
    let mut latest: BTreeMap<Conn, Rec> = BTreeMap::new();
    // The rate each connection was last paced at (records carry a pacing only when it changes).
    let mut paced: BTreeMap<Conn, u64> = BTreeMap::new();
    let mut out = Vec::new();
    for r in rs {
        // A connection is named by its ports, or in older files by when it began (which
        // merges connections opened together).
        let key = match (r.port, r.peer_port) {
            (0, 0) => Conn::Began(((r.unix_s - r.t) * 100.0).round() as i64),
            (p, q) => Conn::Ports(p, q),
        };
        match r.pace {
            Some(Pace::Rate(b)) => {
                paced.insert(key, b);
            }
            Some(Pace::Tcp) => {
                paced.remove(&key);
            }
            None => {}
        }
        latest.insert(key, (*r).clone());
        latest.retain(|_, x| r.unix_s - x.unix_s < ENDED);
        paced.retain(|k, _| latest.contains_key(k));
        let sum = |f: fn(&Rec) -> u64| latest.values().map(f).sum::<u64>();
        let mut m = (*r).clone();
        m.bytes = sum(|x| x.bytes);
        m.rcvbuf = sum(|x| x.rcvbuf);
        m.sndbuf = sum(|x| x.sndbuf);
        m.bdp = r.bdp.map(|_| sum(|x| x.bdp.unwrap_or(0)));
        if let Some(t) = m.tcp.as_mut() {
            t.rcv_wnd = sum(|x| x.tcp.map_or(0, |t| t.rcv_wnd.into())) as u32;
        }
        m.pace = (!paced.is_empty()).then(|| Pace::Rate(paced.values().sum()));
        let views: Vec<&KernelPace> = latest
            .values()
            .filter_map(|x| x.kernel_pace.as_ref())
            .collect();
        m.kernel_pace = (!views.is_empty()).then(|| KernelPace {
            state: r
                .kernel_pace
                .as_ref()
                .map(|k| k.state.clone())
                .unwrap_or_default(),
            eab: views.iter().map(|k| k.eab).sum(),
            ceiling: views.iter().map(|k| k.ceiling).sum(),
        });
        let cwp = latest
            .values()
            .filter_map(|x| x.tcp)
            .filter(|t| t.rtt_us > 0)
            .map(|t| t.cwnd_bytes as f64 / (f64::from(t.rtt_us) * 1e-6))
            .sum();
        out.push((m, cwp));
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
        let all: Vec<&Rec> = merged.iter().map(|(r, _)| r).collect();
        let rs = &all;
        fig.throughput.push(Series {
            name: name.clone(),
            points: smoothed_rates(rs, t0),
        });
        let receiver = rs.first().is_some_and(|r| r.role == Role::Receiver);
        // A sender paced at rates (CWP, EABP): its pacing rate beside its windows per RTT (an
        // EABP period shows as the pacing rate held at eab while cwnd/RTT grows on).
        let mbit = |b: f64| b * 8e-6;
        let pacing: Vec<(f64, f64)> = merged
            .iter()
            .filter_map(|(r, _)| match r.pace {
                Some(Pace::Rate(b)) => Some((r.unix_s - t0, mbit(b as f64))),
                _ => None,
            })
            .collect();
        // fatpipe_bic paces in the kernel: its ceiling and eab, as its telemetry showed them.
        let kernel = |f: fn(&KernelPace) -> u64| -> Vec<(f64, f64)> {
            merged
                .iter()
                .filter_map(|(r, _)| r.kernel_pace.as_ref().map(|k| (r.unix_s - t0, f(k))))
                .filter(|&(_, v)| v > 0)
                .map(|(t, v)| (t, mbit(v as f64)))
                .collect()
        };
        let (ceiling, eab) = (kernel(|k| k.ceiling), kernel(|k| k.eab));
        let paced = !pacing.is_empty() || !ceiling.is_empty();
        if !receiver && paced {
            for (what, points) in [
                ("pacing rate", pacing),
                ("pacing ceiling (fatpipe_bic)", ceiling),
                ("eab (fatpipe_bic)", eab),
            ] {
                if !points.is_empty() {
                    fig.throughput.push(Series {
                        name: format!("{what}, {name}"),
                        points,
                    });
                }
            }
            fig.throughput.push(Series {
                name: format!("cwnd/RTT, {name}"),
                points: merged
                    .iter()
                    .filter(|(_, c)| *c > 0.0)
                    .map(|(r, c)| (r.unix_s - t0, mbit(*c)))
                    .collect(),
            });
        }
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
            cc: None,
            note: None,
            capped: Vec::new(),
            kernel_pace: None,
        }
    }

    #[test]
    fn a_shared_file_splits_into_its_copies_at_pauses() {
        // Two copies a minute apart, their records written out of order by two processes.
        let recs = vec![
            rec(100.0, 0.0, Some((1, 2)), 10),
            rec(160.0, 0.0, Some((3, 4)), 10),
            rec(100.5, 0.5, Some((1, 2)), 20),
            rec(161.0, 1.0, Some((3, 4)), 20),
            rec(101.0, 1.0, Some((1, 2)), 30),
        ];
        let copies = copies(recs);
        let times: Vec<Vec<f64>> = copies
            .iter()
            .map(|c| c.iter().map(|r| r.unix_s).collect())
            .collect();
        assert_eq!(times, [vec![100.0, 100.5, 101.0], vec![160.0, 161.0]]);
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
        let m: Vec<Rec> = merged(&refs).into_iter().map(|(r, _)| r).collect();
        assert_eq!(
            m.iter().map(|r| r.bytes).collect::<Vec<_>>(),
            [100, 300, 500]
        );
        assert_eq!(m[2].rcvbuf, 2);
        // Older files without ports: connections that began together are one.
        let rs = [rec(10.0, 0.0, None, 100), rec(10.0, 0.0, None, 200)];
        let refs: Vec<&Rec> = rs.iter().collect();
        assert_eq!(merged(&refs)[1].0.bytes, 200);
    }

    #[test]
    fn pacing_rates_of_live_connections_add_up() {
        let mut a = rec(10.0, 0.0, Some((1, 2)), 0);
        a.pace = Some(Pace::Rate(100));
        let mut b = rec(10.1, 0.1, Some((1, 3)), 0);
        b.pace = Some(Pace::Rate(50));
        // No change written: the first connection is still paced at 100.
        let c = rec(10.2, 0.2, Some((1, 2)), 0);
        let m = merged(&[&a, &b, &c]);
        assert_eq!(m[2].0.pace, Some(Pace::Rate(150)));
        // Back to TCP's own pacing: no rate from that connection.
        let mut d = rec(10.3, 0.3, Some((1, 3)), 0);
        d.pace = Some(Pace::Tcp);
        assert_eq!(merged(&[&a, &b, &c, &d])[3].0.pace, Some(Pace::Rate(100)));
    }

    #[test]
    fn the_kernels_eab_of_live_connections_adds_up_and_a_connection_without_one_adds_nothing() {
        let view = |state: &str, eab| {
            Some(KernelPace {
                state: state.into(),
                eab,
                ceiling: eab,
            })
        };
        let mut a = rec(10.0, 0.0, Some((1, 2)), 0);
        a.kernel_pace = view("CWP_A", 100);
        let mut b = rec(10.1, 0.1, Some((1, 3)), 0);
        b.kernel_pace = view("EABP", 50);
        let c = rec(10.2, 0.2, Some((1, 4)), 0);
        let m = merged(&[&a, &b, &c]);
        assert_eq!(m[1].0.kernel_pace, view("EABP", 150));
        assert_eq!(m[2].0.kernel_pace.as_ref().map(|k| k.eab), Some(150));
    }
}
