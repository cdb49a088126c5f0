//! The transfer core on hand-written traces: what it asks the driver to do, in what order,
//! for each policy it runs.

use super::*;
use crate::pacing::Pace;
use crate::sample::TcpStats;
use crate::streams::StreamLimits;

fn setup(role: Role) -> TransferSetup {
    TransferSetup {
        role,
        tuning: Some((Tuning::Drs, Params::default())),
        pacing: None,
        default_pacing: Pacing::Off,
        cc: None,
        forced: true,
        choose_cc: false,
        cores: 2,
    }
}

/// A `-p auto` sender starting at `start` streams at `t0`.
fn auto_sender(start: u32, forced: bool, t0: Instant) -> Transfer {
    let policy = StreamPolicy::new(StreamLimits {
        max: 16,
        max_memory: None,
    });
    let setup = TransferSetup {
        default_pacing: Pacing::Tcp,
        forced,
        ..setup(Role::Sender)
    };
    Transfer::new(setup, Some((policy, start)), t0)
}

fn drain(t: &mut Transfer) -> Vec<Action> {
    std::iter::from_fn(|| t.poll_action()).take(1000).collect()
}

/// Opens a connection at `now` and carries out its start as a driver would (the kernel runs
/// `runs`, the buffer is `buffer`): every action that followed.
fn connect(
    t: &mut Transfer,
    runs: Option<CongestionControl>,
    buffer: u64,
    now: Instant,
) -> Vec<Action> {
    let conn = t.open(false, now).expect("tuned");
    let start = t.poll_action();
    assert!(
        matches!(start, Some(Action::Start { conn: c, .. }) if c == conn),
        "{start:?}"
    );
    t.handle(
        Input::Started {
            conn,
            runs,
            buffer,
            window: 0,
        },
        now,
    );
    drain(t)
}

fn paces(actions: &[Action]) -> Vec<(ConnId, Pace)> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::Pace { conn, pace } => Some((*conn, *pace)),
            _ => None,
        })
        .collect()
}

#[test]
fn nothing_is_tuned_without_tuning_or_pacing() {
    let t0 = Instant::now();
    let mut t = Transfer::new(
        TransferSetup {
            tuning: None,
            ..setup(Role::Sender)
        },
        None,
        t0,
    );
    assert_eq!(t.open(false, t0), None);
    assert_eq!(t.poll_timeout(), None);
    assert_eq!(t.poll_action(), None);
}

#[test]
fn a_connection_is_sampled_when_its_law_asks_and_each_sample_is_carried_out() {
    let t0 = Instant::now();
    let mut t = Transfer::new(setup(Role::Receiver), None, t0);
    let t1 = t0 + Duration::from_millis(30);
    assert!(connect(&mut t, None, 1 << 16, t1).is_empty());
    // Due at once: its first sample.
    assert_eq!(t.poll_timeout(), Some(t1));
    t.handle_timeout(t1);
    assert_eq!(t.poll_action(), Some(Action::Sample(ConnId(0))));
    assert_eq!(t.poll_action(), None);
    let t2 = t1 + Duration::from_millis(5);
    let counters = Counters {
        bytes: 1000,
        rcvbuf: 1 << 16,
        ..Counters::default()
    };
    t.handle(
        Input::Counters {
            conn: ConnId(0),
            counters,
        },
        t2,
    );
    let Some(Action::Apply {
        conn,
        sample,
        decision,
        ..
    }) = t.poll_action()
    else {
        panic!("the decision is carried out");
    };
    assert_eq!(conn, ConnId(0));
    // Timed from the connection's start, with what the core knows beside the counters.
    assert_eq!(sample.now, Duration::from_millis(5));
    assert_eq!(sample.bytes, 1000);
    assert_eq!(sample.probe_rtt, None);
    // The next sample when the law wants it, no sooner than a millisecond.
    assert_eq!(
        t.poll_timeout(),
        Some(t2 + decision.next.max(Duration::from_millis(1)))
    );
    // Nothing is due before then.
    t.handle_timeout(t2);
    assert_eq!(t.poll_action(), None);
}

#[test]
fn what_the_peer_says_reaches_every_sample() {
    let t0 = Instant::now();
    let mut t = Transfer::new(setup(Role::Receiver), None, t0);
    connect(&mut t, None, 1 << 16, t0);
    t.handle(Input::ProbeRtt(Duration::from_millis(100)), t0);
    t.handle(Input::PeerBuffer(4 << 20), t0);
    t.handle(
        Input::Counters {
            conn: ConnId(0),
            counters: Counters::default(),
        },
        t0,
    );
    let Some(Action::Apply { sample, .. }) = t.poll_action() else {
        panic!("an apply");
    };
    assert_eq!(sample.probe_rtt, Some(Duration::from_millis(100)));
    assert_eq!(sample.peer_buffer, Some(4 << 20));
}

#[test]
fn a_receiver_takes_the_control_connections_rtt_as_its_probe_a_sender_does_not() {
    let t0 = Instant::now();
    for (role, probe) in [
        (Role::Receiver, Some(Duration::from_millis(100))),
        (Role::Sender, None),
    ] {
        let mut t = Transfer::new(setup(role), None, t0);
        connect(&mut t, None, 1 << 16, t0);
        t.handle(Input::ControlRtt(Duration::from_millis(100)), t0);
        let counters = Counters::default();
        t.handle(
            Input::Counters {
                conn: ConnId(0),
                counters,
            },
            t0,
        );
        let Some(Action::Apply { sample, .. }) = t.poll_action() else {
            panic!("an apply");
        };
        assert_eq!(sample.probe_rtt, probe, "{role:?}");
    }
}

#[test]
fn a_lone_auto_stream_waits_to_be_paced_until_it_gets_company() {
    let t0 = Instant::now();
    // Root (buffers forced): the lone stream runs unpaced.
    let mut t = auto_sender(1, true, t0);
    assert!(paces(&connect(&mut t, None, 0, t0)).is_empty());
    // Capped buffers: paced from the start.
    let mut capped = auto_sender(1, false, t0);
    assert_eq!(
        paces(&connect(&mut capped, None, 0, t0)),
        [(ConnId(0), Pace::Tcp)]
    );
    // The window holds the stream 80 % of the RTT with no queue (see the stream policy's
    // tests): the policy opens 7 more; the lone stream is paced first.
    let mut s = TcpStats {
        rtt_us: 200_000,
        min_rtt_us: 200_000,
        cwnd_bytes: 100_000,
        snd_wnd: 100_000,
        ..TcpStats::default()
    };
    let look = |t: &mut Transfer, s: &TcpStats, ms: u64| {
        let now = t0 + Duration::from_millis(ms);
        t.handle_timeout(now);
        let mut out = Vec::new();
        while let Some(a) = t.poll_action() {
            if a == Action::Observe {
                t.handle(
                    Input::Observed {
                        streams: std::slice::from_ref(s),
                        cpu: &[],
                        memory: 1,
                    },
                    now,
                );
            } else {
                out.push(a);
            }
        }
        out
    };
    let first = look(&mut t, &s, 100);
    assert!(!first.iter().any(|a| matches!(a, Action::OpenStreams(_))));
    s.cwnd_bytes = 200_000;
    s.snd_wnd = 400_000;
    s.busy_us = 200_000;
    s.rwnd_limited_us = 160_000;
    let step = look(&mut t, &s, 300);
    let open = step
        .iter()
        .position(|a| *a == Action::OpenStreams(7))
        .expect("7 more streams");
    let pace = step
        .iter()
        .position(|a| {
            *a == Action::Pace {
                conn: ConnId(0),
                pace: Pace::Tcp,
            }
        })
        .expect("the lone stream paced");
    assert!(pace < open, "{step:?}");
    assert!(step.iter().any(
        |a| matches!(a, Action::Note(Note::Streams { streams: 8, reason }) if reason.contains("peer's window"))
    ));
    // The streams opened now start paced.
    assert_eq!(
        paces(&connect(&mut t, None, 0, t0 + Duration::from_millis(310))),
        [(ConnId(1), Pace::Tcp)]
    );
    assert!(t.decisions(None).len() >= 2, "{:?}", t.decisions(None));
}

#[test]
fn streams_started_together_tell_the_receiver_once_that_they_are_paced() {
    let t0 = Instant::now();
    let mut t = auto_sender(4, true, t0);
    let tells = |a: &[Action]| -> Vec<Told> {
        a.iter()
            .filter_map(|a| match a {
                Action::Tell(t) => Some(t.clone()),
                _ => None,
            })
            .collect()
    };
    let first = connect(&mut t, None, 0, t0);
    assert_eq!(paces(&first), [(ConnId(0), Pace::Tcp)]);
    assert_eq!(tells(&first), [Told::Paced(PacedBy::Tcp)]);
    assert!(tells(&connect(&mut t, None, 0, t0)).is_empty(), "told once");
    // A count grown from one is not told.
    let mut one = auto_sender(1, true, t0);
    assert!(tells(&connect(&mut one, None, 0, t0)).is_empty());
}

#[test]
fn a_connection_the_kernel_paces_is_not_paced_from_outside() {
    let t0 = Instant::now();
    let mut t = auto_sender(4, true, t0);
    let bic = Some(CongestionControl::Bic { paced: true });
    assert!(paces(&connect(&mut t, bic, 0, t0)).is_empty());
    assert_eq!(
        paces(&connect(&mut t, Some(CongestionControl::Cubic), 0, t0)),
        [(ConnId(1), Pace::Tcp)]
    );
}

/// A sender with two connections whose user chose no congestion control.
fn choosing_sender(t0: Instant) -> Transfer {
    let mut t = Transfer::new(
        TransferSetup {
            choose_cc: true,
            ..setup(Role::Sender)
        },
        None,
        t0,
    );
    connect(&mut t, Some(CongestionControl::Cubic), 0, t0);
    connect(&mut t, Some(CongestionControl::Cubic), 0, t0);
    t
}

/// Four looks at `t`'s two connections losing segments at a 100 ms RTT, their minimum (the
/// policy's own trace): every action but the looks and samples.
fn losses_at_100_ms(t: &mut Transfer, t0: Instant) -> Vec<Action> {
    let mut all = Vec::new();
    for (i, retrans) in [0, 2, 4, 5].into_iter().enumerate() {
        let now = t0 + POLICY_TICK * (i as u32 + 1);
        t.handle_timeout(now);
        while let Some(a) = t.poll_action() {
            match a {
                Action::Observe => {
                    let s = TcpStats {
                        rtt_us: 100_000,
                        min_rtt_us: 100_000,
                        total_retrans: retrans,
                        // 1 MB through per look beside the losses.
                        bytes_acked: (i as u64 + 1) << 20,
                        ..TcpStats::default()
                    };
                    t.handle(
                        Input::Observed {
                            streams: &[s, s],
                            cpu: &[],
                            memory: 0,
                        },
                        now,
                    );
                }
                Action::Sample(_) => {}
                a => all.push(a),
            }
        }
    }
    all
}

#[test]
fn a_queue_the_control_connection_did_not_see_keeps_the_congestion_control() {
    // The control connection crossed the path at 50 ms: the streams' 100 ms is a queue that
    // stood before they opened, and their losses are its overflow.
    let t0 = Instant::now();
    let mut t = choosing_sender(t0);
    t.handle(Input::ControlRtt(Duration::from_millis(50)), t0);
    let all = losses_at_100_ms(&mut t, t0);
    assert!(
        !all.iter().any(|a| matches!(a, Action::SetCc { .. })),
        "{all:?}"
    );
    assert_eq!(t.chosen_cc(), None);
}

#[test]
fn random_loss_switches_every_connection_and_every_later_one_to_bbr() {
    let t0 = Instant::now();
    let mut t = choosing_sender(t0);
    let all = losses_at_100_ms(&mut t, t0);
    let bbr = CongestionControl::Bbr;
    for conn in [ConnId(0), ConnId(1)] {
        assert!(all.contains(&Action::SetCc {
            conn,
            cc: bbr.clone()
        }));
    }
    assert!(all
        .iter()
        .any(|a| matches!(a, Action::Note(Note::Control { cc, .. }) if *cc == bbr)));
    // bbr paces itself: the receiver hears it.
    assert!(all.contains(&Action::Tell(Told::Paced(PacedBy::Control(
        CongestionControl::Bbr
    )))));
    assert_eq!(t.chosen_cc(), Some(bbr.clone()));
    // A later connection starts with it.
    t.open(false, t0);
    assert!(matches!(t.poll_action(), Some(Action::Start { cc: Some(c), .. }) if c == bbr));
    // Nothing is left to decide: no more looks.
    let later = t0 + POLICY_TICK * 10;
    t.handle_timeout(later);
    assert!(!drain(&mut t).contains(&Action::Observe));
}

#[test]
fn a_receiving_connection_opened_beside_grown_siblings_starts_at_its_share() {
    let t0 = Instant::now();
    let mut t = Transfer::new(setup(Role::Receiver), None, t0);
    connect(&mut t, None, 16 << 20, t0);
    // The second: half of the sibling's 16 MiB as accounted is 8 MiB; its share of two.
    let second = connect(&mut t, None, 128 << 10, t0);
    assert!(second.contains(&Action::Seed {
        conn: ConnId(1),
        bytes: 4 << 20
    }));
    // One not well below its siblings starts from scratch.
    let third = connect(&mut t, None, 8 << 20, t0);
    assert!(!third.iter().any(|a| matches!(a, Action::Seed { .. })));
    // One kept from the previous transfer starts at its own window.
    let mut kept = Transfer::new(setup(Role::Receiver), None, t0);
    let conn = kept.open(true, t0).expect("tuned");
    kept.poll_action();
    kept.handle(
        Input::Started {
            conn,
            runs: None,
            buffer: 2 << 20,
            window: 1 << 20,
        },
        t0,
    );
    assert_eq!(
        drain(&mut kept),
        [Action::Seed {
            conn,
            bytes: 1 << 20
        }]
    );
}

#[test]
fn a_peer_that_paces_is_noted_and_the_end_samples_every_connection() {
    let t0 = Instant::now();
    let mut t = Transfer::new(setup(Role::Receiver), None, t0);
    connect(&mut t, None, 0, t0);
    connect(&mut t, None, 0, t0);
    t.handle(
        Input::PeerPaces(PacedBy::Control(CongestionControl::Bbr)),
        t0,
    );
    assert!(matches!(
        t.poll_action(),
        Some(Action::Note(Note::PeerPaces { by, .. })) if by.runs(&CongestionControl::Bbr)
    ));
    t.handle(Input::Ended, t0);
    assert_eq!(
        drain(&mut t),
        [Action::Sample(ConnId(0)), Action::Sample(ConnId(1))]
    );
}

#[test]
fn a_round_announces_one_buffer_after_its_decisions() {
    let t0 = Instant::now();
    // drs-classic announces the receiver's buffer to the sender.
    let mut t = Transfer::new(
        TransferSetup {
            tuning: Some((Tuning::DrsClassic, Params::default())),
            ..setup(Role::Receiver)
        },
        None,
        t0,
    );
    connect(&mut t, None, 1 << 16, t0);
    t.handle(Input::ProbeRtt(Duration::from_millis(100)), t0);
    let mut told = Vec::new();
    let mut bytes = 0;
    for ms in (0..3000).step_by(10) {
        let now = t0 + Duration::from_millis(ms);
        t.handle_timeout(now);
        let mut applied = false;
        while let Some(a) = t.poll_action() {
            match a {
                Action::Sample(conn) => {
                    bytes += 1 << 20;
                    let counters = Counters {
                        bytes,
                        max_read: 1 << 16,
                        rcvbuf: 1 << 16,
                        ..Counters::default()
                    };
                    t.handle(Input::Counters { conn, counters }, now);
                }
                Action::Apply { .. } => applied = true,
                Action::Tell(Told::Buffer(n)) => {
                    assert!(applied, "told after the decision is carried out");
                    told.push(n);
                }
                _ => {}
            }
        }
    }
    assert!(!told.is_empty(), "a growing receiver announces its buffer");
}

/// A rate control that holds one rate.
struct Held(f64);

impl crate::rate::RateControl for Held {
    fn rate(&self) -> f64 {
        self.0
    }
    fn state(&self) -> &'static str {
        "held"
    }
}

#[test]
fn a_udp_channel_runs_under_the_core_its_reports_in_and_its_decisions_out() {
    use fatpipe_proto::udp::{Report, SegmentBits};
    use udp::{LedgerError, UdpEvent};
    let t0 = Instant::now();
    let mut t = Transfer::new(setup(Role::Sender), None, t0);
    assert!(t.poll_transmit(t0, false).is_none(), "no channel yet");
    let rtt = Duration::from_millis(20);
    t.open_udp_sender(UdpSend::new(100 * 1444, 1472, rtt, Box::new(Held(1e9)), t0));
    // Its first decision, the rate it starts at, comes out as an action.
    let first = drain(&mut t);
    assert!(
        matches!(first[..], [Action::Udp(UdpEvent::Rate { after, .. })] if after == 1e9),
        "{first:?}"
    );
    // The packet train goes out at once, and what went is handed back in.
    let Some(Next::Send { packets, .. }) = t.poll_transmit(t0, false) else {
        panic!("the train waits");
    };
    assert!(packets.len() > 1, "{packets:?}");
    t.handle(Input::UdpSent(packets.len() * 1472), t0);
    // A report of a segment the transfer does not have fails it, and crashes nothing.
    let impossible = Report {
        received: 1,
        segments: vec![SegmentBits {
            segment: 99,
            bits: vec![1],
        }],
        ..Report::default()
    };
    t.handle(Input::UdpReport(impossible), t0 + rtt);
    let after = drain(&mut t);
    let failed = Action::UdpFailed(LedgerError::NoSuchSegment(99));
    assert!(after.contains(&failed), "{after:?}");
}
