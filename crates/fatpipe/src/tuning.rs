//! The tuning options `cp` and `serve` share, and the summary line of a tuned copy.

use fatpipe_net::buffers::BufferControl;
use fatpipe_net::telemetry::StatsFile;
use fatpipe_net::TunerConfig;
use fatpipe_tune::size::format_size;
use fatpipe_tune::{CongestionControl, Pacing, Params, Tuning};
use std::path::PathBuf;
use std::time::Duration;

/// Socket-buffer tuning of data connections.
#[derive(clap::Args, Debug, Clone)]
pub struct TuneArgs {
    /// How data-connection buffers are sized: stock (64 KiB), static:SIZE, probe, kernel,
    /// drs-classic, drs-grid or drs (see the README).
    #[arg(long, default_value = "drs", value_parser = Tuning::parse)]
    pub tuning: Tuning,
    /// Append one JSON record per tuning sample to this file (client and server may share it).
    #[arg(long, value_name = "FILE.jsonl")]
    pub stats: Option<PathBuf>,
    /// Sampling interval of drs-classic and drs-grid.
    #[arg(long, default_value = "1s", value_parser = humantime::parse_duration)]
    pub sample_interval: Duration,
    /// How long `probe` measures before fixing its buffers.
    #[arg(long, default_value = "2s", value_parser = humantime::parse_duration)]
    pub probe_period: Duration,
    /// Stay within net.core.rmem_max/wmem_max even when running as root (as an unprivileged
    /// user would); by default root uses SO_RCVBUFFORCE/SO_SNDBUFFORCE.
    #[arg(long)]
    pub no_force_buffers: bool,
    /// How the sending end paces its data connections: off, tcp (the kernel's own pacing),
    /// cwp (congestion window per RTT) or adaptive (CWP, and the rate of the last loss for a
    /// while: EABP). Default: tcp when -p auto grows the stream count, else off. A download asks
    /// the server (fatpipe servers only).
    #[arg(long, value_parser = Pacing::parse)]
    pub pacing: Option<Pacing>,
    /// Congestion control of the sending end's data connections (reno, cubic, bbr, … as
    /// net.ipv4.tcp_available_congestion_control lists; unprivileged processes only those in
    /// tcp_allowed_congestion_control). Default: the system's. A download asks the server.
    #[arg(long, value_name = "NAME")]
    pub cc: Option<CongestionControl>,
}

impl TuneArgs {
    /// The tuner configuration for one end (`client` or `server`).
    pub fn config(&self, end: &'static str) -> anyhow::Result<TunerConfig> {
        let stats =
            match &self.stats {
                Some(p) => Some(StatsFile::open(p).map_err(|e| {
                    anyhow::anyhow!("cannot open the stats file {}: {e}", p.display())
                })?),
                None => None,
            };
        Ok(TunerConfig {
            tuning: self.tuning,
            params: Params {
                interval: self.sample_interval,
                probe_period: self.probe_period,
                ..Params::default()
            },
            control: BufferControl::new(!self.no_force_buffers),
            stats,
            end,
            pacing: self.pacing,
            cc: self.cc.clone(),
            live: None,
        })
    }
}

/// `peak socket buffer here 24 MiB, at the server 30 MiB; 33.1 Mbit/s per MiB of buffer` (the
/// rate per MiB only when there is a rate).
pub fn describe(peak_local: u64, peak_peer: Option<u64>, mbit_s: Option<f64>) -> String {
    let total = peak_local + peak_peer.unwrap_or(0);
    let mut s = format!("peak socket buffer here {}", format_size(peak_local));
    if let Some(p) = peak_peer {
        s.push_str(&format!(", at the server {}", format_size(p)));
    }
    if let (true, Some(r)) = (total > 0, mbit_s) {
        s.push_str(&format!(
            "; {:.1} Mbit/s per MiB of buffer",
            r / (total as f64 / f64::from(1 << 20))
        ));
    }
    s
}
