//! `fatpipe check SRC DST`: whether a copy holds what its source does, file by file, without
//! moving data: the source planned as a copy would (trees, globs, filters), each destination
//! looked up, sizes compared, then checksums (the fastest algorithm both ends know; local
//! files hashed here, remote ones by the server's `CKSM`).

use super::copy_command::{plan_files, sides};
use super::copy_options::{CopyOptions, Verify};
use super::failure::misuse;
use super::plan::Job;
use super::sync::RemoteDirs;
use super::verify::verify_copy;
use super::{pool, Credentials, Location};
use serde::Serialize;

/// How one file's copy compares with its source.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// The same size, and the same checksum where one was compared (`ALG:hex`).
    Same(Option<String>),
    /// No file at the destination.
    Missing,
    /// Another size: the source's, the destination's.
    Size(u64, u64),
    /// The same size, another checksum.
    Content(String),
    /// It could not be compared (why).
    Unknown(String),
}

/// One file of a check.
#[derive(Debug, Clone, Serialize)]
pub struct Compared {
    /// The source file.
    pub source: String,
    /// Where its copy should be.
    pub destination: String,
    /// How they compare.
    pub verdict: Verdict,
}

/// Compares each file `srcs` names (as `opts.recursive` and `opts.filter` say) with its copy
/// at `dst`; `size_only` compares no checksums.
pub fn check(
    srcs: &[Location],
    dst: &Location,
    creds: &Credentials,
    opts: &CopyOptions,
    size_only: bool,
) -> anyhow::Result<Vec<Compared>> {
    if *dst == Location::Stdout {
        return Err(misuse("check compares with a local path or an ftp:// URL"));
    }
    let (remote, paths, download) = sides(srcs, dst)?;
    let mut c = pool::session(remote, creds, opts, None)?;
    // Planned as the copy would be, changing nothing (a missing directory is no error).
    let planning = CopyOptions {
        create_dirs: true,
        dry_run: true,
        ..opts.clone()
    };
    let jobs = match plan_files(&mut c, (remote, &paths, download), dst, &planning) {
        Ok(plan) => plan.jobs,
        Err(e) => {
            c.quit();
            return Err(e);
        }
    };
    let verify = if size_only { Verify::Off } else { Verify::On };
    let mut remote_dirs = RemoteDirs::default();
    let mut out = Vec::new();
    for job in jobs {
        out.push(match job {
            Job::Download {
                rpath,
                target: Some(local),
                size,
                ..
            } => {
                // A file named, not listed: it must exist at the source.
                let size = match size {
                    Some(s) => Ok(Some(s)),
                    None => c.size(&rpath),
                };
                let here = std::fs::metadata(&local).ok().filter(|m| m.is_file());
                let verdict = match size {
                    Ok(size) => compare(size, here.map(|m| m.len()), || {
                        verify_copy(&mut c, verify, &rpath, &local, None)
                    }),
                    Err(e) => Verdict::Unknown(format!("the source: {e:#}")),
                };
                Compared {
                    source: rpath,
                    destination: local.display().to_string(),
                    verdict,
                }
            }
            Job::Upload {
                local, rpath, size, ..
            } => {
                let there = remote_dirs.stamp(&mut c, &rpath).and_then(|s| s.size);
                let verdict = compare(Some(size), there, || {
                    verify_copy(&mut c, verify, &rpath, &local, None)
                });
                Compared {
                    source: local.display().to_string(),
                    destination: rpath,
                    verdict,
                }
            }
            Job::Download { .. } => continue,
        });
    }
    c.quit();
    Ok(out)
}

/// The verdict on a source of `size` and a copy of `copy` bytes (`None`: none there), the
/// checksums compared by `sums` when the sizes agree.
fn compare(
    size: Option<u64>,
    copy: Option<u64>,
    sums: impl FnOnce() -> anyhow::Result<Option<String>>,
) -> Verdict {
    let Some(copy) = copy else {
        return Verdict::Missing;
    };
    match size {
        Some(s) if s != copy => return Verdict::Size(s, copy),
        _ => {}
    }
    match sums() {
        Ok(alg) => Verdict::Same(alg),
        Err(e) => {
            let e = format!("{e:#}");
            match e.contains("checksum mismatch") {
                true => Verdict::Content(e),
                false => Verdict::Unknown(e),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_first_then_checksums() {
        let never = || -> anyhow::Result<Option<String>> { panic!("no checksum for this") };
        assert_eq!(compare(Some(5), None, never), Verdict::Missing);
        assert_eq!(compare(Some(5), Some(4), never), Verdict::Size(5, 4));
        let same = || Ok(Some("XXH3:ab".to_string()));
        assert_eq!(
            compare(Some(5), Some(5), same),
            Verdict::Same(Some("XXH3:ab".into()))
        );
        let differs = || {
            Err(anyhow::anyhow!(
                "/x: XXH3 checksum mismatch: a has 1, the server has 2"
            ))
        };
        assert!(matches!(
            compare(None, Some(5), differs),
            Verdict::Content(_)
        ));
        let broken = || Err(anyhow::anyhow!("no reply from h within 1m"));
        assert!(matches!(
            compare(Some(5), Some(5), broken),
            Verdict::Unknown(_)
        ));
    }
}
