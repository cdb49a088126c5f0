//! Editing a users file (`fatpipe passwd --file`): one line per account, the file replaced
//! whole with mode 0600 under a lock, so that two edits at once never lose one another's entry.

use super::auth::users_file_line;
use anyhow::Context;
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

/// Sets the account `name`'s password in the users file at `path` (made if missing): its line
/// replaced, or one appended. Says whether a line was replaced.
pub fn set_password(path: &Path, name: &str, password: &str) -> anyhow::Result<bool> {
    let entry = users_file_line(name, password)?;
    // Two edits at once must not each write the file without the other's entry.
    let _lock = lock_beside(path)?;
    let old = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => return Err(e).with_context(|| format!("cannot read {}", path.display())),
    };
    let (text, replaced) = with_entry(&old, name, &entry);
    write_private(path, &text)?;
    Ok(replaced)
}

/// The users file `text` with `entry` as the account `name`'s line: in place of its old line
/// (a second `passwd` for a user changes the password, it does not add a line the server would
/// shadow), else appended. Says whether a line was replaced.
fn with_entry(text: &str, name: &str, entry: &str) -> (String, bool) {
    let mut replaced = false;
    let mut out = String::new();
    for line in text.lines() {
        let mine = line
            .trim_start()
            .split_once(':')
            .is_some_and(|(n, _)| n == name);
        if mine && !replaced {
            out.push_str(entry);
            replaced = true;
        } else if !mine {
            out.push_str(line);
        } else {
            continue; // a duplicate of the account: dropped
        }
        out.push('\n');
    }
    if !replaced {
        out.push_str(entry);
        out.push('\n');
    }
    (out, replaced)
}

/// Holds an exclusive lock on a file beside `path` until dropped: the users file itself is
/// replaced by a rename, so it cannot carry the lock.
fn lock_beside(path: &Path) -> anyhow::Result<nix::fcntl::Flock<std::fs::File>> {
    let lock = beside(path, "fatpipe-lock");
    let f = open_private(&lock, false)
        .with_context(|| format!("cannot open the lock file {}", lock.display()))?;
    nix::fcntl::Flock::lock(f, nix::fcntl::FlockArg::LockExclusive)
        .map_err(|(_, e)| e)
        .with_context(|| format!("cannot lock {}", lock.display()))
}

/// `.NAME.SUFFIX` in `path`'s directory.
fn beside(path: &Path, suffix: &str) -> PathBuf {
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    dir.join(format!(
        ".{}.{suffix}",
        path.file_name().and_then(|n| n.to_str()).unwrap_or("users")
    ))
}

/// `path` opened for writing, made readable by its owner only where it is new, and never
/// through a symbolic link (someone else's file put there would be written instead);
/// `truncate`: emptied.
fn open_private(path: &Path, truncate: bool) -> std::io::Result<std::fs::File> {
    std::fs::OpenOptions::new()
        .create(true)
        .write(true)
        .truncate(truncate)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
}

/// Writes `text` to `path` with mode 0600, through a temporary file renamed over it (a reader
/// never sees half a file, a crash never loses the old one).
fn write_private(path: &Path, text: &str) -> anyhow::Result<()> {
    let tmp = beside(path, "fatpipe-new");
    let mut f =
        open_private(&tmp, true).with_context(|| format!("cannot write {}", tmp.display()))?;
    f.write_all(text.as_bytes())?;
    f.sync_all()?;
    std::fs::rename(&tmp, path).with_context(|| format!("cannot replace {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_entry_for_a_user_replaces_the_first() {
        let text = "# users\nalice:OLD\nbob:B\nalice:DUP\n";
        let (out, replaced) = with_entry(text, "alice", "alice:NEW");
        assert!(replaced);
        assert_eq!(out, "# users\nalice:NEW\nbob:B\n");
        let (out, replaced) = with_entry(&out, "carol", "carol:C");
        assert!(!replaced);
        assert_eq!(out, "# users\nalice:NEW\nbob:B\ncarol:C\n");
        // A name that is a prefix of another is not that other.
        let (out, _) = with_entry("alicia:X\n", "alice", "alice:Y");
        assert_eq!(out, "alicia:X\nalice:Y\n");
    }
}
