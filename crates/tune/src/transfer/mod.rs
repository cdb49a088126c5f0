//! The transfer core: one state machine per transfer, free of I/O, in the shape of
//! quinn-proto's `Connection`. It owns each data connection's plan (buffer law and pacing
//! law), the stream policy (`-p auto`), the congestion-control policy and what the peer said
//! (its buffer, its round trips, that it paces). A driver (`fatpipe-net`'s conductor) hands in
//! what happened through [`Transfer::open`], [`Transfer::handle`] and
//! [`Transfer::handle_timeout`], each with the time as a value, carries out what
//! [`Transfer::poll_action`] answers on the sockets, and wakes at [`Transfer::poll_timeout`].
//! A front-end (the FTP client and server, the HTTPS server) only translates the control
//! channel to and from [`Input`]s and [`Told`]. A transfer over the UDP channel runs its
//! end's core here too: the sender's ([`udp::UdpSend`]: the receiver's reports come in as
//! inputs, its decisions go out as actions, and [`Transfer::poll_transmit`] says what to send
//! when), or the receiver's ([`udp::UdpReceive`]: each packet booked, reports when due).

mod connection;
mod events;
#[cfg(test)]
mod tests;
pub mod udp;

use crate::congestion::{CongestionControl, CongestionPolicy, PacedBy};
use crate::pacing::Pacing;
use crate::sample::{Role, Sample};
use crate::streams::{Observation, StreamPolicy};
use crate::{Params, Tuning};
use connection::Connection;
pub use events::{Action, Counters, Input, Note, Told};
use std::collections::VecDeque;
use std::time::{Duration, Instant};
use udp::{Next, UdpReceive, UdpSend};

/// How often the per-transfer policies look at the connections.
pub const POLICY_TICK: Duration = Duration::from_millis(100);

/// One data connection of a transfer: its place in the order the connections were made.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ConnId(pub usize);

/// What the user and the system asked of a transfer's tuning.
#[derive(Debug, Clone)]
pub struct TransferSetup {
    /// Which end this is.
    pub role: Role,
    /// The buffer law and its knobs; `None`: the caller asked for no tuning (buffers are left
    /// to the kernel; a pacing still runs).
    pub tuning: Option<(Tuning, Params)>,
    /// The pacing the user asked for (`--pacing`), if any.
    pub pacing: Option<Pacing>,
    /// The pacing when the user asked for none.
    pub default_pacing: Pacing,
    /// The congestion control the user asked for, if any.
    pub cc: Option<CongestionControl>,
    /// Whether this process sets buffers past the system's limits (root): an uncapped lone
    /// stream is left unpaced.
    pub forced: bool,
    /// Whether a sender whose user chose no congestion control may choose one on random loss.
    pub choose_cc: bool,
    /// Cores this process may run on (streams held by the CPU grow up to it).
    pub cores: u32,
}

/// The stream policy of a sending transfer whose stream count grows.
struct Growing {
    policy: StreamPolicy,
    /// Streams asked for so far.
    streams: u32,
    /// The transfer opened several streams at once (a cold start on a long path, or where an
    /// earlier transfer ended).
    together: bool,
}

/// The congestion-control policy of a sending transfer whose user chose none.
#[derive(Default)]
struct Choosing {
    policy: CongestionPolicy,
    /// The control chosen, once chosen: new connections start with it.
    chosen: Option<CongestionControl>,
    log: Vec<String>,
}

/// The transfer core (see the module's text).
pub struct Transfer {
    setup: TransferSetup,
    /// The pacing the connections run (the user's, else the default).
    pacing: Pacing,
    started: Instant,
    conns: Vec<Connection>,
    /// When the per-transfer policies look next.
    next_look: Instant,
    growing: Option<Growing>,
    choosing: Option<Choosing>,
    peer_paces: bool,
    actions: VecDeque<Action>,
    /// A look is due once the samples of this round are carried out.
    look_due: bool,
    /// A buffer size to announce once this round's decisions are carried out.
    announce: Option<u64>,
    /// What the peer was last told paces the connections.
    told_paced: Option<PacedBy>,
    /// The control connection's lowest RTT, if given ([`Input::ControlRtt`]).
    control_rtt: Option<Duration>,
    /// The UDP channel's sender, once it is set up ([`Transfer::open_udp_sender`]).
    udp_sender: Option<UdpSend>,
    /// The UDP channel's receiver, once it is set up ([`Transfer::open_udp_receiver`]).
    udp_receiver: Option<UdpReceive>,
}

impl Transfer {
    /// The core of a transfer that starts at `now`; `streams`: the stream policy of a sending
    /// transfer whose count grows, and the count it starts with.
    pub fn new(setup: TransferSetup, streams: Option<(StreamPolicy, u32)>, now: Instant) -> Self {
        let pacing = setup.pacing.unwrap_or(setup.default_pacing);
        let choose = setup.role == Role::Sender
            && setup.choose_cc
            && setup.tuning.is_some()
            && setup.cc.is_none();
        Transfer {
            pacing,
            started: now,
            conns: Vec::new(),
            next_look: now + POLICY_TICK,
            growing: streams.map(|(p, start)| Growing {
                policy: p.starting_at(start),
                streams: start,
                together: start > 1,
            }),
            choosing: choose.then(Choosing::default),
            peer_paces: false,
            actions: VecDeque::new(),
            look_due: false,
            announce: None,
            told_paced: None,
            control_rtt: None,
            udp_sender: None,
            udp_receiver: None,
            setup,
        }
    }

    /// The sending end of a UDP channel was set up: from now on its packets go out as
    /// [`Transfer::poll_transmit`] says, its receiver's reports come in as
    /// [`Input::UdpReport`], and what it decides comes out as [`Action::Udp`].
    pub fn open_udp_sender(&mut self, send: UdpSend) {
        self.udp_sender = Some(send);
    }

    /// The UDP channel's sender, if this transfer has one.
    pub fn udp_sender(&self) -> Option<&UdpSend> {
        self.udp_sender.as_ref()
    }

    /// The receiving end of a UDP channel was set up: from now on each packet is booked by
    /// [`Transfer::udp_receiver`] (the driver writes what it calls new), and its reports go
    /// out when [`UdpReceive::poll_report`] says.
    pub fn open_udp_receiver(&mut self, receive: UdpReceive) {
        self.udp_receiver = Some(receive);
    }

    /// The UDP channel's receiver, if this transfer has one: packets are booked one by one,
    /// too many for an [`Input`] each.
    pub fn udp_receiver(&mut self) -> Option<&mut UdpReceive> {
        self.udp_receiver.as_mut()
    }

    /// What to send over the UDP channel at `now` (`reports_late`: no report came for a few
    /// of their intervals, see [`UdpSend::poll_send`]); then hand in [`Input::UdpSent`].
    /// `None` without a channel.
    pub fn poll_transmit(&mut self, now: Instant, reports_late: bool) -> Option<Next> {
        self.udp_sender
            .as_mut()
            .map(|u| u.poll_send(now, reports_late))
    }

    /// A data connection was made at `now` (`reused`: kept from the previous transfer);
    /// `None` when nothing is tuned (neither tuning nor pacing was asked for). The next action
    /// is its [`Action::Start`].
    pub fn open(&mut self, reused: bool, now: Instant) -> Option<ConnId> {
        if self.setup.tuning.is_none() && self.pacing == Pacing::Off {
            return None;
        }
        let (tuning, params) = self
            .setup
            .tuning
            .clone()
            .unwrap_or((Tuning::Kernel, Params::default()));
        let conn = ConnId(self.conns.len());
        let c = Connection::new(
            tuning,
            self.setup.role,
            &params,
            self.pacing_now(),
            reused,
            now,
        );
        let cc = self.chosen_cc().or_else(|| self.setup.cc.clone());
        self.actions.push_back(Action::Start {
            conn,
            setup: c.plan.setup(),
            cc: (self.setup.role == Role::Sender).then_some(cc).flatten(),
        });
        self.conns.push(c);
        Some(conn)
    }

    /// Takes one input at `now`.
    pub fn handle(&mut self, input: Input<'_>, now: Instant) {
        match input {
            Input::Started {
                conn,
                runs,
                buffer,
                window,
            } => self.started(conn, runs, buffer, window),
            Input::Counters { conn, counters } => self.on_counters(conn, counters, now),
            Input::Observed {
                streams,
                cpu,
                memory,
            } => {
                let obs = Observation {
                    now: now.saturating_duration_since(self.started),
                    streams,
                    memory,
                    cpu,
                    cores: self.setup.cores,
                    control_rtt: self.control_rtt,
                    peer_window: self.conns.iter().filter_map(|c| c.peer_buffer).max(),
                };
                self.choose_cc(&obs);
                self.grow_streams(&obs);
            }
            Input::Dropped(conn) => {
                if let Some(c) = self.conns.get_mut(conn.0) {
                    c.dropped = true;
                }
            }
            Input::Runs { conn, runs } => {
                if let Some(c) = self.conns.get_mut(conn.0) {
                    c.runs = runs;
                }
            }
            Input::ProbeRtt(rtt) => self.conns.iter_mut().for_each(|c| c.probe_rtt = Some(rtt)),
            Input::ControlRtt(rtt) => {
                self.control_rtt = Some(self.control_rtt.map_or(rtt, |r| r.min(rtt)));
                if self.setup.role == Role::Receiver {
                    self.conns.iter_mut().for_each(|c| c.probe_rtt = Some(rtt));
                }
            }
            Input::PeerBuffer(bytes) => {
                self.conns
                    .iter_mut()
                    .for_each(|c| c.peer_buffer = Some(bytes));
            }
            Input::PeerPaces(by) => self.on_peer_paces(by),
            Input::Ended => {
                let all: Vec<ConnId> = self.live().map(|(i, _)| i).collect();
                for conn in all {
                    self.conns[conn.0].next_at = now;
                    self.actions.push_back(Action::Sample(conn));
                }
            }
            Input::UdpReport(r) => {
                let Some(u) = self.udp_sender.as_mut() else {
                    return;
                };
                if let Err(e) = u.on_report(r, now) {
                    self.actions.push_back(Action::UdpFailed(e));
                }
            }
            Input::UdpSent(bytes) => {
                if let Some(u) = self.udp_sender.as_mut() {
                    u.on_sent(bytes, now);
                }
            }
        }
    }

    /// Whatever is due at `now`: every connection whose law wants a sample, then (once those
    /// are carried out) the policies' look.
    pub fn handle_timeout(&mut self, now: Instant) {
        let due: Vec<ConnId> = self
            .live()
            .filter(|(_, c)| c.next_at <= now)
            .map(|(i, _)| i)
            .collect();
        self.actions.extend(due.into_iter().map(Action::Sample));
        if self.deciding() && now >= self.next_look {
            self.next_look = now + POLICY_TICK;
            self.look_due = true;
        }
    }

    /// When [`Transfer::handle_timeout`] is next due; `None` while nothing is to be done.
    pub fn poll_timeout(&self) -> Option<Instant> {
        let look = self.deciding().then_some(self.next_look);
        self.live().map(|(_, c)| c.next_at).chain(look).min()
    }

    /// The next thing to do, in order: what the inputs so far asked for, then what the UDP
    /// channel's sender decided, then the policies' look, then what to tell the peer.
    pub fn poll_action(&mut self) -> Option<Action> {
        if let Some(a) = self.actions.pop_front() {
            return Some(a);
        }
        if let Some(e) = self.udp_sender.as_mut().and_then(UdpSend::poll_event) {
            return Some(Action::Udp(e));
        }
        if std::mem::take(&mut self.look_due) {
            return Some(Action::Observe);
        }
        if let Some(n) = self.announce.take() {
            return Some(Action::Tell(Told::Buffer(n)));
        }
        // Told again when it changes: streams started together are paced by TCP, and random
        // loss may later switch them to bbr, which the receiver (and a client that leaves TCP
        // on random loss) must hear.
        let paced = self
            .paced_by()
            .filter(|p| self.told_paced.as_ref() != Some(p))?;
        self.told_paced = Some(paced.clone());
        Some(Action::Tell(Told::Paced(paced)))
    }

    /// The connection made set-up: its first pacing, where its law starts (a receiver beside
    /// grown siblings, or one kept from the previous transfer), and the stream count.
    fn started(&mut self, conn: ConnId, runs: Option<CongestionControl>, buffer: u64, window: u64) {
        let siblings = self.live().filter(|&(i, _)| i != conn).count();
        let sibling = self
            .live()
            .filter(|&(i, _)| i != conn)
            .map(|(_, c)| c.buffer)
            .max();
        let role = self.setup.role;
        let peer_paces = self.peer_paces;
        let Some(c) = self.conns.get_mut(conn.0) else {
            return;
        };
        c.runs = runs;
        c.buffer = buffer;
        if let Some(pace) = c.plan.pace_at_setup().filter(|_| !c.paced_in_kernel()) {
            self.actions.push_back(Action::Pace { conn, pace });
        }
        if role == Role::Receiver {
            let seed = receiver_seed(buffer, sibling, siblings, c.reused, window);
            if let Some(bytes) = seed.filter(|&b| c.plan.seed(b)) {
                self.actions.push_back(Action::Seed { conn, bytes });
            }
        }
        if peer_paces {
            c.plan.sender_paces();
        }
        let n = self.live().count() as u32;
        self.conns.iter_mut().for_each(|c| c.plan.set_streams(n));
    }

    /// A connection's counters: its law decides.
    fn on_counters(&mut self, conn: ConnId, counters: Counters, now: Instant) {
        let role = self.setup.role;
        let Some(c) = self.conns.get_mut(conn.0) else {
            return;
        };
        let sample = Sample {
            now: now.saturating_duration_since(c.started),
            bytes: counters.bytes,
            max_read: counters.max_read,
            rcvbuf: counters.rcvbuf,
            sndbuf: counters.sndbuf,
            tcp: counters.tcp,
            probe_rtt: c.probe_rtt,
            peer_buffer: c.peer_buffer,
        };
        c.buffer = match role {
            Role::Receiver => sample.rcvbuf,
            Role::Sender => sample.sndbuf,
        };
        let decision = c.plan.on_sample(&sample);
        c.next_at = now + decision.next.max(Duration::from_millis(1));
        if decision.announce.is_some() {
            self.announce = decision.announce;
        }
        let pace = decision.pace.filter(|_| !c.paced_in_kernel());
        self.actions.push_back(Action::Apply {
            conn,
            sample: Box::new(sample),
            decision,
            pace,
        });
    }

    /// The sending peer said it paces: every connection's law, and every later one's, is told.
    fn on_peer_paces(&mut self, by: PacedBy) {
        self.peer_paces = true;
        self.conns.iter_mut().for_each(|c| c.plan.sender_paces());
        let reason = format!(
            "the sender paces its connections ({by}): packet spacing is its pacing rate, no \
             train of the bottleneck's"
        );
        self.actions
            .push_back(Action::Note(Note::PeerPaces { by, reason }));
    }

    /// The pacing a new connection starts with: the transfer's, unless it waits (see
    /// [`Transfer::waits_to_pace`]).
    fn pacing_now(&self) -> Pacing {
        let streams = self.growing.as_ref().map(|g| g.streams);
        if streams.is_some_and(|n| self.waits_to_pace(n)) {
            Pacing::Off
        } else {
            self.pacing
        }
    }

    /// Whether a `-p auto` transfer at `streams` streams leaves them unpaced for now: a lone
    /// stream that TCP would pace by default, when buffers are not capped (pacing keeps
    /// siblings from ending each other's slow start; alone, it would only hide the path's
    /// capacity from the receiver's packet trains; capped, a lone stream soon gets company).
    fn waits_to_pace(&self, streams: u32) -> bool {
        let s = &self.setup;
        s.tuning.is_some()
            && self.pacing == Pacing::Tcp
            && s.pacing.is_none()
            && s.forced
            && streams <= 1
    }

    /// Whether this sending end's connections run a congestion control that paces itself
    /// (bbr, chosen on random loss or asked for; fatpipe's BIC), or TCP paces streams that
    /// started together: their slow starts run side by side, each arriving at its own pacing
    /// rate, which the receivers would read as trains of the bottleneck and share among the
    /// streams (every window then grew about 10 % per RTT: a cold 2 GiB at 200 ms with six
    /// streams moved 664 Mbit/s against 745 starting from one). TCP's pacing of a count grown
    /// from one stream is not told: there the trains keep the memory within 3 x BDP (told, the
    /// stock profile's `-p auto` moved 582-599 Mbit/s instead of 557 but with 67-70 MiB
    /// instead of 35).
    fn paced_by(&self) -> Option<PacedBy> {
        if self.setup.role != Role::Sender || self.live().next().is_none() {
            return None;
        }
        let together = self.growing.as_ref().is_some_and(|g| g.together);
        self.chosen_cc()
            .or_else(|| self.setup.cc.clone())
            .filter(CongestionControl::paces_itself)
            .map(PacedBy::Control)
            .or_else(|| (together && self.pacing != Pacing::Off).then_some(PacedBy::Tcp))
    }

    /// Whether a per-transfer policy still has something to decide.
    fn deciding(&self) -> bool {
        self.growing
            .as_ref()
            .is_some_and(|g| !g.policy.is_settled())
            || self.choosing.as_ref().is_some_and(|c| c.chosen.is_none())
    }

    /// The congestion-control policy's decision: on random loss every connection (and every
    /// later one) switches.
    fn choose_cc(&mut self, obs: &Observation<'_>) {
        let all: Vec<ConnId> = self.live().map(|(i, _)| i).collect();
        let Some(ch) = self.choosing.as_mut().filter(|c| c.chosen.is_none()) else {
            return;
        };
        let Some(change) = ch.policy.observe(obs) else {
            return;
        };
        ch.chosen = Some(change.cc.clone());
        ch.log.push(change.reason.clone());
        let switch = all.into_iter().map(|conn| Action::SetCc {
            conn,
            cc: change.cc.clone(),
        });
        self.actions.extend(switch);
        self.actions.push_back(Action::Note(Note::Control {
            cc: change.cc,
            reason: change.reason,
        }));
    }

    /// The stream policy's decision: more streams when it says so, and its decisions noted.
    fn grow_streams(&mut self, obs: &Observation<'_>) {
        let model_based = self.model_based();
        let Some(gr) = self.growing.as_mut() else {
            return;
        };
        if model_based {
            gr.policy.model_based();
        }
        let settled = gr.policy.is_settled();
        let change = gr.policy.observe(obs);
        let streams = gr.streams;
        if let Some(c) = &change {
            gr.streams += c.add;
        }
        let said = match (&change, settled, gr.policy.is_settled()) {
            (Some(c), _, _) => Some(c.reason.clone()),
            (None, false, true) => gr.policy.log.last().cloned(),
            _ => None,
        };
        let now_streams = gr.streams;
        if let Some(c) = &change {
            if self.waits_to_pace(streams) {
                // The lone stream ran unpaced; with company it is paced like the rest.
                if let Some(pace) = self.pacing.law().setup() {
                    let unpaced: Vec<ConnId> = self
                        .live()
                        .filter(|(_, c)| !c.paced_in_kernel())
                        .map(|(i, _)| i)
                        .collect();
                    let paces = unpaced.into_iter().map(|conn| Action::Pace { conn, pace });
                    self.actions.extend(paces);
                }
            }
            self.actions.push_back(Action::OpenStreams(c.add));
        }
        if let Some(reason) = said {
            self.actions.push_back(Action::Note(Note::Streams {
                streams: now_streams,
                reason,
            }));
        }
    }

    /// The connections still tuned, in the order they were made.
    fn live(&self) -> impl Iterator<Item = (ConnId, &Connection)> {
        let all = self.conns.iter().enumerate();
        all.filter(|(_, c)| !c.dropped).map(|(i, c)| (ConnId(i), c))
    }

    /// Whether the senders run bbr because the congestion-control policy chose it.
    fn model_based(&self) -> bool {
        self.chosen_cc() == Some(CongestionControl::FOR_RANDOM_LOSS)
    }

    /// The congestion control the senders switched to on random loss, if they did: new
    /// connections start with it.
    pub fn chosen_cc(&self) -> Option<CongestionControl> {
        self.choosing.as_ref().and_then(|c| c.chosen.clone())
    }

    /// How the stream count and the congestion control were chosen, for the transfer's
    /// summary: how the streams were paced (`unpaced`: why a connection could not be), the
    /// stream policy's decisions in order, then a change of congestion control; empty when
    /// nothing was chosen.
    pub fn decisions(&self, unpaced: Option<String>) -> Vec<String> {
        let mut out = Vec::new();
        if let Some(gr) = &self.growing {
            out.push(match unpaced {
                Some(e) => format!("streams not paced: {e}"),
                None => self.pacing.why().unwrap_or_default().to_string(),
            });
            out.extend(gr.policy.log.iter().cloned());
        }
        if let Some(ch) = &self.choosing {
            out.extend(ch.log.iter().cloned());
        }
        out
    }
}

/// Where a receiving connection's law starts (a `setsockopt` size), if not from scratch: at its
/// share of the largest sibling's buffer when that is well above its own (`own`, `sibling`:
/// buffers as the kernel accounts them, twice the size set; `siblings`: how many there are; the
/// path does not widen with the stream count, and the new connection's start-up grows its window
/// from there), else, for a connection kept from the previous transfer, at its own window.
fn receiver_seed(
    own: u64,
    sibling: Option<u64>,
    siblings: usize,
    reused: bool,
    window: u64,
) -> Option<u64> {
    match sibling.filter(|&b| b > 2 * own) {
        Some(b) => Some(b / 2 / (siblings as u64 + 1)),
        None if reused => Some(window.max(own / 2)),
        None => None,
    }
}
