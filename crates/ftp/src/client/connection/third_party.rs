//! Server-to-server copies (FTP's third-party transfer, which FTS3 and gfal2 drive for every
//! copy between sites): this end commands both servers, the data goes straight from one to the
//! other (MODE E with parallel streams when both speak it), and this end only waits for the two
//! final replies, counting the sender's performance markers as progress.

use super::{Connection, POLL};
use anyhow::{bail, Context};
use fatpipe_net::admission::Token;
use fatpipe_net::Pump;
use fatpipe_proto::command::ProtLevel;
use fatpipe_proto::gridftp::parse_perf_marker;
use fatpipe_proto::{Command, Reply, TransferType};
use std::sync::Arc;
use std::time::Instant;

/// How a server-to-server copy went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Relayed {
    /// Whether the servers used MODE E.
    pub extended: bool,
    /// The sender's final reply.
    pub sender: Reply,
    /// The receiver's final reply.
    pub receiver: Reply,
}

impl Connection {
    /// Sends `from` on this server to `to` on `dest`'s server, directly between the two: `dest`
    /// listens (`EPSV`/`PASV`), this server connects (`EPRT`/`PORT`). Both servers must allow a
    /// data connection with a host other than their client (fatpipe: `--allow-third-party`).
    /// Between two fatpipe servers the data connections carry a token both were given
    /// (`DTOK`), so the receiver takes no other host's connection.
    /// Data connections between the servers are in clear (TLS between two servers would need
    /// `SSCN`, which is not built): protected sessions are switched to `PROT C` first.
    pub fn relay_to(
        &mut self,
        from: &str,
        dest: &mut Connection,
        to: &str,
        pump: &Arc<Pump>,
    ) -> anyhow::Result<Relayed> {
        // The receiving server takes the sender's data connections only with a token both
        // sessions were given (where both know DTOK); one that does not know it is sent none,
        // and the other's session none either.
        let shared = (self.has_feature("DTOK") && dest.has_feature("DTOK"))
            .then(|| Token::random().ok())
            .flatten();
        for c in [&mut *self, &mut *dest] {
            c.ask_token(shared);
            c.settle()?;
            if c.data_secured() {
                let r = c.command(&Command::Prot(ProtLevel::Clear))?;
                if !r.is_success() {
                    bail!(
                        "{} protects every data connection ({r}); a copy between two servers \
                         cannot be encrypted yet: copy through this machine instead",
                        c.peer
                    );
                }
                c.secure = None;
                tracing::warn!("the data between the servers moves in clear (no SSCN)");
            }
        }
        let extended = self.blocks.is_some() && dest.has_feature("PARALLEL");
        for c in [&mut *self, &mut *dest] {
            c.set_mode(extended);
            c.set_type_only(TransferType::Image);
        }
        let target = dest.passive_target()?;
        let port = match target {
            std::net::SocketAddr::V4(v4) if !self.has_feature("EPRT") => Command::Port(v4),
            a => Command::Eprt(a),
        };
        self.checked(&port)
            .context("the source server refused to send to the other server")?;
        // The receiver first: a server that answers 150 only once the data connection is up
        // (vsftpd) would otherwise wait for a sender not yet told to connect.
        dest.send_with_ahead(&Command::Stor(to.into()))?;
        let sending = self.command(&Command::Retr(from.into()))?;
        if !sending.is_preliminary() {
            let _ = dest.command(&Command::Abor);
            bail!("RETR {from}: {} said {sending}", self.peer);
        }
        let receiving = dest.read_reply()?;
        if !receiving.is_preliminary() {
            let _ = self.command(&Command::Abor);
            bail!("STOR {to}: {} said {receiving}", dest.peer);
        }
        let (sender, receiver) = both_final(self, dest, pump)?;
        if !sender.is_success() {
            bail!("RETR {from}: {} said {sender}", self.peer);
        }
        if !receiver.is_success() {
            bail!("STOR {to}: {} said {receiver}", dest.peer);
        }
        Ok(Relayed {
            extended,
            sender,
            receiver,
        })
    }
}

/// Waits for both servers' final replies, taking the sender's performance markers (`112`) as
/// the bytes moved so far. MODE E servers send markers every few seconds; in MODE S the
/// servers' own data timeouts end a stalled transfer with a reply.
fn both_final(
    sender: &mut Connection,
    receiver: &mut Connection,
    pump: &Arc<Pump>,
) -> anyhow::Result<(Reply, Reply)> {
    let (mut s, mut r) = (None, None);
    let mut heard = Instant::now();
    let silence = sender.timeout.max(receiver.timeout);
    while s.is_none() || r.is_none() {
        for (conn, slot) in [(&mut *sender, &mut s), (&mut *receiver, &mut r)] {
            if slot.is_some() {
                continue;
            }
            let Some(reply) = conn.poll_reply(POLL, None)? else {
                continue;
            };
            heard = Instant::now();
            if reply.is_preliminary() {
                if let Some(n) = parse_perf_marker(&reply) {
                    pump.reported(n);
                }
            } else {
                *slot = Some(reply);
            }
        }
        if sender.extended && heard.elapsed() > silence {
            bail!(
                "neither server said anything for {} (--timeout) during a MODE E copy",
                humantime::format_duration(silence)
            );
        }
    }
    Ok((
        s.unwrap_or_else(|| Reply::new(451, "")),
        r.unwrap_or_else(|| Reply::new(451, "")),
    ))
}
