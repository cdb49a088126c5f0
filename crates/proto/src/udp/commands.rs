//! The UDP channel's `SITE` commands on the control connection: `SETNETSTACK` (which stack a
//! session's transfers take) and `UDPREADY` (a download's receiving socket, named with its
//! `RETR`). Parsed and written here, no I/O; property-tested and fuzzed.

use super::PACKET_RANGE;

/// The `SITE` command that chooses the data channel's stack (GridFTP's precedent is
/// `SITE SETNETSTACK udt`), and the `FEAT` line that says a server has it.
pub const SETNETSTACK: &str = "SETNETSTACK";

/// `SITE SETNETSTACK tcp`, or `udp` with the sender's rate controller and rates:
/// `udp control=history rate=1000000000 start=100000000` (bits/s; every word optional).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct NetStack {
    /// UDP (`true`) or TCP.
    pub udp: bool,
    /// The rate controller's name.
    pub control: Option<String>,
    /// The line rate, bits/s.
    pub rate: Option<u64>,
    /// The rate to start at, bits/s.
    pub start: Option<u64>,
}

impl NetStack {
    /// Reads the argument of `SITE SETNETSTACK`.
    pub fn parse(arg: &str) -> Result<NetStack, String> {
        let mut words = arg.split_whitespace();
        let mut out = match words.next().map(str::to_ascii_lowercase).as_deref() {
            Some("tcp") => return Ok(NetStack::default()),
            Some("udp") => NetStack {
                udp: true,
                ..NetStack::default()
            },
            Some(other) => return Err(format!("unknown network stack {other} (tcp or udp)")),
            None => return Err("SETNETSTACK needs tcp or udp".into()),
        };
        for w in words {
            let (k, v) = w
                .split_once('=')
                .ok_or_else(|| format!("{w}: expected NAME=VALUE"))?;
            let bits = || {
                v.parse::<u64>()
                    .ok()
                    .filter(|&n| n >= 1_000_000)
                    .ok_or_else(|| format!("{k}={v}: a rate in bits/s of at least 1000000"))
            };
            match k.to_ascii_lowercase().as_str() {
                "control" if !v.is_empty() && v.len() <= 32 => out.control = Some(v.to_string()),
                "rate" => out.rate = Some(bits()?),
                "start" => out.start = Some(bits()?),
                _ => return Err(format!("{w}: unknown option")),
            }
        }
        Ok(out)
    }
}

impl std::fmt::Display for NetStack {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if !self.udp {
            return f.write_str("tcp");
        }
        f.write_str("udp")?;
        if let Some(c) = &self.control {
            write!(f, " control={c}")?;
        }
        if let Some(r) = self.rate {
            write!(f, " rate={r}")?;
        }
        if let Some(r) = self.start {
            write!(f, " start={r}")?;
        }
        Ok(())
    }
}

/// The `SITE` command by which a downloading receiver names its UDP socket before the
/// transfer command: the sender sends the packet train as it reads `RETR`, a round trip
/// before the data connection is up (where `Ready` would come), and the receiver starts
/// without waiting for `Hello`.
pub const UDPREADY: &str = "UDPREADY";

/// `SITE UDPREADY port token packet length`: the receiver's UDP port (on the address of its
/// control connection), the transfer's token, the packet size it takes, and the bytes it
/// expects (what `SIZE` said is left past `REST`); for the next transfer only. The sender
/// still says `Hello` and the receiver still says `Ready` on the data connection: each end
/// checks the other's against these.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UdpReady {
    /// The receiver's UDP port.
    pub port: u16,
    /// The transfer's token.
    pub token: u64,
    /// UDP payload of a data packet, header included (within [`PACKET_RANGE`]).
    pub packet: u16,
    /// Bytes of the transfer.
    pub length: u64,
}

impl UdpReady {
    /// Reads the argument of `SITE UDPREADY`.
    pub fn parse(arg: &str) -> Result<UdpReady, String> {
        let words: Vec<&str> = arg.split_whitespace().collect();
        let [port, token, packet, length] = words[..] else {
            return Err("UDPREADY needs: port token packet length".into());
        };
        let number = |w: &str, what: &str| {
            w.parse::<u64>()
                .map_err(|_| format!("{w}: not a number ({what})"))
        };
        let port = u16::try_from(number(port, "port")?)
            .ok()
            .filter(|&p| p > 0)
            .ok_or_else(|| format!("{port}: not a port"))?;
        let packet = u16::try_from(number(packet, "packet size")?)
            .ok()
            .filter(|p| PACKET_RANGE.contains(p))
            .ok_or_else(|| {
                format!(
                    "{packet}: a packet size from {} to {} bytes",
                    PACKET_RANGE.start(),
                    PACKET_RANGE.end()
                )
            })?;
        Ok(UdpReady {
            port,
            token: number(token, "token")?,
            packet,
            length: number(length, "length")?,
        })
    }
}

impl std::fmt::Display for UdpReady {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let UdpReady {
            port,
            token,
            packet,
            length,
        } = self;
        write!(f, "{port} {token} {packet} {length}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn udp_ready_reads_back(port in 1u16.., token: u64, packet in PACKET_RANGE, length: u64) {
            let r = UdpReady { port, token, packet, length };
            prop_assert_eq!(UdpReady::parse(&r.to_string()), Ok(r));
        }

        #[test]
        fn any_udp_ready_argument_parses_or_fails_without_panic(arg in ".{0,80}") {
            if let Ok(r) = UdpReady::parse(&arg) {
                prop_assert!(r.port > 0 && PACKET_RANGE.contains(&r.packet));
            }
        }
    }

    #[test]
    fn netstack_reads_back_and_refuses_nonsense() {
        let n = NetStack {
            udp: true,
            control: Some("history".into()),
            rate: Some(1_000_000_000),
            start: None,
        };
        assert_eq!(NetStack::parse(&n.to_string()), Ok(n));
        assert_eq!(NetStack::parse("TCP"), Ok(NetStack::default()));
        assert!(NetStack::parse("udt").is_err());
        assert!(NetStack::parse("udp rate=5").is_err());
        assert!(NetStack::parse("udp colour=red").is_err());
        assert!(NetStack::parse("").is_err());
    }

    #[test]
    fn udp_ready_refuses_what_no_receiver_could_mean() {
        assert!(UdpReady::parse("5000 7 1472 100").is_ok());
        for bad in [
            "",
            "5000 7 1472",
            "5000 7 1472 100 9",
            "0 7 1472 100",
            "70000 7 1472 100",
        ] {
            assert!(UdpReady::parse(bad).is_err(), "{bad}");
        }
        assert!(
            UdpReady::parse("5000 7 100 100").is_err(),
            "packet below the range"
        );
        assert!(UdpReady::parse("5000 -7 1472 100").is_err());
    }
}
