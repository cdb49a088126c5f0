//! FTPS (RFC 4217): `AUTH TLS` secures the control connection, `PBSZ 0` and `PROT P|C` set the
//! data connections' protection; `CCC` is refused (the control channel stays encrypted). With
//! `--require-tls` nothing is logged in and no data moves in clear.

use super::{Flow, Session};
use fatpipe_net::admission::{Admission, Token};
use fatpipe_net::tls::{Secure, TlsReuse};
use fatpipe_proto::command::ProtLevel;
use fatpipe_proto::Reply;

/// FTPS on a session (RFC 4217): how its control connection was secured and how its data
/// connections will be.
pub(super) struct Security {
    /// `AUTH TLS`: the configurations the control connection was secured with and its data
    /// connections will be (one session cache: data connections resume the control's session).
    pub(super) tls: Option<fatpipe_net::tls::ServerTls>,
    /// `PBSZ` was sent (RFC 4217: before `PROT`).
    pub(super) pbsz: bool,
    /// `PROT`: the data connections' protection level.
    pub(super) prot: ProtLevel,
}

impl Security {
    /// A new session's: in clear.
    pub(super) fn clear() -> Security {
        Security {
            tls: None,
            pbsz: false,
            prot: ProtLevel::Clear,
        }
    }
}

impl Session {
    /// `AUTH TLS` (or `TLS-C`, `SSL`): `234`, then the handshake. A new security context
    /// starts a new login (RFC 2228): whoever logged in before must do it again.
    pub(super) async fn auth(&mut self, mechanism: &str) -> Result<Flow, Reply> {
        let Some(identity) = self.shared.config.tls.clone() else {
            return Err(Reply::new(
                534,
                "TLS is not available: this server has no certificate (--tls-cert)",
            ));
        };
        if !["TLS", "TLS-C", "SSL"]
            .iter()
            .any(|m| mechanism.eq_ignore_ascii_case(m))
        {
            return Err(Reply::new(
                504,
                format!("AUTH {mechanism} not understood: use AUTH TLS"),
            ));
        }
        if self.control.is_tls() {
            return Err(Reply::new(503, "The control connection already uses TLS"));
        }
        self.send(Reply::new(234, "AUTH TLS successful"));
        if self.flush().await.is_err() {
            return Ok(Flow::Close);
        }
        // A session cache and ticket key of the session's own: its data connections can
        // resume no other session's TLS session.
        let config = identity.config().for_session().map_err(|e| {
            tracing::warn!(session = self.id, "cannot set up TLS: {e}");
            Reply::new(431, "TLS is not available right now")
        })?;
        let (patience, _) = self.patience();
        if let Err(e) = self.control.secure(config.control.clone(), patience).await {
            tracing::info!(session = self.id, "TLS handshake failed: {e}");
            return Ok(Flow::Close);
        }
        tracing::debug!(session = self.id, "control connection secured");
        self.security.tls = Some(config);
        self.account.user = None;
        self.account.login = None;
        Ok(Flow::Continue)
    }

    /// `PBSZ`: 0 is the only size under TLS; anything else is answered with `PBSZ=0`.
    pub(super) fn pbsz(&mut self) -> Result<Reply, Reply> {
        if self.security.tls.is_none() {
            return Err(Reply::new(503, "PBSZ needs AUTH TLS first"));
        }
        self.security.pbsz = true;
        Ok(Reply::new(200, "PBSZ=0"))
    }

    /// `PROT`: `P` puts TLS on every data connection, `C` takes it off (refused under
    /// `--require-tls`); TLS offers neither `S` nor `E`.
    pub(super) fn prot(&mut self, level: ProtLevel) -> Result<Reply, Reply> {
        if self.security.tls.is_none() {
            return Err(Reply::new(503, "PROT needs AUTH TLS first"));
        }
        if !self.security.pbsz {
            return Err(Reply::new(503, "PROT needs PBSZ 0 first"));
        }
        match level {
            ProtLevel::Private if self.settings.udp.is_some() => Err(Reply::new(
                534,
                "The UDP data channel cannot be protected: SITE SETNETSTACK tcp first",
            )),
            ProtLevel::Private => {
                // Connections kept from a transfer under the other level are not used.
                self.kept = None;
                self.security.prot = level;
                Ok(Reply::new(200, "Protection level set to Private"))
            }
            ProtLevel::Clear if self.shared.config.require_tls => Err(Reply::new(
                534,
                "This server moves no data in clear (--require-tls): use PROT P",
            )),
            ProtLevel::Clear => {
                self.kept = None;
                self.security.prot = level;
                Ok(Reply::new(200, "Protection level set to Clear"))
            }
            ProtLevel::Safe | ProtLevel::Confidential => Err(Reply::new(
                536,
                format!("PROT {} is not supported with TLS", level.letter()),
            )),
        }
    }

    /// Refuses a login in clear on a server that requires TLS.
    pub(super) fn login_allowed(&self) -> Result<(), Reply> {
        if self.shared.config.require_tls && !self.control.is_tls() {
            return Err(Reply::new(
                530,
                "This server requires TLS: send AUTH TLS before logging in",
            ));
        }
        Ok(())
    }

    /// How the next data connections are secured: `None` in clear. Refuses data in clear on
    /// a server that requires TLS.
    pub(super) fn data_security(&self) -> Result<Option<Secure>, Reply> {
        match (&self.security.tls, self.security.prot) {
            (Some(config), ProtLevel::Private) => Ok(Some(Secure::Server {
                config: config.data.clone(),
                // The token proves a connection is the session's; without one, resuming the
                // control connection's TLS session does.
                must_resume: self.token.is_none()
                    && self.shared.config.tls_reuse == TlsReuse::Required,
            })),
            _ if self.shared.config.require_tls => Err(Reply::new(
                521,
                "Data connections must be protected on this server: PBSZ 0, then PROT P",
            )),
            _ => Ok(None),
        }
    }

    /// Whether this session may move data to or from hosts other than its client: only with
    /// `--allow-third-party`, only for named users.
    pub(super) fn third_party_allowed(&self) -> bool {
        let named = self
            .account
            .login
            .as_ref()
            .is_some_and(|l| l.user != "anonymous");
        self.shared.config.allow_third_party && named
    }

    /// Whether this session may move data to or from `host` when it is not its client: a
    /// public unicast address, or one in `--third-party-networks` (never this server's own
    /// loopback, private or link-local neighbours otherwise).
    pub(super) fn third_party(&self, host: std::net::IpAddr) -> bool {
        self.third_party_allowed() && self.shared.config.third_party_networks.allows(host)
    }

    /// Whose data connections this session takes: its client's, and under
    /// `--allow-third-party` the hosts a third-party copy may involve.
    pub(super) fn admission(&self) -> Admission {
        Admission {
            peer: self.peer.ip(),
            third_party: self
                .third_party_allowed()
                .then(|| self.shared.config.third_party_networks.clone()),
        }
    }

    /// `DTOK <hex>`: every data connection of the session from now on carries this token as
    /// its first bytes (inside TLS under `PROT P`); `DTOK NONE` ends that. Connections kept
    /// from earlier transfers were proved as they were made.
    pub(super) fn dtok(&mut self, token: Option<String>) -> Result<Reply, Reply> {
        let token = match token {
            Some(hex) => Some(
                Token::from_hex(&hex).ok_or_else(|| Reply::new(501, "DTOK needs 32 hex digits"))?,
            ),
            None => None,
        };
        if self.transfer.is_some() {
            return Err(Reply::new(503, "A transfer is in progress"));
        }
        self.token = token;
        Ok(Reply::new(
            200,
            match token {
                Some(_) => "Data connections must carry the token",
                None => "Data connections carry no token",
            },
        ))
    }

    /// The `FEAT` lines of FTPS, when the server has a certificate.
    pub(super) fn security_features(&self) -> Vec<String> {
        match self.shared.config.tls {
            Some(_) => vec!["AUTH TLS".into(), "PBSZ".into(), "PROT".into()],
            None => Vec::new(),
        }
    }
}
