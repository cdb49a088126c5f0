//! `ls`, `ls -R`, `mkdir -p` and `rm` as a user names them on `https://` URLs, over the file
//! operations of `files`: a listing's entries as FTP's (one for a file, its matches for a
//! glob), a tree walked depth first, the collections above made first, globs and `-r` for
//! removals.

use super::{member_of, Client, Endpoint, MAX_DEPTH};
use crate::multistatus::Resource;
use fatpipe_proto::listing::{Entry, EntryKind};
use std::time::UNIX_EPOCH;

/// `r` as `ls` shows it: its name (the last path component), kind, size and time.
pub fn entry(r: &Resource) -> Entry {
    let name = r
        .path
        .trim_end_matches('/')
        .rsplit('/')
        .next()
        .unwrap_or("");
    Entry {
        name: match name.is_empty() {
            true => "/".into(),
            false => name.into(),
        },
        kind: match r.dir {
            true => EntryKind::Dir,
            false => EntryKind::File,
        },
        size: r.size.unwrap_or(0),
        modified: r
            .modified
            .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
            .map_or(0, |d| d.as_secs() as i64),
        mode: 0,
    }
}

/// The collections above `e`, outermost first (not the root).
fn ancestors(e: &Endpoint) -> Vec<Endpoint> {
    let path = e.url.path().trim_end_matches('/');
    let mut out = Vec::new();
    let mut at = 0;
    while let Some(i) = path[at + 1..].find('/') {
        at += i + 1;
        let mut url = e.url.clone();
        url.set_path(&format!("{}/", &path[..at]));
        out.push(Endpoint {
            url,
            authorization: e.authorization.clone(),
        });
    }
    out
}

impl Client {
    /// The entries `e` lists: a collection's members, a file itself, or a glob's matches.
    pub async fn entries(&self, e: &Endpoint) -> Result<Vec<Entry>, String> {
        // A glob lists its matches themselves.
        if let Some(hits) = self.matches(e).await? {
            return Ok(hits.iter().map(|(_, r)| entry(r)).collect());
        }
        let listed = self.list(e).await?;
        match listed.itself {
            Some(file) if !file.dir => Ok(vec![entry(&file)]),
            None if listed.members.is_empty() => {
                Err(format!("{}: the server listed nothing", e.url))
            }
            _ => Ok(listed.members.iter().map(entry).collect()),
        }
    }

    /// `ls -R` on `top`: `show` gets its entries, then each collection's below it under its
    /// heading (its path), depth first in the order listed, as for FTP; at most
    /// [`MAX_DEPTH`] levels, and only members that are plain names in the collection listed.
    pub async fn list_tree(
        &self,
        top: &Endpoint,
        mut show: impl FnMut(Option<&str>, &[Entry]),
    ) -> Result<(), String> {
        let mut todo = vec![(top.clone(), None, 0)];
        while let Some((mut dir, heading, depth)) = todo.pop() {
            if depth > MAX_DEPTH {
                return Err(format!("{}: tree deeper than {MAX_DEPTH} levels", dir.url));
            }
            let listed = self.list(&dir).await?;
            if let (None, Some(file)) = (&heading, listed.itself.as_ref().filter(|f| !f.dir)) {
                show(None, &[entry(file)]);
                continue;
            }
            // A collection's members are named below its path with a slash.
            if !dir.url.path().ends_with('/') {
                let path = format!("{}/", dir.url.path());
                dir.url.set_path(&path);
            }
            let entries: Vec<Entry> = listed.members.iter().map(entry).collect();
            show(heading.as_deref(), &entries);
            for r in listed.members.iter().filter(|r| r.dir).rev() {
                let sub = member_of(&dir, r)?;
                let path = percent_encoding::percent_decode_str(sub.url.path())
                    .decode_utf8_lossy()
                    .trim_end_matches('/')
                    .to_string();
                todo.push((sub, Some(path), depth + 1));
            }
        }
        Ok(())
    }

    /// Makes the collection `e`; `parents`: the missing ones above it too, and those there
    /// already are fine (`mkdir -p`).
    pub async fn make_dirs(&self, e: &Endpoint, parents: bool) -> Result<(), String> {
        if parents {
            for above in ancestors(e) {
                self.make_dir(&above, true).await?;
            }
        }
        self.make_dir(e, parents).await
    }

    /// Removes the file `e` (a glob in its last component: its matches); a collection only
    /// when `recursive` (DELETE removes it whole).
    pub async fn remove_named(&self, e: &Endpoint, recursive: bool) -> Result<(), String> {
        let named = match self.matches(e).await? {
            Some(hits) => hits.into_iter().map(|(e, r)| (e, r.dir)).collect(),
            None => vec![(e.clone(), self.stat(e).await?.dir)],
        };
        for (e, dir) in named {
            if dir && !recursive {
                return Err(format!(
                    "{} is a directory (use -r to remove it and everything in it)",
                    e.url
                ));
            }
            self.remove(&e).await?;
        }
        Ok(())
    }
}

impl Endpoint {
    /// `to` on this endpoint's server, with its authorization: a path absolute, or relative
    /// to this endpoint's collection (what `mv` takes as a new name).
    pub fn beside(&self, to: &str) -> Result<Endpoint, String> {
        let url = self.url.join(to).map_err(|e| format!("{to}: {e}"))?;
        Ok(Endpoint {
            url,
            authorization: self.authorization.clone(),
        })
    }

    /// Whether `other` is on the same server (host and port).
    pub fn same_server(&self, other: &Endpoint) -> bool {
        let (a, b) = (&self.url, &other.url);
        (a.host_str(), a.port_or_known_default()) == (b.host_str(), b.port_or_known_default())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_paths_ancestors_are_its_collections_outermost_first() {
        let got: Vec<String> = ancestors(&Endpoint::at("https://h:8443/a/b/c"))
            .iter()
            .map(|a| a.url.path().to_string())
            .collect();
        assert_eq!(got, ["/a/", "/a/b/"]);
    }

    #[test]
    fn a_new_name_is_taken_beside_on_the_same_server() {
        let from = Endpoint::at("https://h:8443/a/b/c");
        let to = from.beside("d").unwrap();
        assert_eq!(to.url.as_str(), "https://h:8443/a/b/d");
        assert!(from.same_server(&to));
        assert_eq!(from.beside("/x/y").unwrap().url.path(), "/x/y");
        assert!(!from.same_server(&Endpoint::at("https://h/a/b/d")));
        assert!(!from.same_server(&Endpoint::at("https://g:8443/a/b/d")));
    }
}
