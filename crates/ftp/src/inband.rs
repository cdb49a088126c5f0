//! The drsFTP messages both ends exchange while a transfer runs, relayed in one place: what a
//! transfer's core tells its peer ([`Told`]) as each end writes it (the client sends commands,
//! the server `126` replies), and what the peer said ([`Heard`]) read from either and handed
//! to the transfer's conductor. The wire's words are `fatpipe_proto::drs`'s.

use fatpipe_net::conductor::Told;
use fatpipe_net::Conductor;
use fatpipe_proto::drs::{paced_text, parse_paced_text, parse_sbuf_text, sbuf_text, DrsOpts};
use fatpipe_proto::{Command, Reply};
use fatpipe_tune::PacedBy;

/// What the peer said of its side of a running transfer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Heard {
    /// Its buffer, bytes (`SBUF n`, `126 SBUF n`).
    Buffer(u64),
    /// What paces its sending connections (`OPTS DRS Paced=cc`, `126 PACED cc`).
    Paced(PacedBy),
}

impl Heard {
    /// What a client's command says, if it is one of these (an `OPTS DRS` that sets anything
    /// besides `Paced` is not).
    pub fn from_command(c: &Command) -> Option<Heard> {
        match c {
            Command::Sbuf(n) => Some(Heard::Buffer(*n)),
            Command::Opts(opt) => {
                let value = opt
                    .strip_prefix("DRS ")
                    .or_else(|| opt.strip_prefix("drs "))?;
                let o = DrsOpts::parse(value).ok()?;
                let only = DrsOpts {
                    paced: o.paced.clone(),
                    ..DrsOpts::default()
                };
                let paced = (o == only).then_some(o.paced).flatten()?;
                Some(Heard::Paced(PacedBy::from(paced.as_str())))
            }
            _ => None,
        }
    }

    /// What a server's announcement says, if it is one of these (`126 SBUF`, `126 PACED`).
    pub fn from_announcement(r: &Reply) -> Option<Heard> {
        if r.code != 126 {
            return None;
        }
        let text = r.text();
        parse_sbuf_text(&text)
            .map(Heard::Buffer)
            .or_else(|| parse_paced_text(&text).map(|w| Heard::Paced(PacedBy::from(w))))
    }

    /// Hands it to the transfer's `conductor`; a buffer returns this end's largest.
    pub fn deliver(&self, conductor: &Conductor) -> Option<u64> {
        match self {
            Heard::Buffer(n) => conductor.on_peer_buffer(*n),
            Heard::Paced(by) => {
                conductor.on_peer_paces(by);
                None
            }
        }
    }
}

/// What a client sends for what its transfer's core tells: `SBUF n` (answered, and timed as a
/// round trip), `OPTS DRS Paced=cc`.
pub fn client_command(t: &Told) -> Command {
    match t {
        Told::Buffer(n) => Command::Sbuf(*n),
        Told::Paced(by) => Command::Opts(format!("DRS Paced={by}")),
    }
}

/// The `126` a server sends for what its transfer's core tells, when its role has that to say:
/// a receiving end its buffer (the sender sizes its own to it), a sending end its pacing.
pub fn server_announcement(t: &Told, receiving: bool) -> Option<Reply> {
    match t {
        Told::Buffer(n) if receiving => Some(buffer_announcement(*n)),
        Told::Paced(by) if !receiving => Some(Reply::new(126, paced_text(&by.to_string()))),
        _ => None,
    }
}

/// A server's `126 SBUF n`: its buffer (also its peak, when a transfer ends).
pub fn buffer_announcement(bytes: u64) -> Reply {
    Reply::new(126, sbuf_text(bytes))
}

/// The server's answer to what a client said during a transfer: its own buffer (or the
/// client's, when it has no connection yet), or the notice repeated.
pub fn server_answer(h: &Heard, mine: Option<u64>) -> Reply {
    match h {
        Heard::Buffer(n) => Reply::new(200, sbuf_text(mine.unwrap_or(*n))),
        Heard::Paced(by) => Reply::new(200, format!("OPTS DRS Paced={by}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_one_end_writes_the_other_hears() {
        let bbr = PacedBy::Control(fatpipe_tune::CongestionControl::Bbr);
        for told in [
            Told::Buffer(4 << 20),
            Told::Paced(bbr),
            Told::Paced(PacedBy::Tcp),
        ] {
            let heard = match &told {
                Told::Buffer(n) => Heard::Buffer(*n),
                Told::Paced(by) => Heard::Paced(by.clone()),
            };
            // Client to server: the command.
            assert_eq!(
                Heard::from_command(&client_command(&told)),
                Some(heard.clone())
            );
            // Server to client: the 126, from the end whose role says it.
            let receiving = matches!(told, Told::Buffer(_));
            let r = server_announcement(&told, receiving).expect("announced");
            assert_eq!(Heard::from_announcement(&r), Some(heard));
            assert_eq!(server_announcement(&told, !receiving), None);
        }
    }

    #[test]
    fn other_lines_are_not_heard() {
        assert_eq!(Heard::from_command(&Command::Noop), None);
        // An OPTS DRS that sets more than the pacing is a setting, not a notice.
        let both = Command::Opts("DRS Paced=bbr;Tuning=drs".into());
        assert_eq!(Heard::from_command(&both), None);
        assert_eq!(
            Heard::from_announcement(&Reply::new(200, sbuf_text(5))),
            None
        );
        assert_eq!(Heard::from_announcement(&Reply::new(126, "other")), None);
        assert_eq!(
            server_answer(&Heard::Buffer(7), None).text(),
            sbuf_text(7),
            "the client's own size without a connection"
        );
    }
}
