//! The control connection while a transfer runs: the conductor runs the data side in threads
//! of their own while this end sends what its laws announce (`SBUF` probes, `OPTS DRS Paced=`
//! notices) and takes what the server says besides the final reply (the answers, its `126`
//! announcements, markers), all handed to the transfer's conductor.

use super::{Connection, FINAL_GRACE, POLL};
use crate::inband::{self, Heard};
use anyhow::{anyhow, Context};
use fatpipe_net::conductor::Told;
use fatpipe_net::stall::StallWatch;
use fatpipe_net::wake::Wake;
use fatpipe_net::{Conductor, Pump};
use fatpipe_proto::drs::parse_sbuf_text;
use fatpipe_proto::{Command, Reply};
use fatpipe_tune::{CongestionControl, PacedBy, Role};
use std::collections::VecDeque;
use std::os::fd::AsFd;
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// What the control thread said to the server during a transfer and awaits answers to.
#[derive(Default)]
pub(super) struct Asked {
    /// `SBUF` probes, when each was sent.
    pub(super) probes: VecDeque<Instant>,
    /// `OPTS DRS Paced=` notices.
    pub(super) notices: usize,
    /// What the sending server said paces its connections (`126 PACED`), if it did.
    pub(super) peer_paces: Option<PacedBy>,
}

impl Asked {
    /// What was asked and is not answered yet when the transfer ends.
    pub(super) fn unanswered(&self) -> usize {
        self.probes.len() + self.notices
    }
}

/// Whether `r` answers an `SBUF` probe or an `OPTS DRS Paced=` notice (what a transfer's
/// control thread asks).
pub(super) fn is_drs_answer(r: &Reply) -> bool {
    let text = r.text();
    r.code == 200 && (parse_sbuf_text(&text).is_some() || text.starts_with("OPTS DRS"))
}

/// Takes a reply that came while a transfer ran: the server's `126 SBUF` and `126 PACED`
/// announcements and the answer to an `SBUF` probe (its round trip timed from when it was
/// sent) go to the conductor; the answer to an `OPTS DRS Paced=`, markers (`111`, `112`) and
/// other preliminary replies are skipped; anything else is the transfer's final reply.
pub(super) fn take_reply(conductor: &Conductor, asked: &mut Asked, r: Reply) -> Option<Reply> {
    let text = r.text();
    if let Some(h) = Heard::from_announcement(&r) {
        if let Heard::Paced(by) = &h {
            asked.peer_paces = Some(by.clone());
        }
        h.deliver(conductor);
        return None;
    }
    match (r.code, parse_sbuf_text(&text)) {
        (200, Some(n)) if !asked.probes.is_empty() => {
            if let Some(sent) = asked.probes.pop_front() {
                conductor.on_probe_rtt(sent.elapsed());
            }
            conductor.on_peer_buffer(n);
        }
        (200, None) if asked.notices > 0 && text.starts_with("OPTS DRS") => {
            asked.notices -= 1;
        }
        _ if r.is_preliminary() => {}
        _ => return Some(r),
    }
    None
}

impl Connection {
    /// Whether a transfer leaves TCP now that its sender is paced `by` that: it was told to
    /// where random loss makes a sender choose bbr ([`Connection::leave_tcp_on_random_loss`]),
    /// and has not left yet.
    fn leaves_on(&self, by: &PacedBy) -> bool {
        self.udp.leave_on_random_loss
            && !self.udp.left_on_random_loss
            && by.runs(&CongestionControl::FOR_RANDOM_LOSS)
    }

    /// Ends the transfer on `pump` for the caller to go on over the UDP channel: `who` (the
    /// server, or this end) met random loss. Where the final reply is `listened` for, the next
    /// try's passive address is asked now: the server answers it right after the transfer's
    /// final reply (it defers commands that come during a transfer), and the next `RETR` or
    /// `STOR` connects at once, a round trip sooner.
    fn leave_tcp(&mut self, pump: &Pump, who: &str, listened: bool) {
        tracing::info!(
            "{who} met random loss (its streams pace with bbr now): the transfer goes on over \
             the UDP channel"
        );
        self.udp.left_on_random_loss = true;
        pump.cancel();
        let epsv = Command::Epsv(None);
        if listened && self.epsv_ahead_taken() && !self.is_asked(&epsv) {
            self.ask_during(epsv);
        }
    }

    /// Runs `work` under the conductor while this end keeps the control channel (see
    /// [`Connection::conduct`]) and reads the final reply. Returns the work's outcome and the
    /// final reply. A final reply that comes first and says the transfer failed cancels
    /// `pump`'s work.
    pub(super) fn drive<T: Send>(
        &mut self,
        conductor: &Conductor,
        pump: Option<&Pump>,
        work: impl FnOnce() -> anyhow::Result<T> + Send,
    ) -> anyhow::Result<(anyhow::Result<T>, anyhow::Result<Reply>)> {
        let conducted = self.conduct(conductor, pump, true, work);
        // Asked while the transfer ran: owed after its final reply, or gone with the session.
        let during = std::mem::take(&mut self.pipe.during);
        let (moved, fin, mut asked) = conducted?;
        let mut fin = match fin {
            // The control connection broke: the data may have finished; both fail.
            Err(e) => {
                let said = anyhow!("{e:#}");
                return Ok((moved.and(Err(e)), Err(said)));
            }
            Ok(f) => f,
        };
        // Answers to probes the server took after the transfer ended come after its final
        // reply; the 126 announcements may come before it.
        // When the data side already failed, the server gets a short grace to say why, not a
        // whole --timeout more (a silent server made a 5 s timeout take 15 s).
        let data_failed = moved.is_err();
        let fin = loop {
            if let Some(f) = fin.take() {
                break Ok(f);
            }
            let next = if data_failed {
                match self.poll_reply(self.timeout.min(FINAL_GRACE), None) {
                    Ok(Some(r)) => Ok(r),
                    Ok(None) => Err(anyhow!("{} sent no final reply", self.peer)),
                    Err(e) => Err(e),
                }
            } else {
                self.read_reply()
            };
            match next {
                Ok(r) => fin = take_reply(conductor, &mut asked, r),
                Err(e) => break Err(e),
            }
        };
        if let Ok(f) = &fin {
            // Deferred during the transfer, what went out behind its command is answered
            // first. A probe that came after the transfer's end is answered when the server
            // is between transfers: after this one's answers, or after those of transfers
            // queued behind it that the server ran meanwhile.
            self.take_trailing(f.is_success() && moved.is_ok())?;
            self.pipe.unanswered += asked.unanswered();
            during.into_iter().for_each(|a| self.pipe.owe(a));
        }
        self.last.tune = conductor.summary();
        Ok((moved, fin))
    }

    /// Runs `work` under the conductor without reading a reply: an upload sent before the
    /// replies to those before it are in (stored.rs). What the laws announce still goes out,
    /// its answers taken wherever they come.
    pub(super) fn drive_quiet<T: Send>(
        &mut self,
        conductor: &Conductor,
        work: impl FnOnce() -> anyhow::Result<T> + Send,
    ) -> anyhow::Result<anyhow::Result<T>> {
        let (moved, _, asked) = self.conduct(conductor, None, false, work)?;
        self.pipe.unanswered += asked.unanswered();
        self.last.tune = conductor.summary();
        Ok(moved)
    }

    /// Runs `work` under the conductor (in threads of their own) while this one keeps the
    /// control channel: it sends `SBUF` when a law announces a size (timing the answer as an
    /// RTT probe) and `OPTS DRS Paced=` once this end's senders pace themselves and, when it
    /// `listens`, takes the server's replies until the final one. Returns the work's outcome,
    /// the final reply if it came (an error if the control connection broke), and what was
    /// asked.
    #[allow(clippy::type_complexity)]
    fn conduct<T: Send>(
        &mut self,
        conductor: &Conductor,
        pump: Option<&Pump>,
        listens: bool,
        work: impl FnOnce() -> anyhow::Result<T> + Send,
    ) -> anyhow::Result<(anyhow::Result<T>, anyhow::Result<Option<Reply>>, Asked)> {
        let mut fin: Option<Reply> = None;
        let mut asked = Asked::default();
        // A sender reads queues against the control connection's RTT (a receiver times
        // probes of its own).
        if conductor.role() == Role::Sender {
            let control = self.control.get_ref().tcp().as_fd().try_clone_to_owned();
            if let Ok(fd) = control {
                conductor.watch_control(fd);
            }
        }
        self.udp.left_on_random_loss = false;
        // The conductor rings when a law has a size to announce.
        let wake = Wake::new().context("cannot make an eventfd")?;
        let (announce, announced) = mpsc::channel::<Told>();
        std::thread::scope(|scope| {
            let bell = &wake;
            let worker = scope.spawn(move || {
                let told = |t| {
                    let _ = announce.send(t);
                    bell.ring();
                };
                conductor
                    .run(work, told)
                    .unwrap_or_else(|| Err(anyhow!("the data transfer thread panicked")))
            });
            let joined = |worker: std::thread::ScopedJoinHandle<'_, anyhow::Result<T>>| {
                worker
                    .join()
                    .map_err(|_| anyhow!("the data transfer thread panicked"))
            };
            let mut watch = StallWatch::new(self.timeout, Instant::now());
            let mut stalled = false;
            while !worker.is_finished() {
                // A transfer that moves nothing for --timeout (a server that stopped reading an
                // upload, or sending) is cancelled, however its socket is blocked.
                if let Some(p) = pump.filter(|_| !stalled) {
                    if watch.stalled(Instant::now(), p.bytes()) {
                        stalled = true;
                        p.cancel();
                    }
                }
                for t in announced.try_iter() {
                    // This end's senders met random loss: an upload leaves TCP (udp.rs).
                    if let (Told::Paced(cc), Some(p), None) = (&t, pump, &fin) {
                        if conductor.role() == Role::Sender && self.leaves_on(cc) {
                            self.leave_tcp(p, "this end", listens);
                        }
                    }
                    if !self.drs_peer || fin.is_some() {
                        continue;
                    }
                    self.send_during(&inband::client_command(&t))?;
                    match t {
                        Told::Buffer(_) => asked.probes.push_back(Instant::now()),
                        Told::Paced(_) => asked.notices += 1,
                    }
                }
                // The server has spoken (or is not listened to): only the data side's end
                // remains; look for it every millisecond (sleeping a whole poll for it cost up
                // to 50 ms per file).
                if fin.is_some() || !listens {
                    std::thread::sleep(Duration::from_millis(1));
                    continue;
                }
                match self.poll_reply(POLL, Some(&wake)) {
                    Ok(Some(r)) => {
                        fin = take_reply(conductor, &mut asked, r);
                        if let (Some(f), Some(p)) = (&fin, pump) {
                            if !f.is_success() {
                                p.cancel();
                            }
                        }
                        // The sending server met random loss: this end leaves TCP (udp.rs).
                        let paces = asked.peer_paces.clone();
                        if let (Some(cc), Some(p), None) = (paces, pump, &fin) {
                            if self.leaves_on(&cc) {
                                let peer = self.peer.to_string();
                                self.leave_tcp(p, &peer, listens);
                            }
                        }
                    }
                    Ok(None) => {}
                    // The control connection broke: the data may still finish; report both.
                    Err(e) => return Ok((joined(worker)?, Err(e), asked)),
                }
            }
            let moved = match joined(worker)? {
                Err(e) if stalled => Err(e.context(format!(
                    "no data moved for {} (--timeout): the transfer stalled",
                    humantime::format_duration(watch.limit())
                ))),
                moved => moved,
            };
            Ok((moved, Ok(fin), asked))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::super::fake_server::{take, with_server};
    use super::*;
    use fatpipe_proto::drs::sbuf_text;
    use fatpipe_proto::Command;
    use std::io::BufRead;

    #[test]
    fn what_was_asked_during_a_transfer_is_answered_after_it_and_kept_though_it_failed() {
        let got = with_server(
            "331 pass\r\n230 in\r\n",
            |r, w| {
                // A fatpipe server defers the command behind the transfer's final reply.
                let replies = "426 Transfer ended\r\n\
                               229 Entering Extended Passive Mode (|||4242|)\r\n";
                let mut got = take(r, w, 1, replies);
                // What comes after, to the session's end: no command should.
                got.extend(r.lines().map_while(Result::ok));
                got
            },
            |mut c| {
                c.confirm_login().unwrap();
                assert!(c.ask_during(Command::Epsv(None)));
                let conductor = Conductor::new(None, Role::Receiver);
                let (moved, fin) = c.drive(&conductor, None, || Ok(())).unwrap();
                assert!(moved.is_ok());
                assert_eq!(fin.unwrap().code, 426);
                // The answer is the next try's: taken, not asked again.
                assert_eq!(c.passive_target().unwrap().port(), 4242);
            },
        );
        assert_eq!(got.last().map(String::as_str), Some("EPSV"), "{got:?}");
        assert_eq!(got.iter().filter(|l| *l == "EPSV").count(), 1, "{got:?}");
    }

    #[test]
    fn answers_to_probes_and_notices_are_told_from_other_replies() {
        assert!(is_drs_answer(&Reply::new(200, sbuf_text(4 << 20))));
        assert!(is_drs_answer(&Reply::new(200, "OPTS DRS Paced=bbr")));
        assert!(!is_drs_answer(&Reply::new(126, sbuf_text(4 << 20))));
        assert!(!is_drs_answer(&Reply::new(200, "OPTS Command Successful.")));
        assert!(!is_drs_answer(&Reply::new(213, "00ff")));
    }
}
