//! The local network interface a connection leaves by, and its speed: a copy does not start on
//! the UDP channel, whose sender is one thread, over a link faster than that thread can fill.

use std::net::IpAddr;
use std::path::Path;

/// The speed in bits/s of the local interface that holds `local` (a connected socket's own
/// address), as `/sys/class/net/NAME/speed` tells it: `None` where the system does not
/// (virtual devices, loopback, an interface of another network namespace's view).
pub fn speed_of(local: IpAddr) -> Option<u64> {
    let name = nix::ifaddrs::getifaddrs().ok()?.find_map(|i| {
        let a = i.address?;
        let ip = match (a.as_sockaddr_in(), a.as_sockaddr_in6()) {
            (Some(v4), _) => IpAddr::V4(v4.ip()),
            (_, Some(v6)) => IpAddr::V6(v6.ip()),
            _ => return None,
        };
        (ip == local).then_some(i.interface_name)
    })?;
    read_speed(&Path::new("/sys/class/net").join(name).join("speed"))
}

/// A `speed` file's Mbit/s as bits/s; unknown (`-1`, unreadable, not a number) as `None`.
fn read_speed(path: &Path) -> Option<u64> {
    let mbit: i64 = std::fs::read_to_string(path).ok()?.trim().parse().ok()?;
    u64::try_from(mbit)
        .ok()
        .filter(|m| *m > 0)
        .map(|m| m * 1_000_000)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_link_speed_is_read_in_bits_and_unknown_ones_are_none() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("speed");
        for (text, bits) in [
            ("10000\n", Some(10_000_000_000)),
            ("1000", Some(1_000_000_000)),
            ("-1\n", None),
            ("0", None),
            ("fast", None),
        ] {
            std::fs::write(&file, text).unwrap();
            assert_eq!(read_speed(&file), bits, "{text:?}");
        }
        assert_eq!(read_speed(&dir.path().join("none")), None);
        // Loopback has no speed; an address no interface holds has none either.
        assert_eq!(speed_of("127.0.0.1".parse().unwrap()), None);
        assert_eq!(speed_of("192.0.2.77".parse().unwrap()), None);
    }
}
