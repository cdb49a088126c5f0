//! Who a request comes from and what it may do: HTTP Basic against the server's accounts (the
//! FTP server's, checked on the same bounded pool of argon2 threads), a bearer token from a
//! trusted issuer, a client certificate (or proxy) whose subject the grid-mapfile maps to an
//! account, or anonymous when the server allows it. Credentials in the request win over the
//! connection's certificate.

use crate::gridmap::GridMap;
use crate::token::{Issuers, Scopes, TokenError};
use base64::Engine;
use fatpipe_ftp::server::auth::{Anonymous, Login, Users};
use fatpipe_ftp::server::verifier::Verifier;
use fatpipe_proto::VPath;
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

pub use crate::op::Op;

/// What an authenticated request may do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Grant {
    /// An account (or anonymous): reads anywhere, writes anywhere if writable.
    Account(Login),
    /// A bearer token: what its scopes say, where they say.
    Token(Scopes),
}

impl Grant {
    /// Whether `op` on `path` is allowed.
    pub fn allows(&self, op: Op, path: &VPath) -> bool {
        match self {
            Grant::Account(l) => l.writable || matches!(op, Op::Read | Op::Stat),
            Grant::Token(s) => s.allows(op, path),
        }
    }

    /// Whether nobody in particular: a request without credentials on an anonymous server.
    pub fn is_anonymous(&self) -> bool {
        matches!(self, Grant::Account(l) if l.user == ANONYMOUS)
    }

    /// Who, for the logs.
    pub fn who(&self) -> String {
        match self {
            Grant::Account(l) => l.user.clone(),
            Grant::Token(s) => format!("token:{}", s.subject),
        }
    }
}

/// Why a request is not authenticated: 401, with the reason.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// No credentials, and anonymous access is off.
    #[error("authentication required")]
    Missing,
    /// Wrong name or password.
    #[error("wrong user name or password")]
    BadPassword,
    /// A token that does not verify.
    #[error("{0}")]
    BadToken(TokenError),
    /// Credentials in a form not understood.
    #[error("unsupported authorization: {0}")]
    Unsupported(String),
    /// The password checkers are all busy: try again.
    #[error("too many logins at once; try again")]
    Busy,
    /// The client's certificate chain did not verify.
    #[error("client certificate refused: {0}")]
    BadCertificate(String),
    /// A verified certificate whose subject the grid-mapfile does not name.
    #[error("client certificate {0} maps to no account (not in the grid-mapfile)")]
    Unmapped(String),
}

/// What the connection's client certificate showed: whom it speaks for (its end-entity
/// certificate's subject), or why it was refused.
pub type Certified = Result<String, String>;

/// The account name of anonymous requests (as FTP's anonymous logins have it).
const ANONYMOUS: &str = "anonymous";

/// How long a checked password is remembered (Basic sends it with every request; argon2
/// takes tens of milliseconds a check).
const REMEMBER: Duration = Duration::from_secs(600);
/// Passwords remembered at most; past it the memory starts afresh.
const REMEMBERED: usize = 4096;

/// Decides who requests come from.
pub struct Gate {
    verifier: Verifier,
    issuers: Issuers,
    anonymous: Anonymous,
    /// Client certificates' subjects to accounts, when certificates are taken.
    gridmap: Option<GridMap>,
    /// SHA-256 of `user:password` → the login it gave, and when.
    remembered: Mutex<HashMap<[u8; 32], (Login, Instant)>>,
}

impl Gate {
    /// A gate over `users`, `anonymous` and the token `issuers`, checking passwords on
    /// `threads` threads.
    pub fn new(
        users: Users,
        anonymous: Anonymous,
        issuers: Issuers,
        threads: usize,
    ) -> std::io::Result<Gate> {
        Ok(Gate {
            verifier: Verifier::start(users, anonymous, threads)?,
            issuers,
            anonymous,
            gridmap: None,
            remembered: Mutex::new(HashMap::new()),
        })
    }

    /// The same gate, taking client certificates whose subjects `gridmap` maps to accounts.
    pub fn with_gridmap(self, gridmap: GridMap) -> Gate {
        Gate {
            gridmap: Some(gridmap),
            ..self
        }
    }

    /// Checks later requests against `users` (the users file read again); remembered
    /// passwords are forgotten.
    pub fn set_users(&self, users: Users) {
        self.verifier.set_users(users);
        self.remembered_map().clear();
    }

    fn remembered_map(&self) -> std::sync::MutexGuard<'_, HashMap<[u8; 32], (Login, Instant)>> {
        self.remembered.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The grant for a request carrying `authorization` (its header, if any) on a connection
    /// whose client certificate showed `certified` (if one was shown), at `now` (`now_unix`:
    /// seconds, for token times).
    pub async fn grant(
        &self,
        authorization: Option<&str>,
        certified: Option<&Certified>,
        now: Instant,
        now_unix: u64,
    ) -> Result<Grant, Refusal> {
        let Some(h) = authorization else {
            if let (Some(certified), Some(map)) = (certified, &self.gridmap) {
                let subject = certified.clone().map_err(Refusal::BadCertificate)?;
                let user = map.account(&subject).ok_or(Refusal::Unmapped(subject))?;
                return Ok(Grant::Account(Login {
                    user,
                    writable: true,
                }));
            }
            return match self.anonymous {
                Anonymous::Off => Err(Refusal::Missing),
                a => Ok(Grant::Account(Login {
                    user: ANONYMOUS.into(),
                    writable: a == Anonymous::ReadWrite,
                })),
            };
        };
        let (scheme, rest) = h.trim().split_once(' ').unwrap_or((h.trim(), ""));
        if scheme.eq_ignore_ascii_case("bearer") {
            return self
                .issuers
                .verify(rest.trim(), now_unix)
                .map(Grant::Token)
                .map_err(Refusal::BadToken);
        }
        if !scheme.eq_ignore_ascii_case("basic") {
            return Err(Refusal::Unsupported(scheme.to_string()));
        }
        let (user, password) = basic(rest.trim()).ok_or(Refusal::BadPassword)?;
        let key: [u8; 32] = Sha256::digest(format!("{user}:{password}")).into();
        if let Some((login, at)) = self.remembered_map().get(&key) {
            if now.saturating_duration_since(*at) < REMEMBER {
                return Ok(Grant::Account(login.clone()));
            }
        }
        match self.verifier.check(&user, &password).await {
            Ok(Some(login)) => {
                let mut map = self.remembered_map();
                if map.len() >= REMEMBERED {
                    map.clear();
                }
                map.insert(key, (login.clone(), now));
                Ok(Grant::Account(login))
            }
            Ok(None) => Err(Refusal::BadPassword),
            Err(_) => Err(Refusal::Busy),
        }
    }

    /// Whether tokens are accepted at all (said in `WWW-Authenticate`).
    pub fn takes_tokens(&self) -> bool {
        !self.issuers.is_empty()
    }
}

/// The name and password of a Basic credential.
fn basic(b64: &str) -> Option<(String, String)> {
    let raw = base64::engine::general_purpose::STANDARD.decode(b64).ok()?;
    let text = String::from_utf8(raw).ok()?;
    let (u, p) = text.split_once(':')?;
    Some((u.to_string(), p.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gate(anonymous: Anonymous) -> Gate {
        let mut users = Users::default();
        users.add_plain("alice:secret").unwrap();
        Gate::new(users, anonymous, Issuers::default(), 1).unwrap()
    }

    fn basic_of(s: &str) -> String {
        format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode(s)
        )
    }

    #[tokio::test]
    async fn basic_logins_anonymous_and_refusals() {
        let g = gate(Anonymous::Off);
        let now = Instant::now();
        let ok = g
            .grant(Some(&basic_of("alice:secret")), None, now, 0)
            .await
            .unwrap();
        assert!(ok.allows(Op::Modify, &VPath::root()));
        // Remembered: the second check needs no argon2, and gives the same.
        assert_eq!(
            g.grant(Some(&basic_of("alice:secret")), None, now, 0)
                .await
                .unwrap(),
            ok
        );
        assert_eq!(
            g.grant(Some(&basic_of("alice:wrong")), None, now, 0).await,
            Err(Refusal::BadPassword)
        );
        assert_eq!(g.grant(None, None, now, 0).await, Err(Refusal::Missing));
        assert_eq!(
            g.grant(Some("Basic !!"), None, now, 0).await,
            Err(Refusal::BadPassword)
        );
        assert!(matches!(
            g.grant(Some("Negotiate abc"), None, now, 0).await,
            Err(Refusal::Unsupported(_))
        ));
        assert!(matches!(
            g.grant(Some("Bearer abc"), None, now, 0).await,
            Err(Refusal::BadToken(_))
        ));
        // A new users file: the remembered password is forgotten with it.
        g.set_users(Users::default());
        assert_eq!(
            g.grant(Some(&basic_of("alice:secret")), None, now, 0).await,
            Err(Refusal::BadPassword)
        );
        let ro = gate(Anonymous::ReadOnly);
        let anon = ro.grant(None, None, now, 0).await.unwrap();
        assert!(anon.is_anonymous() && !ok.is_anonymous());
        assert!(anon.allows(Op::Read, &VPath::root()));
        assert!(!anon.allows(Op::Create, &VPath::root()));
    }

    #[tokio::test]
    async fn certificates_map_through_the_gridmap_and_requests_credentials_win() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("grid-mapfile");
        std::fs::write(&file, "\"/O=fatpipe/UID=carol\" carol\n").unwrap();
        let g = gate(Anonymous::ReadOnly).with_gridmap(GridMap::load(&file).unwrap());
        let now = Instant::now();
        let carol: Certified = Ok("/O=fatpipe/UID=carol".into());
        let grant = g.grant(None, Some(&carol), now, 0).await.unwrap();
        assert_eq!(grant.who(), "carol");
        assert!(grant.allows(Op::Modify, &VPath::root()));
        // Basic in the request wins over the connection's certificate.
        let alice = g
            .grant(Some(&basic_of("alice:secret")), Some(&carol), now, 0)
            .await
            .unwrap();
        assert_eq!(alice.who(), "alice");
        let dave: Certified = Ok("/O=fatpipe/UID=dave".into());
        assert_eq!(
            g.grant(None, Some(&dave), now, 0).await,
            Err(Refusal::Unmapped("/O=fatpipe/UID=dave".into()))
        );
        let forged: Certified = Err("proxy /CN=x: not signed by /CN=y".into());
        assert_eq!(
            g.grant(None, Some(&forged), now, 0).await,
            Err(Refusal::BadCertificate(
                "proxy /CN=x: not signed by /CN=y".into()
            ))
        );
        // Without a certificate: anonymous, as before.
        assert!(g.grant(None, None, now, 0).await.unwrap().is_anonymous());
    }
}
