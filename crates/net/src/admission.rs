//! Who may open a transfer's data connections: one rule for every mover (MODE S, MODE E, the
//! UDP channel's TCP connection) at both ends. A connection is taken from the peer's own
//! address, or, where third-party copies are allowed, from a host [`ThirdPartyNetworks`]
//! allows; then, where the session set a data token (fatpipe's `DTOK`), its first bytes must
//! be the token ([`Proof`]; inside TLS under `PROT P`). A session without a token under
//! `PROT P` proves its connections by resuming the control connection's TLS session (`tls`).

use ipnet::IpNet;
use std::fmt;
use std::io::{self, Read, Write};
use std::net::{IpAddr, TcpStream};
use std::time::Duration;
use subtle::ConstantTimeEq;

/// Bytes of a data token.
pub const TOKEN_LEN: usize = 16;

/// A secret both ends of a session's data connections know: the end that connects sends it
/// first, the end that accepts takes no connection without it. It proves that a connection
/// belongs to the session (or to the two sessions of a third-party copy, given the same one),
/// not to whoever connected first.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Token([u8; TOKEN_LEN]);

impl Token {
    /// A new random token.
    pub fn random() -> io::Result<Token> {
        let mut b = [0u8; TOKEN_LEN];
        getrandom::getrandom(&mut b).map_err(io::Error::other)?;
        Ok(Token(b))
    }

    /// A token written as 32 hexadecimal digits (as `DTOK` carries it).
    pub fn from_hex(s: &str) -> Option<Token> {
        let bytes = hex::decode(s).ok()?;
        Some(Token(bytes.try_into().ok()?))
    }

    /// The token as 32 hexadecimal digits.
    pub fn to_hex(&self) -> String {
        hex::encode(self.0)
    }

    /// Whether `bytes`, the first a new data connection carried, show this token (compared in
    /// constant time).
    pub fn shown_in(&self, bytes: &[u8; TOKEN_LEN]) -> bool {
        self.0.ct_eq(bytes).into()
    }
}

impl fmt::Debug for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Token(…)")
    }
}

/// The hosts a third-party copy may reach or be reached from: public unicast addresses, and
/// the networks the operator lists (a site's data-transfer nodes on a private network).
/// Loopback, private, link-local, shared and unspecified addresses are never reached
/// otherwise, so `--allow-third-party` cannot make the server a proxy to its own services.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ThirdPartyNetworks {
    listed: Vec<IpNet>,
}

impl ThirdPartyNetworks {
    /// Networks written as `CIDR[,CIDR…]` (`10.0.0.0/8,fd00::/8`; an address alone is one
    /// host).
    pub fn parse(list: &str) -> Result<ThirdPartyNetworks, String> {
        let listed = list
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(|s| {
                s.parse::<IpNet>()
                    .or_else(|_| s.parse::<IpAddr>().map(IpNet::from))
                    .map(|n| n.trunc())
                    .map_err(|_| format!("{s:?} is not a network (CIDR such as 10.1.0.0/16)"))
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(ThirdPartyNetworks { listed })
    }

    /// Whether a third-party copy may involve `ip`.
    pub fn allows(&self, ip: IpAddr) -> bool {
        let ip = ip.to_canonical();
        self.listed.iter().any(|n| n.contains(&ip)) || public_unicast(ip)
    }
}

/// Whether `ip` is a unicast address on the public Internet.
fn public_unicast(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => {
            let [a, b, ..] = v4.octets();
            let shared = a == 100 && (64..128).contains(&b);
            !(v4.is_loopback()
                || v4.is_private()
                || v4.is_link_local()
                || v4.is_unspecified()
                || v4.is_broadcast()
                || v4.is_multicast()
                || v4.is_documentation()
                || shared
                || a == 0)
        }
        IpAddr::V6(v6) => {
            let first = v6.segments()[0];
            let unique_local = first & 0xfe00 == 0xfc00;
            let link_local = first & 0xffc0 == 0xfe80;
            !(v6.is_loopback()
                || v6.is_unspecified()
                || v6.is_multicast()
                || unique_local
                || link_local)
        }
    }
}

/// Whose data connections this end takes (the address; what a connection must show once it is
/// up is its [`Proof`]).
#[derive(Clone, Debug)]
pub struct Admission {
    /// The peer of the control connection: its connections are taken.
    pub peer: IpAddr,
    /// A third-party copy: connections from other hosts these networks allow are taken too.
    pub third_party: Option<ThirdPartyNetworks>,
}

impl Admission {
    /// Connections from `peer` only.
    pub fn peer(peer: IpAddr) -> Admission {
        Admission {
            peer,
            third_party: None,
        }
    }

    /// Whether a connection from `from` may be taken (a refusal is logged).
    pub fn admits(&self, from: IpAddr) -> bool {
        let ok = from.to_canonical() == self.peer.to_canonical()
            || self.third_party.as_ref().is_some_and(|n| n.allows(from));
        if !ok {
            tracing::warn!(%from, "refused a data connection from a foreign address");
        }
        ok
    }
}

/// Longest wait for a new data connection's token (a connection that shows nothing holds its
/// transfer this long at most).
pub const TOKEN_WAIT: Duration = Duration::from_secs(10);

/// What a new data connection does with the session's token as its first bytes (inside TLS
/// when the connection has it, so that nobody on the path learns it): the end that connected
/// shows it, the end that accepted checks it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Proof {
    /// This end connected: it sends the token.
    Show(Token),
    /// This end accepted: it takes no byte of data before the token.
    Check(Token),
}

impl Proof {
    /// The proof of a connection this end made (`connected`) or accepted, with `token`.
    pub fn of(token: Option<Token>, connected: bool) -> Option<Proof> {
        token.map(|t| {
            if connected {
                Proof::Show(t)
            } else {
                Proof::Check(t)
            }
        })
    }

    /// Shows or checks the token over `stream` (whose TCP socket is `sock`, for the wait). A
    /// connection that shows a wrong token, or none within [`TOKEN_WAIT`], is a
    /// `PermissionDenied` error: it is not this session's.
    pub fn exchange(&self, stream: &mut (impl Read + Write), sock: &TcpStream) -> io::Result<()> {
        match self {
            Proof::Show(t) => {
                stream.write_all(&t.0)?;
                stream.flush()
            }
            Proof::Check(t) => {
                let mut shown = [0u8; TOKEN_LEN];
                let before = sock.read_timeout()?;
                sock.set_read_timeout(Some(before.map_or(TOKEN_WAIT, |t| t.min(TOKEN_WAIT))))?;
                let read = stream.read_exact(&mut shown);
                sock.set_read_timeout(before)?;
                if read.is_ok() && t.shown_in(&shown) {
                    Ok(())
                } else {
                    Err(not_proved())
                }
            }
        }
    }
}

impl Proof {
    /// [`Proof::exchange`] on a plain TCP connection (the UDP channel's).
    pub fn on_plain(proof: Option<Proof>, sock: &TcpStream) -> io::Result<()> {
        let Some(p) = proof else {
            return Ok(());
        };
        let mut stream = sock;
        p.exchange(&mut stream, sock)
    }
}

/// The error of a connection that did not show the session's token.
fn not_proved() -> io::Error {
    io::Error::new(
        io::ErrorKind::PermissionDenied,
        "a data connection did not show this session's data token: it is not this transfer's",
    )
}

/// Whether `e` says a connection was not this session's: it did not show the token
/// ([`Proof::exchange`]), or did not resume the control connection's TLS session where that
/// is the proof (`tls`).
pub fn is_not_proved(e: &io::Error) -> bool {
    e.kind() == io::ErrorKind::PermissionDenied
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn third_party_hosts_exclude_the_servers_own_networks_unless_listed() {
        let none = ThirdPartyNetworks::default();
        for local in [
            "127.0.0.1",
            "10.1.2.3",
            "192.168.1.1",
            "172.16.0.9",
            "169.254.1.1",
            "100.64.0.1",
            "0.0.0.0",
            "255.255.255.255",
            "224.0.0.1",
            "::1",
            "fe80::1",
            "fd00::5",
            "::ffff:127.0.0.1",
        ] {
            assert!(!none.allows(ip(local)), "{local}");
        }
        assert!(none.allows(ip("192.0.43.10")));
        assert!(none.allows(ip("2a00:1450::1")));
        let listed = ThirdPartyNetworks::parse("10.0.0.0/8, 127.0.0.2,fd00::/8").unwrap();
        assert!(listed.allows(ip("10.200.0.1")));
        assert!(listed.allows(ip("127.0.0.2")));
        assert!(!listed.allows(ip("127.0.0.1")));
        assert!(listed.allows(ip("fd00::5")));
        assert!(ThirdPartyNetworks::parse("10.0.0.0/33").is_err());
        assert!(ThirdPartyNetworks::parse("nonsense").is_err());
    }

    #[test]
    fn a_connection_is_taken_from_the_peer_or_an_allowed_host() {
        let a = Admission::peer(ip("127.0.0.1"));
        assert!(a.admits(ip("::ffff:127.0.0.1")));
        assert!(!a.admits(ip("127.0.0.2")));
        let third = Admission {
            third_party: Some(ThirdPartyNetworks::parse("127.0.0.0/8").unwrap()),
            ..a
        };
        assert!(third.admits(ip("127.0.0.3")));
        assert!(!third.admits(ip("10.0.0.1")));
    }

    #[test]
    fn a_connection_without_the_token_is_refused_and_one_with_it_taken() {
        let t = Token::random().unwrap();
        assert_eq!(Token::from_hex(&t.to_hex()), Some(t));
        assert_eq!(Token::from_hex("abcd"), None);
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let check = Proof::of(Some(t), false).unwrap();
        let accept = || l.accept().unwrap().0;
        let mut wrong = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let other = Proof::of(Some(Token::random().unwrap()), true).unwrap();
        let sock = wrong.try_clone().unwrap();
        other.exchange(&mut wrong, &sock).unwrap();
        let mut s = accept();
        let sock = s.try_clone().unwrap();
        let e = check.exchange(&mut s, &sock).unwrap_err();
        assert!(is_not_proved(&e));
        let mut short = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        short.write_all(b"short").unwrap();
        drop(short);
        let mut s = accept();
        let sock = s.try_clone().unwrap();
        assert!(check.exchange(&mut s, &sock).is_err());
        let mut right = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let show = Proof::of(Some(t), true).unwrap();
        let sock = right.try_clone().unwrap();
        show.exchange(&mut right, &sock).unwrap();
        right.write_all(b"data").unwrap();
        let mut s = accept();
        let sock = s.try_clone().unwrap();
        check.exchange(&mut s, &sock).unwrap();
        let mut rest = [0u8; 4];
        s.read_exact(&mut rest).unwrap();
        assert_eq!(
            &rest, b"data",
            "the token is taken off the stream, the data is not"
        );
    }
}
