//! The progress line of `fatpipe cp`: one bar over the whole copy (files and bytes, the rate of
//! the bytes this run moved, ETA), the file at hand or its verification, and what the tuning is
//! doing (streams, buffers, RTT, retransmissions, pacing; the UDP channel's controller). It
//! also watches for Ctrl-C and SIGTERM, which cancel the running file (its partial record is
//! kept for `--resume`) and the files not yet begun; a second Ctrl-C ends the process at once.

use fatpipe_ftp::client::copy::{FileResult, Observer};
use fatpipe_net::live::Live;
use fatpipe_net::udp::UdpStatus;
use fatpipe_net::Pump;
use indicatif::{ProgressBar, ProgressStyle};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The rate over the last few seconds of a byte count that only grows.
#[derive(Debug, Default)]
pub struct RateMeter {
    samples: VecDeque<(Duration, u64)>,
}

/// How far back the rate looks.
const WINDOW: Duration = Duration::from_secs(3);

impl RateMeter {
    /// `bytes` moved so far at `now`; returns bits/s over the window, once it spans 0.5 s.
    pub fn feed(&mut self, now: Duration, bytes: u64) -> Option<f64> {
        self.samples.push_back((now, bytes));
        while self
            .samples
            .front()
            .is_some_and(|(t, _)| now.saturating_sub(*t) > WINDOW)
        {
            self.samples.pop_front();
        }
        let (t0, b0) = *self.samples.front()?;
        let span = now.saturating_sub(t0).as_secs_f64();
        (span >= 0.5).then(|| bytes.saturating_sub(b0) as f64 * 8.0 / span)
    }
}

/// `812 Mbit/s`, `1.21 Gbit/s`.
pub fn rate_text(bits_per_s: f64) -> String {
    let mbit = bits_per_s / 1e6;
    if mbit >= 1000.0 {
        format!("{:.2} Gbit/s", mbit / 1000.0)
    } else if mbit >= 10.0 {
        format!("{mbit:.0} Mbit/s")
    } else {
        format!("{mbit:.1} Mbit/s")
    }
}

/// What the bar counts, changed by the copy's events.
#[derive(Default)]
struct State {
    /// The running files (several when a copy runs sessions side by side): each one's pump,
    /// the bytes it already had, its name.
    current: Vec<(Arc<Pump>, u64, String)>,
    /// Files planned, and of those finished.
    files: usize,
    finished: usize,
    /// The finished files' bytes (resumed prefixes included): where the bar stands.
    finished_bytes: u64,
    /// Of those, moved by this run: what the rate counts.
    finished_moved: u64,
    /// The running file's bytes are in; its checksum is being compared.
    verifying: bool,
    meter: RateMeter,
}

/// The progress bar fed from the running pump (hidden with `-q` or when standard error is not a
/// terminal), and the signal watch.
pub struct Progress {
    /// The bar itself (cleared when the copy ends).
    pub bar: ProgressBar,
    /// Where the data connections' tuners leave their latest samples.
    pub live: Arc<Live>,
    /// The UDP channel's rate controller, as the sender last told it.
    pub udp: Option<Arc<Mutex<UdpStatus>>>,
    state: Mutex<State>,
    /// Set when the copy ends, however it ends.
    pub done: AtomicBool,
    signalled: Arc<AtomicBool>,
    /// Whether a signal interrupted the copy.
    pub interrupted: AtomicBool,
}

impl Progress {
    /// A bar (hidden when `quiet`) watching SIGINT and SIGTERM.
    pub fn new(quiet: bool, udp: Option<Arc<Mutex<UdpStatus>>>) -> anyhow::Result<Self> {
        let bar = if quiet {
            ProgressBar::hidden()
        } else {
            ProgressBar::new(0)
        };
        let style =
            ProgressStyle::with_template("{msg:32!} [{bar:24}] {bytes}/{total_bytes} {prefix}")
                .unwrap_or_else(|_| ProgressStyle::default_bar())
                .progress_chars("=> ");
        bar.set_style(style);
        let signalled = Arc::new(AtomicBool::new(false));
        for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
            let again = signalled.clone();
            // SAFETY: the handler only loads an atomic and calls write(2), both
            // async-signal-safe; it runs before the shutdown registered next.
            unsafe {
                signal_hook::low_level::register(sig, move || {
                    if again.load(Ordering::SeqCst) {
                        const HINT: &[u8] = b"\nfatpipe: interrupted again: stopping now; \
                            what arrived is kept: run the same command with --resume to continue\n";
                        let _ = libc::write(2, HINT.as_ptr().cast(), HINT.len());
                    }
                })?;
            }
            signal_hook::flag::register_conditional_shutdown(sig, 130, signalled.clone())?;
            signal_hook::flag::register(sig, signalled.clone())?;
        }
        Ok(Progress {
            bar,
            live: Arc::new(Live::default()),
            udp,
            state: Mutex::new(State::default()),
            done: AtomicBool::new(false),
            signalled,
            interrupted: AtomicBool::new(false),
        })
    }

    /// Redraws every 20 ms until the copy is done; cancels the running file on a signal.
    pub fn tick_until_done(&self) {
        let started = Instant::now();
        let mut shown_at = started;
        while !self.done.load(Ordering::SeqCst) {
            let stop = self.signalled.load(Ordering::SeqCst);
            if stop {
                self.interrupted.store(true, Ordering::SeqCst);
            }
            let now = Instant::now();
            if let Ok(mut s) = self.state.lock() {
                if stop {
                    s.current.iter().for_each(|(pump, ..)| pump.cancel());
                }
                // The line is rewritten four times a second: readable, and cheap.
                if now.duration_since(shown_at) >= Duration::from_millis(250) {
                    shown_at = now;
                    self.show(&mut s, now.duration_since(started), now);
                }
            }
            // Short, so that the command ends as soon as the copy does.
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Puts the state on the bar.
    fn show(&self, s: &mut State, since_start: Duration, now: Instant) {
        let already: u64 = s.current.iter().map(|(_, a, _)| a).sum();
        let moving: u64 = s.current.iter().map(|(p, ..)| p.bytes()).sum();
        let name = match s.current.as_slice() {
            [] => String::new(),
            [(_, _, one)] => one.clone(),
            [(_, _, first), rest @ ..] => format!("{first} (+{} more)", rest.len()),
        };
        let position = s.finished_bytes + already + moving;
        self.bar.set_position(position);
        let files = if s.files > 1 {
            format!("[{}/{}] ", (s.finished + 1).min(s.files), s.files)
        } else {
            String::new()
        };
        let doing = if s.verifying { "verifying " } else { "" };
        self.bar.set_message(format!("{files}{doing}{name}"));
        let rate = s.meter.feed(since_start, s.finished_moved + moving);
        let mut line = match rate {
            Some(r) if r > 0.0 => {
                let left = self.bar.length().unwrap_or(0).saturating_sub(position);
                let eta = Duration::from_secs((left as f64 * 8.0 / r).ceil() as u64);
                format!("{} ETA {}", rate_text(r), humantime::format_duration(eta))
            }
            _ => String::new(),
        };
        let tuning = match &self.udp {
            Some(udp) => udp.lock().map(|u| u.to_string()).unwrap_or_default(),
            None => self
                .live
                .summary(now)
                .map(|l| l.to_string())
                .unwrap_or_default(),
        };
        if !tuning.is_empty() && !s.verifying {
            line.push_str(&format!(" | {tuning}"));
        }
        self.bar.set_prefix(line);
    }
}

impl Observer for Progress {
    fn planned(&self, files: usize, bytes: u64) {
        self.bar.set_length(bytes);
        if let Ok(mut s) = self.state.lock() {
            s.files = files;
        }
    }

    fn file_started(&self, name: &str, total: Option<u64>, already: u64, pump: &Arc<Pump>) {
        if let Ok(mut s) = self.state.lock() {
            // A size the plan could not know (a file to standard output) counts once known.
            if s.files <= 1 && self.bar.length() == Some(0) {
                self.bar.set_length(total.unwrap_or(0));
            }
            s.verifying = false;
            s.current.push((pump.clone(), already, name.to_string()));
        }
    }

    fn verifying(&self, _name: &str) {
        if let Ok(mut s) = self.state.lock() {
            s.verifying = true;
        }
    }

    fn file_finished(&self, result: &FileResult) {
        if let Ok(mut s) = self.state.lock() {
            // A download's name is its source, an upload's its destination.
            s.current
                .retain(|(_, _, n)| *n != result.source && *n != result.destination);
            s.verifying = false;
            s.finished += 1;
            s.finished_bytes += result.bytes + result.resumed_from;
            s.finished_moved += result.bytes;
        }
        tracing::debug!(source = %result.source, bytes = result.bytes, error = result.error.as_deref().unwrap_or("none"), "file done");
    }

    fn stop_requested(&self) -> bool {
        self.signalled.load(Ordering::SeqCst)
    }
}

/// Sets its flag when dropped: however the copy ends (a panic included), the progress thread
/// learns it.
pub struct Finished<'a>(pub &'a AtomicBool);

impl Drop for Finished<'_> {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rate_counts_what_moved_lately_not_what_was_there() {
        let ms = Duration::from_millis;
        let mut m = RateMeter::default();
        // A resumed file: its 3 GiB already on disk never enter the meter.
        assert_eq!(m.feed(ms(0), 0), None);
        assert_eq!(m.feed(ms(250), 1_000_000), None);
        let r = m.feed(ms(1000), 12_500_000).unwrap();
        assert!((r - 100e6).abs() < 1.0, "{r}");
        // Only the last three seconds count: a stall shows within them.
        for t in (1250..=5000).step_by(250) {
            m.feed(ms(t), 12_500_000);
        }
        assert_eq!(m.feed(ms(5250), 12_500_000), Some(0.0));
    }

    #[test]
    fn rates_read_in_the_unit_that_fits() {
        assert_eq!(rate_text(812.4e6), "812 Mbit/s");
        assert_eq!(rate_text(1.214e9), "1.21 Gbit/s");
        assert_eq!(rate_text(3.25e6), "3.2 Mbit/s");
    }
}
