//! The dynamic-buffer extension of drsFTP on the control channel, negotiated so that stock
//! clients never see it:
//!
//! - `FEAT` lists ` DRS` (and GridFTP's ` SBUF`).
//! - `OPTS DRS ON` asks the server for informational `126 SBUF <bytes>` replies whenever it
//!   receives data and its receive buffer changes; `OPTS DRS OFF` stops them.
//!   `OPTS DRS Tuning=<mode>` picks the server's tuning mode for the session, `Pacing=<law>`
//!   how its sending connections are paced, `CC=<name>` their congestion control. Items
//!   combine with `;`: `OPTS DRS ON;Tuning=drs;Pacing=adaptive;CC=bbr`.
//!   `Hash=off` tells the server that the client will not ask for the checksum of the files
//!   it moves (`--no-verify`, a copy to a device): the server stops hashing them beside their
//!   transfers; `Hash=xxh3` (the default) asks for that again.
//! - `OPTS DRS Paced=<name>` during an upload tells the server that the client's sending
//!   connections run a congestion control that paces itself (bbr); `126 PACED <name>: …`
//!   tells a client the same of a download's server.
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
    /// `Pacing=<law>`: how the server paces what it sends (checked by the caller).
    pub pacing: Option<String>,
    /// `CC=<name>`: the congestion control of what the server sends (checked by the caller).
    pub cc: Option<String>,
    /// `Paced=<name>`: the client's sending connections are paced (by this self-pacing
    /// control, or `tcp`).
    pub paced: Option<String>,
    /// `Hash=xxh3|off`: whether the server hashes each whole file it moves beside its
    /// transfer, for the checksum the client asks next (checked by the caller).
    pub hash: Option<String>,
}

impl DrsOpts {
    /// Parses the text after `OPTS DRS`.
    pub fn parse(s: &str) -> Result<DrsOpts, String> {
        let mut o = DrsOpts::default();
        for item in s.split(';').map(str::trim).filter(|i| !i.is_empty()) {
            match item.split_once('=') {
                None if item.eq_ignore_ascii_case("on") => o.notify = Some(true),
                None if item.eq_ignore_ascii_case("off") => o.notify = Some(false),
                Some((k, v)) if !v.trim().is_empty() => {
                    let slot = match k.trim().to_ascii_lowercase().as_str() {
                        "tuning" => &mut o.tuning,
                        "pacing" => &mut o.pacing,
                        "cc" => &mut o.cc,
                        "paced" => &mut o.paced,
                        "hash" => &mut o.hash,
                        _ => return Err(format!("unknown DRS option {item:?}")),
                    };
                    *slot = Some(v.trim().to_string());
                }
                _ => return Err(format!("unknown DRS option {item:?}")),
            }
        }
        if o == DrsOpts::default() {
            return Err("OPTS DRS needs ON, OFF, Tuning=, Pacing=, CC=, Paced= or Hash=".into());
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
        for (k, v) in [
            ("Tuning", &self.tuning),
            ("Pacing", &self.pacing),
            ("CC", &self.cc),
            ("Paced", &self.paced),
            ("Hash", &self.hash),
        ] {
            if let Some(v) = v {
                items.push(format!("{k}={v}"));
            }
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

/// The text of the `126` reply a sending fatpipe server gives a drsFTP client once its data
/// connections are paced (by a congestion control that paces itself, bbr, or by TCP, `tcp`,
/// for streams started together): `PACED <name>: …`. The client's receiving laws then read
/// packet spacing as the sender's pacing rate.
pub fn paced_text(cc: &str) -> String {
    format!("PACED {cc}: the sender paces its data connections")
}

/// The congestion control named in a reply text written by [`paced_text`].
pub fn parse_paced_text(text: &str) -> Option<&str> {
    let rest = text.trim().strip_prefix("PACED ")?;
    let cc = rest.split(':').next()?.trim();
    (!cc.is_empty() && !cc.contains(char::is_whitespace)).then_some(cc)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn paced_text_names_the_control() {
        assert_eq!(parse_paced_text(&paced_text("bbr")), Some("bbr"));
        assert_eq!(parse_paced_text("PACED : x"), None);
        assert_eq!(parse_paced_text("SBUF 5"), None);
        assert_eq!(parse_paced_text("PACED two words: x"), None);
    }

    #[test]
    fn parses_options() {
        assert_eq!(
            DrsOpts::parse("on;Tuning=drs"),
            Ok(DrsOpts {
                notify: Some(true),
                tuning: Some("drs".into()),
                ..DrsOpts::default()
            })
        );
        let o = DrsOpts::parse("Pacing=adaptive; cc=bbr").unwrap();
        assert_eq!(
            (o.pacing.as_deref(), o.cc.as_deref()),
            (Some("adaptive"), Some("bbr"))
        );
        assert_eq!(DrsOpts::parse("OFF").map(|o| o.notify), Ok(Some(false)));
        assert!(DrsOpts::parse("").is_err());
        assert!(DrsOpts::parse("ON;Turbo=1").is_err());
        assert!(DrsOpts::parse("Tuning=").is_err());
        assert_eq!(
            DrsOpts::parse("Hash=off").map(|o| o.hash),
            Ok(Some("off".into()))
        );
    }

    proptest! {
        #[test]
        fn options_roundtrip(
            notify in proptest::option::of(any::<bool>()),
            t in "[a-z:0-9-]{1,12}",
            pacing in proptest::option::of("[a-z]{1,8}"),
            cc in proptest::option::of("[a-z0-9_]{1,8}"),
            paced in proptest::option::of("[a-z0-9_]{1,8}"),
            hash in proptest::option::of("[a-z0-9]{1,8}"),
        ) {
            let o = DrsOpts { notify, tuning: Some(t), pacing, cc, paced, hash };
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
