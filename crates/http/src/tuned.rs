//! The tuning of an HTTP connection while it moves a body: the same transfer core and
//! conductor as an FTP data connection (buffer law, pacing, congestion control), stepped on
//! the runtime.

use fatpipe_net::{Conductor, Pump, TunerConfig};
use fatpipe_tune::Role;
use std::io;
use std::net::TcpStream;
use std::os::fd::AsFd;
use std::sync::Arc;
use tokio::sync::watch;

/// A connection that can be tuned: its socket (a second handle) and the server's tuning.
pub struct Tunable {
    cfg: TunerConfig,
    sock: TcpStream,
}

impl Tunable {
    /// The tuning of `sock` as `cfg` says.
    pub fn new(cfg: &TunerConfig, sock: &impl AsFd) -> io::Result<Tunable> {
        let fd = sock.as_fd().try_clone_to_owned()?;
        Ok(Tunable {
            cfg: cfg.clone(),
            sock: TcpStream::from(fd),
        })
    }

    /// The connection's smallest round trip so far (its handshakes), if the kernel says.
    pub fn round_trip(&self) -> Option<std::time::Duration> {
        let t = fatpipe_net::tcpinfo::tcp_stats(self.sock.as_fd()).ok()?;
        (t.min_rtt_us > 0).then(|| std::time::Duration::from_micros(u64::from(t.min_rtt_us)))
    }

    /// Tunes the connection for one body moved in `role` until the returned handle is
    /// dropped; a connection the laws cannot start on moves untuned (logged).
    pub fn start(&self, role: Role) -> Tuned {
        let pump = Arc::new(Pump::default());
        let (stop, mut stopped) = watch::channel(false);
        let conductor = Conductor::one_connection(self.cfg.clone(), role);
        conductor.on_link()(&self.sock, &pump, false);
        tokio::spawn(async move {
            // An HTTP body has no control channel to announce buffers on.
            let mut unheard = |_| {};
            loop {
                let wait = conductor.step(&mut unheard);
                tokio::select! {
                    _ = tokio::time::sleep(wait) => {}
                    _ = stopped.changed() => break,
                }
            }
            conductor.finish();
        });
        Tuned { pump, _stop: stop }
    }
}

/// A body being moved under tuning; the tuning stops when it is dropped.
pub struct Tuned {
    pump: Arc<Pump>,
    _stop: watch::Sender<bool>,
}

impl Tuned {
    /// The body has moved `total` bytes so far.
    pub fn moved(&self, total: u64) {
        self.pump.reported(total);
    }
}
