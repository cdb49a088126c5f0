//! What `cp` and `check` take the same way: sources then a destination, `-r`, `--include`
//! and `--exclude`, and the login for the server they name.

use crate::credentials;
use fatpipe_ftp::client::failure::misuse;
use fatpipe_ftp::client::filter::Filter;
use fatpipe_ftp::client::{Credentials, Location, RemoteUrl};

/// The files a command is about.
#[derive(clap::Args, Debug)]
pub struct Selection {
    /// Sources, then the destination. A source is a local path or
    /// ftp://[user[:password]@]host[:port]/path, whose last component may be a glob (quote it:
    /// 'ftp://host/data/*.h5'); all sources are local or all on one server. The destination is
    /// a local path, `-` for standard output (cp), or an ftp:// URL; several sources go into it
    /// as a directory.
    #[arg(value_name = "SRC... DST", required = true)]
    pub paths: Vec<String>,
    /// Copy (cp) or compare (check) directory trees.
    #[arg(short = 'r', long)]
    pub recursive: bool,
    /// Only the files matching GLOB: a name (`*.h5`, matched anywhere in a tree) or a path below
    /// the source (`run1/*.h5`; `**` spans directories). Repeatable.
    #[arg(long, value_name = "GLOB")]
    pub include: Vec<String>,
    /// Leave out files and directories matching GLOB (as --include; wins over it). Repeatable.
    #[arg(long, value_name = "GLOB")]
    pub exclude: Vec<String>,
}

impl Selection {
    /// `--include` and `--exclude` as one filter.
    pub fn filter(&self) -> anyhow::Result<Filter> {
        Filter::new(&self.include, &self.exclude)
    }

    /// The sources, the destination and the login (a usage error naming `usage` when fewer
    /// than two paths are given).
    pub fn endpoints(&self, usage: &str) -> anyhow::Result<Endpoints> {
        Endpoints::parse(&self.paths, usage)
    }
}

/// What `cp` and `check` name: sources, then a destination (the last path), and the login
/// for the server among them.
pub struct Endpoints {
    /// The sources.
    pub srcs: Vec<Location>,
    /// The destination.
    pub dst: Location,
    /// The login for the server named ([`Endpoints::remote`]); anonymous when none is.
    pub creds: Credentials,
}

impl Endpoints {
    /// Reads `paths` (at least two: a usage error naming `usage` otherwise).
    pub fn parse(paths: &[String], usage: &str) -> anyhow::Result<Endpoints> {
        let (dst, srcs) = match paths.split_last() {
            Some((dst, srcs)) if !srcs.is_empty() => (dst, srcs),
            _ => return Err(misuse(format!("name a source and a destination: {usage}"))),
        };
        let srcs = srcs
            .iter()
            .map(|s| Location::parse(s))
            .collect::<anyhow::Result<Vec<_>>>()?;
        let dst = Location::parse(dst)?;
        let mut e = Endpoints {
            srcs,
            dst,
            creds: Credentials::anonymous(),
        };
        if let Some(u) = e.remote() {
            e.creds = credentials::for_url(u)?;
        }
        Ok(e)
    }

    /// The first server named, sources first.
    pub fn remote(&self) -> Option<&RemoteUrl> {
        self.srcs.iter().chain([&self.dst]).find_map(|l| match l {
            Location::Remote(u) => Some(u),
            _ => None,
        })
    }
}
