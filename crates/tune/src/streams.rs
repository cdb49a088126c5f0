//! How many parallel streams a transfer needs (`-p auto`), decided by the sending end from
//! what its sockets report. Streams held back by buffers (the peer's receive window or the
//! send buffer, both capped by the system) leave the path's queue empty: their RTT stays at
//! the path's minimum and nothing is lost. While that holds, open more. The first stream is
//! looked at every RTT and gets seven companions as soon as its window, not the path, holds it
//! for most of an RTT, also while that window is still growing: every step costs the new
//! streams a slow start (about 8 RTTs, 1.6 s at 200 ms), and on a path slower than they can
//! carry they only share it. Later steps double the count, once no stream is in slow start
//! any more (the queue they will build is not there yet while they ramp up), when buffers hold
//! all streams at their caps or streams crawl far below their windows. Once a queue
//! stands (RTT above the minimum in two looks running: one may be slow-start bursts; a queue
//! delays every sample, so the RTT less its deviation is what is judged, and a busy host's
//! late acknowledgements, which delay a few by much, are no queue), segments
//! are lost with a queue, or a step takes rate from the streams already there, the path is the
//! limit and the count stays. Losses while the RTT stays at its minimum are random (a lossy
//! link), not a full path: the growth goes on. A transfer may also start with several
//! streams (a cold start on a long path, see [`cold`]; a copy's later files start where the
//! previous file ended); they are judged as several from the first look, and their first step
//! goes to eight at least, as a lone stream's does. The host can hold the streams instead of
//! the path: sending threads busy most of the time, or on loopback or a LAN the receiver's
//! window; its backlog then stretches the RTT as a queue would, and does not count. The count
//! grows up to the cores, each step kept only while the streams together carry 10 % more.

pub mod cold;

use crate::path;
use crate::path::queue::SHORT_PATH_US;
use crate::sample::TcpStats;
use std::time::Duration;

/// The knobs of the policy.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StreamLimits {
    /// Most streams to open.
    pub max: u32,
    /// Bound on this end's buffer memory, bytes (`--max-memory`); `None` for no bound.
    pub max_memory: Option<u64>,
}

/// What the sender sees at one instant.
#[derive(Debug, Clone, Copy, Default)]
pub struct Observation<'a> {
    /// Time since the transfer began.
    pub now: Duration,
    /// `TCP_INFO` of every open stream, in the order they were opened.
    pub streams: &'a [TcpStats],
    /// This end's buffer memory over all streams, bytes as the kernel accounts them.
    pub memory: u64,
    /// CPU time the thread sending each stream has used so far, in the order of `streams`
    /// (`None`, or missing, where it cannot be read).
    pub cpu: &'a [Option<Duration>],
    /// Cores this process may run on (0: unknown); streams held by the CPU grow up to it.
    pub cores: u32,
    /// The control connection's lowest RTT, where it crossed the same path
    /// ([`crate::transfer::Input::ControlRtt`]): the path's own round trip, seen before a queue
    /// that the streams' own minimum may hold.
    pub control_rtt: Option<Duration>,
    /// The receive window a fatpipe peer last announced: its law sizes it to the path.
    pub peer_window: Option<u64>,
}

/// A change the policy asks for.
#[derive(Debug, Clone, PartialEq)]
pub struct StreamChange {
    /// Streams to open now.
    pub add: u32,
    /// Why (for telemetry and the summary).
    pub reason: String,
}

/// Share of busy time held by buffers above which the reason calls a stream buffer-limited.
const LIMITED: f64 = 0.5;
/// A stream whose peer window is this share of the window the peer announced has the window
/// the peer chose, not one its kernel capped below that.
const PEER_SIZED: f64 = 0.9;
/// A stream that gets this share of the peer's window acknowledged per RTT is held by it.
const FULL_WINDOW: f64 = 0.9;
/// After a step, the streams that were there before must keep this share of their rate: if
/// the new ones took more from them, the path is full.
const KEEPS: f64 = 0.85;
/// A transfer's first step goes to this many streams at least, later ones multiply the count by
/// [`GROWTH`]: each step costs the new streams a slow start (about 8 RTTs to reach a 4 MiB
/// window), so the first one, taken as soon as the first streams show that buffers hold them,
/// is a big one (a start with several, chosen before anything was measured, is a floor).
const FIRST_GROWTH: u32 = 8;
/// The first step on a path found lossy before it goes to this many at least: each window
/// also holds the data waiting behind its holes (a round trip to find one, another to fill it),
/// and where buffers are capped that takes more windows than a clean path's step gives (at
/// 100 ms, 1 % loss, 4 MiB caps, alternating runs: median 736 Mbit/s with eight, 782 with ten;
/// twelve moved no more with twice the retransmissions; docs/pacing.md).
const LOSSY_FIRST_GROWTH: u32 = 10;
/// Steps from several streams double: the streams already there show how far each gets.
const GROWTH: u32 = 2;
/// A stream held by buffers is at its cap when its rate is this share of the fastest stream's
/// (the others' windows are still growing).
const CAUGHT_UP: f64 = 0.6;
/// Streams not held by buffers that carry less than this share of what the fastest stream's
/// rate says their windows allow grow slowly far below their windows.
const SLOW: f64 = 0.4;
/// From this RTT on, a lone stream held by a peer window that still grows gets company at once
/// (a step's slow start costs 0.8 s or more); below it the policy waits for that window's cap.
const LONG_RTT: u32 = 100_000;
/// A stream whose sending thread was busy this share of the period is held by the CPU: a
/// core, not the path, sets its rate (a queue it shows is the host's own: on loopback at
/// 16 cores a lone stream's RTT stood 10 900 % above its minimum). Where the receiving threads
/// share the host, eight senders stood at 77 % while sixteen streams still moved 1.5 times as
/// much; a sender takes 70 % of a core only at tens of Gbit/s.
const CPU_BUSY: f64 = 0.7;
/// After a step taken for the CPU, the streams together must carry this much more than before
/// it, or the rate has stopped growing with them.
const CPU_GAIN: f64 = 1.1;
/// Evaluation period, in RTTs and at least so long: a lone stream is looked at every RTT,
/// several (whose new members are ramping up) every two.
const LONE_PERIOD: (u32, Duration) = (1, Duration::from_millis(150));
const PERIOD: (u32, Duration) = (2, Duration::from_millis(300));
/// ... and on a short path (minimum RTT under [`SHORT_PATH_US`]), lone or not.
const SHORT_PATH_PERIOD: (u32, Duration) = (2, Duration::from_millis(100));

/// One stream's counters at the start of a period.
#[derive(Debug, Clone, Copy)]
struct Counters {
    bytes: u64,
    rwnd_us: u64,
    sndbuf_us: u64,
    busy_us: u64,
    retrans: u64,
    cwnd: u64,
    /// The peer's window.
    wnd: u64,
    /// CPU time of the sending thread, µs.
    cpu_us: Option<u64>,
}

impl Counters {
    fn of(s: &TcpStats, cpu: Option<Duration>) -> Counters {
        Counters {
            cpu_us: cpu.map(|d| d.as_micros() as u64),
            bytes: s.bytes_acked,
            rwnd_us: s.rwnd_limited_us,
            sndbuf_us: s.sndbuf_limited_us,
            busy_us: s.busy_us,
            retrans: s.total_retrans.into(),
            cwnd: s.cwnd_bytes,
            wnd: s.snd_wnd.into(),
        }
    }
}

/// A step taken, judged at the next look.
#[derive(Debug, Clone, Copy)]
struct Step {
    /// Streams before it.
    from: usize,
    /// Their rate just before, Mbit/s.
    rate: f64,
    /// Taken because the host (a busy core, the receiver) held the streams: judged by the
    /// rate of all streams together.
    host: bool,
}

/// The stream-count policy of one transfer.
#[derive(Debug, Clone)]
pub struct StreamPolicy {
    limits: StreamLimits,
    /// When the current period began and each stream's counters then.
    mark: Option<(Duration, Vec<Counters>)>,
    /// The latest step.
    step: Option<Step>,
    /// The previous period showed a queue.
    queue_seen: bool,
    /// The RTT's stretch over its minimum that counts as a queue.
    queue_mark: f64,
    /// Losses beside a queue say it is full (not under a model-based control, which runs on
    /// random loss: there only a queue seen twice does).
    losses_say_full: bool,
    /// Random loss was found before the first step: it is taken at the next look.
    lossy_first_step: bool,
    /// Streams asked for so far (connections may still be on their way).
    opened: usize,
    /// A step has been taken.
    grown: bool,
    settled: bool,
    /// Every decision so far, for the summary.
    pub log: Vec<String>,
}

impl StreamPolicy {
    /// A policy that grows up to `limits`.
    pub fn new(limits: StreamLimits) -> StreamPolicy {
        StreamPolicy {
            limits,
            mark: None,
            step: None,
            queue_seen: false,
            queue_mark: path::QUEUE,
            losses_say_full: true,
            lossy_first_step: false,
            opened: 0,
            grown: false,
            settled: false,
            log: Vec::new(),
        }
    }

    /// The same policy for a transfer that opens `streams` at once (a copy's later file starts
    /// where the previous one ended): judged as several streams from the first look, once all
    /// of them are connected, and grown by doubling.
    pub fn starting_at(mut self, streams: u32) -> StreamPolicy {
        self.opened = streams as usize;
        self
    }

    /// The senders now run a model-based congestion control (bbr, chosen on random loss): its
    /// own probing keeps up to a quarter of the BDP queued, so only a longer queue says the
    /// path is full, and only once it stands (segments are lost anyway; several streams in
    /// bbr's start-up together queue more for a moment); a step that takes rate from the
    /// streams already there still does.
    /// Found before the first step, random loss also takes that step at the next look: each
    /// stream's window must then hold the holes beside its share of the BDP (2.6 x what a clean
    /// path needs), which a count chosen for a clean path cannot: it goes to ten at least.
    pub fn model_based(&mut self) {
        if self.losses_say_full {
            self.lossy_first_step = !self.grown && !self.settled;
        }
        self.queue_mark = path::queue::MODEL_QUEUE;
        self.losses_say_full = false;
    }

    /// Whether the policy has stopped growing.
    pub fn is_settled(&self) -> bool {
        self.settled
    }

    /// Takes an observation; answers how many streams to open, if any.
    pub fn observe(&mut self, o: &Observation<'_>) -> Option<StreamChange> {
        self.opened = self.opened.max(o.streams.len());
        // Judged only with every stream asked for connected.
        if self.settled || o.streams.is_empty() || o.streams.len() < self.opened {
            return None;
        }
        let cpu = |i: usize| o.cpu.get(i).copied().flatten();
        let now: Vec<Counters> = (0..o.streams.len())
            .map(|i| Counters::of(&o.streams[i], cpu(i)))
            .collect();
        let Some((at, before)) = self.mark.clone() else {
            self.mark = Some((o.now, now));
            return None;
        };
        let rtt = o.streams.iter().map(|s| s.rtt_us).max().unwrap_or(0);
        // On a short path (loopback, a LAN) streams start up within milliseconds: a look every
        // 100 ms lets a copy of seconds reach the cores' count. On a longer one a lone stream
        // has nobody to catch up with: it is looked at twice as often as several.
        let floor = path::min_rtt_us(o.streams);
        let short = floor.filter(|&r| r < SHORT_PATH_US);
        let (rtts, shortest) = if short.is_some() {
            SHORT_PATH_PERIOD
        } else if o.streams.len() == 1 {
            LONE_PERIOD
        } else {
            PERIOD
        };
        let period = (Duration::from_micros(rtt.into()) * rtts).max(shortest);
        if o.now < at + period {
            return None;
        }
        self.mark = Some((o.now, now.clone()));
        let secs = (o.now - at).as_secs_f64();
        // Only streams that were open for the whole period count (a new one is in slow start).
        let old = before.len().min(now.len());
        // What one stream's counter gained over the period, and all the old streams' together.
        let gained = |i: usize, f: fn(&Counters) -> u64| f(&now[i]).saturating_sub(f(&before[i]));
        let delta =
            |f: fn(&Counters) -> u64| -> f64 { (0..old).map(|i| gained(i, f) as f64).sum() };
        // One stream's rate over the period, and the first `n` streams' together (Mbit/s).
        let each = |i: usize| gained(i, |c| c.bytes) as f64 * 8.0 / secs / 1e6;
        let rate_of = |n: usize| -> f64 { (0..n.min(old)).map(each).sum() };
        let rate = rate_of(old);
        let busy = delta(|c| c.busy_us).max(1.0);
        // Time held by the peer's window: all of it when what was acknowledged per RTT fills
        // a window that stands (at its cap, not trailing slow start), whatever Linux's
        // rwnd-limited clock says (a paced stream, as -p auto's are, stops each burst on its
        // pacing timer, not on the window, and the clock misses it).
        let rwnd_us = |i: usize| {
            let wnd = before[i].wnd.min(now[i].wnd) as f64;
            let rtt = f64::from(o.streams[i].rtt_us) / 1e6;
            let per_rtt = gained(i, |c| c.bytes) as f64 * rtt / secs;
            let stands = !grew_by_half(before[i].wnd, now[i].wnd);
            if wnd > 0.0 && stands && per_rtt >= FULL_WINDOW * wnd {
                gained(i, |c| c.busy_us)
            } else {
                gained(i, |c| c.rwnd_us)
            }
        };
        // Time held by buffers: the peer's window and the send buffer.
        let held_us = |i: usize| {
            let sndbuf = o.streams[i].sndbuf_held_since(before[i].sndbuf_us);
            (rwnd_us(i) + sndbuf) as f64
        };
        let limited = ((0..old).map(held_us).sum::<f64>() / busy).min(1.0);
        let rwnd = ((0..old).map(rwnd_us).sum::<u64>() as f64 / busy).min(1.0);
        let lost = delta(|c| c.retrans);
        // The queue: the old streams' standing RTT over the smallest minimum any stream saw.
        let queue = path::queue_of(o.streams, &o.streams[..old]);
        let n = o.streams.len() as u32;
        match self.step.take() {
            // All streams judged together, once the new ones were open for a whole period.
            Some(step) if step.host && old < now.len() => {
                self.step = Some(step);
                return None;
            }
            Some(Step {
                from,
                rate: before_rate,
                host: true,
            }) if rate < before_rate * CPU_GAIN => {
                return self.settle(format!(
                    "{n} streams carry {rate:.0} Mbit/s where {from} carried \
                     {before_rate:.0}: the rate stopped growing with the streams, staying at {n}"
                ));
            }
            Some(Step {
                from,
                rate: before_rate,
                host: false,
            }) => {
                let kept = rate_of(from);
                if kept < before_rate * KEEPS {
                    return self.settle(format!(
                        "opening streams {}-{n} cut the first {from} from {before_rate:.0} to \
                         {kept:.0} Mbit/s: the path is full, staying at {n}",
                        from + 1
                    ));
                }
            }
            _ => {}
        }
        // Sending threads busy all the time: the CPU holds the streams, and whatever queue they
        // show is the host's. More streams, on more cores, until the rate stops growing.
        let busy_share = |i: usize| {
            let used = now[i].cpu_us?.checked_sub(before[i].cpu_us?)?;
            Some(used as f64 / 1e6 / secs)
        };
        let shares: Option<Vec<f64>> = (0..old).map(busy_share).collect();
        let cpu_share = shares
            .filter(|s| !s.is_empty())
            .map(|s| s.iter().sum::<f64>() / s.len() as f64);
        // On a short path streams held by the peer's window most of the time wait on the
        // receiving host, whose backlog is what stretches their RTT: more streams give it more
        // cores there too.
        if self.step.is_none() {
            if let Some(share) = cpu_share.filter(|&c| c >= CPU_BUSY) {
                let held = format!(
                    "{n} stream(s) at {rate:.0} Mbit/s keep their sending threads {:.0} % busy: \
                     a core, not the path, holds each",
                    share * 100.0
                );
                return self.host_step(o, n, rate, held, FIRST_GROWTH);
            }
            if let Some(floor) = short.filter(|_| rwnd >= LIMITED) {
                let held = format!(
                    "{n} stream(s) at {rate:.0} Mbit/s held by the peer's window {:.0} % of busy \
                     time on a {floor} µs path: the receiving host, not the path, holds them",
                    rwnd * 100.0
                );
                return self.host_step(o, n, rate, held, GROWTH);
            }
        }
        // A queue seen once may be the bursts of streams in slow start; seen in two periods
        // running, it stands. Losses with a queue are congestion: the path is full. Losses while
        // the RTT stays at its minimum are random (a lossy link), no sign of a full path.
        let queued = queue > self.queue_mark;
        let seen = std::mem::replace(&mut self.queue_seen, queued);
        if queued && ((lost > 0.0 && self.losses_say_full) || seen) {
            let threads = cpu_share.map_or(String::new(), |c| {
                format!(", sending threads {:.0} % busy", c * 100.0)
            });
            return self.settle(format!(
                "{n} stream(s) at {rate:.0} Mbit/s fill the path: RTT {:.0} % above its \
                 minimum, {lost:.0} segments retransmitted (peer's window held them {:.0} % of \
                 busy time{threads}); staying at {n}",
                (queue - 1.0) * 100.0,
                rwnd * 100.0
            ));
        }
        if queued {
            return None;
        }
        // A stream in slow start has not found its limit and will add to the queue: one opened
        // during the period, or one not held by buffers that has not had a whole congestion
        // window acknowledged (to grow it) or whose congestion window grew by half or more
        // (behind a full peer window it may grow; that is no slow start). Several
        // streams are judged once none is in slow start; those held by buffers or grown slowly
        // (cubic after an early slow-start exit, which streams starting together often cause)
        // leave the path room while there is no queue. A lone stream held by its window for
        // most of an RTT gets company at once, at a long RTT even while that window still grows:
        // the companions' slow start is the cost of every step, and there it is seconds.
        // One of several held by a peer window that grew by half is starting up too: the
        // receiver's window is catching up with slow start, not standing at its cap (cold
        // streams started together all look held then). A lone stream's window is judged below.
        let ramping = |i: usize| {
            let busy = gained(i, |c| c.busy_us).max(1) as f64;
            let held = held_us(i) / busy;
            let cwnd = before[i].cwnd;
            if held >= LIMITED {
                return grew_by_half(before[i].wnd, now[i].wnd);
            }
            gained(i, |c| c.bytes) < cwnd || grew_by_half(cwnd, now[i].cwnd)
        };
        // Several streams have room when buffers hold them all at about the same rate (at
        // their caps, not windows still growing), or when together they carry less than 40 %
        // of what the fastest one shows their windows allow (congestion windows grown slowly
        // far below them). In between they are still growing into their windows, or near
        // the path: wait.
        // Fewer than eight started together before anything was measured are judged for
        // their first step as a lone stream is: held by their windows at a long RTT, even
        // while those still grow, they get company.
        let first_at_long_rtt =
            !self.grown && n < FIRST_GROWTH && rtt >= LONG_RTT && now.len() == old;
        let lossy_first = std::mem::take(&mut self.lossy_first_step) && n < LOSSY_FIRST_GROWTH;
        // A fatpipe peer sizes its window to the path as its law measures it, and announces
        // it: a lone stream held by that window (not by a smaller one its kernel capped) is
        // held by the path, whose queue a later look shows; more streams would only split it
        // (as root at 100 ms, a lone stream whose window had just reached 1.06 x BDP, looked
        // at before the queue showed, got seven companions: 79 MiB of buffers for a 12.5 MB
        // path). Of several, the announcement may be any one's.
        let peer_sized = n == 1
            && old == 1
            && o.peer_window
                .is_some_and(|w| w > 0 && now[0].wnd as f64 >= PEER_SIZED * w as f64);
        if !lossy_first && rwnd >= LIMITED && peer_sized {
            return None;
        }
        let ready = if lossy_first {
            true
        } else if n == 1 {
            if limited >= LIMITED {
                !(grew_by_half(before[0].wnd, now[0].wnd) && rtt < LONG_RTT)
            } else {
                !ramping(0)
            }
        } else if first_at_long_rtt && limited >= LIMITED {
            true
        } else if now.len() > old || (0..old).any(ramping) {
            false
        } else {
            let fastest = (0..old).map(each).fold(0.0, f64::max);
            if limited >= LIMITED {
                (0..old).all(|i| each(i) >= CAUGHT_UP * fastest)
            } else {
                rate < SLOW * f64::from(n) * fastest
            }
        };
        if !ready {
            return None;
        }
        let first = if lossy_first {
            LOSSY_FIRST_GROWTH
        } else {
            FIRST_GROWTH
        };
        let to = self.step_to(n, first);
        let random = if lost > 0.0 {
            format!(", {lost:.0} segments lost without a queue (random loss)")
        } else {
            String::new()
        };
        let held = if lossy_first {
            format!(
                "{n} stream(s) at {rate:.0} Mbit/s on a path with random loss{random}: each \
                 window must hold the holes beside its share of the BDP"
            )
        } else if limited >= LIMITED {
            format!(
                "{n} stream(s) at {rate:.0} Mbit/s, no queue on the path{random}, buffer-limited \
                 {:.0} % of busy time (peer's window {:.0} %, send buffer {:.0} %)",
                limited * 100.0,
                rwnd * 100.0,
                (limited - rwnd).max(0.0) * 100.0
            )
        } else {
            format!(
                "{n} stream(s) at {rate:.0} Mbit/s, no queue on the path{random}, congestion \
                 window growing slowly (buffer-limited only {:.0} % of busy time)",
                limited * 100.0
            )
        };
        let step = Step {
            from: n as usize,
            rate: rate_of(n as usize),
            host: false,
        };
        self.take_step(o.memory, to, step, held, String::new())
    }

    /// The `n` streams, at `rate` Mbit/s, are held by the host, as `held` says: more, up to
    /// the cores (the first step to `first` at least, later ones doubling), the rate judged at
    /// the next look. A busy sending thread is sure to gain from another core: its first step
    /// goes to eight. A receiver that cannot keep up may be a slow disk, where streams only
    /// contend: there the count doubles from one (measured into tmpfs on 16 cores, eight and
    /// sixteen streams moved 1.4 times one's rate for 3.5 times its CPU per byte).
    fn host_step(
        &mut self,
        o: &Observation<'_>,
        n: u32,
        rate: f64,
        held: String,
        first: u32,
    ) -> Option<StreamChange> {
        let cores = o.cores.max(1);
        if n >= cores {
            return self.settle(format!(
                "{held}, and all {cores} cores have one; staying at {n}"
            ));
        }
        let to = self.step_to(n, first);
        let step = Step {
            from: n as usize,
            rate,
            host: true,
        };
        self.take_step(
            o.memory,
            to.min(cores),
            step,
            held,
            format!(" ({cores} cores)"),
        )
    }

    /// Grows from `step.from` streams (holding `memory` bytes) to `to`, within the stream
    /// limit and `--max-memory`, for the reason `held` (`note` follows the count); settles
    /// where neither allows one more.
    fn take_step(
        &mut self,
        memory: u64,
        to: u32,
        step: Step,
        held: String,
        note: String,
    ) -> Option<StreamChange> {
        let n = step.from as u32;
        let by_memory = self.by_memory(memory, n);
        let add = to
            .saturating_sub(n)
            .min(self.limits.max.saturating_sub(n))
            .min(by_memory);
        if add == 0 {
            let why = if by_memory == 0 {
                "--max-memory"
            } else {
                "the stream limit"
            };
            return self.settle(format!("{held}, but {why} allows no more"));
        }
        self.step = Some(step);
        self.grown = true;
        self.opened = (n + add) as usize;
        let reason = format!("{held}: opening {add} more{note}");
        self.log.push(reason.clone());
        Some(StreamChange { add, reason })
    }

    /// The count a step from `n` goes to: doubling, and the first step to `first` at least.
    fn step_to(&self, n: u32, first: u32) -> u32 {
        if self.grown {
            n * GROWTH
        } else {
            (n * GROWTH).max(first)
        }
    }

    /// Streams `--max-memory` leaves room for beside `n` holding `memory` bytes.
    fn by_memory(&self, memory: u64, n: u32) -> u32 {
        let per_stream = memory / u64::from(n).max(1);
        match self.limits.max_memory {
            Some(m) if per_stream > 0 => (m.saturating_sub(memory) / per_stream) as u32,
            _ => u32::MAX,
        }
    }

    fn settle(&mut self, reason: String) -> Option<StreamChange> {
        self.settled = true;
        self.log.push(reason);
        None
    }
}

/// Whether a window went from `was` to `is` by half or more: still in slow start (or a peer
/// window still catching up).
fn grew_by_half(was: u64, is: u64) -> bool {
    is > was + was / 2
}

#[cfg(test)]
mod tests;
