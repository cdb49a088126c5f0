//! Request targets and `href`s: a URL path percent-decoded into a [`VPath`] inside the served
//! tree, and a [`VPath`] encoded back for a PROPFIND answer or a `Location`.

use fatpipe_proto::VPath;
use percent_encoding::{percent_decode_str, utf8_percent_encode, AsciiSet, CONTROLS};

/// Why a request target names no path in the tree.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum BadPath {
    /// Not valid UTF-8 once decoded, or holding a NUL.
    #[error("the path is not valid UTF-8 without NUL bytes")]
    Encoding,
    /// A fragment (`#…`): clients never send one, and what it would name is unclear.
    #[error("a request target has no fragment")]
    Fragment,
}

/// The path a request names: `target`'s path part (query and fragment dropped), decoded and
/// normalised (`..` never climbs above the root).
pub fn vpath(target: &str) -> Result<VPath, BadPath> {
    if target.contains('#') {
        return Err(BadPath::Fragment);
    }
    let path = target.split('?').next().unwrap_or("");
    let decoded = percent_decode_str(path)
        .decode_utf8()
        .map_err(|_| BadPath::Encoding)?;
    if decoded.contains('\0') {
        return Err(BadPath::Encoding);
    }
    Ok(VPath::root().join(&decoded))
}

/// Whether the target ends in `/` (a collection named as one).
pub fn names_collection(target: &str) -> bool {
    target.split(['?', '#']).next().unwrap_or("").ends_with('/')
}

/// Bytes escaped in an `href`: controls, space and the characters with a meaning in URLs or
/// XML.
const HREF: &AsciiSet = &CONTROLS
    .add(b' ')
    .add(b'"')
    .add(b'#')
    .add(b'%')
    .add(b'&')
    .add(b'\'')
    .add(b'<')
    .add(b'>')
    .add(b'?')
    .add(b'[')
    .add(b']')
    .add(b'\\')
    .add(b'^')
    .add(b'`')
    .add(b'{')
    .add(b'|')
    .add(b'}');

/// `v` as an absolute URL path, each component percent-encoded; a collection ends in `/`.
pub fn href(v: &VPath, collection: bool) -> String {
    let mut out = String::new();
    for c in v.components() {
        out.push('/');
        out.extend(utf8_percent_encode(c, HREF));
    }
    if collection || out.is_empty() {
        out.push('/');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn targets_decode_into_the_tree() {
        assert_eq!(vpath("/a/b%20c?x=1").unwrap().to_string(), "/a/b c");
        assert_eq!(
            vpath("/../../etc/passwd").unwrap().to_string(),
            "/etc/passwd"
        );
        assert_eq!(vpath("/a/%2e%2e/%2e%2e/b").unwrap().to_string(), "/b");
        assert_eq!(vpath("/x%00y"), Err(BadPath::Encoding));
        assert_eq!(vpath("/x%ff"), Err(BadPath::Encoding));
        assert_eq!(vpath("/frag/#ment"), Err(BadPath::Fragment));
        assert_eq!(vpath("/a%23b").unwrap().to_string(), "/a#b");
        assert!(names_collection("/a/b/?q"));
        assert!(!names_collection("/a/b"));
    }

    #[test]
    fn hrefs_escape_what_urls_and_xml_mean() {
        let v = VPath::root().join("/d/a b&<c>%#?");
        assert_eq!(href(&v, false), "/d/a%20b%26%3Cc%3E%25%23%3F");
        assert_eq!(href(&VPath::root(), true), "/");
        assert_eq!(href(&vpath("/d").unwrap(), true), "/d/");
    }

    proptest! {
        /// Whatever a component holds, its href decodes back to the same path.
        #[test]
        fn href_round_trips(parts in proptest::collection::vec("[^/\\x00]{1,12}", 0..4)) {
            let parts: Vec<String> = parts.into_iter().filter(|p| p != "." && p != "..").collect();
            let v = VPath::root().join(&parts.join("/"));
            prop_assert_eq!(vpath(&href(&v, false)).unwrap(), v);
        }

        /// No target, however odd, panics or leaves the tree's grammar.
        #[test]
        fn any_target_parses_or_refuses(t in ".{0,64}") {
            if let Ok(v) = vpath(&t) {
                prop_assert!(v.components().all(|c| !c.is_empty() && c != "." && c != ".." && !c.contains('/')));
            }
        }
    }
}
