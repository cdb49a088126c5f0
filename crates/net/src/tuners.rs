//! The tuners of one transfer: one per data connection, added as connections open (MODE E
//! opens several, and `-p auto` more while it runs), driven together by the control side.

use crate::mode_e::OnStream;
use crate::tcpinfo::tcp_stats;
use crate::{TuneSummary, Tuner, TunerConfig};
use fatpipe_tune::Role;
use std::net::TcpStream;
use std::os::fd::AsFd;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// A shared, growing set of tuners.
#[derive(Clone, Default)]
pub struct Tuners(Arc<Mutex<Vec<Tuner>>>);

impl Tuners {
    fn lock(&self) -> MutexGuard<'_, Vec<Tuner>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Adds the tuner of a connection just made.
    pub fn push(&self, t: Tuner) {
        self.lock().push(t);
    }

    /// A callback for the MODE E mover that starts a tuner (`cfg`, in `role`) on each
    /// connection it makes; without `cfg` connections stay untuned.
    pub fn starter(&self, cfg: Option<TunerConfig>, role: Role) -> OnStream {
        let set = self.clone();
        Arc::new(move |sock, pump, reused| {
            let Some(cfg) = cfg.clone() else { return };
            match Tuner::start(cfg, role, sock, pump.clone(), Instant::now()) {
                Ok(mut t) => {
                    // A receiving connection opened after its siblings have grown starts at
                    // their window (the kernel accounts twice the size set) instead of growing
                    // from scratch, and one kept from the previous transfer at its own (a law
                    // started afresh would judge a window the sender has not refilled since
                    // the pause between files); connections opened together start up normally.
                    if role == Role::Receiver {
                        let sibling = set.lock().iter().map(Tuner::current_buffer).max();
                        if let Some(b) = receiver_seed(sock, t.current_buffer(), sibling, reused) {
                            if let Err(e) = t.seed(b) {
                                tracing::warn!("cannot seed a data connection's buffer: {e}");
                            }
                        }
                    }
                    set.push(t)
                }
                Err(e) => tracing::warn!("cannot tune a data connection: {e}"),
            }
        })
    }

    /// Samples every tuner that is due; returns a buffer size to announce, if one changed.
    pub fn tick(&self, now: Instant) -> Option<u64> {
        self.lock()
            .iter_mut()
            .fold(None, |announce, t| t.tick(now).or(announce))
    }

    /// Samples every tuner once more, due or not, when the transfer has ended: every connection
    /// leaves at least one record, however short the transfer.
    pub fn finish(&self, now: Instant) {
        self.lock().iter_mut().for_each(|t| t.final_sample(now));
    }

    /// Time until the first tuner wants a sample; `None` while there is no tuner.
    pub fn due_in(&self, now: Instant) -> Option<Duration> {
        self.lock().iter().map(|t| t.due_in(now)).min()
    }

    /// A control-channel round trip, for every connection.
    pub fn on_probe_rtt(&self, rtt: Duration) {
        self.lock().iter_mut().for_each(|t| t.on_probe_rtt(rtt));
    }

    /// The peer's announced buffer, for every connection; returns this end's largest buffer.
    pub fn on_peer_buffer(&self, bytes: u64) -> Option<u64> {
        let mut g = self.lock();
        g.iter_mut().for_each(|t| t.on_peer_buffer(bytes));
        g.iter().map(Tuner::current_buffer).max()
    }

    /// What the tuning of all connections amounted to; `None` without tuners.
    pub fn summary(&self) -> Option<TuneSummary> {
        let all: Vec<TuneSummary> = self.lock().iter().map(Tuner::summary).collect();
        (!all.is_empty()).then(|| TuneSummary::combine(&all))
    }
}

/// Where a receiving connection's law starts (a `setsockopt` size), if not from scratch: at
/// the largest sibling's window when that is well above its own (`own`, `sibling`: buffers as
/// the kernel accounts them, twice the size set), else, for a connection kept from the previous
/// transfer, at its own window.
fn receiver_seed(sock: &TcpStream, own: u64, sibling: Option<u64>, reused: bool) -> Option<u64> {
    match sibling.filter(|&b| b > 2 * own) {
        Some(b) => Some(b / 2),
        None if reused => {
            let window = tcp_stats(sock.as_fd()).map_or(0, |s| s.rcv_wnd.into());
            Some(window.max(own / 2))
        }
        None => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::buffers::BufferControl;
    use crate::Pump;
    use fatpipe_tune::{Params, Tuning};
    use std::net::TcpListener;

    /// The receiving end of a loopback connection, its receive buffer set to 1 MiB (2 MiB as
    /// the kernel accounts it), and its window clamp after `starter` saw it.
    fn clamp_after_start(reused: bool) -> i32 {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let _sender = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (receiver, _) = l.accept().unwrap();
        let control = BufferControl::new(false);
        let cfg = TunerConfig {
            tuning: Tuning::Drs,
            params: Params::default(),
            control,
            stats: None,
            end: "test",
        };
        let set = fatpipe_tune::law::Buffers {
            rcvbuf: Some(1 << 20),
            sndbuf: None,
        };
        control.apply(receiver.as_fd(), &set).unwrap();
        let start = Tuners::default().starter(Some(cfg), Role::Receiver);
        start(&receiver, &Arc::new(Pump::default()), reused);
        crate::sockopt::get(receiver.as_fd(), libc::IPPROTO_TCP, libc::TCP_WINDOW_CLAMP).unwrap()
    }

    #[test]
    fn a_kept_receiving_connection_starts_its_law_at_its_own_window() {
        // Kept from the previous transfer: the law starts at the 1 MiB the connection has
        // (and clamps the window there, as a seeded law does).
        assert_eq!(clamp_after_start(true), 1 << 20);
        // A new connection starts its law from scratch: no clamp set.
        assert!(clamp_after_start(false) < 1 << 20);
    }
}
