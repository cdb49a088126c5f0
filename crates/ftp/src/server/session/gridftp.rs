//! GridFTP commands of a session beyond MODE E itself: `CKSM`, `ERET P` (partial retrieve),
//! `ESTO A` (adjusted store), `SITE SETNETSTACK` (the UDP data channel) and `SITE UDPREADY`
//! (a download's receiving socket, named before its `RETR`).

use super::files::fs_reply;
use super::{Flow, Session};
use crate::server::sandbox::WriteAt;
use crate::server::transfer::Job;
use fatpipe_net::checksum::checksum;
use fatpipe_net::udp::UdpConfig;
use fatpipe_proto::gridftp::Cksm;
use fatpipe_proto::udp::{NetStack, UdpReady, SETNETSTACK, UDPREADY};
use fatpipe_proto::Reply;
use fatpipe_tune::rate::RateControlKind;

impl Session {
    /// `SITE SETNETSTACK …` or `SITE UDPREADY …`.
    pub(super) fn site(&mut self, arg: &str) -> Result<Reply, Reply> {
        let (verb, rest) = arg.trim().split_once(' ').unwrap_or((arg.trim(), ""));
        if verb.eq_ignore_ascii_case(SETNETSTACK) {
            return self.set_net_stack(rest);
        }
        if verb.eq_ignore_ascii_case(UDPREADY) {
            let ready = UdpReady::parse(rest).map_err(|e| Reply::new(501, e))?;
            // Kept for the next transfer whatever it is; a UDP download's train goes to it.
            self.settings.udp_ready = Some(ready);
            return Ok(Reply::new(200, "UDP socket noted for the next transfer"));
        }
        Err(Reply::new(
            504,
            format!("SITE {verb} is not understood here"),
        ))
    }

    /// `SITE SETNETSTACK tcp|udp [control=… rate=… start=…]`: how the next MODE S binary
    /// transfers move (listings, `TYPE A` and MODE E stay on TCP).
    fn set_net_stack(&mut self, rest: &str) -> Result<Reply, Reply> {
        let n = NetStack::parse(rest).map_err(|e| Reply::new(501, e))?;
        if !n.udp {
            self.settings.udp = None;
            return Ok(Reply::new(200, "Network stack: tcp"));
        }
        if self.security.prot == fatpipe_proto::command::ProtLevel::Private {
            return Err(Reply::new(
                534,
                "The UDP data channel cannot be protected: PROT C first, or stay on TCP",
            ));
        }
        let control = match n.control.as_deref() {
            None => RateControlKind::Default,
            Some(c) => RateControlKind::parse(c).ok_or_else(|| {
                Reply::new(
                    501,
                    format!("unknown rate control {c} (default, history, state)"),
                )
            })?,
        };
        let c = &self.shared.config;
        let line = control.line();
        let config = UdpConfig {
            control,
            max_rate: n.rate.map_or(line, |r| r as f64),
            start_rate: n
                .start
                .map_or(UdpConfig::default().start_rate, |r| r as f64),
            ports: c.udp_ports.clone(),
            timeout: c.data_timeout,
            force_buffers: c.tune.control.forced(),
            stats: c.tune.stats.clone(),
            end: "server",
            memory: Some(self.shared.udp_memory(self.peer.ip())),
            ..UdpConfig::default()
        };
        let text = format!("Network stack: udp, {} rate control", config.control);
        self.settings.udp = Some(config);
        Ok(Reply::new(200, text))
    }

    /// `CKSM`: the hash taken beside the transfer that just moved the file, or the file hashed
    /// off the runtime's threads (a large file takes seconds).
    pub(super) async fn cksm(&mut self, c: Cksm) -> Result<Flow, Reply> {
        let v = self.path(&c.path);
        let (file, meta) = self.shared.sandbox.open_read(&v).map_err(fs_reply)?;
        let followed = self.followed(&c, &v)?;
        let id = self.id;
        let sum = tokio::task::spawn_blocking(move || {
            // A hash that could not keep up with the file (it changed) is taken again.
            let beside = followed.and_then(|f| {
                f.finish(meta.len())
                    .map_err(|e| {
                        tracing::debug!(
                            session = id,
                            "the hash taken beside the transfer failed: {e}"
                        )
                    })
                    .ok()
            });
            beside.map_or_else(|| checksum(&file, c.alg, c.offset, c.length), Ok)
        })
        .await
        .map_err(|e| Reply::new(451, format!("Checksum failed: {e}")))?
        .map_err(|e| Reply::new(501, format!("Checksum failed: {e}")))?;
        self.send(Reply::new(213, sum));
        Ok(Flow::Continue)
    }

    /// `ERET P`: part of a file, its block offsets counted from `offset`.
    pub(super) fn eret(&mut self, offset: u64, length: u64, arg: &str) -> Result<Flow, Reply> {
        if !self.settings.extended {
            return Err(Reply::new(503, "ERET needs MODE E"));
        }
        let v = self.path(arg);
        let (file, meta) = self.shared.sandbox.open_read(&v).map_err(fs_reply)?;
        self.data_ready(true, false)?;
        if offset > meta.len() {
            return Err(Reply::new(
                554,
                format!("Offset {offset} is beyond the file's end ({})", meta.len()),
            ));
        }
        let end = offset.saturating_add(length).min(meta.len());
        let job = Job::SendBlocks {
            file,
            ranges: vec![(offset, end)],
            shift: offset,
            parallelism: self.settings.parallelism,
        };
        let opening = format!("Opening data connections for {v} bytes {offset}-{end}");
        self.begin(job, opening, format!("ERET {v} {offset}-{end}"), Some(&v))
    }

    /// `ESTO A`: blocks written at `offset` plus their offsets, into the file as it is.
    pub(super) fn esto(&mut self, offset: u64, arg: &str) -> Result<Flow, Reply> {
        if !self.settings.extended {
            return Err(Reply::new(503, "ESTO needs MODE E"));
        }
        self.writable()?;
        let v = self.path(arg);
        self.data_ready(true, true)?;
        let into = self
            .shared
            .sandbox
            .upload(&v, WriteAt::Keep)
            .map_err(fs_reply)?;
        let limit = self.block_limit(into.file(), offset);
        let opening = format!("Ok to send data for {v} at {offset}");
        self.begin(
            Job::ReceiveBlocks {
                into,
                base: offset,
                limit,
                record: None,
            },
            opening,
            format!("ESTO {v} at {offset}"),
            Some(&v),
        )
    }
}
