//! `fatpipe serve --config FILE`: the options a service keeps, in TOML, one key per long option
//! (`root = "/srv/data"`, `passive-ports = "50000-50999"`, `anonymous = true`, `user = ["a:b"]`).
//! The file is read into arguments placed before the command line's, so that an option given
//! on the command line wins over the file's; clap then checks them all alike.

use anyhow::{bail, Context};
use std::ffi::OsString;
use std::path::Path;

/// `args` with the options of the `--config` file of a `serve` command inserted after `serve`;
/// other commands' arguments as they are.
pub fn expand(args: Vec<OsString>) -> anyhow::Result<Vec<OsString>> {
    // The subcommand: the first argument after the program that is not an option (-v).
    let Some(at) = args
        .iter()
        .skip(1)
        .position(|a| !a.to_string_lossy().starts_with('-'))
        .map(|i| i + 1)
    else {
        return Ok(args);
    };
    if args[at] != "serve" {
        return Ok(args);
    }
    let mut file = None;
    let mut rest = args[at + 1..].iter();
    while let Some(a) = rest.next() {
        let a = a.to_string_lossy();
        if let Some(v) = a.strip_prefix("--config=") {
            file = Some(OsString::from(v));
        } else if a == "--config" {
            file = rest.next().cloned();
        }
    }
    let Some(file) = file else {
        return Ok(args);
    };
    let text = std::fs::read_to_string(&file)
        .with_context(|| format!("cannot read --config {}", Path::new(&file).display()))?;
    let options =
        arguments(&text).with_context(|| format!("--config {}", Path::new(&file).display()))?;
    let mut out = args[..=at].to_vec();
    out.extend(options.into_iter().map(OsString::from));
    out.extend(args[at + 1..].iter().cloned());
    Ok(out)
}

/// The command-line arguments a TOML text of options stands for.
fn arguments(text: &str) -> anyhow::Result<Vec<String>> {
    let table: toml::Table = text.parse().context("not valid TOML")?;
    let mut out = Vec::new();
    for (key, value) in table {
        let option_like = key.starts_with(|c: char| c.is_ascii_alphanumeric())
            && key.chars().all(|c| c.is_ascii_alphanumeric() || c == '-');
        if key == "config" || !option_like {
            bail!("{key:?} is not an option of fatpipe serve");
        }
        let flag = format!("--{key}");
        let values = match value {
            toml::Value::Array(items) => items,
            v => vec![v],
        };
        for v in values {
            match v {
                toml::Value::Boolean(true) => out.push(flag.clone()),
                toml::Value::Boolean(false) => {}
                toml::Value::String(s) => out.extend([flag.clone(), s]),
                toml::Value::Integer(n) => out.extend([flag.clone(), n.to_string()]),
                toml::Value::Float(x) => out.extend([flag.clone(), x.to_string()]),
                other => bail!("{key}: {other} is not a value an option takes"),
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn os(v: &[&str]) -> Vec<OsString> {
        v.iter().map(OsString::from).collect()
    }

    #[test]
    fn a_config_file_becomes_options_before_the_command_lines() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("serve.toml");
        std::fs::write(
            &file,
            "root = \"/srv/x\"\nanonymous = true\nrequire-tls = false\nmax-sessions = 8\nuser = [\"a:b\", \"c:d\"]\n",
        )
        .unwrap();
        let f = file.to_str().unwrap();
        let got = expand(os(&[
            "fatpipe",
            "-v",
            "serve",
            "--config",
            f,
            "--max-sessions",
            "9",
        ]))
        .unwrap();
        assert_eq!(
            got,
            os(&[
                "fatpipe",
                "-v",
                "serve",
                "--anonymous",
                "--max-sessions",
                "8",
                "--root",
                "/srv/x",
                "--user",
                "a:b",
                "--user",
                "c:d",
                "--config",
                f,
                "--max-sessions",
                "9"
            ])
        );
        // Other commands, and serve without --config, are left alone.
        let cp = os(&["fatpipe", "cp", "--config", f, "a", "b"]);
        assert_eq!(expand(cp.clone()).unwrap(), cp);
        assert!(expand(os(&["fatpipe", "serve", "--config=/nonexistent"])).is_err());
        assert!(arguments("[section]\nx = 1").is_err());
        assert!(arguments("\"--evil\" = true").is_err());
    }
}
