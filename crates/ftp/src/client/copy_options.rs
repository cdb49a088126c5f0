//! How a copy behaves: the options every front-end (the CLI, the demo, the lab) fills in.

use crate::client::filter::Filter;
use crate::client::sync::Existing;
use crate::client::Streams;
use fatpipe_net::rate_budget::RateBudget;
use fatpipe_net::udp::UdpConfig;
use fatpipe_net::TunerConfig;
use fatpipe_proto::udp::NetStack;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How a copy behaves.
#[derive(Debug, Clone)]
pub struct CopyOptions {
    /// Copy directory trees.
    pub recursive: bool,
    /// Make missing directories at the destination (always for trees and several sources).
    pub create_dirs: bool,
    /// Which files of the sources move (`--include`, `--exclude`).
    pub filter: Filter,
    /// `--from`: the files to copy, named relative to the one source directory.
    pub from: Option<Vec<String>>,
    /// Files copied at once, each over its own control connection (`--concurrency`); `None`:
    /// chosen from the files' sizes.
    pub concurrency: Option<u32>,
    /// Continue partial destinations instead of replacing them (and skip complete ones).
    pub resume: bool,
    /// What becomes of destinations that exist (`--no-clobber`, `--update`).
    pub existing: Existing,
    /// Plan the copy and say what it would do; change nothing (`--dry-run`).
    pub dry_run: bool,
    /// Remove what the source's directories do not hold from the destination's (`--delete`).
    pub delete: bool,
    /// The most each file moves per second, over all its streams, bit/s
    /// (`--limit-rate-per-file`): this end reads or writes no faster.
    pub limit_rate: Option<u64>,
    /// The rate all files of the copy share, over all their streams and sessions
    /// (`--limit-rate`).
    pub total_rate: Option<Arc<RateBudget>>,
    /// Limit for connecting and for any silence on a connection.
    pub timeout: Duration,
    /// Whether sessions are secured with TLS (`--tls`, `--ca`).
    pub tls: crate::client::TlsPolicy,
    /// How long a file whose connection broke is tried again over new sessions, from its
    /// first failure (`--retry-for`; zero: never).
    pub retry_for: Duration,
    /// How data connections are tuned (`None`: not at all, not even told to the server).
    pub tune: Option<TunerConfig>,
    /// How many data connections each file uses (`-p`).
    pub streams: Streams,
    /// `-p auto`: the stream count the first file starts with instead of one, and why (what an
    /// earlier copy to the same server ended with).
    pub first_start: Option<(u32, String)>,
    /// Whether each file's checksum is compared with the server's after the copy.
    pub verify: Verify,
    /// Move the files over the UDP data channel (`--transport udp`): what the server is told,
    /// and this end's side. One stream in MODE S; TCP when the server lacks it.
    pub udp: Option<(NetStack, UdpConfig)>,
    /// The UDP channel was asked for, not chosen by `--transport auto`: a server that lacks it
    /// is worth a warning.
    pub udp_asked: bool,
    /// `--transport auto` on a path not known to be lossy: where a download's sending server
    /// meets random loss, the file goes on over this UDP channel from what arrived.
    pub udp_on_random_loss: Option<(NetStack, UdpConfig)>,
    /// `--transport auto` with nothing known of the server: one file on a long path starts on
    /// the channel of `udp_on_random_loss` instead ([`crate::client::transport::long_path_start`]).
    pub udp_if_long: bool,
    /// The server's features across copies (path memory).
    pub features: ServerFeatures,
}

/// A server's features across copies: those the last copy to it read (a session in clear then
/// logs in with its first commands, without waiting for the greeting), and those this copy's
/// first session reads, for the next copy.
#[derive(Debug, Clone, Default)]
pub struct ServerFeatures {
    /// The server (`host:port`) and its features as path memory kept them.
    known: Option<(String, Vec<String>)>,
    /// What this copy's first session read once logged in.
    seen: Arc<Mutex<Option<Vec<String>>>>,
}

impl ServerFeatures {
    /// `features` known for `server` (`host:port`), if any.
    pub fn new(server: Option<&str>, features: Option<Vec<String>>) -> ServerFeatures {
        ServerFeatures {
            known: server.zip(features).map(|(s, f)| (s.to_string(), f)),
            seen: Arc::default(),
        }
    }

    /// The features known for `server` (`host:port`): none for any other server (a copy
    /// between two servers opens sessions with both).
    pub fn known(&self, server: &str) -> Option<&[String]> {
        self.known
            .as_ref()
            .filter(|(s, _)| s == server)
            .map(|(_, f)| f.as_slice())
    }

    /// Keeps what a session read.
    pub fn see(&self, features: &[String]) {
        *self.seen.lock().unwrap_or_else(|e| e.into_inner()) = Some(features.to_vec());
    }

    /// What this copy's first session read.
    pub fn seen(&self) -> Option<Vec<String>> {
        self.seen.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

impl Default for CopyOptions {
    /// One file at a time over one stream, untuned, verified where the server is a fatpipe,
    /// nothing tried again; TLS where the server offers it.
    fn default() -> Self {
        CopyOptions {
            recursive: false,
            create_dirs: false,
            filter: Filter::default(),
            from: None,
            concurrency: Some(1),
            resume: false,
            existing: Existing::Replace,
            dry_run: false,
            delete: false,
            limit_rate: None,
            total_rate: None,
            timeout: Duration::from_secs(60),
            tls: Default::default(),
            retry_for: Duration::ZERO,
            tune: None,
            streams: Streams::Fixed(1),
            first_start: None,
            verify: Verify::Auto,
            udp: None,
            udp_asked: false,
            udp_on_random_loss: None,
            udp_if_long: false,
            features: ServerFeatures::default(),
        }
    }
}

/// End-to-end checksum verification (`--verify` / `--no-verify`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verify {
    /// When the server offers fatpipe's fast XXH3 (a fatpipe peer): free at line rate.
    Auto,
    /// Always, with the fastest algorithm both ends know (fails if there is none).
    On,
    /// Never.
    Off,
}
