//! Who may log in: named users with argon2 password hashes, and the anonymous policy.

use anyhow::{bail, Context};
use argon2::password_hash::{rand_core::OsRng, PasswordHash, PasswordHasher, SaltString};
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
#[derive(Debug, Clone)]
pub struct Users {
    hashes: HashMap<String, String>,
    /// Checked instead when a name is unknown, so that both cost the same.
    dummy: String,
}

impl Default for Users {
    fn default() -> Self {
        Users {
            hashes: HashMap::new(),
            dummy: hash_password("fatpipe: no such account").unwrap_or_default(),
        }
    }
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
        self.check_with(user, password, anonymous, &mut Scratch::default())
    }

    /// [`Users::check`] with working memory that the caller keeps between checks, so that a
    /// thread checking passwords all day holds one hash's memory instead of allocating it anew.
    /// An unknown name costs as much as a known one (checked against a dummy hash): the time
    /// of an answer tells nobody which accounts exist.
    pub fn check_with(
        &self,
        user: &str,
        password: &str,
        anonymous: Anonymous,
        scratch: &mut Scratch,
    ) -> Option<Login> {
        if is_anonymous_name(user) {
            return match anonymous {
                Anonymous::Off => None,
                Anonymous::ReadOnly | Anonymous::ReadWrite => Some(Login {
                    user: "anonymous".into(),
                    writable: anonymous == Anonymous::ReadWrite,
                }),
            };
        }
        let (hash, known) = match self.hashes.get(user) {
            Some(h) => (h.as_str(), true),
            None => (self.dummy.as_str(), false),
        };
        let ok = verify(hash, password, scratch);
        (ok && known).then(|| Login {
            user: user.to_string(),
            writable: true,
        })
    }
}

/// Memory for argon2 checks, kept by a checking thread (see [`Users::check_with`]).
#[derive(Default)]
pub struct Scratch {
    blocks: Vec<argon2::Block>,
}

/// Largest argon2 memory cost a users file may ask for (KiB): one check of a hostile or
/// mistaken entry must not take the server's memory.
const MAX_M_COST: u32 = 256 * 1024;

/// Whether `password` matches the PHC string `phc`, computed in `scratch`'s memory.
fn verify(phc: &str, password: &str, scratch: &mut Scratch) -> bool {
    let Ok(parsed) = PasswordHash::new(phc) else {
        return false;
    };
    let (Some(salt), Some(expected)) = (parsed.salt, parsed.hash) else {
        return false;
    };
    let Ok(params) = argon2::Params::try_from(&parsed) else {
        return false;
    };
    let Ok(algorithm) = argon2::Algorithm::try_from(parsed.algorithm) else {
        return false;
    };
    let version = parsed
        .version
        .and_then(|v| argon2::Version::try_from(v).ok())
        .unwrap_or_default();
    if params.m_cost() > MAX_M_COST {
        return false;
    }
    let mut salt_buf = [0u8; 64];
    let Ok(salt) = salt.decode_b64(&mut salt_buf) else {
        return false;
    };
    scratch
        .blocks
        .resize(params.block_count(), argon2::Block::default());
    let mut out = vec![0u8; expected.len()];
    let hasher = Argon2::new(algorithm, version, params);
    if hasher
        .hash_password_into_with_memory(password.as_bytes(), salt, &mut out, &mut scratch.blocks)
        .is_err()
    {
        return false;
    }
    // Compare in constant time: every byte, whatever the first difference.
    out.iter()
        .zip(expected.as_bytes())
        .fold(0u8, |acc, (a, b)| acc | (a ^ b))
        == 0
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
    fn checks_reuse_their_memory_and_unknown_names_cost_a_check() {
        let mut u = Users::default();
        u.add_plain("alice:pw").unwrap();
        let mut scratch = Scratch::default();
        assert!(u
            .check_with("alice", "pw", Anonymous::Off, &mut scratch)
            .is_some());
        let held = scratch.blocks.capacity();
        assert!(held > 0);
        assert!(u
            .check_with("alice", "no", Anonymous::Off, &mut scratch)
            .is_none());
        // An unknown name runs a full check too (same memory, no early return).
        scratch.blocks = Vec::new();
        assert!(u
            .check_with("mallory", "pw", Anonymous::Off, &mut scratch)
            .is_none());
        assert_eq!(scratch.blocks.capacity(), held);
        assert!(u
            .check_with("alice", "pw", Anonymous::Off, &mut scratch)
            .is_some());
        assert_eq!(
            scratch.blocks.capacity(),
            held,
            "memory is reused, not grown"
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
