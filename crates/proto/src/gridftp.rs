//! GridFTP (GFD.20) command arguments and reply texts other than the MODE E blocks:
//! `OPTS RETR Parallelism=…`, `CKSM`, and the `112-Perf Marker` / `111 Range Marker` replies.

use crate::ranges::RangeSet;
use crate::Reply;
use std::fmt;

/// `OPTS RETR Parallelism=start,min,max;`: how many data connections the sender opens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Parallelism {
    /// Connections opened at the start.
    pub start: u32,
    /// Fewest the sender may go down to.
    pub min: u32,
    /// Most the sender may open (fatpipe's `-p auto` grows up to this).
    pub max: u32,
}

/// Most data connections a peer may ask for.
pub const MAX_PARALLELISM: u32 = 64;

impl Parallelism {
    /// A fixed number of connections.
    pub fn fixed(n: u32) -> Parallelism {
        Parallelism {
            start: n,
            min: n,
            max: n,
        }
    }

    /// Parses the value of an `OPTS RETR` line, e.g. `Parallelism=4,4,4;` (other options in
    /// the same line are ignored, as GFD.20 allows).
    pub fn parse_opts(value: &str) -> Result<Parallelism, String> {
        let p = value
            .split(';')
            .filter_map(|kv| kv.trim().split_once('='))
            .find(|(k, _)| k.trim().eq_ignore_ascii_case("Parallelism"))
            .map(|(_, v)| v.trim())
            .ok_or_else(|| "OPTS RETR: no Parallelism=start,min,max; given".to_string())?;
        let nums: Vec<u32> = p
            .split(',')
            .map(|n| n.trim().parse::<u32>())
            .collect::<Result<_, _>>()
            .map_err(|_| format!("OPTS RETR: bad Parallelism value '{p}'"))?;
        let (start, min, max) = match nums[..] {
            [s] => (s, s, s),
            [s, mi, ma] => (s, mi, ma),
            _ => {
                return Err(format!(
                    "OPTS RETR: Parallelism needs 1 or 3 numbers, got '{p}'"
                ))
            }
        };
        if start == 0 || min == 0 || min > start || start > max || max > MAX_PARALLELISM {
            return Err(format!(
                "OPTS RETR: Parallelism must be 1 <= min <= start <= max <= {MAX_PARALLELISM}"
            ));
        }
        Ok(Parallelism { start, min, max })
    }
}

impl fmt::Display for Parallelism {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Parallelism={},{},{};", self.start, self.min, self.max)
    }
}

/// Checksum algorithms of `CKSM`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChecksumAlg {
    /// MD5 (what globus-url-copy `-verify-checksum` asks for).
    Md5,
    /// Adler-32.
    Adler32,
    /// SHA-256.
    Sha256,
    /// XXH3-128: fatpipe's fast default between fatpipe peers.
    Xxh3,
}

impl ChecksumAlg {
    /// Every algorithm, as listed in `FEAT`.
    pub const ALL: [ChecksumAlg; 4] = [
        ChecksumAlg::Md5,
        ChecksumAlg::Adler32,
        ChecksumAlg::Sha256,
        ChecksumAlg::Xxh3,
    ];

    /// The algorithm's name on the wire (case-insensitive when parsed).
    pub fn name(self) -> &'static str {
        match self {
            ChecksumAlg::Md5 => "MD5",
            ChecksumAlg::Adler32 => "ADLER32",
            ChecksumAlg::Sha256 => "SHA256",
            ChecksumAlg::Xxh3 => "XXH3",
        }
    }

    /// Parses a name; `SHA-256` is accepted for `SHA256`.
    pub fn parse(s: &str) -> Option<ChecksumAlg> {
        let up = s.trim().to_ascii_uppercase().replace('-', "");
        ChecksumAlg::ALL.into_iter().find(|a| a.name() == up)
    }

    /// The `FEAT` line: ` CKSM MD5,ADLER32,SHA256,XXH3`.
    pub fn feature() -> String {
        let names: Vec<&str> = ChecksumAlg::ALL.iter().map(|a| a.name()).collect();
        format!("CKSM {}", names.join(","))
    }
}

impl fmt::Display for ChecksumAlg {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The arguments of `CKSM <alg> <offset> <length> <path>`; a length of -1 means to the end.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cksm {
    /// Algorithm.
    pub alg: ChecksumAlg,
    /// First byte.
    pub offset: u64,
    /// Bytes to cover, `None` for the rest of the file.
    pub length: Option<u64>,
    /// The file.
    pub path: String,
}

impl Cksm {
    /// Parses the argument of `CKSM`.
    pub fn parse(arg: &str) -> Result<Cksm, String> {
        let mut words = arg.splitn(4, ' ');
        let (Some(alg), Some(offset), Some(length), Some(path)) =
            (words.next(), words.next(), words.next(), words.next())
        else {
            return Err("CKSM needs <algorithm> <offset> <length> <path>".into());
        };
        let alg = ChecksumAlg::parse(alg).ok_or_else(|| {
            format!(
                "Unknown checksum algorithm; use one of {}",
                &ChecksumAlg::feature()[5..]
            )
        })?;
        let offset = offset.parse().map_err(|_| "CKSM: bad offset".to_string())?;
        let length = match length.trim() {
            "-1" => None,
            l => Some(l.parse().map_err(|_| "CKSM: bad length".to_string())?),
        };
        if path.is_empty() {
            return Err("CKSM needs a path".into());
        }
        Ok(Cksm {
            alg,
            offset,
            length,
            path: path.to_string(),
        })
    }
}

impl fmt::Display for Cksm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let len = self.length.map_or("-1".to_string(), |l| l.to_string());
        write!(f, "{} {} {len} {}", self.alg, self.offset, self.path)
    }
}

/// A line of a MODE E send's final `226` reply: the data connections used.
pub const STREAMS_NOTE: &str = "streams: ";
/// A line of a MODE E send's final `226` reply: one of `-p auto`'s decisions.
pub const AUTO_NOTE: &str = "-p auto: ";

/// A line of a MODE E send's final `226` reply: the congestion control its senders switched
/// to when they met random loss.
pub const CC_NOTE: &str = "cc: ";

/// A line of a UDP send's final `226` reply: what the channel did (controller, resends, rate).
pub const UDP_NOTE: &str = "udp: ";

/// What a fatpipe sender put in its final reply.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TransferNotes {
    /// Data connections used.
    pub streams: Option<u32>,
    /// `-p auto`'s decisions, in order.
    pub decisions: Vec<String>,
    /// The congestion control the senders switched to, if they did.
    pub cc: Option<String>,
    /// A UDP send's account of itself (the whole line, `udp: ` included).
    pub udp: Option<String>,
}

/// Reads the notes of a fatpipe sender's final reply.
pub fn parse_transfer_notes(r: &Reply) -> TransferNotes {
    let mut notes = TransferNotes::default();
    for l in r.lines.iter().map(|l| l.trim()) {
        if let Some(n) = l.strip_prefix(STREAMS_NOTE) {
            notes.streams = n.trim().parse().ok();
        } else if let Some(d) = l.strip_prefix(AUTO_NOTE) {
            notes.decisions.push(d.to_string());
        } else if let Some(c) = l.strip_prefix(CC_NOTE) {
            notes.cc = Some(c.trim().to_string()).filter(|c| !c.is_empty());
        } else if l.starts_with(UDP_NOTE) {
            notes.udp = Some(l.to_string());
        }
    }
    notes
}

/// A `112-Perf Marker` reply: bytes this end has moved so far, at a Unix time.
pub fn perf_marker(unix_time: f64, bytes: u64) -> Reply {
    Reply::multi(
        112,
        "Perf Marker",
        vec![
            format!(" Timestamp:  {unix_time:.1}"),
            " Stripe Index: 0".to_string(),
            format!(" Stripe Bytes Transferred: {bytes}"),
            " Total Stripe Count: 1".to_string(),
        ],
        "End.",
    )
}

/// A `111 Range Marker` reply: the ranges a receiver holds (a restart point for `REST`).
pub fn range_marker(ranges: &RangeSet) -> Reply {
    Reply::new(111, format!("Range Marker {ranges}"))
}

/// The ranges of a `111 Range Marker` reply, if it is one.
pub fn parse_range_marker(r: &Reply) -> Option<RangeSet> {
    let text = r.lines.first()?;
    (r.code == 111).then_some(())?;
    RangeSet::parse(text.trim().strip_prefix("Range Marker")?)
}

/// The bytes of a `112-Perf Marker` reply, if it is one.
pub fn parse_perf_marker(r: &Reply) -> Option<u64> {
    (r.code == 112).then_some(())?;
    r.lines
        .iter()
        .find_map(|l| l.trim().strip_prefix("Stripe Bytes Transferred:"))
        .and_then(|n| n.trim().parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn parallelism_as_globus_sends_it() {
        assert_eq!(
            Parallelism::parse_opts("Parallelism=4,4,4;"),
            Ok(Parallelism::fixed(4))
        );
        assert_eq!(
            Parallelism::parse_opts("StripeLayout=Blocked;Parallelism=1,1,8;")
                .unwrap()
                .max,
            8
        );
        assert_eq!(
            Parallelism::parse_opts("Parallelism=2;"),
            Ok(Parallelism::fixed(2))
        );
        assert!(Parallelism::parse_opts("Parallelism=0,0,0;").is_err());
        assert!(Parallelism::parse_opts("Parallelism=4,1,2;").is_err());
        assert!(Parallelism::parse_opts("Parallelism=1,1,99999;").is_err());
        assert!(Parallelism::parse_opts("Foo=1;").is_err());
        assert_eq!(Parallelism::fixed(3).to_string(), "Parallelism=3,3,3;");
    }

    #[test]
    fn cksm_arguments() {
        let c = Cksm::parse("md5 0 -1 /data/a b").unwrap();
        assert_eq!(c.alg, ChecksumAlg::Md5);
        assert_eq!(c.length, None);
        assert_eq!(c.path, "/data/a b");
        assert_eq!(c.to_string(), "MD5 0 -1 /data/a b");
        assert_eq!(Cksm::parse("SHA-256 5 10 f").unwrap().length, Some(10));
        assert!(Cksm::parse("CRC99 0 -1 f").is_err());
        assert!(Cksm::parse("MD5 x -1 f").is_err());
        assert!(Cksm::parse("MD5 0 -1").is_err());
    }

    #[test]
    fn markers_round_trip() {
        let m = perf_marker(1700000000.5, 12345);
        assert_eq!(parse_perf_marker(&m), Some(12345));
        let mut r = RangeSet::default();
        r.insert(0, 100);
        let m = range_marker(&r);
        assert_eq!(m.code, 111);
        assert_eq!(parse_range_marker(&m), Some(r));
    }

    proptest! {
        #[test]
        fn parsers_never_panic(s in ".{0,80}") {
            let _ = Parallelism::parse_opts(&s);
            let _ = Cksm::parse(&s);
            let _ = parse_range_marker(&Reply::new(111, s.clone()));
        }

        #[test]
        fn valid_parallelism_round_trips(a in 1u32..=64, b in 1u32..=64, c in 1u32..=64) {
            let mut v = [a, b, c];
            v.sort();
            let p = Parallelism { start: v[1], min: v[0], max: v[2] };
            prop_assert_eq!(Parallelism::parse_opts(&p.to_string()), Ok(p));
        }
    }
}
