//! Logging in: `USER`, `PASS` and `FEAT` in one write, and what a refusal means for the user.

use super::{Connection, Credentials};
use anyhow::{anyhow, bail};
use fatpipe_proto::{Command, Reply};
use std::time::Instant;

impl Connection {
    /// Logs in and reads the server's features: `USER`, `PASS` and `FEAT` in one write (one
    /// round trip, not three). A failed login says what to change (`secured`: the session is
    /// already TLS). The round trip is timed on `USER`'s reply.
    pub(super) fn log_in(&mut self, creds: &Credentials, secured: bool) -> anyhow::Result<()> {
        let r = self.login_reply(creds)?;
        if !r.is_success() {
            let said = r.to_string().to_ascii_lowercase();
            let fix = if !secured && ["encrypt", "tls", "ssl"].iter().any(|w| said.contains(w)) {
                "the server wants TLS first: use --tls auto (the default) or --tls require"
            } else if creds.user == "anonymous" {
                "the server takes no anonymous logins: name a user in the URL (ftp://USER@host/…)"
            } else {
                "check the user name and the password"
            };
            bail!(
                "login as {} failed: {} said {r}; {fix}",
                creds.user,
                self.peer
            );
        }
        let feat = self.read_reply()?;
        tracing::debug!("FEAT -> {feat}");
        if feat.is_success() {
            // A one-line 211 lists none.
            let listed = feat.lines.get(1..feat.lines.len().saturating_sub(1));
            self.features = listed
                .unwrap_or_default()
                .iter()
                .map(|l| l.trim().to_ascii_uppercase())
                .collect();
        }
        Ok(())
    }

    /// Sends `USER`, `PASS` and `FEAT` in one write; the login's answer: `USER`'s when it was
    /// not 331, else `PASS`'s (after a 230 to `USER`, `PASS`'s 503 means nothing).
    fn login_reply(&mut self, creds: &Credentials) -> anyhow::Result<Reply> {
        let mut wire = Vec::new();
        for cmd in [
            Command::User(creds.user.clone()),
            Command::Pass(creds.password.clone()),
            Command::Feat,
        ] {
            wire.extend(cmd.to_wire().map_err(|e| anyhow!("{}", e.message))?);
        }
        let sent = Instant::now();
        self.write_commands(&wire)?;
        let user = self.read_reply()?;
        self.timed(sent.elapsed());
        tracing::debug!("USER {} -> {user}", creds.user);
        if !(user.is_intermediate() || user.is_success()) {
            return Ok(user);
        }
        let pass = self.read_reply()?;
        tracing::debug!("PASS **** -> {pass}");
        Ok(if user.is_success() { user } else { pass })
    }
}

#[cfg(test)]
mod tests {
    use super::super::fake_server::{fake_server, take};
    use super::super::{Connection, Credentials, TlsMode, TlsPolicy};
    use std::io::Write;
    use std::time::Duration;

    #[test]
    fn a_feat_reply_of_one_line_lists_no_features() {
        let (port, server) = fake_server(|r, w| {
            w.write_all(b"220 hi\r\n").unwrap();
            take(r, w, 3, "331 pass\r\n230 in\r\n211 No features\r\n")
        });
        let off = TlsPolicy::new(TlsMode::Off, None);
        let creds = Credentials::anonymous();
        let c = Connection::open("127.0.0.1", port, &creds, Duration::from_secs(5), &off);
        assert!(!c.unwrap().has_feature("MDTM"));
        assert_eq!(server.join().unwrap()[2], "FEAT");
    }
}
