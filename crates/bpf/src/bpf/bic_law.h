/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/*
 * The laws of fatpipe's own congestion control, free of kernel types so that the host's tests
 * (src/law.rs) run the very code the kernel runs (bic.bpf.c).
 *
 * BIC, binary increase congestion control (Xu, Harfoush, Rhee, INFOCOM 2004): after a loss the
 * window searches for the size where the loss came, halving the distance each round trip (binary
 * search increase), in additive steps while that distance is large, slowly near it, then probes
 * past it ever faster (max probing); fast convergence gives up part of a window that shrank since
 * the previous loss.
 *
 * Adaptive pacing (Tanida, Inaba, Hiraki, "Adaptive auto-tuning of TCP pacing", the seed's
 * BICIPG): CWP paces at cwnd/RTT (twice that in slow start); at each loss the CWP rate just
 * before it is the estimated available bandwidth eab, and two eabs within 10 % mean a stable
 * path. EABP: once the CWP rate reaches 90 % of eab, the sender is paced at eab and the window
 * does not grow for time_eabp (1 s, doubled while the path is stable, back to 1 s when not; not
 * reset by an EABP a loss cut short), then CWP until the next loss. Paced, the queue's delay
 * is the only one a packet meets, so slow start also ends when it rises (ss_exit), with the
 * window the path held without that queue, before the doubling window overruns it; and an
 * EABP whose eab came from a burst of another flow's (a loss far below the path's share, then
 * the queue gone while the held window would carry more than eab) ends at once instead of
 * holding the sender there for its period.
 */
#ifndef FATPIPE_BIC_LAW_H
#define FATPIPE_BIC_LAW_H

#include <linux/types.h>

#ifndef __always_inline
#define __always_inline inline __attribute__((always_inline))
#endif

/* BIC's constants as the paper's Linux module shipped them. */
#define BIC_MAX_INCREMENT 16 /* the largest step per RTT, segments */
#define BIC_LOW_WINDOW 14	/* below this BIC behaves as Reno */
#define BIC_BETA 819		/* multiplicative decrease, / 1024 */
#define BIC_BETA_SCALE 1024
#define BIC_SMOOTH_PART 20 /* slow growth near the last maximum */
#define BIC_B 4		   /* binary search: a quarter of the distance per step */
#define BIC_FIRST_CNT 20   /* before any loss: 5 % per RTT at most */
#define BIC_UPDATE_US 31250 /* a window recomputes its step at most this often (HZ/32) */

/* Adaptive pacing's constants (the seed's). */
#define PACE_NEAR_EAB_PERMILLE 900 /* EABP starts at 90 % of eab */
#define PACE_STABLE_PERMILLE 100   /* two eabs this close (relative) mean a stable path */
#define PACE_FIRST_EABP_MS 1000
#define PACE_LONGEST_EABP_MS 64000
/* EABP ends early once the held window carries this much more than eab (/ 1000) with the queue
 * gone: the path has room eab does not know of (fatpipe's addition, below). */
#define PACE_PASSED_PERMILLE 1100
/* No ceiling, as SO_MAX_PACING_RATE takes it from a 32-bit value. */
#define PACE_UNLIMITED 0xffffffffU

/* Leaving slow start on delay (fatpipe_bic only): HyStart's delay increase (Ha and Rhee,
 * "Taming the elephants", 2011), whose signal pacing makes clean. */
#define SS_LOW_WINDOW 16	 /* not below this window, segments */
#define SS_SAMPLES 8		 /* the first RTT samples of a round it judges by */
#define SS_DELAY_SHARE 8	 /* the rise that ends slow start: the least RTT / this, */
#define SS_DELAY_MIN_US 4000
#define SS_DELAY_MAX_US 16000 /* within these bounds */

/* TCP's congestion-avoidance states (enum tcp_ca_state). */
#define FP_CA_OPEN 0
#define FP_CA_CWR 2
#define FP_CA_RECOVERY 3
#define FP_CA_LOSS 4

/* The pacing states (the seed's BI_CWP_A, BI_CWP_B, BI_EABP). */
#define PACE_CWP_A 0 /* CWP; EABP may start */
#define PACE_CWP_B 1 /* CWP after an EABP period ran out, until the next loss */
#define PACE_EABP 2  /* paced at eab, the window held */

/* BIC's state of one connection. */
struct bic_law {
	__u32 cnt;	     /* ACKed segments per one-segment increase */
	__u32 last_max_cwnd; /* the window where the last loss came */
	__u32 last_cwnd;     /* the window at the last recomputation */
	__u32 loss_cwnd;     /* the window at the last loss (for an undo) */
	__u64 last_us;	     /* when cnt was last recomputed; 0: a new epoch */
};

/* Adaptive pacing's state of one connection. */
struct pace_law {
	__u32 state;	     /* PACE_CWP_A, PACE_CWP_B or PACE_EABP */
	__u32 time_eabp_ms;  /* the length of the next EABP period */
	__u64 eab;	     /* bytes/s at the last loss; 0: no loss yet */
	__u64 cwp;	     /* the CWP rate at the last ACK, bytes/s */
	__u64 eabp_end_us;   /* when the running EABP period ends */
	__u32 ceiling;	     /* the pacing ceiling last set, bytes/s */
	__u32 ca_state;	     /* TCP's state as last told (FP_CA_*) */
};

/* Slow start's exit on delay, of one connection. */
struct ss_exit {
	__u32 end_seq;	    /* the round ends once this is acknowledged */
	__u32 min_rtt_us;   /* the least RTT seen; 0: none yet */
	__u32 round_rtt_us; /* the least of this round's first samples */
	__u32 samples;	    /* this round's samples taken */
	__u32 found;	    /* slow start ended on delay (until a timeout starts it over) */
};

static __always_inline __u32 fp_min_u32(__u32 a, __u32 b) { return a < b ? a : b; }
static __always_inline __u32 fp_max_u32(__u32 a, __u32 b) { return a > b ? a : b; }

/* The delay above the least RTT that counts as a queue: an eighth of it, 4 to 16 ms. */
static __always_inline __u32 queue_delay_us(__u32 min_rtt_us)
{
	return fp_min_u32(fp_max_u32(min_rtt_us / SS_DELAY_SHARE, SS_DELAY_MIN_US), SS_DELAY_MAX_US);
}

/* An RTT sample at any time: the least RTT seen. */
static __always_inline void ss_note_rtt(struct ss_exit *h, __u32 rtt_us)
{
	if (h->min_rtt_us == 0 || rtt_us < h->min_rtt_us)
		h->min_rtt_us = rtt_us;
}

/* An ACK of ack in slow start: once the round's data (up to end_seq) is acknowledged, the
 * next round starts, ending at snd_nxt. */
static __always_inline void ss_on_ack(struct ss_exit *h, __u32 ack, __u32 snd_nxt)
{
	if ((__s32)(ack - h->end_seq) > 0) {
		h->end_seq = snd_nxt;
		h->round_rtt_us = 0xffffffffU;
		h->samples = 0;
	}
}

/* An RTT sample in slow start, the window cwnd segments: whether slow start ends here. It
 * does when the least of a round's first SS_SAMPLES samples lies above the least RTT seen by
 * an eighth of it (4 to 16 ms): a queue is building, and doubling the window again would
 * overrun it a round trip before any loss could say so. (Waiting for a second such round, to
 * tell another flow's burst passing through the queue, came too late at twice cwnd/RTT: the
 * queue overflowed first.) */
static __always_inline int ss_on_rtt(struct ss_exit *h, __u32 rtt_us, __u32 cwnd)
{
	ss_note_rtt(h, rtt_us);
	if (h->found || cwnd < SS_LOW_WINDOW || h->samples >= SS_SAMPLES)
		return 0;
	h->round_rtt_us = fp_min_u32(h->round_rtt_us, rtt_us);
	h->samples++;
	if (h->samples < SS_SAMPLES)
		return 0;
	if (h->round_rtt_us <= h->min_rtt_us + queue_delay_us(h->min_rtt_us))
		return 0;
	h->found = 1;
	return 1;
}

/* The window slow start leaves with, from cwnd when ss_on_rtt said so: what the path held
 * without the queue, at least SS_LOW_WINDOW. Two measures of it, the lesser taken: cwnd scaled
 * by least RTT / the round's RTT, and the last delivery rate sample (delivered segments over
 * interval_us; none when interval_us is 0) times the least RTT. The paced flight that doubled
 * before the delay could tell overran the room by up to a round's growth, and the round's
 * first samples show the queue of a round before: where the path's free share is small beside
 * the window (another flow holds most of the queue) only the delivery rate says how small;
 * kept, the window fills the queue to a loss a few round trips later. */
static __always_inline __u32 ss_exit_window(const struct ss_exit *h, __u32 cwnd, __u32 delivered,
					     __u32 interval_us)
{
	__u64 w = cwnd;

	if (h->round_rtt_us != 0 && h->round_rtt_us != 0xffffffffU)
		w = w * h->min_rtt_us / h->round_rtt_us;
	if (interval_us != 0 && delivered != 0) {
		__u64 bdp = (__u64)delivered * h->min_rtt_us / interval_us;
		if (bdp < w)
			w = bdp;
	}
	return fp_max_u32((__u32)w, SS_LOW_WINDOW);
}

/* Recomputes cnt for a window of cwnd segments at now_us (congestion avoidance). */
static __always_inline void bic_update(struct bic_law *b, __u32 cwnd, __u64 now_us)
{
	if (b->last_us != 0 && b->last_cwnd == cwnd && now_us - b->last_us <= BIC_UPDATE_US)
		return;
	b->last_cwnd = cwnd;
	b->last_us = now_us ? now_us : 1;
	if (cwnd <= BIC_LOW_WINDOW) {
		b->cnt = cwnd; /* Reno: one segment per RTT */
		return;
	}
	if (cwnd < b->last_max_cwnd) {
		__u32 dist = (b->last_max_cwnd - cwnd) / BIC_B;
		if (dist > BIC_MAX_INCREMENT)
			b->cnt = cwnd / BIC_MAX_INCREMENT; /* additive increase */
		else if (dist <= 1)
			b->cnt = cwnd * BIC_SMOOTH_PART / BIC_B; /* close to the maximum: slowly */
		else
			b->cnt = cwnd / dist; /* binary search increase */
	} else if (cwnd < b->last_max_cwnd + BIC_B) {
		b->cnt = cwnd * BIC_SMOOTH_PART / BIC_B; /* just past it: slowly */
	} else if (cwnd < b->last_max_cwnd + BIC_MAX_INCREMENT * (BIC_B - 1)) {
		b->cnt = cwnd * (BIC_B - 1) / (cwnd - b->last_max_cwnd); /* max probing */
	} else {
		b->cnt = cwnd / BIC_MAX_INCREMENT; /* far past it: additive */
	}
	if (b->last_max_cwnd == 0 && b->cnt > BIC_FIRST_CNT)
		b->cnt = BIC_FIRST_CNT;
	if (b->cnt == 0)
		b->cnt = 1;
}

/* A loss with a window of cwnd segments: remembers where it came; answers the new ssthresh. */
static __always_inline __u32 bic_on_loss(struct bic_law *b, __u32 cwnd)
{
	b->last_us = 0;
	if (cwnd < b->last_max_cwnd) /* fast convergence */
		b->last_max_cwnd = cwnd * (BIC_BETA_SCALE + BIC_BETA) / (2 * BIC_BETA_SCALE);
	else
		b->last_max_cwnd = cwnd;
	b->loss_cwnd = cwnd;
	if (cwnd <= BIC_LOW_WINDOW)
		return fp_max_u32(cwnd >> 1, 2);
	return fp_max_u32(cwnd * BIC_BETA / BIC_BETA_SCALE, 2);
}

/* The window after a loss proved spurious. */
static __always_inline __u32 bic_undo(const struct bic_law *b, __u32 cwnd)
{
	return fp_max_u32(cwnd, b->loss_cwnd);
}

/* cwnd/RTT in bytes/s: cwnd in segments of mss bytes, srtt8_us the smoothed RTT in 1/8 µs
 * (as tcp_sock keeps it); 0 while there is no RTT. */
static __always_inline __u64 pace_cwp(__u32 cwnd, __u32 mss, __u32 srtt8_us)
{
	if (srtt8_us == 0)
		return 0;
	return (__u64)cwnd * mss * 8000000ULL / srtt8_us;
}

static __always_inline __u32 pace_clamp(__u64 rate)
{
	return rate >= PACE_UNLIMITED ? PACE_UNLIMITED - 1 : (__u32)(rate ? rate : 1);
}

/* Whether an EABP's eab lies below the path: the queue gone (the smoothed RTT within
 * queue_delay_us of the least, min_rtt_us; 0 while unknown) while the held window carries
 * PACE_PASSED_PERMILLE of eab. After a loss at the path's share the held window keeps a queue
 * (it is what the queue overflowed with, less BIC's decrease); after one that another flow's
 * burst caused, the queue empties and eab only slows the sender. */
static __always_inline int pace_eab_passed(const struct pace_law *p, __u64 cwp, __u32 srtt8_us,
					   __u32 min_rtt_us)
{
	if (min_rtt_us == 0 || srtt8_us / 8 > min_rtt_us + queue_delay_us(min_rtt_us))
		return 0;
	return cwp * 1000 >= p->eab * PACE_PASSED_PERMILLE;
}

/* An ACK at now_us, the least RTT min_rtt_us: answers the pacing ceiling (bytes/s,
 * PACE_UNLIMITED while RTT is unknown). */
static __always_inline __u32 pace_on_ack(struct pace_law *p, __u32 cwnd, __u32 mss,
					 __u32 srtt8_us, __u32 min_rtt_us, int slow_start,
					 __u64 now_us)
{
	__u64 cwp = pace_cwp(cwnd, mss, srtt8_us);

	if (cwp == 0)
		return PACE_UNLIMITED;
	p->cwp = cwp;
	if (p->state == PACE_CWP_A && p->eab != 0 &&
	    cwp * 1000 >= p->eab * PACE_NEAR_EAB_PERMILLE) {
		p->state = PACE_EABP;
		p->eabp_end_us = now_us + (__u64)p->time_eabp_ms * 1000;
	} else if (p->state == PACE_EABP &&
		   (now_us >= p->eabp_end_us || pace_eab_passed(p, cwp, srtt8_us, min_rtt_us))) {
		p->state = PACE_CWP_B;
	}
	if (p->state == PACE_EABP)
		return pace_clamp(p->eab);
	return pace_clamp(slow_start ? 2 * cwp : cwp);
}

/* TCP enters ca_state: entering CWR, Recovery or Loss is a loss, whose eab is the CWP rate of
 * the last ACK; at CWR and Recovery (not after a timeout) it is judged against the last eab. */
static __always_inline void pace_on_state(struct pace_law *p, __u32 ca_state)
{
	int entered = ca_state >= FP_CA_CWR && ca_state != p->ca_state;

	p->ca_state = ca_state;
	if (!entered || p->cwp == 0)
		return;
	if (p->time_eabp_ms == 0)
		p->time_eabp_ms = PACE_FIRST_EABP_MS;
	if (p->eab != 0 && ca_state != FP_CA_LOSS) {
		__u64 diff = p->cwp > p->eab ? p->cwp - p->eab : p->eab - p->cwp;
		if (diff * 1000 <= p->eab * PACE_STABLE_PERMILLE)
			p->time_eabp_ms = fp_min_u32(p->time_eabp_ms * 2, PACE_LONGEST_EABP_MS);
		else
			p->time_eabp_ms = PACE_FIRST_EABP_MS;
	}
	p->eab = p->cwp;
	p->state = PACE_CWP_A;
}

/* Whether the window is held where it is (EABP). */
static __always_inline int pace_holds_window(const struct pace_law *p)
{
	return p->state == PACE_EABP;
}

#endif
