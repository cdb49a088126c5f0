//! What the server holds, asked on the control connection or over a listing's data connection
//! (a file's size and time, whether a path is a directory, listings: `MLSD`/`LIST`, or `MLST`
//! for one file), and changes to it (making, deleting and renaming).

use super::Connection;
use anyhow::{anyhow, bail};
use fatpipe_net::mover::StreamWork;
use fatpipe_net::Pump;
use fatpipe_proto::listing::{parse_list_line, parse_mlsx, parse_timeval, Entry, EntryKind};
use fatpipe_proto::{Command, TransferType};
use std::sync::Arc;

impl Connection {
    /// The size of a remote file, or `None` if the server cannot tell (no such file, or no SIZE).
    pub fn size(&mut self, path: &str) -> anyhow::Result<Option<u64>> {
        self.set_type_only(TransferType::Image);
        let r = self.ask(&Command::Size(path.into()))?;
        Ok(if r.code == 213 {
            r.text().trim().parse().ok()
        } else {
            None
        })
    }

    /// A remote file's size and modification time as [`Connection::size`] and
    /// [`Connection::modified`] tell them, in one round trip (`MDTM` asked ahead of `SIZE`).
    pub fn size_and_modified(&mut self, path: &str) -> anyhow::Result<(Option<u64>, Option<i64>)> {
        if self.has_feature("MDTM") {
            self.ask_ahead(Command::Mdtm(path.into()));
        }
        let size = self.size(path)?;
        Ok((size, self.modified(path)?))
    }

    /// Whether `path` is a directory on the server (tested with `CWD`, then back to `/`, in one
    /// write: this client names every path from the root).
    pub fn is_dir(&mut self, path: &str) -> anyhow::Result<bool> {
        let cwd = Command::Cwd(path.into());
        self.ask_ahead(cwd.clone());
        self.command(&Command::Cwd("/".into()))?;
        Ok(self.ask(&cwd)?.is_success())
    }

    /// Creates a remote directory; an existing one is fine.
    pub fn mkdir(&mut self, path: &str) -> anyhow::Result<()> {
        let r = self.command(&Command::Mkd(path.into()))?;
        if r.is_success() || self.is_dir(path)? {
            Ok(())
        } else {
            bail!("cannot create remote directory {path}: {r}")
        }
    }

    /// Creates a remote directory that must not exist yet.
    pub fn make_dir(&mut self, path: &str) -> anyhow::Result<()> {
        self.done(
            &Command::Mkd(path.into()),
            "cannot create remote directory",
            path,
        )
    }

    /// Creates a remote directory and its missing parents.
    pub fn mkdir_all(&mut self, path: &str) -> anyhow::Result<()> {
        let mut at = String::new();
        let parts: Vec<&str> = path.split('/').filter(|p| !p.is_empty()).collect();
        for (i, part) in parts.iter().enumerate() {
            at = format!("{at}/{part}");
            if i + 1 == parts.len() {
                return self.mkdir(&at);
            }
            // A parent that exists (or cannot be made) shows in the last one's answer: the
            // parents go out with it, in one write.
            self.tell_ahead(Command::Mkd(at.clone()));
        }
        Ok(())
    }

    /// A remote file's modification time (Unix seconds), if the server tells (`MDTM`).
    pub fn modified(&mut self, path: &str) -> anyhow::Result<Option<i64>> {
        if !self.has_feature("MDTM") {
            return Ok(None);
        }
        let r = self.ask(&Command::Mdtm(path.into()))?;
        Ok(r.is_success()
            .then(|| parse_timeval(r.text().trim()))
            .flatten())
    }

    /// Sets a remote file's modification time (`MFMT`), asked ahead: it goes out with the next
    /// command (the next file's, or `QUIT`), and its reply only reaches the log. `false` when
    /// the server cannot.
    pub fn set_modified(&mut self, path: &str, modified: i64) -> bool {
        if !self.has_feature("MFMT") {
            return false;
        }
        self.tell_ahead(Command::Mfmt {
            modified,
            path: path.into(),
        });
        true
    }

    /// Deletes a remote file (`DELE`).
    pub fn delete(&mut self, path: &str) -> anyhow::Result<()> {
        self.done(&Command::Dele(path.into()), "cannot delete", path)
    }

    /// Removes an empty remote directory (`RMD`).
    pub fn remove_dir(&mut self, path: &str) -> anyhow::Result<()> {
        self.done(&Command::Rmd(path.into()), "cannot remove directory", path)
    }

    /// Removes the remote tree at `dir`: its files, its subtrees, then itself (a link is
    /// removed, never followed). Trees deeper than 64 levels are refused.
    pub fn remove_tree(&mut self, dir: &str) -> anyhow::Result<()> {
        self.remove_below(dir, 0)
    }

    fn remove_below(&mut self, dir: &str, depth: usize) -> anyhow::Result<()> {
        if depth > 64 {
            bail!("{dir}: tree deeper than 64 levels");
        }
        for e in self.list(dir)? {
            if e.name.contains('/') || e.name == "." || e.name == ".." {
                continue;
            }
            let path = format!("{}/{}", dir.trim_end_matches('/'), e.name);
            match e.kind {
                EntryKind::Dir => self.remove_below(&path, depth + 1)?,
                _ => self.delete(&path)?,
            }
        }
        self.remove_dir(dir)
    }

    /// Renames (moves) a remote file or directory; the server refuses to replace one.
    pub fn rename(&mut self, from: &str, to: &str) -> anyhow::Result<()> {
        let r = self.command(&Command::Rnfr(from.into()))?;
        if r.code != 350 {
            bail!("cannot rename {from}: {r}");
        }
        self.done(&Command::Rnto(to.into()), "cannot rename to", to)
    }

    /// Sends `cmd`; a refusal is an error naming `what` and `path` and the server's words.
    fn done(&mut self, cmd: &Command, what: &str, path: &str) -> anyhow::Result<()> {
        let r = self.command(cmd)?;
        if !r.is_success() {
            bail!("{what} {path}: {r}");
        }
        Ok(())
    }

    /// Lists a remote directory (`MLSD` when the server has it, else `LIST` in `ls -l` form),
    /// or a remote file on its own (`MLST`, when the server has it).
    pub fn list(&mut self, path: &str) -> anyhow::Result<Vec<Entry>> {
        let machine = self.has_feature("MLST");
        if machine {
            if let Some(file) = self.stat_file(path)? {
                return Ok(vec![file]);
            }
        }
        self.set_type(TransferType::Ascii);
        let cmd = if machine {
            Command::Mlsd(Some(path.into()))
        } else {
            Command::List(Some(path.into()))
        };
        let mut sink = ListingSink::new(machine);
        let work = StreamWork::Receive {
            into: &mut sink,
            ascii: false,
        };
        let pump = Arc::new(Pump::default());
        self.transfer(cmd, 0, None, &pump, work, |e| {
            anyhow!("listing {path}: {e}")
        })?;
        sink.finish().map_err(|e| anyhow!("listing {path}: {e}"))
    }

    /// `path`'s entry when it is a file (`MLST`, named by its last component); `None` for a
    /// directory or when the server cannot say.
    fn stat_file(&mut self, path: &str) -> anyhow::Result<Option<Entry>> {
        let r = self.command(&Command::Mlst(Some(path.into())))?;
        if !r.is_success() {
            return Ok(None);
        }
        let entry = r.lines.iter().skip(1).find_map(|l| parse_mlsx(l));
        Ok(entry.filter(|e| e.kind == EntryKind::File).map(|mut e| {
            let name = e.name.rsplit('/').next().unwrap_or(&e.name).to_string();
            e.name = name;
            e
        }))
    }
}

/// Most entries one listing may hold: a server that sends more is not followed (each entry
/// would become a job) and the listing fails.
pub const MAX_LISTING_ENTRIES: usize = 1_000_000;
/// Longest line of a listing.
const MAX_LISTING_LINE: usize = 64 * 1024;

/// A listing parsed line by line as it arrives, so that only its entries are held, never the
/// raw text, and at most [`MAX_LISTING_ENTRIES`] of them.
struct ListingSink {
    machine: bool,
    line: Vec<u8>,
    entries: Vec<Entry>,
}

impl ListingSink {
    fn new(machine: bool) -> ListingSink {
        ListingSink {
            machine,
            line: Vec::new(),
            entries: Vec::new(),
        }
    }

    fn take_line(&mut self) -> std::io::Result<()> {
        let text = String::from_utf8_lossy(&self.line);
        let l = text.trim_end_matches(['\r', '\n']);
        let entry = if self.machine {
            parse_mlsx(l)
        } else {
            parse_list_line(l)
        };
        self.line.clear();
        if let Some(e) = entry.filter(|e| e.name != "." && e.name != "..") {
            if self.entries.len() >= MAX_LISTING_ENTRIES {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::InvalidData,
                    format!(
                        "the server listed more than {MAX_LISTING_ENTRIES} entries: not followed"
                    ),
                ));
            }
            self.entries.push(e);
        }
        Ok(())
    }

    /// The entries, once the listing has ended.
    fn finish(mut self) -> std::io::Result<Vec<Entry>> {
        if !self.line.is_empty() {
            self.take_line()?;
        }
        Ok(self.entries)
    }
}

impl std::io::Write for ListingSink {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        for chunk in buf.split_inclusive(|b| *b == b'\n') {
            self.line.extend_from_slice(chunk);
            if self.line.len() > MAX_LISTING_LINE {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::InvalidData,
                    "a listing line longer than 64 KiB: not followed",
                ));
            }
            if chunk.ends_with(b"\n") {
                self.take_line()?;
            }
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn a_listing_is_parsed_as_it_comes_and_bounded() {
        let mut sink = ListingSink::new(true);
        let text = b"type=file;size=3; a\r\ntype=dir; sub\r\ntype=cdir; .\r\ntype=file;size=1; la";
        for piece in text.chunks(5) {
            sink.write_all(piece).unwrap();
        }
        let names: Vec<String> = sink.finish().unwrap().into_iter().map(|e| e.name).collect();
        assert_eq!(names, ["a", "sub", "la"]);
        let mut sink = ListingSink::new(true);
        assert!(sink.write_all(&vec![b'x'; MAX_LISTING_LINE + 1]).is_err());
        let mut sink = ListingSink::new(true);
        let line = b"type=file;size=1; f\r\n";
        let mut r = Ok(());
        for _ in 0..=MAX_LISTING_ENTRIES {
            r = sink.write_all(line);
            if r.is_err() {
                break;
            }
        }
        assert!(r.is_err(), "a listing past the bound is refused");
    }

    #[test]
    fn a_fatpipe_server_is_asked_its_passive_port_with_the_transfer_command() {
        use super::super::fake_server::{take, with_server};
        let got = with_server(
            "331 pass\r\n230 in\r\n",
            |r, w| {
                let data = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
                let port = data.local_addr().unwrap().port();
                let replies = format!(
                    "200 A\r\n229 Entering Extended Passive Mode (|||{port}|)\r\n150 Here\r\n"
                );
                // Only a client that sent `EPSV` and `LIST` together gets past this.
                let lines = take(r, w, 3, &replies);
                let (mut d, _) = data.accept().unwrap();
                d.write_all(b"-rw-r--r-- 1 0 0 5 Nov 22 11:20 a\r\n")
                    .unwrap();
                drop(d);
                w.write_all(b"226 Done\r\n").unwrap();
                lines
            },
            |mut c| {
                let names: Vec<String> =
                    c.list("/d").unwrap().into_iter().map(|e| e.name).collect();
                assert_eq!(names, ["a"]);
            },
        );
        assert_eq!(got[4..], ["TYPE A", "EPSV", "LIST /d"]);
    }
}
