//! The UDP sender's decisions on hand-written report traces.

use super::*;
use fatpipe_proto::udp::{SegmentBits, SEGMENT};

/// A controller that holds one rate.
struct Fixed(f64);

impl RateControl for Fixed {
    fn rate(&self) -> f64 {
        self.0
    }
    fn state(&self) -> &'static str {
        "fixed"
    }
}

/// 1472-byte packets: 1444 bytes of payload each.
const PACKET: u16 = 1472;
const PAYLOAD: u64 = 1444;

fn sender(packets: u64, rate: f64, t0: Instant) -> UdpSend {
    let rtt = Duration::from_millis(20);
    UdpSend::new(packets * PAYLOAD, PACKET, rtt, Box::new(Fixed(rate)), t0)
}

/// Asks for packets until the sender waits twice running (a look that queues resends waits
/// once, as a driver does); sends them at `now`; returns their indices.
fn send_all_due(s: &mut UdpSend, now: Instant) -> Vec<u64> {
    let mut all = Vec::new();
    let mut waited = false;
    for _ in 0..10_000 {
        match s.poll_send(now, false) {
            Next::Send { packets, .. } => {
                s.on_sent(packets.len() * usize::from(PACKET), now);
                all.extend(packets.iter().map(|p| p.0));
                waited = false;
            }
            Next::Wait(_) if waited => break,
            Next::Wait(_) => waited = true,
        }
    }
    all
}

/// A report at `ms` of the receiver's clock that packets `have` (of segment 0) arrived, the
/// highest transmission among them `max_tx`.
fn report(ms: u64, have: &[u64], max_tx: u64, total: u64) -> Report {
    let mut bits = vec![0u8; (total.min(SEGMENT) as usize).div_ceil(8)];
    for &i in have {
        bits[i as usize / 8] |= 1 << (i % 8);
    }
    Report {
        at_us: ms * 1000,
        max_tx,
        received: have.len() as u64,
        segments: vec![SegmentBits { segment: 0, bits }],
        ..Report::default()
    }
}

#[test]
fn the_train_goes_back_to_back_then_the_rate_paces() {
    let t0 = Instant::now();
    // 8 Mbit/s: one 1472-byte packet every 1.47 ms.
    let mut s = sender(1000, 8e6, t0);
    let first = send_all_due(&mut s, t0);
    assert_eq!(first.len(), TRAIN as usize, "the train at once");
    assert_eq!(first, (0..TRAIN).collect::<Vec<_>>());
    // A second later the rate has let about a second's worth go (within the bucket's burst).
    let mut sent = 0;
    for ms in 1..=1000 {
        sent += send_all_due(&mut s, t0 + Duration::from_millis(ms)).len();
    }
    let per_s = 8e6 / 8.0 / f64::from(PACKET);
    assert!(
        (sent as f64 - per_s).abs() < 0.05 * per_s,
        "{sent} packets in a second at {per_s:.0}/s"
    );
    // The start's rate is the first event.
    assert!(matches!(s.poll_event(), Some(UdpEvent::Rate { after, .. }) if after == 8e6));
}

/// A sender at 1 Gbit/s (85 packets a millisecond) over a path of `rtt` whose driver looks
/// every 0.25 ms, but is put aside for 15 ms of every 50 (a busy host's scheduler): the
/// packets sent in a second, those due, and the most sent in one look after the start.
fn put_aside(rtt: Duration) -> (f64, f64, f64) {
    let t0 = Instant::now();
    let mut s = UdpSend::new((1 << 20) * PAYLOAD, PACKET, rtt, Box::new(Fixed(1e9)), t0);
    let (mut sent, mut most) = (0usize, 0usize);
    let mut us = 0u64;
    while us < 1_000_000 {
        us += if us % 50_000 < 250 { 15_000 } else { 250 };
        let n = send_all_due(&mut s, t0 + Duration::from_micros(us)).len();
        sent += n;
        if us > 20_000 {
            most = most.max(n);
        }
    }
    (sent as f64, 1e9 / 8.0 / f64::from(PACKET), most as f64)
}

#[test]
fn time_a_late_driver_lost_is_made_up_paced_not_in_one_burst() {
    let (sent, due, most) = put_aside(Duration::from_millis(20));
    assert!(sent > 0.97 * due, "{sent} packets of {due:.0} due");
    assert!(sent < 1.01 * due + TRAIN as f64, "{sent} of {due:.0}");
    // Back to back: the burst (4 ms at the rate), not the 15 ms owed.
    let per_ms = due / 1000.0;
    assert!(most < 5.0 * per_ms, "{most} packets in one look");
    assert!(most > 3.0 * per_ms, "{most} packets in one look");
}

#[test]
fn on_a_short_path_the_burst_fits_the_queue_of_a_round_trip() {
    // 1 ms: a queue of one round trip holds 85 packets; 4 ms back to back overflowed it.
    let (sent, due, most) = put_aside(Duration::from_millis(1));
    assert!(sent > 0.97 * due, "{sent} packets of {due:.0} due");
    assert!(most <= 2.0 * BATCH as f64, "{most} packets in one look");
}

#[test]
fn losses_below_the_highest_arrival_are_resent_first() {
    let t0 = Instant::now();
    let mut s = sender(1000, 1e9, t0);
    let train = send_all_due(&mut s, t0);
    assert_eq!(train.len(), TRAIN as usize);
    // The train arrived but for 7 and 40, its last transmission among it.
    let have: Vec<u64> = (0..TRAIN).filter(|i| ![7, 40].contains(i)).collect();
    s.on_report(
        report(20, &have, TRAIN, 1000),
        t0 + Duration::from_millis(21),
    )
    .unwrap();
    assert!(s.through());
    let next = send_all_due(&mut s, t0 + Duration::from_millis(22));
    assert_eq!(next[..3], [7, 40, TRAIN]);
    assert_eq!(next.iter().filter(|&&i| i == 7 || i == 40).count(), 2);
}

#[test]
fn the_tails_losses_are_found_by_age_unless_the_reports_are_late() {
    let t0 = Instant::now();
    let mut s = sender(50, 1e9, t0);
    assert_eq!(send_all_due(&mut s, t0).len(), 50);
    // Packets 45-49 never arrive, and nothing sent after them can show it.
    let have: Vec<u64> = (0..45).collect();
    s.on_report(report(20, &have, 45, 50), t0 + Duration::from_millis(20))
        .unwrap();
    let soon = t0 + Duration::from_millis(25);
    assert_eq!(send_all_due(&mut s, soon), Vec::<u64>::new());
    // A round trip and a quarter and 10 ms after they went, they are sent again (twice
    // each), but not while the reports are late.
    let later = t0 + Duration::from_millis(40);
    assert_eq!(s.poll_send(later, true), Next::Wait(TICK));
    let again = send_all_due(&mut s, later);
    assert_eq!(again, [45, 45, 46, 46, 47, 47, 48, 48, 49, 49]);
    assert!(s
        .events
        .iter()
        .any(|e| matches!(e, UdpEvent::AllSent(_, 50))));
}

#[test]
fn reports_make_status_and_segment_events() {
    let t0 = Instant::now();
    let mut s = sender(10, 1e9, t0);
    send_all_due(&mut s, t0);
    let all: Vec<u64> = (0..10).collect();
    s.on_report(report(20, &all, 10, 10), t0 + Duration::from_millis(20))
        .unwrap();
    let events: Vec<UdpEvent> = std::iter::from_fn(|| s.poll_event()).collect();
    assert!(events.contains(&UdpEvent::Segment {
        segment: 0,
        packets: 10,
        lost: vec![]
    }));
    assert!(events
        .iter()
        .any(|e| matches!(e, UdpEvent::Status { rate, .. } if *rate == 1e9)));
    // A report that claims a packet never sent arrived is an error.
    let mut s = sender(1000, 1e9, t0);
    send_all_due(&mut s, t0);
    assert_eq!(
        s.on_report(
            report(20, &[500], 128, 1000),
            t0 + Duration::from_millis(20)
        ),
        Err(LedgerError::NeverSent(500))
    );
}

#[test]
fn the_path_s_own_loss_leaves_out_what_a_full_queue_dropped() {
    let t0 = Instant::now();
    let mut s = sender(1000, 1e9, t0);
    send_all_due(&mut s, t0);
    // Packets 0–299 go once each (transmissions 1–300) before any report.
    assert!(send_all_due(&mut s, t0 + Duration::from_millis(5)).len() >= 300 - TRAIN as usize);
    assert_eq!(s.path_loss_percent(), None);
    // The train's first half arrives with no queue standing, but for one packet: the path's.
    let calm: Vec<u64> = (0..64).filter(|&i| i != 10).collect();
    s.on_report(report(20, &calm, 64, 1000), t0 + Duration::from_millis(21))
        .unwrap();
    assert_eq!(s.path_loss_percent(), Some(100.0 / 64.0));
    // Its second half behind a 30 ms queue, 40 of its 64 dropped where it overflowed: not the
    // path's own loss.
    let mut full = calm.clone();
    full.extend((64..128).filter(|i| i % 8 < 3));
    let overflowed = Report {
        queue_us: 30_000,
        ..report(30, &full, 128, 1000)
    };
    s.on_report(overflowed, t0 + Duration::from_millis(31))
        .unwrap();
    assert_eq!(full.len(), 63 + 24);
    assert_eq!(s.path_loss_percent(), Some(100.0 / 64.0));
    // The report after it shows no queue, but gaps the overflow left may show only now: not
    // the path's either.
    let mut after = full.clone();
    after.extend((128..200).filter(|i| i % 2 == 0));
    s.on_report(
        report(40, &after, 200, 1000),
        t0 + Duration::from_millis(41),
    )
    .unwrap();
    assert_eq!(s.path_loss_percent(), Some(100.0 / 64.0));
    // The one after that counts again.
    let mut later = after.clone();
    later.extend(200..300);
    s.on_report(
        report(50, &later, 300, 1000),
        t0 + Duration::from_millis(51),
    )
    .unwrap();
    assert_eq!(s.path_loss_percent(), Some(100.0 / 164.0));
}
