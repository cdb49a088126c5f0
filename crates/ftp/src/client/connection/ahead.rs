//! Asking ahead: commands that do not depend on what comes before them go out with the next
//! command in the same write, and their replies are taken as they come (RFC 959 servers answer
//! in order): one round trip fewer for each. Three kinds: a command whose answer is needed later
//! (a small file's `CKSM` before its `RETR`, a file's `MDTM` beside its `SIZE`), kept until
//! asked for; a setting that must take (`TYPE`, `MODE`, `PORT`, `REST` before their transfer
//! command), whose refusal fails the command it went out with; and a notice whose answer only
//! the log shows (`MFMT`, a parent directory's `MKD`). And asking behind: a
//! question about a transfer's outcome (its file's `CKSM`, `SIZE`) goes out right behind the
//! transfer command where the server answers what comes during a transfer after its final
//! reply, and the answer is there with that reply, not a round trip after it.

use super::pipeline::{on_the_wire, starts_transfer, Ahead, Want, KEPT};
use super::{describe, Connection};
use anyhow::anyhow;
use fatpipe_proto::{Command, Reply};
use std::io::Write;
use std::net::Shutdown;

impl Connection {
    /// Sends `cmd` together with the next command this end waits on; its reply is kept for
    /// [`Connection::ask`] (one kept from an earlier asking is dropped: the question is asked
    /// anew).
    pub fn ask_ahead(&mut self, cmd: Command) {
        self.pipe.answers.retain(|(c, _)| *c != cmd);
        self.pipe.ahead.push(Ahead {
            cmd,
            want: Want::Answer,
        });
    }

    /// Sends the setting `cmd` together with the next command; a refusal fails that command.
    pub(super) fn set_ahead(&mut self, cmd: Command) {
        self.pipe.ahead.push(Ahead {
            cmd,
            want: Want::Setting,
        });
    }

    /// Sends `cmd` together with the next command; its reply only reaches the log (an `MFMT`,
    /// a parent directory's `MKD`), and keeps no room among the answers.
    pub(super) fn tell_ahead(&mut self, cmd: Command) {
        self.pipe.ahead.push(Ahead {
            cmd,
            want: Want::Nothing,
        });
    }

    /// Sends `cmd` right behind the next transfer command, in the same write, where the server
    /// answers commands that come during a transfer after its final reply (a fatpipe server,
    /// which lists `DRS`); the answer is kept as one asked ahead is. Elsewhere nothing is sent:
    /// the caller asks after the transfer. An answer to `cmd` kept from before is dropped: it
    /// speaks of the file as it was before this transfer.
    pub fn ask_behind(&mut self, cmd: Command) {
        self.pipe.answers.retain(|(c, _)| *c != cmd);
        if self.has_feature("DRS") && !self.is_asked(&cmd) {
            self.pipe.behind.push(Ahead {
                cmd,
                want: Want::Answer,
            });
        }
    }

    /// After a transfer's final reply: the replies to what went out behind its command, kept
    /// when the transfer `worked` (else they may speak of a partial file: dropped).
    pub(super) fn take_trailing(&mut self, worked: bool) -> anyhow::Result<()> {
        let trailing = std::mem::take(&mut self.pipe.trailing);
        self.take_answers(trailing, worked)
    }

    /// The replies to `asked`, which come next: kept when the transfer they went behind
    /// `worked`, else dropped.
    pub(super) fn take_answers(&mut self, asked: Vec<Ahead>, worked: bool) -> anyhow::Result<()> {
        for a in asked {
            // After the final reply, a `1xx` is the ended transfer's, no answer.
            let r = self.read_owed_reply()?;
            if worked {
                self.absorb(a, r);
            } else {
                tracing::debug!(
                    "{} (asked behind a failed transfer) -> {r}",
                    describe(&a.cmd)
                );
            }
        }
        Ok(())
    }

    /// Puts what was asked ahead on the wire now, without waiting for the replies (they are
    /// read when a command needs them): the server works on them meanwhile.
    pub fn send_ahead(&mut self) -> anyhow::Result<()> {
        if self.pipe.ahead.is_empty() {
            return Ok(());
        }
        self.drain_queued()?;
        let (wire, sent) = self.ahead_on_the_wire()?;
        if !sent.is_empty() {
            self.write_commands(&wire)?;
            self.pipe.owed.extend(sent);
        }
        Ok(())
    }

    /// Whether `cmd` was asked ahead and its reply not taken yet.
    pub fn is_asked(&self, cmd: &Command) -> bool {
        let p = &self.pipe;
        let sent = p.ahead.iter().chain(&p.owed).chain(&p.behind);
        sent.chain(&p.trailing)
            .chain(&p.during)
            .any(|a| a.cmd == *cmd)
            || p.answers.iter().any(|(c, _)| c == cmd)
            || p.next.iter().chain(&p.queued).any(|q| q.asks(cmd))
            || p.stores.iter().any(|s| s.asks(cmd))
    }

    /// Whether `cmd` went out ahead and its reply is read or on its way (not waiting to go
    /// out with the next command).
    pub(super) fn answered(&self, cmd: &Command) -> bool {
        self.pipe.owed.iter().any(|a| a.cmd == *cmd)
            || self.pipe.answers.iter().any(|(c, _)| c == cmd)
    }

    /// Drops what `cmd`, asked ahead, answered or will answer: it no longer holds (its reply
    /// still comes, and only the log shows it).
    pub(super) fn forget(&mut self, cmd: &Command) {
        let p = &mut self.pipe;
        p.answers.retain(|(c, _)| c != cmd);
        for a in p.ahead.iter_mut().chain(p.owed.iter_mut()) {
            if a.cmd == *cmd && a.want == Want::Answer {
                a.want = Want::Nothing;
            }
        }
    }

    /// The reply to `cmd`: the kept one when it was asked ahead (taken: a second call asks
    /// anew; one still waiting to go out goes now, with what was asked before it), else asked
    /// now.
    pub(super) fn ask(&mut self, cmd: &Command) -> anyhow::Result<Reply> {
        if self.pipe.ahead.iter().any(|a| a.cmd == *cmd) {
            self.flush_ahead()?;
        } else if self.pipe.owed.iter().any(|a| a.cmd == *cmd) {
            if let Some(e) = self.take_owed()? {
                return Err(e);
            }
        }
        if let Some(i) = self.pipe.answers.iter().position(|(c, _)| c == cmd) {
            return Ok(self.pipe.answers.remove(i).1);
        }
        self.command(cmd)
    }

    /// Sends what was asked ahead, in one write, and takes the replies.
    fn flush_ahead(&mut self) -> anyhow::Result<()> {
        self.send_ahead()?;
        self.take_owed()?.map_or(Ok(()), Err)
    }

    /// Writes what was asked ahead and then `cmd` in one write (and, `cmd` a transfer, what was
    /// asked behind after it and the next file's download); the replies to the former are
    /// taken by [`Connection::read_reply`] before `cmd`'s, those to the latter after its final
    /// reply. A transfer sent before its turn that has not run yet is drained first.
    pub(super) fn send_with_ahead(&mut self, cmd: &Command) -> anyhow::Result<()> {
        self.drain_queued()?;
        let (mut wire, sent) = self.ahead_on_the_wire()?;
        wire.extend(cmd.to_wire().map_err(|e| anyhow!("{}", e.message))?);
        let transfer = starts_transfer(cmd);
        let behind = match transfer {
            true => std::mem::take(&mut self.pipe.behind),
            false => Vec::new(),
        };
        let (after, trailing) = on_the_wire(behind)?;
        wire.extend(after);
        if transfer {
            wire.extend(self.next_on_the_wire()?);
        }
        self.write_commands(&wire)?;
        self.pipe.owed.extend(sent);
        self.pipe.trailing.extend(trailing);
        Ok(())
    }

    /// Sends `cmd` alone while a transfer runs (its answer comes among the transfer's
    /// replies): what was asked ahead waits for the next command, and transfers queued behind
    /// this one stay queued.
    pub(super) fn send_during(&mut self, cmd: &Command) -> anyhow::Result<()> {
        let wire = cmd.to_wire().map_err(|e| anyhow!("{}", e.message))?;
        self.write_commands(&wire)
    }

    /// Sends `cmd` now, while a transfer runs, for what comes after it: a fatpipe server
    /// answers it after the transfer's final reply, and the answer is kept (whether the
    /// transfer worked or not) as one asked ahead is. Whether it went out.
    pub(super) fn ask_during(&mut self, cmd: Command) -> bool {
        let sent = self.send_during(&cmd).is_ok();
        if sent {
            self.pipe.during.push(Ahead {
                cmd,
                want: Want::Answer,
            });
        }
        sent
    }

    /// What was asked ahead, taken: see [`on_the_wire`].
    fn ahead_on_the_wire(&mut self) -> anyhow::Result<(Vec<u8>, Vec<Ahead>)> {
        on_the_wire(std::mem::take(&mut self.pipe.ahead))
    }

    /// Writes commands already on the wire in one write.
    pub(super) fn write_commands(&mut self, wire: &[u8]) -> anyhow::Result<()> {
        let control = self.control.get_mut();
        control
            .write_all(wire)
            .and_then(|_| control.flush())
            .map_err(|e| anyhow!("control connection to {}: {e}", self.peer))
    }

    /// The next reply that answers a command sent alone or last in its write: replies owed to
    /// commands asked ahead come first and are kept (or, a setting refused, fail it).
    pub(super) fn read_reply(&mut self) -> anyhow::Result<Reply> {
        let refused = self.take_owed()?;
        // A server that closes after a refusal (vsftpd, of a login it will not take) is
        // best explained by the refusal.
        let r = self
            .read_one_reply()
            .map_err(|e| refused_or(refused.as_ref(), e))?;
        match refused {
            None => Ok(r),
            Some(e) => {
                if r.is_preliminary() {
                    // The server went on without the setting: this session is out of step
                    // with it, and ends here.
                    let _ = self.control.get_ref().tcp().shutdown(Shutdown::Both);
                }
                Err(e)
            }
        }
    }

    /// Reads the replies owed to commands asked ahead (they come before any other); the first
    /// refusal of a setting (or of the login) among them, if any.
    pub(super) fn take_owed(&mut self) -> anyhow::Result<Option<anyhow::Error>> {
        let mut refused = None;
        while let Some(a) = self.pipe.owed.pop_front() {
            match self.take_one_owed(a) {
                Ok(Some(e)) => {
                    refused.get_or_insert(e);
                }
                Ok(None) => {}
                Err(e) => return Err(refused_or(refused.as_ref(), e)),
            }
        }
        Ok(refused)
    }

    /// Reads the reply owed to `a` (or, an upload sent before its turn, its replies); a
    /// setting's refusal.
    pub(super) fn take_one_owed(&mut self, a: Ahead) -> anyhow::Result<Option<anyhow::Error>> {
        if a.want == Want::Stored {
            self.take_stored(a.cmd)?;
            return Ok(None);
        }
        // Owed replies come before any of the next transfer's: a `1xx` here is an ended
        // transfer's (one this end left, say, to go on over the UDP channel).
        let r = self.read_owed_reply()?;
        Ok(self.absorb(a, r))
    }

    /// Takes the reply `r` to `a`, asked ahead: kept, logged, or for a setting, why it failed.
    fn absorb(&mut self, a: Ahead, r: Reply) -> Option<anyhow::Error> {
        if a.want != Want::Greeting {
            tracing::debug!("{} (asked ahead) -> {r}", describe(&a.cmd));
        }
        match a.want {
            Want::Answer => {
                self.pipe.answers.push((a.cmd, r));
                let over = self.pipe.answers.len().saturating_sub(KEPT);
                self.pipe.answers.drain(..over);
                None
            }
            Want::Nothing | Want::Stored => None,
            Want::Login => self.take_login_reply(&a.cmd, &r),
            Want::Greeting => self.take_greeting(&r),
            Want::Setting if r.is_success() || r.is_intermediate() => None,
            Want::Setting => {
                self.forget_setting(&a.cmd);
                Some(anyhow!("{}: server said {r}", describe(&a.cmd)))
            }
        }
    }

    /// A setting the server refused is not in force: the next transfer asks for it again.
    fn forget_setting(&mut self, cmd: &Command) {
        match cmd {
            Command::Type(_) => self.ttype = None,
            Command::ModeExtended => self.extended = false,
            Command::ModeStream => self.extended = true,
            _ => {}
        }
    }
}

/// What ends a read that failed (`e`) after `refused` was read: the refusal, where there was
/// one.
fn refused_or(refused: Option<&anyhow::Error>, e: anyhow::Error) -> anyhow::Error {
    match refused {
        Some(r) => anyhow!("{r:#}"),
        None => e,
    }
}

#[cfg(test)]
mod tests {
    use super::super::fake_server::{rounds, take, tuned_auto, with_server};
    use fatpipe_proto::gridftp::ChecksumAlg;
    use fatpipe_proto::{Command, TransferType};
    use std::io::{BufRead, Write};
    use std::time::Duration;

    #[test]
    fn an_ended_transfer_s_last_words_are_no_answer_to_a_setting_asked_ahead() {
        // The server's last word on a transfer this end stopped comes after its final reply,
        // before the answers to what went out next (TYPE ahead of SIZE).
        let got = with_server(
            "331 pass\r\n230 in\r\n",
            |r, w| {
                let ended = "126 SBUF 131072\r\n112 Perf Marker\r\n";
                take(r, w, 2, &format!("{ended}200 I\r\n213 5\r\n"))
            },
            |mut c| assert_eq!(c.size("/f").unwrap(), Some(5)),
        );
        assert_eq!(got[4..], ["TYPE I", "SIZE /f"]);
    }

    #[test]
    fn a_command_asked_ahead_goes_out_with_the_next_and_its_answer_waits() {
        let got = with_server(
            "331 pass\r\n230 in\r\n",
            |r, w| take(r, w, 2, "213 00ff\r\n213 42\r\n"),
            |mut c| {
                c.ask_ahead(super::super::checksum_command(ChecksumAlg::Xxh3, "/f"));
                let size = c.command(&Command::Size("/f".into())).unwrap();
                assert_eq!(size.text(), "42");
                assert_eq!(c.checksum(ChecksumAlg::Xxh3, "/f").unwrap(), "00ff");
            },
        );
        assert_eq!(
            got,
            [
                "FEAT",
                "USER anonymous",
                "PASS fatpipe@",
                "FEAT",
                "CKSM XXH3 0 -1 /f",
                "SIZE /f"
            ]
        );
    }

    #[test]
    fn commands_sent_ahead_go_out_at_once_and_their_answers_are_read_when_needed() {
        let got = with_server(
            "331 pass\r\n230 in\r\n",
            // Both commands arrive before any reply is sent: the client did not wait.
            |r, w| take(r, w, 2, "213 00ff\r\n213 42\r\n"),
            |mut c| {
                let cksm = super::super::checksum_command(ChecksumAlg::Xxh3, "/f");
                c.ask_ahead(cksm.clone());
                c.ask_ahead(Command::Size("/f".into()));
                assert!(c.is_asked(&cksm));
                c.send_ahead().unwrap();
                assert!(c.is_asked(&cksm), "sent, its answer not taken");
                assert_eq!(c.size("/f").unwrap(), Some(42));
                assert_eq!(c.checksum(ChecksumAlg::Xxh3, "/f").unwrap(), "00ff");
                assert!(!c.is_asked(&cksm));
            },
        );
        assert_eq!(got[4..], ["CKSM XXH3 0 -1 /f", "SIZE /f"]);
    }

    #[test]
    fn a_login_without_password_ignores_the_answer_to_pass_and_a_file_is_stated_at_once() {
        let got = with_server(
            "230 no password needed\r\n503 already in\r\n",
            |r, w| take(r, w, 3, "213 20260102030405\r\n200 ok\r\n213 7\r\n"),
            |mut c| {
                let (size, time) = c.size_and_modified("/f").unwrap();
                assert_eq!(size, Some(7));
                assert_eq!(time, Some(1_767_323_045));
            },
        );
        assert_eq!(&got[4..], ["MDTM /f", "TYPE I", "SIZE /f"]);
    }

    #[test]
    fn a_sessions_settings_go_out_with_its_first_command_and_are_taken_before_a_transfer() {
        let got = with_server(
            "331 pass\r\n230 in\r\n",
            |r, w| {
                let replies =
                    "200 drs\r\n200 par\r\n200 reuse\r\n213 20260102030405\r\n200 ok\r\n213 7\r\n";
                take(r, w, 6, replies)
            },
            |mut c| {
                tuned_auto(&mut c);
                assert_eq!(c.size_and_modified("/f").unwrap().0, Some(7));
                c.settle().unwrap();
                assert!(c.drs_peer && c.reuse, "both answers taken");
            },
        );
        assert!(got[4].starts_with("OPTS DRS ON"), "{got:?}");
        assert!(got[5].starts_with("OPTS RETR Parallelism="), "{got:?}");
        assert_eq!(
            &got[6..],
            ["OPTS DCREUSE ON", "MDTM /f", "TYPE I", "SIZE /f"]
        );
    }

    #[test]
    fn a_refused_setting_fails_the_command_it_went_with_and_the_session_stays_in_step() {
        with_server(
            "331 pass\r\n230 in\r\n",
            |r, w| {
                rounds(
                    r,
                    w,
                    &[
                        (2, "504 no such type\r\n213 7\r\n"),
                        (2, "200 ok\r\n213 7\r\n"),
                    ],
                )
            },
            |mut c| {
                let e = c.size("/f").unwrap_err().to_string();
                assert!(e.contains("TYPE I: server said 504"), "{e}");
                // The type is asked for again with the next command.
                assert_eq!(c.size("/f").unwrap(), Some(7));
                assert_eq!(c.ttype, Some(TransferType::Image));
            },
        );
    }

    #[test]
    fn a_question_asked_behind_a_transfer_goes_out_after_it_and_is_answered_after_its_end() {
        let got = with_server(
            "331 pass\r\n230 in\r\n",
            // RETR and the CKSM behind it come in one write; the server answers the CKSM
            // after the transfer's final reply.
            |r, w| take(r, w, 2, "150 go\r\n226 done\r\n213 00ff\r\n"),
            |mut c| {
                let cksm = super::super::checksum_command(ChecksumAlg::Xxh3, "/f");
                c.ask_behind(cksm.clone());
                assert!(c.is_asked(&cksm));
                c.send_with_ahead(&Command::Retr("/f".into())).unwrap();
                assert_eq!(c.read_reply().unwrap().code, 150);
                assert_eq!(c.read_reply().unwrap().code, 226);
                c.take_trailing(true).unwrap();
                assert_eq!(c.checksum(ChecksumAlg::Xxh3, "/f").unwrap(), "00ff");
            },
        );
        assert_eq!(got[4..], ["RETR /f", "CKSM XXH3 0 -1 /f"]);
    }

    #[test]
    fn what_was_asked_behind_a_refused_transfer_is_not_kept() {
        let got = with_server(
            "331 pass\r\n230 in\r\n",
            |r, w| {
                rounds(
                    r,
                    w,
                    &[(2, "550 no such file\r\n213 0bad\r\n"), (1, "213 00ff\r\n")],
                )
            },
            |mut c| {
                let cksm = super::super::checksum_command(ChecksumAlg::Xxh3, "/f");
                c.ask_behind(cksm);
                let retr = Command::Retr("/f".into());
                let e = c.begin(None, &retr, |_| Ok(())).unwrap_err().to_string();
                assert!(e.contains("550"), "{e}");
                // The answer that came behind the refusal is not taken for the next question.
                assert_eq!(c.checksum(ChecksumAlg::Xxh3, "/f").unwrap(), "00ff");
            },
        );
        assert_eq!(got[6..], ["CKSM XXH3 0 -1 /f"]);
    }

    #[test]
    fn quit_goes_out_with_what_was_asked_ahead_and_waits_for_no_reply() {
        let got = with_server(
            "331 pass\r\n230 in\r\n",
            |r, w| {
                let got = take(r, w, 2, "");
                // The client closes at once: it waits for neither the MFMT's answer nor
                // QUIT's (it would wait up to 2 s for them).
                r.get_ref()
                    .set_read_timeout(Some(Duration::from_millis(1500)))
                    .unwrap();
                let mut rest = String::new();
                assert_eq!(r.read_line(&mut rest).unwrap(), 0, "{rest}");
                let _ = w.write_all(b"213 ok\r\n221 bye\r\n");
                got
            },
            |mut c| {
                c.confirm_login().unwrap();
                assert!(c.set_modified("/f", 1_767_323_045));
                c.quit();
            },
        );
        assert_eq!(got[4..], ["MFMT 20260102030405 /f", "QUIT"]);
    }

    #[test]
    fn a_directorys_parents_are_made_in_the_same_write_as_it() {
        let got = with_server(
            "331 pass\r\n230 in\r\n",
            |r, w| take(r, w, 3, "550 exists\r\n550 exists\r\n257 created\r\n"),
            |mut c| c.mkdir_all("/a/b/c").unwrap(),
        );
        assert_eq!(&got[4..], ["MKD /a", "MKD /a/b", "MKD /a/b/c"]);
    }

    #[test]
    fn a_directory_is_tested_and_left_in_one_round_trip() {
        let got = with_server(
            "331 pass\r\n230 in\r\n",
            |r, w| {
                rounds(
                    r,
                    w,
                    &[(2, "250 ok\r\n250 ok\r\n"), (2, "550 no\r\n250 ok\r\n")],
                )
            },
            |mut c| {
                assert!(c.is_dir("/d").unwrap());
                assert!(
                    !c.is_dir("/d").unwrap(),
                    "asked anew, not the answer kept before"
                );
            },
        );
        assert_eq!(&got[4..], ["CWD /d", "CWD /", "CWD /d", "CWD /"]);
    }

    #[test]
    fn replies_only_logged_keep_no_room_among_the_answers() {
        let parents = "550 exists\r\n".repeat(9);
        let got = with_server(
            "331 pass\r\n230 in\r\n",
            move |r, w| take(r, w, 11, &format!("213 7\r\n{parents}257 created\r\n")),
            |mut c| {
                c.ask_ahead(Command::Size("/f".into()));
                c.mkdir_all("/a/b/c/d/e/f/g/h/i/j").unwrap();
                // Nine parents' answers went to the log; SIZE's is still kept.
                assert_eq!(c.size("/f").unwrap(), Some(7));
            },
        );
        assert_eq!(got[4], "SIZE /f");
        assert_eq!(got.len(), 15, "{got:?}");
    }
}
