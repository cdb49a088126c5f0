//! The passive data connection of a MODE S transfer: the server's address (`EPSV`, falling
//! back to `PASV`), asked alone or, to a fatpipe server, ahead with the transfer command, and
//! the connection made to it with the tuning's buffers.

use super::Connection;
use anyhow::{bail, Context};
use fatpipe_net::mode_e::Prepare;
use fatpipe_net::socket::hedge_after;
use fatpipe_net::tuner::before_connect;
use fatpipe_proto::command::DTOK_STREAM;
use fatpipe_proto::{addr, Command};
use std::net::{SocketAddr, TcpStream};
use std::os::fd::AsFd;
use std::sync::Arc;

/// Where a transfer's passive data connection goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Passive {
    /// The server's address, asked before the transfer command.
    At(SocketAddr),
    /// `EPSV` went out ahead, with the transfer command: its answer comes first.
    Asked,
}

impl Connection {
    /// The passive address of the next transfer: a fatpipe server takes `EPSV`, `REST` and the
    /// transfer command in one write (it opens the data connection beside the session, one
    /// round trip fewer); another server is asked now.
    pub(super) fn ask_passive(&mut self) -> anyhow::Result<Passive> {
        let epsv = Command::Epsv(None);
        if self.epsv_ahead_taken() && !self.pipe.sent && !self.answered(&epsv) {
            if !self.is_asked(&epsv) {
                self.ask_ahead(epsv);
            }
            return Ok(Passive::Asked);
        }
        self.passive_target().map(Passive::At)
    }

    /// Before a session's transfers with a fatpipe server (`uploads` or downloads): the first
    /// one's passive data address is asked ahead (`EPSV` goes out with the session's next
    /// command, a file's `SIZE`), so that the data connection opens as the transfer command
    /// leaves, not a round trip after it. Not for MODE E downloads: the server connects to
    /// this end, and a data address given then would outdate the answer.
    pub fn expect_transfers(&mut self, uploads: bool) {
        if uploads || !self.uses_blocks() {
            self.expect_passive();
        }
    }

    /// The next transfer's passive address asked ahead, from a fatpipe server (not asked
    /// twice).
    pub(super) fn expect_passive(&mut self) {
        let epsv = Command::Epsv(None);
        if self.epsv_ahead_taken() && !self.is_asked(&epsv) {
            self.ask_ahead(epsv);
        }
    }

    /// Whether the server takes `EPSV` ahead of the command it serves (a fatpipe server: it
    /// opens the data connection beside the session), and this session's `EPSV` still works.
    pub(super) fn epsv_ahead_taken(&self) -> bool {
        self.has_feature("DRS") && !self.epsv_failed
    }

    /// The data connection to where `passive` says (its `EPSV` answer read first when it was
    /// asked ahead: the transfer command went out already, so no `PASV` can come before it
    /// now, and a refusal ends the session; a retry asks `PASV`).
    pub(super) fn connect_passive(&mut self, passive: Passive) -> anyhow::Result<TcpStream> {
        let target = match passive {
            Passive::At(t) => t,
            Passive::Asked => match self.epsv_port()? {
                Some(p) => SocketAddr::new(self.peer.ip(), p),
                None => bail!("{} refused EPSV", self.peer),
            },
        };
        self.open_data(target)
    }

    /// Opens a passive data connection to `target` (the server's, from [`Self::passive_target`]):
    /// hedged against a lost handshake where the server takes only a plain connection that
    /// shows the session's token (`FEAT` ` DTOK STREAM`), so that the spare is not taken.
    fn open_data(&self, target: SocketAddr) -> anyhow::Result<TcpStream> {
        let prepare = self.prepare();
        let checked = self.features.iter().any(|f| f == DTOK_STREAM);
        let hedge = self
            .token
            .filter(|_| checked && !self.data_secured())
            .and(self.round_trip())
            .map(hedge_after);
        let s = fatpipe_net::socket::connect_prepared(target, None, self.timeout, hedge, |sock| {
            prepare(sock.as_fd())
        })
        .with_context(|| format!("cannot open data connection to {target}"))?;
        s.set_read_timeout(Some(self.timeout))?;
        s.set_write_timeout(Some(self.timeout))?;
        Ok(s)
    }

    /// Sets a data socket's buffers as the tuning mode wants them before it connects.
    pub(super) fn prepare(&self) -> Prepare {
        let tune = self.tune.clone();
        Arc::new(move |fd| match &tune {
            Some(t) => before_connect(t, fd),
            None => Ok(()),
        })
    }

    /// The server's passive data address (`EPSV`, falling back to `PASV`); a new address ends
    /// the kept MODE E connections at both ends.
    pub(super) fn passive_target(&mut self) -> anyhow::Result<SocketAddr> {
        self.kept = None;
        let port = match self.epsv_failed {
            false => self.epsv_port()?,
            true => None,
        };
        let port = match port {
            Some(p) => p,
            None => {
                let r = self.checked(&Command::Pasv)?;
                addr::parse_pasv_reply(&r.text())
                    .with_context(|| format!("cannot read the PASV reply {r}"))?
                    .port()
            }
        };
        Ok(SocketAddr::new(self.peer.ip(), port))
    }

    /// The port `EPSV` (asked now, or ahead) names; `None` when the server cannot (this session
    /// asks `PASV` from then on). A new address ends the kept MODE E connections.
    fn epsv_port(&mut self) -> anyhow::Result<Option<u16>> {
        self.kept = None;
        let r = self.ask(&Command::Epsv(None))?;
        match addr::parse_epsv_reply(&r.text()) {
            Some(p) if r.code == 229 => Ok(Some(p)),
            _ => {
                self.epsv_failed = true;
                tracing::debug!("EPSV -> {r}: PASV from now on");
                Ok(None)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::fake_server::{take, tuned_auto, with_server};
    use super::Passive;

    #[test]
    fn an_upload_sessions_passive_address_goes_out_with_its_first_command() {
        let got = with_server(
            "331 pass\r\n230 in\r\n",
            |r, w| {
                let replies = "200 drs\r\n200 par\r\n200 reuse\r\n\
                               229 Entering Extended Passive Mode (|||4242|)\r\n200 ok\r\n213 7\r\n";
                take(r, w, 6, replies)
            },
            |mut c| {
                tuned_auto(&mut c);
                c.expect_transfers(true);
                assert_eq!(c.size("/f").unwrap(), Some(7));
                // The first transfer's address is there without another command.
                assert_eq!(c.passive_target().unwrap().port(), 4242);
            },
        );
        assert_eq!(&got[7..], ["EPSV", "TYPE I", "SIZE /f"]);
    }

    #[test]
    fn a_mode_s_download_sessions_passive_address_is_there_before_its_retr_and_mode_e_asks_none() {
        let got = with_server(
            "331 pass\r\n230 in\r\n",
            |r, w| {
                let replies =
                    "229 Entering Extended Passive Mode (|||4242|)\r\n200 ok\r\n213 7\r\n";
                take(r, w, 3, replies)
            },
            |mut c| {
                c.expect_transfers(false);
                assert_eq!(c.size("/f").unwrap(), Some(7));
                // The transfer command connects at once: its address came with the size.
                let at = c.ask_passive().unwrap();
                assert!(matches!(at, Passive::At(a) if a.port() == 4242), "{at:?}");
            },
        );
        assert_eq!(&got[4..], ["EPSV", "TYPE I", "SIZE /f"]);
        // MODE E downloads: the server connects, and an address asked would go stale.
        let got = with_server(
            "331 pass\r\n230 in\r\n",
            |r, w| {
                let replies = "200 drs\r\n200 par\r\n200 reuse\r\n200 ok\r\n213 7\r\n";
                take(r, w, 5, replies)
            },
            |mut c| {
                tuned_auto(&mut c);
                c.expect_transfers(false);
                assert_eq!(c.size("/f").unwrap(), Some(7));
            },
        );
        assert!(!got.iter().any(|l| l == "EPSV"), "{got:?}");
    }

    #[test]
    fn a_passive_address_asked_ahead_is_forgotten_once_an_active_one_is_given() {
        let got = with_server(
            "331 pass\r\n230 in\r\n",
            |r, w| {
                let replies =
                    "229 Entering Extended Passive Mode (|||4242|)\r\n200 ok\r\n213 7\r\n";
                let mut got = take(r, w, 3, replies);
                got.extend(take(r, w, 2, "200 port\r\n213 7\r\n"));
                got.extend(take(
                    r,
                    w,
                    1,
                    "229 Entering Extended Passive Mode (|||4343|)\r\n",
                ));
                got
            },
            |mut c| {
                c.expect_transfers(false);
                assert_eq!(c.size("/f").unwrap(), Some(7));
                // A MODE E download tells the server where to connect: its listener is gone.
                let _l = c.listen_data().unwrap();
                assert_eq!(c.size("/g").unwrap(), Some(7));
                assert_eq!(c.passive_target().unwrap().port(), 4343, "asked anew");
            },
        );
        assert!(got[7].starts_with("PORT "), "{got:?}");
        assert_eq!(got[8..], ["SIZE /g", "EPSV"]);
    }
}
