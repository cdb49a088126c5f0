//! GridFTP on the client side: `MODE E` transfers over parallel data connections (the sender
//! opens them; `-p auto` lets it choose how many), `OPTS RETR Parallelism`, `REST` ranges for
//! resuming, and `CKSM` for end-to-end verification.

use super::pipeline::Unsettled;
use super::{describe, finish, receive_error, send_error, Connection, Streams};
use anyhow::{bail, Context};
use fatpipe_net::admission::Admission;
use fatpipe_net::mode_e::{Channel, Kept, Links, SendJob};
use fatpipe_net::mover::{BlockReceiver, BlockSender};
use fatpipe_net::socket::hedge_after;
use fatpipe_net::{Conductor, Moved, Mover, Pump};
use fatpipe_proto::gridftp::{parse_transfer_notes, ChecksumAlg, Cksm, Parallelism};
use fatpipe_proto::mode_e::Reassembly;
use fatpipe_proto::ranges::RangeSet;
use fatpipe_proto::{Command, TransferType};
use fatpipe_tune::streams::{cold, StreamLimits, StreamPolicy};
use fatpipe_tune::{CongestionControl, Role};
use std::fs::File;
use std::net::SocketAddr;
use std::os::fd::AsFd;
use std::sync::{Arc, Mutex};

/// The MODE E set-up of a session.
#[derive(Debug, Clone)]
pub(super) struct Blocks {
    /// The parallelism this session asks for (`-p`).
    range: Parallelism,
    /// The parallelism in force at the server (the range, or a pipelined download's fixed
    /// count: pipelined.rs).
    pub(super) parallelism: Parallelism,
    limits: StreamLimits,
    /// `-p auto`: when this end sends, it grows the count itself.
    auto: bool,
    /// Where the next `-p auto` transfer starts: the stream count the previous one of this
    /// session ended with (the same path needs the same), 1 at first.
    next_start: u32,
    /// Why the next transfer starts at `next_start` when that was not this session's doing.
    start_why: Option<String>,
}

/// How the connections of the latest MODE E transfer went.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StreamsReport {
    /// Data connections used.
    pub streams: u32,
    /// Of those, connections the previous transfer left open (warm: no handshake, no slow
    /// start from scratch).
    pub reused: u32,
    /// Why the count changed or stopped (`-p auto`, when this end sent).
    pub decisions: Vec<String>,
    /// The congestion control the sending end switched to on random loss, if it did.
    pub cc: Option<CongestionControl>,
}

/// Asks a server for data-connection reuse between files.
pub(super) fn reuse_command() -> Command {
    Command::Opts("DCREUSE ON".into())
}

/// `CKSM alg 0 -1 path`: a whole remote file's checksum.
pub fn checksum_command(alg: ChecksumAlg, path: &str) -> Command {
    Command::Cksm(Cksm {
        alg,
        offset: 0,
        length: None,
        path: path.into(),
    })
}

/// Largest MODE E block this client sends.
const BLOCK: u64 = 1 << 20;

impl Connection {
    /// Moves files over `streams` data connections from now on: GridFTP `MODE E` with
    /// `OPTS RETR Parallelism` when more than one, or `auto`; needs the server's `PARALLEL`
    /// feature (else one stream in MODE S, with a warning). Against a server that cannot grow
    /// the count itself (not fatpipe), `auto` downloads use a fixed 4.
    pub fn set_streams(&mut self, streams: Streams) -> anyhow::Result<()> {
        self.blocks = None;
        let (parallelism, limits) = match streams {
            Streams::Fixed(0) => bail!("-p needs at least one stream"),
            Streams::Fixed(1) => return Ok(()),
            Streams::Fixed(n) => (
                Parallelism::fixed(n),
                StreamLimits {
                    max: n,
                    max_memory: None,
                },
            ),
            Streams::Auto { max, max_memory } => {
                // A sending server does not know this end's memory bound: ask for no more
                // streams than it allows at the receive-buffer cap of one socket.
                let cap = self.tune.as_ref().and_then(|t| t.control.receive_cap());
                let by_memory = match (max_memory, cap) {
                    (Some(m), Some(c)) if c > 0 => (m / c).clamp(1, u64::from(max)) as u32,
                    _ => max,
                };
                let p = if self.has_feature("DRS") {
                    Parallelism {
                        start: 1,
                        min: 1,
                        max: by_memory,
                    }
                } else {
                    Parallelism::fixed(4.min(max))
                };
                (p, StreamLimits { max, max_memory })
            }
        };
        if !self.has_feature("PARALLEL") {
            let why = format!(
                "{} has no PARALLEL feature (GridFTP MODE E): using one stream in MODE S",
                self.peer
            );
            // Asked for by number: say so; `auto` falls back quietly.
            match streams {
                Streams::Fixed(_) => tracing::warn!("{why}"),
                Streams::Auto { .. } => tracing::debug!("{why}"),
            }
            return Ok(());
        }
        // Both go out with the next command; the answer to the second is taken before the
        // next transfer ([`Connection::settle`]).
        self.set_ahead(Command::Opts(format!("RETR {parallelism}")));
        self.kept = None;
        if !self.reuse && self.has_feature("DCREUSE") {
            self.ask_ahead(reuse_command());
            self.pipe.unsettled.push(Unsettled::Reuse);
        }
        self.blocks = Some(Blocks {
            range: parallelism,
            parallelism,
            limits,
            auto: matches!(streams, Streams::Auto { .. }),
            next_start: 1,
            start_why: None,
        });
        Ok(())
    }

    /// With `-p auto`, starts the next transfer with `streams` (within `--max-streams`) instead
    /// of one; `why` completes its note `started with N streams, <why>` (e.g. what an earlier
    /// copy to the same server ended with).
    pub fn start_streams_at(&mut self, streams: u32, why: String) {
        if let Some(b) = self.blocks.as_mut().filter(|b| b.auto) {
            b.next_start = streams.clamp(1, b.limits.max);
            b.start_why = Some(why);
        }
    }

    /// With `-p auto` and nothing else to go by (no earlier transfer, no path memory), starts
    /// the next transfer, of `size` bytes, with the streams login's round trip and this host's
    /// buffer cap call for ([`cold::cold_start`]).
    pub fn start_cold(&mut self, size: u64) {
        let Some(b) = self
            .blocks
            .as_ref()
            .filter(|b| b.auto && b.start_why.is_none() && b.next_start == 1)
        else {
            return;
        };
        let cap = self.tune.as_ref().and_then(|t| t.control.receive_cap());
        let Some(rtt) = self.round_trip() else {
            return;
        };
        if let Some(c) = cold::cold_start(
            rtt,
            cap,
            size,
            b.limits.max,
            fatpipe_net::conductor::host_cores(),
        ) {
            self.start_streams_at(c.streams, c.why);
        }
    }

    /// Whether files move in MODE E (`set_streams` with more than one, and the server can).
    pub fn uses_blocks(&self) -> bool {
        self.blocks.is_some()
    }

    /// Connections and stream decisions of the latest MODE E transfer.
    pub fn last_streams(&self) -> Option<&StreamsReport> {
        self.last.streams.as_ref()
    }

    /// Asks the server for a checksum of a whole remote file (`CKSM alg 0 -1 path`).
    /// The answer comes from a `CKSM` asked ahead ([`Connection::ask_ahead`]) when there is one.
    pub fn checksum(&mut self, alg: ChecksumAlg, path: &str) -> anyhow::Result<String> {
        self.checksum_answer(&checksum_command(alg, path))
    }

    /// The server's checksum of `path`'s first `length` bytes.
    pub fn checksum_of_prefix(
        &mut self,
        alg: ChecksumAlg,
        path: &str,
        length: u64,
    ) -> anyhow::Result<String> {
        self.checksum_answer(&Command::Cksm(Cksm {
            alg,
            offset: 0,
            length: Some(length),
            path: path.into(),
        }))
    }

    /// The answer to the `CKSM` command `cmd`.
    fn checksum_answer(&mut self, cmd: &Command) -> anyhow::Result<String> {
        let r = self.ask(cmd)?;
        if !r.is_success() {
            bail!("{cmd}: server said {r}");
        }
        Ok(r.text().trim().to_ascii_lowercase())
    }

    /// The checksum algorithms both ends know, fastest first (from `FEAT`'s `CKSM` line).
    pub fn checksum_algs(&self) -> Vec<ChecksumAlg> {
        let listed: Vec<ChecksumAlg> = self
            .feature_params("CKSM")
            // fatpipe lists `MD5,ADLER32,…`; Globus `MD5:10;ADLER32:10;…` (name:priority).
            .flat_map(|l| {
                l.split([',', ';'])
                    .filter_map(|a| ChecksumAlg::parse(a.split(':').next().unwrap_or("")))
            })
            .collect();
        [
            ChecksumAlg::Xxh3,
            ChecksumAlg::Adler32,
            ChecksumAlg::Md5,
            ChecksumAlg::Sha256,
        ]
        .into_iter()
        .filter(|a| listed.contains(a))
        .collect()
    }

    /// `MODE E` or `MODE S` (which ends the kept MODE E connections at both ends); it goes out
    /// with the next command.
    pub(super) fn set_mode(&mut self, extended: bool) {
        if self.extended != extended {
            self.kept = None;
            let cmd = if extended {
                Command::ModeExtended
            } else {
                Command::ModeStream
            };
            self.set_ahead(cmd);
            self.extended = extended;
        }
    }

    /// Listens for the server's data connections (MODE E downloads: the sender connects) and
    /// tells the server where (`PORT`, or `EPRT` for IPv6); a new address ends the kept
    /// connections at both ends.
    pub(super) fn listen_data(&mut self) -> anyhow::Result<std::net::TcpListener> {
        self.kept = None;
        let local = self.control.get_ref().tcp().local_addr()?;
        let l =
            fatpipe_net::socket::bind_in_range(local.ip(), None, 0, std::net::TcpListener::bind)
                .context("cannot listen for data connections")?;
        self.prepare()(l.as_fd())?;
        let at = SocketAddr::new(local.ip(), l.local_addr()?.port());
        let cmd = match at {
            SocketAddr::V4(a) => Command::Port(a),
            SocketAddr::V6(_) => Command::Eprt(at),
        };
        // The server's passive address, if one was asked ahead, ends with this one.
        self.forget(&Command::Epsv(None));
        self.set_ahead(cmd);
        Ok(l)
    }

    /// Downloads `path` in MODE E over the connections the server opens to this end, into
    /// `file` at the blocks' offsets; `held` is what the file already holds (a resume asks only
    /// for the rest, with `REST` ranges). `state` collects what arrives (also when the transfer
    /// fails) and bounds the offsets the server may write.
    pub fn retrieve_blocks(
        &mut self,
        path: &str,
        held: &RangeSet,
        file: &File,
        pump: &Arc<Pump>,
        state: &Arc<Mutex<Reassembly>>,
    ) -> anyhow::Result<u64> {
        let next = std::mem::take(&mut self.pipe.next_files);
        let retr = Command::Retr(path.into());
        self.settle()?;
        self.set_mode(true);
        self.set_type_only(TransferType::Image);
        // Sent behind the previous file's RETR: runs as sent, or goes out anew.
        let pipelined = held.is_empty() && self.take_queued(&retr);
        if !pipelined {
            self.drain_queued()?;
        }
        let resumed = match pipelined {
            true => None,
            false => self.start_where_the_last_ended()?,
        };
        let channel = match self.kept_channel(false) {
            Some(c) => c,
            None => Channel::new(Links::Accept {
                listener: self.listen_data()?,
                // The server's connections only, each showing the session's token: not another
                // session's of the same server.
                admission: Admission::peer(self.peer.ip()),
                timeout: self.timeout,
            })
            .secured(self.secure.clone())
            .proved(self.token),
        };
        let start = self.blocks.as_ref().map_or(1, |b| b.parallelism.start);
        self.prepare_next(next, channel.idle(), start);
        let rest = (!held.is_empty()).then(|| Command::RestRanges(held.clone()));
        let (what, ()) = match self.begin(rest, &retr, |_| Ok(())) {
            Ok(begun) => begun,
            Err(e) => {
                // The server keeps its ends of a refused transfer's connections (the next file's
                // transfer, sent behind this one, runs over them).
                if channel.idle() > 0 || !self.pipe.queued.is_empty() {
                    self.kept = Some(Kept {
                        sending: false,
                        channel,
                    });
                }
                return Err(e);
            }
        };
        let conductor = Conductor::new(self.tune.clone(), Role::Receiver);
        // A server opens no more than it was offered; more would only cost threads here.
        let max_streams = self
            .blocks
            .as_ref()
            .map_or(1, |b| b.range.max.max(b.limits.max));
        let mover = Box::new(BlockReceiver {
            file,
            base: 0,
            state,
            channel: &channel,
            max_streams,
        });
        let driver = &conductor;
        let (moved, fin) = self.drive(&conductor, Some(pump), || {
            mover.run(pump, driver).map_err(|e| receive_error(path, e))
        })?;
        if let Ok(r) = &moved {
            // A fatpipe sender says in its final reply why it used as many streams as it did.
            let notes = fin.as_ref().map(parse_transfer_notes).unwrap_or_default();
            let cc = notes.cc.map(CongestionControl::from);
            self.record_streams(resumed, r, notes.decisions, cc);
        }
        self.keep_channel(false, channel, &moved, &fin);
        finish(&what, moved.map(|r| r.bytes), fin)
    }

    /// Uploads `file` from `have` to its end in MODE E over connections this end opens (more
    /// while it runs with `-p auto`).
    pub fn store_blocks(
        &mut self,
        path: &str,
        have: u64,
        file: &File,
        pump: &Arc<Pump>,
    ) -> anyhow::Result<u64> {
        let blocks = self.blocks.clone().context("MODE E is not set up")?;
        let start = if blocks.auto {
            blocks.next_start.min(blocks.limits.max)
        } else {
            blocks.range.start
        };
        self.settle()?;
        self.set_mode(true);
        self.set_type_only(TransferType::Image);
        let channel = match self.kept_channel(true) {
            Some(c) => c,
            None => Channel::new(Links::Connect {
                target: self.passive_target()?,
                from: None,
                prepare: self.prepare(),
                timeout: self.timeout,
                hedge: self.token.and(self.round_trip()).map(hedge_after),
            })
            .secured(self.secure.clone())
            .proved(self.token),
        };
        // With -p auto this end's conductor grows the stream count, asking the mover.
        let policy = blocks.auto.then(|| StreamPolicy::new(blocks.limits));
        let (conductor, mover) = self.block_upload(file, have, start, policy, &channel)?;
        self.last.tune = None;
        self.last.streams = None;
        if have > 0 {
            self.set_ahead(Command::Rest(have));
        }
        let cmd = Command::Stor(path.into());
        let what = describe(&cmd);
        // Some servers (Globus) answer 150 only once a data connection is made: connect at
        // once, and take the 150 while the data moves.
        self.send_with_ahead(&cmd)?;
        let driver = &conductor;
        let (moved, fin) = self.drive(&conductor, Some(pump), || {
            mover.run(pump, driver).map_err(|e| send_error(path, e))
        })?;
        if let Ok(r) = &moved {
            let resumed = (blocks.auto && start > 1).then_some(start);
            self.record_send(resumed, &conductor, r);
        }
        self.keep_channel(true, channel, &moved, &fin);
        finish(&what, moved.map(|r| r.bytes), fin)
    }

    /// A MODE E upload of `file` from `have` to its end over `channel`: its conductor (`start`
    /// streams, more as `policy` decides) and the mover that sends it.
    pub(super) fn block_upload<'c>(
        &self,
        file: &File,
        have: u64,
        start: u32,
        policy: Option<StreamPolicy>,
        channel: &'c Channel,
    ) -> anyhow::Result<(Conductor, Box<BlockSender<'c>>)> {
        let len = file.metadata()?.len();
        let (conductor, requests) = Conductor::sending(self.tune.clone(), policy, start);
        let job = SendJob {
            file: file.try_clone()?,
            ranges: vec![(have, len)],
            shift: 0,
            block: BLOCK,
            start,
            close: !self.reuse,
            requests,
        };
        Ok((conductor, Box::new(BlockSender { job, channel })))
    }

    /// Keeps how an upload's senders went (see [`Connection::record_streams`]): their
    /// conductor's decisions and the congestion control it switched to.
    pub(super) fn record_send(
        &mut self,
        resumed: Option<u32>,
        conductor: &Conductor,
        moved: &Moved,
    ) {
        self.record_streams(resumed, moved, conductor.decisions(), conductor.chosen_cc());
    }

    /// With `-p auto` and a server that grows the count itself, asks it (`OPTS RETR`) to start
    /// the next download with the streams the previous transfer ended with; answers that count
    /// when more than one.
    fn start_where_the_last_ended(&mut self) -> anyhow::Result<Option<u32>> {
        let Some(b) = self
            .blocks
            .clone()
            .filter(|b| b.auto && b.range.max > b.range.min)
        else {
            return Ok(None);
        };
        let start = b.next_start.min(b.range.max);
        let p = Parallelism { start, ..b.range };
        if p != b.parallelism {
            self.set_ahead(Command::Opts(format!("RETR {p}")));
            if let Some(b) = self.blocks.as_mut() {
                b.parallelism = p;
            }
        }
        Ok((start > 1).then_some(start))
    }

    /// The connections the last transfer left open, when it went the same way (`sending`);
    /// otherwise they are closed here, as the server closes its ends at the new data address
    /// that follows.
    fn kept_channel(&mut self, sending: bool) -> Option<Channel> {
        self.kept
            .take()
            .filter(|k| k.sending == sending)
            .map(|k| k.channel)
    }

    /// Keeps the connections a transfer left open for the next one, if it worked at both ends
    /// (the server keeps its ends only then) and the server reuses them (`DCREUSE`; other
    /// servers get a new data address for every file).
    fn keep_channel<T>(
        &mut self,
        sending: bool,
        channel: Channel,
        moved: &anyhow::Result<T>,
        fin: &anyhow::Result<fatpipe_proto::Reply>,
    ) {
        self.kept = None;
        if moved.is_ok() && fin.as_ref().is_ok_and(|r| r.is_success()) {
            self.keep_open(sending, channel);
        }
    }

    /// Keeps the connections a transfer that worked left open for the next one, when the
    /// server reuses them.
    pub(super) fn keep_open(&mut self, sending: bool, channel: Channel) {
        self.kept = (self.reuse && channel.idle() > 0).then_some(Kept { sending, channel });
    }

    /// Keeps how a MODE E transfer went and, with `-p auto`, where the next one starts;
    /// `resumed` is the count it started with when taken over from the previous transfer,
    /// `moved` what it moved over how many connections (and how many the previous transfer left
    /// open), `cc` the congestion control its senders switched to.
    fn record_streams(
        &mut self,
        resumed: Option<u32>,
        moved: &Moved,
        mut decisions: Vec<String>,
        cc: Option<CongestionControl>,
    ) {
        let (streams, reused) = (moved.streams, moved.reused);
        let mut why = None;
        if let Some(b) = self.blocks.as_mut().filter(|b| b.auto) {
            b.next_start = streams.max(1);
            why = b.start_why.take();
        }
        if let Some(n) = resumed {
            let why = why
                .unwrap_or_else(|| "where the previous transfer of this session ended".to_string());
            decisions.insert(0, format!("started with {n} streams, {why}"));
        }
        self.last.streams = Some(StreamsReport {
            streams,
            reused,
            decisions,
            cc,
        });
    }
}
