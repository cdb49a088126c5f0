//! The conductor's drive of a UDP channel's ends. The transfer core owns the channel's
//! sender ([`UdpSend`]: its books, its rate control, its pacer); [`Conductor::send_udp`] hands
//! it the receiver's reports, sends what [`Transfer::poll_transmit`] asks for through the
//! mover's [`Datagrams`], waits as long as it says, and carries out what it decided (the
//! telemetry, the log, the status the receiver is told). At the other end the core owns the
//! receiver ([`UdpReceive`]: its books, when it reports); [`Conductor::receive_udp`] has each
//! packet booked as the mover's [`Packets`] takes it in, and sends the reports when due. The
//! movers only move bytes: the file read into packets and put on the wire, or packets taken
//! off it and written at their place.
//!
//! [`Transfer::poll_transmit`]: fatpipe_tune::transfer::Transfer::poll_transmit

use super::{Conductor, Driven};
use crate::telemetry::unix_now;
use crate::udp::{tell, unexpected, UdpConfig, UdpStatus, UdpSummary, PROBE, REPORT_EVERY};
use crate::PumpError;
use fatpipe_proto::udp::{packets, Message};
use fatpipe_proto::udp::{DataHeader, HEADER};
use fatpipe_tune::rate::Feedback;
use fatpipe_tune::telemetry::{Event, RateEvent, SegmentEvent};
use fatpipe_tune::transfer::udp::{Arrival, Take, UdpReceive};
use fatpipe_tune::transfer::udp::{LedgerError, Next, UdpEvent, UdpSend};
use fatpipe_tune::transfer::Input;
use std::io::{self, ErrorKind};
use std::time::{Duration, Instant};

/// No report for this long means the reports are held up (the receiver sends one every
/// [`REPORT_EVERY`]).
const REPORTS_LATE: Duration = Duration::from_millis(3 * REPORT_EVERY.as_millis() as u64);

/// What a UDP channel's sending end moves bytes with, for the conductor to drive.
pub trait Datagrams {
    /// The receiver's messages that arrived so far, without waiting.
    fn messages(&mut self) -> io::Result<Vec<Message>>;
    /// When the receiver was last heard from.
    fn heard(&self) -> Instant;
    /// Sends `packets` (index, transmission number), each stamped `sent_us`; the bytes put on
    /// the wire. The inner error is the system refusing to send UDP there (a route, a filter).
    fn send(
        &mut self,
        packets: &[(u64, u64)],
        sent_us: u32,
    ) -> Result<io::Result<usize>, PumpError>;
    /// Waits up to `wait` for the receiver's next message.
    fn wait(&self, wait: Duration) -> Result<(), PumpError>;
    /// Queues a message to the receiver and sends what its connection takes, without waiting.
    fn offer(&mut self, m: &Message) -> io::Result<()>;
}

/// What a UDP channel's receiving end moves bytes with, for the conductor to drive.
pub trait Packets {
    /// Waits up to `wait` for packets or a message from the sender.
    fn wait(&self, wait: Duration) -> Result<(), PumpError>;
    /// Takes in one batch of packets without waiting: each one's header, the length of its
    /// data and when it arrived and was read go to `take`, and what `take` calls new is
    /// written at its place. Whether any arrived.
    fn receive(
        &mut self,
        take: &mut dyn FnMut(&DataHeader, usize, Arrival) -> Take,
    ) -> Result<bool, PumpError>;
    /// The sender's messages that arrived so far, without waiting.
    fn messages(&mut self) -> io::Result<Vec<Message>>;
    /// Sends what the connection takes of the messages queued; whether some are still queued.
    fn queued(&mut self) -> io::Result<bool>;
    /// Queues a message to the sender and sends what its connection takes, without waiting.
    fn offer(&mut self, m: &Message) -> io::Result<()>;
    /// Packets the receiving socket dropped so far (its buffer full) and its buffer, bytes;
    /// `None` where the system does not say.
    fn socket_drops(&self) -> Option<(u64, u64)>;
    /// Bytes written so far.
    fn written(&self) -> u64;
    /// The transfer's first `bytes` are written without a gap.
    fn placed(&self, bytes: u64);
    /// The sender could not reach this end over UDP: the bytes from `from` on come over the
    /// TCP connection.
    fn fall_back(&mut self, from: u64) -> Result<(), PumpError>;
    /// Every byte is here: the sender is told, and its closing awaited.
    fn finish(&mut self) -> Result<(), PumpError>;
}

/// How a UDP send the conductor drove ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UdpEnd {
    /// The receiver has everything.
    Done,
    /// No packet reached the receiver within [`PROBE`], or the system refused to send one:
    /// the bytes are to go over TCP.
    NotThrough,
}

/// The UDP channel's part of what the conductor drives.
pub(super) struct DrivenUdp {
    config: UdpConfig,
    /// Messages the core decided the receiver is told, until the loop sends them.
    out: Vec<Message>,
    /// An impossible report, which fails the transfer.
    failed: Option<LedgerError>,
}

impl DrivenUdp {
    fn new(config: UdpConfig) -> DrivenUdp {
        DrivenUdp {
            config,
            out: Vec::new(),
            failed: None,
        }
    }
}

impl Conductor {
    /// Hands the transfer core the sending end of a UDP channel, `send`, run as `config`
    /// says; [`Conductor::send_udp`] then drives it.
    pub fn open_udp_sender(&self, send: UdpSend, config: UdpConfig) {
        let mut d = self.driven();
        d.core.open_udp_sender(send);
        d.udp = Some(DrivenUdp::new(config));
    }

    /// Drives the UDP channel opened with [`Conductor::open_udp_sender`] over `io` until the
    /// receiver has everything or UDP does not get through; `pump` counts what the receiver
    /// wrote and cancels.
    pub fn send_udp(
        &self,
        io: &mut dyn Datagrams,
        pump: &crate::Pump,
    ) -> Result<UdpEnd, PumpError> {
        let w = PumpError::Write;
        let start = Instant::now();
        let Some(timeout) = self.udp_config(|c| c.timeout) else {
            return Err(w(io::Error::other("no UDP channel to send on")));
        };
        let mut done = self
            .driven()
            .core
            .udp_sender()
            .is_some_and(UdpSend::is_empty);
        let mut written = 0u64;
        while !done {
            pump.check()?;
            let messages = io.messages().map_err(w)?;
            let (next, out) = {
                let mut d = self.driven();
                for m in messages {
                    match m {
                        Message::Report(r) => {
                            if r.written > written {
                                pump.add((r.written - written) as usize);
                                written = r.written;
                            }
                            d.core.handle(Input::UdpReport(r), Instant::now());
                        }
                        Message::Done { .. } => done = true,
                        m => return Err(w(unexpected(&m))),
                    }
                }
                self.carry_out(&mut d, None);
                if let Some(e) = d.udp.as_mut().and_then(|u| u.failed.take()) {
                    return Err(w(io::Error::new(ErrorKind::InvalidData, e)));
                }
                let now = Instant::now();
                let through = d.core.udp_sender().is_some_and(UdpSend::through);
                if done {
                    (None, take_out(&mut d))
                } else if !through && now.duration_since(start) > PROBE {
                    tracing::warn!(
                        "no UDP packet reached the receiver within 2 s: sending over TCP"
                    );
                    return Ok(UdpEnd::NotThrough);
                } else if now.duration_since(io.heard()) > timeout {
                    return Err(w(io::Error::new(
                        ErrorKind::TimedOut,
                        "no report from the receiver within the --timeout",
                    )));
                } else {
                    let late = now.duration_since(io.heard()) > REPORTS_LATE;
                    let next = d.core.poll_transmit(now, late);
                    // What the core decided on the way (its status to the receiver) goes first.
                    self.carry_out(&mut d, None);
                    (next.map(|n| (n, now)), take_out(&mut d))
                }
            };
            for m in &out {
                io.offer(m).map_err(w)?;
            }
            match next {
                None => {}
                Some((Next::Wait(d), _)) => io.wait(d)?,
                Some((Next::Send { packets, sent_us }, now)) => {
                    match io.send(&packets, sent_us)? {
                        Ok(bytes) => self.driven().core.handle(Input::UdpSent(bytes), now),
                        Err(e) => {
                            tracing::warn!(
                                "cannot send UDP to the receiver ({e}): sending over TCP"
                            );
                            return Ok(UdpEnd::NotThrough);
                        }
                    }
                }
            }
        }
        tracing::debug!(
            "udp: the receiver has everything after {:.2} s",
            start.elapsed().as_secs_f64()
        );
        self.remember_udp();
        Ok(UdpEnd::Done)
    }

    /// Hands the transfer core the receiving end of a UDP channel, `receive`, run as `config`
    /// says; [`Conductor::receive_udp`] then drives it.
    pub fn open_udp_receiver(&self, receive: UdpReceive, config: UdpConfig) {
        let mut d = self.driven();
        d.core.open_udp_receiver(receive);
        d.udp = Some(DrivenUdp::new(config));
    }

    /// Drives the UDP channel opened with [`Conductor::open_udp_receiver`] over `io` until
    /// every byte is written; `pump` cancels. Returns whether the sender fell back to TCP.
    pub fn receive_udp(&self, io: &mut dyn Packets, pump: &crate::Pump) -> Result<bool, PumpError> {
        let r = PumpError::Read;
        let Some((timeout, status)) = self.udp_config(|c| (c.timeout, c.status.clone())) else {
            return Err(r(io::Error::other("no UDP channel to receive on")));
        };
        let (length, mut complete, mut due) = {
            let mut d = self.driven();
            let u = receiver(&mut d)?;
            (u.length(), u.complete(), u.poll_timeout())
        };
        let mut fell_back = false;
        'receiving: while !complete {
            pump.check()?;
            let mut wait = due.saturating_duration_since(Instant::now());
            if io.queued().map_err(r)? {
                // A report is stuck in the queue: look again soon, without spinning.
                wait = wait.max(Duration::from_millis(1));
            }
            io.wait(wait)?;
            // Booked one by one under the lock, which no receive or write holds (a slow disk
            // would stall the conductor's other callers).
            let mut take =
                |h: &DataHeader, len: usize, came: Arrival| match self.driven().core.udp_receiver()
                {
                    Some(u) => u.take(h, len, came),
                    None => Take::Foreign,
                };
            for _ in 0..64 {
                if !io.receive(&mut take)? {
                    break;
                }
                receiver(&mut self.driven())?.heard(Instant::now());
            }
            // The sender's word: how its controller sees the transfer, or that UDP does not
            // get through.
            for m in io.messages().map_err(r)? {
                match m {
                    Message::Status {
                        rate,
                        loss_ppm,
                        state,
                    } => tell(
                        &status,
                        UdpStatus {
                            rate: rate as f64,
                            loss: f64::from(loss_ppm) / 1e6,
                            state,
                        },
                    ),
                    Message::Fallback { offset } => {
                        io.fall_back(offset)?;
                        fell_back = true;
                        break 'receiving;
                    }
                    // This end started on what it named before the transfer command
                    // (`SITE UDPREADY`): the sender must be sending that.
                    Message::Hello { packet, length } => {
                        let mut d = self.driven();
                        let u = receiver(&mut d)?;
                        let named = (u.payload() + HEADER as u64, u.length());
                        if (u64::from(packet), length) != named {
                            return Err(r(io::Error::new(
                                ErrorKind::InvalidData,
                                format!(
                                    "the sender sends {length} bytes in {packet}-byte packets, \
                                     not the {} in {}-byte ones asked for (the file changed?)",
                                    named.1, named.0
                                ),
                            )));
                        }
                    }
                    m => return Err(r(unexpected(&m))),
                }
            }
            let queued = io.queued().map_err(r)?;
            let now = Instant::now();
            let (report, heard) = {
                let mut d = self.driven();
                let u = receiver(&mut d)?;
                // The socket's drops, read when a report is due (a system call each).
                let due_now = now >= u.poll_timeout();
                if let Some((dropped, buffer)) = due_now.then(|| io.socket_drops()).flatten() {
                    u.socket_drops(dropped, buffer);
                }
                let report = u.poll_report(now, io.written(), queued);
                complete = u.complete();
                due = u.poll_timeout();
                (report.map(|rep| (rep, u.in_place())), u.last_heard())
            };
            if let Some((report, placed)) = report {
                io.offer(&Message::Report(report)).map_err(r)?;
                io.placed(placed);
            }
            if now.duration_since(heard) > timeout {
                return Err(r(io::Error::new(
                    ErrorKind::TimedOut,
                    "no data within the --timeout",
                )));
            }
        }
        io.placed(length);
        io.finish()?;
        Ok(fell_back)
    }

    /// What the UDP channel did, for the summary and the final reply (`fell_back`: its bytes
    /// went over TCP); `None` without a channel.
    pub fn udp_summary(&self, fell_back: bool) -> Option<UdpSummary> {
        let mut d = self.driven();
        if let Some(u) = d.core.udp_receiver() {
            return Some(UdpSummary {
                packets: packets(u.length(), u.payload()),
                foreign: u.foreign(),
                fell_back,
                ..UdpSummary::default()
            });
        }
        let (u, config) = (d.core.udp_sender()?, &d.udp.as_ref()?.config);
        let control = u.control();
        Some(UdpSummary {
            control: config.control.to_string(),
            packets: packets(u.length(), u.payload()),
            transmissions: u.transmissions(),
            path_loss: u.path_loss_percent(),
            last_rate: control.rate(),
            state: control.state().to_string(),
            foreign: 0,
            fell_back,
        })
    }

    /// `f` of the UDP channel's configuration, if the transfer has a channel.
    fn udp_config<T>(&self, f: impl FnOnce(&UdpConfig) -> T) -> Option<T> {
        self.driven().udp.as_ref().map(|u| f(&u.config))
    }

    /// Keeps what this transfer learned of the path for the next one: the rate it ended at
    /// (unless it never left start-up: a short file says nothing) and `history`'s odds.
    fn remember_udp(&self) {
        let d = self.driven();
        let (Some(u), Some(m)) = (
            d.core.udp_sender(),
            d.udp.as_ref().and_then(|u| u.config.memory.as_ref()),
        ) else {
            return;
        };
        let mut m = m.lock().unwrap_or_else(|e| e.into_inner());
        let control = u.control();
        if control.state() != "startup" {
            m.rate = Some(control.rate());
        }
        if let Some(odds) = control.odds() {
            m.odds = odds.clone();
        }
    }

    /// Carries out what the UDP channel's sender decided: logged, written to `--stats`, the
    /// status kept for the progress line and queued for the receiver.
    pub(super) fn udp_event(&self, d: &mut Driven, e: UdpEvent) {
        let rate_now = d.core.udp_sender().map_or(0.0, |u| u.control().rate());
        let Some(udp) = d.udp.as_mut() else {
            return;
        };
        let config = &udp.config;
        match e {
            UdpEvent::Rate {
                t,
                before,
                after,
                state,
                feedback,
                queue_us,
            } => {
                log_rate(config, t, after, state, &feedback, queue_us);
                tracing::trace!(
                    "udp rate {:.0} → {:.0} Mbit/s: delivered {:.0} Mbit/s over {:?}, loss {:.2} %, queue {} µs, rtt {:?}",
                    before / 1e6,
                    after / 1e6,
                    feedback.delivered_rate() / 1e6,
                    feedback.interval,
                    100.0 * feedback.loss(),
                    queue_us,
                    feedback.rtt
                );
            }
            UdpEvent::State {
                from,
                to,
                feedback,
                queue_us,
            } => tracing::debug!(
                "udp rate control: {from} → {to} at {:.0} Mbit/s (loss {:.2} %, queue {queue_us} µs)",
                rate_now / 1e6,
                100.0 * feedback.loss(),
            ),
            UdpEvent::Segment {
                segment,
                packets,
                lost,
            } => {
                if let Some(stats) = &config.stats {
                    stats.log(&Event::Segment(SegmentEvent {
                        unix_s: unix_now(),
                        end: config.end.into(),
                        segment,
                        packets,
                        lost,
                    }));
                }
            }
            UdpEvent::Train(c) => {
                tracing::debug!("udp: the train arrived at {:.0} Mbit/s", c / 1e6);
            }
            UdpEvent::Status { rate, loss, state } => {
                let s = UdpStatus {
                    rate,
                    loss,
                    state: state.into(),
                };
                tell(&config.status, s);
                udp.out.push(Message::Status {
                    rate: rate as u64,
                    loss_ppm: (loss * 1e6) as u32,
                    state: state.into(),
                });
            }
            UdpEvent::Stalled(missing) => tracing::warn!(
                "udp: nothing sent for 2 s with {missing} packets missing at the receiver; sending them again"
            ),
            UdpEvent::AllSent(after, sends) => tracing::debug!(
                "udp: every packet sent once after {:.2} s ({sends} sends so far)",
                after.as_secs_f64()
            ),
        }
    }

    /// The UDP channel's receiver reported what cannot be: the send loop fails the transfer.
    pub(super) fn udp_failed(&self, d: &mut Driven, e: LedgerError) {
        if let Some(udp) = d.udp.as_mut() {
            udp.failed.get_or_insert(e);
        }
    }
}

/// The transfer's UDP receiver (opened before its drive begins).
fn receiver(d: &mut Driven) -> Result<&mut UdpReceive, PumpError> {
    d.core
        .udp_receiver()
        .ok_or_else(|| PumpError::Read(io::Error::other("no UDP channel to receive on")))
}

/// The messages the core decided the receiver is told, taken.
fn take_out(d: &mut Driven) -> Vec<Message> {
    d.udp
        .as_mut()
        .map(|u| std::mem::take(&mut u.out))
        .unwrap_or_default()
}

/// Writes the controller's decision (`rate` bits/s, in `state`), with the feedback it was
/// made on, to `--stats`.
fn log_rate(config: &UdpConfig, t: Duration, rate: f64, state: &str, fb: &Feedback, queue_us: u32) {
    if let Some(stats) = &config.stats {
        stats.log(&Event::Rate(RateEvent {
            unix_s: unix_now(),
            t: t.as_secs_f64(),
            end: config.end.into(),
            control: config.control.to_string(),
            state: state.into(),
            rate_mbit: rate / 1e6,
            delivered_mbit: fb.delivered_rate() / 1e6,
            loss: fb.loss(),
            queue_ms: f64::from(queue_us) / 1e3,
        }));
    }
}
