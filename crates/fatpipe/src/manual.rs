//! `fatpipe completions SHELL` and `fatpipe man`: shell completions and manual pages generated
//! from the command-line definition itself, so they never drift from what the binary takes.

use anyhow::Context;
use clap_complete::Shell;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// Options of `fatpipe completions`.
#[derive(clap::Args, Debug)]
pub struct CompletionArgs {
    /// The shell: bash, zsh, fish, elvish or powershell. Install, e.g.:
    /// `fatpipe completions bash > /usr/share/bash-completion/completions/fatpipe`.
    shell: Shell,
}

/// Options of `fatpipe man`.
#[derive(clap::Args, Debug)]
pub struct ManArgs {
    /// Write fatpipe.1 and one page per subcommand (fatpipe-cp.1, …) into this directory
    /// (made if missing); without it, fatpipe.1 goes to standard output.
    #[arg(long, value_name = "DIR")]
    dir: Option<PathBuf>,
}

/// Prints the completion script of `cli` for the shell asked.
pub fn completions(a: CompletionArgs, mut cli: clap::Command) -> anyhow::Result<ExitCode> {
    let name = cli.get_name().to_string();
    clap_complete::generate(a.shell, &mut cli, name, &mut std::io::stdout());
    Ok(ExitCode::SUCCESS)
}

/// Writes the manual pages of `cli` (see [`ManArgs`]).
pub fn man(a: ManArgs, cli: clap::Command) -> anyhow::Result<ExitCode> {
    match a.dir {
        None => clap_mangen::Man::new(cli).render(&mut std::io::stdout())?,
        Some(dir) => {
            std::fs::create_dir_all(&dir)
                .with_context(|| format!("cannot make {}", dir.display()))?;
            write_pages(&dir, cli)?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `cmd`'s page and its subcommands' (`fatpipe-testbed-up.1` for `fatpipe testbed up`).
fn write_pages(dir: &Path, cmd: clap::Command) -> anyhow::Result<()> {
    let cmd = cmd.disable_help_subcommand(true);
    let file = dir.join(format!("{}.1", cmd.get_name()));
    let mut out = Vec::new();
    clap_mangen::Man::new(cmd.clone()).render(&mut out)?;
    std::fs::write(&file, out).with_context(|| format!("cannot write {}", file.display()))?;
    for sub in cmd.get_subcommands() {
        let name = format!("{}-{}", cmd.get_name(), sub.get_name());
        write_pages(dir, sub.clone().name(name))?;
    }
    Ok(())
}
