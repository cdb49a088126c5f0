//! Asking ahead: a command whose answer is needed later and that does not depend on what comes
//! before it (a small file's `CKSM` before its `RETR`; after an upload, its `CKSM` beside its
//! `SIZE`) goes out with the next command in the same write, and its reply is kept until asked
//! for: one round trip fewer per file (RFC 959 servers answer in order).

use super::Connection;
use anyhow::anyhow;
use fatpipe_proto::{Command, Reply};
use std::io::Write;

/// Most answers kept for later (an answer nobody asked for is dropped after these).
const KEPT: usize = 8;

impl Connection {
    /// Sends `cmd` together with the next command this end waits on; its reply is kept for
    /// [`Connection::answered`]. Never flushed during a transfer.
    pub fn ask_ahead(&mut self, cmd: Command) {
        self.ahead.push(cmd);
    }

    /// The kept reply to `cmd`, if it was asked ahead (taken: a second call asks anew).
    pub(super) fn answered(&mut self, cmd: &Command) -> Option<Reply> {
        let i = self.answers.iter().position(|(c, _)| c == cmd)?;
        Some(self.answers.remove(i).1)
    }

    /// Writes what was asked ahead and then `cmd` in one write, and reads (and keeps) the
    /// replies to the former; `cmd`'s own reply is the caller's to read.
    pub(super) fn send_with_ahead(&mut self, cmd: &Command) -> anyhow::Result<()> {
        let ahead = std::mem::take(&mut self.ahead);
        let mut wire = Vec::new();
        let mut sent = Vec::new();
        for a in ahead {
            match a.to_wire() {
                Ok(w) => {
                    wire.extend(w);
                    sent.push(a);
                }
                Err(e) => tracing::warn!("not sent: {}", e.message),
            }
        }
        wire.extend(cmd.to_wire().map_err(|e| anyhow!("{}", e.message))?);
        let control = self.control.get_mut();
        control
            .write_all(&wire)
            .and_then(|_| control.flush())
            .map_err(|e| anyhow!("control connection to {}: {e}", self.peer))?;
        for a in sent {
            let r = self.read_reply()?;
            tracing::debug!("{a} (asked ahead) -> {r}");
            self.answers.push((a, r));
        }
        let over = self.answers.len().saturating_sub(KEPT);
        self.answers.drain(..over);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Connection, Credentials, TlsMode, TlsPolicy};
    use fatpipe_proto::gridftp::ChecksumAlg;
    use fatpipe_proto::Command;
    use std::io::{BufRead, BufReader, Write};
    use std::net::TcpListener;
    use std::time::Duration;

    /// A server that answers the login, then reads two commands before it answers either:
    /// only a client that sent them together gets past this.
    fn strict_server(l: TcpListener) -> Vec<String> {
        let (s, _) = l.accept().unwrap();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let mut w = s.try_clone().unwrap();
        let mut r = BufReader::new(s);
        let mut line = String::new();
        let mut next = |r: &mut BufReader<_>| {
            line.clear();
            r.read_line(&mut line).map(|_| line.trim_end().to_string())
        };
        w.write_all(b"220 hi\r\n").unwrap();
        assert!(next(&mut r).unwrap().starts_with("USER"));
        w.write_all(b"230 in\r\n").unwrap();
        assert_eq!(next(&mut r).unwrap(), "FEAT");
        w.write_all(b"211-Features:\r\n CKSM XXH3\r\n211 End\r\n")
            .unwrap();
        let (first, second) = (next(&mut r).unwrap(), next(&mut r).unwrap());
        w.write_all(b"213 00ff\r\n213 42\r\n").unwrap();
        vec![first, second]
    }

    #[test]
    fn a_command_asked_ahead_goes_out_with_the_next_and_its_answer_waits() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        let server = std::thread::spawn(move || strict_server(l));
        let off = TlsPolicy::new(TlsMode::Off, None);
        let creds = Credentials::anonymous();
        let mut c =
            Connection::open("127.0.0.1", port, &creds, Duration::from_secs(5), &off).unwrap();
        c.ask_ahead(super::super::checksum_command(ChecksumAlg::Xxh3, "/f"));
        let size = c.command(&Command::Size("/f".into())).unwrap();
        assert_eq!(size.text(), "42");
        assert_eq!(c.checksum(ChecksumAlg::Xxh3, "/f").unwrap(), "00ff");
        let got = server.join().unwrap();
        assert_eq!(got, ["CKSM XXH3 0 -1 /f", "SIZE /f"]);
    }
}
