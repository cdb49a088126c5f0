//! Which transport a copy's data takes: TCP, or the UDP channel (packets paced by a rate
//! controller, lost ones resent selectively). Random loss costs TCP its rate on a long path
//! whatever its buffers (the window waits on every hole), while the UDP channel holds its rate
//! through it; on a clean path TCP with tuned buffers is as fast and cheaper. So `auto` takes
//! the UDP channel where the last copy to the same server met random loss, and goes back to TCP
//! once a copy over UDP found the loss gone. A copy of one file (not too large) to a server path
//! memory knows nothing of starts on the UDP channel where the path is long (`long_path_start`):
//! its packet train finds the path's rate in a round trip, where TCP's slow start takes a dozen,
//! and a lossy path then costs nothing; the loss that copy met where no queue stood tells the
//! next one which transport to take. The
//! choice is pure: the caller brings what path memory recalls and says what it did.

use fatpipe_tune::CongestionControl;
use std::fmt;
use std::time::Duration;

/// What the user asked for (`--transport`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Asked {
    /// Chosen per copy from what the path showed before.
    Auto,
    /// TCP data connections, always.
    Tcp,
    /// The UDP channel, always (where the server has it).
    Udp,
}

impl Asked {
    /// Every name, for help texts and errors.
    pub const NAMES: &'static str = "auto, tcp, udp";

    /// Parses `auto`, `tcp` or `udp`.
    pub fn parse(s: &str) -> Result<Asked, String> {
        match s.trim().to_ascii_lowercase().as_str() {
            "auto" => Ok(Asked::Auto),
            "tcp" => Ok(Asked::Tcp),
            "udp" => Ok(Asked::Udp),
            _ => Err(format!("unknown transport {s:?}; use {}", Self::NAMES)),
        }
    }
}

/// What the copy is, as far as the choice cares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Copy<'a> {
    /// The server, `host:port`, as path memory names it.
    pub server: &'a str,
    /// Several files (a tree, a list, a glob): the UDP channel carries one file at a time,
    /// while TCP copies several side by side.
    pub several: bool,
    /// Between two servers: the UDP channel runs between this machine and one server.
    pub between_servers: bool,
    /// One local file and one on the server, either way (not standard output, not between
    /// servers): a transfer that can be stopped over TCP and go on over UDP from what arrived.
    pub file_to_file: bool,
    /// A congestion control was asked for or carried over: a server pacing with bbr then
    /// says nothing of random loss.
    pub cc_set: bool,
    /// How long ago the last copy to the server met random loss, if path memory says it did.
    pub lossy_ago: Option<Duration>,
    /// Path memory recalls a copy to the server (of any kind): the path is not new.
    pub known: bool,
    /// The stream count was asked for (`-p N`): the copy's data goes over TCP streams unless
    /// it meets random loss.
    pub streams_asked: bool,
}

/// The transport chosen and why, for the summary (`-v`) and `--json`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Choice {
    /// Whether the data goes over the UDP channel.
    pub udp: bool,
    /// Asked for, or chosen by `auto`.
    pub asked: bool,
    /// Over TCP for now, but a transfer that meets random loss goes on over the UDP channel.
    pub leave_tcp_on_loss: bool,
    /// Nothing known of the path: where its round trip makes it long ([`long_path_start`]),
    /// the file starts on the UDP channel instead.
    pub udp_if_long: bool,
    /// The evidence, in words.
    pub why: String,
}

impl fmt::Display for Choice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "transport {}: {}", self.name(), self.why)
    }
}

/// A transport's name as `--transport` writes it.
fn name(udp: bool) -> &'static str {
    if udp {
        "udp"
    } else {
        "tcp"
    }
}

impl Choice {
    /// `udp` or `tcp`.
    pub fn name(&self) -> &'static str {
        name(self.udp)
    }

    /// The choice as the copy carried it out: `udp_moved`, whether any file went over the
    /// UDP channel (a server without it, or TLS on data, leaves a UDP choice on TCP);
    /// `started`, why a file started on it where this choice said TCP ([`long_path_start`]).
    pub fn as_it_went(&self, udp_moved: bool, started: Option<&str>) -> Choice {
        if let (false, Some(why)) = (self.udp, started) {
            return Choice {
                udp: udp_moved,
                asked: false,
                leave_tcp_on_loss: false,
                udp_if_long: false,
                why: format!("{}; {why}", self.why),
            };
        }
        if !self.udp && udp_moved && !self.asked {
            return Choice {
                udp: true,
                asked: false,
                leave_tcp_on_loss: false,
                udp_if_long: false,
                why: format!(
                    "{}; then its senders met random loss over TCP, and the copy went on over \
                     the UDP channel from what had arrived",
                    self.why
                ),
            };
        }
        if self.udp && !udp_moved {
            return Choice {
                udp: false,
                asked: self.asked,
                leave_tcp_on_loss: false,
                udp_if_long: false,
                why: format!(
                    "{}; but the server did not take the UDP channel (see -vv)",
                    self.why
                ),
            };
        }
        self.clone()
    }
}

/// The transport for `copy` when the user asked for `asked`.
pub fn choose(asked: Asked, copy: &Copy<'_>) -> Choice {
    let told = |udp: bool| Choice {
        udp,
        asked: true,
        leave_tcp_on_loss: false,
        udp_if_long: false,
        why: format!("asked for (--transport {})", name(udp)),
    };
    let auto = |udp: bool, why: String| Choice {
        udp,
        asked: false,
        leave_tcp_on_loss: false,
        udp_if_long: false,
        why,
    };
    let one_file = copy.file_to_file && !copy.several && !copy.between_servers && !copy.cc_set;
    match asked {
        Asked::Tcp => told(false),
        Asked::Udp => told(true),
        Asked::Auto => match copy.lossy_ago {
            None => Choice {
                leave_tcp_on_loss: one_file,
                udp_if_long: one_file && !copy.known && !copy.streams_asked,
                ..auto(
                    false,
                    format!("no random loss known on the path to {}", copy.server),
                )
            },
            Some(ago) => {
                let met = format!(
                    "the last copy to {} met random loss ({} ago)",
                    copy.server,
                    humantime::format_duration(Duration::from_secs(ago.as_secs()))
                );
                if copy.between_servers {
                    auto(
                        false,
                        format!("{met}, but the UDP channel does not run between two servers"),
                    )
                } else if copy.several {
                    auto(
                        false,
                        format!("{met}, but several files move side by side over TCP"),
                    )
                } else {
                    auto(
                        true,
                        format!("{met}: the UDP channel holds its rate through it"),
                    )
                }
            }
        },
    }
}

/// A control round trip at least this long makes a long path: TCP's slow start there takes
/// seconds to reach the rate, and random loss holds it down (at 10 and 30 ms a clean path gave
/// TCP the same or more than the UDP channel; at 60 ms the same; docs/auto-plan.md).
pub const LONG_PATH: Duration = Duration::from_millis(50);

/// The fastest local link a copy starts on the UDP channel over: its sender is one thread
/// (13–22 Gbit/s over loopback on a 2-core host), where TCP spreads streams over cores.
pub const UDP_LINK_MAX_BITS: u64 = 10_000_000_000;

/// The largest file that starts on the UDP channel, per second of round trip (2 GiB at 100 ms).
/// What the channel saves is a fixed number of round trips (TCP's slow start; on a lossy path
/// the look at the loss before leaving TCP, about 1.4 s at 100 ms); what it may cost on a clean
/// path grows with the file: on a host whose sender gets put aside its cruise falls a few
/// per cent short of TCP's (4 GiB at 100 ms: 0.89–0.94 of the ceiling against 0.955).
const UDP_FIRST_BYTES_PER_RTT_SECOND: f64 = 20.0 * (1u64 << 30) as f64;

/// The round trip of a path a new copy may start on the UDP channel over, whatever its size
/// (see [`long_path_start`]): `round_trip` long, the local link (`link_bits`) not too fast.
pub fn long_path(round_trip: Option<Duration>, link_bits: Option<u64>) -> Option<Duration> {
    let rtt = round_trip.filter(|t| *t >= LONG_PATH)?;
    link_bits
        .is_none_or(|b| b <= UDP_LINK_MAX_BITS)
        .then_some(rtt)
}

/// Whether a copy whose choice is [`Choice::udp_if_long`] starts on the UDP channel, from the
/// control connection's `round_trip`, the speed of the local link it leaves by (`link_bits`,
/// bits/s, when the system tells it) and the file's `size`: why, if it does. Its packet train
/// finds the path's rate in a round trip where TCP's slow start takes a dozen; random loss
/// then costs it nothing.
pub fn long_path_start(
    round_trip: Option<Duration>,
    link_bits: Option<u64>,
    size: Option<u64>,
) -> Option<String> {
    let rtt = long_path(round_trip, link_bits)?;
    let most = rtt.as_secs_f64() * UDP_FIRST_BYTES_PER_RTT_SECOND;
    size.filter(|s| (*s as f64) <= most)?;
    Some(format!(
        "a new path with a {} ms round trip: the file started on the UDP channel, whose packet \
         train finds the path's rate at once and which holds it through random loss",
        rtt.as_millis()
    ))
}

/// The loss (%) a copy over the UDP channel met while no queue stood on the path (else its
/// resends, the seed's R) below which the path counts as clean again: the next copy goes back
/// to TCP. What a start-up that overflowed the queue dropped does not count.
pub const CLEAN_BELOW_PERCENT: f64 = 0.05;

/// What path memory keeps of random loss after a copy (the congestion control chosen on it,
/// which marks the path lossy; `None`: not known to be lossy): nothing for several files; for
/// one file, a copy over the UDP channel tells by the loss it met (`udp_loss`, %: the path's
/// own, apart from a queue's overflow, else R) whether the loss goes on, and a TCP copy by the
/// control its senders chose on random loss (`chosen_on_loss`), or else keeps what it `carried`
/// over from the last copy.
pub fn remembered_loss(
    several: bool,
    udp_loss: Option<f64>,
    chosen_on_loss: Option<CongestionControl>,
    carried: Option<CongestionControl>,
) -> Option<CongestionControl> {
    match (several, udp_loss) {
        (true, _) => None,
        (false, Some(r)) => (r >= CLEAN_BELOW_PERCENT)
            .then(|| carried.unwrap_or(CongestionControl::FOR_RANDOM_LOSS)),
        (false, None) => chosen_on_loss.or(carried),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn copy(lossy_ago: Option<u64>) -> Copy<'static> {
        Copy {
            server: "h:2811",
            several: false,
            between_servers: false,
            file_to_file: true,
            cc_set: false,
            lossy_ago: lossy_ago.map(Duration::from_secs),
            known: true,
            streams_asked: false,
        }
    }

    #[test]
    fn one_file_to_a_new_server_starts_on_udp_where_the_path_is_long() {
        let new = Copy {
            known: false,
            ..copy(None)
        };
        let c = choose(Asked::Auto, &new);
        assert!(c.udp_if_long && c.leave_tcp_on_loss && !c.udp);
        // Known paths, lossy or clean, several files, fixed streams, told transports: no.
        for other in [
            copy(None),
            Copy {
                known: false,
                ..copy(Some(5))
            },
            Copy {
                several: true,
                ..new
            },
            Copy {
                streams_asked: true,
                ..new
            },
            Copy {
                cc_set: true,
                ..new
            },
        ] {
            assert!(!choose(Asked::Auto, &other).udp_if_long, "{other:?}");
        }
        assert!(!choose(Asked::Tcp, &new).udp_if_long);
        // The round trip and the local link decide.
        // The round trip, the local link and the file's size decide.
        let ms = |n| Some(Duration::from_millis(n));
        let gib = |n: u64| Some(n << 30);
        assert_eq!(long_path_start(ms(30), None, gib(1)), None);
        assert_eq!(long_path_start(None, None, gib(1)), None);
        let why = long_path_start(ms(103), Some(1_000_000_000), gib(1)).unwrap();
        assert!(
            why.starts_with("a new path with a 103 ms round trip"),
            "{why}"
        );
        assert!(long_path_start(ms(50), None, Some(0)).is_some());
        assert_eq!(long_path_start(ms(200), Some(25_000_000_000), gib(1)), None);
        // Up to 2 GiB at 100 ms, 4 at 200; a size not known: TCP.
        assert!(long_path_start(ms(100), None, gib(2)).is_some());
        assert_eq!(long_path_start(ms(100), None, gib(4)), None);
        assert!(long_path_start(ms(200), None, gib(4)).is_some());
        assert_eq!(long_path_start(ms(100), None, None), None);
        // The copy as it went says why it took UDP, or went back to TCP.
        let back = c.as_it_went(false, Some("… but no UDP packet got through"));
        assert!(!back.udp && back.why.ends_with("but no UDP packet got through"));
        let went = c.as_it_went(true, Some(&why));
        assert!(went.udp && !went.udp_if_long, "{went:?}");
        assert_eq!(
            went.to_string(),
            format!("transport udp: no random loss known on the path to h:2811; {why}")
        );
    }

    #[test]
    fn only_one_file_either_way_with_no_control_set_leaves_tcp_in_flight() {
        assert!(choose(Asked::Auto, &copy(None)).leave_tcp_on_loss);
        for c in [
            Copy {
                several: true,
                ..copy(None)
            },
            Copy {
                between_servers: true,
                ..copy(None)
            },
            Copy {
                file_to_file: false,
                ..copy(None)
            },
            Copy {
                cc_set: true,
                ..copy(None)
            },
        ] {
            assert!(!choose(Asked::Auto, &c).leave_tcp_on_loss, "{c:?}");
        }
        // Known lossy (already on UDP), or told which transport: nothing to leave.
        assert!(!choose(Asked::Auto, &copy(Some(5))).leave_tcp_on_loss);
        assert!(!choose(Asked::Tcp, &copy(None)).leave_tcp_on_loss);
    }

    #[test]
    fn auto_takes_udp_only_for_one_file_on_a_path_that_met_random_loss() {
        let clean = choose(Asked::Auto, &copy(None));
        assert!(!clean.udp && !clean.asked);
        assert_eq!(
            clean.to_string(),
            "transport tcp: no random loss known on the path to h:2811"
        );
        let lossy = choose(Asked::Auto, &copy(Some(125)));
        assert!(lossy.udp && !lossy.asked);
        assert_eq!(
            lossy.why,
            "the last copy to h:2811 met random loss (2m 5s ago): the UDP channel holds its \
             rate through it"
        );
        let tree = Copy {
            several: true,
            ..copy(Some(5))
        };
        assert!(!choose(Asked::Auto, &tree).udp);
        let relay = Copy {
            between_servers: true,
            ..copy(Some(5))
        };
        assert!(!choose(Asked::Auto, &relay).udp);
    }

    #[test]
    fn a_udp_choice_the_server_did_not_take_reads_as_tcp() {
        let udp = choose(Asked::Auto, &copy(Some(5)));
        assert_eq!(udp.as_it_went(true, None), udp);
        let went = udp.as_it_went(false, None);
        assert!(!went.udp);
        assert!(went
            .why
            .ends_with("but the server did not take the UDP channel (see -vv)"));
        let tcp = choose(Asked::Auto, &copy(None));
        assert_eq!(tcp.as_it_went(false, None), tcp);
        let left = tcp.as_it_went(true, None);
        assert!(left.udp && !left.asked);
        assert!(
            left.why.contains("met random loss over TCP"),
            "{}",
            left.why
        );
    }

    #[test]
    fn what_is_asked_for_holds() {
        for c in [copy(None), copy(Some(5))] {
            let udp = choose(Asked::Udp, &c);
            assert!(udp.udp && udp.asked);
            let tcp = choose(Asked::Tcp, &c);
            assert!(!tcp.udp && tcp.asked);
        }
        assert_eq!(Asked::parse("UDP"), Ok(Asked::Udp));
        assert_eq!(Asked::parse("auto"), Ok(Asked::Auto));
        assert!(Asked::parse("sctp").is_err());
    }

    #[test]
    fn a_copy_over_udp_that_met_hardly_any_loss_ends_the_lossy_spell() {
        let bbr = Some(CongestionControl::Bbr);
        let carried = || bbr.clone();
        // Over UDP: the path's own loss decides.
        assert_eq!(remembered_loss(false, Some(0.0), None, carried()), None);
        assert_eq!(remembered_loss(false, Some(0.04), None, carried()), None);
        assert_eq!(remembered_loss(false, Some(0.9), None, carried()), bbr);
        assert_eq!(remembered_loss(false, Some(0.9), None, None), bbr);
        // Over TCP: what its senders chose, or what was carried over.
        assert_eq!(remembered_loss(false, None, carried(), None), bbr);
        assert_eq!(remembered_loss(false, None, None, carried()), bbr);
        assert_eq!(remembered_loss(false, None, None, None), None);
        // Several files at once say nothing of one path's loss.
        assert_eq!(remembered_loss(true, Some(5.0), carried(), carried()), None);
    }
}
