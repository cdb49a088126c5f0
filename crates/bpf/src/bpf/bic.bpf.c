// SPDX-License-Identifier: GPL-2.0
/*
 * fatpipe_bic: BIC with adaptive pacing (CWP/EABP) as a TCP congestion control in BPF
 * (struct_ops), the seed's BICIPG with the kernel's pacing in place of the NIC's inter-packet
 * gap; built with FP_PACED=0 it is fatpipe_bicx, BIC alone (the experiments' baseline, and the
 * control under a user-space pacing law). The laws are in bic_law.h; this file binds them to
 * the kernel's hooks:
 *   cong_avoid    BIC's window growth (none while EABP holds the window)
 *   ssthresh      BIC's decrease at a loss
 *   set_state     a loss for the pacing law (entering CWR, Recovery or Loss)
 *   in_ack_event  the pacing ceiling, every ACK: SO_MAX_PACING_RATE, under which the kernel's
 *                 own pacing (sk_pacing_rate from cwnd and RTT) runs
 *   pkts_acked    RTT samples: slow start ends when the queue's delay rises, with the window
 *                 the path held without that queue (the delivery rate x the least RTT at most;
 *                 paced only); the least RTT, which also ends an EABP below the path early
 * and shows the pacing law's state, eab and ceiling to user space in the socket's storage
 * (pace_views, read by the socket's fd) whenever they change: fatpipe's telemetry records them.
 * Kernel structures are declared with only the fields used; CO-RE relocates them against the
 * running kernel's BTF.
 */
#include <linux/bpf.h>
#include <linux/types.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "bic_law.h"

#ifndef FP_PACED
#define FP_PACED 1
#endif

char _license[] SEC("license") = "GPL";

#define SOL_SOCKET 1
#define SO_MAX_PACING_RATE 47
/* Room for a congestion control's private state in inet_connection_sock. */
#define ICSK_CA_PRIV_BYTES (13 * sizeof(__u64))

struct sock {
} __attribute__((preserve_access_index));

struct inet_connection_sock {
	__u64 icsk_ca_priv[13];
} __attribute__((preserve_access_index));

struct tcp_sock {
	__u32 snd_nxt;
	__u32 snd_cwnd;
	__u32 snd_ssthresh;
	__u32 srtt_us;
	__u32 mss_cache;
	__u32 max_packets_out;
	__u32 rate_delivered;
	__u32 rate_interval_us;
	__u64 tcp_mstamp;
	__u8 is_cwnd_limited : 1;
} __attribute__((preserve_access_index));

struct ack_sample {
	__u32 pkts_acked;
	__s32 rtt_us;
} __attribute__((preserve_access_index));

struct tcp_congestion_ops {
	__u32 (*ssthresh)(struct sock *sk);
	void (*cong_avoid)(struct sock *sk, __u32 ack, __u32 acked);
	void (*set_state)(struct sock *sk, __u8 new_state);
	void (*in_ack_event)(struct sock *sk, __u32 flags);
	__u32 (*undo_cwnd)(struct sock *sk);
	void (*pkts_acked)(struct sock *sk, const struct ack_sample *sample);
	void (*init)(struct sock *sk);
	char name[16];
};

extern __u32 tcp_slow_start(struct tcp_sock *tp, __u32 acked) __ksym;
extern void tcp_cong_avoid_ai(struct tcp_sock *tp, __u32 w, __u32 acked) __ksym;

/* One connection's state, kept in icsk_ca_priv. */
struct fp_bic {
	struct bic_law bic;
	struct pace_law pace;
	struct ss_exit ss;
};

_Static_assert(sizeof(struct fp_bic) <= ICSK_CA_PRIV_BYTES, "state fits icsk_ca_priv");

#if FP_PACED
/* What user space reads of a connection's pacing law (fatpipe_bpf::PaceView mirrors it). */
struct pace_view {
	__u64 eab;	    /* bytes/s at the last loss; 0: no loss yet */
	__u32 ceiling;	    /* the pacing ceiling set, bytes/s */
	__u32 state;	    /* PACE_CWP_A, PACE_CWP_B or PACE_EABP */
	__u32 time_eabp_ms; /* the length of the next EABP period */
};

struct {
	__uint(type, BPF_MAP_TYPE_SK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct pace_view);
} pace_views SEC(".maps");

/* Shows the pacing law to user space. */
static __always_inline void show(struct sock *sk, const struct pace_law *p)
{
	struct pace_view *v = bpf_sk_storage_get(&pace_views, sk, 0, BPF_SK_STORAGE_GET_F_CREATE);

	if (!v)
		return;
	v->eab = p->eab;
	v->ceiling = p->ceiling;
	v->state = p->state;
	v->time_eabp_ms = p->time_eabp_ms;
}
#endif

static __always_inline struct fp_bic *state_of(struct sock *sk)
{
	return (struct fp_bic *)((struct inet_connection_sock *)sk)->icsk_ca_priv;
}

static __always_inline struct tcp_sock *tcp_of(struct sock *sk)
{
	return (struct tcp_sock *)sk;
}

static __always_inline int in_slow_start(const struct tcp_sock *tp)
{
	return tp->snd_cwnd < tp->snd_ssthresh;
}

/* Whether the window, not the application, limits the sender (tcp_is_cwnd_limited). */
static __always_inline int cwnd_limited(const struct tcp_sock *tp)
{
	if (in_slow_start(tp))
		return tp->snd_cwnd < 2 * tp->max_packets_out;
	return BPF_CORE_READ_BITFIELD(tp, is_cwnd_limited);
}

SEC("struct_ops")
void BPF_PROG(fp_bic_init, struct sock *sk)
{
	struct fp_bic *s = state_of(sk);

	__builtin_memset(s, 0, sizeof(*s));
	s->pace.time_eabp_ms = PACE_FIRST_EABP_MS;
	s->ss.end_seq = tcp_of(sk)->snd_nxt;
}

SEC("struct_ops")
void BPF_PROG(fp_bic_cong_avoid, struct sock *sk, __u32 ack, __u32 acked)
{
	struct tcp_sock *tp = tcp_of(sk);
	struct fp_bic *s = state_of(sk);

	if (!cwnd_limited(tp))
		return;
	if (in_slow_start(tp)) {
		if (FP_PACED)
			ss_on_ack(&s->ss, ack, tp->snd_nxt);
		acked = tcp_slow_start(tp, acked);
		if (!acked)
			return;
	}
	if (FP_PACED && pace_holds_window(&s->pace))
		return;
	bic_update(&s->bic, tp->snd_cwnd, tp->tcp_mstamp);
	tcp_cong_avoid_ai(tp, s->bic.cnt, acked);
}

SEC("struct_ops")
__u32 BPF_PROG(fp_bic_ssthresh, struct sock *sk)
{
	return bic_on_loss(&state_of(sk)->bic, tcp_of(sk)->snd_cwnd);
}

SEC("struct_ops")
void BPF_PROG(fp_bic_set_state, struct sock *sk, __u8 new_state)
{
	struct fp_bic *s = state_of(sk);

	if (new_state == FP_CA_LOSS) {
		/* A timeout: BIC starts over, and slow start may end on delay again (the pacing
		 * law keeps what it learned). */
		__builtin_memset(&s->bic, 0, sizeof(s->bic));
		s->ss.found = 0;
	}
#if FP_PACED
	__u64 eab = s->pace.eab;
	__u32 state = s->pace.state;

	pace_on_state(&s->pace, new_state);
	if (s->pace.eab != eab || s->pace.state != state)
		show(sk, &s->pace);
#endif
}

#if FP_PACED
SEC("struct_ops")
void BPF_PROG(fp_bic_in_ack_event, struct sock *sk, __u32 flags)
{
	struct tcp_sock *tp = tcp_of(sk);
	struct fp_bic *s = state_of(sk);
	__u32 state = s->pace.state;
	__u32 ceiling = pace_on_ack(&s->pace, tp->snd_cwnd, tp->mss_cache, tp->srtt_us,
				    s->ss.min_rtt_us, in_slow_start(tp), tp->tcp_mstamp);
	__u32 last = s->pace.ceiling;
	int val;

	/* A change of under 1/64 is not worth a setsockopt. */
	if (last != 0 && (ceiling > last ? ceiling - last : last - ceiling) < last / 64) {
		if (s->pace.state != state)
			show(sk, &s->pace);
		return;
	}
	s->pace.ceiling = ceiling;
	val = (int)ceiling;
	bpf_setsockopt(sk, SOL_SOCKET, SO_MAX_PACING_RATE, &val, sizeof(val));
	show(sk, &s->pace);
}

SEC("struct_ops")
void BPF_PROG(fp_bic_pkts_acked, struct sock *sk, const struct ack_sample *sample)
{
	struct tcp_sock *tp = tcp_of(sk);
	__s32 rtt_us = sample->rtt_us;

	if (rtt_us <= 0)
		return;
	struct ss_exit *ss = &state_of(sk)->ss;

	if (!in_slow_start(tp)) {
		ss_note_rtt(ss, (__u32)rtt_us); /* the least RTT, for EABP's early end */
		return;
	}
	if (ss_on_rtt(ss, (__u32)rtt_us, tp->snd_cwnd)) {
		tp->snd_cwnd = ss_exit_window(ss, tp->snd_cwnd, tp->rate_delivered,
					      tp->rate_interval_us);
		tp->snd_ssthresh = tp->snd_cwnd;
	}
}
#endif

SEC("struct_ops")
__u32 BPF_PROG(fp_bic_undo_cwnd, struct sock *sk)
{
	return bic_undo(&state_of(sk)->bic, tcp_of(sk)->snd_cwnd);
}

SEC(".struct_ops.link")
struct tcp_congestion_ops fatpipe_bic = {
	.init = (void *)fp_bic_init,
	.ssthresh = (void *)fp_bic_ssthresh,
	.cong_avoid = (void *)fp_bic_cong_avoid,
	.set_state = (void *)fp_bic_set_state,
#if FP_PACED
	.in_ack_event = (void *)fp_bic_in_ack_event,
	.pkts_acked = (void *)fp_bic_pkts_acked,
#endif
	.undo_cwnd = (void *)fp_bic_undo_cwnd,
#if FP_PACED
	.name = "fatpipe_bic",
#else
	.name = "fatpipe_bicx",
#endif
};
