//! One data transfer of a session, running beside the control channel so that `ABOR`, `STAT` and
//! `NOOP` are answered while it runs. Ends in the reply the client is owed.

use super::data::DataSpec;
use fatpipe_net::{Pump, PumpError};
use fatpipe_proto::Reply;
use std::fs::File;
use std::net::{IpAddr, TcpStream};
use std::sync::Arc;
use std::time::{Duration, Instant};
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

/// Where the connection is made, and how long to wait for it.
#[derive(Debug)]
pub struct Endpoints {
    pub spec: DataSpec,
    pub peer_ip: IpAddr,
    pub local_ip: IpAddr,
    pub timeout: Duration,
}

/// A transfer in progress.
#[derive(Debug)]
pub struct Running {
    handle: JoinHandle<Result<u64, Reply>>,
    pump: Arc<Pump>,
    /// What is being moved, for logs and `STAT`.
    pub label: String,
    started: Instant,
}

impl Running {
    /// Starts `job` over a connection made as `ends` says.
    pub fn start(job: Job, ends: Endpoints, label: String) -> Running {
        let pump = Arc::new(Pump::default());
        let p = pump.clone();
        let handle = tokio::spawn(async move {
            let sock = ends
                .spec
                .connect(ends.peer_ip, ends.local_ip, ends.timeout)
                .await
                .map_err(|e| Reply::new(425, format!("Cannot open data connection: {e}")))?;
            tokio::task::spawn_blocking(move || run(&p, job, sock))
                .await
                .map_err(|e| Reply::new(451, format!("Transfer failed: {e}")))?
        });
        Running {
            handle,
            pump,
            label,
            started: Instant::now(),
        }
    }

    /// Waits for the transfer to end on its own; returns the final reply and the bytes moved.
    pub async fn finish(&mut self) -> (Reply, u64) {
        let reply = match (&mut self.handle).await {
            Ok(Ok(n)) => Reply::new(226, format!("Transfer complete, {n} bytes")),
            Ok(Err(r)) => r,
            Err(e) => Reply::new(451, format!("Transfer failed: {e}")),
        };
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
