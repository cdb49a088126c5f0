//! What the server holds, asked on the control connection or over a listing's data connection:
//! a file's size, whether a path is a directory, making one, and listings (`MLSD`/`LIST`, or
//! `MLST` for one file).

use super::Connection;
use anyhow::{anyhow, bail};
use fatpipe_net::mover::StreamWork;
use fatpipe_net::Pump;
use fatpipe_proto::listing::{parse_list_line, parse_mlsx, Entry, EntryKind};
use fatpipe_proto::{Command, TransferType};
use std::sync::Arc;

impl Connection {
    /// The size of a remote file, or `None` if the server cannot tell (no such file, or no SIZE).
    pub fn size(&mut self, path: &str) -> anyhow::Result<Option<u64>> {
        self.set_type_only(TransferType::Image)?;
        let r = self.command(&Command::Size(path.into()))?;
        Ok(if r.code == 213 {
            r.text().trim().parse().ok()
        } else {
            None
        })
    }

    /// Whether `path` is a directory on the server (tested with `CWD`, then back to `/`).
    pub fn is_dir(&mut self, path: &str) -> anyhow::Result<bool> {
        let r = self.command(&Command::Cwd(path.into()))?;
        if r.is_success() {
            self.checked(&Command::Cwd("/".into()))?;
        }
        Ok(r.is_success())
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

    /// Lists a remote directory (`MLSD` when the server has it, else `LIST` in `ls -l` form),
    /// or a remote file on its own (`MLST`, when the server has it).
    pub fn list(&mut self, path: &str) -> anyhow::Result<Vec<Entry>> {
        let machine = self.has_feature("MLST");
        if machine {
            if let Some(file) = self.stat_file(path)? {
                return Ok(vec![file]);
            }
        }
        self.set_type(TransferType::Ascii)?;
        let cmd = if machine {
            Command::Mlsd(Some(path.into()))
        } else {
            Command::List(Some(path.into()))
        };
        let mut raw = Vec::new();
        let work = StreamWork::Receive {
            into: &mut raw,
            ascii: false,
        };
        let pump = Arc::new(Pump::default());
        self.transfer(cmd, 0, None, &pump, work, |e| {
            anyhow!("listing {path}: {e}")
        })?;
        let text = String::from_utf8_lossy(&raw);
        Ok(text
            .lines()
            .map(|l| l.trim_end_matches('\r'))
            .filter_map(|l| {
                if machine {
                    parse_mlsx(l)
                } else {
                    parse_list_line(l)
                }
            })
            .filter(|e| e.name != "." && e.name != "..")
            .collect())
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
