//! `--include` / `--exclude`: which files of a copy move. A pattern without `/` matches a
//! file's (or directory's) name anywhere in the tree; one with `/` matches its path relative to
//! the copy's source (`*` never crosses a `/`, `**` does). Exclusion wins; with includes, a file
//! must match one of them. Directories are only excluded (pruned), never left out for not
//! matching an include, so the files inside them can still match.

use anyhow::Context;
use globset::{GlobBuilder, GlobSet, GlobSetBuilder};

/// The include and exclude patterns of a copy.
#[derive(Debug, Clone, Default)]
pub struct Filter {
    include: Option<Patterns>,
    exclude: Option<Patterns>,
}

/// Patterns split by what they match: a name, or a relative path.
#[derive(Debug, Clone)]
struct Patterns {
    names: GlobSet,
    paths: GlobSet,
}

impl Patterns {
    fn new(patterns: &[String]) -> anyhow::Result<Option<Patterns>> {
        if patterns.is_empty() {
            return Ok(None);
        }
        let (mut names, mut paths) = (GlobSetBuilder::new(), GlobSetBuilder::new());
        for p in patterns {
            let glob = GlobBuilder::new(p.trim_start_matches('/'))
                .literal_separator(true)
                .backslash_escape(true)
                .build()
                .with_context(|| format!("bad pattern {p:?}"))?;
            if p.contains('/') {
                paths.add(glob);
            } else {
                names.add(glob);
            }
        }
        Ok(Some(Patterns {
            names: names.build()?,
            paths: paths.build()?,
        }))
    }

    fn matches(&self, rel: &str) -> bool {
        let name = rel.rsplit('/').next().unwrap_or(rel);
        self.names.is_match(name) || self.paths.is_match(rel)
    }
}

impl Filter {
    /// The filter of `--include` and `--exclude` patterns (globs); an error names a bad one.
    pub fn new(include: &[String], exclude: &[String]) -> anyhow::Result<Filter> {
        Ok(Filter {
            include: Patterns::new(include)?,
            exclude: Patterns::new(exclude)?,
        })
    }

    /// Whether the file at `rel` (relative to the copy's source, `/`-separated) is copied.
    pub fn keeps_file(&self, rel: &str) -> bool {
        !self.excludes(rel) && self.include.as_ref().is_none_or(|p| p.matches(rel))
    }

    /// Whether the directory at `rel` is walked.
    pub fn keeps_dir(&self, rel: &str) -> bool {
        !self.excludes(rel)
    }

    fn excludes(&self, rel: &str) -> bool {
        self.exclude.as_ref().is_some_and(|p| p.matches(rel))
    }
}

/// Whether the last component of a source names several files (`*`, `?`, `[`).
pub fn is_glob(name: &str) -> bool {
    name.contains(['*', '?', '['])
}

/// The names among `names` that the glob `pattern` (one path component) matches.
pub fn glob_names<'a>(
    pattern: &str,
    names: impl IntoIterator<Item = &'a str>,
) -> anyhow::Result<Vec<&'a str>> {
    let glob = GlobBuilder::new(pattern)
        .literal_separator(true)
        .build()
        .with_context(|| format!("bad pattern {pattern:?}"))?
        .compile_matcher();
    Ok(names.into_iter().filter(|n| glob.is_match(n)).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn filter(include: &[&str], exclude: &[&str]) -> Filter {
        let s = |v: &[&str]| v.iter().map(|p| p.to_string()).collect::<Vec<_>>();
        Filter::new(&s(include), &s(exclude)).unwrap()
    }

    #[test]
    fn names_match_anywhere_and_paths_from_the_source() {
        let f = filter(&["*.h5"], &[]);
        assert!(f.keeps_file("a.h5"));
        assert!(f.keeps_file("run/1/a.h5"));
        assert!(!f.keeps_file("run/1/a.txt"));
        // Directories are walked whatever the includes say.
        assert!(f.keeps_dir("run"));
        let f = filter(&["run/*.h5"], &[]);
        assert!(f.keeps_file("run/a.h5"));
        assert!(!f.keeps_file("run/1/a.h5"));
        assert!(!f.keeps_file("a.h5"));
        let f = filter(&["run/**/*.h5"], &[]);
        assert!(f.keeps_file("run/1/2/a.h5"));
    }

    #[test]
    fn exclusion_wins_and_prunes_directories() {
        let f = filter(&["*.h5"], &["scratch", "*.tmp.h5"]);
        assert!(!f.keeps_dir("run/scratch"));
        assert!(!f.keeps_file("a.tmp.h5"));
        assert!(f.keeps_file("a.h5"));
        let none = filter(&[], &[]);
        assert!(none.keeps_file("anything/at/all"));
        assert!(Filter::new(&["a[".into()], &[]).is_err());
    }

    #[test]
    fn globs_pick_names() {
        assert!(is_glob("*.h5") && is_glob("a?") && is_glob("[ab]") && !is_glob("plain"));
        let names = ["a.h5", "b.h5", "c.txt"];
        assert_eq!(glob_names("*.h5", names).unwrap(), ["a.h5", "b.h5"]);
        assert!(glob_names("*.nc", names).unwrap().is_empty());
    }
}
