//! Who may log in: named users with argon2 password hashes, and the anonymous policy.

use anyhow::{bail, Context};
use argon2::password_hash::{
    rand_core::OsRng, PasswordHash, PasswordHasher, PasswordVerifier, SaltString,
};
use argon2::Argon2;
use std::collections::HashMap;
use std::path::Path;

/// What anonymous (`anonymous`/`ftp`) logins may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Anonymous {
    /// Anonymous logins are refused.
    #[default]
    Off,
    /// Anonymous logins may read only.
    ReadOnly,
    /// Anonymous logins may read and write.
    ReadWrite,
}

/// The accounts a server accepts, each stored as a salted argon2 hash (PHC string).
#[derive(Debug, Clone, Default)]
pub struct Users {
    hashes: HashMap<String, String>,
}

/// The result of a successful login.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Login {
    /// The account name (`anonymous` for anonymous logins).
    pub user: String,
    /// Whether the session may change the tree.
    pub writable: bool,
}

/// Hashes a password into a PHC string for a users file.
pub fn hash_password(password: &str) -> anyhow::Result<String> {
    let salt = SaltString::generate(&mut OsRng);
    Argon2::default()
        .hash_password(password.as_bytes(), &salt)
        .map(|h| h.to_string())
        .map_err(|e| anyhow::anyhow!("hashing failed: {e}"))
}

/// One line of a users file: `name:PHC-hash`.
pub fn users_file_line(name: &str, password: &str) -> anyhow::Result<String> {
    check_name(name)?;
    Ok(format!("{name}:{}", hash_password(password)?))
}

fn check_name(name: &str) -> anyhow::Result<()> {
    if name.is_empty() || name.contains([':', '\n', '\r', ' ']) {
        bail!("user name {name:?} must be non-empty without ':', spaces or line breaks");
    }
    if is_anonymous_name(name) {
        bail!("{name:?} is reserved for anonymous logins");
    }
    Ok(())
}

fn is_anonymous_name(name: &str) -> bool {
    name.eq_ignore_ascii_case("anonymous") || name.eq_ignore_ascii_case("ftp")
}

impl Users {
    /// Adds an account given as `NAME:PASSWORD` (the password is hashed at once).
    pub fn add_plain(&mut self, spec: &str) -> anyhow::Result<()> {
        let (name, password) = spec
            .split_once(':')
            .context("a user is given as NAME:PASSWORD")?;
        check_name(name)?;
        self.hashes
            .insert(name.to_string(), hash_password(password)?);
        Ok(())
    }

    /// Loads `name:PHC-hash` lines (blank lines and `#` comments ignored), as `fatpipe passwd` writes.
    pub fn load_file(&mut self, path: &Path) -> anyhow::Result<()> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read users file {}", path.display()))?;
        for (i, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let (name, hash) = line
                .split_once(':')
                .with_context(|| format!("{}:{}: expected NAME:HASH", path.display(), i + 1))?;
            check_name(name).with_context(|| format!("{}:{}", path.display(), i + 1))?;
            PasswordHash::new(hash).map_err(|e| {
                anyhow::anyhow!(
                    "{}:{}: not a password hash ({e}); write entries with `fatpipe passwd`",
                    path.display(),
                    i + 1
                )
            })?;
            self.hashes.insert(name.to_string(), hash.to_string());
        }
        Ok(())
    }

    /// Whether no named account exists.
    pub fn is_empty(&self) -> bool {
        self.hashes.is_empty()
    }

    /// Checks a login. Named accounts may write; anonymous ones follow `anonymous`.
    pub fn check(&self, user: &str, password: &str, anonymous: Anonymous) -> Option<Login> {
        if is_anonymous_name(user) {
            return match anonymous {
                Anonymous::Off => None,
                Anonymous::ReadOnly | Anonymous::ReadWrite => Some(Login {
                    user: "anonymous".into(),
                    writable: anonymous == Anonymous::ReadWrite,
                }),
            };
        }
        let hash = self.hashes.get(user)?;
        let parsed = PasswordHash::new(hash).ok()?;
        Argon2::default()
            .verify_password(password.as_bytes(), &parsed)
            .ok()
            .map(|_| Login {
                user: user.to_string(),
                writable: true,
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_and_file_users_verify() {
        let mut u = Users::default();
        u.add_plain("alice:s3cret:with:colons").unwrap();
        assert!(u
            .check("alice", "s3cret:with:colons", Anonymous::Off)
            .is_some());
        assert!(u.check("alice", "wrong", Anonymous::Off).is_none());
        assert!(u.check("bob", "s3cret", Anonymous::Off).is_none());

        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("users");
        std::fs::write(
            &path,
            format!("# comment\n\n{}\n", users_file_line("bob", "pw").unwrap()),
        )
        .unwrap();
        u.load_file(&path).unwrap();
        assert_eq!(
            u.check("bob", "pw", Anonymous::Off).map(|l| l.writable),
            Some(true)
        );
    }

    #[test]
    fn anonymous_follows_policy() {
        let u = Users::default();
        assert!(u.check("anonymous", "x", Anonymous::Off).is_none());
        assert_eq!(
            u.check("ftp", "", Anonymous::ReadOnly).map(|l| l.writable),
            Some(false)
        );
        assert_eq!(
            u.check("Anonymous", "", Anonymous::ReadWrite)
                .map(|l| l.writable),
            Some(true)
        );
    }

    #[test]
    fn bad_users_file_is_a_clear_error() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("users");
        std::fs::write(&path, "carol:plaintext\n").unwrap();
        let err = Users::default().load_file(&path).unwrap_err().to_string();
        assert!(err.contains(":1: not a password hash"), "{err}");
        assert!(Users::default().add_plain("anonymous:x").is_err());
        assert!(Users::default().add_plain("nopassword").is_err());
    }
}
