//! The file-system commands of a session: the working directory, sizes and times, listings,
//! and the changes a writable session may make (delete, make and remove directories, rename,
//! never over an existing name).

use super::{Flow, Session};
use crate::server::sandbox::{self, FsError};
use crate::server::transfer::Job;
use fatpipe_net::partial;
use fatpipe_proto::listing::{format_list_line, format_mlsx, format_timeval};
use fatpipe_proto::reply::quote_path;
use fatpipe_proto::{Reply, VPath};
use std::io::ErrorKind;

impl Session {
    /// `SIZE`: a file that a cut upload left incomplete is as long as it holds in order, so a
    /// client resuming from `SIZE` leaves no hole.
    pub(super) fn size(&self, arg: &str) -> Result<Reply, Reply> {
        let (file, _) = self
            .shared
            .sandbox
            .open_read(&self.path(arg))
            .map_err(fs_reply)?;
        let held = partial::held(&file).map_err(|e| fs_reply(e.into()))?;
        Ok(Reply::new(213, held.prefix().to_string()))
    }

    /// `MDTM`: the modification time.
    pub(super) fn mdtm(&self, arg: &str) -> Result<Reply, Reply> {
        let m = self
            .shared
            .sandbox
            .metadata(&self.path(arg))
            .map_err(fs_reply)?;
        Ok(Reply::new(
            213,
            format_timeval(std::os::unix::fs::MetadataExt::mtime(&m)),
        ))
    }

    /// `MFMT`: sets a file's modification time, so an upload keeps its source's.
    pub(super) fn mfmt(&mut self, modified: i64, arg: &str) -> Result<Reply, Reply> {
        self.writable()?;
        let v = self.path(arg);
        let at = std::time::UNIX_EPOCH
            .checked_add(std::time::Duration::from_secs(modified.max(0) as u64))
            .ok_or_else(|| Reply::new(501, "Time out of range"))?;
        self.shared.sandbox.set_modified(&v, at).map_err(fs_reply)?;
        Ok(Reply::new(
            213,
            format!("Modify={}; {v}", format_timeval(modified)),
        ))
    }

    /// `MLST`: the facts of one object (the working directory without an argument).
    pub(super) fn mlst(&self, arg: Option<&str>) -> Result<Reply, Reply> {
        let v = arg.map_or(self.cwd.clone(), |a| self.path(a));
        let m = self.shared.sandbox.metadata(&v).map_err(fs_reply)?;
        let e = sandbox::entry(v.to_string(), &m);
        Ok(Reply::multi(
            250,
            format!("Listing {v}"),
            vec![format!(" {}", format_mlsx(&e, self.login()?.writable))],
            "End",
        ))
    }

    /// `STAT <path>`: a long listing on the control connection.
    pub(super) fn stat_of(&self, arg: &str) -> Result<Reply, Reply> {
        let lines = self.listing(Some(arg), Listing::Long)?;
        Ok(Reply::multi(
            213,
            format!("Status of {}", self.path(arg)),
            lines,
            "End of status",
        ))
    }

    /// `DELE`: removes a file (not a directory); a link is removed, not what it points at.
    pub(super) fn dele(&mut self, arg: &str) -> Result<Reply, Reply> {
        self.writable()?;
        let v = self.path(arg);
        self.shared.sandbox.remove_file(&v).map_err(fs_reply)?;
        Ok(Reply::new(250, format!("Deleted {v}")))
    }

    /// `MKD`: makes a directory.
    pub(super) fn mkd(&mut self, arg: &str) -> Result<Reply, Reply> {
        self.writable()?;
        let v = self.path(arg);
        self.shared.sandbox.make_dir(&v).map_err(fs_reply)?;
        Ok(Reply::new(
            257,
            format!("{} created", quote_path(&v.to_string())),
        ))
    }

    /// `RMD`: removes an empty directory (never the root, never through a link).
    pub(super) fn rmd(&mut self, arg: &str) -> Result<Reply, Reply> {
        self.writable()?;
        let v = self.path(arg);
        if v.is_root() {
            return Err(Reply::new(550, "Not a removable directory"));
        }
        self.shared.sandbox.remove_dir(&v).map_err(fs_reply)?;
        Ok(Reply::new(250, format!("Removed {v}")))
    }

    /// `RNFR`: the object the next `RNTO` renames.
    pub(super) fn rnfr(&mut self, arg: &str) -> Result<Reply, Reply> {
        self.writable()?;
        let v = self.path(arg);
        self.shared.sandbox.entry_of(&v).map_err(fs_reply)?;
        self.rename_from = Some(v);
        Ok(Reply::new(350, "Ready for RNTO"))
    }

    /// `RNTO`: an existing target is never replaced (`553`; delete it first to replace it).
    pub(super) fn rnto(&mut self, arg: &str) -> Result<Reply, Reply> {
        let from = self
            .rename_from
            .take()
            .ok_or_else(|| Reply::new(503, "RNFR first"))?;
        self.writable()?;
        let to = self.path(arg);
        self.shared
            .sandbox
            .rename(&from, &to)
            .map_err(|e| match e {
                FsError::Io(io) if io.kind() == ErrorKind::AlreadyExists => {
                    Reply::new(553, format!("{to} exists; delete it first to replace it"))
                }
                e => fs_reply(e),
            })?;
        Ok(Reply::new(250, format!("Renamed {from} to {to}")))
    }

    pub(super) fn cwd_to(&mut self, v: VPath) -> Result<Reply, Reply> {
        let m = self.shared.sandbox.metadata(&v).map_err(fs_reply)?;
        if !m.is_dir() {
            return Err(Reply::new(550, "Not a directory"));
        }
        let text = format!("Directory changed to {v}");
        self.cwd = v;
        Ok(Reply::new(250, text))
    }

    pub(super) fn status(&self) -> Reply {
        let user = self.account.login.as_ref().map_or("-", |l| l.user.as_str());
        let ttype = self.mode_word();
        Reply::multi(
            211,
            "fatpipe FTP server status:",
            vec![
                format!(" Connected to {}", self.peer),
                format!(" Logged in as {user}"),
                format!(
                    " TYPE: {ttype}; MODE: {}; STRU: FILE",
                    if self.settings.extended {
                        "EXTENDED BLOCK"
                    } else {
                        "STREAM"
                    }
                ),
                " No data transfer in progress".to_string(),
            ],
            "End of status",
        )
    }

    pub(super) fn send_listing(
        &mut self,
        arg: Option<String>,
        style: Listing,
    ) -> Result<Flow, Reply> {
        let lines = self.listing(arg.as_deref(), style)?;
        let mut bytes = Vec::new();
        for l in lines {
            bytes.extend_from_slice(l.trim_start().as_bytes());
            bytes.extend_from_slice(b"\r\n");
        }
        let label = format!(
            "listing of {}",
            arg.as_deref().map_or(self.cwd.clone(), |a| self.path(a))
        );
        self.begin(
            Job::SendBytes(bytes),
            "Here comes the directory listing".into(),
            label,
            None,
        )
    }

    /// Listing lines for LIST/NLST/MLSD/STAT; each is indented by one space (for STAT's reply body).
    pub(super) fn listing(&self, arg: Option<&str>, style: Listing) -> Result<Vec<String>, Reply> {
        let v = arg.map_or(self.cwd.clone(), |a| self.path(a));
        let fs = &self.shared.sandbox;
        let meta = fs.metadata(&v).map_err(fs_reply)?;
        let writable = self.login()?.writable;
        let now = unix_now();
        let entries = if meta.is_dir() {
            fs.list_dir(&v).map_err(fs_reply)?
        } else if style == Listing::Machine {
            return Err(Reply::new(501, "Not a directory; use MLST for a file"));
        } else {
            vec![sandbox::entry(
                v.file_name().unwrap_or("/").to_string(),
                &meta,
            )]
        };
        Ok(entries
            .iter()
            .map(|e| match style {
                Listing::Long => format!(" {}", format_list_line(e, now)),
                Listing::Machine => format!(" {}", format_mlsx(e, writable)),
                Listing::Names => match arg {
                    Some(a) if meta.is_dir() => format!(" {}/{}", a.trim_end_matches('/'), e.name),
                    Some(a) => format!(" {a}"),
                    None => format!(" {}", e.name),
                },
            })
            .collect())
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Listing {
    Long,
    Names,
    Machine,
}

fn unix_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

/// The reply a refused or failed file-system operation earns.
pub(super) fn fs_reply(e: FsError) -> Reply {
    match e {
        FsError::NotFound | FsError::Outside | FsError::WrongKind(_) => {
            Reply::new(550, e.to_string())
        }
        FsError::Io(io) => match (io.kind(), io.raw_os_error()) {
            (_, Some(libc::ENOSPC)) | (_, Some(libc::EDQUOT)) => {
                Reply::new(452, format!("Insufficient storage space: {io}"))
            }
            (ErrorKind::NotFound, _) => Reply::new(550, "No such file or directory"),
            (ErrorKind::PermissionDenied, _) => Reply::new(550, "Permission denied"),
            (ErrorKind::AlreadyExists, _) => Reply::new(550, "File exists"),
            (ErrorKind::DirectoryNotEmpty, _) => Reply::new(550, "Directory not empty"),
            _ => Reply::new(451, format!("Local error: {io}")),
        },
    }
}
