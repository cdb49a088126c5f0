//! `fatpipe passwd`: make a users-file entry, so that no password is stored in clear.

use crate::credentials::PASSWORD_ENV;
use anyhow::bail;
use std::io::{BufRead, IsTerminal};
use std::path::PathBuf;
use std::process::ExitCode;

/// Options of `fatpipe passwd`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The account name.
    name: String,
    /// Append the entry to this users file (created with mode 0600) instead of printing it.
    #[arg(long)]
    file: Option<PathBuf>,
}

/// Reads the password (FATPIPE_PASSWORD, a prompt typed twice, or one line of standard input).
pub fn run(a: Args) -> anyhow::Result<ExitCode> {
    let password = if let Ok(p) = std::env::var(PASSWORD_ENV) {
        p
    } else if std::io::stdin().is_terminal() {
        let p = rpassword::prompt_password(format!("New password for {}: ", a.name))?;
        if rpassword::prompt_password("Again: ")? != p {
            bail!("the passwords differ");
        }
        p
    } else {
        let mut line = String::new();
        std::io::stdin().lock().read_line(&mut line)?;
        line.trim_end_matches(['\r', '\n']).to_string()
    };
    if password.is_empty() {
        bail!("refusing an empty password");
    }
    match a.file {
        Some(path) => {
            let replaced =
                fatpipe_ftp::server::users_file::set_password(&path, &a.name, &password)?;
            let done = if replaced { "replaced" } else { "added" };
            say!("{done} {} in {}", a.name, path.display());
        }
        None => out!(
            "{}",
            fatpipe_ftp::server::auth::users_file_line(&a.name, &password)?
        ),
    }
    Ok(ExitCode::SUCCESS)
}
