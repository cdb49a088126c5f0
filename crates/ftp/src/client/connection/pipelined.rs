//! Pipelined downloads: the next files' `RETR`s go out behind the current one's, so that a
//! fatpipe server (which takes commands that come during a transfer in turn after it) starts
//! each next file over the kept MODE E connections the moment the one before it ends, instead
//! of a round trip after its `226`. The queued transfers run on exactly the connections the
//! current one leaves open (`OPTS RETR Parallelism=k,k,k` goes out before them): a connection
//! the server opened for one of them could otherwise be taken by this end for the transfer
//! whose data it is still reading. When a queued transfer cannot run as sent (the one before
//! it failed and its connections are gone, or it needs a restart), the queue is drained: the
//! connections are closed, the replies read and dropped, and the files go out anew.

use super::pipeline::{on_the_wire, Ahead, NextFile, Queued, Want};
use super::{describe, Connection};
use anyhow::bail;
use fatpipe_proto::gridftp::Parallelism;
use fatpipe_proto::{Command, Reply};
use std::net::Shutdown;
use std::time::Instant;

/// Most replies a drained transfer may send before its final one (markers, notices).
const DRAIN_REPLIES: usize = 10_000;

impl Connection {
    /// Sends the downloads of `files` (paths, with the checksum question behind each) behind
    /// the next MODE E download's `RETR` where a fatpipe server keeps the data connections
    /// open between files (those already sent behind an earlier one are not sent again); each
    /// later [`Connection::retrieve_blocks`] of them, in this order, then only reads what the
    /// server answered. Only the next `retrieve_blocks` call looks at the list.
    pub fn retrieve_next(&mut self, files: Vec<(String, Option<Command>)>) {
        self.pipe.next_files = files
            .into_iter()
            .map(|(path, checksum)| (Command::Retr(path), checksum))
            .collect();
    }

    /// At the start of a MODE E download: the `files` after it (see
    /// [`Connection::retrieve_next`]) not yet sent, made ready to go out behind this
    /// transfer, which runs over `kept` connections open now and starts `start`.
    pub(super) fn prepare_next(&mut self, files: Vec<NextFile>, kept: usize, start: u32) {
        if files.is_empty() || !(self.has_feature("DRS") && self.reuse) {
            return;
        }
        let Some(b) = self.blocks.as_ref() else {
            return;
        };
        // Those sent already come first in the list; a list that does not start with them is
        // not this session's order any more: nothing more goes out.
        let sent = self.pipe.queued.len();
        let in_order = files.len() >= sent
            && self
                .pipe
                .queued
                .iter()
                .zip(&files)
                .all(|(q, (c, _))| q.cmd == *c);
        if !in_order {
            return;
        }
        // This transfer leaves at least these open: the next run on them and open none.
        let k = u32::try_from(kept).unwrap_or(u32::MAX).max(start).max(1);
        let p = Parallelism::fixed(k);
        let mut parallelism = (b.parallelism != p).then_some(p);
        for (cmd, checksum) in files.into_iter().skip(sent) {
            let settings = parallelism
                .map(|p| Ahead {
                    cmd: Command::Opts(format!("RETR {p}")),
                    want: Want::Setting,
                })
                .into_iter()
                .collect();
            let behind = checksum
                .into_iter()
                .map(|cmd| Ahead {
                    cmd,
                    want: Want::Answer,
                })
                .collect();
            self.pipe.next.push(Queued {
                parallelism: parallelism.take(),
                settings,
                cmd,
                behind,
            });
        }
    }

    /// The next files' downloads, taken to go out now (after the transfer command they
    /// follow): their commands on the wire, kept as queued. One the control channel cannot
    /// carry stops the list (it goes out in its turn, and fails there).
    pub(super) fn next_on_the_wire(&mut self) -> anyhow::Result<Vec<u8>> {
        let mut wire = Vec::new();
        for next in std::mem::take(&mut self.pipe.next) {
            let Ok(line) = next.cmd.to_wire() else {
                break;
            };
            let (before, settings) = on_the_wire(next.settings)?;
            wire.extend(before);
            wire.extend(line);
            let (after, behind) = on_the_wire(next.behind)?;
            wire.extend(after);
            if let (Some(p), Some(b)) = (next.parallelism, self.blocks.as_mut()) {
                b.parallelism = p;
            }
            self.pipe.queued.push_back(Queued {
                parallelism: next.parallelism,
                settings,
                cmd: next.cmd,
                behind,
            });
        }
        Ok(wire)
    }

    /// Sends the next files' downloads on their own (behind a transfer command that went out
    /// before its turn).
    pub(super) fn send_next(&mut self) -> anyhow::Result<()> {
        let wire = self.next_on_the_wire()?;
        if wire.is_empty() {
            return Ok(());
        }
        self.write_commands(&wire)
    }

    /// Takes `cmd` as sent when it went out before its turn and can run as sent (the first
    /// queued, nothing else to go before it, the connections it runs on still open): its
    /// replies are the next to read, and the transfer's `begin` sends nothing but the files to
    /// follow it. Whether it was taken.
    pub(super) fn take_queued(&mut self, cmd: &Command) -> bool {
        let runs = self.pipe.queued.front().is_some_and(|q| q.cmd == *cmd)
            && !self.pipe.sets_ahead()
            && self.kept.as_ref().is_some_and(|k| !k.sending);
        if !runs {
            return false;
        }
        let Some(q) = self.pipe.queued.pop_front() else {
            return false;
        };
        self.pipe.expect(q.settings, q.behind);
        self.pipe.sent = true;
        true
    }

    /// The file a fatpipe server's `150` to `cmd` (a `RETR` or `STOR`) names, when its name is
    /// not the one asked for: a reply out of step with the commands (each file's data and
    /// checksum would then be taken for another's), caught before any byte is written.
    fn names_another_file(&self, cmd: &Command, r: &Reply) -> Option<String> {
        let (Command::Retr(path) | Command::Stor(path)) = cmd else {
            return None;
        };
        if !self.has_feature("DRS") || r.code != 150 {
            return None;
        }
        // "Opening BINARY mode data connection for /d/f (5 bytes)", "Ok to send data for /d/f
        // (BINARY mode)"
        let text = r.text();
        let (_, named) = text
            .split_once(" data connection for ")
            .or_else(|| text.split_once(" send data for "))?;
        let (named, _) = named.rsplit_once(" (")?;
        let last = |p: &str| {
            p.trim_end_matches('/')
                .rsplit('/')
                .next()
                .map(str::to_string)
        };
        (last(named) != last(path)).then(|| named.to_string())
    }

    /// Fails, and ends the session, when a fatpipe server's `150` to `cmd` names another file
    /// (see [`Connection::names_another_file`]).
    pub(super) fn check_in_step(&mut self, cmd: &Command, r: &Reply) -> anyhow::Result<()> {
        if let Some(other) = self.names_another_file(cmd, r) {
            let _ = self.control.get_ref().tcp().shutdown(Shutdown::Both);
            bail!("{}: the server's reply names {other}: its replies are out of step with this session's commands, which ends here", describe(cmd));
        }
        Ok(())
    }

    /// Reads the replies of `cmd`, a transfer whose command went out before its turn, to its
    /// final one (bounded in replies and time: a stalled transfer still sends markers). A
    /// `150` that names another file ends the session.
    pub(super) fn read_final(&mut self, cmd: &Command) -> anyhow::Result<Reply> {
        let deadline = Instant::now() + self.timeout;
        for _ in 0..DRAIN_REPLIES {
            let r = self.read_one_reply()?;
            tracing::debug!("{cmd} (sent before its turn) -> {r}");
            if !r.is_preliminary() {
                return Ok(r);
            }
            self.check_in_step(cmd, &r)?;
            if Instant::now() > deadline {
                break;
            }
        }
        bail!("{} did not end {cmd} within the --timeout", self.peer)
    }

    /// Ends the queued transfers, which will not run as sent: their connections closed (the
    /// server's transfers fail at once, and none of their data is read as another's), their
    /// replies read to the final ones and dropped with those to the questions behind them.
    pub(super) fn drain_queued(&mut self) -> anyhow::Result<()> {
        if self.pipe.queued.is_empty() {
            return Ok(());
        }
        self.kept = None;
        while let Some(q) = self.pipe.queued.pop_front() {
            tracing::debug!(
                "{} sent before its turn will not run as sent: drained",
                q.cmd
            );
            self.pipe.expect(q.settings, Vec::new());
            self.take_owed()?;
            self.read_final(&q.cmd)?;
            self.take_answers(q.behind, false)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::super::fake_server::{rounds, tuned_auto, with_server};
    use fatpipe_net::Pump;
    use fatpipe_proto::mode_e::Reassembly;
    use fatpipe_proto::ranges::RangeSet;
    use std::sync::{Arc, Mutex};

    /// The session's settings (`OPTS DRS`, `OPTS RETR`, `OPTS DCREUSE`) and the first
    /// download's (`MODE E`, `TYPE I`, `PORT`), answered.
    const SETTLED: &str = "200 drs\r\n200 par\r\n200 reuse\r\n";
    const FIRST: &str = "200 mode\r\n200 type\r\n200 port\r\n";

    /// A server that answers the session's settings, refuses `/a` once the first download's
    /// `lines` (settings and the commands sent with it) are in, then plays `then`.
    fn refusing_a(
        r: &mut std::io::BufReader<std::net::TcpStream>,
        w: &mut std::net::TcpStream,
        lines: usize,
        then: &[(usize, &str)],
    ) -> Vec<String> {
        let refused = format!("{FIRST}550 no /a\r\n");
        let mut all = vec![(3, SETTLED), (lines, refused.as_str())];
        all.extend_from_slice(then);
        rounds(r, w, &all)
    }

    /// Downloads `path` into a scratch file: the error, if any.
    fn download(c: &mut super::Connection, path: &str) -> Option<String> {
        let file = tempfile::tempfile().unwrap();
        let state = Arc::new(Mutex::new(Reassembly::new(u64::MAX)));
        let pump = Arc::new(Pump::default());
        c.retrieve_blocks(path, &RangeSet::default(), &file, &pump, &state)
            .err()
            .map(|e| format!("{e:#}"))
    }

    #[test]
    fn the_next_files_retr_goes_out_with_the_current_one_and_runs_as_sent() {
        let got = with_server(
            "331 pass\r\n230 in\r\n",
            // One write: the first download, the next one's stream count (the connections
            // this one leaves), the next download.
            |r, w| refusing_a(r, w, 6, &[(0, "200 par\r\n550 no /b\r\n"), (1, "")]),
            |mut c| {
                tuned_auto(&mut c);
                c.retrieve_next(vec![("/b".into(), None)]);
                let a = download(&mut c, "/a").unwrap();
                assert!(a.contains("550 no /a"), "{a}");
                // The refusal of /a leaves /b to run as sent: only its replies are read.
                let b = download(&mut c, "/b").unwrap();
                assert!(b.contains("550 no /b"), "{b}");
                c.quit();
            },
        );
        assert!(got[9].starts_with("PORT "), "{got:?}");
        assert_eq!(
            got[10..],
            ["RETR /a", "OPTS RETR Parallelism=1,1,1;", "RETR /b", "QUIT"]
        );
    }

    #[test]
    fn a_queued_download_that_cannot_run_as_sent_is_drained_before_the_next_command() {
        let got = with_server(
            "331 pass\r\n230 in\r\n",
            |r, w| {
                // The server ran /b; its checksum came behind it.
                let ran = "200 par\r\n150 go\r\n226 done\r\n213 0bad\r\n";
                refusing_a(r, w, 7, &[(0, ran), (1, "213 7\r\n"), (1, "213 00ff\r\n")])
            },
            |mut c| {
                tuned_auto(&mut c);
                let cksm =
                    super::super::checksum_command(fatpipe_proto::gridftp::ChecksumAlg::Xxh3, "/b");
                c.retrieve_next(vec![("/b".into(), Some(cksm.clone()))]);
                download(&mut c, "/a").unwrap();
                assert!(c.is_asked(&cksm));
                // Another command first: /b's replies are read and dropped, its connections
                // closed, and what was asked behind it is asked anew.
                assert_eq!(c.size("/f").unwrap(), Some(7));
                assert!(c.kept.is_none() && c.pipe.queued.is_empty());
                assert!(!c.is_asked(&cksm));
                let sum = c.checksum(fatpipe_proto::gridftp::ChecksumAlg::Xxh3, "/b");
                assert_eq!(sum.unwrap(), "00ff");
            },
        );
        assert_eq!(
            got[10..],
            [
                "RETR /a",
                "OPTS RETR Parallelism=1,1,1;",
                "RETR /b",
                "CKSM XXH3 0 -1 /b",
                "SIZE /f",
                "CKSM XXH3 0 -1 /b"
            ]
        );
    }

    #[test]
    fn a_reply_that_names_another_file_ends_the_session() {
        with_server(
            "331 pass\r\n230 in\r\n",
            |r, w| {
                let other = format!(
                    "{FIRST}150 Opening BINARY mode data connection for /d/b (5 bytes)\r\n"
                );
                rounds(r, w, &[(3, SETTLED), (4, &other)])
            },
            |mut c| {
                tuned_auto(&mut c);
                let e = download(&mut c, "/d/a").unwrap();
                assert!(e.contains("names /d/b") && e.contains("out of step"), "{e}");
            },
        );
    }
}
