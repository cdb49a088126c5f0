//! DRS fed by `TCP_INFO`, evaluated at each end: receivers every tenth of an RTT, senders
//! once per RTT. The memory is the point: both ends together stay within about 3 x BDP.
//!
//! Receiver: the bytes that arrived during the last RTT are what was in flight. During
//! start-up the window stays four times that ahead of slow start, but never past 1.1 x the
//! capacity the packet trains show: an unpaced sender's rounds arrive back to back at the
//! bottleneck's rate, timed over spans of a tenth of an RTT once a train is longer than two
//! spans (about a fifth of the BDP in flight); one of several connections takes its share.
//! The first RTT stretched by 8 % ends start-up.
//! Later a full window is tried a quarter larger only while there is room: trains faster
//! than the best rate of the last second and no standing queue (where trains cannot be timed,
//! an RTT at its base).
//! Such a growth is a trial: if the rate has not risen by 3 % three RTTs later, the window
//! goes back to its size before the trial (or 1.1 x the BDP the trial revealed, if larger)
//! and no new trial starts for two seconds. When the path is the limit the window settles at
//! 1.1 x BDP (highest rate of the last second x lowest RTT of the last ten), a tenth of a BDP
//! for jitter instead of the seeds' 2 x, and holds a reader's recurring lag up to 1.12 x: with
//! the kernel's overheads both ends then stay within 3 x BDP. It shrinks when the BDP has
//! fallen below half the window and the window has gone underused for a while. The clamp goes
//! down first and the buffer never below the window already advertised (Linux advertises
//! about 0.625 of the buffer it accounts), so data the peer may send is never refused.
//!
//! Sender: the send buffer holds what may be in flight (the smaller of the congestion window
//! and the peer's window; while the congestion window grows, twice it) with 8 % and 4 ms of
//! the path's rate to spare: the sending pump tops it up every few milliseconds instead of waiting for a
//! third of it to drain. When the buffer has limited sending, at least twice its size; never
//! more than the peer's window needs, never less than what is in flight, and never shrunk while
//! a loss is being repaired.
//!
//! On a path with random loss (holes every round, `holes.rs`) the receiver's rate is the mean
//! over 8 RTTs (filled holes release bursts) and its window holds the holes beside the BDP.

use super::holes::Holes;
use super::lag::Lag;
use super::trains::{outlasts_two_spans, train_span, TrainRates, Trains};
use super::window::History;
use super::{rate, Decision, Law, Setup};
use super::{Params, STOCK_BUFFER};
use crate::path::queue::{DROPPING_QUEUE, LONGER_ROUTE, QUEUE, STARTUP_QUEUE, UNQUEUED};
use crate::path::{lowest_rtt, stretch, PathEstimate};
use crate::sample::{Role, Sample, TcpStats};
use std::time::Duration;

/// Window in flight per unit of BDP once the path is the limit: enough to fill it through
/// jitter, and the least memory that does. With the kernel's overheads (a receive buffer of
/// 1.6 x the window, a send buffer of 1.12 x) both ends then hold 2.9 x the path's BDP.
const STEADY_GAIN: f64 = 1.1;
/// On a path that loses segments at random, the RTTs a hole holds the window's left edge
/// back (until the retransmission arrives): the window holds that much more than the BDP.
const HOLE_RTTS: f64 = 1.5;
/// With holes, in-order arrivals come in bursts: a filled hole releases up to a window at
/// once, and the bytes of one RTT read up to ten times the path's rate (a stream of eight at
/// 100 ms, 1 % loss, saw a 14.8 MB "BDP" on a 12.5 MB path and its window followed it). Its
/// rate is then the mean over this many RTTs, where one burst adds at most a fifth.
const HOLE_SPAN_RTTS: u32 = 8;
/// On a lossy path, a rate this many times the last one marked is still growing ...
const RAMP: f64 = 1.25;
/// ... when it got there within this many RTTs.
const RAMP_RTTS: u32 = 3;
/// Growth per RTT during start-up while the window is the limit (slow start's pace).
const GROWTH_GAIN: f64 = 4.0;
/// Growth per trial after start-up (the path may already be full).
const GENTLE_GAIN: f64 = 1.25;
/// The most a reader's lag adds to the window, per unit of BDP: what keeps both ends within
/// 3 x BDP on a clean path (a window of 1.12 x BDP costs 2.95 x of it at both ends together).
/// A longer stall gets no more: a lag grows with the window (a reader that stalls leaves
/// unread whatever the window lets in). At half a BDP, one reader put aside twice for 27 ms
/// on a busy 2-core host made a copy's buffers 3.5 x BDP (and its rate no better).
const MOST_LAG: f64 = 0.12;
/// "Most of the window" for the receiver's window-limited test.
const FULL: f64 = 0.9;
/// Trains this much faster than the rate come from an unpaced sender (a paced one's arrive at
/// its pacing rate, about twice its rate in slow start).
const UNPACED: f64 = 2.5;
/// A longer route's base RTT holds while the RTT stays above this share of it.
const ROUTE_KEPT: f64 = 0.9;
/// A rate below this share of the trains' capacity leaves room for a larger window.
const ROOM: f64 = 0.93;
/// `SO_RCVBUF` per byte of window: Linux doubles the value set and advertises a window of
/// about 0.625 of what it accounts (1,448 payload bytes in a 2,316-byte buffer per segment).
const RCVBUF_PER_WINDOW: f64 = 0.8;
/// The window clamp before connecting: a window scale of 2 KiB (windows up to 128 MiB, a
/// 10 Gbit/s x 100 ms path), fine enough that each delayed ACK (two segments, 2.9 KB) lets a
/// window the law lowered close. With the tuned profile's 256 MiB `tcp_rmem` the scale was
/// 8 KiB, and a lowered window stayed open for seconds.
const CONNECT_CLAMP: u64 = 64 << 20;
/// Send buffer per byte in flight: the kernel's overhead on queued data, and a little to spare.
const SEND_ROOM: f64 = 1.08;
/// Unsent data a send buffer holds beyond what is in flight: what the path takes in two of the
/// pump's 2 ms refills, and at least this much.
const UNSENT_TIME: Duration = Duration::from_millis(4);
/// The most unsent time a send buffer holds: a writer that comes late (a busy CPU) doubles it
/// each time the buffer runs dry under the peer's window in [`DRY_LOOKS`] of [`LOOKS`] looks.
const MAX_UNSENT_TIME: Duration = Duration::from_millis(16);
const DRY_LOOKS: u32 = 3;
const LOOKS: u32 = 30;
const LEAST_UNSENT: u64 = 64 << 10;
/// A shrink waits until the estimate has stayed low this long (and at least 4 RTTs).
const SHRINK_HOLD: Duration = Duration::from_secs(1);
/// RTTs after a growth by which the rate must have risen.
const TRIAL_RTTS: u32 = 3;
/// Rise in rate that makes a growth worth it.
const PAYS: f64 = 1.03;
/// Pause after a futile growth before the next trial.
const QUIET: Duration = Duration::from_secs(2);
/// The smallest receive window in segments: below a few of the peer's segments (64 KiB each on
/// loopback) Linux holds window updates back and the sender waits on its persist timer.
const LEAST_SEGMENTS: u64 = 8;

/// A growth on probation: when, from which size, at which rate.
#[derive(Debug, Clone, Copy)]
struct Trial {
    at: Duration,
    from: u64,
    rate: f64,
}

/// Bytes arrived at a receiver: the kernel's count where it gives one, else what was read.
fn arrived(s: &Sample, tcp: &TcpStats) -> u64 {
    match tcp.bytes_received {
        0 => s.bytes,
        n => n,
    }
}

/// What the trains show, for a decision's note (nothing where they cannot be timed).
fn trains_note(train: Option<TrainRates>) -> String {
    train.map_or(String::new(), |c| {
        format!(", trains at {:.0} Mbit/s", c.capacity * 8e-6)
    })
}

/// Whether holes widen the window, for a decision's note.
fn holes_note(lossy: bool) -> &'static str {
    if lossy {
        ", holes every round (random loss): window for the BDP and the holes"
    } else {
        ""
    }
}

/// The `SO_RCVBUF` value that lets Linux advertise a window of `window` bytes.
pub(crate) fn rcvbuf_for(window: u64) -> u64 {
    (window as f64 * RCVBUF_PER_WINDOW) as u64
}

/// The `drs` law for one end.
#[derive(Debug, Clone)]
pub struct Drs {
    role: Role,
    history: History,
    trains: Trains,
    holes: Holes,
    /// What the reader left unread lately.
    lag: Lag,
    /// On a lossy path: the rate that last grew by a quarter, and when.
    ramp: (f64, Duration),
    /// The window leads a growing rate on a lossy path.
    ramping: bool,
    path: PathEstimate,
    size: Option<u64>,
    low_since: Option<Duration>,
    /// A sender's `TCP_INFO` of about an RTT ago, and when it was read.
    last: Option<(Duration, TcpStats)>,
    trial: Option<Trial>,
    quiet_until: Duration,
    changed_at: Duration,
    /// The smallest window (or send buffer) the law sets.
    least: u64,
    previous: Option<u64>,
    starting: bool,
    /// The base RTT of a longer route, once the window showed one: the kernel's minimum RTT
    /// still remembers the old route's (for minutes). Kept until the RTT falls below it.
    route_floor: Option<Duration>,
    /// Trains have shown an unpaced sender: their rate is the bottleneck's.
    unpaced: bool,
    /// The sender said it paces: arrivals show its pacing rate, never the bottleneck's.
    paced_sender: bool,
    /// Connections of the transfer, this one among them: each takes its share of the capacity
    /// the trains show (every connection's trains cross the bottleneck at its full rate).
    streams: u32,
    /// A sender's unsent time: [`UNSENT_TIME`], doubled each time its writer came too late.
    unsent: Duration,
    /// A sender's looks under the peer's window since its unsent time last changed (or since
    /// [`LOOKS`] ago), and in how many of them its buffer had run dry.
    dry: (u32, u32),
    /// Seeded from a sibling connection: no shrinking (not even at the end of start-up) before
    /// this connection has once filled its window (slow start leaves a seeded window unused for
    /// a while).
    seeded: bool,
}

impl Drs {
    /// A law for `role`; `drs` has no parameters of its own.
    pub fn new(role: Role, _: &Params) -> Drs {
        Drs {
            role,
            history: History::default(),
            trains: Trains::default(),
            holes: Holes::default(),
            lag: Lag::default(),
            ramp: (0.0, Duration::ZERO),
            ramping: false,
            path: PathEstimate::default(),
            size: None,
            low_since: None,
            last: None,
            trial: None,
            quiet_until: Duration::ZERO,
            changed_at: Duration::ZERO,
            least: STOCK_BUFFER,
            previous: None,
            starting: true,
            route_floor: None,
            unpaced: false,
            paced_sender: false,
            streams: 1,
            unsent: UNSENT_TIME,
            dry: (0, 0),
            seeded: false,
        }
    }

    /// This connection's share of a capacity the trains show, bytes/s.
    fn share(&self, capacity: f64) -> f64 {
        capacity / f64::from(self.streams.max(1))
    }

    /// Grows at once to `target`; shrinks to it only after the estimate has stayed below half
    /// the current size for the hold time, and only while `may_shrink`.
    fn steer(
        &mut self,
        now: Duration,
        rtt: Duration,
        target: u64,
        may_shrink: bool,
    ) -> Option<u64> {
        let target = target.max(self.least);
        let current = self.size.unwrap_or(0);
        if target > current {
            self.low_since = None;
            self.size = Some(target);
            return Some(target);
        }
        if 2 * target >= current || !may_shrink {
            self.low_since = None;
            return None;
        }
        let since = *self.low_since.get_or_insert(now);
        if now.saturating_sub(since) < SHRINK_HOLD.max(4 * rtt) {
            return None;
        }
        self.low_since = None;
        self.size = Some(target);
        Some(target)
    }

    fn receiver(&mut self, s: &Sample, tcp: &TcpStats, base: Duration, d: &mut Decision) {
        self.least = STOCK_BUFFER.max(LEAST_SEGMENTS * u64::from(tcp.rcv_mss));
        let rtt = match tcp.rcv_rtt_us {
            0 => base,
            us => Duration::from_micros(us.into()).max(base),
        };
        let span = train_span(base);
        let train = span.and_then(|span| self.trains.observe(s.now, arrived(s, tcp), span));
        // On a lossy path in-order arrivals come in bursts as holes fill: no trains to time,
        // and the window holds the RTTs the holes stand beside the BDP.
        let queue = stretch(rtt, base) > DROPPING_QUEUE;
        let lossy = self.holes.observe(s.now, tcp.rcv_ooopack, rtt, queue);
        let train = train.filter(|_| !self.holes.suspected() && !self.paced_sender);
        let (gain, hold) = if lossy {
            (STEADY_GAIN + HOLE_RTTS, 1.0 + HOLE_RTTS)
        } else {
            (STEADY_GAIN, 1.0)
        };
        if let Some(span) = span {
            d.next = span;
        }
        let measured_over = if self.holes.suspected() {
            HOLE_SPAN_RTTS * rtt
        } else {
            rtt
        };
        let Some((bytes, dt)) = self.history.since(measured_over) else {
            return;
        };
        let now_rate = rate(bytes, dt);
        let peak = self.path.observe_rate(s.now, now_rate);
        let in_flight = now_rate * rtt.as_secs_f64();
        let window = self
            .size
            .map(|n| n as f64)
            .unwrap_or(f64::from(tcp.rcv_wnd.max(tcp.rcv_ssthresh)));
        // What arrived during the last RTT was sent under the window of one RTT ago.
        let in_effect =
            if s.now.saturating_sub(self.changed_at).as_secs_f64() < 1.5 * rtt.as_secs_f64() {
                self.previous.map_or(window, |p| p as f64)
            } else {
                window
            };
        let limited = hold * in_flight >= FULL * in_effect;
        if limited {
            self.seeded = false;
        }
        // Room for more: trains faster than the best rate of the last second (a longer RTT
        // slows the rate, not the trains; this connection's share of them where the transfer
        // has several) and no standing queue: bursts read as trains where the path is full (a
        // delay line or a reader put aside releasing what waited: 2.5 Gbit/s on a 1 Gbit/s
        // path, RTT 16 % over its base), and a window tried at once at 2.6 x BDP overflowed
        // the queue (2,653 segments retransmitted, 82 MiB of buffers). Where trains cannot be
        // timed, no queue at all.
        let stretched = stretch(rtt, base);
        let room = train.map_or(stretched <= UNQUEUED, |c| {
            peak < ROOM * self.share(c.capacity) && (stretched <= QUEUE || stretched > LONGER_ROUTE)
        });
        // Held by the window with room beyond it, no queue stretches the RTT: one well above
        // the base (more than the steady window's own queue) means a longer route, and the
        // base RTT of the old one no longer holds.
        let longer = stretch(rtt, base) > LONGER_ROUTE;
        let base = if !self.starting && self.trial.is_none() && limited && room && longer {
            self.route_floor = Some(rtt);
            rtt
        } else {
            base
        };
        let bdp = peak * base.as_secs_f64();
        d.bdp = Some(bdp as u64);
        // What the reader leaves unread the sender cannot use: the window holds it beside the
        // BDP where it outgrows the steady window's spare (up to a BDP more: a reader stalled
        // for good gets no more for it).
        let lag = match tcp.rcv_wnd {
            0 => 0.0,
            advertised => {
                let offered = u64::from(tcp.rcv_ssthresh).min(window as u64);
                let unread = self.lag.observe(s.now, offered, u64::from(advertised));
                (unread as f64).min(MOST_LAG * bdp)
            }
        };
        // The steady window of the capacity the trains show, once a train is longer than two
        // spans (a shorter one shows only its length per span, not the bottleneck's rate).
        // A sender that paces sends no trains: its packets arrive at its pacing rate, about
        // twice its delivery rate in slow start. Trains far faster than the rate are an
        // unpaced sender's, and only those show the capacity.
        if train.zip(span).is_some_and(|(c, span)| {
            outlasts_two_spans(c.capacity, span, in_flight) && c.capacity >= UNPACED * now_rate
        }) {
            self.unpaced = true;
        }
        let capacity = train
            .zip(span)
            .filter(|(c, span)| {
                self.unpaced && outlasts_two_spans(self.share(c.capacity), *span, in_flight)
            })
            .map(|(c, _)| gain * self.share(c.capacity) * base.as_secs_f64());
        if let Some(t) = self
            .trial
            .filter(|t| s.now.saturating_sub(t.at) >= TRIAL_RTTS * rtt)
        {
            self.trial = None;
            if now_rate < PAYS * t.rate {
                // Back to where the trial started, or to the steady window of the BDP it
                // revealed if larger.
                let current = self.size.unwrap_or(t.from);
                let back = t.from.max((gain * bdp) as u64).min(current);
                self.quiet_until = s.now + QUIET;
                self.low_since = None;
                self.size = Some(back);
                self.changed_at = s.now;
                let note = format!("growth did not raise the rate: back to {back} bytes");
                Self::set_window(d, back, tcp, note);
                return;
            }
        }
        // The first stretched RTT ends the start-up: the path is full, the window settles at
        // the steady multiple of the BDP.
        let startup_over = rtt.as_secs_f64() > STARTUP_QUEUE * base.as_secs_f64();
        if self.starting && startup_over && self.size.is_some() {
            self.starting = false;
            // The window grew no further than the trains' capacity; without trains, a quarter
            // of it showed no queue a step ago: the BDP is at least about that.
            let floor = capacity.map_or(STEADY_GAIN * window / GROWTH_GAIN, |c| c.min(window));
            let size = (gain * bdp).max(floor) as u64;
            // A seeded window not yet filled is no overshoot of this connection's: kept.
            let kept = if self.seeded { self.size } else { None };
            let size = size.max(kept.unwrap_or(0));
            let note = format!("start-up over: queue seen, settle at {gain} x BDP");
            self.settle(s.now, size, d, tcp, note);
            return;
        }
        // During start-up the window keeps a step ahead of slow start, up to the steady window
        // of the capacity the packet trains show. Later a full window without a queue is tried
        // a quarter larger once each change has shown its effect.
        let settled = s.now.saturating_sub(self.changed_at) >= 2 * rtt;
        let mut for_lag = false;
        let target = if self.size.is_none() {
            // The first sample takes the window over from the kernel's autotuning, a start-up
            // step ahead of it (the kernel's window grows only as data arrives, an RTT behind).
            if self.starting {
                GROWTH_GAIN * window
            } else {
                window
            }
        } else if lossy {
            // The sender's rate still grows (a quarter within three RTTs, as bbr judges its
            // start-up): the window stays a start-up step ahead of it, else it holds the BDP
            // and the holes.
            if now_rate >= RAMP * self.ramp.0 {
                self.ramp = (now_rate, s.now);
                self.ramping = true;
            }
            if s.now.saturating_sub(self.ramp.1) < RAMP_RTTS * rtt {
                (GROWTH_GAIN * in_flight).max(gain * bdp)
            } else if std::mem::take(&mut self.ramping) {
                // The ramp is over: what led it goes, the BDP and the holes stay.
                let note = format!("ramp over on a lossy path: settle at {gain} x BDP");
                self.settle(s.now, (gain * bdp) as u64, d, tcp, note);
                return;
            } else {
                gain * bdp
            }
        } else if self.starting {
            (GROWTH_GAIN * in_flight)
                .min(capacity.unwrap_or(f64::INFINITY))
                .max(gain * bdp)
        } else if limited && room && self.trial.is_none() && settled && s.now >= self.quiet_until {
            // Trains show what the path carries (the base RTT follows a longer route, above):
            // the window can go there at once after a step up in rate or RTT, a quarter at
            // least. Trains shorter than two spans show only a lower bound, but also that the
            // window is under a fifth of the BDP: fourfold is safe then.
            let path = train.zip(span).map_or(0.0, |(c, span)| {
                if outlasts_two_spans(self.share(c.capacity), span, in_flight) {
                    STEADY_GAIN * self.share(c.capacity) * base.as_secs_f64()
                } else {
                    GROWTH_GAIN * window
                }
            });
            (GENTLE_GAIN * window)
                .max(path.min(GROWTH_GAIN * window))
                .max(gain * bdp)
        } else if bdp + lag > gain * bdp {
            // More than the steady window's spare for jitter.
            for_lag = true;
            (bdp + lag).max((gain * bdp).min(window))
        } else {
            (gain * bdp).min(window)
        };
        let before = self.size;
        // A full window holds the rate back only with room beyond it; with a queue behind it
        // (the path slowed down) it may shrink.
        let held = limited && room;
        let Some(size) = self.steer(s.now, base, target as u64, !held && !self.seeded) else {
            // A buffer raised to hold a larger advertised window is released once it has closed.
            let hold = rcvbuf_for(self.size.unwrap_or(0).max(u64::from(tcp.rcv_wnd)));
            if s.rcvbuf > 2 * (hold + hold / 4) {
                d.set.rcvbuf = Some(hold);
                d.clamp = self.size;
            }
            return;
        };
        self.changed_at = s.now;
        self.previous = before;
        let note = if before.is_none() {
            format!("take the window over from the kernel at {size} bytes")
        } else if (size as f64) < window {
            format!("shrink: BDP fell to {} bytes", bdp as u64)
        } else if for_lag {
            format!(
                "hold the reader's lag: {} bytes left unread lately",
                lag as u64
            )
        } else if !self.starting {
            self.trial = Some(Trial {
                at: s.now,
                from: before.unwrap_or(window as u64),
                rate: now_rate,
            });
            format!(
                "try: window-limited, {} bytes in flight per RTT{}{}, base RTT {:.0} ms",
                in_flight as u64,
                trains_note(train),
                holes_note(lossy),
                base.as_secs_f64() * 1e3
            )
        } else {
            format!(
                "grow: {} bytes in flight per RTT{}{}",
                in_flight as u64,
                trains_note(train),
                holes_note(lossy)
            )
        };
        Self::set_window(d, size, tcp, note);
    }

    /// Ends a growth phase: the window goes to `size` (not below the least), up or down.
    fn settle(&mut self, now: Duration, size: u64, d: &mut Decision, tcp: &TcpStats, note: String) {
        let size = size.max(self.least);
        self.previous = self.size;
        self.size = Some(size);
        self.changed_at = now;
        self.low_since = None;
        Self::set_window(d, size, tcp, note);
    }

    /// Sets the window clamp and a buffer that holds it, never below the advertised window.
    fn set_window(d: &mut Decision, size: u64, tcp: &TcpStats, note: String) {
        d.set.rcvbuf = Some(rcvbuf_for(size.max(u64::from(tcp.rcv_wnd))));
        d.clamp = Some(size);
        d.announce = Some(size);
        d.note = Some(note);
    }

    fn sender(&mut self, s: &Sample, tcp: &TcpStats, base: Duration, d: &mut Decision) {
        // Growth is judged against the counters of about an RTT ago.
        let (last_at, last) = self.last.unwrap_or_default();
        if self.last.is_none() || s.now.saturating_sub(last_at) >= base {
            self.last = Some((s.now, *tcp));
        }
        let buffer_bound = tcp.sndbuf_held_since(last.sndbuf_limited_us) > 0;
        let cwnd_grows = tcp.cwnd_bytes * 10 > last.cwnd_bytes * 11;
        let growing = cwnd_grows || buffer_bound;
        // While the congestion window grows (slow start doubles it every RTT) the buffer must
        // already hold the next RTT's window; once it is steady, what may be in flight. Never
        // more than the peer's window lets fly.
        let cwnd = if growing {
            2 * tcp.cwnd_bytes
        } else {
            tcp.cwnd_bytes
        };
        let flight = match tcp.snd_wnd {
            0 => cwnd,
            w => cwnd.min(u64::from(w)),
        };
        if tcp.snd_wnd > 0 && flight >= u64::from(tcp.snd_wnd) && !cwnd_grows {
            // A buffer that holds the peer's whole window ran dry: the writer came late, not
            // the window. Once is chance; often, it keeps more unsent from now on.
            let (looks, dry) = &mut self.dry;
            *looks += 1;
            *dry += u32::from(buffer_bound);
            if *dry >= DRY_LOOKS {
                self.unsent = (self.unsent * 2).min(MAX_UNSENT_TIME);
                self.dry = (0, 0);
            } else if *looks >= LOOKS {
                self.dry = (0, 0);
            }
        }
        let mut target = sndbuf_for(flight, base, self.unsent);
        if buffer_bound {
            // At least twice the size that held it back (Linux accounts double what is set).
            target = target.max(s.sndbuf);
        }
        if tcp.snd_wnd > 0 {
            target = target.min(sndbuf_for(u64::from(tcp.snd_wnd), base, self.unsent));
        }
        // Never below what is in flight, and never while a loss is being repaired: Linux
        // refuses to split a queued segment (as a SACK or a retransmission needs) once its
        // queue is over twice the buffer, and the stream then stalls for good (one of eight at
        // 1 % loss moved 1 Mbit/s for 45 s, its buffer shrunk to 64 KiB under 20 MB queued
        // while recovery held its congestion window down). Unsent data is left out: the pump
        // fills whatever room there is.
        target = target.max(in_flight_floor(tcp));
        let repairing = tcp.ca_state != CA_OPEN;
        d.bdp = Some((tcp.delivery_rate as f64 * base.as_secs_f64()) as u64);
        // A growing congestion window doubles per RTT: looked at ten times as often then.
        if growing {
            d.next = train_span(base)
                .unwrap_or(d.next)
                .max(Duration::from_millis(10));
        }
        if let Some(size) = self.steer(s.now, base, target, !buffer_bound && !repairing) {
            d.set.sndbuf = Some(size);
            d.announce = Some(size);
            d.note = Some(format!(
                "send buffer for {flight} bytes in flight{}",
                if buffer_bound {
                    ", was buffer-limited"
                } else {
                    ""
                }
            ));
        }
    }
}

/// `tcpi_ca_state` of a connection with no loss or reordering being handled (Disorder, CWR,
/// Recovery and Loss follow).
const CA_OPEN: u8 = 0;
/// Memory the kernel accounts per byte in flight at most (segments split by SACKs carry
/// their own overhead: 1.3), with a margin: the kernel splits segments while its queue stays
/// within twice the buffer it accounts (`tcp_fragment`), so a buffer of 0.8 of the bytes in
/// flight holds 1.6 per byte. The floor used to be 1.3 of them: in a clean path's steady
/// state it, not the bytes in flight, set the send buffer (3 MB unsent behind 13 MB in flight
/// on a 12.5 MB path).
const IN_FLIGHT_PER_BYTE: f64 = 0.8;

/// The smallest `SO_SNDBUF` value that leaves the bytes in flight room to be split and sent
/// again (Linux doubles the value set).
fn in_flight_floor(tcp: &TcpStats) -> u64 {
    (tcp.unacked_bytes as f64 * IN_FLIGHT_PER_BYTE / 2.0) as u64
}

/// The `SO_SNDBUF` value that holds `flight` bytes in flight over an RTT of `base` with what
/// the path takes in `unsent` behind them (the sending pump tops the buffer up every few
/// milliseconds; Linux doubles the value set).
fn sndbuf_for(flight: u64, base: Duration, unsent: Duration) -> u64 {
    let unsent = (flight as f64 * unsent.as_secs_f64() / base.as_secs_f64().max(1e-3)) as u64;
    ((flight as f64 * SEND_ROOM) as u64 + unsent.max(LEAST_UNSENT)) / 2
}

impl Law for Drs {
    fn setup(&self) -> Setup {
        Setup {
            clamp_before_connect: Some(CONNECT_CLAMP),
            ..Setup::default()
        }
    }

    /// A receiver starts at its siblings' window and stays in start-up (a sibling seen early
    /// may still be far from its own limit); a sender's buffer follows its congestion window
    /// and needs no seed.
    fn seed(&mut self, bytes: u64) -> bool {
        if self.role != Role::Receiver {
            return false;
        }
        self.size = Some(bytes.max(STOCK_BUFFER));
        self.seeded = true;
        true
    }

    fn sender_paces(&mut self) {
        self.paced_sender = true;
        self.unpaced = false;
    }

    fn set_streams(&mut self, streams: u32) {
        self.streams = streams;
    }

    fn on_sample(&mut self, s: &Sample) -> Decision {
        let mut d = Decision {
            next: Duration::from_millis(10),
            ..Decision::default()
        };
        let Some(tcp) = s.tcp else {
            self.history.push(s.now, s.bytes);
            return d;
        };
        self.history.push(s.now, arrived(s, &tcp));
        let Some(base) = lowest_rtt(s).map(|r| self.path.observe_rtt(s.now, r)) else {
            return d;
        };
        let rcv_rtt = Duration::from_micros(tcp.rcv_rtt_us.into());
        let base = match self.route_floor {
            Some(floor) if rcv_rtt.is_zero() || rcv_rtt >= floor.mul_f64(ROUTE_KEPT) => {
                base.max(floor)
            }
            _ => {
                self.route_floor = None;
                base
            }
        };
        d.next = base.clamp(Duration::from_millis(10), Duration::from_millis(250));
        match self.role {
            Role::Receiver => self.receiver(s, &tcp, base, &mut d),
            Role::Sender => self.sender(s, &tcp, base, &mut d),
        }
        d
    }
}

#[cfg(test)]
mod tests;
