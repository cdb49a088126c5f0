//! The BPF program's laws (bic_law.h), compiled for the host and run on synthetic traces: the
//! same C the kernel runs.

/// bic_law.h's `struct bic_law`.
#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
struct BicLaw {
    cnt: u32,
    last_max_cwnd: u32,
    last_cwnd: u32,
    loss_cwnd: u32,
    last_us: u64,
}

/// bic_law.h's `struct pace_law`.
#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
struct PaceLaw {
    state: u32,
    time_eabp_ms: u32,
    eab: u64,
    cwp: u64,
    eabp_end_us: u64,
    ceiling: u32,
    ca_state: u32,
}

/// bic_law.h's `struct ss_exit`.
#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
struct SsExit {
    end_seq: u32,
    min_rtt_us: u32,
    round_rtt_us: u32,
    samples: u32,
    found: u32,
}

extern "C" {
    fn fp_bic_update(b: *mut BicLaw, cwnd: u32, now_us: u64);
    fn fp_bic_on_loss(b: *mut BicLaw, cwnd: u32) -> u32;
    fn fp_bic_undo(b: *const BicLaw, cwnd: u32) -> u32;
    fn fp_pace_on_ack(
        p: *mut PaceLaw,
        cwnd: u32,
        mss: u32,
        srtt8_us: u32,
        min_rtt_us: u32,
        slow_start: i32,
        now_us: u64,
    ) -> u32;
    fn fp_pace_on_state(p: *mut PaceLaw, ca_state: u32);
    fn fp_pace_holds_window(p: *const PaceLaw) -> i32;
    fn fp_ss_on_ack(h: *mut SsExit, ack: u32, snd_nxt: u32);
    fn fp_ss_on_rtt(h: *mut SsExit, rtt_us: u32, cwnd: u32) -> i32;
    fn fp_ss_exit_window(h: *const SsExit, cwnd: u32, delivered: u32, interval_us: u32) -> u32;
}

const CA_OPEN: u32 = 0;
const CA_RECOVERY: u32 = 3;
const CA_LOSS: u32 = 4;
const CWP_A: u32 = 0;
const CWP_B: u32 = 1;
const EABP: u32 = 2;
const UNLIMITED: u32 = u32::MAX;

// SAFETY (every call below): the pointers come from live, exclusively borrowed Rust values of
// the C structs' layout; the C functions keep no pointer beyond the call.
impl BicLaw {
    fn update(&mut self, cwnd: u32, now_us: u64) -> u32 {
        unsafe { fp_bic_update(self, cwnd, now_us) };
        self.cnt
    }
    fn on_loss(&mut self, cwnd: u32) -> u32 {
        unsafe { fp_bic_on_loss(self, cwnd) }
    }
    fn undo(&self, cwnd: u32) -> u32 {
        unsafe { fp_bic_undo(self, cwnd) }
    }
    /// One RTT (100 ms) of congestion avoidance from `cwnd`: each ACKed segment adds 1/cnt to
    /// the window, `credit` counting the ACKs toward the next segment (tcp_cong_avoid_ai's
    /// snd_cwnd_cnt).
    fn one_rtt(&mut self, cwnd: u32, t_us: &mut u64, credit: &mut u32) -> u32 {
        let mut w = cwnd;
        for _ in 0..cwnd {
            *t_us += 100_000 / u64::from(cwnd);
            let cnt = self.update(w, *t_us);
            *credit += 1;
            if *credit >= cnt {
                *credit = 0;
                w += 1;
            }
        }
        w
    }
}

impl PaceLaw {
    fn new() -> PaceLaw {
        PaceLaw {
            time_eabp_ms: 1000,
            ..PaceLaw::default()
        }
    }
    /// An ACK with a window of `cwnd` segments of 1,000 bytes and a 100 ms RTT on a path of
    /// 50 ms (half of it queue): the ceiling.
    fn ack(&mut self, cwnd: u32, slow_start: bool, now_ms: u64) -> u32 {
        self.ack_at(cwnd, slow_start, 100, now_ms)
    }
    /// The same with a smoothed RTT of `srtt_ms`.
    fn ack_at(&mut self, cwnd: u32, slow_start: bool, srtt_ms: u32, now_ms: u64) -> u32 {
        unsafe {
            fp_pace_on_ack(
                self,
                cwnd,
                1000,
                srtt_ms * 8000,
                50_000,
                i32::from(slow_start),
                now_ms * 1000,
            )
        }
    }
    fn state(&mut self, ca: u32) {
        unsafe { fp_pace_on_state(self, ca) }
    }
    /// A loss at `now_ms` with a window of `cwnd` (TCP enters `ca`, then is open again).
    fn loss_at(&mut self, cwnd: u32, ca: u32, now_ms: u64) {
        self.ack(cwnd, false, now_ms);
        self.state(ca);
        self.state(CA_OPEN);
    }
    fn holds(&self) -> bool {
        unsafe { fp_pace_holds_window(self) != 0 }
    }
}

impl SsExit {
    /// One round of slow start with a window of `cwnd` segments: the ACK that starts it (the
    /// round before ended at `seq`, this one ends at `seq + cwnd`), then one RTT sample per
    /// segment. Whether slow start ended, and at which sample.
    fn round(&mut self, seq: u32, cwnd: u32, rtts_ms: &[u32]) -> Option<usize> {
        unsafe { fp_ss_on_ack(self, seq + 1, seq + cwnd) };
        rtts_ms
            .iter()
            .position(|ms| unsafe { fp_ss_on_rtt(self, ms * 1000, cwnd) } != 0)
    }
}

#[test]
fn slow_start_ends_when_a_rounds_first_samples_all_lie_an_eighth_above_the_least_rtt() {
    let mut h = SsExit::default();
    // 50 ms path: the rise that ends slow start is 6.25 ms.
    assert_eq!(h.round(0, 20, &[50; 20]), None);
    assert_eq!(h.round(20, 40, &[56; 40]), None);
    // One quick sample among the first eight: no queue yet.
    let mut rtts = [57; 40];
    rtts[7] = 50;
    assert_eq!(h.round(60, 40, &rtts), None);
    // The queue shows in every one of the first eight: out at the eighth, with the window the
    // path held without it (80 x 50 / 57).
    assert_eq!(h.round(240, 80, &[57; 80]), Some(7));
    assert_eq!(h.found, 1);
    assert_eq!(unsafe { fp_ss_exit_window(&h, 80, 0, 0) }, 70);
    assert_eq!(
        unsafe { fp_ss_exit_window(&h, 17, 0, 0) },
        16,
        "never below 16 segments"
    );
    // A delivery rate below what the window says (another flow holds most of the queue): 30
    // segments delivered in 25 ms, 60 per least RTT of 50 ms, is the window.
    assert_eq!(unsafe { fp_ss_exit_window(&h, 80, 30, 25_000) }, 60);
    // One above it changes nothing.
    assert_eq!(unsafe { fp_ss_exit_window(&h, 80, 100, 25_000) }, 70);
    // Once out, no further exit is signalled.
    assert_eq!(h.round(320, 80, &[90; 80]), None);
    assert_eq!(h.round(400, 80, &[90; 80]), None);
}

#[test]
fn small_windows_and_samples_past_a_rounds_first_eight_do_not_end_slow_start() {
    let mut h = SsExit::default();
    assert_eq!(h.round(0, 15, &[100; 15]), None, "below 16 segments");
    // The least RTT is 100 ms now: the rise is 12.5 ms; the ninth sample on comes too late.
    let mut rtts = [100; 40];
    rtts[8..].fill(200);
    assert_eq!(h.round(15, 40, &rtts), None);
    // A short path's bound: 4 ms at least (a 10 ms path's eighth is 1.25 ms).
    let mut h = SsExit::default();
    assert_eq!(h.round(0, 20, &[10; 20]), None);
    assert_eq!(h.round(20, 40, &[13; 40]), None);
    assert_eq!(h.round(60, 80, &[15; 80]), Some(7));
}

#[test]
fn bic_grows_five_percent_per_rtt_before_its_first_loss_and_as_reno_on_small_windows() {
    let mut b = BicLaw::default();
    assert_eq!(b.update(1000, 1), 20);
    assert_eq!(b.update(10, 100_000), 10);
}

#[test]
fn bic_searches_back_to_the_window_of_the_last_loss_then_probes_past_it() {
    let mut b = BicLaw::default();
    // A loss at 1,000 segments: down to 80 %.
    assert_eq!(b.on_loss(1000), 799);
    let mut t = 1_000_000;
    // Far below it: additive increase, 16 segments per RTT.
    assert_eq!(b.update(799, t), 799 / 16);
    let (mut w, mut credit) = (799, 0);
    let mut steps = Vec::new();
    for _ in 0..120 {
        let next = b.one_rtt(w, &mut t, &mut credit);
        steps.push(next - w);
        w = next;
    }
    // Binary search: back within 1 % of the loss's window in 16 RTTs (Reno's one segment per
    // RTT would take 200), growing more slowly as it gets close.
    let back = steps
        .iter()
        .scan(799, |w, s| {
            *w += s;
            Some(*w)
        })
        .position(|w| w >= 990)
        .unwrap();
    assert!(back < 20, "{steps:?}");
    assert!(steps[0] >= 15 && steps[0] <= 17, "{steps:?}");
    assert!(steps[back] < steps[0], "{steps:?}");
    // Around it a plateau (a segment every few RTTs), then max probing speeds up again.
    assert!(steps.iter().filter(|&&s| s <= 1).count() >= 10, "{steps:?}");
    assert!(w > 1000 && steps[119] > steps[back], "{w} {steps:?}");
    // Just under the maximum the step is small: cnt = cwnd * 20 / 4.
    let mut c = BicLaw {
        last_max_cwnd: 1000,
        ..BicLaw::default()
    };
    assert_eq!(c.update(999, 1), 999 * 5);
    // Far past it: additive again.
    assert_eq!(c.update(1100, 100_000), 1100 / 16);
}

#[test]
fn bic_fast_convergence_gives_up_part_of_a_window_that_shrank_and_undo_restores_it() {
    let mut b = BicLaw::default();
    b.on_loss(1000);
    // The next loss at a smaller window: the flow aims below it, leaving room to others.
    assert_eq!(b.on_loss(900), 900 * 819 / 1024);
    assert_eq!(b.last_max_cwnd, 900 * (1024 + 819) / 2048);
    assert_eq!(b.undo(700), 900);
    // Small windows halve.
    assert_eq!(b.on_loss(10), 5);
}

#[test]
fn cwp_paces_at_the_window_per_rtt_twice_that_in_slow_start_and_not_at_all_without_an_rtt() {
    let mut p = PaceLaw::new();
    let mut unknown = PaceLaw::new();
    // 1,000 segments of 1,000 bytes per 100 ms: 10 MB/s.
    assert_eq!(p.ack(1000, false, 0), 10_000_000);
    assert_eq!(p.ack(1000, true, 1), 20_000_000);
    assert_eq!(
        unsafe { fp_pace_on_ack(&mut unknown, 1000, 1000, 0, 0, 0, 0) },
        UNLIMITED
    );
}

#[test]
fn eabp_paces_at_the_rate_of_the_last_loss_and_holds_the_window_for_time_eabp() {
    let mut p = PaceLaw::new();
    p.ack(1000, false, 0);
    // A loss at 10 MB/s: eab; the window falls to 800 (8 MB/s), CWP.
    p.state(CA_RECOVERY);
    assert_eq!(p.eab, 10_000_000);
    p.state(CA_OPEN);
    assert_eq!(p.ack(800, false, 100), 8_000_000);
    assert_eq!(p.state, CWP_A);
    // At 90 % of eab: EABP at eab, the window held, for 1 s.
    assert_eq!(p.ack(900, false, 200), 10_000_000);
    assert_eq!(p.state, EABP);
    assert!(p.holds());
    assert_eq!(p.ack(900, false, 1199), 10_000_000);
    // The period over: CWP, the window free to grow past eab, and no EABP again until a loss.
    assert_eq!(p.ack(900, false, 1200), 9_000_000);
    assert_eq!(p.state, CWP_B);
    assert!(!p.holds());
    assert_eq!(p.ack(1100, false, 1300), 11_000_000);
    assert_eq!(p.state, CWP_B);
}

#[test]
fn a_stable_path_doubles_the_eabp_period_an_unstable_one_resets_it_a_timeout_judges_nothing() {
    let mut p = PaceLaw::new();
    p.loss_at(1000, CA_RECOVERY, 0);
    assert_eq!(p.time_eabp_ms, 1000);
    // Within 10 % of the last eab: stable, doubled each time.
    p.loss_at(1050, CA_RECOVERY, 0);
    assert_eq!(p.time_eabp_ms, 2000);
    p.loss_at(1000, CA_RECOVERY, 0);
    assert_eq!(p.time_eabp_ms, 4000);
    // A timeout records eab but judges nothing.
    p.loss_at(300, CA_LOSS, 0);
    assert_eq!((p.time_eabp_ms, p.eab), (4000, 3_000_000));
    // Far from the last eab: unstable, back to 1 s.
    p.loss_at(1000, CA_RECOVERY, 0);
    assert_eq!(p.time_eabp_ms, 1000);
    // Doubling stops at 64 s.
    for _ in 0..10 {
        p.loss_at(1000, CA_RECOVERY, 0);
    }
    assert_eq!(p.time_eabp_ms, 64_000);
}

#[test]
fn a_loss_during_eabp_ends_it_without_shortening_the_next_period() {
    let mut p = PaceLaw::new();
    p.loss_at(1000, CA_RECOVERY, 0);
    p.loss_at(1000, CA_RECOVERY, 10);
    assert_eq!(p.time_eabp_ms, 2000);
    p.ack(950, false, 100);
    assert_eq!(p.state, EABP);
    assert_eq!(p.eabp_end_us, 2_100_000);
    // Cut short by a loss at 500 ms near the last eab: CWP_A, and the period doubles (stable)
    // instead of starting over.
    p.ack(950, false, 500);
    p.state(CA_RECOVERY);
    assert_eq!((p.state, p.time_eabp_ms), (CWP_A, 4000));
}

#[test]
fn an_eabp_below_what_the_path_carries_without_a_queue_ends_early() {
    let mut p = PaceLaw::new();
    // A loss at 10 MB/s (1,000 segments per 100 ms, half of it queue), then EABP at 90 %.
    p.loss_at(1000, CA_RECOVERY, 0);
    assert_eq!(p.ack(900, false, 100), 10_000_000);
    assert_eq!(p.state, EABP);
    // The held window would carry 11.25 MB/s at 80 ms, but a queue stands: EABP holds.
    assert_eq!(p.ack_at(900, false, 80, 200), 10_000_000);
    assert_eq!(p.state, EABP);
    // The queue gone (55 ms, within 6.25 ms of the least 50) and 16.4 MB/s in the window: eab
    // lies below the path; CWP at once, the window free to grow.
    assert_eq!(p.ack_at(900, false, 55, 300), 16_363_636);
    assert_eq!(p.state, CWP_B);
    assert!(!p.holds());
    assert_eq!(p.time_eabp_ms, 1000, "the period is not judged");

    // A path with little queue: after the loss the queue is gone too, but the held window
    // carries no more than eab (99 %): EABP holds, as the seed's.
    let mut p = PaceLaw::new();
    p.ack_at(1000, false, 55, 0);
    p.state(CA_RECOVERY);
    p.state(CA_OPEN);
    p.ack_at(990, false, 50, 100);
    assert_eq!(p.state, EABP);
    assert_eq!(p.ack_at(990, false, 50, 500), 18_181_818);
    assert_eq!(p.state, EABP);
}
