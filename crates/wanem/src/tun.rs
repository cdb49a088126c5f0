//! TUN devices created inside a network namespace: the emulator's two ends.

use anyhow::{bail, Context};
use std::fs::{File, OpenOptions};
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;

/// `struct ifreq` as TUNSETIFF reads it: a name and the flags, padded to the kernel's size.
#[repr(C)]
struct IfReq {
    name: [u8; libc::IFNAMSIZ],
    flags: libc::c_short,
    _pad: [u8; 22],
}

const TUNSETIFF: libc::c_ulong = 0x4004_54ca;

/// Opens a TUN device named `ifname` (IPv4/IPv6 packets, no extra header) inside the network
/// namespace `netns` (a name under /var/run/netns). The calling thread's namespace is untouched:
/// the work happens on a short-lived thread, and the returned descriptor stays valid anywhere.
pub fn open_in_netns(netns: &str, ifname: &str) -> anyhow::Result<File> {
    if ifname.is_empty() || ifname.len() >= libc::IFNAMSIZ {
        bail!("interface name {ifname:?} must have 1 to 15 characters");
    }
    let name = ifname.to_string();
    crate::netns::run_in(netns, move || {
        let tun = OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC)
            .open("/dev/net/tun")
            .context("cannot open /dev/net/tun")?;
        let mut req = IfReq {
            name: [0; libc::IFNAMSIZ],
            flags: (libc::IFF_TUN | libc::IFF_NO_PI) as libc::c_short,
            _pad: [0; 22],
        };
        req.name[..name.len()].copy_from_slice(name.as_bytes());
        // SAFETY: TUNSETIFF reads an ifreq, which `req` is laid out as, and the fd is a TUN control fd.
        let rc = unsafe { libc::ioctl(tun.as_raw_fd(), TUNSETIFF, &mut req) };
        if rc < 0 {
            return Err(std::io::Error::last_os_error())
                .with_context(|| format!("TUNSETIFF {name}"));
        }
        Ok(tun)
    })
}
