//! One copy as a user names it, HTTPS on one side or both: a file or a tree (`-r`) down, up,
//! or between two servers (a third-party `COPY`), with cp's rules for names: into a local
//! directory, or a collection whose URL ends in a slash, under the source's name; a glob in a
//! source URL's last component copies its matches into a directory.

use super::files::names_a_glob;
use super::{Client, Download, Endpoint, ThirdParty};
use crate::multistatus::Resource;
use fatpipe_ftp::client::copy::FileResult;
use fatpipe_ftp::client::failure::misuse;
use fatpipe_ftp::client::filter::is_glob;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicU64;
use std::sync::Arc;

/// One end of a copy.
#[derive(Debug, Clone)]
pub enum Place {
    /// A local file or directory.
    Local(PathBuf),
    /// A file or collection on an HTTPS server.
    Remote(Endpoint),
}

/// How a copy goes, beyond its two ends.
#[derive(Debug, Clone, Copy)]
pub struct CopyPlan {
    /// Whole trees (`-r`).
    pub tree: bool,
    /// Files moved side by side (a tree's, a glob's matches), each on a connection of its own.
    pub at_once: usize,
    /// How each download goes (its `retry_for` serves uploads and third-party copies too).
    pub download: Download,
    /// How a third-party copy goes.
    pub between: ThirdParty,
}

/// The plain name of the file or collection `e` names (its last component, decoded): what a
/// copy into a directory calls it. A component that decodes to no plain name (`%2F`, `..`)
/// is refused rather than followed out of the directory.
pub fn url_name(e: &Endpoint) -> anyhow::Result<String> {
    let last = e
        .url
        .path_segments()
        .and_then(|mut s| s.rfind(|n| !n.is_empty()));
    let name = last.map(|n| {
        percent_encoding::percent_decode_str(n)
            .decode_utf8_lossy()
            .into_owned()
    });
    let plain = |n: &String| n != "." && n != ".." && !n.contains(['/', '\\', '\0']);
    name.filter(plain)
        .ok_or_else(|| anyhow::anyhow!("{}: names no file", e.url))
}

impl Client {
    /// Data connections the copy `src` → `dst` may have open at once here: none of a
    /// third-party copy's (the servers move its bytes; one for its request), a download's for
    /// each file at once, an upload's one per file.
    pub fn connections_for(&self, src: &Place, dst: &Place, plan: &CopyPlan) -> usize {
        let several = plan.tree
            || matches!(src, Place::Remote(e) if names_a_glob(e))
            || matches!(src, Place::Local(p) if p.file_name().is_some_and(|n| is_glob(&n.to_string_lossy())));
        let files = if several { plan.at_once } else { 1 };
        match (src, dst) {
            (Place::Remote(_), Place::Remote(_)) => 1,
            (Place::Remote(_), Place::Local(_)) => files * self.connections(&plan.download),
            _ => files,
        }
    }

    /// The copy `src` → `dst` as `plan` says, counting bytes into `progress`: a result per
    /// file, or why it could not begin.
    pub async fn copy(
        &self,
        src: &Place,
        dst: &Place,
        plan: &CopyPlan,
        progress: &Arc<AtomicU64>,
    ) -> anyhow::Result<Vec<FileResult>> {
        let (at_once, how) = (plan.at_once, plan.download);
        let retry_for = how.retry_for;
        let failed = anyhow::Error::msg;
        let results = match (src, dst) {
            (Place::Local(_), Place::Local(_)) => {
                anyhow::bail!("neither end is an https:// or davs:// URL")
            }
            (Place::Remote(s), Place::Remote(d)) if plan.tree => {
                // Into a collection's URL with a slash: under the source's name, as cp does.
                let mut d = d.clone();
                if d.url.path().ends_with('/') {
                    if let Ok(name) = url_name(s) {
                        d = d.member(&name, true);
                    }
                }
                let tree = self.third_party_tree(s, &d, plan.between, retry_for, at_once, progress);
                tree.await.map_err(failed)?
            }
            (Place::Remote(s), Place::Remote(d)) => {
                vec![
                    self.third_party_file(s, d, plan.between, retry_for, progress)
                        .await,
                ]
            }
            (Place::Remote(s), Place::Local(dst)) => {
                if let Some(hits) = self.matches(s).await.map_err(failed)? {
                    return self.matched(hits, dst, plan, progress).await;
                }
                // Into an existing directory: under the source's name, as cp does.
                let mut target = dst.clone();
                if target.is_dir() {
                    target.push(url_name(s)?);
                }
                match plan.tree {
                    true => {
                        let tree = self.download_tree(s, &target, how, at_once, progress);
                        tree.await.map_err(failed)?
                    }
                    false => vec![self.download_file(s, &target, how, progress).await],
                }
            }
            (Place::Local(src), Place::Remote(d)) => {
                let mut d = d.clone();
                if d.url.path().ends_with('/') {
                    let name = src
                        .file_name()
                        .ok_or_else(|| anyhow::anyhow!("{}: names no file", src.display()))?;
                    d = d.member(&name.to_string_lossy(), false);
                }
                match plan.tree {
                    true => {
                        let tree = self.upload_tree(src, &d, retry_for, at_once, progress);
                        tree.await.map_err(failed)?
                    }
                    false => vec![self.upload_file(src, &d, retry_for, progress).await],
                }
            }
        };
        Ok(results)
    }

    /// A glob's matches down into the directory `dst`, each under its name: files side by
    /// side, collections as trees with `-r` (left out with a warning without it).
    async fn matched(
        &self,
        hits: Vec<(Endpoint, Resource)>,
        dst: &Path,
        plan: &CopyPlan,
        progress: &Arc<AtomicU64>,
    ) -> anyhow::Result<Vec<FileResult>> {
        if !dst.is_dir() {
            return Err(misuse(format!(
                "{} is not a directory: a glob's matches go into one",
                dst.display()
            )));
        }
        let (at_once, how) = (plan.at_once, plan.download);
        let mut files = Vec::new();
        let mut results = Vec::new();
        for (e, r) in hits {
            let to = dst.join(url_name(&e)?);
            match (r.dir, plan.tree) {
                (false, _) => files.push((e, to)),
                (true, true) => {
                    let tree = self.download_tree(&e, &to, how, at_once, progress);
                    results.extend(tree.await.map_err(anyhow::Error::msg)?);
                }
                (true, false) => tracing::warn!("{}: a directory, left out (use -r)", e.url),
            }
        }
        results.extend(self.download_files(files, how, at_once, progress).await);
        Ok(results)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_url_is_named_by_its_last_plain_component() {
        let name = |u| url_name(&Endpoint::at(u)).ok();
        assert_eq!(name("https://h/a/b%20c.bin").as_deref(), Some("b c.bin"));
        assert_eq!(name("davs://h/a/dir/").as_deref(), Some("dir"));
        // No component, or one that is no plain name in a directory.
        assert_eq!(name("https://h/"), None);
        assert_eq!(name("https://h/a/x%2F..%2Fy"), None);
        assert_eq!(name("https://h/a/%2E%2E"), None);
    }
}
