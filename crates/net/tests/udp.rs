//! The UDP channel end to end on loopback: the receiver's file is the sender's, byte for byte,
//! for lengths around packet and segment edges and with each rate controller.

use fatpipe_net::mode_e::OnStream;
use fatpipe_net::udp::{UdpConfig, UdpReceiver, UdpSender};
use fatpipe_net::{Moved, Mover, Pump, PumpError};
use fatpipe_tune::rate::RateControlKind;
use std::io::Write;
use std::net::{TcpListener, TcpStream};
use std::sync::Arc;
use std::time::Duration;

fn no_links() -> OnStream {
    Arc::new(|_: &TcpStream, _: &Arc<Pump>, _: bool| {})
}

fn config(control: RateControlKind) -> UdpConfig {
    UdpConfig {
        control,
        max_rate: 2e9,
        start_rate: 200e6,
        timeout: Duration::from_secs(20),
        ..UdpConfig::default()
    }
}

/// Sends `data` (from `offset` of the source file) into a file at `at`; returns both movers' results and the file.
fn transfer(
    data: &[u8],
    at: u64,
    control: RateControlKind,
) -> (Result<Moved, PumpError>, Result<Moved, PumpError>, Vec<u8>) {
    let mut src = tempfile::tempfile().unwrap();
    src.write_all(b"skip").unwrap();
    src.write_all(data).unwrap();
    let dst = tempfile::tempfile().unwrap();
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let a = TcpStream::connect(l.local_addr().unwrap()).unwrap();
    let (b, _) = l.accept().unwrap();
    let len = data.len() as u64;
    let (sent, got) = std::thread::scope(|s| {
        let send = s.spawn(|| {
            let m = Box::new(UdpSender {
                link: a,
                file: &src,
                offset: 4,
                length: len,
                config: config(control),
            });
            m.run(&Arc::new(Pump::default()), &no_links())
        });
        let recv = s.spawn(|| {
            let m = Box::new(UdpReceiver {
                link: b,
                file: &dst,
                offset: at,
                limit: u64::MAX,
                config: config(control),
            });
            m.run(&Arc::new(Pump::default()), &no_links())
        });
        (send.join().unwrap(), recv.join().unwrap())
    });
    let mut out = Vec::new();
    use std::io::{Read, Seek};
    let mut dst = dst;
    dst.seek(std::io::SeekFrom::Start(at)).unwrap();
    dst.read_to_end(&mut out).unwrap();
    (sent, got, out)
}

fn pattern(n: usize) -> Vec<u8> {
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

#[test]
fn files_arrive_identical_at_every_edge() {
    let payload = 1470 - 28;
    for n in [
        0,
        1,
        payload - 1,
        payload,
        payload + 1,
        10_000 * payload + 3,
        24 << 20,
    ] {
        let data = pattern(n);
        let (sent, got, out) = transfer(&data, 0, RateControlKind::Default);
        let sent = sent.unwrap_or_else(|e| panic!("{n}: sender {e}"));
        let got = got.unwrap_or_else(|e| panic!("{n}: receiver {e}"));
        assert_eq!(out.len(), n, "{n} bytes");
        assert!(out == data, "{n} bytes differ");
        assert_eq!((sent.bytes, got.bytes), (n as u64, n as u64));
        let udp = sent.udp.unwrap();
        assert!(udp.transmissions >= udp.packets && !udp.fell_back);
    }
}

#[test]
fn every_controller_moves_a_file_to_an_offset() {
    let data = pattern(8 << 20);
    for c in [
        RateControlKind::History,
        RateControlKind::State,
        RateControlKind::Default,
    ] {
        let (sent, got, out) = transfer(&data, 1000, c);
        assert!(sent.is_ok() && got.is_ok(), "{c}: {sent:?} {got:?}");
        assert!(out == data, "{c}: bytes differ");
    }
}

#[test]
fn a_sender_announcing_more_than_allowed_is_refused() {
    let src = tempfile::tempfile().unwrap();
    src.set_len(1 << 20).unwrap();
    let dst = tempfile::tempfile().unwrap();
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let a = TcpStream::connect(l.local_addr().unwrap()).unwrap();
    let (b, _) = l.accept().unwrap();
    let (sent, got) = std::thread::scope(|s| {
        let send = s.spawn(|| {
            Box::new(UdpSender {
                link: a,
                file: &src,
                offset: 0,
                length: 1 << 20,
                config: config(RateControlKind::Default),
            })
            .run(&Arc::new(Pump::default()), &no_links())
        });
        let recv = s.spawn(|| {
            Box::new(UdpReceiver {
                link: b,
                file: &dst,
                offset: 0,
                limit: 1000,
                config: config(RateControlKind::Default),
            })
            .run(&Arc::new(Pump::default()), &no_links())
        });
        (send.join().unwrap(), recv.join().unwrap())
    });
    assert!(
        matches!(got, Err(PumpError::Write(ref e)) if e.kind() == std::io::ErrorKind::FileTooLarge),
        "{got:?}"
    );
    assert!(sent.is_err());
    assert_eq!(dst.metadata().unwrap().len(), 0);
}
