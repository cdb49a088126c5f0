//! What one end of a data connection observes at one instant: the inputs of every law.

use serde::{Deserialize, Serialize};
use std::time::Duration;

/// Which way the data flows at this end.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// This end writes the data: it sizes its send buffer.
    Sender,
    /// This end reads the data: it sizes its receive buffer (the advertised window).
    Receiver,
}

/// The `TCP_INFO` fields the laws use, in plain units. Zero where the kernel gave nothing.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct TcpStats {
    /// Smoothed RTT seen by the sender side of this socket, µs.
    pub rtt_us: u32,
    /// The smoothed RTT's mean deviation, µs: how much single samples stray from it.
    pub rttvar_us: u32,
    /// Minimum RTT seen over the connection, µs.
    pub min_rtt_us: u32,
    /// The receiver's RTT estimate (from timestamps or window round trips), µs.
    pub rcv_rtt_us: u32,
    /// The kernel's own DRS estimate: bytes the receiver got in one RTT.
    pub rcv_space: u32,
    /// Upper bound the kernel currently allows the advertised window to grow to.
    pub rcv_ssthresh: u32,
    /// Congestion window, bytes (`snd_cwnd` × `snd_mss`).
    pub cwnd_bytes: u64,
    /// Slow-start threshold, bytes (`snd_ssthresh` × `snd_mss`; huge until the first loss).
    pub ssthresh_bytes: u64,
    /// Congestion-avoidance state (`tcpi_ca_state`: 0 Open, 1 Disorder, 2 CWR, 3 Recovery,
    /// 4 Loss).
    pub ca_state: u8,
    /// Latest delivery-rate sample, bytes/s.
    pub delivery_rate: u64,
    /// Time spent limited by the peer's receive window, µs since the connection began.
    pub rwnd_limited_us: u64,
    /// Time spent limited by the send buffer, µs since the connection began.
    pub sndbuf_limited_us: u64,
    /// Time spent with data to send, µs since the connection began.
    pub busy_us: u64,
    /// The peer's advertised window, bytes (0 on kernels that do not report it).
    pub snd_wnd: u32,
    /// Our advertised window, bytes (0 on kernels that do not report it).
    pub rcv_wnd: u32,
    /// Bytes sent and not yet acknowledged (`tcpi_unacked` segments of `tcpi_snd_mss`).
    pub unacked_bytes: u64,
    /// Bytes written by the application but not yet sent.
    pub notsent_bytes: u32,
    /// Segments retransmitted over the connection.
    pub total_retrans: u32,
    /// Bytes the peer has acknowledged (what the path delivered).
    pub bytes_acked: u64,
    /// The segment size this end sends, bytes (`tcpi_snd_mss`).
    pub snd_mss: u32,
    /// Bytes that arrived in order (what the receiving kernel took, read or not): a receiver's
    /// arrival clock, free of the application's read pace.
    pub bytes_received: u64,
    /// The pacing ceiling set on the socket, bytes/s: `u64::MAX` when none is (TCP then paces
    /// only under the `fq` qdisc), anything else means TCP paces the socket itself.
    pub max_pacing_rate: u64,
    /// The largest segment the peer sent lately, bytes (the kernel's `rcv_mss` estimate; 64
    /// KiB on loopback).
    pub rcv_mss: u32,
    /// Packets that arrived out of order (behind a hole a lost segment left), a receiver's
    /// count over the connection.
    pub rcv_ooopack: u32,
}

impl TcpStats {
    /// Time the send buffer held sending back since the count was `before_us`, µs: Linux's
    /// count, but only while nothing waits unsent. Once started, Linux keeps that clock running
    /// for as long as a writer tops the buffer up before a third of it drains, as fatpipe's
    /// pump does; data waiting unsent shows that the buffer held nothing back.
    pub fn sndbuf_held_since(&self, before_us: u64) -> u64 {
        if self.notsent_bytes == 0 {
            self.sndbuf_limited_us.saturating_sub(before_us)
        } else {
            0
        }
    }
}

/// One observation of one end, taken by its driver.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Sample {
    /// Time since the data connection was made.
    pub now: Duration,
    /// Payload bytes moved by this end so far.
    pub bytes: u64,
    /// Largest single read from the socket since the previous sample (receivers).
    pub max_read: u64,
    /// Receive buffer as the kernel accounts it (`SO_RCVBUF` read back; `ss` `rb`).
    pub rcvbuf: u64,
    /// Send buffer as the kernel accounts it (`SO_SNDBUF` read back; `ss` `tb`).
    pub sndbuf: u64,
    /// `TCP_INFO` of the data socket, when it could be read.
    pub tcp: Option<TcpStats>,
    /// The latest control-channel round trip (a probe answered by the peer), if any.
    pub probe_rtt: Option<Duration>,
    /// The buffer size the peer last announced over the control channel, bytes.
    pub peer_buffer: Option<u64>,
}
