//! The session's settings for the transfers to come (tuning, the data token, whether the server
//! hashes what it sends): asked ahead with the next command where the server pipelines them,
//! and their answers settled before a transfer needs them.

use super::gridftp::reuse_command;
use super::pipeline::Unsettled;
use super::Connection;
use fatpipe_net::admission::Token;
use fatpipe_net::TunerConfig;
use fatpipe_proto::drs::DrsOpts;
use fatpipe_proto::gridftp::ChecksumAlg;
use fatpipe_proto::Command;
use fatpipe_tune::Tuning;

/// `DTOK` with `token` (`None`: `DTOK NONE`).
pub(super) fn dtok(token: Option<Token>) -> Command {
    Command::Dtok(token.map(|t| t.to_hex()))
}

impl Connection {
    /// Tunes the data connections from now on: tells the server the mode (`OPTS DRS` with a
    /// fatpipe server, `SBUF` for fixed sizes with other GridFTP servers) and runs the mode's law
    /// at this end.
    pub fn set_tuning(&mut self, cfg: TunerConfig) -> anyhow::Result<()> {
        self.drs_peer = false;
        let tuning = cfg.tuning;
        let opts = DrsOpts {
            notify: Some(true),
            tuning: Some(tuning.to_string()),
            pacing: cfg.pacing.map(|p| p.to_string()),
            cc: cfg.cc.as_ref().map(|c| c.user_name().to_string()),
            paced: None,
            hash: None,
        };
        self.tune = Some(cfg);
        if self.has_feature("DRS") {
            // Its answer is taken before the next transfer ([`Connection::settle`]).
            self.ask_ahead(Command::Opts(opts.to_string()));
            self.pipe.unsettled.push(Unsettled::Drs(opts));
            return Ok(());
        }
        self.fixed_buffers(tuning)
    }

    /// Tells a fatpipe server whether this end will ask for the checksum of the files it moves
    /// next (`OPTS DRS Hash=`, with the next command): a server that hashes them beside their
    /// transfers reads each file a second time, which a copy that does not verify (to
    /// /dev/null, `--no-verify`) need not cost it. Transfers already asked for keep the word
    /// they were asked under; a server without the option just hashes.
    pub(crate) fn verifies(&mut self, xxh3: bool) {
        if xxh3 == self.server_hashes || !self.has_feature("DRS") {
            return;
        }
        self.server_hashes = xxh3;
        let hash = if xxh3 {
            ChecksumAlg::Xxh3.to_string()
        } else {
            "off".into()
        };
        let opts = DrsOpts {
            hash: Some(hash),
            ..DrsOpts::default()
        };
        self.tell_ahead(Command::Opts(opts.to_string()));
    }

    /// What the session's settings asked ahead were answered (`OPTS DRS`, `OPTS DCREUSE`,
    /// `DTOK`, `SITE SETNETSTACK`), taken before a transfer needs it: they go out with the next
    /// command, not a round trip of their own.
    pub(super) fn settle(&mut self) -> anyhow::Result<()> {
        for u in std::mem::take(&mut self.pipe.unsettled) {
            match u {
                Unsettled::Drs(opts) => self.settle_drs(opts)?,
                Unsettled::Reuse => self.reuse = self.ask(&reuse_command())?.is_success(),
                Unsettled::Token(t) => {
                    let taken = self.ask(&dtok(Some(t)))?.is_success();
                    self.token = taken.then_some(t);
                }
                Unsettled::Udp(cmd, fallback, asked) => self.settle_udp(&cmd, fallback, asked)?,
                Unsettled::UdpReady(cmd, taken) => self.settle_udp_ready(&cmd, &taken)?,
            }
        }
        Ok(())
    }

    /// [`Connection::settle`] before a MODE S transfer whose mover may be the UDP channel's or
    /// a TCP stream's: a `SITE SETNETSTACK udp` (asked only of a server that lists the
    /// channel) goes out with the transfer command instead of a round trip ahead of it, and its
    /// answer, read before the transfer's, is settled once the command went
    /// ([`Connection::settle`] again; refused, that transfer runs over the TCP connection).
    pub(super) fn settle_before_transfer(&mut self) -> anyhow::Result<()> {
        let (later, now) = std::mem::take(&mut self.pipe.unsettled)
            .into_iter()
            .partition(|u| matches!(u, Unsettled::Udp(..) | Unsettled::UdpReady(..)));
        self.pipe.unsettled = now;
        self.settle()?;
        self.pipe.unsettled = later;
        Ok(())
    }

    /// The server's answer to `OPTS DRS` with `opts`: whether it speaks the drsFTP messages.
    fn settle_drs(&mut self, opts: DrsOpts) -> anyhow::Result<()> {
        let r = self.ask(&Command::Opts(opts.to_string()))?;
        self.drs_peer = r.is_success();
        // A server that knows DRS but not the pacing or congestion control asked for
        // says why; the transfer goes on without them (uploads still use them here).
        if !self.drs_peer && (opts.pacing.is_some() || opts.cc.is_some()) {
            tracing::warn!("the server refused {opts}: {r}; downloads use its defaults");
            let plain = DrsOpts {
                pacing: None,
                cc: None,
                ..opts
            };
            self.drs_peer = self
                .command(&Command::Opts(plain.to_string()))?
                .is_success();
        }
        if !self.drs_peer {
            if let Some(t) = self.tune.as_ref().map(|t| t.tuning) {
                self.fixed_buffers(t)?;
            }
        }
        Ok(())
    }

    /// Asks a server that knows `DTOK` to take data connections only with `token` (`None`:
    /// with none); its answer is taken before the next transfer ([`Connection::settle`]), and
    /// until then data connections carry no token.
    pub(super) fn ask_token(&mut self, token: Option<Token>) {
        if !self.has_feature("DTOK") {
            return;
        }
        self.kept = None;
        self.token = None;
        match token {
            Some(t) => {
                self.ask_ahead(dtok(Some(t)));
                self.pipe.unsettled.push(Unsettled::Token(t));
            }
            None => self.set_ahead(dtok(None)),
        }
    }

    /// Tells a server without the drsFTP messages the fixed buffer size of `tuning` (`SBUF`),
    /// when it has one.
    fn fixed_buffers(&mut self, tuning: Tuning) -> anyhow::Result<()> {
        let fixed = match tuning {
            Tuning::Stock => Some(fatpipe_tune::law::STOCK_BUFFER),
            Tuning::Static(n) => Some(n),
            _ => None,
        };
        if let (true, Some(n)) = (self.has_feature("SBUF"), fixed) {
            let r = self.command(&Command::Sbuf(n))?;
            if !r.is_success() {
                tracing::warn!("the server refused SBUF {n}: {r}");
            }
        }
        Ok(())
    }
}
