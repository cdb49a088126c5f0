//! The dynamic-buffer extension of drsFTP on the control channel, negotiated so that stock
//! clients never see it:
//!
//! - `FEAT` lists ` DRS` (and GridFTP's ` SBUF`).
//! - `OPTS DRS ON` asks the server for informational `126 SBUF <bytes>` replies whenever it
//!   receives data and its receive buffer changes; `OPTS DRS OFF` stops them.
//!   `OPTS DRS Tuning=<mode>` picks the server's tuning mode for the session. Items combine with
//!   `;`: `OPTS DRS ON;Tuning=drs`.
//! - `SBUF <bytes>` during a transfer tells the server the client's buffer (the server's send
//!   buffer may follow) and is answered at once with `200 SBUF <server's buffer>`; its round
//!   trip is drsFTP's RTT probe.

/// A parsed `OPTS DRS` argument.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct DrsOpts {
    /// `ON`/`OFF`: whether the client wants `126 SBUF` replies.
    pub notify: Option<bool>,
    /// `Tuning=<mode>`: the server's tuning mode for this session (checked by the caller).
    pub tuning: Option<String>,
}

impl DrsOpts {
    /// Parses the text after `OPTS DRS`.
    pub fn parse(s: &str) -> Result<DrsOpts, String> {
        let mut o = DrsOpts::default();
        for item in s.split(';').map(str::trim).filter(|i| !i.is_empty()) {
            match item.split_once('=') {
                None if item.eq_ignore_ascii_case("on") => o.notify = Some(true),
                None if item.eq_ignore_ascii_case("off") => o.notify = Some(false),
                Some((k, v)) if k.trim().eq_ignore_ascii_case("tuning") && !v.trim().is_empty() => {
                    o.tuning = Some(v.trim().to_string())
                }
                _ => return Err(format!("unknown DRS option {item:?}")),
            }
        }
        if o == DrsOpts::default() {
            return Err("OPTS DRS needs ON, OFF or Tuning=<mode>".into());
        }
        Ok(o)
    }
}

impl std::fmt::Display for DrsOpts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("DRS ")?;
        let mut items = Vec::new();
        if let Some(n) = self.notify {
            items.push(if n {
                "ON".to_string()
            } else {
                "OFF".to_string()
            });
        }
        if let Some(t) = &self.tuning {
            items.push(format!("Tuning={t}"));
        }
        f.write_str(&items.join(";"))
    }
}

/// The text of a `126` or `200` buffer reply: `SBUF <bytes>`.
pub fn sbuf_text(bytes: u64) -> String {
    format!("SBUF {bytes}")
}

/// The size in a reply text written by [`sbuf_text`].
pub fn parse_sbuf_text(text: &str) -> Option<u64> {
    let rest = text.trim().strip_prefix("SBUF")?;
    rest.split_whitespace().next()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn parses_options() {
        assert_eq!(
            DrsOpts::parse("on;Tuning=drs"),
            Ok(DrsOpts {
                notify: Some(true),
                tuning: Some("drs".into())
            })
        );
        assert_eq!(DrsOpts::parse("OFF").map(|o| o.notify), Ok(Some(false)));
        assert!(DrsOpts::parse("").is_err());
        assert!(DrsOpts::parse("ON;Turbo=1").is_err());
        assert!(DrsOpts::parse("Tuning=").is_err());
    }

    proptest! {
        #[test]
        fn options_roundtrip(notify in proptest::option::of(any::<bool>()), t in "[a-z:0-9-]{1,12}") {
            let o = DrsOpts { notify, tuning: Some(t) };
            let text = o.to_string();
            prop_assert_eq!(DrsOpts::parse(text.trim_start_matches("DRS ")), Ok(o));
        }

        #[test]
        fn sbuf_text_roundtrips(n in any::<u64>()) {
            prop_assert_eq!(parse_sbuf_text(&sbuf_text(n)), Some(n));
        }

        #[test]
        fn parsers_never_panic(s in ".{0,40}") {
            let _ = DrsOpts::parse(&s);
            let _ = parse_sbuf_text(&s);
        }
    }
}
