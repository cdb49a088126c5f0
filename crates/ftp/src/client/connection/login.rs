//! Logging in. An anonymous login under `--tls auto` (and any under `--tls off`) reads the
//! server's features first (`FEAT` goes out with the connection's first segment) and asks for
//! TLS only where the server lists it; any other asks for TLS first. A session in clear then
//! sends `USER`, `PASS` and `FEAT` again (some servers list more once logged in) with its
//! first commands, in one write, and reads their answers first among theirs: a round trip
//! fewer than a login of its own. A TLS session logs in over TLS with `USER`, `PASS`, `FEAT`,
//! `PBSZ` and `PROT` in one write (features read in clear could have been changed on the
//! way). A failed login says what to change.

use super::pipeline::{Ahead, Want};
use super::{Connection, Credentials};
use anyhow::anyhow;
use fatpipe_proto::command::ProtLevel;
use fatpipe_proto::{Command, Reply};
use std::time::Instant;

/// A login sent with the session's first commands, its answer not read yet.
#[derive(Debug)]
pub(super) struct LoginAhead {
    /// Who logs in (what a refusal names).
    user: String,
    /// `USER`'s answer settled it (a `230`, or a refusal): `PASS`'s means nothing.
    settled: bool,
    /// When the connection was up, where the greeting is read with the login's answers: the
    /// greeting's time is the round trip.
    connected: Option<Instant>,
}

impl Connection {
    /// Sends `cmd` alone (before the greeting: with the connection's first segment); when it
    /// was sent.
    pub(super) fn send_alone(&mut self, cmd: &Command) -> anyhow::Result<Instant> {
        let wire = cmd.to_wire().map_err(|e| anyhow!("{}", e.message))?;
        let sent = Instant::now();
        self.write_commands(&wire)?;
        Ok(sent)
    }

    /// Reads the answer to a `FEAT` sent at `sent` (before the login): whether the server
    /// listed its features.
    pub(super) fn read_features(&mut self, sent: Instant) -> anyhow::Result<bool> {
        let feat = self.read_reply()?;
        self.timed(sent.elapsed());
        tracing::debug!("FEAT -> {feat}");
        Ok(self.take_features(&feat))
    }

    /// The features `feat` (a `FEAT` reply) lists, kept; whether it was a list.
    fn take_features(&mut self, feat: &Reply) -> bool {
        if !feat.is_success() {
            return false;
        }
        // A one-line 211 lists none.
        let listed = feat.lines.get(1..feat.lines.len().saturating_sub(1));
        self.features = listed
            .unwrap_or_default()
            .iter()
            .map(|l| l.trim().to_ascii_uppercase())
            .collect();
        true
    }

    /// Logs in with the session's first commands: `USER`, `PASS` and `FEAT` go out ahead of
    /// whatever is asked next, and their answers are read first among its; a refusal fails it
    /// (a session that must not take work it cannot do asks: [`Connection::confirm_login`]).
    pub(super) fn log_in_ahead(&mut self, creds: &Credentials) {
        // `FEAT` again: a server may list more once logged in (globus-gridftp-server lists
        // `CKSM` only then); what goes out with the login is chosen by the first list.
        let login = [
            Command::User(creds.user.clone()),
            Command::Pass(creds.password.clone()),
            Command::Feat,
        ];
        let ahead = login.into_iter().map(|cmd| Ahead {
            cmd,
            want: Want::Login,
        });
        self.pipe.ahead.splice(0..0, ahead);
        self.login = Some(LoginAhead {
            user: creds.user.clone(),
            settled: false,
            connected: None,
        });
    }

    /// Logs in with the first commands, as [`Connection::log_in_ahead`] does, before the
    /// greeting has come: its answer is read first among theirs, timed from now (the
    /// connection is up).
    pub(super) fn log_in_before_greeting(&mut self, creds: &Credentials) {
        self.pipe.owe(Ahead {
            cmd: Command::Noop,
            want: Want::Greeting,
        });
        self.log_in_ahead(creds);
        if let Some(l) = self.login.as_mut() {
            l.connected = Some(Instant::now());
        }
    }

    /// The greeting `r`, read as the first answer to the first commands: a refusal's error.
    pub(super) fn take_greeting(&mut self, r: &Reply) -> Option<anyhow::Error> {
        tracing::debug!("greeting: {r}");
        if let Some(at) = self.login.as_mut().and_then(|l| l.connected.take()) {
            self.timed(at.elapsed());
        }
        (!r.is_success()).then(|| anyhow!("{} refused the connection: {r}", self.peer))
    }

    /// Sends what was asked ahead now, with a login that waits to go out, and reads the
    /// answers: an error when the login was refused (a session that must not take work it
    /// cannot do).
    pub fn confirm_login(&mut self) -> anyhow::Result<()> {
        if self.login.is_none() {
            return Ok(());
        }
        self.send_ahead()?;
        let refused = self.take_owed()?;
        self.login = None;
        refused.map_or(Ok(()), Err)
    }

    /// The answer `r` to `USER`, `PASS` or `FEAT` sent ahead: a refusal's error.
    pub(super) fn take_login_reply(&mut self, cmd: &Command, r: &Reply) -> Option<anyhow::Error> {
        if *cmd == Command::Feat {
            self.take_features(r);
            return None;
        }
        let login = self.login.as_mut()?;
        let last = matches!(cmd, Command::Pass(_));
        let answer = match (last, login.settled) {
            (true, true) => None,
            (false, _) if r.is_intermediate() => None,
            _ if r.is_success() => Some(Ok(())),
            _ => Some(Err(())),
        };
        let user = login.user.clone();
        if answer.is_some() {
            login.settled = true;
        }
        if last {
            self.login = None;
        }
        match answer {
            Some(Err(())) => Some(self.login_refused(&user, r, false)),
            _ => None,
        }
    }

    /// Logs in and reads the server's features: `USER`, `PASS` and `FEAT` in one write (one
    /// round trip, not three), as a TLS session (`secured`: with `PBSZ 0` and `PROT P`, whose
    /// answer, or `PBSZ`'s where refused, comes back for [`Connection::protect_data`]) or one in
    /// clear whose server listed no features before the login. The round trip is timed on
    /// `USER`'s reply.
    pub(super) fn log_in(
        &mut self,
        creds: &Credentials,
        secured: bool,
    ) -> anyhow::Result<Option<Reply>> {
        let r = self.login_reply(creds, secured)?;
        if !r.is_success() {
            return Err(self.login_refused(&creds.user, &r, secured));
        }
        let feat = self.read_reply()?;
        tracing::debug!("FEAT -> {feat}");
        self.take_features(&feat);
        if !secured {
            return Ok(None);
        }
        let pbsz = self.read_reply()?;
        let prot = self.read_reply()?;
        tracing::debug!("PBSZ 0 -> {pbsz}; PROT P -> {prot}");
        Ok(Some(if pbsz.is_success() { prot } else { pbsz }))
    }

    /// What a refused login (`r`) says to the user (`secured`: the session is already TLS).
    fn login_refused(&self, user: &str, r: &Reply, secured: bool) -> anyhow::Error {
        let said = r.to_string().to_ascii_lowercase();
        let fix = if !secured && ["encrypt", "tls", "ssl"].iter().any(|w| said.contains(w)) {
            "the server wants TLS first: use --tls auto (the default) or --tls require"
        } else if user == "anonymous" {
            "the server takes no anonymous logins: name a user in the URL (ftp://USER@host/…)"
        } else {
            "check the user name and the password"
        };
        anyhow!("login as {user} failed: {} said {r}; {fix}", self.peer)
    }

    /// Sends `USER`, `PASS`, `FEAT` (and, `secured`, `PBSZ 0` and `PROT P`) in one write; the
    /// login's answer: `USER`'s when it was not 331, else `PASS`'s (after a 230 to `USER`,
    /// `PASS`'s 503 means nothing).
    fn login_reply(&mut self, creds: &Credentials, secured: bool) -> anyhow::Result<Reply> {
        let mut cmds = vec![
            Command::User(creds.user.clone()),
            Command::Pass(creds.password.clone()),
            Command::Feat,
        ];
        if secured {
            cmds.extend([Command::Pbsz(0), Command::Prot(ProtLevel::Private)]);
        }
        let mut wire = Vec::new();
        for cmd in cmds {
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
    use fatpipe_proto::Command;
    use std::io::{BufReader, Write};
    use std::net::TcpStream;
    use std::time::Duration;

    const FEATURES: &str = "211-Features:\r\n MDTM\r\n211 End\r\n";

    /// A session in clear with a server that greets and answers the first `FEAT` with `feat`,
    /// then runs `script`; the client runs `client` on the open connection. The lines the
    /// server read.
    fn session(
        feat: &'static str,
        script: impl FnOnce(&mut BufReader<TcpStream>, &mut TcpStream) -> Vec<String> + Send + 'static,
        client: impl FnOnce(Connection),
    ) -> Vec<String> {
        let (port, server) = fake_server(move |r, w| {
            w.write_all(b"220 hi\r\n").unwrap();
            let mut lines = take(r, w, 1, feat);
            lines.extend(script(r, w));
            lines
        });
        let off = TlsPolicy::new(TlsMode::Off, None);
        let creds = Credentials::anonymous();
        let c = Connection::open("127.0.0.1", port, &creds, Duration::from_secs(5), &off);
        client(c.unwrap());
        server.join().unwrap()
    }

    #[test]
    fn a_feat_reply_of_one_line_lists_no_features() {
        let got = session(
            "211 No features\r\n",
            |_, _| Vec::new(),
            |c| {
                assert!(!c.has_feature("MDTM"));
            },
        );
        assert_eq!(got, ["FEAT"]);
    }

    #[test]
    fn the_login_goes_out_with_the_first_command() {
        // The server answers the login only once the command behind it is in: a client that
        // waited for the login's answer first would wait here until the timeout.
        let script = |r: &mut _, w: &mut _| {
            let replies = format!("331 pass\r\n230 in\r\n{FEATURES}213 42\r\n");
            take(r, w, 4, &replies)
        };
        let got = session(FEATURES, script, |mut c| {
            assert!(
                c.has_feature("MDTM"),
                "the features are read before the login"
            );
            let size = c.command(&Command::Size("/f".into())).unwrap();
            assert_eq!(size.text(), "42");
        });
        let login = ["USER anonymous", "PASS fatpipe@", "FEAT"];
        assert_eq!(got, [&["FEAT"][..], &login, &["SIZE /f"]].concat());
    }

    /// The error of a session whose server answers its login and first command (`SIZE`, or
    /// with `confirm` none: the login is confirmed) with `replies`.
    fn refused(replies: &'static str, confirm: bool) -> String {
        let lines = if confirm { 3 } else { 4 };
        let mut said = String::new();
        session(
            FEATURES,
            move |r, w| take(r, w, lines, replies),
            |mut c| {
                let e = match confirm {
                    true => c.confirm_login().unwrap_err(),
                    false => c.command(&Command::Size("/f".into())).unwrap_err(),
                };
                said = format!("{e:#}");
            },
        );
        said
    }

    #[test]
    fn a_login_refused_with_the_first_command_fails_it_and_says_why() {
        let said = refused(
            "331 pass\r\n530 Login incorrect\r\n530 No\r\n530 No\r\n",
            false,
        );
        assert!(said.contains("login as anonymous failed"), "{said}");
        assert!(said.contains("no anonymous logins"), "{said}");
        // A server that closes the connection after the refusal (vsftpd does) is explained by
        // the refusal, not by the closed connection.
        let said = refused("331 pass\r\n530 Login incorrect\r\n", false);
        assert!(said.contains("login as anonymous failed"), "{said}");
        // A session that must not take work it cannot do asks at once.
        let said = refused("530 No\r\n503 Login with USER first\r\n530 No\r\n", true);
        assert!(said.contains("login as anonymous failed"), "{said}");
    }

    #[test]
    fn a_session_that_knows_the_features_logs_in_before_the_greeting_comes() {
        // Greets only once the first command is in: a client that waited for the greeting
        // (or sent FEAT first) would wait here until the timeout.
        let (port, server) = fake_server(|r, w| {
            let replies = format!("220 hi\r\n331 pass\r\n230 in\r\n{FEATURES}213 42\r\n");
            take(r, w, 4, &replies)
        });
        let off = TlsPolicy::new(TlsMode::Off, None);
        let creds = Credentials::anonymous();
        let known = ["MDTM".to_string()];
        let t = Duration::from_secs(5);
        let open = |port| Connection::open_known("127.0.0.1", port, &creds, t, &off, Some(&known));
        let mut c = open(port).unwrap();
        let size = c.command(&Command::Size("/f".into())).unwrap();
        assert_eq!(size.text(), "42");
        assert!(
            c.round_trip().is_some(),
            "the greeting times the round trip"
        );
        let login = ["USER anonymous", "PASS fatpipe@", "FEAT"];
        assert_eq!(server.join().unwrap(), [&login[..], &["SIZE /f"]].concat());
        // A server that turns the session away says so.
        let (port, server) = fake_server(|r, w| take(r, w, 4, "421 Too many sessions\r\n"));
        let e = open(port)
            .unwrap()
            .command(&Command::Size("/f".into()))
            .unwrap_err();
        assert!(
            format!("{e:#}").contains("refused the connection: 421"),
            "{e:#}"
        );
        server.join().unwrap();
    }

    #[test]
    fn a_server_that_lists_no_features_before_the_login_is_asked_after_it() {
        let login = |r: &mut _, w: &mut _| {
            take(
                r,
                w,
                3,
                "331 pass\r\n230 in\r\n211-Features:\r\n MDTM\r\n211 End\r\n",
            )
        };
        let got = session("530 Please login with USER and PASS\r\n", login, |c| {
            assert!(c.has_feature("MDTM"));
        });
        assert_eq!(got, ["FEAT", "USER anonymous", "PASS fatpipe@", "FEAT"]);
    }
}
