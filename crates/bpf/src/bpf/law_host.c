// SPDX-License-Identifier: GPL-2.0 OR MIT
/* The laws of bic_law.h as host functions, for the unit tests in src/law.rs. */
#include "bic_law.h"

void fp_bic_update(struct bic_law *b, __u32 cwnd, __u64 now_us) { bic_update(b, cwnd, now_us); }
__u32 fp_bic_on_loss(struct bic_law *b, __u32 cwnd) { return bic_on_loss(b, cwnd); }
__u32 fp_bic_undo(const struct bic_law *b, __u32 cwnd) { return bic_undo(b, cwnd); }
__u32 fp_pace_on_ack(struct pace_law *p, __u32 cwnd, __u32 mss, __u32 srtt8_us,
		     __u32 min_rtt_us, int slow_start, __u64 now_us)
{
	return pace_on_ack(p, cwnd, mss, srtt8_us, min_rtt_us, slow_start, now_us);
}
void fp_pace_on_state(struct pace_law *p, __u32 ca_state) { pace_on_state(p, ca_state); }
int fp_pace_holds_window(const struct pace_law *p) { return pace_holds_window(p); }
void fp_ss_on_ack(struct ss_exit *h, __u32 ack, __u32 snd_nxt) { ss_on_ack(h, ack, snd_nxt); }
int fp_ss_on_rtt(struct ss_exit *h, __u32 rtt_us, __u32 cwnd) { return ss_on_rtt(h, rtt_us, cwnd); }
__u32 fp_ss_exit_window(const struct ss_exit *h, __u32 cwnd, __u32 delivered, __u32 interval_us)
{
	return ss_exit_window(h, cwnd, delivered, interval_us);
}
