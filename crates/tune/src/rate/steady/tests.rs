//! The default controller's decisions on traces and on the path model.

use super::*;
use crate::rate::testing::UdpPath;

fn limits() -> RateLimits {
    RateLimits {
        start: 10e6,
        max: 10e9,
    }
}

#[test]
fn holds_the_line_rate_through_random_loss() {
    for loss in [0.0, 0.01, 0.05] {
        let mut path = UdpPath::new(1e9, 0.1, loss);
        let mut c = Steady::new(limits());
        let run = path.run(&mut c, 20.0);
        let goodput = run.goodput_after(5.0);
        assert!(
            goodput > 0.9e9 * (1.0 - loss),
            "{loss}: goodput {goodput:.3e}"
        );
        assert!(run.overflow_share_after(5.0) < 0.01, "{loss}: {:?}", run);
    }
}

#[test]
fn starts_up_at_bbrs_gain_and_settles_at_the_bottleneck() {
    let mut path = UdpPath::new(1e9, 0.1, 0.01);
    let mut c = Steady::new(limits());
    let run = path.run(&mut c, 4.0);
    let at = |t: f64| run.trace.iter().find(|s| s.0 >= t).map_or(0.0, |s| s.1);
    // From 10 Mbit/s past the gigabit in seven round trips (doubling took ten), then
    // below it while the queue start-up built drains, and back at the bottleneck.
    assert!(at(0.3) < 0.2e9 && at(0.7) > 1.2e9, "{:?}", run.trace);
    assert!(at(0.8) < 0.6e9 && at(1.2) > 0.95e9, "{:?}", run.trace);
    let (_, _, state, _) = run.trace[run.trace.len() - 1];
    assert_ne!(state, "startup");
    let settled: Vec<f64> = run
        .trace
        .iter()
        .filter(|s| s.0 > 2.0)
        .map(|s| s.1)
        .collect();
    assert!(
        settled.iter().all(|&r| r > 0.7e9 && r < 1.3e9),
        "{settled:?}"
    );
}

#[test]
fn a_packet_train_starts_it_at_the_bottleneck_and_a_wrong_one_is_corrected() {
    // A gigabit path at 100 ms with 1 % loss, the train showing `shows`.
    let with_train = |shows: f64| {
        let mut path = UdpPath::new(1e9, 0.1, 0.01);
        path.train = Some(shows);
        path.run(&mut Steady::new(limits()), 3.0)
    };
    let at = |run: &crate::rate::testing::Run, t: f64| {
        run.trace.iter().find(|s| s.0 >= t).map_or(0.0, |s| s.1)
    };
    // The train told the truth: at the gigabit a round trip in, no queue overflows.
    let run = with_train(0.99e9);
    assert!(at(&run, 0.2) > 0.95e9, "{:?}", run.trace);
    assert!(run.overflow_share_after(0.0) < 0.001, "{run:?}");
    assert!(run.goodput_after(0.3) > 0.95 * 0.99e9, "{run:?}");
    // Twice the truth: what reached the receiver brings it down within a few round trips.
    let run = with_train(2e9);
    assert!(at(&run, 0.6) < 1.1e9, "{:?}", run.trace);
    assert!(run.goodput_after(1.0) > 0.9 * 0.99e9, "{run:?}");
    // Half the truth: start-up and cruise's probing find the rest.
    let run = with_train(0.5e9);
    assert!(run.goodput_after(1.5) > 0.9 * 0.99e9, "{:?}", run.trace);
}

#[test]
fn a_train_that_read_the_path_low_holds_start_up_back_for_a_round_trip_only() {
    // A gigabit path read as a third of it: held at the reading, start-up ended there and
    // cruise's probing took seconds to find the rest (0.67 Gbit/s over the first 3 s).
    let mut path = UdpPath::new(1e9, 0.1, 0.01);
    path.train = Some(0.33e9);
    let run = path.run(&mut Steady::new(limits()), 3.0);
    assert!(run.goodput_after(0.2) > 0.8e9, "{:?}", run.trace);
    assert_eq!(run.overflow_share_after(0.0), 0.0, "{run:?}");
}

#[test]
fn the_drain_after_a_start_up_at_the_train_s_rate_keeps_the_link_busy() {
    // The train told the truth, or a tenth more: start-up overshot by a few percent, the
    // queue it built shows a round trip late, and a drain at half the rate for that round
    // trip left the link idle for most of it (0.957-0.959 Gbit/s over the first 2 s).
    for shows in [0.99e9, 1.1e9] {
        let mut path = UdpPath::new(1e9, 0.1, 0.01);
        path.train = Some(shows);
        let run = path.run(&mut Steady::new(limits()), 2.0);
        assert!(
            run.goodput_after(0.2) > 0.968e9,
            "{shows:e}: {:?}",
            run.trace
        );
        assert_eq!(run.overflow_share_after(0.0), 0.0, "{shows:e}: {run:?}");
    }
}

/// A report of `ms` receiver milliseconds at `now_ms` (sender's clock) in which `mbit`
/// Mbit/s arrived, with `queue_ms` of queue, 1 % lost, on a 100 ms path.
fn report(now_ms: u64, ms: u64, mbit: f64, queue_ms: u64) -> Feedback {
    let packets = (mbit * 1e6 * ms as f64 / 1e3 / (1442.0 * 8.0)) as u64;
    Feedback {
        now: Duration::from_millis(now_ms),
        interval: Duration::from_millis(ms),
        delivered: packets,
        lost: packets / 100,
        queue: Duration::from_millis(queue_ms),
        rtt: Duration::from_millis(100),
        packet: 1442,
    }
}

#[test]
fn a_burst_counted_into_a_short_report_does_not_become_the_estimate() {
    // Start-up on a gigabit path: a round trip at 600 Mbit/s, then one at the gigabit.
    let mut c = Steady::new(limits());
    c.on_capacity(1e9);
    c.on_feedback(&report(200, 100, 600.0, 0));
    c.on_feedback(&report(300, 100, 980.0, 0));
    // A receiver that ran late counts 14 ms of packets into 10: "1.4 Gbit/s", and the
    // queue start-up built shows: start-up ends on this short report.
    c.on_feedback(&report(310, 10, 1400.0, 15));
    assert_eq!(c.state(), "drain");
    // The queue drains at the bottleneck's rate over the next round trip.
    c.on_feedback(&report(410, 100, 980.0, 1));
    assert_eq!(c.state(), "cruise");
    // Cruise goes on from the gigabit the path delivered, not from the burst.
    assert!(c.rate() < 1.05e9, "{}", c.rate());
}

#[test]
fn reports_bunched_behind_a_stalled_feedback_connection_back_off_once() {
    let mut path = UdpPath::new(1e9, 0.1, 0.01);
    let mut c = Steady::new(limits());
    path.run(&mut c, 3.0);
    // Five round trips of reports held up by a loss on the feedback connection arrive at
    // once, each showing the queue of the same moment, and the queue stays: one back-off
    // (to at least 0.9 of the cruise cycle's lowest rate, 0.75 of the gigabit), not one per
    // report (0.49).
    let mut now = 3_100;
    for i in 0..5 {
        c.on_feedback(&report(now + i, 100, 980.0, 40));
    }
    while c.state() != "backoff" {
        now += 100;
        c.on_feedback(&report(now, 100, 980.0, 40));
        assert!(now < 3_500, "no back-off: {}", c.rate());
    }
    assert!(c.rate() > 0.65e9, "{}", c.rate());
}

/// A controller cruising on a gigabit path at 1 % loss, fed round trips of reports at the
/// gigabit with no queue until `reached` holds of it; and the time of its last report.
fn cruising_until(reached: impl Fn(&Steady) -> bool) -> (Steady, u64) {
    let mut path = UdpPath::new(1e9, 0.1, 0.01);
    let mut c = Steady::new(limits());
    path.run(&mut c, 3.0);
    let mut now = 3_000;
    while !reached(&c) {
        now += 100;
        c.on_feedback(&report(now, 100, 980.0, 0));
        assert!(now < 4_000, "not reached: {}", c.rate());
    }
    (c, now)
}

/// A controller in the round trip of a cruise probe (1.25 of the estimate).
fn probing() -> (Steady, u64) {
    cruising_until(|c| c.rate() >= 1.2e9)
}

#[test]
fn reports_that_come_bunched_do_not_cut_a_probe_short() {
    let (mut c, now) = probing();
    // Round trips of reports held up behind a loss come together 5 ms into the probe: they
    // join its round, which goes on for a round trip of the sender's time (ended there, a
    // drain at 0.75 followed at once and left the link idle).
    for i in 1..=3 {
        c.on_feedback(&report(now + 5 + i, 100, 980.0, 0));
    }
    c.on_tick(Duration::from_millis(now + 50));
    assert!(c.rate() > 1.2e9, "{}", c.rate());
    c.on_tick(Duration::from_millis(now + 100));
    assert!((0.95e9..1.05e9).contains(&c.rate()), "{}", c.rate());
}

#[test]
fn a_probe_lasts_a_round_trip_of_the_sender_s_time_though_the_reports_stall() {
    let (mut c, now) = probing();
    // Then the reports stall behind a loss on the feedback connection: the probe goes on
    // for its round trip, and ends there (run on at 1.25, it built 25 ms of queue a round
    // trip).
    c.on_tick(Duration::from_millis(now + 90));
    assert!(c.rate() > 1.2e9, "{}", c.rate());
    c.on_tick(Duration::from_millis(now + 100));
    assert!((0.95e9..1.05e9).contains(&c.rate()), "{}", c.rate());
}

/// A controller cruising on a gigabit path at 1 % loss, in the round trip that drains
/// what its last probe queued (0.75 of the estimate); and the time of its last report.
fn in_a_drain_round() -> (Steady, u64) {
    cruising_until(|c| c.rate() <= 0.8e9)
}

#[test]
fn a_back_off_in_a_drain_round_falls_from_the_estimate_not_from_the_drain_s_rate() {
    let (mut c, now) = in_a_drain_round();
    // A queue stands (someone else's, or an estimate a little high): back off to 0.9 of
    // what the path carries, not to 0.9 of the drain's 0.75 (0.66 of the gigabit, which
    // left the link idle once the queue was gone).
    c.on_feedback(&report(now + 100, 100, 980.0, 40));
    assert_eq!(c.state(), "backoff");
    assert!((0.85e9..0.95e9).contains(&c.rate()), "{}", c.rate());
}

#[test]
fn after_a_back_off_cruise_probes_once_a_cycle_not_every_round_trip() {
    let (mut c, mut now) = in_a_drain_round();
    now += 100;
    c.on_feedback(&report(now, 100, 980.0, 40));
    assert_eq!(c.state(), "backoff");
    // The queue drains and the path delivers the gigabit: measured against the rate it
    // backed off to, the path looked as if it gave more, and cruise probed at 1.25 every
    // round trip (each building 25 ms of queue).
    let mut probes = 0;
    for _ in 0..8 {
        now += 100;
        c.on_feedback(&report(now, 100, 980.0, 1));
        probes += usize::from(c.rate() > 1.2e9);
    }
    assert!(probes <= 2, "{probes} probes in 8 round trips");
}

#[test]
fn start_up_bounds_the_packets_out_and_cruise_does_not() {
    let mut c = Steady::new(limits());
    assert_eq!(c.in_flight(), None, "nothing known yet");
    // 173 packets of 1,442 bytes in 20 ms: 99.8 Mbit/s reached the receiver.
    c.on_feedback(&Feedback {
        now: Duration::from_millis(120),
        interval: Duration::from_millis(20),
        delivered: 173,
        lost: 0,
        queue: Duration::ZERO,
        rtt: Duration::from_millis(100),
        packet: 1442,
    });
    assert!((c.rate() - 2.89 * 99.8e6).abs() < 1e6, "{}", c.rate());
    // Four round trips of that: 3,460 packets.
    let cap = c.in_flight().unwrap_or(0);
    assert!((3400..3500).contains(&cap), "{cap}");
    let mut path = UdpPath::new(1e9, 0.1, 0.01);
    path.run(&mut c, 3.0);
    assert_eq!((c.state(), c.in_flight()), ("cruise", None));
}

#[test]
fn shares_with_a_loss_based_flow_without_stalling_and_takes_the_path_back_when_it_leaves() {
    // A cubic-like flow fills the queue for 20 s (100 ms, 1 Gbit/s), then leaves.
    let mut path = UdpPath::new(1e9, 0.1, 0.0);
    path.tcp_until = Some(20.0);
    let mut c = Steady::new(limits());
    let run = path.run(&mut c, 30.0);
    let beside = run
        .trace
        .iter()
        .filter(|s| s.0 > 5.0 && s.0 < 20.0)
        .map(|s| s.1)
        .sum::<f64>()
        / 150.0;
    let tcp = run.tcp_bits / 20.0;
    // The loss-based flow keeps most of the path; this one keeps a share, and together
    // they fill it.
    assert!(tcp > 0.3e9, "tcp {tcp:.3e}, udp {beside:.3e}");
    assert!(beside > 0.15e9 && beside < 0.7e9, "udp {beside:.3e}");
    // Within two seconds of its leaving, the path is this flow's again.
    assert!(run.goodput_after(22.0) > 0.85e9, "{run:?}");
}

#[test]
fn follows_the_path_down_when_its_capacity_falls_below_the_floor() {
    // 1 Gbit/s, then 100 Mbit/s from 5 s on: far below a quarter of the first estimate.
    let mut path = UdpPath::new(1e9, 0.1, 0.0);
    path.step = Some((5.0, 100e6));
    let mut c = Steady::new(limits());
    let run = path.run(&mut c, 20.0);
    let late: Vec<f64> = run
        .trace
        .iter()
        .filter(|s| s.0 > 12.0)
        .map(|s| s.1)
        .collect();
    assert!(late.iter().all(|&r| r < 0.15e9), "{late:?}");
    assert!(run.goodput_after(12.0) > 80e6, "{run:?}");
    assert!(run.overflow_share_after(12.0) < 0.05, "{run:?}");
}

#[test]
fn yields_to_a_queue_it_did_not_build() {
    // A competing flow takes 600 Mbit/s of the gigabit: this one settles into the rest.
    let mut path = UdpPath::new(1e9, 0.1, 0.0);
    path.cross = 0.6e9;
    let mut c = Steady::new(limits());
    let run = path.run(&mut c, 20.0);
    let goodput = run.goodput_after(5.0);
    assert!(goodput > 0.3e9 && goodput < 0.42e9, "{goodput:.3e}");
}

#[test]
fn backs_off_from_a_policer_that_drops_without_queueing() {
    // No buffer: excess is dropped at once, and the loss grows with the rate.
    let mut path = UdpPath::new(200e6, 0.05, 0.0);
    path.buffer = 0.0;
    let mut c = Steady::new(limits());
    let run = path.run(&mut c, 20.0);
    assert!(run.goodput_after(5.0) > 0.15e9, "{:?}", run);
    assert!(run.overflow_share_after(5.0) < 0.15, "{:?}", run);
}

#[test]
fn on_a_path_shorter_than_a_report_interval_a_probe_lasts_a_report() {
    // Loopback: a round trip of 20 µs, reports every 10 ms, 30 Gbit/s through a socket
    // buffer of 16 MiB, and a train that read 1.2 Gbit/s (the receiver put aside).
    let mut path = UdpPath::new(30e9, 20e-6, 0.0);
    path.buffer = 16.0 * 8.0 * 1024.0 * 1024.0;
    path.train = Some(1.2e9);
    path.tick = 10e-6;
    let mut c = Steady::new(RateLimits {
        start: 10e6,
        max: 100e9,
    });
    let run = path.run(&mut c, 1.0);
    let goodput = run.goodput_after(0.5);
    assert!(goodput > 0.85 * 30e9, "{goodput:.3e}: {:?}", run.trace);
}

#[test]
fn on_short_paths_probes_fit_a_queue_of_a_round_trip() {
    // A LAN: reports come every 10 ms, a round trip is shorter, the queue holds one.
    for rtt in [0.0005, 0.002, 0.005] {
        for loss in [0.0, 0.01] {
            let mut path = UdpPath::new(1e9, rtt, loss);
            path.tick = 100e-6;
            let run = path.run(&mut Steady::new(limits()), 8.0);
            let goodput = run.goodput_after(5.0);
            assert!(goodput > 0.95e9 * (1.0 - loss), "{rtt} s, {loss}: {run:?}");
            assert!(
                run.overflow_share_after(5.0) < 0.001,
                "{rtt} s, {loss}: {run:?}"
            );
        }
    }
}
