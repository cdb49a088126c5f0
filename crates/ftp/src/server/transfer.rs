//! One data transfer of a session, running beside the control channel so that `ABOR`, `STAT` and
//! `NOOP` are answered while it runs. Ends in the reply the client is owed.

use super::data::DataSpec;
use fatpipe_net::tcpinfo::tcp_stats;
use fatpipe_net::{Pump, PumpError, Tuner, TunerConfig};
use fatpipe_proto::Reply;
use fatpipe_tune::Role;
use std::fs::File;
use std::net::{IpAddr, TcpStream};
use std::os::fd::{AsFd, OwnedFd};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

/// What a transfer moves.
#[derive(Debug)]
pub enum Job {
    /// A file to the client; `ascii` converts LF to CRLF.
    SendFile { file: File, ascii: bool },
    /// Bytes prepared in advance (a listing) to the client.
    SendBytes(Vec<u8>),
    /// The client's data into a file; `ascii` converts CRLF to LF.
    Receive { file: File, ascii: bool },
}

/// Sets options on an active data socket before it connects.
pub type Prepare = Box<dyn FnOnce(&tokio::net::TcpSocket) -> std::io::Result<()> + Send>;

/// Where the connection is made, how long to wait for it, and how an active socket is prepared.
pub struct Endpoints {
    pub spec: DataSpec,
    pub peer_ip: IpAddr,
    pub local_ip: IpAddr,
    pub timeout: Duration,
    pub prepare: Prepare,
}

/// What a running transfer has to say to its session.
#[derive(Debug)]
pub enum Event {
    /// The tuner changed this end's buffer: the drsFTP announcement.
    Announce(u64),
    /// The transfer ended with this reply after moving this many bytes.
    Finished(Reply, u64),
}

/// The tuner of a running transfer, once its connection is made.
type TunerSlot = Arc<Mutex<Option<Tuner>>>;

/// A transfer in progress.
pub struct Running {
    handle: JoinHandle<Result<u64, Reply>>,
    pump: Arc<Pump>,
    tuner: TunerSlot,
    announcements: mpsc::UnboundedReceiver<u64>,
    /// Whether this end receives the data (the drsFTP `126` replies are only for that case).
    pub receiving: bool,
    /// What is being moved, for logs and `STAT`.
    pub label: String,
    started: Instant,
}

impl std::fmt::Debug for Running {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Running")
            .field("label", &self.label)
            .finish()
    }
}

impl Running {
    /// Starts `job` over a connection made as `ends` says, its buffers tuned as `tune` says.
    /// A receiving end with no RTT probes of its own uses the control connection's `control`
    /// (drsFTP's server side: it cannot send probes, only answer them).
    pub fn start(
        job: Job,
        ends: Endpoints,
        label: String,
        tune: Option<TunerConfig>,
        control: Option<OwnedFd>,
    ) -> Running {
        let pump = Arc::new(Pump::default());
        let p = pump.clone();
        let receiving = matches!(job, Job::Receive { .. });
        let role = if receiving {
            Role::Receiver
        } else {
            Role::Sender
        };
        let tuner: TunerSlot = Arc::default();
        let slot = tuner.clone();
        let (tx, announcements) = mpsc::unbounded_channel();
        let handle = tokio::spawn(async move {
            let sock = ends
                .spec
                .connect(ends.peer_ip, ends.local_ip, ends.timeout, ends.prepare)
                .await
                .map_err(|e| Reply::new(425, format!("Cannot open data connection: {e}")))?;
            if let Some(cfg) = tune {
                let t = Tuner::start(cfg, role, &sock, p.clone(), Instant::now())
                    .map_err(|e| Reply::new(425, format!("Cannot tune data connection: {e}")))?;
                *lock(&slot) = Some(t);
            }
            let mut work = tokio::task::spawn_blocking(move || run(&p, job, sock));
            loop {
                let wait = lock(&slot)
                    .as_ref()
                    .map_or(Duration::from_secs(3600), |t| t.due_in(Instant::now()));
                tokio::select! {
                    r = &mut work => {
                        return r.map_err(|e| Reply::new(451, format!("Transfer failed: {e}")))?;
                    }
                    _ = tokio::time::sleep(wait) => {
                        let rtt = control
                            .as_ref()
                            .filter(|_| role == Role::Receiver)
                            .and_then(|fd| tcp_stats(fd.as_fd()).ok())
                            .filter(|s| s.min_rtt_us > 0)
                            .map(|s| Duration::from_micros(s.min_rtt_us.into()));
                        let mut guard = lock(&slot);
                        let announce = guard.as_mut().and_then(|t| {
                            if let Some(r) = rtt {
                                t.on_probe_rtt(r);
                            }
                            t.tick(Instant::now())
                        });
                        drop(guard);
                        if let Some(n) = announce {
                            let _ = tx.send(n);
                        }
                    }
                }
            }
        });
        Running {
            handle,
            pump,
            tuner,
            announcements,
            receiving,
            label,
            started: Instant::now(),
        }
    }

    /// Waits for the transfer's next event: a buffer size to announce, or its end.
    pub async fn next_event(&mut self) -> Event {
        tokio::select! {
            Some(n) = self.announcements.recv() => Event::Announce(n),
            r = &mut self.handle => {
                let (reply, bytes) = (outcome(r), self.pump.bytes());
                Event::Finished(reply, bytes)
            }
        }
    }

    /// The peer announced its buffer (`SBUF` during the transfer); returns this end's buffer.
    pub fn peer_buffer(&self, bytes: u64) -> Option<u64> {
        let mut guard = lock(&self.tuner);
        let t = guard.as_mut()?;
        t.on_peer_buffer(bytes);
        Some(t.current_buffer())
    }

    /// Peak buffer memory and caps met, for the log.
    pub fn tune_summary(&self) -> Option<fatpipe_net::TuneSummary> {
        lock(&self.tuner).as_ref().map(Tuner::summary)
    }

    /// Waits for the transfer to end on its own; returns the final reply and the bytes moved.
    pub async fn finish(&mut self) -> (Reply, u64) {
        let reply = outcome((&mut self.handle).await);
        (reply, self.pump.bytes())
    }

    /// Cancels the transfer and waits until it has stopped; returns the transfer's final reply.
    pub async fn abort(mut self) -> Reply {
        self.pump.cancel();
        let (reply, _) = self.finish().await;
        if reply.code == 226 {
            reply
        } else {
            Reply::new(426, "Transfer aborted")
        }
    }

    /// Progress for `STAT` during a transfer.
    pub fn status(&self) -> String {
        let secs = self.started.elapsed().as_secs_f64();
        let bytes = self.pump.bytes();
        format!(
            "{}: {bytes} bytes in {secs:.1} s ({:.1} Mbit/s)",
            self.label,
            bytes as f64 * 8.0 / secs.max(1e-6) / 1e6
        )
    }
}

/// The reply a finished transfer task earns.
fn outcome(r: Result<Result<u64, Reply>, tokio::task::JoinError>) -> Reply {
    match r {
        Ok(Ok(n)) => Reply::new(226, format!("Transfer complete, {n} bytes")),
        Ok(Err(r)) => r,
        Err(e) => Reply::new(451, format!("Transfer failed: {e}")),
    }
}

/// Locks the tuner slot; a panicked holder leaves a usable value behind.
fn lock(slot: &TunerSlot) -> std::sync::MutexGuard<'_, Option<Tuner>> {
    slot.lock().unwrap_or_else(|e| e.into_inner())
}

fn run(pump: &Pump, job: Job, sock: TcpStream) -> Result<u64, Reply> {
    pump.attach(&sock)
        .map_err(|e| Reply::new(425, format!("Cannot use data connection: {e}")))?;
    let (result, sending) = match job {
        Job::SendFile { file, ascii: false } => (pump.send_file(&file, &sock), true),
        Job::SendFile { file, ascii: true } => (pump.copy_to_ascii(&mut &file, &mut &sock), true),
        Job::SendBytes(bytes) => (pump.copy(&mut &bytes[..], &mut &sock), true),
        Job::Receive { file, ascii: false } => (pump.copy(&mut &sock, &mut &file), false),
        Job::Receive { file, ascii: true } => (pump.copy_from_ascii(&mut &sock, &mut &file), false),
    };
    result.map_err(|e| failure_reply(e, sending))
}

/// Maps a pump failure to the reply RFC 959 prescribes, knowing which side was the file.
fn failure_reply(e: PumpError, sending: bool) -> Reply {
    match (e, sending) {
        (PumpError::Cancelled, _) => Reply::new(426, "Transfer aborted"),
        (PumpError::Read(e), true) => Reply::new(451, format!("Error reading file: {e}")),
        (PumpError::Write(e), true) | (PumpError::Read(e), false) => Reply::new(
            426,
            format!("Data connection broken, transfer aborted: {e}"),
        ),
        (PumpError::Write(e), false) => match e.raw_os_error() {
            Some(libc::ENOSPC) | Some(libc::EDQUOT) => {
                Reply::new(452, format!("Insufficient storage space: {e}"))
            }
            _ => Reply::new(451, format!("Error writing file: {e}")),
        },
    }
}
