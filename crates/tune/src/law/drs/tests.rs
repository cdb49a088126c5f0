//! The `drs` law on synthetic paths (`crate::testing::FluidPath`) and traces.

use super::*;
use crate::testing::FluidPath;

fn receiver() -> Drs {
    Drs::new(Role::Receiver, &Params::default())
}

#[test]
fn receiver_keeps_ahead_of_slow_start_and_stops_at_the_bdp() {
    // 1 Gbit/s, 100 ms: BDP 12.5 MB. Start from the kernel's 64 KiB; the sender starts at
    // ten segments and doubles per round.
    let mut path = FluidPath::new(125e6, 0.1);
    let mut law = receiver();
    let chosen = path.run(&mut law, 10.0);
    // Slow start alone reaches the BDP after about ten rounds: the window never holds
    // it back by more than a round.
    let reached = chosen.iter().find(|&&(_, w)| w >= 12.5e6).map(|&(t, _)| t);
    assert!(reached.is_some_and(|t| t < 1.2), "too slow: {chosen:?}");
    // The trains show the capacity before the window gets there: it never overshoots
    // (memory), the queue never overflows, and it settles at 1.1 BDP.
    assert!(chosen.iter().all(|c| c.1 <= 1.2 * 12.5e6), "{chosen:?}");
    assert_eq!(path.losses, 0);
    assert!(
        (12.5e6..=1.2 * 12.5e6).contains(&path.window),
        "{} bytes; {chosen:?}",
        path.window
    );
    // Steady throughput is the path's, without trials (the path is the limit).
    let before = path.bytes;
    let later = path.run(&mut law, 12.0);
    assert!((path.bytes - before) / 2.0 > 0.99 * 125e6);
    assert!(later.is_empty(), "{later:?}");
}

#[test]
fn without_timed_trains_the_receiver_grows_fourfold_until_a_queue_shows() {
    // 10 ms: a tenth of the RTT is too short to time trains; the queue ends start-up.
    let mut path = FluidPath::new(125e6, 0.01);
    let mut law = receiver();
    path.run(&mut law, 3.0);
    assert!(
        (1.25e6..=2.0 * 1.25e6).contains(&path.window),
        "{}",
        path.window
    );
    let before = path.bytes;
    path.run(&mut law, 4.0);
    assert!(path.bytes - before > 0.99 * 125e6);
}

#[test]
fn receiver_shrinks_after_the_rate_falls_but_not_at_once() {
    let mut path = FluidPath::new(62.5e6, 0.04);
    let mut law = receiver();
    path.run(&mut law, 5.0);
    let high = path.window;
    assert!(high >= 2.5e6, "{high}");
    // 500 -> 50 Mbit/s: the BDP falls tenfold; the window waits, then shrinks.
    path.rate = 6.25e6;
    let early = path.run(&mut law, 5.5);
    assert!(
        early.iter().all(|c| c.1 >= 2.5e6),
        "shrank within 0.5 s: {early:?}"
    );
    path.run(&mut law, 10.0);
    assert!(path.window <= 0.4e6, "did not shrink: {}", path.window);
    assert!(
        path.window >= 0.25e6 * 1.1,
        "below the BDP: {}",
        path.window
    );
}

#[test]
fn the_window_never_falls_below_a_few_of_the_peers_segments() {
    // Loopback read at 50 Mbit/s (--limit-rate): a BDP of a few hundred bytes. A window
    // under a few 64 KiB segments would stall on Linux's window-update rules.
    let mut path = FluidPath::new(6.25e6, 50e-6);
    path.segment = 65483;
    let mut law = receiver();
    path.run(&mut law, 10.0);
    assert!(path.window >= 8.0 * 65483.0, "{}", path.window);
    // 1448-byte segments: the floor is the stock buffer's.
    let mut path = FluidPath::new(6.25e6, 50e-6);
    let mut law = receiver();
    path.run(&mut law, 10.0);
    assert!(path.window < 8.0 * 65483.0, "{}", path.window);
}

#[test]
fn receiver_follows_a_tenfold_rate_increase_within_seconds() {
    // 50 -> 500 Mbit/s at 200 ms: BDP 1.25 -> 12.5 MB. The trains show the new capacity
    // at once; trials of a quarter each would need ten of them.
    let mut path = FluidPath::new(6.25e6, 0.2);
    let mut law = receiver();
    path.run(&mut law, 10.0);
    assert!(path.window < 2e6, "{}", path.window);
    path.rate = 62.5e6;
    let chosen = path.run(&mut law, 14.0);
    assert!(path.window >= 12.5e6, "{chosen:?}");
    assert!(chosen.iter().all(|c| c.1 <= 1.2 * 12.5e6), "{chosen:?}");
}

#[test]
fn bursts_on_a_full_path_are_no_room_for_a_larger_window() {
    // 1 Gbit/s, 100 ms, settled at the steady window (its queue stretches the RTT a tenth);
    // from 3 s on what arrives comes in bursts at 2.5 Gbit/s (a delay line or a reader put
    // aside releasing what waited). Taken for trains, they tried a window of 2.6 x BDP at
    // once, which overflowed the queue.
    let mut path = FluidPath::new(125e6, 0.1);
    let mut law = receiver();
    path.run(&mut law, 3.0);
    let steady = path.window;
    assert!(steady <= 1.2 * 12.5e6, "{steady}");
    path.burst = Some(2.5 * 125e6);
    let chosen = path.run(&mut law, 10.0);
    assert!(chosen.iter().all(|c| c.1 <= 1.2 * 12.5e6), "{chosen:?}");
    assert_eq!(path.losses, 0);
}

#[test]
fn one_of_several_connections_stops_at_its_share_of_the_capacity() {
    // One of four connections on 1 Gbit/s, 100 ms: its trains cross the bottleneck at the
    // full rate, but it gets a quarter of it (BDP 3.125 MB).
    let peak = |streams: u32| {
        let mut path = FluidPath::new(31.25e6, 0.1);
        path.burst = Some(125e6);
        let mut law = receiver();
        law.set_streams(streams);
        let chosen = path.run(&mut law, 4.0);
        chosen.iter().map(|c| c.1).fold(0.0, f64::max)
    };
    assert!(peak(4) <= 1.3 * 3.125e6, "{}", peak(4));
    // Told nothing, it takes the trains for its own and overshoots its share.
    assert!(peak(1) > 1.5 * 3.125e6, "{}", peak(1));
}

#[test]
fn a_receiver_told_its_sender_paces_takes_no_share_of_its_packets_rate() {
    // bbr paces each connection itself (it says so: `126 PACED`): its packets' spacing is
    // no bottleneck train, and a window held to an eighth of it would end bbr's start-up.
    // One connection alone on 250 Mbit/s, 100 ms (BDP 3.125 MB), seven siblings told.
    let run = |paces: bool| {
        let mut path = FluidPath::new(31.25e6, 0.1);
        path.burst = Some(125e6);
        let mut law = receiver();
        law.set_streams(8);
        if paces {
            law.sender_paces();
        }
        let chosen = path.run(&mut law, 4.0);
        chosen.iter().find(|c| c.1 >= 3.125e6).map(|c| c.0)
    };
    // Told, the window reaches the BDP with slow start (about six RTTs); untold, an eighth of
    // the packets' rate holds it back for more than a second.
    assert!(run(true).is_some_and(|t| t < 0.8), "{:?}", run(true));
    assert!(run(false).is_some_and(|t| t > 1.2), "{:?}", run(false));
}

#[test]
fn receiver_follows_an_rtt_increase() {
    let mut path = FluidPath::new(12.5e6, 0.04);
    let mut law = receiver();
    path.run(&mut law, 5.0);
    path.base = 0.2; // BDP 0.5 MB -> 2.5 MB
    path.run(&mut law, 12.0);
    assert!(path.window >= 0.95 * 2.5e6, "{}", path.window);
    let before = path.bytes;
    path.run(&mut law, 14.0);
    assert!((path.bytes - before) / 2.0 > 0.95 * 12.5e6);
}

/// A receiver seeded with `seed` bytes on a path of `rate` bytes/s and `base` s, run
/// `until` seconds: the windows it chose.
fn seeded_run(rate: f64, base: f64, seed: u64, until: f64) -> Vec<(f64, f64)> {
    let mut path = FluidPath::new(rate, base);
    path.window = seed as f64;
    let mut law = receiver();
    assert!(law.seed(seed));
    path.run(&mut law, until)
}

#[test]
fn a_seeded_receiver_keeps_its_window_until_the_connection_fills_it() {
    // A new MODE E connection starts at its siblings' 4 MB window; its sender needs a while
    // (slow start, here a slow share of the path) before it fills that.
    let chosen = seeded_run(1e6, 0.1, 4_000_000, 5.0);
    assert!(chosen.iter().all(|c| c.1 >= 4e6), "shrank: {chosen:?}");
    // A sender's law takes no seed.
    assert!(!Drs::new(Role::Sender, &Params::default()).seed(1 << 20));
}

#[test]
fn a_receiver_seeded_early_still_grows_at_start_up_pace() {
    // Opened beside a sibling that had just begun: seeded with 500 kB on a path of 1 Gbit/s
    // and 200 ms (BDP 25 MB). Growth by trials (a quarter per few RTTs) would take seconds;
    // slow start alone takes eleven rounds (2.2 s).
    let chosen = seeded_run(125e6, 0.2, 500_000, 4.0);
    let reached = chosen.iter().find(|&&(_, w)| w >= 25e6).map(|&(t, _)| t);
    assert!(reached.is_some_and(|t| t < 2.6), "too slow: {chosen:?}");
}

fn sender_sample(t_ms: u64, cwnd: u64, snd_wnd: u32, limited_us: u64, sndbuf: u64) -> Sample {
    Sample {
        now: Duration::from_millis(t_ms),
        sndbuf,
        tcp: Some(TcpStats {
            min_rtt_us: 100_000,
            cwnd_bytes: cwnd,
            snd_wnd,
            sndbuf_limited_us: limited_us,
            ..TcpStats::default()
        }),
        ..Sample::default()
    }
}

/// The RTT `sender_sample` reports.
const RTT: Duration = Duration::from_millis(100);

/// The send buffer for `flight` at [`RTT`] with the first unsent time.
fn sndbuf(flight: u64) -> u64 {
    sndbuf_for(flight, RTT, UNSENT_TIME)
}

#[test]
fn sender_holds_what_may_be_in_flight() {
    let mut law = Drs::new(Role::Sender, &Params::default());
    // Slow start: the congestion window doubles; the buffer holds the next RTT's window,
    // looked at every tenth of an RTT.
    let d = law.on_sample(&sender_sample(0, 1 << 20, 64 << 20, 0, 0));
    assert_eq!(d.set.sndbuf, Some(sndbuf(2 << 20)));
    assert_eq!(d.next, Duration::from_millis(10));
    let d = law.on_sample(&sender_sample(100, 2 << 20, 64 << 20, 0, 0));
    assert_eq!(d.set.sndbuf, Some(sndbuf(4 << 20)));
    // Limited by the peer's 6 MiB window: the buffer follows that, not the congestion window.
    let d = law.on_sample(&sender_sample(200, 16 << 20, 6 << 20, 0, 0));
    assert_eq!(d.set.sndbuf, Some(sndbuf(6 << 20)));
    // Steady and still held by the peer's window: nothing changes, looked at once per RTT.
    let d = law.on_sample(&sender_sample(300, 16 << 20, 6 << 20, 0, 0));
    assert_eq!(d.set.sndbuf, None);
    assert_eq!(d.next, Duration::from_millis(100));
    // Buffer-limited time grew with nothing unsent: at least the kernel's current size (it
    // doubles the value set), but no more than the peer's window takes.
    let d = law.on_sample(&sender_sample(400, 4 << 20, 64 << 20, 5000, 12 << 20));
    assert_eq!(d.set.sndbuf, Some(12 << 20));
    let d = law.on_sample(&sender_sample(500, 4 << 20, 40 << 20, 9000, 64 << 20));
    assert_eq!(d.set.sndbuf, Some(sndbuf(40 << 20)));
    // Linux keeps counting buffer-limited time while data waits unsent: no growth then.
    let mut s = sender_sample(600, 4 << 20, 40 << 20, 20000, 45 << 20);
    if let Some(t) = s.tcp.as_mut() {
        t.notsent_bytes = 1 << 20;
    }
    assert_eq!(law.on_sample(&s).set.sndbuf, None);
    // The buffer holds a flight with little more than a few refills unsent behind it.
    let flight = 40u64 << 20;
    assert!(2 * sndbuf(flight) < flight + flight / 5);
    // Of a few streams' small flights, little more than a refill's worth.
    assert_eq!(2 * sndbuf(1 << 20), 1_132_462 + (64 << 10));
}

#[test]
fn a_whole_window_in_flight_sizes_the_send_buffer_not_the_repair_floor() {
    // A clean path's steady state: the peer's 13.3 MB window all in flight. The buffer holds
    // it and a few refills; the floor kept for repairs held 3 MB more unsent behind it.
    let mut law = Drs::new(Role::Sender, &Params::default());
    let window: u32 = 13_278_208;
    let mut s = sender_sample(0, 26 << 20, window, 0, 0);
    if let Some(t) = s.tcp.as_mut() {
        t.unacked_bytes = u64::from(window);
    }
    assert_eq!(
        law.on_sample(&s).set.sndbuf,
        Some(sndbuf(u64::from(window)))
    );
}

#[test]
fn a_writer_that_comes_late_gets_more_unsent_room() {
    let mut law = Drs::new(Role::Sender, &Params::default());
    let window = 6u64 << 20;
    let steady = |t_ms: u64, limited_us: u64| sender_sample(t_ms, 16 << 20, 6 << 20, limited_us, 0);
    law.on_sample(&sender_sample(0, 16 << 20, 6 << 20, 0, 0));
    // Held by the peer's window, nothing unsent and the buffer-limited clock running: the
    // buffer ran dry under the window. Once in a while is chance: nothing changes.
    let mut limited = 0;
    let mut set = Vec::new();
    for k in 1..=60 {
        if k % 15 == 0 {
            limited += 1000;
        }
        set.push(law.on_sample(&steady(100 * k, limited)).set.sndbuf);
    }
    assert!(set.iter().all(Option::is_none), "{set:?}");
    // Often: its unsent time doubles each third time, up to 16 ms.
    for k in 61..=72 {
        limited += 1000;
        set.push(law.on_sample(&steady(100 * k, limited)).set.sndbuf);
    }
    let room = |ms| Some(sndbuf_for(window, RTT, Duration::from_millis(ms)));
    let changed: Vec<_> = set.into_iter().flatten().collect();
    assert_eq!(changed, [room(8), room(16)].map(Option::unwrap));
    // While the congestion window still grows (slow start), a dry buffer is the growth's.
    let mut law = Drs::new(Role::Sender, &Params::default());
    law.on_sample(&sender_sample(0, 2 << 20, 6 << 20, 0, 0));
    for k in 1..=4 {
        let cwnd = 2u64 << (2 * k);
        let d = law.on_sample(&sender_sample(100 * k, cwnd, 6 << 20, 1000 * k, 0));
        assert!(d.set.sndbuf.is_none_or(|b| b == sndbuf(window)), "{d:?}");
    }
}

#[test]
fn on_a_lossy_path_the_window_holds_the_holes_beside_the_bdp() {
    // 1 Gbit/s, 100 ms, random loss: each hole holds the window's left edge 1.25 RTTs, and
    // in-order data comes in bursts as holes fill (no trains). A window of 1.1 x BDP would
    // carry half the path's rate.
    let mut path = FluidPath::new(125e6, 0.1);
    path.holes = Some(1.25);
    let mut law = receiver();
    path.run(&mut law, 8.0);
    let before = path.bytes;
    path.run(&mut law, 10.0);
    let rate = (path.bytes - before) / 2.0;
    assert!(rate > 0.95 * 125e6, "{:.0} Mbit/s", rate * 8e-6);
    // What the holes need and a little more, not without bound.
    assert!(path.window < 3.5 * 12.5e6, "{}", path.window);
}

#[test]
fn on_a_lossy_path_bursts_of_filled_holes_do_not_inflate_the_window() {
    // As above, but what waited behind the holes comes in order all at once every third
    // round: one RTT's bytes read three times the path's rate. The window follows the
    // path's rate, not the bursts (with the rate of one RTT it reached 14 BDP).
    let mut path = FluidPath::new(125e6, 0.1);
    path.holes = Some(1.25);
    path.released_every = Some(3);
    let mut law = receiver();
    path.run(&mut law, 8.0);
    let before = path.bytes;
    path.run(&mut law, 14.0);
    let rate = (path.bytes - before) / 6.0;
    assert!(rate > 0.9 * 125e6, "{:.0} Mbit/s", rate * 8e-6);
    assert!(path.window < 3.5 * 12.5e6, "{}", path.window);
}

/// A sender's sample in loss recovery with `unacked` bytes in flight.
fn repairing(t_ms: u64, cwnd: u64, unacked: u64, sndbuf: u64) -> Sample {
    let mut s = sender_sample(t_ms, cwnd, 64 << 20, 0, sndbuf);
    if let Some(t) = s.tcp.as_mut() {
        t.ca_state = 3;
        t.unacked_bytes = unacked;
    }
    s
}

#[test]
fn a_sender_repairing_losses_keeps_its_buffer() {
    // A stream on a lossy path, its buffer at 24 MiB for 16 MiB in flight; recovery cuts the
    // congestion window to eight segments for seconds. The buffer stays: below its queue Linux
    // cannot split the segments a retransmission needs, and the stream would stall.
    let mut law = Drs::new(Role::Sender, &Params::default());
    law.on_sample(&sender_sample(0, 16 << 20, 64 << 20, 0, 0));
    let cut = (0..40).map(|k| law.on_sample(&repairing(100 * (k + 1), 11_584, 20 << 20, 48 << 20)));
    assert!(cut.map(|d| d.set.sndbuf).all(|s| s.is_none()));
    // Recovered, little in flight: it shrinks, not below what is still in flight.
    let open = |t_ms, unacked| {
        let mut s = sender_sample(t_ms, 1 << 20, 64 << 20, 0, 48 << 20);
        if let Some(t) = s.tcp.as_mut() {
            t.unacked_bytes = unacked;
        }
        s
    };
    let shrunk: Vec<_> = (41..80)
        .filter_map(|k| law.on_sample(&open(100 * k, 4 << 20)).set.sndbuf)
        .collect();
    assert_eq!(shrunk.len(), 1, "{shrunk:?}");
    // Linux accounts twice the value set and splits segments while its queue (up to 1.3
    // bytes per byte in flight) stays within twice that.
    assert!(
        2 * (2 * shrunk[0]) >= (1.3 * f64::from(4 << 20)) as u64,
        "{shrunk:?}"
    );
}

#[test]
fn a_reader_that_comes_late_gets_its_lag_within_the_memory_bound() {
    // 1 Gbit/s, 100 ms (BDP 12.5 MB); the reader leaves 3 MB unread from 3 s on (an HTTPS
    // body on a busy host). At 1.1 x BDP the sender would get 10.75 MB: 0.86 of the path.
    // A lag within the steady window's spare (a tenth of the BDP) changes nothing; a larger
    // one gets the window up to 1.12 x BDP, no further: both ends' buffers then hold 2.95 x
    // BDP, within the clean path's 3 x.
    let mut path = FluidPath::new(125e6, 0.1);
    let mut law = receiver();
    path.run(&mut law, 3.0);
    let steady = path.window;
    assert!(steady <= 1.2 * 12.5e6, "{steady}");
    path.unread = 1e6;
    path.run(&mut law, 4.0);
    assert_eq!(path.window, steady);
    path.unread = 3e6;
    path.run(&mut law, 6.0);
    assert!(
        (1.11 * 12.5e6..=1.125 * 12.5e6).contains(&path.window),
        "{steady} -> {}",
        path.window
    );
    let before = path.bytes;
    path.run(&mut law, 9.0);
    let share = (path.bytes - before) / 3.0 / 125e6;
    assert!((0.87..0.9).contains(&share), "{share}");
}

#[test]
fn a_reader_stalled_for_good_gets_no_more_than_a_slight_lag() {
    let mut path = FluidPath::new(125e6, 0.1);
    let mut law = receiver();
    path.run(&mut law, 3.0);
    // Nothing is read: every byte of the window stays unread.
    path.unread = path.window;
    for _ in 0..40 {
        let t = path.t;
        path.run(&mut law, t + 0.25);
        path.unread = path.window;
    }
    assert!(path.window <= 1.125 * 12.5e6, "{}", path.window);
}
