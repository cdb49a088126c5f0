//! Random loss as a receiver sees it: segments arriving behind a hole (out of order) round
//! after round while no queue stretches the RTT. Congestion drops come with a queue and in
//! bursts; a lossy link leaves holes in every round at any rate, queue or not. While holes stand, the
//! window's left edge waits about an RTT for each retransmission, so the window must hold
//! that much more than the BDP, and in-order arrivals come in bursts as holes fill (no
//! packet trains to time).

use std::time::Duration;

/// Rounds with holes and no queue, among the last [`RECENT`], that make the path lossy (a
/// window of a hundred segments at 1 % loss passes every other round clean).
const ROUNDS: u32 = 3;
/// The rounds looked back on.
const RECENT: u32 = 6;
/// Rounds in a row without holes that end a lossy spell (at 0.1 % loss a window of a few
/// hundred segments may pass one round clean).
const CLEAN_ROUNDS: u32 = 2;

/// Counts rounds (one RTT each) with out-of-order arrivals.
#[derive(Debug, Clone, Default)]
pub struct Holes {
    /// The kernel's count of out-of-order packets at the previous sample.
    count: u32,
    /// When the current round began.
    round_start: Duration,
    /// Holes seen in the current round.
    seen: bool,
    /// A queue stretched the RTT during the current round.
    queued: bool,
    /// The last [`RECENT`] rounds, newest in the lowest bit: holes without a queue.
    recent: u32,
    /// Rounds in a row without holes.
    clean: u32,
    lossy: bool,
}

impl Holes {
    /// Takes one sample: the out-of-order packet count (`tcpi_rcv_ooopack`), the RTT, and
    /// whether a queue stretches it now. Answers whether the path loses segments at random.
    pub fn observe(&mut self, now: Duration, ooo: u32, rtt: Duration, queue: bool) -> bool {
        self.seen |= ooo > self.count;
        self.count = ooo;
        self.queued |= queue;
        if now.saturating_sub(self.round_start) >= rtt {
            self.close_round();
            self.round_start = now;
        }
        self.lossy
    }

    /// Holes without a queue in one of the recent rounds: random loss may be starting, and
    /// in-order arrivals already come in bursts.
    pub fn suspected(&self) -> bool {
        self.lossy || self.recent != 0
    }

    fn close_round(&mut self) {
        let random = self.seen && !self.queued;
        self.recent = ((self.recent << 1) | u32::from(random)) & ((1 << RECENT) - 1);
        if self.seen {
            self.clean = 0;
        } else {
            self.clean += 1;
        }
        if self.clean >= CLEAN_ROUNDS {
            self.lossy = false;
            self.recent = 0;
        } else if self.seen && self.queued && !self.lossy {
            // Drops with a queue may be congestion: they start no spell, but a lossy link
            // stays lossy while a sender fills the queue.
            self.recent = 0;
        } else if self.recent.count_ones() >= ROUNDS {
            self.lossy = true;
        }
        self.seen = false;
        self.queued = false;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const RTT: Duration = Duration::from_millis(100);

    /// Feeds `rounds` rounds of ten samples each; `holes(round)` says whether a round has
    /// out-of-order arrivals, `queue(round)` whether the RTT is stretched.
    fn feed(
        h: &mut Holes,
        from: u32,
        rounds: u32,
        holes: impl Fn(u32) -> bool,
        queue: impl Fn(u32) -> bool,
    ) -> Vec<bool> {
        let mut count = h.count;
        (from..from + rounds)
            .map(|r| {
                let mut lossy = false;
                for i in 0..10 {
                    if holes(r) && i == 5 {
                        count += 3;
                    }
                    let now = RTT * r + RTT / 10 * i;
                    lossy = h.observe(now, count, RTT, queue(r));
                }
                lossy
            })
            .collect()
    }

    #[test]
    fn holes_in_every_round_without_a_queue_are_random_loss() {
        let mut h = Holes::default();
        let lossy = feed(&mut h, 0, 6, |_| true, |_| false);
        assert_eq!(lossy, [false, false, false, true, true, true]);
    }

    #[test]
    fn one_round_of_holes_is_a_suspicion_only() {
        let mut h = Holes::default();
        let lossy = feed(&mut h, 0, 3, |r| r == 0, |_| false);
        assert!(lossy.iter().all(|l| !l));
        assert!(h.suspected());
        feed(&mut h, 3, 6, |_| false, |_| false);
        assert!(!h.suspected());
    }

    #[test]
    fn holes_with_a_queue_are_congestion() {
        let mut h = Holes::default();
        let lossy = feed(&mut h, 0, 8, |_| true, |r| r % 2 == 0);
        assert!(lossy.iter().all(|l| !l));
    }

    #[test]
    fn a_lossy_link_stays_lossy_while_a_queue_stands() {
        let mut h = Holes::default();
        feed(&mut h, 0, 5, |_| true, |_| false);
        let lossy = feed(&mut h, 5, 5, |_| true, |_| true);
        assert!(lossy.iter().all(|&l| l));
    }

    #[test]
    fn one_burst_of_drops_is_not_a_lossy_path() {
        let mut h = Holes::default();
        let lossy = feed(&mut h, 0, 8, |r| (2..4).contains(&r), |_| false);
        assert!(lossy.iter().all(|l| !l));
    }

    #[test]
    fn holes_in_every_other_round_are_random_loss_too() {
        let mut h = Holes::default();
        let lossy = feed(&mut h, 0, 8, |r| r % 2 == 0, |_| false);
        assert_eq!(lossy, [false, false, false, false, false, true, true, true]);
    }

    #[test]
    fn a_clean_round_keeps_the_spell_and_two_in_a_row_end_it() {
        let mut h = Holes::default();
        feed(&mut h, 0, 5, |_| true, |_| false);
        assert!(h.lossy);
        assert_eq!(feed(&mut h, 5, 1, |_| false, |_| false), [true]);
        assert_eq!(feed(&mut h, 6, 1, |_| true, |_| false), [true]);
        assert_eq!(
            feed(&mut h, 7, 3, |_| false, |_| false),
            [true, true, false]
        );
    }
}
