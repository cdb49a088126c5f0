//! The data channel of a session: `PASV`/`EPSV`/`PORT`/`EPRT`, the check that a transfer has a
//! channel before any file is touched, and starting `RETR`/`STOR`/`APPE` transfers on it.

use super::files::fs_reply;
use super::{Flow, Session};
use crate::server::data::{self, same_host, DataSpec};
use crate::server::sandbox::{self, FsError, WriteAt};
use crate::server::transfer::{BlockLimit, Endpoints, Job, Running};
use fatpipe_net::tuner::before_connect;
use fatpipe_proto::command::EpsvArg;
use fatpipe_proto::ranges::RangeSet;
use fatpipe_proto::{addr, Reply, TransferType};
use std::io::{Seek, SeekFrom};
use std::net::SocketAddr;
use std::sync::Arc;

impl Session {
    pub(super) fn bind_passive(&mut self) -> Result<u16, Reply> {
        if self.transfer.is_some() {
            return Err(Reply::new(503, "A transfer is in progress"));
        }
        self.passive_hint = self.passive_hint.wrapping_add(1);
        let listener = fatpipe_net::socket::bind_in_range(
            self.local.ip(),
            self.shared.config.passive_ports.as_ref(),
            self.passive_hint,
            std::net::TcpListener::bind,
        )
        .and_then(|l| {
            before_connect(&self.settings.tune, &l)?;
            let port = l.local_addr()?.port();
            Ok((data::passive(l)?, port))
        });
        match listener {
            Ok((spec, port)) => {
                self.data = spec;
                self.kept = None;
                Ok(port)
            }
            Err(e) => Err(Reply::new(
                425,
                format!("Cannot open passive connection: {e}"),
            )),
        }
    }

    pub(super) fn pasv(&mut self) -> Result<Reply, Reply> {
        if self.epsv_all {
            return Err(Reply::new(503, "EPSV ALL in effect, use EPSV"));
        }
        let std::net::IpAddr::V4(ip) = self.local.ip().to_canonical() else {
            return Err(Reply::new(500, "PASV is IPv4 only; use EPSV"));
        };
        let port = self.bind_passive()?;
        let hp = addr::format_host_port(std::net::SocketAddrV4::new(ip, port));
        Ok(Reply::new(227, format!("Entering Passive Mode ({hp})")))
    }

    pub(super) fn epsv(&mut self, arg: Option<EpsvArg>) -> Result<Reply, Reply> {
        let family = if self.local.ip().to_canonical().is_ipv4() {
            1
        } else {
            2
        };
        match arg {
            Some(EpsvArg::All) => {
                self.epsv_all = true;
                Ok(Reply::new(200, "EPSV ALL ok"))
            }
            Some(EpsvArg::Proto(p)) if p != family => Err(Reply::new(
                522,
                format!("Network protocol not supported, use ({family})"),
            )),
            _ => {
                let port = self.bind_passive()?;
                Ok(Reply::new(
                    229,
                    format!("Entering Extended Passive Mode (|||{port}|)"),
                ))
            }
        }
    }

    /// PORT/EPRT: only to the control connection's own peer (another host for a third-party
    /// copy where the server allows them) and an unprivileged port (RFC 2577).
    pub(super) fn active(&mut self, target: SocketAddr) -> Result<Reply, Reply> {
        if self.epsv_all {
            return Err(Reply::new(503, "EPSV ALL in effect, use EPSV"));
        }
        if !same_host(target.ip(), self.peer.ip()) && !self.third_party(target.ip()) {
            return Err(Reply::new(
                504,
                "Refused: the data address must be the client's own (this server takes \
                 third-party copies only with --allow-third-party, from named users)",
            ));
        }
        if target.port() < 1024 {
            return Err(Reply::new(504, "Refused: privileged data port"));
        }
        if self.transfer.is_some() {
            return Err(Reply::new(503, "A transfer is in progress"));
        }
        self.data = DataSpec::Active(target);
        self.kept = None;
        Ok(Reply::new(200, "PORT command successful"))
    }

    /// Whether a transfer (MODE E or not, `receiving` or sending) has a data channel: a new data
    /// address, or the MODE E connections the last transfer in the same direction left open.
    /// Checked before a file is opened, so that nothing is touched when the transfer cannot start.
    /// Kept connections that this transfer will not use are closed here, as `begin` would.
    pub(super) fn data_ready(&mut self, blocks: bool, receiving: bool) -> Result<(), Reply> {
        self.data_security()?;
        let fresh = !matches!(self.data, DataSpec::None);
        let usable = self
            .kept
            .as_ref()
            .is_some_and(|k| blocks && k.sending != receiving && !fresh);
        if !usable {
            self.kept = None;
        }
        if usable || fresh {
            Ok(())
        } else {
            Err(Reply::new(425, "Use PORT, EPRT, PASV or EPSV first"))
        }
    }

    pub(super) fn begin(
        &mut self,
        job: Job,
        opening: String,
        label: String,
        file: Option<&fatpipe_proto::VPath>,
    ) -> Result<Flow, Reply> {
        // A new transfer ends the hash taken beside the last one: it may change that file.
        self.followed = None;
        // A socket named for the next transfer is this one's, used or not.
        self.settings.udp_ready = None;
        self.watched = None;
        // With no new data address, a MODE E transfer in the direction of the last one uses
        // the connections it left open; `data_ready` has closed any it will not use.
        self.data_ready(job.blocks(), job.receiving())?;
        let secure = self.data_security()?;
        let kept = self.kept.take().map(|k| k.channel);
        let c = &self.shared.config;
        let tune = self.settings.tune.clone();
        // The control connection's RTT stands for the data path's only where the data goes to
        // the client itself (a third-party copy's client may sit beside this server).
        let to_client =
            matches!(&self.data, DataSpec::Active(t) if same_host(t.ip(), self.peer.ip()));
        let control_rtt = match to_client {
            true => self
                .control
                .socket()
                .and_then(fatpipe_net::tcpinfo::min_rtt),
            false => None,
        };
        let ends = Endpoints {
            spec: std::mem::take(&mut self.data),
            // A third-party copy's data comes from the other server.
            admission: self.admission(),
            token: self.token,
            control_rtt,
            local_ip: self.local.ip(),
            timeout: c.data_timeout,
            prepare: Arc::new(move |fd| before_connect(&tune, fd)),
            kept,
            keep_open: self.settings.reuse,
            max_streams: c.max_streams,
            secure,
        };
        let tune = (!matches!(job, Job::SendBytes(_))).then(|| self.settings.tune.clone());
        self.send(Reply::new(150, opening));
        let control = self
            .control
            .socket()
            .and_then(|fd| fd.try_clone_to_owned().ok());
        let mut running = Running::start(job, ends, label, tune, control);
        running.file = file.map(|v| v.to_string());
        self.transfer = Some(running);
        Ok(Flow::Continue)
    }

    pub(super) fn mode_word(&self) -> &'static str {
        match self.settings.ttype {
            TransferType::Ascii => "ASCII",
            TransferType::Image => "BINARY",
        }
    }

    pub(super) fn retr(&mut self, arg: &str) -> Result<Flow, Reply> {
        let offset = std::mem::take(&mut self.settings.rest);
        let held = self.settings.rest_ranges.take();
        let whole = offset == 0 && held.is_none();
        let v = self.path(arg);
        let (file, meta) = self.shared.sandbox.open_read(&v).map_err(fs_reply)?;
        self.data_ready(self.settings.extended, false)?;
        if offset > meta.len() {
            return Err(Reply::new(
                554,
                format!(
                    "Restart offset {offset} is beyond the file's end ({})",
                    meta.len()
                ),
            ));
        }
        (&file)
            .seek(SeekFrom::Start(offset))
            .map_err(|e| fs_reply(e.into()))?;
        // MODE E sends blocks of what was asked for; MODE S (and the UDP channel) the file in
        // order from `offset`, whose bytes before it are in place already.
        let followed = whole || !self.settings.extended;
        let reader = followed.then(|| file.try_clone().ok()).flatten();
        let opening = format!(
            "Opening {} mode data connection for {v} ({} bytes)",
            self.mode_word(),
            meta.len() - offset
        );
        let ascii = self.settings.ttype == TransferType::Ascii;
        let job = if self.settings.extended {
            let ranges = match held {
                Some(h) => h.gaps(0, meta.len()),
                None => vec![(offset, meta.len())],
            };
            Job::SendBlocks {
                file,
                ranges,
                shift: 0,
                parallelism: self.settings.parallelism,
            }
        } else if let (Some(config), false) = (self.settings.udp.clone(), ascii) {
            Job::SendUdp {
                file,
                offset,
                length: meta.len() - offset,
                config,
                ready: self.settings.udp_ready.take().map(|r| (r, self.peer.ip())),
            }
        } else {
            Job::SendFile { file, ascii }
        };
        let flow = self.begin(job, opening, format!("RETR {v} from {offset}"), Some(&v))?;
        if let Some(reader) = reader {
            self.follow(v, reader, offset);
        }
        Ok(flow)
    }

    /// `STOR`/`APPE`. Refused in a fatpipe client's session (`OPTS DRS ON`), it closes the kept
    /// connections: their data, which a client that sends uploads before their turn (FEAT
    /// `PIPELINED STOR`) already sent, is nobody's, and the uploads queued behind find no data
    /// channel (`425`) instead of reading it as theirs.
    pub(super) fn store(&mut self, arg: &str, append: bool) -> Result<Flow, Reply> {
        let started = self.start_store(arg, append);
        if started.is_err() && self.settings.drs_notify {
            self.kept = None;
        }
        started
    }

    fn start_store(&mut self, arg: &str, append: bool) -> Result<Flow, Reply> {
        let offset = std::mem::take(&mut self.settings.rest);
        self.writable()?;
        self.data_ready(self.settings.extended, true)?;
        let v = self.path(arg);
        let at = match (append, offset) {
            (true, _) => WriteAt::End,
            (false, 0) => WriteAt::Start,
            (false, n) => WriteAt::Offset(n),
        };
        let into = self.shared.sandbox.upload(&v, at).map_err(|e| match e {
            FsError::WrongKind(m) if m.starts_with("Restart") => Reply::new(554, m),
            e => fs_reply(e),
        })?;
        let start = into.start();
        let reader = (start == 0).then(|| into.reader().ok()).flatten();
        let opening = format!("Ok to send data for {v} ({} mode)", self.mode_word());
        let ascii = self.settings.ttype == TransferType::Ascii;
        let verb = if append { "APPE" } else { "STOR" };
        let job = if self.settings.extended {
            // Blocks arrive out of order: until the transfer completes, the file carries the
            // record of what it holds, from before its first byte.
            let mut held = RangeSet::default();
            held.insert(0, start);
            let limit = self.block_limit(into.file(), 0);
            Job::ReceiveBlocks {
                into,
                base: 0,
                limit,
                record: Some(held),
            }
        } else {
            match (self.settings.udp.clone(), ascii) {
                (Some(config), false) => {
                    let limit = self.block_limit(into.file(), 0);
                    Job::ReceiveUdp {
                        into,
                        limit,
                        config,
                    }
                }
                _ => Job::Receive { into, ascii },
            }
        };
        let flow = self.begin(job, opening, format!("{verb} {v} at {start}"), Some(&v))?;
        if let Some(reader) = reader {
            self.follow(v, reader, 0);
        }
        Ok(flow)
    }

    /// One past the last byte a MODE E upload into `file` may write, block offsets counted from
    /// `base`: what `ALLO` announced, and never past the room on the file system (or
    /// `--max-file-size`), so that no block offset makes a huge sparse file.
    pub(super) fn block_limit(&mut self, file: &std::fs::File, base: u64) -> BlockLimit {
        let room = sandbox::room(file).unwrap_or(u64::MAX);
        let cap = self.shared.config.max_file_size.unwrap_or(u64::MAX);
        let announced = self.settings.allo.take().unwrap_or(u64::MAX);
        let end = room.min(cap).min(announced);
        BlockLimit {
            end: end.saturating_sub(base),
            disk: end == room && room < cap.min(announced),
        }
    }
}
