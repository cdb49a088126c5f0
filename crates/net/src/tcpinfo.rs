//! Reading `TCP_INFO` and the socket buffer sizes of a connected TCP socket.

use fatpipe_tune::TcpStats;
use std::io;
use std::os::fd::BorrowedFd;

/// `struct tcp_info` of linux/tcp.h up to `tcpi_rcv_wnd` (Linux 6.x). Older kernels fill a
/// prefix; the rest stays zero.
#[repr(C)]
#[derive(Default, Clone, Copy)]
struct RawTcpInfo {
    state: u8,
    ca_state: u8,
    retransmits: u8,
    probes: u8,
    backoff: u8,
    options: u8,
    wscale: u8,
    flags: u8,
    rto: u32,
    ato: u32,
    snd_mss: u32,
    rcv_mss: u32,
    unacked: u32,
    sacked: u32,
    lost: u32,
    retrans: u32,
    fackets: u32,
    last_data_sent: u32,
    last_ack_sent: u32,
    last_data_recv: u32,
    last_ack_recv: u32,
    pmtu: u32,
    rcv_ssthresh: u32,
    rtt: u32,
    rttvar: u32,
    snd_ssthresh: u32,
    snd_cwnd: u32,
    advmss: u32,
    reordering: u32,
    rcv_rtt: u32,
    rcv_space: u32,
    total_retrans: u32,
    pacing_rate: u64,
    max_pacing_rate: u64,
    bytes_acked: u64,
    bytes_received: u64,
    segs_out: u32,
    segs_in: u32,
    notsent_bytes: u32,
    min_rtt: u32,
    data_segs_in: u32,
    data_segs_out: u32,
    delivery_rate: u64,
    busy_time: u64,
    rwnd_limited: u64,
    sndbuf_limited: u64,
    delivered: u32,
    delivered_ce: u32,
    bytes_sent: u64,
    bytes_retrans: u64,
    dsack_dups: u32,
    reord_seen: u32,
    rcv_ooopack: u32,
    snd_wnd: u32,
    rcv_wnd: u32,
}

/// Reads `TCP_INFO` of `fd`.
pub fn tcp_stats(fd: BorrowedFd<'_>) -> io::Result<TcpStats> {
    let raw: RawTcpInfo = crate::sockopt::get(fd, libc::IPPROTO_TCP, libc::TCP_INFO)?;
    Ok(TcpStats {
        rtt_us: raw.rtt,
        min_rtt_us: raw.min_rtt,
        rcv_rtt_us: raw.rcv_rtt,
        rcv_space: raw.rcv_space,
        rcv_ssthresh: raw.rcv_ssthresh,
        cwnd_bytes: u64::from(raw.snd_cwnd) * u64::from(raw.snd_mss),
        ssthresh_bytes: u64::from(raw.snd_ssthresh) * u64::from(raw.snd_mss),
        ca_state: raw.ca_state,
        delivery_rate: raw.delivery_rate,
        rwnd_limited_us: raw.rwnd_limited,
        sndbuf_limited_us: raw.sndbuf_limited,
        busy_us: raw.busy_time,
        snd_wnd: raw.snd_wnd,
        rcv_wnd: raw.rcv_wnd,
        notsent_bytes: raw.notsent_bytes,
        total_retrans: raw.total_retrans,
        bytes_acked: raw.bytes_acked,
        max_pacing_rate: raw.max_pacing_rate,
    })
}
