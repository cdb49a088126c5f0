//! FTP replies: a three-digit code with one or more lines of text (RFC 959 §4.2).

use std::fmt;

/// A complete reply, single- or multi-line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reply {
    /// The three-digit reply code.
    pub code: u16,
    /// The text lines; the first and last carry the code on the wire, the ones between do not.
    pub lines: Vec<String>,
}

impl Reply {
    /// A single-line reply.
    pub fn new(code: u16, text: impl Into<String>) -> Self {
        Reply {
            code,
            lines: vec![text.into()],
        }
    }

    /// A multi-line reply: `first`, the `body` lines as given, and `last`.
    pub fn multi(
        code: u16,
        first: impl Into<String>,
        body: Vec<String>,
        last: impl Into<String>,
    ) -> Self {
        let mut lines = vec![first.into()];
        lines.extend(body);
        lines.push(last.into());
        Reply { code, lines }
    }

    /// 1xx: the action started; another reply follows.
    pub fn is_preliminary(&self) -> bool {
        (100..200).contains(&self.code)
    }

    /// 2xx: the action completed.
    pub fn is_success(&self) -> bool {
        (200..300).contains(&self.code)
    }

    /// 3xx: more information is needed.
    pub fn is_intermediate(&self) -> bool {
        (300..400).contains(&self.code)
    }

    /// All text lines joined with spaces, for error messages.
    pub fn text(&self) -> String {
        self.lines.join(" ")
    }

    /// The wire form, CRLF-terminated. Line breaks inside a text line are replaced so a reply can
    /// never smuggle a second reply; a body line that would look like a final line is indented.
    pub fn encode(&self) -> Vec<u8> {
        let clean = |s: &str| s.replace(['\r', '\n'], " ");
        let mut out = String::new();
        let n = self.lines.len();
        for (i, line) in self.lines.iter().enumerate() {
            let line = clean(line);
            if n == 1 {
                out.push_str(&format!("{} {}\r\n", self.code, line));
            } else if i == 0 {
                out.push_str(&format!("{}-{}\r\n", self.code, line));
            } else if i == n - 1 {
                out.push_str(&format!("{} {}\r\n", self.code, line));
            } else if looks_like_final(&line) {
                out.push_str(&format!(" {line}\r\n"));
            } else {
                out.push_str(&line);
                out.push_str("\r\n");
            }
        }
        out.into_bytes()
    }
}

fn looks_like_final(line: &str) -> bool {
    let b = line.as_bytes();
    b.len() >= 3
        && b[..3].iter().all(u8::is_ascii_digit)
        && b.get(3).is_none_or(|c| *c == b' ' || *c == b'-')
}

impl fmt::Display for Reply {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.code, self.text())
    }
}

/// Why a line from a server is not part of a valid reply.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("malformed reply line: {0:?}")]
pub struct MalformedReply(pub String);

/// Most lines one reply may have: a server that sends an endless multi-line reply (a `FEAT`
/// that never ends) is not followed.
pub const MAX_REPLY_LINES: usize = 10_000;

/// Assembles replies from the lines a server sends (line endings removed).
#[derive(Debug, Default)]
pub struct ReplyParser {
    partial: Option<Reply>,
}

impl ReplyParser {
    /// Feeds one line; returns the reply it completes, if any.
    pub fn push_line(&mut self, line: &str) -> Result<Option<Reply>, MalformedReply> {
        if let Some(mut partial) = self.partial.take() {
            if partial.lines.len() >= MAX_REPLY_LINES {
                return Err(MalformedReply(format!(
                    "a reply of more than {MAX_REPLY_LINES} lines"
                )));
            }
            let prefix = format!("{} ", partial.code);
            if let Some(rest) = line.strip_prefix(&prefix) {
                partial.lines.push(rest.to_string());
                return Ok(Some(partial));
            }
            if line == partial.code.to_string() {
                partial.lines.push(String::new());
                return Ok(Some(partial));
            }
            partial.lines.push(line.to_string());
            self.partial = Some(partial);
            return Ok(None);
        }
        let bytes = line.as_bytes();
        if bytes.len() < 3 || !bytes[..3].iter().all(u8::is_ascii_digit) || bytes[0] == b'0' {
            return Err(MalformedReply(line.chars().take(80).collect()));
        }
        let code: u16 = line[..3].parse().map_err(|_| MalformedReply(line.into()))?;
        match bytes.get(3) {
            None => Ok(Some(Reply::new(code, ""))),
            Some(b' ') => Ok(Some(Reply::new(code, &line[4..]))),
            Some(b'-') => {
                self.partial = Some(Reply::new(code, &line[4..]));
                Ok(None)
            }
            Some(_) => Err(MalformedReply(line.chars().take(80).collect())),
        }
    }
}

/// Quotes a path for a `257` reply: enclosed in double quotes, inner quotes doubled.
pub fn quote_path(path: &str) -> String {
    format!("\"{}\"", path.replace('"', "\"\""))
}

/// Extracts the path from a `257` reply text (the inverse of [`quote_path`]).
pub fn unquote_path(text: &str) -> Option<String> {
    let mut chars = text[text.find('"')? + 1..].chars().peekable();
    let mut out = String::new();
    while let Some(c) = chars.next() {
        if c == '"' {
            if chars.peek() == Some(&'"') {
                chars.next();
            } else {
                return Some(out);
            }
        }
        out.push(c);
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn parse_all(wire: &[u8]) -> Vec<Reply> {
        let text = String::from_utf8(wire.to_vec()).unwrap();
        let mut p = ReplyParser::default();
        text.strip_suffix("\r\n")
            .unwrap()
            .split("\r\n")
            .filter_map(|l| p.push_line(l).unwrap())
            .collect()
    }

    #[test]
    fn an_endless_multiline_reply_is_refused() {
        let mut p = ReplyParser::default();
        assert_eq!(p.push_line("211-Features:").unwrap(), None);
        let mut refused = false;
        for _ in 0..MAX_REPLY_LINES + 1 {
            match p.push_line(" FEATURE") {
                Ok(None) => {}
                Ok(Some(r)) => panic!("{r}"),
                Err(_) => {
                    refused = true;
                    break;
                }
            }
        }
        assert!(refused);
    }

    #[test]
    fn multiline_wire_form() {
        let r = Reply::multi(
            211,
            "Features:",
            vec![" SIZE".into(), "200 trap".into()],
            "End",
        );
        assert_eq!(
            String::from_utf8(r.encode()).unwrap(),
            "211-Features:\r\n SIZE\r\n 200 trap\r\n211 End\r\n"
        );
    }

    #[test]
    fn newline_in_text_cannot_forge_a_reply() {
        let r = Reply::new(550, "no such file: a\r\n226 ok");
        assert_eq!(parse_all(&r.encode()).len(), 1);
    }

    #[test]
    fn path_quoting() {
        assert_eq!(quote_path("/a \"b\""), "\"/a \"\"b\"\"\"");
        assert_eq!(
            unquote_path("\"/a \"\"b\"\"\" is current"),
            Some("/a \"b\"".into())
        );
        assert_eq!(unquote_path("no quotes"), None);
    }

    proptest! {
        #[test]
        fn encode_then_parse_roundtrips(code in 100u16..600, lines in proptest::collection::vec("[ -~]{0,30}", 1..5)) {
            let r = Reply { code, lines };
            let parsed = parse_all(&r.encode());
            prop_assert_eq!(parsed.len(), 1);
            prop_assert_eq!(parsed[0].code, code);
            prop_assert_eq!(parsed[0].lines.len(), r.lines.len());
        }

        #[test]
        fn parser_never_panics(lines in proptest::collection::vec("\\PC{0,20}", 0..10)) {
            let mut p = ReplyParser::default();
            for l in &lines {
                let _ = p.push_line(l);
            }
        }

        #[test]
        fn quote_roundtrip(path in "\\PC{0,30}") {
            prop_assert_eq!(unquote_path(&quote_path(&path)), Some(path));
        }
    }
}
