//! Pipelined uploads: a small file's `STOR` and data go out over the MODE E connections the
//! upload before it left open as soon as that upload's data is out, without waiting for its
//! `226`. A fatpipe server that lists `PIPELINED STOR` takes commands that come during a
//! transfer in turn after it, and finds each next file's blocks behind the last one's EODs;
//! this end reads each upload's replies (to its final one, and the answers to the `SIZE` and
//! `CKSM` asked behind it) when the copy asks how it ended. The uploads sent before their turn
//! run on exactly the connections open (`-p auto` adds none). When one is refused or fails,
//! the server closes the kept connections, so that the data sent behind it is nobody's: the
//! uploads queued behind it find no data channel (`425`) and the copy sends them again.

use super::pipeline::{Ahead, Store, Want};
use super::{describe, finish, send_error, Connection};
use anyhow::bail;
use fatpipe_net::{Mover, Pump};
use fatpipe_proto::{Command, TransferType};
use std::fs::File;
use std::net::Shutdown;
use std::sync::Arc;

impl Connection {
    /// Whether the next upload can go out before the replies to those before it are in (see
    /// [`Connection::store_ahead`]): a fatpipe server that lists `PIPELINED STOR`, MODE E
    /// binary with reuse in force and the last upload's connections open, nothing to set first.
    pub fn stores_ahead(&self) -> bool {
        self.has_feature("PIPELINED")
            && self.has_feature("DRS")
            && self.reuse
            && self.extended
            && self.ttype == Some(TransferType::Image)
            && self
                .kept
                .as_ref()
                .is_some_and(|k| k.sending && k.channel.idle() > 0)
            && !self.pipe.sets_ahead()
            && self.pipe.queued.is_empty()
    }

    /// Sends `file` whole to `path` over the connections the last upload left open, before
    /// the replies to the uploads before it are in (when [`Connection::stores_ahead`]), with
    /// what was asked behind it; [`Connection::stored`] then says how it ended. An error here
    /// means no command went out.
    pub fn store_ahead(&mut self, path: &str, file: &File, pump: &Arc<Pump>) -> anyhow::Result<()> {
        if !self.stores_ahead() {
            bail!("STOR {path}: cannot go out before the replies to the uploads before it");
        }
        let Some(channel) = self.kept.take().map(|k| k.channel) else {
            bail!("STOR {path}: no connections left open");
        };
        // On the kept connections only: no policy grows the count.
        let (conductor, mover) = match self.block_upload(file, 0, 1, None, &channel) {
            Ok(upload) => upload,
            Err(e) => {
                self.keep_open(true, channel);
                return Err(e);
            }
        };
        let cmd = Command::Stor(path.into());
        self.send_with_ahead(&cmd)?;
        let behind = self.pipe.take_behind_sent();
        self.last.tune = None;
        self.last.streams = None;
        let driver = &conductor;
        let moved = self.drive_quiet(&conductor, || {
            mover.run(pump, driver).map_err(|e| send_error(path, e))
        });
        let moved = match moved {
            Ok(m) => m,
            Err(e) => {
                // No data side ran: the server waits on a transfer this end will not run.
                let _ = self.control.get_ref().tcp().shutdown(Shutdown::Both);
                Err(e)
            }
        };
        if let Ok(m) = &moved {
            self.record_send(None, &conductor, m);
            self.keep_open(true, channel);
        }
        self.pipe.owe(Ahead {
            cmd: cmd.clone(),
            want: Want::Stored,
        });
        self.pipe.stores.push_back(Store {
            cmd,
            behind,
            moved: moved.map(|m| m.bytes),
        });
        Ok(())
    }

    /// How the upload to `path` that [`Connection::store_ahead`] sent ended: the bytes it
    /// moved, or why it failed. The replies owed before its own are read first.
    pub fn stored(&mut self, path: &str) -> anyhow::Result<u64> {
        let cmd = Command::Stor(path.into());
        loop {
            if let Some(i) = self.pipe.stored.iter().position(|(c, _)| *c == cmd) {
                return self.pipe.stored.remove(i).1;
            }
            let Some(a) = self.pipe.next_owed() else {
                bail!("{}: not sent before its turn", describe(&cmd));
            };
            // No setting goes out with an upload sent ahead; one refused is only logged.
            if let Some(e) = self.take_one_owed(a)? {
                tracing::warn!("{e:#}");
            }
        }
    }

    /// Reads the replies of `cmd`, sent before its turn, and of what was asked behind it
    /// (kept when it worked), and keeps how it ended for [`Connection::stored`]. One that
    /// failed leaves no connections open (the server closed its ends).
    pub(super) fn take_stored(&mut self, cmd: Command) -> anyhow::Result<()> {
        let Some(store) = self.pipe.stores.pop_front().filter(|s| s.cmd == cmd) else {
            bail!("{}: its replies are not the ones due", describe(&cmd));
        };
        let fin = match self.read_final(&cmd) {
            Ok(f) => f,
            Err(e) => {
                // Out of step or silent: the session ends, and what is owed after fails at once.
                let _ = self.control.get_ref().tcp().shutdown(Shutdown::Both);
                return Err(e);
            }
        };
        let outcome = finish(&describe(&cmd), store.moved, Ok(fin));
        if outcome.is_err() {
            self.kept = None;
        }
        self.take_answers(store.behind, outcome.is_ok())?;
        self.pipe.stored.push((cmd, outcome));
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::super::fake_server::with_server;
    use super::super::{Connection, Streams};
    use fatpipe_net::{Pump, TunerConfig};
    use fatpipe_proto::mode_e::{Header, EOD, EOF, HEADER_LEN};
    use fatpipe_proto::Command;
    use std::io::{BufRead, BufReader, Read, Seek, Write};
    use std::net::{TcpListener, TcpStream};
    use std::sync::Arc;

    /// One upload's blocks from `conns` (each read to its EOD), as text.
    fn blocks(conns: &mut [TcpStream]) -> String {
        let mut data = Vec::new();
        for c in conns {
            loop {
                let mut h = [0u8; HEADER_LEN];
                c.read_exact(&mut h).unwrap();
                let h = Header::decode(&h);
                let mut block = vec![0u8; h.count as usize];
                c.read_exact(&mut block).unwrap();
                let end = h.offset as usize + block.len();
                if !h.has(EOF) && end > data.len() {
                    data.resize(end, 0);
                }
                if !h.has(EOF) {
                    data[h.offset as usize..end].copy_from_slice(&block);
                }
                if h.has(EOD) {
                    break;
                }
            }
        }
        String::from_utf8(data).unwrap()
    }

    /// A server that takes uploads over two MODE E connections. It answers `/b`'s `STOR`
    /// with its final reply only once the next command after what went behind it is in (a
    /// client that waits for that reply before sending the next upload gets stuck), and
    /// refuses `refuse` after reading its data, closing the connections (the uploads after it
    /// find none: `425`). Returns the command lines and, per upload, `got PATH: DATA`.
    fn holding_server(
        r: &mut BufReader<TcpStream>,
        w: &mut TcpStream,
        data: TcpListener,
        refuse: &str,
    ) -> Vec<String> {
        let port = data.local_addr().unwrap().port();
        let mut got = Vec::new();
        let mut conns: Vec<TcpStream> = Vec::new();
        let mut uploads = 0;
        // Replies held back until the next command comes.
        let mut held = String::new();
        for _ in 0..100 {
            let mut line = String::new();
            r.read_line(&mut line).unwrap();
            let line = line.trim_end().to_string();
            if line.is_empty() {
                break;
            }
            got.push(line.clone());
            let (verb, arg) = line.split_once(' ').unwrap_or((&line, ""));
            let now = match verb {
                "EPSV" => format!("229 Entering Extended Passive Mode (|||{port}|)\r\n"),
                "SIZE" => {
                    held.push_str("213 5\r\n");
                    continue;
                }
                "STOR" => {
                    uploads += 1;
                    if uploads == 1 {
                        conns = (0..2).map(|_| data.accept().unwrap().0).collect();
                    }
                    if conns.is_empty() {
                        "425 Use PORT, EPRT, PASV or EPSV first\r\n".to_string()
                    } else {
                        got.push(format!("got {arg}: {}", blocks(&mut conns)));
                        let start = format!("150 Ok to send data for {arg} (BINARY mode)\r\n");
                        let end = match arg == refuse {
                            true => {
                                conns.clear();
                                format!("550 cannot write {arg}\r\n")
                            }
                            false => "226 ok\r\n".to_string(),
                        };
                        if arg == "/b" {
                            let before = std::mem::take(&mut held);
                            w.write_all(format!("{before}{start}").as_bytes()).unwrap();
                            held = end;
                            continue;
                        }
                        format!("{start}{end}")
                    }
                }
                // The client waits for no answer.
                "QUIT" => break,
                _ => "200 ok\r\n".into(),
            };
            let before = std::mem::take(&mut held);
            w.write_all(format!("{before}{now}").as_bytes()).unwrap();
        }
        got
    }

    /// A scratch file holding `text`.
    fn file(text: &str) -> std::fs::File {
        let mut f = tempfile::tempfile().unwrap();
        f.write_all(text.as_bytes()).unwrap();
        f.rewind().unwrap();
        f
    }

    /// A session with tuning and two MODE E streams, whose first upload (`/a`) ran the normal
    /// way and left its connections open.
    fn after_first_upload(c: &mut Connection) {
        c.set_tuning(TunerConfig::untuned()).unwrap();
        c.set_streams(Streams::Fixed(2)).unwrap();
        assert!(!c.stores_ahead(), "no connections open yet");
        c.store_blocks("/a", 0, &file("aaaaa"), &pump()).unwrap();
        assert!(c.stores_ahead());
    }

    /// A file's own byte counter.
    fn pump() -> Arc<Pump> {
        Arc::new(Pump::default())
    }

    #[test]
    fn an_upload_goes_out_before_the_reply_to_the_one_before_it() {
        let data = TcpListener::bind("127.0.0.1:0").unwrap();
        let got = with_server(
            "331 pass\r\n230 in\r\n",
            move |r, w| holding_server(r, w, data, ""),
            |mut c| {
                after_first_upload(&mut c);
                c.ask_behind(Command::Size("/b".into()));
                c.store_ahead("/b", &file("bbbbb"), &pump()).unwrap();
                // The server holds /b's 226 until this one is in.
                c.store_ahead("/c", &file("ccccc"), &pump()).unwrap();
                assert_eq!(c.stored("/b").unwrap(), 5);
                // Answered behind /b's 226: not asked again.
                assert_eq!(c.size("/b").unwrap(), Some(5));
                assert_eq!(c.stored("/c").unwrap(), 5);
                c.quit();
            },
        );
        let at = |l: &str| got.iter().position(|g| g == l).unwrap();
        assert!(got.contains(&"got /b: bbbbb".to_string()), "{got:?}");
        assert!(got.contains(&"got /c: ccccc".to_string()), "{got:?}");
        assert!(at("SIZE /b") < at("STOR /c"), "{got:?}");
        assert_eq!(got.iter().filter(|l| l.starts_with("SIZE")).count(), 1);
    }

    #[test]
    fn a_refused_upload_fails_the_ones_sent_behind_it_and_leaves_no_connections() {
        let data = TcpListener::bind("127.0.0.1:0").unwrap();
        with_server(
            "331 pass\r\n230 in\r\n",
            move |r, w| holding_server(r, w, data, "/b"),
            |mut c| {
                after_first_upload(&mut c);
                c.store_ahead("/b", &file("bbbbb"), &pump()).unwrap();
                c.store_ahead("/c", &file("ccccc"), &pump()).unwrap();
                let b = format!("{:#}", c.stored("/b").unwrap_err());
                assert!(b.contains("550 cannot write /b"), "{b}");
                assert!(!c.stores_ahead(), "the connections are closed");
                let c_ = format!("{:#}", c.stored("/c").unwrap_err());
                assert!(c_.contains("425"), "{c_}");
                c.quit();
            },
        );
    }
}
