//! Data-connection address arguments: `PORT`/`PASV` (RFC 959) and `EPRT`/`EPSV` (RFC 2428).

use std::net::{IpAddr, Ipv4Addr, SocketAddr, SocketAddrV4};

/// Parses the `h1,h2,h3,h4,p1,p2` form used by `PORT` and the `227` reply.
pub fn parse_host_port(text: &str) -> Option<SocketAddrV4> {
    let mut nums = [0u8; 6];
    let mut parts = text.trim().split(',');
    for n in nums.iter_mut() {
        *n = parts.next()?.trim().parse().ok()?;
    }
    if parts.next().is_some() {
        return None;
    }
    let ip = Ipv4Addr::new(nums[0], nums[1], nums[2], nums[3]);
    Some(SocketAddrV4::new(
        ip,
        u16::from(nums[4]) << 8 | u16::from(nums[5]),
    ))
}

/// Formats an address in the `h1,h2,h3,h4,p1,p2` form.
pub fn format_host_port(addr: SocketAddrV4) -> String {
    let [a, b, c, d] = addr.ip().octets();
    format!(
        "{a},{b},{c},{d},{},{}",
        addr.port() >> 8,
        addr.port() & 0xff
    )
}

/// Parses an `EPRT` argument: `<d><proto><d><address><d><port><d>` with protocol 1 (IPv4) or 2 (IPv6).
pub fn parse_eprt(text: &str) -> Option<SocketAddr> {
    let text = text.trim();
    let delim = text.chars().next()?;
    if !(33..=126).contains(&(delim as u32)) {
        return None;
    }
    let fields: Vec<&str> = text.split(delim).collect();
    // Leading and trailing delimiters give empty first and last fields.
    if fields.len() != 5 || !fields[0].is_empty() || !fields[4].is_empty() {
        return None;
    }
    let port: u16 = fields[3].parse().ok()?;
    let ip: IpAddr = match fields[1] {
        "1" => IpAddr::V4(fields[2].parse().ok()?),
        "2" => IpAddr::V6(fields[2].parse().ok()?),
        _ => return None,
    };
    Some(SocketAddr::new(ip, port))
}

/// The protocol field of an `EPRT` argument with a valid delimiter, even if the rest is invalid
/// (so that an unknown protocol can be answered 522 rather than 501).
pub fn eprt_protocol(text: &str) -> Option<&str> {
    let text = text.trim();
    let delim = text.chars().next().filter(|c| c.is_ascii_graphic())?;
    text[1..].split(delim).next().filter(|p| !p.is_empty())
}

/// Formats an `EPRT` argument with `|` as delimiter.
pub fn format_eprt(addr: SocketAddr) -> String {
    let proto = if addr.is_ipv4() { 1 } else { 2 };
    format!("|{proto}|{}|{}|", addr.ip(), addr.port())
}

/// Finds the address in a `227 Entering Passive Mode (h1,h2,h3,h4,p1,p2)` reply text.
pub fn parse_pasv_reply(text: &str) -> Option<SocketAddrV4> {
    let start = text.find(|c: char| c.is_ascii_digit())?;
    let rest = &text[start..];
    let end = rest
        .find(|c: char| !(c.is_ascii_digit() || c == ','))
        .unwrap_or(rest.len());
    parse_host_port(&rest[..end])
}

/// Finds the port in a `229 Entering Extended Passive Mode (|||port|)` reply text.
pub fn parse_epsv_reply(text: &str) -> Option<u16> {
    let open = text.find('(')?;
    let inner = &text[open + 1..text[open..].find(')')? + open];
    let delim = inner.chars().next()?;
    let fields: Vec<&str> = inner.split(delim).collect();
    if fields.len() != 5 {
        return None;
    }
    fields[3].parse().ok().filter(|p| *p != 0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn known_forms() {
        assert_eq!(
            parse_host_port("127,0,0,1,4,1"),
            Some("127.0.0.1:1025".parse().unwrap())
        );
        assert_eq!(parse_host_port("127,0,0,1,4,256"), None);
        assert_eq!(parse_host_port("127,0,0,1,4"), None);
        assert_eq!(
            parse_eprt("|2|::1|5282|"),
            Some("[::1]:5282".parse().unwrap())
        );
        assert_eq!(parse_eprt("|1|::1|5282|"), None);
        assert_eq!(
            parse_pasv_reply("Entering Passive Mode (10,0,0,2,200,10)."),
            Some("10.0.0.2:51210".parse().unwrap())
        );
        assert_eq!(
            parse_epsv_reply("Entering Extended Passive Mode (|||6446|)"),
            Some(6446)
        );
        assert_eq!(
            parse_epsv_reply("Entering Extended Passive Mode (|||0|)"),
            None
        );
    }

    proptest! {
        #[test]
        fn host_port_roundtrip(ip in any::<u32>(), port in any::<u16>()) {
            let a = SocketAddrV4::new(Ipv4Addr::from(ip), port);
            prop_assert_eq!(parse_host_port(&format_host_port(a)), Some(a));
            prop_assert_eq!(parse_pasv_reply(&format!("Entering Passive Mode ({})", format_host_port(a))), Some(a));
        }

        #[test]
        fn eprt_roundtrip(a in any::<SocketAddr>()) {
            let a = match a { SocketAddr::V6(v6) => SocketAddr::new(IpAddr::V6(*v6.ip()), v6.port()), v4 => v4 };
            prop_assert_eq!(parse_eprt(&format_eprt(a)), Some(a));
        }

        #[test]
        fn parsers_never_panic(s in "\\PC{0,64}") {
            let _ = parse_host_port(&s);
            let _ = parse_eprt(&s);
            let _ = parse_pasv_reply(&s);
            let _ = parse_epsv_reply(&s);
        }
    }
}
