//! The grid-mapfile: which account a client certificate's subject maps to, one line a
//! subject (`"/DC=org/DC=example/CN=Alice" alice`, the first of several accounts is taken),
//! as Globus, dCache and XRootD read it. Sites regenerate the file (edg-mkgridmap, a VO's
//! member list): it is read again when it changes, and a broken new version keeps the old.

use fatpipe_net::reload::Reloading;
use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A grid-mapfile, read again when its modification time changes.
#[derive(Debug)]
pub struct GridMap(Reloading<Arc<HashMap<String, String>>>);

impl GridMap {
    /// Reads `path`; an unreadable file or a malformed line is an error naming it.
    pub fn load(path: &Path) -> Result<GridMap, String> {
        let at = path.to_path_buf();
        let read = move || read(&at).map(Arc::new);
        let paths = vec![path.to_path_buf()];
        Reloading::load("grid-mapfile", paths, Duration::ZERO, Instant::now(), read).map(GridMap)
    }

    /// The account `subject` maps to, if any (the file read again first if it changed).
    pub fn account(&self, subject: &str) -> Option<String> {
        self.0.current(Instant::now()).get(subject).cloned()
    }
}

fn read(path: &Path) -> Result<HashMap<String, String>, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read grid-mapfile {}: {e}", path.display()))?;
    parse(&text).map_err(|(line, why)| format!("{}:{line}: {why}", path.display()))
}

/// The subject → account map of a grid-mapfile's text, or the first bad line's number and
/// what is wrong with it.
pub fn parse(text: &str) -> Result<HashMap<String, String>, (usize, String)> {
    let mut map = HashMap::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let bad = |why: &str| (i + 1, why.to_string());
        let (subject, rest) = if let Some(quoted) = line.strip_prefix('"') {
            unquote(quoted).ok_or_else(|| bad("the subject's quote is not closed"))?
        } else {
            let (s, r) = line.split_once(char::is_whitespace).unwrap_or((line, ""));
            (s.to_string(), r)
        };
        let account = rest
            .split(',')
            .map(str::trim)
            .find(|a| !a.is_empty())
            .ok_or_else(|| bad("no account after the subject"))?;
        if account.contains(char::is_whitespace) {
            return Err(bad("an account name holds a space"));
        }
        // The first line for a subject wins, as Globus's lookup has it.
        map.entry(subject).or_insert_with(|| account.to_string());
    }
    Ok(map)
}

/// The quoted subject at the start of `s` (past its opening quote; `\"` and `\\` escaped) and
/// what follows its closing quote.
fn unquote(s: &str) -> Option<(String, &str)> {
    let mut subject = String::new();
    let mut chars = s.char_indices();
    while let Some((i, c)) = chars.next() {
        match c {
            '"' => return Some((subject, &s[i + 1..])),
            '\\' => subject.push(chars.next()?.1),
            c => subject.push(c),
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn any_text_parses_or_names_a_line(text in "\\PC{0,200}") {
            match parse(&text) {
                Ok(map) => prop_assert!(map.values().all(|a| !a.contains(char::is_whitespace))),
                Err((line, _)) => prop_assert!(line >= 1 && line <= text.lines().count()),
            }
        }

        #[test]
        fn quoted_subjects_come_back_as_written(
            subject in "/[A-Za-z]{1,3}=[^\n\r]{0,40}",
            account in "[a-z][a-z0-9_]{0,15}",
        ) {
            let quoted = subject.replace('\\', "\\\\").replace('"', "\\\"");
            let map = parse(&format!("\"{quoted}\" {account},other\n")).unwrap();
            prop_assert_eq!(map.get(subject.as_str()), Some(&account));
        }
    }

    #[test]
    fn subjects_map_to_the_first_account() {
        let text = r#"
# users of the test VO
"/DC=org/DC=example/OU=People/CN=Alice Smith" alice,atlas001
"/O=fatpipe/CN=Bob \"the builder\"" bob
/O=fatpipe/CN=carol   carol
"/DC=org/DC=example/OU=People/CN=Alice Smith" mallory
"#;
        let map = parse(text).unwrap();
        assert_eq!(map["/DC=org/DC=example/OU=People/CN=Alice Smith"], "alice");
        assert_eq!(map["/O=fatpipe/CN=Bob \"the builder\""], "bob");
        assert_eq!(map["/O=fatpipe/CN=carol"], "carol");
        assert_eq!(map.len(), 3);
    }

    #[test]
    fn malformed_lines_are_named() {
        assert_eq!(
            parse("\"/CN=a\" a\n\"/CN=b b").unwrap_err(),
            (2, "the subject's quote is not closed".to_string())
        );
        assert_eq!(
            parse("\"/CN=a\"   \n").unwrap_err(),
            (1, "no account after the subject".to_string())
        );
        assert_eq!(
            parse("\"/CN=a\" an account").unwrap_err(),
            (1, "an account name holds a space".to_string())
        );
    }

    #[test]
    fn a_changed_file_is_read_again_and_a_broken_one_keeps_the_old() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("grid-mapfile");
        std::fs::write(&path, "\"/CN=a\" alice\n").unwrap();
        let map = GridMap::load(&path).unwrap();
        assert_eq!(map.account("/CN=a").as_deref(), Some("alice"));
        assert_eq!(map.account("/CN=b"), None);
        let touch = |text: &str, secs: u64| {
            std::fs::write(&path, text).unwrap();
            let t = std::time::SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(secs);
            std::fs::File::options()
                .write(true)
                .open(&path)
                .unwrap()
                .set_modified(t)
                .unwrap();
        };
        touch("\"/CN=b\" bob\n", 1_000_000);
        assert_eq!(map.account("/CN=b").as_deref(), Some("bob"));
        assert_eq!(map.account("/CN=a"), None);
        touch("\"/CN=c", 2_000_000);
        assert_eq!(map.account("/CN=b").as_deref(), Some("bob"));
        assert!(GridMap::load(&path).unwrap_err().contains("grid-mapfile:1"));
    }
}
