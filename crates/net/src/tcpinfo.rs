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
        rttvar_us: raw.rttvar,
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
        unacked_bytes: u64::from(raw.unacked) * u64::from(raw.snd_mss),
        notsent_bytes: raw.notsent_bytes,
        total_retrans: raw.total_retrans,
        bytes_acked: raw.bytes_acked,
        snd_mss: raw.snd_mss,
        bytes_received: raw.bytes_received,
        rcv_mss: raw.rcv_mss,
        rcv_ooopack: raw.rcv_ooopack,
        max_pacing_rate: raw.max_pacing_rate,
    })
}

/// The least RTT the kernel has seen on the TCP connection `fd`, once it has seen one.
pub fn min_rtt(fd: BorrowedFd<'_>) -> Option<std::time::Duration> {
    let us = tcp_stats(fd).ok()?.min_rtt_us;
    (us > 0).then(|| std::time::Duration::from_micros(us.into()))
}

/// The path MTU the kernel keeps for the TCP connection `fd`, bytes.
pub fn path_mtu(fd: BorrowedFd<'_>) -> io::Result<u32> {
    let raw: RawTcpInfo = crate::sockopt::get(fd, libc::IPPROTO_TCP, libc::TCP_INFO)?;
    Ok(raw.pmtu)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::buffers::BufferControl;
    use crate::tuner::{before_connect, TunerConfig};
    use fatpipe_tune::{Params, Tuning};
    use socket2::{Domain, Socket, Type};
    use std::net::{SocketAddr, TcpStream};
    use std::os::fd::AsFd;

    /// A loopback connection, both ends prepared for `tuning` before connecting: the window
    /// clamp the listener had before it accepted, and the window scale its accepted end
    /// announced.
    fn prepared(tuning: Tuning) -> (i32, u8) {
        let cfg = TunerConfig {
            tuning,
            params: Params::default(),
            control: BufferControl::new(false),
            stats: None,
            end: "test",
            pacing: None,
            cc: None,
            live: None,
        };
        let listener = Socket::new(Domain::IPV4, Type::STREAM, None).unwrap();
        before_connect(&cfg, &listener).unwrap();
        let clamp =
            crate::sockopt::get(listener.as_fd(), libc::IPPROTO_TCP, libc::TCP_WINDOW_CLAMP)
                .unwrap();
        let any: SocketAddr = "127.0.0.1:0".parse().unwrap();
        listener.bind(&any.into()).unwrap();
        listener.listen(1).unwrap();
        let to = listener.local_addr().unwrap();
        let client = Socket::new(Domain::IPV4, Type::STREAM, None).unwrap();
        before_connect(&cfg, &client).unwrap();
        client.connect(&to).unwrap();
        let (accepted, _) = listener.accept().unwrap();
        let accepted: TcpStream = accepted.into();
        let raw: RawTcpInfo =
            crate::sockopt::get(accepted.as_fd(), libc::IPPROTO_TCP, libc::TCP_INFO).unwrap();
        // tcpi_rcv_wscale is the high nibble.
        (clamp, raw.wscale >> 4)
    }

    #[test]
    fn drs_connections_announce_a_window_scale_fine_enough_to_close_a_window() {
        // drs clamps the window to 64 MiB before connecting, which bounds the scale at 2 KiB
        // units (a lowered window closes by the 2.9 KB of each delayed ACK); without a clamp
        // the scale follows the system's largest buffer (8 KiB units with 256 MiB).
        let (clamp, drs) = prepared(Tuning::Drs);
        let (_, kernel) = prepared(Tuning::Kernel);
        assert_eq!(clamp, 64 << 20);
        assert_eq!(drs, kernel.min(11));
    }
}
