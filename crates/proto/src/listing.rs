//! Directory listings: the `ls -l` form of `LIST`, the machine form of `MLSD`/`MLST` (RFC 3659),
//! and parsers for both so the client can walk a tree on any server.

use time::{macros::format_description, OffsetDateTime};

/// What kind of object a listing entry names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EntryKind {
    /// A regular file.
    File,
    /// A directory.
    Dir,
    /// A symbolic link (as a server lists it; not followed).
    Link,
    /// Anything else (device, pipe, socket, unknown).
    Other,
}

/// One entry of a directory listing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// The name (MLSD, LIST) or full path (MLST) of the entry.
    pub name: String,
    /// What the entry is.
    pub kind: EntryKind,
    /// Size in bytes.
    pub size: u64,
    /// Modification time, seconds since the Unix epoch (UTC).
    pub modified: i64,
    /// Unix permission bits (the low 12 bits of `st_mode`).
    pub mode: u32,
}

/// `YYYYMMDDHHMMSS` in UTC, the time form of `MDTM` and the `modify` fact.
pub fn format_timeval(secs: i64) -> String {
    let t = OffsetDateTime::from_unix_timestamp(secs).unwrap_or(OffsetDateTime::UNIX_EPOCH);
    t.format(format_description!(
        "[year][month][day][hour][minute][second]"
    ))
    .unwrap_or_else(|_| "19700101000000".into())
}

/// Seconds since the Unix epoch of a `YYYYMMDDHHMMSS` (UTC) time, fractions ignored.
pub fn parse_timeval(s: &str) -> Option<i64> {
    let digits = s.get(..14)?;
    if !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let n = |a: usize, b: usize| digits[a..b].parse::<u8>().ok();
    let year: i32 = digits[..4].parse().ok()?;
    let month = time::Month::try_from(n(4, 6)?).ok()?;
    let date = time::Date::from_calendar_date(year, month, n(6, 8)?).ok()?;
    let t = time::Time::from_hms(n(8, 10)?, n(10, 12)?, n(12, 14)?).ok()?;
    Some(date.with_time(t).assume_utc().unix_timestamp())
}

/// One `MLSD`/`MLST` line: `type=…;size=…;modify=…;perm=…; name`. `writable` says whether this
/// session may change the entry, which decides the `perm` fact.
pub fn format_mlsx(e: &Entry, writable: bool) -> String {
    let kind = match e.kind {
        EntryKind::File => "file",
        EntryKind::Dir => "dir",
        EntryKind::Link => "OS.unix=symlink",
        EntryKind::Other => "OS.unix=special",
    };
    let perm = match (e.kind, writable) {
        (EntryKind::Dir, true) => "elcmpdf",
        (EntryKind::Dir, false) => "el",
        (_, true) => "rwadf",
        (_, false) => "r",
    };
    format!(
        "type={kind};size={};modify={};perm={perm};UNIX.mode=0{:o}; {}",
        e.size,
        format_timeval(e.modified),
        e.mode & 0o7777,
        e.name
    )
}

/// Parses one `MLSD`/`MLST` line; `cdir`/`pdir` entries come back as `Other`.
pub fn parse_mlsx(line: &str) -> Option<Entry> {
    let (facts, name) = line.trim_start().split_once(' ')?;
    let mut e = Entry {
        name: name.to_string(),
        kind: EntryKind::Other,
        size: 0,
        modified: 0,
        mode: 0,
    };
    for fact in facts.split(';').filter(|f| !f.is_empty()) {
        let (k, v) = fact.split_once('=')?;
        match k.to_ascii_lowercase().as_str() {
            "type" => {
                e.kind = match v.to_ascii_lowercase().as_str() {
                    "file" => EntryKind::File,
                    "dir" => EntryKind::Dir,
                    "os.unix=symlink" | "os.unix=slink" => EntryKind::Link,
                    _ => EntryKind::Other,
                }
            }
            "size" => e.size = v.parse().ok()?,
            "modify" => e.modified = parse_timeval(v).unwrap_or(0),
            "unix.mode" => e.mode = u32::from_str_radix(v, 8).unwrap_or(0),
            _ => {}
        }
    }
    Some(e)
}

/// One `LIST` line in the `ls -l` form nearly every client parses. `now` picks between the
/// `HH:MM` form (recent) and the year form (older than about six months), as `ls` does.
pub fn format_list_line(e: &Entry, now: i64) -> String {
    let type_char = match e.kind {
        EntryKind::Dir => 'd',
        EntryKind::Link => 'l',
        EntryKind::File => '-',
        EntryKind::Other => 'p',
    };
    let mut mode = String::with_capacity(10);
    mode.push(type_char);
    for shift in [6, 3, 0] {
        let bits = (e.mode >> shift) & 7;
        mode.push(if bits & 4 != 0 { 'r' } else { '-' });
        mode.push(if bits & 2 != 0 { 'w' } else { '-' });
        mode.push(if bits & 1 != 0 { 'x' } else { '-' });
    }
    let t = OffsetDateTime::from_unix_timestamp(e.modified).unwrap_or(OffsetDateTime::UNIX_EPOCH);
    let recent = (now - e.modified).abs() < 180 * 86400;
    let when = if recent {
        t.format(format_description!(
            "[month repr:short] [day padding:space] [hour]:[minute]"
        ))
    } else {
        t.format(format_description!(
            "[month repr:short] [day padding:space]  [year]"
        ))
    }
    .unwrap_or_default();
    format!("{mode} 1 ftp ftp {:>12} {when} {}", e.size, e.name)
}

/// Parses one `ls -l` style `LIST` line (the form of vsftpd, ProFTPD and most Unix servers).
pub fn parse_list_line(line: &str) -> Option<Entry> {
    let kind = match line.chars().next()? {
        'd' => EntryKind::Dir,
        '-' => EntryKind::File,
        'l' => EntryKind::Link,
        _ => EntryKind::Other,
    };
    // perms, links, owner, group, size, month, day, time-or-year, then the name (may hold spaces).
    let mut rest = line;
    let mut fields = Vec::with_capacity(8);
    for _ in 0..8 {
        rest = rest.trim_start_matches(' ');
        let end = rest.find(' ')?;
        fields.push(&rest[..end]);
        rest = &rest[end..];
    }
    let name = rest.strip_prefix(' ')?;
    let name = match kind {
        EntryKind::Link => name.split(" -> ").next().unwrap_or(name),
        _ => name,
    };
    if name.is_empty() {
        return None;
    }
    Some(Entry {
        name: name.to_string(),
        kind,
        size: fields[4].parse().ok()?,
        modified: 0,
        mode: 0,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn entry(name: &str, kind: EntryKind) -> Entry {
        Entry {
            name: name.into(),
            kind,
            size: 1234,
            modified: 1_700_000_000,
            mode: 0o644,
        }
    }

    #[test]
    fn timeval_is_utc() {
        assert_eq!(format_timeval(1_700_000_000), "20231114221320");
        assert_eq!(parse_timeval("20231114221320"), Some(1_700_000_000));
    }

    #[test]
    fn vsftpd_list_lines_parse() {
        let e = parse_list_line("-rw-r--r--    1 0        0            1025 Nov 22 11:20 a file")
            .unwrap();
        assert_eq!(
            (e.name.as_str(), e.kind, e.size),
            ("a file", EntryKind::File, 1025)
        );
        let d =
            parse_list_line("drwxr-xr-x    2 0        0            4096 Jan 01  2020 sub").unwrap();
        assert_eq!(d.kind, EntryKind::Dir);
        let l = parse_list_line("lrwxrwxrwx    1 0        0               4 Nov 22 11:20 ln -> a")
            .unwrap();
        assert_eq!(l.name, "ln");
        assert_eq!(parse_list_line("total 12"), None);
    }

    proptest! {
        #[test]
        fn list_line_roundtrip(name in "[a-zA-Z0-9._][a-zA-Z0-9._ -]{0,20}", size in any::<u64>(), modified in 0i64..4_000_000_000, now in 0i64..4_000_000_000, dir in any::<bool>()) {
            let kind = if dir { EntryKind::Dir } else { EntryKind::File };
            let e = Entry { name: name.clone(), kind, size, modified, mode: 0o755 };
            let back = parse_list_line(&format_list_line(&e, now)).unwrap();
            prop_assert_eq!((back.name, back.kind, back.size), (name, kind, size));
        }

        #[test]
        fn mlsx_roundtrip(name in "[^\r\n]{1,20}", size in any::<u64>(), modified in 0i64..4_000_000_000, dir in any::<bool>()) {
            let kind = if dir { EntryKind::Dir } else { EntryKind::File };
            let e = Entry { name, kind, size, modified, mode: 0o640 };
            prop_assert_eq!(parse_mlsx(&format_mlsx(&e, true)), Some(e));
        }

        #[test]
        fn parsers_never_panic(line in "\\PC{0,80}") {
            let _ = parse_list_line(&line);
            let _ = parse_mlsx(&line);
        }
    }

    #[test]
    fn mlsx_of_readonly_dir() {
        assert!(format_mlsx(&entry("d", EntryKind::Dir), false).contains("perm=el;"));
    }
}
