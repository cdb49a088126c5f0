//! What a copy moves, found before any data does: the sources named (globs and a `--from` list
//! expanded), trees walked, `--include`/`--exclude` applied, each file's destination chosen and
//! the directories it needs made. Knowing every file and its size first gives one progress bar
//! and one ETA over the whole copy.

use super::failure::misuse;
use super::filter::{glob_names, is_glob, Filter};
use super::Connection;
use anyhow::{bail, Context};
use fatpipe_proto::listing::{Entry, EntryKind};
use std::collections::BTreeSet;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// Trees deeper than this are refused (a link loop on a server, or a hostile listing).
const MAX_DEPTH: usize = 64;

/// One file of a copy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Job {
    /// A remote file to a local one (`None`: standard output).
    Download {
        /// The remote path.
        rpath: String,
        /// Where it goes.
        target: Option<PathBuf>,
        /// Its size, when the server told.
        size: Option<u64>,
        /// Its modification time (Unix seconds), when the server told.
        modified: Option<i64>,
    },
    /// A local file to a remote path.
    Upload {
        /// The local file.
        local: PathBuf,
        /// Where it goes on the server.
        rpath: String,
        /// Its size.
        size: u64,
        /// Its modification time (Unix seconds).
        modified: i64,
    },
}

impl Job {
    /// Whether the file goes to the server.
    pub fn is_upload(&self) -> bool {
        matches!(self, Job::Upload { .. })
    }

    /// The file's size, when known.
    pub fn size(&self) -> Option<u64> {
        match self {
            Job::Download { size, .. } => *size,
            Job::Upload { size, .. } => Some(*size),
        }
    }
}

/// A copy's plan: its files, and the directories its trees walked (what `--delete` looks in).
#[derive(Debug, Default)]
pub struct Planned {
    /// The files to copy, in order.
    pub jobs: Vec<Job>,
    /// Each destination directory a tree walk reached, with every name its source directory
    /// holds (filtered out or not).
    pub walked: Vec<Walked>,
}

/// A destination directory of a tree, and the names its source holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Walked {
    /// Where the source directory's files go.
    pub dest: Dest,
    /// The names in the source directory.
    pub names: BTreeSet<String>,
}

/// A directory at the destination.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Dest {
    /// On this machine (a download).
    Local(PathBuf),
    /// On the server (an upload).
    Remote(String),
}

/// What the user named and how the copy treats it.
#[derive(Debug, Clone, Copy)]
pub struct Request<'a> {
    /// Remote paths (a download) or local paths (an upload); the last component may be a glob.
    pub sources: &'a [String],
    /// `--from`: names relative to the one source, which is a directory.
    pub from: Option<&'a [String]>,
    /// Copy directory trees.
    pub recursive: bool,
    /// Make missing directories at the destination.
    pub create_dirs: bool,
    /// Which files move.
    pub filter: &'a Filter,
    /// Plan only: no directory is made (`--dry-run`).
    pub dry_run: bool,
}

impl Request<'_> {
    /// Several files go into one destination directory (several sources, a glob, a list).
    fn many(&self) -> bool {
        self.from.is_some()
            || self.sources.len() > 1
            || self.sources.iter().any(|s| is_glob(base_name(s)))
    }

    /// Whether missing directories at the destination are made: asked for, a tree copy, or
    /// several files going into one directory.
    fn creates(&self, many: bool) -> bool {
        self.create_dirs || self.recursive || many
    }

    /// The sources as (path, name relative to the copy's source); the listing's entry when a
    /// glob found it. `list` reads a directory (remote or local).
    fn expand(
        &self,
        mut list: impl FnMut(&str) -> anyhow::Result<Vec<Entry>>,
    ) -> anyhow::Result<Vec<(String, String, Option<Entry>)>> {
        if let Some(names) = self.from {
            let [dir] = self.sources else {
                return Err(misuse(
                    "--from takes one source: the directory its names are relative to",
                ));
            };
            return names
                .iter()
                .map(|n| {
                    let rel = n.trim_matches('/');
                    if rel.split('/').any(|c| c == ".." || c == ".") {
                        return Err(misuse(format!("--from: {n:?} leaves the source directory")));
                    }
                    Ok((join(dir, rel), rel.to_string(), None))
                })
                .collect();
        }
        let mut out = Vec::new();
        for s in self.sources {
            let name = base_name(s);
            if !is_glob(name) {
                out.push((s.clone(), name.to_string(), None));
                continue;
            }
            let dir = parent(s);
            let entries = list(&dir)?;
            let names = glob_names(name, entries.iter().map(|e| e.name.as_str()))?;
            if names.is_empty() {
                bail!("nothing matches {s}");
            }
            for e in entries.iter().filter(|e| names.contains(&e.name.as_str())) {
                out.push((join(&dir, &e.name), e.name.clone(), Some(e.clone())));
            }
        }
        Ok(out)
    }

    /// A directory named as a source: walked with `-r`, else an error (one source) or skipped
    /// with a warning (one of several).
    fn walks(&self, path: &str) -> anyhow::Result<bool> {
        if self.recursive {
            Ok(true)
        } else if self.many() {
            tracing::warn!("skipping {path}: a directory (use -r to copy trees)");
            Ok(false)
        } else {
            Err(misuse(format!(
                "{path} is a directory (use -r to copy a tree)"
            )))
        }
    }
}

/// The files of a download into `dst` (`None`: standard output), with the local directories
/// they need already made.
pub fn download(
    c: &mut Connection,
    req: &Request<'_>,
    dst: Option<&Path>,
) -> anyhow::Result<Planned> {
    let items = req.expand(|dir| c.list(dir))?;
    let many = req.many();
    let create = req.creates(many);
    if dst.is_none() && many {
        return Err(misuse("several files cannot go to standard output"));
    }
    // Into a directory: several files, or one named by an existing directory or a `dir/`.
    let into_dir = dst.is_some_and(|d| many || d.is_dir() || d.to_string_lossy().ends_with('/'));
    if let (Some(d), true) = (dst, into_dir) {
        local_dir(d, create, req.dry_run)?;
    }
    let mut plan = Planned::default();
    for (rpath, rel, entry) in items {
        let (kind, size, modified) = match entry {
            Some(e) => (e.kind, Some(e.size), Some(e.modified)),
            None => {
                let (size, modified) = c.size_and_modified(&rpath)?;
                if size.is_none() && c.is_dir(&rpath)? {
                    (EntryKind::Dir, None, None)
                } else {
                    (EntryKind::File, size, modified)
                }
            }
        };
        let target = dst.map(|d| match into_dir {
            true => d.join(&rel),
            false => d.to_path_buf(),
        });
        match (kind, target) {
            (EntryKind::Dir, None) => {
                return Err(misuse(format!(
                    "{rpath} is a directory; it cannot go to standard output"
                )))
            }
            (EntryKind::Dir, Some(t)) => {
                if req.walks(&rpath)? {
                    // Filters see paths below the source named (or the listed name).
                    let prefix = if many { rel.as_str() } else { "" };
                    walk_remote(c, req, &rpath, &t, prefix, 0, &mut plan)?;
                }
            }
            (EntryKind::File, target) => {
                if !req.filter.keeps_file(&rel) {
                    continue;
                }
                if let Some(parent) = target.as_deref().and_then(Path::parent) {
                    local_dir(parent, create, req.dry_run)?;
                }
                plan.jobs.push(Job::Download {
                    rpath,
                    target,
                    size,
                    modified,
                });
            }
            _ => tracing::info!("skipping {rpath}: not a file or directory"),
        }
    }
    Ok(plan)
}

/// The remote paths `path` names: itself, or where its last component is a glob, the entries
/// of its directory that match (none is an error), for `ls` and `rm`.
pub fn remote_matches(c: &mut Connection, path: &str) -> anyhow::Result<Vec<String>> {
    let sources = [path.to_string()];
    let req = Request {
        sources: &sources,
        from: None,
        recursive: false,
        create_dirs: false,
        filter: &Filter::default(),
        dry_run: true,
    };
    Ok(req
        .expand(|dir| c.list(dir))?
        .into_iter()
        .map(|(p, ..)| p)
        .collect())
}

/// Makes sure the local directory `dir` exists: made with its parents when `create` (not in a
/// dry run), else an error that says how.
fn local_dir(dir: &Path, create: bool, dry_run: bool) -> anyhow::Result<()> {
    if dir.as_os_str().is_empty() || dir.is_dir() || (create && dry_run) {
        return Ok(());
    }
    if !create {
        bail!(
            "local directory {} does not exist (add --create-dirs to make it)",
            dir.display()
        );
    }
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))
}

/// Walks the remote tree `rdir` into `ldir`, making the local directories.
fn walk_remote(
    c: &mut Connection,
    req: &Request<'_>,
    rdir: &str,
    ldir: &Path,
    rel: &str,
    depth: usize,
    plan: &mut Planned,
) -> anyhow::Result<()> {
    if depth > MAX_DEPTH {
        bail!("{rdir}: tree deeper than {MAX_DEPTH} levels");
    }
    let filter = req.filter;
    if !req.dry_run {
        std::fs::create_dir_all(ldir)
            .with_context(|| format!("cannot create {}", ldir.display()))?;
    }
    let entries = c.list(rdir)?;
    plan.walked.push(Walked {
        dest: Dest::Local(ldir.to_path_buf()),
        names: entries.iter().map(|e| e.name.clone()).collect(),
    });
    for e in entries {
        if e.name.contains('/') || e.name == "." || e.name == ".." {
            continue; // never let a listing name a path outside the target
        }
        let rpath = join(rdir, &e.name);
        let erel = join(rel, &e.name);
        let target = ldir.join(&e.name);
        match e.kind {
            EntryKind::Dir if filter.keeps_dir(&erel) => {
                walk_remote(c, req, &rpath, &target, &erel, depth + 1, plan)?
            }
            EntryKind::File if filter.keeps_file(&erel) => plan.jobs.push(Job::Download {
                rpath,
                target: Some(target),
                size: Some(e.size),
                modified: Some(e.modified),
            }),
            EntryKind::Dir | EntryKind::File => {}
            EntryKind::Link | EntryKind::Other => {
                tracing::info!("skipping {rpath}: not a file or directory")
            }
        }
    }
    Ok(())
}

/// The files of an upload to `rdst`, with the remote directories they need already made.
pub fn upload(c: &mut Connection, req: &Request<'_>, rdst: &str) -> anyhow::Result<Planned> {
    let items = req.expand(local_list)?;
    let many = req.many();
    let create = req.creates(many);
    let mut made = BTreeSet::new();
    let into_dir = if many || (rdst.ends_with('/') && rdst != "/") {
        remote_dir(
            c,
            rdst.trim_end_matches('/'),
            (create, req.dry_run),
            &mut made,
        )?;
        true
    } else if c.is_dir(rdst)? {
        made.insert(rdst.to_string());
        true
    } else {
        false
    };
    let mut plan = Planned::default();
    for (path, rel, _) in items {
        let local = PathBuf::from(&path);
        let meta = std::fs::metadata(&local)
            .with_context(|| format!("cannot read {}", local.display()))?;
        let name = if many { rel.as_str() } else { base_name(&path) };
        let target = if into_dir {
            join(rdst, name)
        } else {
            rdst.to_string()
        };
        if meta.is_dir() {
            if req.walks(&path)? {
                let prefix = if many { rel.as_str() } else { "" };
                walk_local(c, req, &local, &target, prefix, 0, &mut plan)?;
            }
        } else if meta.is_file() {
            if !req.filter.keeps_file(&rel) {
                continue;
            }
            remote_dir(c, &parent(&target), (create, req.dry_run), &mut made)?;
            plan.jobs.push(Job::Upload {
                local,
                rpath: target,
                size: meta.len(),
                modified: meta.mtime(),
            });
        } else {
            tracing::info!("skipping {path}: not a file or directory");
        }
    }
    Ok(plan)
}

/// Makes sure the remote directory `dir` exists: made with its parents when `create`, else an
/// error that says how (a dry run makes nothing). `made` remembers the directories already
/// seen to exist.
fn remote_dir(
    c: &mut Connection,
    dir: &str,
    (create, dry_run): (bool, bool),
    made: &mut BTreeSet<String>,
) -> anyhow::Result<()> {
    if dir.is_empty() || dir == "/" || made.contains(dir) {
        return Ok(());
    }
    if !c.is_dir(dir)? {
        if !create {
            bail!("remote directory {dir} does not exist (add --create-dirs to make it, or `fatpipe mkdir`)");
        }
        if !dry_run {
            c.mkdir_all(dir)?;
        }
    }
    made.insert(dir.to_string());
    Ok(())
}

/// Walks the local tree `ldir` into `rdir`, making the remote directories.
fn walk_local(
    c: &mut Connection,
    req: &Request<'_>,
    ldir: &Path,
    rdir: &str,
    rel: &str,
    depth: usize,
    plan: &mut Planned,
) -> anyhow::Result<()> {
    if depth > MAX_DEPTH {
        bail!("{}: tree deeper than {MAX_DEPTH} levels", ldir.display());
    }
    let filter = req.filter;
    if !req.dry_run {
        c.mkdir_all(rdir)?;
    }
    let entries = local_list(&ldir.to_string_lossy())?;
    plan.walked.push(Walked {
        dest: Dest::Remote(rdir.to_string()),
        names: entries.iter().map(|e| e.name.clone()).collect(),
    });
    for e in entries {
        let path = ldir.join(&e.name);
        let rpath = join(rdir, &e.name);
        let erel = join(rel, &e.name);
        match e.kind {
            EntryKind::Dir if filter.keeps_dir(&erel) => {
                walk_local(c, req, &path, &rpath, &erel, depth + 1, plan)?
            }
            EntryKind::File if filter.keeps_file(&erel) => plan.jobs.push(Job::Upload {
                local: path,
                rpath,
                size: e.size,
                modified: e.modified,
            }),
            EntryKind::Dir | EntryKind::File => {}
            _ => tracing::info!("skipping {}: not a file or directory", path.display()),
        }
    }
    Ok(())
}

/// A local directory's entries (links followed), sorted by name; names that are not UTF-8
/// are skipped with a warning.
fn local_list(dir: &str) -> anyhow::Result<Vec<Entry>> {
    let dir = if dir.is_empty() { "." } else { dir };
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).with_context(|| format!("cannot list {dir}"))? {
        let path = e?.path();
        let Some(name) = path.file_name().and_then(|n| n.to_str()) else {
            tracing::warn!("skipping {}: name is not UTF-8", path.display());
            continue;
        };
        let (kind, size, modified) = match std::fs::metadata(&path) {
            Ok(m) if m.is_dir() => (EntryKind::Dir, 0, m.mtime()),
            Ok(m) if m.is_file() => (EntryKind::File, m.len(), m.mtime()),
            _ => (EntryKind::Other, 0, 0),
        };
        out.push(Entry {
            name: name.to_string(),
            kind,
            size,
            modified,
            mode: 0,
        });
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(out)
}

/// The last component of a `/`-separated path.
pub fn base_name(path: &str) -> &str {
    path.trim_end_matches('/').rsplit('/').next().unwrap_or("")
}

/// Everything before the last component (`""` for a bare name, `/` for a top-level one).
fn parent(path: &str) -> String {
    match path.trim_end_matches('/').rsplit_once('/') {
        Some(("", _)) => "/".into(),
        Some((p, _)) => p.into(),
        None => String::new(),
    }
}

/// `dir/name`, with no doubled `/` (and just `name` when `dir` is empty).
fn join(dir: &str, name: &str) -> String {
    if dir.is_empty() {
        name.to_string()
    } else {
        format!("{}/{name}", dir.trim_end_matches('/'))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_split_and_join() {
        assert_eq!(base_name("/a/b/"), "b");
        assert_eq!(parent("/a/b"), "/a");
        assert_eq!(parent("/a"), "/");
        assert_eq!(parent("a"), "");
        assert_eq!(join("/", "a"), "/a");
        assert_eq!(join("", "a"), "a");
        assert_eq!(join("/x/", "a/b"), "/x/a/b");
    }

    #[test]
    fn local_sources_expand_globs_and_lists() {
        let dir = tempfile::tempdir().unwrap();
        for n in ["a.h5", "b.h5", "c.txt"] {
            std::fs::write(dir.path().join(n), n).unwrap();
        }
        let d = dir.path().to_string_lossy().to_string();
        let filter = Filter::default();
        let sources = [format!("{d}/*.h5")];
        let req = Request {
            sources: &sources,
            from: None,
            recursive: false,
            create_dirs: false,
            filter: &filter,
            dry_run: false,
        };
        let got: Vec<String> = req
            .expand(local_list)
            .unwrap()
            .into_iter()
            .map(|(_, rel, _)| rel)
            .collect();
        assert_eq!(got, ["a.h5", "b.h5"]);
        assert!(req.many());
        let sources = [format!("{d}/*.nc")];
        let none = Request {
            sources: &sources,
            ..req
        };
        assert!(none.expand(local_list).is_err());
        let names = ["sub/x".to_string(), "../etc/passwd".to_string()];
        let listed = Request {
            sources: std::slice::from_ref(&d),
            from: Some(&names[..1]),
            ..req
        };
        let got = listed.expand(local_list).unwrap();
        assert_eq!(got[0].0, format!("{d}/sub/x"));
        assert_eq!(got[0].1, "sub/x");
        let escaping = Request {
            from: Some(&names[1..]),
            ..listed
        };
        assert!(escaping.expand(local_list).is_err());
    }
}
