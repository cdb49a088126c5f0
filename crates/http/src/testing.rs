//! A token issuer for tests: an ES256 key, its JWKS file, and tokens signed with it.

use base64::Engine;
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use std::path::{Path, PathBuf};

/// An issuer with one fresh ES256 key.
pub struct TestIssuer {
    /// Its `iss`.
    pub iss: String,
    key: EncodingKey,
    jwk: serde_json::Value,
}

impl TestIssuer {
    /// A new issuer named `iss`.
    pub fn new(iss: &str) -> Result<TestIssuer, Box<dyn std::error::Error>> {
        let pair = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256)?;
        let key = EncodingKey::from_ec_pem(pair.serialize_pem().as_bytes())?;
        // The public key as an uncompressed point: 0x04, X, Y.
        let raw = pair.public_key_raw();
        let b64 = |b: &[u8]| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(b);
        let jwk = serde_json::json!({
            "kty": "EC", "crv": "P-256", "alg": "ES256", "use": "sig", "kid": "test-key",
            "x": b64(&raw[1..33]), "y": b64(&raw[33..65]),
        });
        Ok(TestIssuer {
            iss: iss.to_string(),
            key,
            jwk,
        })
    }

    /// Writes the issuer's JWKS into `dir` and returns its path.
    pub fn jwks_file(&self, dir: &Path) -> std::io::Result<PathBuf> {
        let path = dir.join("jwks.json");
        std::fs::write(&path, serde_json::json!({ "keys": [self.jwk] }).to_string())?;
        Ok(path)
    }

    /// A token with `scope`, for the WLCG "any" audience, valid from 10 s ago for `valid_s`
    /// seconds (negative: already expired) around `now_unix`.
    pub fn token(&self, scope: &str, now_unix: u64, valid_s: i64) -> String {
        self.sign(serde_json::json!({
            "iss": self.iss, "sub": "tester", "aud": crate::token::ANY_AUDIENCE,
            "scope": scope, "wlcg.ver": "1.0",
            "nbf": now_unix.saturating_sub(10),
            "exp": now_unix.saturating_add_signed(valid_s),
        }))
    }

    /// `claims`, signed.
    pub fn sign(&self, claims: serde_json::Value) -> String {
        let mut header = Header::new(Algorithm::ES256);
        header.kid = Some("test-key".into());
        jsonwebtoken::encode(&header, &claims, &self.key).unwrap_or_default()
    }
}
