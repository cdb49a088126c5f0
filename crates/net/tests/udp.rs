//! The UDP channel end to end on loopback: the receiver's file is the sender's, byte for byte,
//! for lengths around packet and segment edges and with each rate controller.

use fatpipe_net::udp::{UdpConfig, UdpReceiver, UdpSender};
use fatpipe_net::{Conductor, Moved, Mover, Pump, PumpError};
use fatpipe_tune::rate::RateControlKind;
use fatpipe_tune::Role;
use std::io::Write;
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// The driver of an untuned transfer: it drives the UDP channel's sending end, and tunes no
/// TCP connection.
fn driver() -> Conductor {
    Conductor::new(None, Role::Sender)
}

fn config(control: RateControlKind) -> UdpConfig {
    UdpConfig {
        control,
        max_rate: 2e9,
        start_rate: 200e6,
        timeout: Duration::from_secs(20),
        // The edges below are an Ethernet path's packets.
        packet: Some(1470),
        ..UdpConfig::default()
    }
}

/// Sends `data` (from `offset` of the source file) into a file at `at`; returns both movers' results and the file.
fn transfer(
    data: &[u8],
    at: u64,
    control: RateControlKind,
) -> (Result<Moved, PumpError>, Result<Moved, PumpError>, Vec<u8>) {
    transfer_with(data, at, config(control))
}

/// [`transfer`] with both ends configured as `cfg` says.
fn transfer_with(
    data: &[u8],
    at: u64,
    cfg: UdpConfig,
) -> (Result<Moved, PumpError>, Result<Moved, PumpError>, Vec<u8>) {
    let mut src = tempfile::tempfile().unwrap();
    src.write_all(b"skip").unwrap();
    src.write_all(data).unwrap();
    let dst = tempfile::tempfile().unwrap();
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let a = TcpStream::connect(l.local_addr().unwrap()).unwrap();
    let (b, _) = l.accept().unwrap();
    let len = data.len() as u64;
    let placed = Arc::new(AtomicU64::new(0));
    let (sent, got) = std::thread::scope(|s| {
        let send = s.spawn(|| {
            let m = Box::new(UdpSender {
                link: a,
                file: &src,
                offset: 4,
                length: len,
                config: cfg.clone(),
                proof: None,
                launched: None,
            });
            m.run(&Arc::new(Pump::default()), &driver())
        });
        let recv = s.spawn(|| {
            let m = Box::new(UdpReceiver {
                link: b,
                file: &dst,
                offset: at,
                limit: u64::MAX,
                config: cfg.clone(),
                proof: None,
                in_place: Some(placed.clone()),
                ahead: None,
            });
            m.run(&Arc::new(Pump::default()), &driver())
        });
        (send.join().unwrap(), recv.join().unwrap())
    });
    if got.is_ok() {
        // A hash beside the transfer may read the whole file once it is in.
        assert_eq!(placed.load(Ordering::Acquire), len);
    }
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
fn packets_follow_the_path_s_mtu_when_not_told() {
    // Loopback's MTU (65 536) lets the largest packets of the range through whole.
    let data = pattern((3 << 20) + 5);
    let auto = UdpConfig {
        packet: None,
        ..config(RateControlKind::Default)
    };
    let (sent, got, out) = transfer_with(&data, 0, auto);
    let udp = sent.unwrap().udp.unwrap();
    assert!(!udp.fell_back, "{udp}");
    assert_eq!(got.unwrap().bytes, data.len() as u64);
    let payload = u64::from(*fatpipe_proto::udp::PACKET_RANGE.end()) - 28;
    assert_eq!(udp.packets, (data.len() as u64).div_ceil(payload), "{udp}");
    assert!(out == data);
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
                proof: None,
                launched: None,
            })
            .run(&Arc::new(Pump::default()), &driver())
        });
        let recv = s.spawn(|| {
            Box::new(UdpReceiver {
                link: b,
                file: &dst,
                offset: 0,
                limit: 1000,
                config: config(RateControlKind::Default),
                proof: None,
                in_place: None,
                ahead: None,
            })
            .run(&Arc::new(Pump::default()), &driver())
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

/// A hand-driven peer: the test speaks the feedback messages itself.
struct Peer {
    sock: TcpStream,
    buf: Vec<u8>,
}

impl Peer {
    fn next(&mut self) -> fatpipe_proto::udp::Message {
        use std::io::Read;
        let mut b = [0u8; 65536];
        loop {
            if let Ok(Some((m, used))) = fatpipe_proto::udp::Message::decode(&self.buf) {
                self.buf.drain(..used);
                return m;
            }
            let n = self.sock.read(&mut b).unwrap();
            assert!(n > 0, "the mover closed the connection");
            self.buf.extend_from_slice(&b[..n]);
        }
    }

    fn send(&mut self, m: &fatpipe_proto::udp::Message) {
        self.sock.write_all(&m.encode()).unwrap();
    }
}

#[test]
fn a_receiver_drops_foreign_and_malformed_packets_and_keeps_the_file_right() {
    use fatpipe_proto::udp::{DataHeader, Message, HEADER};
    let dst = tempfile::tempfile().unwrap();
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let mut peer = Peer {
        sock: TcpStream::connect(l.local_addr().unwrap()).unwrap(),
        buf: Vec::new(),
    };
    peer.sock
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let (b, _) = l.accept().unwrap();
    let data = pattern(3000);
    let got = std::thread::scope(|s| {
        let recv = s.spawn(|| {
            Box::new(UdpReceiver {
                link: b,
                file: &dst,
                offset: 0,
                limit: u64::MAX,
                config: config(RateControlKind::Default),
                proof: None,
                in_place: None,
                ahead: None,
            })
            .run(&Arc::new(Pump::default()), &driver())
        });
        // The receiver names its port before it hears the sender's Hello (a round trip
        // fewer before the first packet).
        let Message::Ready { port, token } = peer.next() else {
            panic!("no Ready")
        };
        peer.send(&Message::Hello {
            packet: 1470,
            length: 3000,
        });
        let udp = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        udp.connect(("127.0.0.1", port)).unwrap();
        let packet = |token: u64, tx: u64, index: u64, body: &[u8]| {
            let mut head = [0u8; HEADER];
            DataHeader {
                token,
                tx,
                index,
                sent_us: 0,
            }
            .write(&mut head);
            [&head[..], body].concat()
        };
        // Another token, a place past the end, a body of the wrong size, a runt: all dropped.
        udp.send(&packet(token ^ 1, 1, 0, &[0xAA; 1442])).unwrap();
        udp.send(&packet(token, 2, 9, &[0xAA; 1442])).unwrap();
        udp.send(&packet(token, 3, 0, &[0xAA; 100])).unwrap();
        udp.send(&[1, 2, 3]).unwrap();
        // The real packets, the last one short, one of them twice.
        for (i, body) in data.chunks(1442).enumerate() {
            let p = packet(token, 10 + i as u64, i as u64, body);
            udp.send(&p).unwrap();
            udp.send(&p).unwrap();
        }
        loop {
            match peer.next() {
                Message::Done { bytes } => break assert_eq!(bytes, 3000),
                Message::Report(_) => {}
                m => panic!("{m:?}"),
            }
        }
        drop(peer);
        recv.join().unwrap()
    });
    let moved = got.unwrap();
    let foreign = moved.udp.map(|u| u.foreign).unwrap_or_default();
    assert!(foreign >= 3, "{foreign}");
    use std::os::unix::fs::FileExt;
    let mut out = vec![0u8; 3000];
    dst.read_exact_at(&mut out, 0).unwrap();
    assert!(out == data);
    assert_eq!(dst.metadata().unwrap().len(), 3000);
}

#[test]
fn a_sender_fails_cleanly_on_a_report_of_packets_it_never_sent() {
    use fatpipe_proto::udp::{Message, Report, SegmentBits};
    let src = tempfile::tempfile().unwrap();
    src.set_len(10 << 20).unwrap();
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let a = TcpStream::connect(l.local_addr().unwrap()).unwrap();
    let mut peer = Peer {
        sock: l.accept().unwrap().0,
        buf: Vec::new(),
    };
    let sent = std::thread::scope(|s| {
        let send = s.spawn(|| {
            let mut c = config(RateControlKind::Default);
            c.start_rate = 1e6;
            Box::new(UdpSender {
                link: a,
                file: &src,
                offset: 0,
                length: 10 << 20,
                config: c,
                proof: None,
                launched: None,
            })
            .run(&Arc::new(Pump::default()), &driver())
        });
        let Message::Hello { .. } = peer.next() else {
            panic!("no Hello")
        };
        let sink = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let port = sink.local_addr().unwrap().port();
        peer.send(&Message::Ready { port, token: 5 });
        // Every packet of segment 0 "arrived": far more than was sent at 1 Mbit/s.
        let r = Report {
            received: 1,
            segments: vec![SegmentBits {
                segment: 0,
                bits: vec![0xff; 1250],
            }],
            ..Report::default()
        };
        peer.send(&Message::Report(r));
        send.join().unwrap()
    });
    // An impossible report is an error of the transfer, never a crash.
    assert!(
        matches!(sent, Err(PumpError::Write(ref e)) if e.to_string().contains("the receiver reported")),
        "{sent:?}"
    );
}

/// What [`early_transfer`] gives: whether the train left early, both movers' results, and
/// the receiver's file.
type Early = (
    std::io::Result<()>,
    Result<Moved, PumpError>,
    Result<Moved, PumpError>,
    Vec<u8>,
);

/// A download whose receiver named its socket on a control connection first: the sender's
/// train leaves (`launch`) before the data connection is made, as the server's does on
/// `RETR`; then both movers run over it. `named` is the length the receiver names, `told`
/// whether the receiver's mover starts on its named socket (else it binds one of its own).
fn early_transfer(data: &[u8], named: u64, told: bool) -> Early {
    use fatpipe_net::udp::{launch, ReadyAhead};
    let cfg = UdpConfig {
        timeout: Duration::from_secs(2),
        ..config(RateControlKind::Default)
    };
    let mut src = tempfile::tempfile().unwrap();
    src.write_all(b"skip").unwrap();
    src.write_all(data).unwrap();
    let dst = tempfile::tempfile().unwrap();
    let control = TcpListener::bind("127.0.0.1:0").unwrap();
    let client = TcpStream::connect(control.local_addr().unwrap()).unwrap();
    let ahead = ReadyAhead::bind(&client, &cfg, named).unwrap();
    let len = data.len() as u64;
    let pump = Arc::new(Pump::default());
    let local = "127.0.0.1".parse().unwrap();
    let launched = launch(
        ahead.ready(),
        (local, local),
        None,
        (&src, 4, len),
        &cfg,
        &pump,
    );
    let (launched, early) = match launched {
        Ok(l) => (Some(l), Ok(())),
        Err(e) => (None, Err(e)),
    };
    // The data connection a round trip later: the train waits in the receiver's socket.
    std::thread::sleep(Duration::from_millis(50));
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let a = TcpStream::connect(l.local_addr().unwrap()).unwrap();
    let (b, _) = l.accept().unwrap();
    let (sent, got) = std::thread::scope(|s| {
        let send = s.spawn(|| {
            let m = Box::new(UdpSender {
                link: b,
                file: &src,
                offset: 4,
                length: len,
                config: cfg.clone(),
                proof: None,
                launched,
            });
            m.run(&pump, &driver())
        });
        let recv = s.spawn(|| {
            let m = Box::new(UdpReceiver {
                link: a,
                file: &dst,
                offset: 0,
                limit: u64::MAX,
                config: cfg.clone(),
                proof: None,
                in_place: None,
                ahead: told.then_some(ahead),
            });
            m.run(&Arc::new(Pump::default()), &driver())
        });
        (send.join().unwrap(), recv.join().unwrap())
    });
    let mut out = Vec::new();
    use std::io::Read;
    let mut dst = dst;
    dst.read_to_end(&mut out).unwrap();
    (early, sent, got, out)
}

#[test]
fn a_train_sent_before_the_data_connection_delivers_the_file_whole() {
    for n in [1000, 1442 * 128, (5 << 20) + 7] {
        let data = pattern(n);
        let (early, sent, got, out) = early_transfer(&data, n as u64, true);
        early.unwrap();
        let udp = sent.unwrap().udp.unwrap();
        assert!(!udp.fell_back, "{udp}");
        assert_eq!(got.unwrap().bytes, n as u64);
        assert!(out == data, "{n} bytes");
    }
}

#[test]
fn a_receiver_that_named_another_length_stops_and_says_the_file_changed() {
    let data = pattern(1 << 20);
    let (early, _sent, got, _) = early_transfer(&data, (1 << 20) - 1, true);
    // The sender waits for the data connection instead, and its Hello tells the difference.
    assert!(early.is_err());
    let e = got.expect_err("a file that changed is not taken");
    assert!(e.to_string().contains("the file changed"), "{e}");
}

#[test]
fn a_ready_that_names_another_socket_than_the_one_named_ahead_is_refused() {
    let data = pattern(1 << 20);
    // The receiver binds a socket of its own: its Ready names that.
    let (early, sent, _got, _) = early_transfer(&data, 1 << 20, false);
    early.unwrap();
    let e = sent.expect_err("the train's socket and Ready's must be one");
    assert!(e.to_string().contains("another socket"), "{e}");
}
