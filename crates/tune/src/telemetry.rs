//! The telemetry of a transfer (`--stats FILE.jsonl`): one JSON event per line, written by
//! the conductor of every end that shares the file and read back by the plots with the same
//! types. Pure data: the file itself is `fatpipe-net`'s.

use crate::sample::{Role, TcpStats};
use serde::{Deserialize, Serialize};

/// One line of a stats file, told apart by its `event` field.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "lowercase")]
pub enum Event {
    /// One connection's sample and what its laws decided.
    Sample(Box<Record>),
    /// A transfer's stream count changed (`-p auto`).
    Streams(StreamsEvent),
    /// A transfer's senders changed their congestion control.
    Cc(CcEvent),
    /// A UDP sender's rate controller decided a new rate.
    Rate(RateEvent),
    /// A UDP segment's first pass is over: its packet-loss signature.
    Segment(SegmentEvent),
}

impl Event {
    /// Reads one line. Samples written before events were tagged (no `event` field) read as
    /// samples; `None` for an event of a kind this build does not know.
    pub fn parse(line: &str) -> Result<Option<Event>, serde_json::Error> {
        let v: serde_json::Value = serde_json::from_str(line)?;
        match v.get("event").and_then(|e| e.as_str()) {
            None => serde_json::from_value(v).map(|r| Some(Event::Sample(Box::new(r)))),
            Some("sample" | "streams" | "cc" | "rate" | "segment") => {
                serde_json::from_value(v).map(Some)
            }
            Some(_) => Ok(None),
        }
    }
}

/// One sample of one end of one data connection.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Record {
    /// Wall-clock time, seconds since the Unix epoch (to line up both ends).
    pub unix_s: f64,
    /// Seconds since this data connection was made.
    pub t: f64,
    /// `client` or `server`.
    pub end: String,
    /// This end's port of the data connection (the listener's on an accepting end).
    #[serde(default)]
    pub port: u16,
    /// The peer's port of the data connection: with `port`, tells apart the connections of
    /// one transfer, which may open within the same millisecond.
    #[serde(default)]
    pub peer_port: u16,
    /// Which way data flows at this end.
    pub role: Role,
    /// The tuning mode.
    pub tuning: String,
    /// Payload bytes moved so far.
    pub bytes: u64,
    /// Throughput since the previous record, Mbit/s.
    pub mbit_s: f64,
    /// The law's BDP estimate, bytes.
    pub bdp: Option<u64>,
    /// Receive buffer as the kernel accounts it, bytes.
    pub rcvbuf: u64,
    /// Send buffer as the kernel accounts it, bytes.
    pub sndbuf: u64,
    /// The buffer the peer last announced, bytes.
    pub peer_buffer: Option<u64>,
    /// The latest control-channel round trip, ms.
    pub probe_rtt_ms: Option<f64>,
    /// `TCP_INFO` of the data socket.
    pub tcp: Option<TcpStats>,
    /// What the law set: receive buffer, send buffer, window clamp (`setsockopt` values).
    pub set_rcvbuf: Option<u64>,
    /// See `set_rcvbuf`.
    pub set_sndbuf: Option<u64>,
    /// See `set_rcvbuf`.
    pub clamp: Option<u64>,
    /// The pacing the connection's pacing law set, if it changed.
    #[serde(default)]
    pub pace: Option<crate::pacing::Pace>,
    /// The congestion control a sending connection runs.
    #[serde(default)]
    pub cc: Option<crate::CongestionControl>,
    /// Why, when the law changed something.
    pub note: Option<String>,
    /// System limits that held a buffer below what the law asked.
    #[serde(default)]
    pub capped: Vec<String>,
    /// The kernel's pacing law, on a connection that runs `fatpipe_bic`.
    #[serde(default)]
    pub kernel_pace: Option<KernelPace>,
}

/// What `fatpipe_bic` (the BPF congestion control) showed of its pacing law at a sample: the
/// user-space law's state and `eab`, from the kernel.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KernelPace {
    /// `CWP_A`, `CWP_B` or `EABP`.
    pub state: String,
    /// The rate at the last loss, bytes/s (0: none yet).
    pub eab: u64,
    /// The pacing ceiling it set, bytes/s.
    pub ceiling: u64,
}

/// A change of the congestion control of a transfer's senders.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CcEvent {
    /// Wall-clock time, seconds since the Unix epoch.
    pub unix_s: f64,
    /// `client` or `server`.
    pub end: String,
    /// The congestion control from now on (its kernel name), or `tcp` where the sending peer
    /// said TCP's own pacing spaces its streams.
    pub cc: String,
    /// Why.
    pub reason: String,
}

/// A UDP sender's rate decision, with the feedback it was made on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RateEvent {
    /// Wall-clock time, seconds since the Unix epoch.
    pub unix_s: f64,
    /// Seconds since the transfer started.
    pub t: f64,
    /// `client` or `server`.
    pub end: String,
    /// The controller (`default`, `history`, `state`).
    pub control: String,
    /// Its state after the decision.
    pub state: String,
    /// The sending rate from now on, Mbit/s.
    pub rate_mbit: f64,
    /// What reached the receiver in the last report interval, Mbit/s.
    pub delivered_mbit: f64,
    /// Loss share of that interval.
    pub loss: f64,
    /// The receiver's queueing delay then, ms.
    pub queue_ms: f64,
}

/// The packet-loss signature of one UDP segment (10,000 packets): which were lost on their
/// first send (the seed's bitmaps, as its visualiser drew them).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SegmentEvent {
    /// Wall-clock time, seconds since the Unix epoch.
    pub unix_s: f64,
    /// `client` or `server`.
    pub end: String,
    /// The segment's number in the transfer.
    pub segment: u64,
    /// Its packets.
    pub packets: u64,
    /// Indices (within the segment) of the packets lost on their first send.
    pub lost: Vec<u32>,
}

/// A change of a transfer's stream count (`-p auto`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StreamsEvent {
    /// Wall-clock time, seconds since the Unix epoch.
    pub unix_s: f64,
    /// `client` or `server`.
    pub end: String,
    /// Data connections after the change.
    pub streams: u32,
    /// Why.
    pub reason: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Record {
        Record {
            unix_s: 1.5,
            t: 0.5,
            end: "server".into(),
            port: 2811,
            peer_port: 40000,
            role: Role::Receiver,
            tuning: "drs".into(),
            bytes: 1000,
            mbit_s: 8.0,
            bdp: Some(12_500_000),
            rcvbuf: 131072,
            sndbuf: 16384,
            peer_buffer: None,
            probe_rtt_ms: Some(100.0),
            tcp: Some(TcpStats {
                rtt_us: 100_000,
                ..TcpStats::default()
            }),
            set_rcvbuf: Some(1 << 20),
            set_sndbuf: None,
            clamp: Some(1 << 20),
            pace: None,
            cc: Some("bbr".into()),
            note: Some("grow".into()),
            capped: vec![],
            kernel_pace: Some(KernelPace {
                state: "EABP".into(),
                eab: 100_000_000,
                ceiling: 100_000_000,
            }),
        }
    }

    #[test]
    fn every_event_reads_back_as_written() {
        let streams = Event::Streams(StreamsEvent {
            unix_s: 2.0,
            end: "client".into(),
            streams: 8,
            reason: "buffer-limited".into(),
        });
        let cc = Event::Cc(CcEvent {
            unix_s: 3.0,
            end: "server".into(),
            cc: "bbr".into(),
            reason: "random loss".into(),
        });
        for e in [Event::Sample(Box::new(sample())), streams, cc] {
            let line = serde_json::to_string(&e).unwrap();
            assert_eq!(Event::parse(&line).unwrap(), Some(e));
        }
    }

    #[test]
    fn untagged_samples_read_and_unknown_events_are_skipped() {
        let mut v = serde_json::to_value(sample()).unwrap();
        v.as_object_mut().unwrap().remove("pace");
        v.as_object_mut().unwrap().remove("cc");
        let old = serde_json::to_string(&v).unwrap();
        let mut then = sample();
        then.cc = None;
        assert_eq!(
            Event::parse(&old).unwrap(),
            Some(Event::Sample(Box::new(then)))
        );
        assert_eq!(Event::parse(r#"{"event":"loss","n":3}"#).unwrap(), None);
        assert!(Event::parse("not json").is_err());
        assert!(Event::parse(r#"{"event":"streams"}"#).is_err());
    }
}
