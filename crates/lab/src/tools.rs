//! The tools the lab runs: real baselines (iperf3, curl from vsftpd, globus-url-copy from
//! globus-gridftp-server), fatpipe itself, and any pair of commands a user gives. Every preset
//! moves the file from side b (server) to side a (client), so the data direction is b → a.

use std::path::Path;

/// Address of the server side (b).
pub const SERVER_ADDR: &str = "198.18.0.2";

/// A server command for side b and a client command for side a (shell command lines).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Case {
    /// Name in reports.
    pub label: String,
    /// Started in side b before the client; killed after it (empty: no server).
    pub server: String,
    /// TCP or UDP port the server listens on; the client starts once something is bound there.
    pub port: u16,
    /// Run in side a; the run is the client's lifetime and must exit 0.
    pub client: String,
}

/// Where a case finds its data and scratch space.
#[derive(Debug, Clone)]
pub struct Context<'a> {
    /// Directory holding the test file `file`, readable by everyone.
    pub dir: &'a Path,
    /// Size of the test file in bytes.
    pub bytes: u64,
    /// Path of the `fatpipe` binary.
    pub fatpipe: &'a Path,
    /// Extra options for both fatpipe commands (e.g. `--no-force-buffers`, `--stats F`).
    pub fatpipe_flags: &'a str,
}

/// The names `preset` knows; `fatpipe:MODE` also runs fatpipe with `--tuning MODE`, and
/// `fatpipe:MODE/pN` (or `/pauto`) with `-p N` too; `fatpipe-udp` runs `cp --transport udp`,
/// `fatpipe-udp:CONTROL` with `--udp-rate-control CONTROL`.
pub const PRESETS: &[&str] = &[
    "iperf3",
    "curl",
    "globus",
    "globus-p4",
    "globus-p8",
    "fatpipe",
];

/// A named baseline or fatpipe, set up for `ctx`.
pub fn preset(name: &str, ctx: &Context) -> Option<Case> {
    let dir = ctx.dir.display();
    let file = format!("{dir}/file");
    let globus = |label: &str, opts: &str| {
        Case {
        label: label.into(),
        server: format!(
            "exec globus-gridftp-server -aa -anonymous-user nobody -p 2811 -control-interface {SERVER_ADDR} -data-interface {SERVER_ADDR} -d error"
        ),
        port: 2811,
        client: format!("exec globus-url-copy {opts} ftp://{SERVER_ADDR}:2811{file} file:///dev/null"),
    }
    };
    // `opts` go to both ends, `client_opts` to `cp` only.
    let fatpipe = |label: &str, opts: &str, client_opts: &str| {
        let (exe, flags) = (ctx.fatpipe.display(), ctx.fatpipe_flags);
        Case {
            label: label.into(),
            server: format!("exec {exe} serve --anonymous --listen {SERVER_ADDR}:2812 --root {dir} {opts} {flags}"),
            port: 2812,
            client: format!(
                "exec {exe} cp --quiet ftp://{SERVER_ADDR}:2812/file /dev/null {}",
                [opts, client_opts, flags]
                    .iter()
                    .filter(|o| !o.is_empty())
                    .copied()
                    .collect::<Vec<_>>()
                    .join(" ")
            ),
        }
    };
    Some(match name {
        "iperf3" => Case {
            label: "iperf3 (1 stream, -R)".into(),
            server: "exec iperf3 -s -1".into(),
            port: 5201,
            client: format!("exec iperf3 -c {SERVER_ADDR} -R -n {} >/dev/null", ctx.bytes),
        },
        "curl" => Case {
            label: "curl from vsftpd".into(),
            server: format!(
                "printf 'listen=YES\\nlisten_ipv6=NO\\nlisten_address={SERVER_ADDR}\\nlisten_port=2121\\nbackground=NO\\nanonymous_enable=YES\\nlocal_enable=NO\\nanon_root={dir}\\nno_anon_password=YES\\nseccomp_sandbox=NO\\nsecure_chroot_dir=/var/run/vsftpd/empty\\nxferlog_enable=NO\\n' > {dir}/vsftpd.conf && mkdir -p /var/run/vsftpd/empty && exec vsftpd {dir}/vsftpd.conf"
            ),
            port: 2121,
            client: format!("exec curl -sS --fail -o /dev/null ftp://{SERVER_ADDR}:2121/file"),
        },
        "globus" => globus("globus-url-copy (stream)", ""),
        "globus-p4" => globus("globus-url-copy -fast -p 4", "-fast -p 4"),
        "globus-p8" => globus("globus-url-copy -p 8 -tcp-bs 16M", "-fast -p 8 -tcp-bs 16M"),
        "fatpipe" => fatpipe("fatpipe cp", "", ""),
        _ if name.starts_with("fatpipe-udp") => {
            let control = name.strip_prefix("fatpipe-udp:").unwrap_or("default");
            let opts = format!("--transport udp --udp-rate-control {control}");
            fatpipe(&format!("fatpipe cp {opts}"), "", &opts)
        }
        _ => {
            let spec = name.strip_prefix("fatpipe:")?;
            let (mode, streams) = match spec.split_once("/p") {
                Some((m, p)) => (m, Some(p)),
                None => (spec, None),
            };
            let opts = format!("--tuning {mode}");
            let client_opts = streams.map_or(String::new(), |p| format!("-p {p}"));
            fatpipe(
                format!("fatpipe cp {opts} {client_opts}").trim_end(),
                &opts,
                &client_opts,
            )
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_preset_is_defined_and_reads_the_test_file() {
        let ctx = Context {
            dir: Path::new("/tmp/lab"),
            bytes: 1000,
            fatpipe: Path::new("/bin/fatpipe"),
            fatpipe_flags: "--no-force-buffers",
        };
        for name in PRESETS {
            let c = preset(name, &ctx).unwrap();
            assert!(c.port > 0 && !c.server.is_empty(), "{name}");
            assert!(
                c.client.contains("/file") || c.client.contains("-n 1000"),
                "{name}: {}",
                c.client
            );
        }
        assert!(preset("scp", &ctx).is_none());
        let p4 = preset("fatpipe:kernel/p4", &ctx).unwrap();
        assert!(p4.client.contains("--tuning kernel -p 4"), "{}", p4.client);
        assert!(!p4.server.contains("-p 4"), "{}", p4.server);
        let drs = preset("fatpipe:drs", &ctx).unwrap();
        assert!(
            drs.server.contains("--tuning drs --no-force-buffers"),
            "{}",
            drs.server
        );
        assert!(
            drs.client.contains("--tuning drs --no-force-buffers"),
            "{}",
            drs.client
        );
    }
}
