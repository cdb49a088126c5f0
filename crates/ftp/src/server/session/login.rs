//! Logging in: `USER`, `PASS` (checked on the password threads, within the per-address
//! limits), and how long a session may wait before and after it.

use super::{Flow, Session};
use crate::server::auth::{Anonymous, Login};
use fatpipe_proto::{Reply, VPath};
use std::time::Instant;

/// Who is logging in on a session (`USER`), who logged in (`PASS`), and how often a
/// password was wrong.
#[derive(Default)]
pub(super) struct Account {
    /// The name `USER` gave.
    pub(super) user: Option<String>,
    /// The login the server took.
    pub(super) login: Option<Login>,
    /// Wrong passwords so far.
    pub(super) failures: u32,
}

impl Session {
    /// `USER`: remembers the name; only a server that takes anonymous logins says so.
    pub(super) fn user(&mut self, name: String) -> Reply {
        self.account.login = None;
        let anonymous = name.eq_ignore_ascii_case("anonymous") || name.eq_ignore_ascii_case("ftp");
        let text = if anonymous && self.shared.config.anonymous != Anonymous::Off {
            "Anonymous login ok, send any password".to_string()
        } else {
            format!("Password required for {name}")
        };
        self.account.user = Some(name);
        Reply::new(331, text)
    }

    /// How long the session waits for the next command, and what it says when that runs out:
    /// the idle timeout once logged in; before, what is left of the login timeout, counted from
    /// the connection (commands do not extend it: nobody holds a slot without logging in).
    pub(super) fn patience(&self) -> (std::time::Duration, String) {
        let c = &self.shared.config;
        if self.account.login.is_some() {
            let why = format!(
                "Idle for {} s, closing control connection",
                c.idle_timeout.as_secs()
            );
            return (c.idle_timeout, why);
        }
        let left = c.login_timeout.saturating_sub(self.connected.elapsed());
        let why = format!(
            "No login within {} s, closing control connection",
            c.login_timeout.as_secs()
        );
        (left.min(c.idle_timeout), why)
    }

    pub(super) fn login(&self) -> Result<&Login, Reply> {
        self.account
            .login
            .as_ref()
            .ok_or_else(|| Reply::new(530, "Please log in with USER and PASS"))
    }

    pub(super) fn writable(&self) -> Result<(), Reply> {
        if self.login()?.writable {
            Ok(())
        } else {
            Err(Reply::new(
                550,
                "Permission denied: this session is read-only",
            ))
        }
    }

    pub(super) async fn pass(&mut self, password: &str) -> Result<Flow, Reply> {
        if self.account.login.is_some() {
            return Err(Reply::new(503, "Already logged in"));
        }
        let user = self
            .account
            .user
            .take()
            .ok_or_else(|| Reply::new(503, "Login with USER first"))?;
        let ip = self.peer.ip();
        if !self.shared.hosts().may_try(ip, Instant::now()) {
            tracing::warn!(session = self.id, peer = %self.peer, "too many failed logins from this address");
            self.send(Reply::new(
                421,
                "Too many failed logins from your address, try again in a minute",
            ));
            return Ok(Flow::Close);
        }
        let checked = match self.shared.verifier.check(&user, password).await {
            Ok(login) => login,
            Err(busy) => {
                tracing::warn!(session = self.id, ?busy, "password checks are saturated");
                self.send(Reply::new(421, "Too many logins at once, try again later"));
                return Ok(Flow::Close);
            }
        };
        match checked {
            Some(login) => {
                if self.slot.is_none() {
                    self.slot = self.shared.logged_in(self.id);
                    if self.slot.is_none() {
                        tracing::info!(session = self.id, "refused: all sessions taken");
                        self.send(Reply::new(
                            421,
                            format!(
                                "Too many sessions ({} logged in already), try again later",
                                self.shared.config.max_sessions
                            ),
                        ));
                        return Ok(Flow::Close);
                    }
                }
                tracing::info!(session = self.id, user = %login.user, writable = login.writable, "logged in");
                self.account.login = Some(login);
                self.cwd = VPath::root();
                self.send(Reply::new(230, "Login successful"));
                Ok(Flow::Continue)
            }
            None => {
                self.account.failures += 1;
                self.shared.hosts().failed(ip, Instant::now());
                tracing::warn!(session = self.id, peer = %self.peer, %user, "login failed");
                tokio::time::sleep(self.shared.config.login_failure_delay).await;
                if self.account.failures >= self.shared.config.max_login_failures {
                    self.send(Reply::new(421, "Too many failed logins, closing"));
                    return Ok(Flow::Close);
                }
                Err(Reply::new(530, "Login incorrect"))
            }
        }
    }
}
