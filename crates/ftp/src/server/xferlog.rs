//! The transfer log (`fatpipe serve --transfer-log FILE`): one line per file moved, in the
//! xferlog format of wu-ftpd, ProFTPD and vsftpd, which FTP server operators' tools parse:
//! `DATE SECONDS HOST BYTES FILE TYPE _ DIRECTION MODE USER ftp 0 * STATUS`, times in UTC.

use std::fs::File;
use std::io::Write;
use std::net::IpAddr;
use std::path::Path;
use std::sync::Mutex;
use time::OffsetDateTime;

/// One file's transfer, as the log records it.
pub struct Entry<'a> {
    /// When it ended.
    pub when: OffsetDateTime,
    /// How long it took.
    pub seconds: f64,
    /// The client's address.
    pub host: IpAddr,
    /// Bytes moved.
    pub bytes: u64,
    /// The file, as the client sees it (from the served root).
    pub path: &'a str,
    /// `TYPE I` (else `TYPE A`).
    pub binary: bool,
    /// To the server (an upload).
    pub incoming: bool,
    /// The account; `None` for an anonymous login.
    pub user: Option<&'a str>,
    /// The server confirmed it (`226`).
    pub complete: bool,
}

/// The date as xferlog writes it: `Fri Nov 27 22:24:58 2026`.
const DATE: &[time::format_description::FormatItem<'static>] = time::macros::format_description!(
    "[weekday repr:short] [month repr:short] [day padding:space] [hour]:[minute]:[second] [year]"
);

impl Entry<'_> {
    /// The log line (without its line break). Spaces in a name become `_`, as other servers
    /// write them, so that every line has its fourteen fields.
    pub fn line(&self) -> String {
        let date = self.when.format(DATE).unwrap_or_default();
        let path: String = self
            .path
            .chars()
            .map(|c| if c.is_whitespace() { '_' } else { c })
            .collect();
        format!(
            "{date} {} {} {} {path} {} _ {} {} {} ftp 0 * {}",
            self.seconds.round().max(1.0) as u64,
            self.host,
            self.bytes,
            if self.binary { 'b' } else { 'a' },
            if self.incoming { 'i' } else { 'o' },
            if self.user.is_some() { 'r' } else { 'a' },
            self.user.unwrap_or("anonymous"),
            if self.complete { 'c' } else { 'i' },
        )
    }
}

/// The open log, appended to by every session.
#[derive(Debug)]
pub struct TransferLog(Mutex<File>);

impl TransferLog {
    /// Opens (or creates) `path` for appending.
    pub fn open(path: &Path) -> std::io::Result<TransferLog> {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)?;
        Ok(TransferLog(Mutex::new(file)))
    }

    /// Appends `entry`; a failure to write is logged, never the transfer's.
    pub fn write(&self, entry: &Entry) {
        let line = format!("{}\n", entry.line());
        let written = match self.0.lock() {
            Ok(mut f) => f.write_all(line.as_bytes()),
            Err(_) => return,
        };
        if let Err(e) = written {
            tracing::warn!("cannot write the transfer log: {e}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_has_the_fourteen_fields_of_xferlog() {
        let e = Entry {
            when: time::macros::datetime!(2026-11-27 22:04:58 UTC),
            seconds: 0.2,
            host: "10.1.2.3".parse().unwrap(),
            bytes: 20971520,
            path: "/data/run 1.h5",
            binary: true,
            incoming: false,
            user: Some("alice"),
            complete: true,
        };
        assert_eq!(
            e.line(),
            "Fri Nov 27 22:04:58 2026 1 10.1.2.3 20971520 /data/run_1.h5 b _ o r alice ftp 0 * c"
        );
        let anonymous = Entry {
            user: None,
            incoming: true,
            complete: false,
            seconds: 12.6,
            ..e
        };
        let line = anonymous.line();
        assert!(
            line.ends_with(" 13 10.1.2.3 20971520 /data/run_1.h5 b _ i a anonymous ftp 0 * i"),
            "{line}"
        );
        assert_eq!(line.split(' ').filter(|f| !f.is_empty()).count(), 18);
    }
}
