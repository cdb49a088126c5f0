//! Virtual paths: what a client names, normalised inside the served tree.
//!
//! A [`VPath`] is absolute and has no `.`/`..`/empty components, so joining it under the server's
//! root can never climb out by name alone (`..` at the top stays at the top, as after `chroot`).
//! Symbolic links are the file system's business and are checked where the tree is opened.

use std::fmt;

/// An absolute, normalised path inside the served tree.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct VPath {
    parts: Vec<String>,
}

impl VPath {
    /// The top of the tree, `/`.
    pub fn root() -> Self {
        VPath::default()
    }

    /// Resolves a client-supplied path against the current directory `self`.
    pub fn join(&self, arg: &str) -> VPath {
        let mut parts = if arg.starts_with('/') {
            Vec::new()
        } else {
            self.parts.clone()
        };
        for part in arg.split('/') {
            match part {
                "" | "." => {}
                ".." => {
                    parts.pop();
                }
                p => parts.push(p.to_string()),
            }
        }
        VPath { parts }
    }

    /// The parent directory (the root is its own parent).
    pub fn parent(&self) -> VPath {
        let mut parts = self.parts.clone();
        parts.pop();
        VPath { parts }
    }

    /// The last component, or `None` for the root.
    pub fn file_name(&self) -> Option<&str> {
        self.parts.last().map(String::as_str)
    }

    /// The components from the top down.
    pub fn components(&self) -> impl Iterator<Item = &str> {
        self.parts.iter().map(String::as_str)
    }

    /// Whether this is the top of the tree.
    pub fn is_root(&self) -> bool {
        self.parts.is_empty()
    }
}

impl fmt::Display for VPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.parts.is_empty() {
            return f.write_str("/");
        }
        for p in &self.parts {
            write!(f, "/{p}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn dotdot_stays_inside() {
        let cwd = VPath::root().join("a/b");
        assert_eq!(
            cwd.join("../../../../etc/passwd").to_string(),
            "/etc/passwd"
        );
        assert_eq!(cwd.join("/x/./y//z").to_string(), "/x/y/z");
        assert_eq!(cwd.join("..").to_string(), "/a");
        assert_eq!(VPath::root().parent(), VPath::root());
        assert_eq!(cwd.join("c").file_name(), Some("c"));
    }

    proptest! {
        #[test]
        fn joined_paths_have_no_dot_components(cwd in "[a-z./]{0,20}", arg in "[a-z./]{0,40}") {
            let p = VPath::root().join(&cwd).join(&arg);
            for c in p.components() {
                prop_assert!(c != "." && c != ".." && !c.is_empty() && !c.contains('/'));
            }
            // Display form re-parses to itself.
            prop_assert_eq!(VPath::root().join(&p.to_string()), p);
        }
    }
}
