//! What the control connection carries while a transfer runs, besides its final reply: the
//! answers to what this end asked (`SBUF` probes, `OPTS DRS Paced=` notices) and the server's
//! `126` announcements, all handed to the transfer's conductor.

use fatpipe_net::Conductor;
use fatpipe_proto::drs::{parse_paced_text, parse_sbuf_text};
use fatpipe_proto::Reply;
use std::collections::VecDeque;
use std::time::Instant;

/// What the control thread said to the server during a transfer and awaits answers to.
#[derive(Default)]
pub(super) struct Asked {
    /// `SBUF` probes, when each was sent.
    pub(super) probes: VecDeque<Instant>,
    /// `OPTS DRS Paced=` notices.
    pub(super) notices: usize,
}

impl Asked {
    /// What was asked and is not answered yet when the transfer ends.
    pub(super) fn unanswered(&self) -> usize {
        self.probes.len() + self.notices
    }
}

/// Whether `r` answers an `SBUF` probe or an `OPTS DRS Paced=` notice (what a transfer's
/// control thread asks).
pub(super) fn is_drs_answer(r: &Reply) -> bool {
    let text = r.text();
    r.code == 200 && (parse_sbuf_text(&text).is_some() || text.starts_with("OPTS DRS"))
}

/// Takes a reply that came while a transfer ran: the server's `126 SBUF` and `126 PACED`
/// announcements and the answer to an `SBUF` probe (its round trip timed from when it was
/// sent) go to the conductor; the answer to an `OPTS DRS Paced=`, markers (`111`, `112`) and
/// other preliminary replies are skipped; anything else is the transfer's final reply.
pub(super) fn take_reply(conductor: &Conductor, asked: &mut Asked, r: Reply) -> Option<Reply> {
    let text = r.text();
    match (r.code, parse_sbuf_text(&text)) {
        (126, Some(n)) => {
            conductor.on_peer_buffer(n);
        }
        (200, Some(n)) if !asked.probes.is_empty() => {
            if let Some(sent) = asked.probes.pop_front() {
                conductor.on_probe_rtt(sent.elapsed());
            }
            conductor.on_peer_buffer(n);
        }
        (200, None) if asked.notices > 0 && text.starts_with("OPTS DRS") => {
            asked.notices -= 1;
        }
        (126, None) => {
            if let Some(cc) = parse_paced_text(&text) {
                conductor.on_peer_paces(cc);
            }
        }
        _ if r.is_preliminary() => {}
        _ => return Some(r),
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use fatpipe_proto::drs::sbuf_text;

    #[test]
    fn answers_to_probes_and_notices_are_told_from_other_replies() {
        assert!(is_drs_answer(&Reply::new(200, sbuf_text(4 << 20))));
        assert!(is_drs_answer(&Reply::new(200, "OPTS DRS Paced=bbr")));
        assert!(!is_drs_answer(&Reply::new(126, sbuf_text(4 << 20))));
        assert!(!is_drs_answer(&Reply::new(200, "OPTS Command Successful.")));
        assert!(!is_drs_answer(&Reply::new(213, "00ff")));
    }
}
