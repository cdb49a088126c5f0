//! The UDP channel's decisions, free of I/O: the receiver's core ([`UdpReceive`]: its books,
//! [`arrivals`], what arrived and what each report says, and when it reports) and the
//! sender's core, [`UdpSend`]: what the receiver's reports mean
//! (arrivals, losses, the round trip of data, the rate control's feedback), and what to send
//! when (the token bucket at the controller's rate, resends first, the tail's losses found by
//! age, a stall never silent). A driver (`fatpipe-net`'s UDP sender) hands in reports with
//! [`UdpSend::on_report`], asks [`UdpSend::poll_send`] what to send at `now`, sends it, says
//! so with [`UdpSend::on_sent`], and carries out [`UdpSend::poll_event`]'s telemetry and
//! status messages.

pub mod arrivals;
pub mod ledger;
pub mod receive;

pub use arrivals::{Arrival, Arrivals, Take};
pub use ledger::{Ledger, LedgerError, WINDOW};
pub use receive::{UdpReceive, QUIET_REPORTS, REPORT_EVERY};

use crate::rate::{queue_limit, Feedback, RateControl};
use fatpipe_proto::udp::{Report, HEADER, TRAIN};
use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// Most packets in one batch.
pub const BATCH: usize = 32;
/// The round trip of data is the lowest sample over this span: about a round trip of reports,
/// so that a queue the path holds now counts (the tail's resends wait for it) while one report
/// held back by a TCP retransmission does not.
const RTT_WINDOW: Duration = Duration::from_millis(100);
/// Longest the sender stays silent while the receiver lacks packets.
const STALL: Duration = Duration::from_secs(2);
/// How often the receiver is told how the controller sees the transfer.
const STATUS_EVERY: Duration = Duration::from_millis(250);
/// Longest the driver waits before asking again.
pub const TICK: Duration = Duration::from_millis(1);
/// A batch covers about this much time at the current rate (fewer, larger sends: the loop and
/// the system calls cost per batch, not per packet).
const BATCH_TIME: f64 = 0.0005;
/// Batches whose send times are kept for the tail's loss detection (a few round trips).
const SEND_LOG: usize = 1 << 16;
/// Sending time the pacer owes at most when the driver falls behind (the scheduler of a busy
/// host put its thread aside), s: owed, not lost, it is made up at [`CATCH_UP`] times the
/// rate (on a 2-core host beside the emulator, time lost beyond 4 ms cost 6 % of the rate).
const OWED_TIME: f64 = 0.025;
/// Sending time that may go back to back, s (the rest of what is owed follows paced), and
/// no more than this share of the round trip: a path's queue may hold no more than a round
/// trip's worth (4 ms back to back overflowed a 1 ms path's queue: 1 % of the packets resent,
/// a tenth less rate); two batches at least (one left the sender on loopback, whose round
/// trip is microseconds, waiting for each).
const BURST_TIME: f64 = 0.004;
const BURST_RTT: f64 = 0.5;
const BURST_BATCHES: f64 = 2.0;
/// How much faster than the rate owed sending time is made up.
const CATCH_UP: f64 = 1.5;

/// What to do next.
#[derive(Debug, Clone, PartialEq)]
pub enum Next {
    /// Send these packets now, in order: (index, transmission number), each stamped `sent_us`.
    Send {
        /// The packets and the transmission number each goes out as.
        packets: Vec<(u64, u64)>,
        /// The send time stamped in their headers, µs since the transfer began.
        sent_us: u32,
    },
    /// Nothing to send for this long, unless a report comes first.
    Wait(Duration),
}

/// What the driver reports or logs.
#[derive(Debug, Clone, PartialEq)]
pub enum UdpEvent {
    /// The controller's rate changed (or was set at the start), on `feedback`.
    Rate {
        /// Time since the transfer began.
        t: Duration,
        /// The rate before, bits/s.
        before: f64,
        /// The rate now, bits/s.
        after: f64,
        /// The controller's state.
        state: &'static str,
        /// What the receiver's reports said.
        feedback: Feedback,
        /// The receiver's queueing delay, µs.
        queue_us: u32,
    },
    /// The controller's state changed.
    State {
        /// The state before.
        from: &'static str,
        /// The state now.
        to: &'static str,
        /// What the receiver's reports said.
        feedback: Feedback,
        /// The receiver's queueing delay, µs.
        queue_us: u32,
    },
    /// A segment is complete at the receiver: how many of its packets went, how many were lost.
    Segment {
        /// Its number.
        segment: u64,
        /// Its packets.
        packets: u64,
        /// Those of them lost at least once (their places in the segment).
        lost: Vec<u32>,
    },
    /// The opening train arrived at this rate, bits/s.
    Train(f64),
    /// Time to tell the receiver how the controller sees the transfer.
    Status {
        /// The rate, bits/s.
        rate: f64,
        /// Recent loss share (smoothed over about ten reports).
        loss: f64,
        /// The controller's state.
        state: &'static str,
    },
    /// Nothing was sent for [`STALL`] though the receiver lacks this many packets: they are
    /// sent again.
    Stalled(u64),
    /// Every packet went out once, after this long and this many sends.
    AllSent(Duration, u64),
}

/// One UDP transfer's sender.
pub struct UdpSend {
    ledger: Ledger,
    control: Box<dyn RateControl>,
    length: u64,
    payload: u64,
    packet: usize,
    start: Instant,
    /// The path's round trip (the feedback connection's).
    rtt: Duration,
    /// The round trip of a data packet and its report (the queue included): the lowest of the
    /// samples of the last [`RTT_WINDOW`].
    data_rtt: Duration,
    rtts: VecDeque<(Instant, Duration)>,
    /// When each batch went out: (time, the next transmission number after it).
    sends: VecDeque<(Instant, u64)>,
    /// Recent loss share, and when the receiver is next told.
    loss: f64,
    /// Packets the receiver got, and those lost, in reports that showed no queue standing (at
    /// most [`queue_limit`]) after one that showed none either: what the path itself loses,
    /// apart from what a full queue (or the receiver's full socket) dropped, whose gaps may
    /// show a report after the queue did.
    calm: (u64, u64),
    /// Whether the latest report showed no queue.
    was_calm: bool,
    next_status: Instant,
    /// The latest report, and when it came.
    last: Option<Report>,
    heard: Instant,
    /// The pacer: bytes the rate lets go (owed time included), bytes that may go back to
    /// back now (filled at [`CATCH_UP`] times the rate), and when both were last filled.
    tokens: f64,
    burst: f64,
    filled: Instant,
    /// A packet got through; every packet went once; when a batch last went.
    through: bool,
    tail: bool,
    last_sent: Instant,
    events: VecDeque<UdpEvent>,
}

impl UdpSend {
    /// A sender of `length` bytes in packets of `packet` bytes (header included) at `now`,
    /// over a path whose round trip is `rtt`, its rate set by `control`.
    pub fn new(
        length: u64,
        packet: u16,
        rtt: Duration,
        control: Box<dyn RateControl>,
        now: Instant,
    ) -> UdpSend {
        let payload = u64::from(packet).saturating_sub(HEADER as u64).max(1);
        let packet = usize::from(packet);
        let batch_bytes = (BATCH * packet) as f64;
        let mut s = UdpSend {
            ledger: Ledger::new(fatpipe_proto::udp::packets(length, payload)),
            control,
            length,
            payload,
            packet,
            start: now,
            rtt,
            data_rtt: rtt,
            rtts: VecDeque::new(),
            sends: VecDeque::new(),
            loss: 0.0,
            calm: (0, 0),
            was_calm: true,
            next_status: now,
            last: None,
            heard: now,
            // The train goes out back to back, whatever the starting rate.
            tokens: batch_bytes.max((TRAIN as usize * packet) as f64),
            burst: batch_bytes.max((TRAIN as usize * packet) as f64),
            filled: now,
            through: false,
            tail: false,
            last_sent: now,
            events: VecDeque::new(),
        };
        // The rate it starts at is the first decision (a remembered one, or the default).
        s.tell_rate(Duration::ZERO, s.control.rate(), Feedback::default(), 0);
        s
    }

    /// Bytes the transfer sends.
    pub fn length(&self) -> u64 {
        self.length
    }

    /// Bytes of file data a packet carries.
    pub fn payload(&self) -> u64 {
        self.payload
    }

    /// The rate control.
    pub fn control(&self) -> &dyn RateControl {
        self.control.as_ref()
    }

    /// Transmissions so far (first sends and resends).
    pub fn transmissions(&self) -> u64 {
        self.ledger.transmissions
    }

    /// The share (%) of packets the path lost while no queue stood on it: its own (random)
    /// loss, without what start-up or a probe overflowing a queue dropped (a clean path's first
    /// copy resent up to 23 % of its packets that way); `None` before such a report.
    pub fn path_loss_percent(&self) -> Option<f64> {
        let (got, lost) = self.calm;
        (got + lost > 0).then(|| 100.0 * lost as f64 / (got + lost) as f64)
    }

    /// Whether a packet reached the receiver yet.
    pub fn through(&self) -> bool {
        self.through
    }

    /// Whether there is nothing to send at all (an empty file).
    pub fn is_empty(&self) -> bool {
        self.ledger.complete() && self.length == 0
    }

    /// Takes a report of the receiver's that came at `now`; an impossible one is an error.
    pub fn on_report(&mut self, r: Report, now: Instant) -> Result<(), LedgerError> {
        self.heard = now;
        self.through |= r.received > 0;
        let t = now.duration_since(self.start);
        // Decisions come from segments (the seed's controllers) or from the feedback (ours).
        let (state, rate) = (self.control.state(), self.control.rate());
        for seg in self.ledger.on_report(&r)? {
            self.control.on_segment(t, &seg.loss);
            self.events.push_back(UdpEvent::Segment {
                segment: seg.loss.segment,
                packets: seg.loss.packets,
                lost: seg.lost,
            });
        }
        let last = self.last.as_ref();
        // The batch that carried the highest transmission the receiver got: a round trip, but
        // only when that transmission is new (a report repeating an old one, at the tail, would
        // make the round trip grow while nothing is sent); the lowest of the last [`RTT_WINDOW`].
        let advanced = last.is_none_or(|b| r.max_tx > b.max_tx);
        let i = self.sends.partition_point(|s| s.1 <= r.max_tx);
        if let (true, Some((at, _))) = (advanced, self.sends.get(i)) {
            self.rtts
                .push_back((now, now.duration_since(*at).max(self.rtt / 2)));
            while self
                .rtts
                .front()
                .is_some_and(|(t, _)| now.duration_since(*t) > RTT_WINDOW)
            {
                self.rtts.pop_front();
            }
            if let Some(min) = self.rtts.iter().map(|(_, d)| *d).min() {
                self.data_rtt = min;
            }
        }
        // Intervals by the receiver's clock: reports may arrive bunched.
        let (since, before) = match last {
            Some(b) => (
                Duration::from_micros(r.at_us.saturating_sub(b.at_us)),
                (b.received, b.max_tx),
            ),
            None => (Duration::from_micros(r.at_us), (0, 0)),
        };
        if last.is_none_or(|b| b.train_packets == 0) {
            if let Some(c) = r.train_rate(self.packet as u32) {
                self.events.push_back(UdpEvent::Train(c));
                self.control.on_capacity(c);
            }
        }
        let delivered = r.received.saturating_sub(before.0);
        let feedback = Feedback {
            now: t,
            interval: since,
            delivered,
            lost: r.max_tx.saturating_sub(before.1).saturating_sub(delivered),
            queue: Duration::from_micros(u64::from(r.queue_us)),
            rtt: self.rtt,
            packet: self.packet as u32,
        };
        self.control.on_feedback(&feedback);
        self.loss = 0.9 * self.loss + 0.1 * feedback.loss();
        let calm = feedback.queue <= queue_limit(self.rtt);
        if calm && self.was_calm {
            self.calm.0 += feedback.delivered;
            self.calm.1 += feedback.lost;
        }
        self.was_calm = calm;
        if now >= self.next_status {
            self.next_status = now + STATUS_EVERY;
            self.events.push_back(UdpEvent::Status {
                rate: self.control.rate(),
                loss: self.loss,
                state: self.control.state(),
            });
        }
        let queue_us = r.queue_us;
        if self.control.rate() != rate {
            self.tell_rate(t, rate, feedback, queue_us);
        }
        if self.control.state() != state {
            self.events.push_back(UdpEvent::State {
                from: state,
                to: self.control.state(),
                feedback,
                queue_us,
            });
        }
        self.last = Some(r);
        Ok(())
    }

    /// What to send at `now`; `reports_late`: no report came for a few report intervals (one
    /// held up by a retransmission on the connection), so the tail's packets are not judged
    /// lost by their age.
    pub fn poll_send(&mut self, now: Instant, reports_late: bool) -> Next {
        let t = now.saturating_duration_since(self.start);
        let rate = self.control.rate();
        self.control.on_tick(t);
        if self.control.rate() != rate {
            self.tell_rate(t, rate, Feedback::default(), 0);
        }
        let bytes_per_s = self.control.rate() / 8.0;
        let packet = self.packet as f64;
        let batch_bytes = BATCH as f64 * packet;
        // Time the driver lost (the scheduler, a full socket) is made up: a few ms back to
        // back, the rest of what is owed a little faster than the rate.
        let train = (TRAIN + 1).saturating_sub(self.ledger.next_tx()) as f64;
        let least = batch_bytes.max(train * packet);
        let elapsed = now.saturating_duration_since(self.filled).as_secs_f64();
        let owed = least.max(bytes_per_s * OWED_TIME);
        self.tokens = (self.tokens + bytes_per_s * elapsed).min(owed);
        let burst_time = BURST_TIME.min(BURST_RTT * self.rtt.as_secs_f64());
        let burst = (BURST_BATCHES * batch_bytes)
            .max(least)
            .max(bytes_per_s * burst_time);
        self.burst = (self.burst + CATCH_UP * bytes_per_s * elapsed).min(burst);
        self.filled = now;
        let want = (bytes_per_s * BATCH_TIME / packet).clamp(1.0, BATCH as f64) * packet;
        let may = self.tokens.min(self.burst);
        if may < want {
            let rate = bytes_per_s.max(1.0);
            let wait = ((want - self.tokens) / rate).max((want - self.burst) / (CATCH_UP * rate));
            return Next::Wait(Duration::from_secs_f64(wait).min(TICK));
        }
        let n = ((may / packet) as usize).min(BATCH);
        // New packets wait while more are out than the controller allows beyond the last one
        // reported (start-up: a stalled report must not let an overshoot run on).
        let reported = self.last.as_ref().map_or(0, |r| r.max_tx);
        let out = self.ledger.next_tx().saturating_sub(1 + reported);
        let held = self
            .control
            .in_flight()
            .is_some_and(|cap| out >= cap.max(2 * TRAIN));
        let short_last = !self.length.is_multiple_of(self.payload);
        let picked = self.ledger.next_batch(n, !held, short_last);
        if !picked.is_empty() {
            let sent_us = now.saturating_duration_since(self.start).as_micros() as u32;
            let packets = picked.iter().map(|&i| (i, self.ledger.sent(i))).collect();
            return Next::Send { packets, sent_us };
        }
        // Nothing may go, and nothing went for a while, though the receiver lacks packets:
        // whatever it still lacks is sent again (a stall is never silent).
        if now.saturating_duration_since(self.last_sent) > STALL {
            self.events
                .push_back(UdpEvent::Stalled(self.ledger.missing()));
            self.ledger.find_lost(self.ledger.next_tx(), 1);
            self.last_sent = now;
        }
        if !self.tail && self.ledger.all_sent_once() {
            self.tail = true;
            self.events.push_back(UdpEvent::AllSent(
                now.saturating_duration_since(self.start),
                self.ledger.transmissions,
            ));
        }
        // Everything is out (or the window is): nothing later arrives to show a loss, so what
        // is still missing a round trip (and a quarter) after it was sent is sent again. Not
        // while held back, nor while the reports are late: the packets they would show arrived.
        if !held && !reports_late {
            let age = self.data_rtt + self.data_rtt / 4 + Duration::from_millis(10);
            let sends = &mut self.sends;
            while sends.len() > 1 && sends[1].0 + age <= now {
                sends.pop_front();
            }
            if let Some(&(at, tx)) = sends.front().filter(|(at, _)| *at + age <= now) {
                // Twice each: a lost resend here costs another round trip and more.
                self.ledger.find_lost(tx, 2);
                sends.retain(|s| s.0 > at);
            }
        }
        Next::Wait(TICK)
    }

    /// The packets [`Next::Send`] gave at `now` went out, `bytes` in all (headers included).
    pub fn on_sent(&mut self, bytes: usize, now: Instant) {
        self.last_sent = now;
        self.sends.push_back((now, self.ledger.next_tx()));
        if self.sends.len() > SEND_LOG {
            self.sends.pop_front();
        }
        self.tokens -= bytes as f64;
        self.burst -= bytes as f64;
    }

    /// Records the controller's rate (and state) at `t`, `before` it the one it had, decided
    /// on `feedback` (none when time alone moved it).
    fn tell_rate(&mut self, t: Duration, before: f64, feedback: Feedback, queue_us: u32) {
        self.events.push_back(UdpEvent::Rate {
            t,
            before,
            after: self.control.rate(),
            state: self.control.state(),
            feedback,
            queue_us,
        });
    }

    /// The next thing to log or tell the receiver.
    pub fn poll_event(&mut self) -> Option<UdpEvent> {
        self.events.pop_front()
    }
}

#[cfg(test)]
mod tests;

/// The header of packet `index` sent as transmission `tx` of the transfer whose token is 7,
/// for the books' tests.
#[cfg(test)]
fn test_header(index: u64, tx: u64) -> fatpipe_proto::udp::DataHeader {
    fatpipe_proto::udp::DataHeader {
        token: 7,
        tx,
        index,
        sent_us: 0,
    }
}
