//! `fatpipe demo`: a self-contained transfer on this machine that shows the tool working and
//! the rate it reaches. (Loopback for now; the WAN emulator will give it a long fat path.)

use anyhow::Context;
use fatpipe_ftp::client::copy::{self, CopyOptions, FileResult, Observer};
use fatpipe_ftp::client::{Credentials, Location, RemoteUrl};
use fatpipe_ftp::server::auth::Anonymous;
use fatpipe_ftp::server::{Server, ServerConfig};
use fatpipe_net::Pump;
use std::io::Write;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Options of `fatpipe demo`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Size of the demonstration file in MiB.
    #[arg(long, default_value_t = 256)]
    size_mib: u64,
}

struct Quiet;

impl Observer for Quiet {
    fn file_started(&self, _: &str, _: Option<u64>, _: u64, _: &Arc<Pump>) {}
    fn file_finished(&self, _: &FileResult) {}
}

/// Serves a generated file on loopback and downloads it to /dev/null, printing the rate.
pub fn run(a: Args) -> anyhow::Result<ExitCode> {
    let dir = tempfile::tempdir().context("cannot create a temporary directory")?;
    let path = dir.path().join("demo.bin");
    let mut f = std::fs::File::create(&path)?;
    let block: Vec<u8> = (0..1u32 << 20)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8)
        .collect();
    for _ in 0..a.size_mib {
        f.write_all(&block)?;
    }
    drop(f);
    let mut config = ServerConfig::new(dir.path().to_path_buf());
    config.listen = "127.0.0.1:0".parse()?;
    config.anonymous = Anonymous::ReadOnly;
    let rt = tokio::runtime::Runtime::new()?;
    let server = rt.block_on(Server::bind(config))?;
    let addr = server.local_addr()?;
    rt.spawn(server.run());
    println!(
        "fatpipe demo: {} MiB over loopback (ftp://{addr}/demo.bin -> /dev/null)",
        a.size_mib
    );
    let src = Location::Remote(RemoteUrl {
        host: addr.ip().to_string(),
        port: addr.port(),
        user: None,
        password: None,
        path: "/demo.bin".into(),
    });
    let dst = Location::Local("/dev/null".into());
    let opts = CopyOptions {
        recursive: false,
        resume: false,
        timeout: Duration::from_secs(60),
    };
    let started = Instant::now();
    let results = copy::copy(&src, &dst, &Credentials::anonymous(), &opts, &Quiet)?;
    let secs = started.elapsed().as_secs_f64();
    if let Some(err) = results.iter().find_map(|r| r.error.clone()) {
        anyhow::bail!("demo transfer failed: {err}");
    }
    let bytes: u64 = results.iter().map(|r| r.bytes).sum();
    println!(
        "fatpipe demo: {bytes} bytes in {secs:.2} s = {:.0} Mbit/s (loopback; stock vs tuned across an emulated WAN arrives with the emulator)",
        bytes as f64 * 8.0 / secs / 1e6
    );
    Ok(ExitCode::SUCCESS)
}
