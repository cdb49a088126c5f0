//! What a copy's `auto` choices start from and leave behind: path memory recalled for the
//! server, the congestion control a lossy path's next copy starts on, the transport; after the
//! last file, what the copy learned kept for the next one. One place for every front-end that
//! copies to a server (the CLI is one), so that they remember and choose alike.

use super::copy::FileResult;
use super::path_memory::CopyMemory;
use super::transport::{self, Asked, Choice};
use super::Location;
use fatpipe_tune::rate::RateMemory;
use fatpipe_tune::CongestionControl;
use std::path::PathBuf;

/// What a copy is, as its plan sees it.
#[derive(Debug, Clone, Copy)]
pub struct Request<'a> {
    /// The sources.
    pub srcs: &'a [Location],
    /// Where they go.
    pub dst: &'a Location,
    /// The server (`host:port`) path memory names the copy by, when one end is remote.
    pub server: Option<&'a str>,
    /// Whether several files may move at once ([`several_at_once`]).
    pub several: bool,
    /// `--transport`.
    pub transport: Asked,
    /// The stream count was asked for (`-p N`).
    pub streams_asked: bool,
}

/// A copy's plan, made before its first file and finished after its last.
#[derive(Debug)]
pub struct AutoPlan {
    memory: Option<CopyMemory>,
    /// The transport chosen, and why.
    pub transport: Choice,
}

impl AutoPlan {
    /// Recalls what the path memory at `memory` (`None`: none kept, as with a fixed stream
    /// count or `--no-path-memory`) knows of the server and chooses. `cc` is the congestion
    /// control the user asked for; where there is none, one the last copy to the server chose
    /// on random loss takes its place.
    pub fn new(
        r: &Request<'_>,
        memory: Option<PathBuf>,
        cc: &mut Option<CongestionControl>,
    ) -> AutoPlan {
        let memory = memory
            .zip(r.server)
            .map(|(p, s)| CopyMemory::recall(p, s.to_string(), r.several, cc.is_some()));
        if let Some(carried) = memory.as_ref().and_then(|m| m.carried.clone()) {
            *cc = Some(carried);
        }
        let from_server = matches!(r.srcs, [Location::Remote(_)]);
        // One local file and one remote, either way.
        let file_to_file = matches!(
            (r.srcs, r.dst),
            ([Location::Remote(_)], Location::Local(_))
                | ([Location::Local(_)], Location::Remote(_))
        );
        let transport = transport::choose(
            r.transport,
            &transport::Copy {
                server: memory.as_ref().map_or("the server", CopyMemory::server),
                several: r.several,
                between_servers: from_server && matches!(r.dst, Location::Remote(_)),
                file_to_file,
                cc_set: cc.is_some(),
                lossy_ago: memory.as_ref().and_then(CopyMemory::lossy_ago),
                known: memory.as_ref().is_some_and(CopyMemory::known),
                streams_asked: r.streams_asked,
            },
        );
        AutoPlan { memory, transport }
    }

    /// Where `-p auto`'s first file starts, and why (the count the last copy ended with).
    pub fn first_start(&self) -> Option<(u32, String)> {
        self.memory.as_ref().and_then(CopyMemory::first_start)
    }

    /// What the UDP sender learned on the last copy over the channel to the server.
    pub fn udp_learned(&self) -> Option<RateMemory> {
        self.memory.as_ref().and_then(CopyMemory::udp)
    }

    /// The server's features as the last copy to it read them: a session in clear logs in
    /// with its first commands without waiting for the greeting.
    pub fn known_features(&self) -> Option<Vec<String>> {
        self.memory.as_ref().and_then(CopyMemory::features)
    }

    /// After the last file: keeps what the copy learned (`udp`: what its UDP sender did;
    /// `features`: the server's, as its first session read them) and says how the transport
    /// went.
    pub fn finish(
        self,
        results: &[FileResult],
        udp: Option<RateMemory>,
        features: Option<Vec<String>>,
    ) -> Choice {
        if let Some(m) = self.memory {
            m.keep(results, udp, features);
        }
        let started = results.iter().find_map(|r| r.udp_started.as_deref());
        self.transport
            .as_it_went(results.iter().any(|r| r.udp.is_some()), started)
    }
}

/// Whether a copy of `sources` may move several files at once: a tree or a list (`tree`),
/// several sources, a glob. Such a copy neither starts on nor keeps a congestion control
/// remembered from random loss: the streams of its sessions share the path, and losses from
/// their start-ups can look random to each session (a stream with little in flight sees no
/// queue); bbr taken on them started every session of the next tree copy on it, and eight
/// sessions' bbr start-ups on a clean path stalled one of them for up to 50 s
/// (docs/parallel-streams-experiments.md).
pub fn several_at_once(sources: &[String], tree: bool) -> bool {
    tree || sources.len() > 1 || sources.iter().any(|s| s.contains(['*', '?', '[']))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_copy_of_one_file_takes_or_keeps_a_control_remembered_from_random_loss() {
        let names = |p: &[&str]| p.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert!(!several_at_once(&names(&["ftp://h/f"]), false));
        assert!(several_at_once(&names(&["ftp://h/d"]), true));
        assert!(several_at_once(&names(&["ftp://h/a", "ftp://h/b"]), false));
        assert!(several_at_once(&names(&["ftp://h/d/*.h5"]), false));
    }

    #[test]
    fn a_download_after_a_lossy_copy_starts_on_its_control_and_the_udp_channel() {
        let dir = tempfile::tempdir().unwrap();
        let memory = dir.path().join("paths.json");
        let srcs = [Location::parse("ftp://h:2811/f").unwrap()];
        let dst = Location::Local(dir.path().join("f"));
        let request = |several| Request {
            srcs: &srcs,
            dst: &dst,
            server: Some("h:2811"),
            several,
            transport: Asked::Auto,
            streams_asked: false,
        };
        // Nothing known: the system's control, TCP until the server meets random loss.
        let mut cc = None;
        let first = AutoPlan::new(&request(false), Some(memory.clone()), &mut cc);
        assert_eq!(cc, None);
        assert!(!first.transport.udp && first.transport.leave_tcp_on_loss);
        let lossy = FileResult {
            bytes: 1,
            streams: Some(8),
            cc_on_random_loss: Some(CongestionControl::Bbr),
            ..FileResult::default()
        };
        assert_eq!(first.known_features(), None);
        let features = vec!["DRS".to_string(), "MDTM".to_string()];
        let went = first.finish(std::slice::from_ref(&lossy), None, Some(features.clone()));
        assert_eq!(went.name(), "tcp");
        // The next download of one file starts where that one ended, on bbr, over UDP, and
        // knows the server's features.
        let next = AutoPlan::new(&request(false), Some(memory.clone()), &mut cc);
        assert_eq!(cc, Some(CongestionControl::Bbr));
        assert!(next.transport.udp, "{}", next.transport);
        assert_eq!(next.first_start().map(|s| s.0), Some(8));
        assert_eq!(next.known_features(), Some(features));
        // A tree takes neither; nor does a copy that keeps no path memory.
        let mut cc = None;
        let tree = AutoPlan::new(&request(true), Some(memory), &mut cc);
        assert!(cc.is_none() && !tree.transport.udp);
        let forgetful = AutoPlan::new(&request(false), None, &mut cc);
        assert!(cc.is_none() && !forgetful.transport.udp && forgetful.first_start().is_none());
    }
}
