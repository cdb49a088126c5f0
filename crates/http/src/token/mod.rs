//! Bearer tokens (WLCG JWT profile, SciTokens): a JWT signed by an issuer the operator
//! configured with its public keys (a JWKS file; nothing is fetched), checked for issuer,
//! signature, time and audience, whose scopes say what it may do where. Pure: the time is
//! passed in.

use crate::op::Op;
use base64::Engine;
use fatpipe_proto::VPath;
use jsonwebtoken::jwk::JwkSet;
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use std::collections::HashMap;
use std::path::Path;

/// The audience every WLCG storage accepts (the profile's "any").
pub const ANY_AUDIENCE: &str = "https://wlcg.cern.ch/jwt/v1/any";
/// Clock difference tolerated between issuer and server, seconds.
pub const LEEWAY_S: u64 = 60;

/// Why a token was refused (the reason goes back to the client in `WWW-Authenticate`).
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum TokenError {
    /// Not a JWT, or claims that cannot be read.
    #[error("malformed token: {0}")]
    Malformed(String),
    /// Signed by an issuer this server was not told to trust.
    #[error("unknown issuer {0:?}")]
    UnknownIssuer(String),
    /// No key of the issuer matches, or an algorithm that is refused.
    #[error("no usable key: {0}")]
    NoKey(String),
    /// The signature does not verify.
    #[error("bad signature")]
    BadSignature,
    /// Past its `exp`.
    #[error("token expired")]
    Expired,
    /// Before its `nbf`.
    #[error("token not valid yet")]
    NotYet,
    /// No `aud` this server accepts.
    #[error("token is for another audience")]
    Audience,
}

/// One permission a token carries: an operation under a path prefix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Scope {
    /// What it allows.
    pub op: Op,
    /// Where: this path and everything beneath it.
    pub path: VPath,
}

/// Everything a verified token allows.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Scopes {
    /// The token's subject, for the logs.
    pub subject: String,
    /// Its permissions.
    pub scopes: Vec<Scope>,
}

impl Scopes {
    /// Whether `op` on `path` is allowed: `storage.modify` covers creating; any scope covering
    /// a path lets its metadata be read.
    pub fn allows(&self, op: Op, path: &VPath) -> bool {
        self.scopes.iter().any(|s| {
            beneath(path, &s.path)
                && (s.op == op || op == Op::Stat || (s.op == Op::Modify && op == Op::Create))
        })
    }
}

/// Whether `path` is `prefix` or beneath it, component by component (`/data` does not cover
/// `/database`).
fn beneath(path: &VPath, prefix: &VPath) -> bool {
    let mut p = path.components();
    prefix.components().all(|c| p.next() == Some(c))
}

/// The scopes of a `scope` claim: WLCG `storage.read|create|modify:/path`, SciTokens
/// `read|write:/path` (a missing path is `/`); others are ignored.
pub fn parse_scopes(claim: &str) -> Vec<Scope> {
    let mut out = Vec::new();
    for item in claim.split_whitespace() {
        let (name, path) = item.split_once(':').unwrap_or((item, "/"));
        let ops: &[Op] = match name {
            "storage.read" | "read" => &[Op::Read],
            "storage.create" => &[Op::Create],
            "storage.modify" => &[Op::Modify],
            "write" => &[Op::Create, Op::Modify],
            _ => continue,
        };
        let path = VPath::root().join(if path.is_empty() { "/" } else { path });
        out.extend(ops.iter().map(|&op| Scope {
            op,
            path: path.clone(),
        }));
    }
    out
}

/// The claims read from a token.
#[derive(Debug, serde::Deserialize)]
struct Claims {
    exp: Option<u64>,
    nbf: Option<u64>,
    #[serde(default)]
    aud: Option<Audience>,
    #[serde(default)]
    sub: String,
    #[serde(default)]
    scope: String,
}

#[derive(Debug, serde::Deserialize)]
#[serde(untagged)]
enum Audience {
    One(String),
    Many(Vec<String>),
}

/// The issuers a server trusts, each with its keys, and the audiences it answers to.
#[derive(Debug, Clone, Default)]
pub struct Issuers {
    keys: HashMap<String, JwkSet>,
    audiences: Vec<String>,
}

impl Issuers {
    /// Trusts `issuer` with the keys in the JWKS file `jwks`.
    pub fn add_file(&mut self, issuer: &str, jwks: &Path) -> Result<(), String> {
        let text = std::fs::read_to_string(jwks)
            .map_err(|e| format!("cannot read {}: {e}", jwks.display()))?;
        let set: JwkSet = serde_json::from_str(&text)
            .map_err(|e| format!("{} is not a JWKS: {e}", jwks.display()))?;
        if set.keys.is_empty() {
            return Err(format!("{} holds no key", jwks.display()));
        }
        self.keys.insert(issuer.to_string(), set);
        Ok(())
    }

    /// Trusts `ISSUER=JWKS_FILE` (the form `--token-issuer` takes).
    pub fn add_spec(&mut self, spec: &str) -> Result<(), String> {
        let (iss, file) = spec.rsplit_once('=').ok_or("expected ISSUER=JWKS_FILE")?;
        self.add_file(iss, Path::new(file))
    }

    /// Accepts tokens for `aud` too (besides the WLCG "any" audience).
    pub fn add_audience(&mut self, aud: &str) {
        self.audiences.push(aud.to_string());
    }

    /// Whether any issuer is trusted.
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// Verifies `token` at `now_unix` (seconds) and returns what it allows.
    pub fn verify(&self, token: &str, now_unix: u64) -> Result<Scopes, TokenError> {
        let header =
            jsonwebtoken::decode_header(token).map_err(|e| TokenError::Malformed(e.to_string()))?;
        let iss = unverified_issuer(token)?;
        let set = self
            .keys
            .get(&iss)
            .ok_or_else(|| TokenError::UnknownIssuer(iss.clone()))?;
        if !asymmetric(header.alg) {
            return Err(TokenError::NoKey(format!(
                "{:?} is not accepted",
                header.alg
            )));
        }
        let jwk = match &header.kid {
            Some(kid) => set.find(kid),
            None if set.keys.len() == 1 => set.keys.first(),
            None => None,
        }
        .ok_or_else(|| TokenError::NoKey(format!("no key {:?}", header.kid)))?;
        let key = DecodingKey::from_jwk(jwk).map_err(|e| TokenError::NoKey(e.to_string()))?;
        let mut v = Validation::new(header.alg);
        // Times and audience are checked below against the time given, not the clock.
        v.validate_exp = false;
        v.validate_nbf = false;
        v.validate_aud = false;
        v.required_spec_claims.clear();
        v.set_issuer(&[&iss]);
        let claims = jsonwebtoken::decode::<Claims>(token, &key, &v)
            .map_err(|e| match e.kind() {
                jsonwebtoken::errors::ErrorKind::InvalidSignature => TokenError::BadSignature,
                _ => TokenError::Malformed(e.to_string()),
            })?
            .claims;
        let exp = claims
            .exp
            .ok_or_else(|| TokenError::Malformed("no exp".into()))?;
        if now_unix > exp.saturating_add(LEEWAY_S) {
            return Err(TokenError::Expired);
        }
        if claims
            .nbf
            .is_some_and(|nbf| now_unix.saturating_add(LEEWAY_S) < nbf)
        {
            return Err(TokenError::NotYet);
        }
        let auds = match claims.aud {
            Some(Audience::One(a)) => vec![a],
            Some(Audience::Many(v)) => v,
            None => Vec::new(),
        };
        let accepted =
            |a: &String| a == ANY_AUDIENCE || a == "ANY" || self.audiences.iter().any(|x| x == a);
        if !auds.iter().any(accepted) {
            return Err(TokenError::Audience);
        }
        Ok(Scopes {
            subject: claims.sub,
            scopes: parse_scopes(&claims.scope),
        })
    }
}

/// Algorithms with a public key: an `HS*` token would be checked with a key that is public.
fn asymmetric(alg: Algorithm) -> bool {
    !matches!(alg, Algorithm::HS256 | Algorithm::HS384 | Algorithm::HS512)
}

/// The `iss` of a token not verified yet (it says which keys verify it).
fn unverified_issuer(token: &str) -> Result<String, TokenError> {
    #[derive(serde::Deserialize)]
    struct Iss {
        iss: String,
    }
    let payload = token
        .split('.')
        .nth(1)
        .ok_or_else(|| TokenError::Malformed("not a JWT".into()))?;
    let raw = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(payload.trim_end_matches('='))
        .map_err(|e| TokenError::Malformed(e.to_string()))?;
    let i: Iss = serde_json::from_slice(&raw).map_err(|e| TokenError::Malformed(e.to_string()))?;
    Ok(i.iss)
}

#[cfg(test)]
mod tests;
