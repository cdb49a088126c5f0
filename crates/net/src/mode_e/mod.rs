//! The MODE E data mover: a file sent as blocks over several TCP connections (the sender opens
//! them, and more while the transfer runs when its conductor asks), and blocks received
//! from any number of connections into a file by offset. A [`Channel`] keeps the connections a
//! transfer ended without closing (GridFTP data-channel caching) for the next one. Block framing
//! and bookkeeping are `fatpipe_proto::mode_e`'s; this module only moves bytes.

mod channel;
mod receive;
mod send;

pub use channel::{Channel, Kept, Links};
pub use receive::receive;
pub use send::{growth, send, Grow, Requests, SendJob};

use crate::{Pump, PumpError};
use std::io;
use std::net::TcpStream;
use std::os::fd::BorrowedFd;
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::ScopedJoinHandle;

/// Sets options on a socket before it connects (buffers that fix the window scale).
pub type Prepare = Arc<dyn Fn(BorrowedFd<'_>) -> io::Result<()> + Send + Sync>;
/// Called with each data connection of a transfer, its pump (to start a tuner), and whether
/// the connection is kept from the previous transfer (its windows already grown).
pub type OnStream = Arc<dyn Fn(&TcpStream, &Arc<Pump>, bool) + Send + Sync>;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Joins a transfer's stream threads, all of them; reports the first real failure rather than
/// the cancels it caused in the others (a thread that panicked fails as `panicked` says).
fn join_streams(
    workers: Vec<ScopedJoinHandle<'_, Result<(), PumpError>>>,
    panicked: fn() -> PumpError,
) -> Result<(), PumpError> {
    let mut first: Option<PumpError> = None;
    for w in workers {
        if let Err(e) = w.join().unwrap_or_else(|_| Err(panicked())) {
            if matches!(first, None | Some(PumpError::Cancelled)) {
                first = Some(e);
            }
        }
    }
    first.map_or(Ok(()), Err)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Moved;
    use fatpipe_proto::mode_e::{Header, Reassembly};
    use std::fs::File;
    use std::io::{Seek, Write};
    use std::net::TcpListener;
    use std::os::fd::AsFd;
    use std::os::unix::fs::FileExt;
    use std::time::Duration;

    fn file_with(data: &[u8]) -> File {
        let mut f = tempfile::tempfile().unwrap();
        f.write_all(data).unwrap();
        f.rewind().unwrap();
        f
    }

    fn nothing() -> OnStream {
        Arc::new(|_, _, _| {})
    }

    fn job(data: &[u8], ranges: Vec<(u64, u64)>, streams: u32, close: bool) -> SendJob {
        SendJob {
            file: file_with(data),
            ranges,
            shift: 0,
            block: 64 << 10,
            start: streams,
            close,
            requests: None,
        }
    }

    /// Both ends of a loopback data channel: the sender connects, the receiver accepts.
    fn channels() -> (Arc<Channel>, Channel) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let target = listener.local_addr().unwrap();
        let sending = Channel::new(Links::Connect {
            target,
            from: None,
            prepare: Arc::new(|_| Ok(())),
            timeout: Duration::from_secs(5),
            hedge: Some(crate::socket::hedge_after(Duration::ZERO)),
        });
        let receiving = Channel::new(Links::Accept {
            listener,
            admission: crate::admission::Admission::peer("127.0.0.1".parse().unwrap()),
            timeout: Duration::from_secs(10),
        });
        (Arc::new(sending), receiving)
    }

    /// Sends `job` from one channel to the other; returns the received file.
    fn transfer_over(
        job: SendJob,
        len: usize,
        sending: &Arc<Channel>,
        receiving: &Channel,
    ) -> (Vec<u8>, Moved, Moved) {
        let into = tempfile::tempfile().unwrap();
        let state = Arc::new(Mutex::new(Reassembly::new(len as u64)));
        let ch = sending.clone();
        let sender =
            std::thread::spawn(move || send(job, &ch, &Arc::new(Pump::default()), &nothing()));
        let report = receive(
            &into,
            0,
            &state,
            receiving,
            &Arc::new(Pump::default()),
            &nothing(),
            64,
        )
        .unwrap();
        let sent = sender.join().unwrap().unwrap();
        let mut got = vec![0u8; len];
        into.read_exact_at(&mut got, 0).unwrap_or(());
        (got, sent, report)
    }

    /// Sends `ranges` of `data` over `streams` new loopback connections; returns the received
    /// file.
    fn transfer(data: &[u8], ranges: Vec<(u64, u64)>, streams: u32) -> (Vec<u8>, Moved) {
        let (sending, receiving) = channels();
        let (got, sent, report) = transfer_over(
            job(data, ranges, streams, true),
            data.len(),
            &sending,
            &receiving,
        );
        assert_eq!(sent.streams, streams);
        assert_eq!((sending.idle(), receiving.idle()), (0, 0));
        (got, report)
    }

    /// Item 5 of the trust issue: with a data token, a connection from the right address that
    /// does not show it (another session on the same host) is dropped; the transfer goes on
    /// over its own connections, and nothing of the stranger's lands in the file.
    #[test]
    fn connections_without_the_sessions_token_carry_nothing() {
        let token = crate::admission::Token::random().ok();
        let (sending, receiving) = channels();
        let sending = Arc::new(
            Arc::try_unwrap(sending)
                .unwrap_or_else(|_| unreachable!())
                .proved(token),
        );
        let receiving = receiving.proved(token);
        let target = match &receiving.links {
            Links::Accept { listener, .. } => listener.local_addr().unwrap(),
            Links::Connect { .. } => unreachable!(),
        };
        let data: Vec<u8> = (0..3_000_001u32).map(|i| (i % 249) as u8).collect();
        let stranger = std::thread::spawn(move || {
            // Foreign blocks that would cover the whole file.
            let mut s = TcpStream::connect(target).unwrap();
            let mut block = Header::data(0, 4096).encode().to_vec();
            block.extend_from_slice(&[0xEE; 4096]);
            let _ = s.write_all(&block);
            std::thread::sleep(Duration::from_millis(300));
        });
        std::thread::sleep(Duration::from_millis(50));
        let (got, sent, report) = transfer_over(
            job(&data, vec![(0, data.len() as u64)], 2, true),
            data.len(),
            &sending,
            &receiving,
        );
        stranger.join().unwrap();
        assert!(got == data, "the file holds foreign bytes");
        assert_eq!(sent.streams, 2);
        assert!(report.bytes == data.len() as u64, "{report:?}");
    }

    #[test]
    fn connections_left_open_carry_the_next_transfer() {
        let (sending, receiving) = channels();
        let first: Vec<u8> = (0..1_000_003u32).map(|i| (i % 251) as u8).collect();
        let second: Vec<u8> = (0..2_000_017u32).map(|i| (i * 7 % 241) as u8).collect();
        let whole = |d: &[u8]| vec![(0, d.len() as u64)];
        let (got, _, r) = transfer_over(
            job(&first, whole(&first), 3, false),
            first.len(),
            &sending,
            &receiving,
        );
        assert!(got == first, "first file differs");
        assert_eq!((r.streams, r.reused), (3, 0));
        assert_eq!((sending.idle(), receiving.idle()), (3, 3));
        // The second transfer asks for one connection but uses the three kept ones, and the
        // receiver accepts none; it closes them at its end.
        let (got, sent, r) = transfer_over(
            job(&second, whole(&second), 1, true),
            second.len(),
            &sending,
            &receiving,
        );
        assert!(got == second, "second file differs");
        assert_eq!(sent.streams, 3);
        assert_eq!((r.streams, r.reused), (3, 3));
        assert_eq!((sending.idle(), receiving.idle()), (0, 0));
    }

    #[test]
    fn one_block_files_ride_the_kept_connection_with_the_widest_window() {
        let (sending, receiving) = channels();
        let data: Vec<u8> = (0..4_000_000u32).map(|i| (i % 253) as u8).collect();
        let one_block = |close| SendJob {
            block: 4 << 20,
            ..job(&data, vec![(0, data.len() as u64)], 3, close)
        };
        for round in 0..8 {
            let close = round == 7;
            let (got, _, _) = transfer_over(one_block(close), data.len(), &sending, &receiving);
            assert!(got == data, "file {round} differs");
            if !close {
                // Every file went over the same connection: its window is open, the others'
                // (which carried only EODs) are at the initial one.
                let kept = sending.take_idle();
                let mut acked: Vec<u64> = kept
                    .iter()
                    .map(|l| {
                        let t = crate::tcpinfo::tcp_stats(l.socket().as_fd()).unwrap();
                        t.bytes_acked
                    })
                    .collect();
                acked.sort_unstable();
                let all = (round as u64 + 1) * data.len() as u64;
                assert!(acked[2] >= all, "round {round}: {acked:?}");
                kept.into_iter().for_each(|l| sending.keep(l));
            }
        }
    }

    #[test]
    fn a_kept_connection_the_sender_closed_drops_out() {
        let (sending, receiving) = channels();
        let data = vec![5u8; 400_000];
        let whole = vec![(0, data.len() as u64)];
        let over = |close| job(&data, whole.clone(), 2, close);
        transfer_over(over(false), data.len(), &sending, &receiving);
        assert_eq!(receiving.idle(), 2);
        // The sender's end forgets one of them (closes it) between the transfers: the
        // receiver leaves it out, and the next transfer uses the other and a new one.
        let mut idle = sending.take_idle();
        drop(idle.pop());
        sending.keep(idle.pop().unwrap());
        std::thread::sleep(Duration::from_millis(50));
        let (got, _, r) = transfer_over(over(true), data.len(), &sending, &receiving);
        assert!(got == data, "file differs");
        assert_eq!((r.streams, r.reused), (2, 1));
        // A kept connection closed while the receiver reads it, before any block: not an error.
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let peer = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        receiving.keep(crate::link::Link::Plain(l.accept().unwrap().0));
        let closer = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(200));
            drop(peer);
        });
        let (got, _, r) = transfer_over(over(true), data.len(), &sending, &receiving);
        closer.join().unwrap();
        assert!(got == data, "file differs");
        assert_eq!((r.streams, r.reused), (3, 1));
    }

    #[test]
    fn a_kept_connection_the_receiver_closed_is_not_used() {
        let (sending, receiving) = channels();
        let data: Vec<u8> = (0..500_000u32).map(|i| (i % 249) as u8).collect();
        let whole = vec![(0, data.len() as u64)];
        transfer_over(
            job(&data, whole.clone(), 2, false),
            data.len(),
            &sending,
            &receiving,
        );
        // The receiving end closes one of the two between the transfers.
        let mut idle = receiving.take_idle();
        drop(idle.pop());
        receiving.keep(idle.pop().unwrap());
        std::thread::sleep(Duration::from_millis(50));
        let (got, sent, r) =
            transfer_over(job(&data, whole, 2, true), data.len(), &sending, &receiving);
        assert!(got == data, "file differs");
        assert_eq!((sent.streams, sent.reused), (2, 1));
        assert_eq!((r.streams, r.reused), (2, 1));
    }

    #[test]
    fn a_file_over_four_streams_arrives_whole() {
        let data: Vec<u8> = (0..3_000_001u32).map(|i| (i * 31 % 253) as u8).collect();
        let (got, report) = transfer(&data, vec![(0, data.len() as u64)], 4);
        assert!(got == data, "received file differs");
        assert_eq!(report.bytes, data.len() as u64);
        assert_eq!(report.streams, 4);
    }

    #[test]
    fn only_the_ranges_asked_for_are_sent() {
        let data = vec![7u8; 300_000];
        let (got, report) = transfer(&data, vec![(100_000, 200_000)], 2);
        assert_eq!(report.bytes, 100_000);
        assert!(got[..100_000].iter().all(|b| *b == 0));
        assert!(got[100_000..200_000].iter().all(|b| *b == 7));
    }

    #[test]
    fn an_empty_file_completes() {
        let (got, report) = transfer(&[], vec![(0, 0)], 3);
        assert!(got.is_empty());
        assert_eq!(report.bytes, 0);
    }

    /// The stream that broke is what the receive reports, never the cancel its failure caused
    /// in the others (a retry tells a lost connection from a cancelled copy by it).
    #[test]
    fn a_connection_closed_early_fails_the_receive() {
        for _ in 0..20 {
            let listener = TcpListener::bind("127.0.0.1:0").unwrap();
            let target = listener.local_addr().unwrap();
            let (done, wait) = std::sync::mpsc::channel::<()>();
            let t = std::thread::spawn(move || {
                let idle: Vec<_> = (0..3)
                    .map(|_| TcpStream::connect(target).unwrap())
                    .collect();
                std::thread::sleep(Duration::from_millis(20));
                let mut s = TcpStream::connect(target).unwrap();
                s.write_all(&Header::data(0, 100).encode()).unwrap();
                s.write_all(&[1u8; 10]).unwrap();
                drop(s);
                let _ = wait.recv_timeout(Duration::from_secs(10));
                drop(idle);
            });
            let links = Channel::new(Links::Accept {
                listener,
                admission: crate::admission::Admission::peer("127.0.0.1".parse().unwrap()),
                timeout: Duration::from_secs(5),
            });
            let state = Arc::new(Mutex::new(Reassembly::new(100)));
            let into = tempfile::tempfile().unwrap();
            let r = receive(
                &into,
                0,
                &state,
                &links,
                &Arc::new(Pump::default()),
                &nothing(),
                64,
            );
            let _ = done.send(());
            t.join().unwrap();
            let err = r.unwrap_err().to_string();
            assert!(
                err.contains("data connection closed inside a block"),
                "{err}"
            );
        }
    }
}
