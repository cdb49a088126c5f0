//! Reading the server's replies: one at a time, or polled while a transfer runs. The answer
//! to a probe a transfer sent near its end (`SBUF`, `OPTS DRS Paced=`) comes when the server
//! is between transfers, which behind queued transfers (pipelined.rs) may be after several of
//! them: it is taken wherever it comes.

use super::{during, timed_out, Connection, MAX_REPLY_LINE};
use crate::inband::Heard;
use anyhow::{anyhow, bail};
use fatpipe_net::wake::{readable, Wake};
use fatpipe_proto::Reply;
use std::io::{BufRead, Read};
use std::os::fd::AsFd;
use std::time::Duration;

impl Connection {
    /// The next reply on the control connection, whatever command it answers.
    pub(super) fn read_one_reply(&mut self) -> anyhow::Result<Reply> {
        loop {
            if let Some(r) = self.next_reply(false)? {
                return Ok(r);
            }
        }
    }

    /// The next reply; `None` when the input held only the answer to an earlier transfer's
    /// probe (taken wherever it comes) and `idle` asks not to wait for more.
    fn next_reply(&mut self, idle: bool) -> anyhow::Result<Option<Reply>> {
        let mut line = Vec::new();
        loop {
            line.clear();
            let n = (&mut self.control)
                .take(MAX_REPLY_LINE as u64)
                .read_until(b'\n', &mut line)
                .map_err(|e| match timed_out(&e) {
                    true => anyhow!(
                        "no reply from {} within {} (--timeout)",
                        self.peer,
                        humantime::format_duration(self.timeout)
                    ),
                    false => anyhow!("control connection to {}: {e}", self.peer),
                })?;
            if n == 0 {
                bail!("{} closed the control connection", self.peer);
            }
            let text = String::from_utf8_lossy(&line);
            let text = text.trim_end_matches(['\r', '\n']);
            match self.parser.push_line(text)? {
                Some(r) if self.pipe.unanswered > 0 && during::is_drs_answer(&r) => {
                    self.pipe.unanswered -= 1;
                    tracing::debug!("{r} (answers a probe of an earlier transfer)");
                    if idle && !self.holds_input() {
                        return Ok(None);
                    }
                }
                Some(r) => return Ok(Some(r)),
                None => {}
            }
        }
    }

    /// The reply to a command sent between transfers: a fatpipe server's `126` announcement of
    /// a transfer that already ended (an aborted one's conductor may still speak after the
    /// final reply) is no answer and is skipped.
    pub(super) fn read_reply_after_transfers(&mut self) -> anyhow::Result<Reply> {
        self.past_ended(Self::read_reply, |r| Heard::from_announcement(r).is_some())
    }

    /// The reply to a command asked ahead or behind (none of which is answered with a `1xx`):
    /// what an ended transfer still said (a `126` announcement, a `111`/`112` marker of a
    /// transfer this end stopped) is skipped.
    pub(super) fn read_owed_reply(&mut self) -> anyhow::Result<Reply> {
        self.past_ended(Self::read_one_reply, Reply::is_preliminary)
    }

    /// The first reply `read` gives that is not an ended transfer's (`ended` says which are).
    fn past_ended(
        &mut self,
        read: fn(&mut Self) -> anyhow::Result<Reply>,
        ended: fn(&Reply) -> bool,
    ) -> anyhow::Result<Reply> {
        loop {
            let r = read(self)?;
            if !ended(&r) {
                return Ok(r);
            }
            tracing::debug!("{r} (said by a transfer that has ended)");
        }
    }

    /// Whether input is buffered (here or in TLS): a read returns at once.
    fn holds_input(&mut self) -> bool {
        !self.control.buffer().is_empty() || self.control.get_mut().holds_input()
    }

    /// A reply if one arrives within `wait` (and before `wake` rings), else `None`.
    pub(super) fn poll_reply(
        &mut self,
        wait: Duration,
        wake: Option<&Wake>,
    ) -> anyhow::Result<Option<Reply>> {
        if !self.holds_input() {
            let ready = readable(self.control.get_ref().tcp().as_fd(), wait, wake)
                .map_err(|e| anyhow!("control connection to {}: {e}", self.peer))?;
            if !ready {
                return Ok(None);
            }
        }
        match self.pipe.owes() {
            true => self.read_reply().map(Some),
            false => self.next_reply(true),
        }
    }
}
