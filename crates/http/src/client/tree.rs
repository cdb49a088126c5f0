//! Trees over HTTPS (`fatpipe cp -r`): a collection down into a local directory, or a local
//! directory up into a collection, file by file. A listing names what the client writes, so
//! each member must be one plain name directly under the collection listed: a server that
//! answers `../x`, an absolute path or another collection's member is refused, never followed.

use super::{file_result, Client, Download, Endpoint, Got, ThirdParty};
use crate::multistatus::Resource;
use fatpipe_ftp::client::copy::FileResult;
use fatpipe_ftp::client::failure::NOT_BEGUN;
use percent_encoding::{utf8_percent_encode, AsciiSet, NON_ALPHANUMERIC};
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::Duration;

/// What a walk of a collection found: the collections and the files below it, each by the
/// names that lead to it.
type Walked = (Vec<Vec<String>>, Vec<(Endpoint, Vec<String>)>);

/// Trees deeper than this are refused (a link loop on the server, or a hostile listing).
pub const MAX_DEPTH: usize = 64;

/// What a name in a URL path keeps unencoded.
const NAME: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'_')
    .remove(b'.')
    .remove(b'~');

impl Client {
    /// Copies the collection `src` into the local directory `dst` (made, as are the
    /// directories below it), `at_once` files at a time, each as [`Client::download`] does;
    /// a result per file (see [`side_by_side`]), or why the tree could not be walked.
    pub async fn download_tree(
        &self,
        src: &Endpoint,
        dst: &Path,
        how: Download,
        at_once: usize,
        progress: &Arc<AtomicU64>,
    ) -> Result<Vec<FileResult>, String> {
        let (dirs, files) = self.walk(src).await?;
        let local = |names: &[String]| names.iter().fold(dst.to_path_buf(), |p, n| p.join(n));
        for d in std::iter::once(&Vec::new()).chain(&dirs) {
            let here = local(d);
            std::fs::create_dir_all(&here)
                .map_err(|e| format!("cannot make {}: {e}", here.display()))?;
        }
        let files = files.into_iter().map(|(url, names)| (url, local(&names)));
        Ok(self
            .download_files(files.collect(), how, at_once, progress)
            .await)
    }

    /// Downloads each file into its local path, `at_once` at a time, each as
    /// [`Client::download_file`] does: a result per file (see [`side_by_side`]).
    pub async fn download_files(
        &self,
        files: Vec<(Endpoint, PathBuf)>,
        how: Download,
        at_once: usize,
        progress: &Arc<AtomicU64>,
    ) -> Vec<FileResult> {
        let jobs = files.into_iter().map(|(url, to)| {
            let shown = (url.https_url(), to.display().to_string());
            ((url, to), shown)
        });
        side_by_side(jobs.collect(), at_once, async |(url, local)| {
            self.download_file(&url, &local, how, progress).await
        })
        .await
    }

    /// Copies the collection `src` on one server into the collection `dst` on another (made,
    /// as are those below it), each file a third-party copy as `how` says (a copy whose
    /// connection broke tried again for `retry_for`), `at_once` at a time. A result per file,
    /// as for a download.
    pub async fn third_party_tree(
        &self,
        src: &Endpoint,
        dst: &Endpoint,
        how: ThirdParty,
        retry_for: Duration,
        at_once: usize,
        progress: &Arc<AtomicU64>,
    ) -> Result<Vec<FileResult>, String> {
        let (dirs, files) = self.walk(src).await?;
        let at = |names: &[String], dir: bool| {
            let last = names.len().saturating_sub(1);
            let walk = names.iter().enumerate();
            walk.fold(collection(dst), |e, (i, n)| e.member(n, dir || i < last))
        };
        for d in std::iter::once(&Vec::new()).chain(&dirs) {
            self.make_dir(&at(d, true), true).await?;
        }
        let jobs = files.into_iter().map(|(url, names)| {
            let to = at(&names, false);
            let shown = (url.https_url(), to.https_url());
            ((url, to), shown)
        });
        Ok(side_by_side(jobs.collect(), at_once, async |(from, to)| {
            (self.third_party_file(&from, &to, how, retry_for, progress)).await
        })
        .await)
    }

    /// Every collection below the collection `src` and every file, each with the names that
    /// lead to it from there, collections before what they hold; a listing's members must be
    /// plain names directly in it, and the tree at most [`MAX_DEPTH`] deep.
    async fn walk(&self, src: &Endpoint) -> Result<Walked, String> {
        let (mut dirs, mut files) = (Vec::new(), Vec::new());
        let mut todo = vec![(collection(src), Vec::new())];
        while let Some((dir, names)) = todo.pop() {
            if names.len() > MAX_DEPTH {
                return Err(format!("{}: deeper than {MAX_DEPTH} levels", dir.url));
            }
            for r in &self.list(&dir).await?.members {
                let name = member(&dir, r)?;
                let mut below = names.clone();
                below.push(name.clone());
                let url = dir.member(&name, r.dir);
                if r.dir {
                    dirs.push(below.clone());
                    todo.push((url, below));
                } else {
                    files.push((url, below));
                }
            }
        }
        Ok((dirs, files))
    }

    /// Copies the local directory `src` into the collection `dst` (made, as are those below
    /// it), `at_once` files at a time, each as [`Client::upload`] does; what is neither a file
    /// nor a directory is left out with a warning; a file whose connection broke is sent again
    /// for `retry_for`. A result per file, as for a download.
    pub async fn upload_tree(
        &self,
        src: &Path,
        dst: &Endpoint,
        retry_for: Duration,
        at_once: usize,
        progress: &Arc<AtomicU64>,
    ) -> Result<Vec<FileResult>, String> {
        let mut files = Vec::new();
        let mut todo = vec![(src.to_path_buf(), collection(dst), 0)];
        while let Some((here, dir, depth)) = todo.pop() {
            if depth > MAX_DEPTH {
                return Err(format!(
                    "{}: deeper than {MAX_DEPTH} levels",
                    here.display()
                ));
            }
            self.make_dir(&dir, true).await?;
            let mut entries: Vec<PathBuf> = std::fs::read_dir(&here)
                .and_then(|d| d.map(|e| e.map(|e| e.path())).collect())
                .map_err(|e| format!("cannot read {}: {e}", here.display()))?;
            entries.sort();
            for path in entries {
                let name = path.file_name().map(|n| n.to_string_lossy().into_owned());
                let Some(name) = name else { continue };
                let meta = std::fs::metadata(&path)
                    .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
                if meta.is_dir() {
                    todo.push((path, dir.member(&name, true), depth + 1));
                } else if meta.is_file() {
                    files.push((path, dir.member(&name, false)));
                } else {
                    tracing::warn!(
                        "{}: neither a file nor a directory, left out",
                        path.display()
                    );
                }
            }
        }
        let jobs = files.into_iter().map(|(path, url)| {
            let names = (path.display().to_string(), url.https_url());
            ((path, url), names)
        });
        Ok(side_by_side(jobs.collect(), at_once, async |(path, url)| {
            self.upload_file(&path, &url, retry_for, progress).await
        })
        .await)
    }
}

/// Runs `copy` on every job (each with its source's and destination's names), `at_once` at a
/// time: a result per job, in the order they ended. The first failure ends the copy: the jobs
/// in flight stop (their partial files discarded as they drop) and they and those not begun
/// are results that say so.
async fn side_by_side<J>(
    jobs: Vec<(J, (String, String))>,
    at_once: usize,
    copy: impl AsyncFn(J) -> FileResult,
) -> Vec<FileResult> {
    use futures_util::StreamExt;
    let copy = &copy;
    let names: Vec<(String, String)> = jobs.iter().map(|(_, n)| n.clone()).collect();
    let mut done = vec![false; jobs.len()];
    let mut results = Vec::new();
    let runs = jobs
        .into_iter()
        .enumerate()
        .map(|(i, (job, _))| async move { (i, copy(job).await) });
    let mut ending = futures_util::stream::iter(runs).buffer_unordered(at_once.max(1));
    let mut cause = None;
    while let Some((i, r)) = ending.next().await {
        done[i] = true;
        cause = r.error.clone();
        results.push(r);
        if cause.is_some() {
            break;
        }
    }
    drop(ending);
    let Some(cause) = cause else {
        return results;
    };
    let left = names.into_iter().zip(done).filter(|(_, done)| !done);
    for ((src, dst), _) in left {
        let mut r = file_result(&src, &dst, std::time::Instant::now(), Ok(Got::new(0)));
        r.data_seconds = None;
        r.fail_with(format!("{NOT_BEGUN}: another file failed: {cause}"));
        results.push(r);
    }
    results
}

/// `e` as a collection: its URL ending in `/`.
fn collection(e: &Endpoint) -> Endpoint {
    let mut c = e.clone();
    if !c.url.path().ends_with('/') {
        let path = format!("{}/", c.url.path());
        c.url.set_path(&path);
    }
    c
}

impl Endpoint {
    /// `name` (any characters: encoded here) in this collection, itself a collection when
    /// `collection`.
    pub fn member(&self, name: &str, collection: bool) -> Endpoint {
        let mut c = self.clone();
        let slash = if collection { "/" } else { "" };
        let dir = self.url.path().trim_end_matches('/');
        let path = format!("{dir}/{}{slash}", utf8_percent_encode(name, NAME));
        c.url.set_path(&path);
        c
    }
}

/// The name of `r`, a member of the collection `dir` as its listing gave it: one plain
/// component directly below `dir`'s path; anything else is an error.
fn member(dir: &Endpoint, r: &Resource) -> Result<String, String> {
    let base = percent_encoding::percent_decode_str(dir.url.path()).decode_utf8_lossy();
    let name = r
        .path
        .strip_prefix(base.as_ref())
        .map(|n| n.trim_end_matches('/'))
        .filter(|n| !n.is_empty() && *n != "." && *n != ".." && !n.contains(['/', '\\', '\0']));
    name.map(str::to_string).ok_or_else(|| {
        format!(
            "{}: the server listed {:?}, not a name in it; nothing of it is copied",
            dir.url, r.path
        )
    })
}

/// The plain name of the member `r` of the collection `dir`, or `None` (see [`member_of`]).
pub(super) fn member_name(dir: &Endpoint, r: &Resource) -> Option<String> {
    member(dir, r).ok()
}

/// The member `r` of the collection `dir` that a listing named, as an endpoint: only a plain
/// name directly in `dir` (see the module's text), else why not.
pub fn member_of(dir: &Endpoint, r: &Resource) -> Result<Endpoint, String> {
    member(dir, r).map(|name| dir.member(&name, r.dir))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn listed(path: &str) -> Resource {
        Resource {
            path: path.into(),
            ..Resource::default()
        }
    }

    #[test]
    fn members_are_plain_names_directly_below_the_collection() {
        let dir = Endpoint::at("https://h/d%20x/");
        assert_eq!(member(&dir, &listed("/d x/f")), Ok("f".into()));
        assert_eq!(member(&dir, &listed("/d x/sub/")), Ok("sub".into()));
        for hostile in [
            "/d x/../etc",
            "/d x/a/b",
            "/etc/passwd",
            "/d x/",
            "/d x/..",
            "/d xy",
        ] {
            assert!(member(&dir, &listed(hostile)).is_err(), "{hostile}");
        }
    }

    #[test]
    fn children_are_encoded_once() {
        let dir = collection(&Endpoint::at("https://h/a b"));
        assert_eq!(dir.url.path(), "/a%20b/");
        assert_eq!(dir.member("x y#?", false).url.path(), "/a%20b/x%20y%23%3F");
        assert_eq!(dir.member("s", true).url.path(), "/a%20b/s/");
    }
}
