//! The movers: what carries a transfer's bytes between a file and its data connections, behind
//! one trait so that the server and the client start, watch and cancel every kind alike. MODE
//! S's stream mover (one connection, plain or under TLS for `PROT P`), MODE E's block sender
//! and receiver (many, made while the transfer runs), the UDP channel's sender and receiver
//! (`udp`). A mover only moves bytes: each connection it makes is handed to the transfer's
//! conductor, which starts the connection's laws, and a UDP channel's sending end is driven by
//! the conductor itself.

use crate::admission::Proof;
use crate::link::Link;
use crate::mode_e::{self, Channel, SendJob};
use crate::tls::Secure;
use crate::{Conductor, Pump, PumpError};
use fatpipe_proto::mode_e::Reassembly;
use std::fs::File;
use std::io::Write;
use std::net::TcpStream;
use std::sync::{Arc, Mutex};

/// What a mover moved.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Moved {
    /// Payload bytes.
    pub bytes: u64,
    /// Data connections that carried them.
    pub streams: u32,
    /// Of those, connections kept from the previous transfer.
    pub reused: u32,
    /// A UDP transfer: what its channel did.
    pub udp: Option<crate::udp::UdpSummary>,
}

/// A transfer's data path: runs to completion, failure or cancel (through `pump`, which also
/// counts the bytes), under the transfer's `driver`, which it hands each connection it makes
/// or reuses.
pub trait Mover: Send {
    /// Moves the data.
    fn run(self: Box<Self>, pump: &Arc<Pump>, driver: &Conductor) -> Result<Moved, PumpError>;
}

/// What a MODE S transfer does on its one connection.
pub enum StreamWork<'a> {
    /// Sends a file from its current position; `ascii` converts LF to CRLF.
    SendFile {
        /// The file.
        file: &'a File,
        /// `TYPE A`.
        ascii: bool,
    },
    /// Sends bytes prepared in advance (a listing).
    SendBytes(Vec<u8>),
    /// Receives into `into`; `ascii` converts CRLF to LF.
    Receive {
        /// Where the bytes go.
        into: &'a mut (dyn Write + Send),
        /// `TYPE A`.
        ascii: bool,
    },
    /// Receives binary data into `file` from its position, `most` bytes at most (more is an
    /// error): spliced in the kernel on a plain connection where the file takes it.
    ReceiveFile {
        /// Where the bytes go.
        file: &'a File,
        /// The size announced, if any.
        most: Option<u64>,
    },
}

/// MODE S: the data over one connection, whose end (the sender closing it) ends the file.
pub struct StreamMover<'a> {
    /// The connection.
    pub link: TcpStream,
    /// What moves over it.
    pub work: StreamWork<'a>,
    /// `PROT P`: the connection is secured first, and the data passes through TLS.
    pub secure: Option<Secure>,
    /// The session's data token, shown or checked before the data (`None`: no token).
    pub proof: Option<Proof>,
}

impl<'a> StreamMover<'a> {
    /// `work` over `link`, secured and proved as `secure` and `proof` say.
    pub fn new(
        link: TcpStream,
        work: StreamWork<'a>,
        secure: Option<Secure>,
        proof: Option<Proof>,
    ) -> Box<StreamMover<'a>> {
        Box::new(StreamMover {
            link,
            work,
            secure,
            proof,
        })
    }
}

impl Mover for StreamMover<'_> {
    fn run(self: Box<Self>, pump: &Arc<Pump>, driver: &Conductor) -> Result<Moved, PumpError> {
        let StreamMover {
            link,
            work,
            secure,
            proof,
        } = *self;
        pump.attach(&link).map_err(PumpError::Write)?;
        driver.link(&link, pump, false);
        let sending = !matches!(
            work,
            StreamWork::Receive { .. } | StreamWork::ReceiveFile { .. }
        );
        let fail = |e| pump.classify(PumpError::Write(e));
        let mut link = Link::new(link, secure.as_ref(), proof).map_err(fail)?;
        let bytes = match (work, &mut link) {
            (StreamWork::SendFile { file, ascii: false }, Link::Plain(s)) => {
                pump.send_file(file, s)
            }
            (StreamWork::ReceiveFile { file, most }, Link::Plain(s))
                if crate::splice::splices_into(file) =>
            {
                crate::splice::receive_file(pump, s, file, most)
            }
            (work, link) => carry(pump, work, link),
        }?;
        // The sender's close is what tells the receiver the file is complete. A receiver
        // answers TLS's close_notify with its own (Python's ftplib waits for it); only the
        // sender's is part of the transfer.
        if sending {
            link.close_write().map_err(fail)?;
            if let Link::Tls(_) = link {
                // What a TLS peer sent and nobody read (session tickets) would turn the close
                // into a reset that could cut the data's tail at the receiver: wait for its end.
                link.await_close(CLOSE_WAIT);
            }
        } else if let Link::Tls(_) = link {
            let _ = link.close_write();
        }
        Ok(Moved {
            bytes,
            streams: 1,
            ..Moved::default()
        })
    }
}

/// Longest wait for a TLS receiver to close after the sender's `close_notify`.
const CLOSE_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// Runs `work` over a connection through the pump's copies (every case but a plain
/// connection's binary file send, which `sendfile` does in the kernel).
fn carry(
    pump: &Pump,
    work: StreamWork<'_>,
    link: &mut (impl std::io::Read + Write),
) -> Result<u64, PumpError> {
    match work {
        StreamWork::SendFile { file, ascii: false } => pump.copy(&mut &*file, link),
        StreamWork::SendFile { file, ascii: true } => pump.copy_to_ascii(&mut &*file, link),
        StreamWork::SendBytes(b) => pump.copy(&mut &b[..], link),
        StreamWork::Receive { into, ascii: false } => pump.copy(link, into),
        StreamWork::Receive { into, ascii: true } => pump.copy_from_ascii(link, into),
        StreamWork::ReceiveFile { file, most } => {
            pump.copy(link, &mut crate::at_most::AtMost::new(file, most))
        }
    }
}

/// MODE E, sending: a file's ranges as blocks over the channel's connections.
pub struct BlockSender<'a> {
    /// What to send.
    pub job: SendJob,
    /// The connections (kept ones first, then new ones).
    pub channel: &'a Channel,
}

impl Mover for BlockSender<'_> {
    fn run(self: Box<Self>, pump: &Arc<Pump>, driver: &Conductor) -> Result<Moved, PumpError> {
        mode_e::send(self.job, self.channel, pump, &driver.on_link())
    }
}

/// MODE E, receiving: blocks from every connection into a file at their offsets.
pub struct BlockReceiver<'a> {
    /// Where the blocks go.
    pub file: &'a File,
    /// Added to every block's offset (`ESTO A`; 0 otherwise).
    pub base: u64,
    /// What has arrived; bounds the offsets (shared so the caller can report it meanwhile).
    pub state: &'a Arc<Mutex<Reassembly>>,
    /// The connections (kept ones first, then the ones the peer makes).
    pub channel: &'a Channel,
    /// Most connections accepted.
    pub max_streams: u32,
}

impl Mover for BlockReceiver<'_> {
    fn run(self: Box<Self>, pump: &Arc<Pump>, driver: &Conductor) -> Result<Moved, PumpError> {
        let r = &*self;
        mode_e::receive(
            r.file,
            r.base,
            r.state,
            r.channel,
            pump,
            &driver.on_link(),
            r.max_streams,
        )
    }
}
