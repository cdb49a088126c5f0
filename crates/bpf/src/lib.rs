//! fatpipe's own kernel program: `fatpipe_bic`, BIC with adaptive pacing (CWP/EABP) as a BPF
//! TCP congestion control (struct_ops), the seed's BICIPG on a kernel that has no BIC. The
//! program paces its connection itself (`SO_MAX_PACING_RATE` every ACK) and holds the window
//! while EABP runs, which a user-space law reading `TCP_INFO` once per RTT cannot.
//!
//! Registering it needs `CAP_BPF` and `CAP_NET_ADMIN` (root); it stays registered while the
//! process that registered it lives, and a connection that runs it keeps it to its end.

#[cfg(test)]
mod law;
mod view;

pub use view::{pace_view, PaceState, PaceView};

/// Loads and attaches a skeleton's program for the rest of the process's life: the skeleton and
/// its link are never dropped, since dropping the link unregisters the congestion control.
macro_rules! register {
    ($builder:ty) => {
        (|| {
            let storage = Box::leak(Box::new(MaybeUninit::uninit()));
            let open = <$builder>::default().open(storage)?;
            let mut loaded = open.load()?;
            let link = loaded.maps.fatpipe_bic.attach_struct_ops()?;
            std::mem::forget(link);
            std::mem::forget(loaded);
            Ok(())
        })()
    };
}

mod paced {
    #![allow(clippy::all, clippy::pedantic, missing_docs, unsafe_op_in_unsafe_fn)]
    include!(concat!(env!("OUT_DIR"), "/bic_paced.skel.rs"));
}

mod plain {
    #![allow(clippy::all, clippy::pedantic, missing_docs, unsafe_op_in_unsafe_fn)]
    include!(concat!(env!("OUT_DIR"), "/bic_plain.skel.rs"));
}

use libbpf_rs::skel::{OpenSkel, SkelBuilder};
use std::mem::MaybeUninit;
use std::sync::OnceLock;

/// fatpipe's congestion controls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Program {
    /// BIC with adaptive pacing (CWP/EABP) in the kernel: `fatpipe_bic`.
    Paced,
    /// BIC alone, for a user-space pacing law or none: `fatpipe_bicx`.
    Plain,
}

impl Program {
    /// The name the kernel lists the program under (`tcp_available_congestion_control`).
    pub fn name(self) -> &'static str {
        match self {
            Program::Paced => "fatpipe_bic",
            Program::Plain => "fatpipe_bicx",
        }
    }
}

/// Why a program could not be registered.
#[derive(Debug, Clone, thiserror::Error)]
#[error("cannot register fatpipe's BPF congestion control {name}: {why}")]
pub struct Error {
    name: &'static str,
    why: String,
}

/// Makes `program` available to this process's sockets: registers it on the first call
/// (unless the kernel lists it already, registered by another fatpipe) and answers the first
/// call's outcome after that.
pub fn provide(program: Program) -> Result<(), Error> {
    static PACED: OnceLock<Result<(), Error>> = OnceLock::new();
    static PLAIN: OnceLock<Result<(), Error>> = OnceLock::new();
    let once = match program {
        Program::Paced => &PACED,
        Program::Plain => &PLAIN,
    };
    once.get_or_init(|| {
        if registered(program) {
            return Ok(());
        }
        let done = match program {
            Program::Paced => register!(paced::BicPacedSkelBuilder),
            Program::Plain => register!(plain::BicPlainSkelBuilder),
        };
        done.map_err(|e: libbpf_rs::Error| Error {
            name: program.name(),
            why: explain(&e),
        })
    })
    .clone()
}

/// Whether the kernel lists `program` now.
pub fn registered(program: Program) -> bool {
    std::fs::read_to_string("/proc/sys/net/ipv4/tcp_available_congestion_control")
        .is_ok_and(|t| t.split_whitespace().any(|c| c == program.name()))
}

/// The error with what the user can do about the usual causes.
fn explain(e: &libbpf_rs::Error) -> String {
    // SAFETY: geteuid has no preconditions and cannot fail.
    let hint = if unsafe { libc::geteuid() } == 0 {
        "the kernel refused it (does it have BPF struct_ops for tcp_congestion_ops?)"
    } else {
        "registering a congestion control needs root (CAP_BPF and CAP_NET_ADMIN)"
    };
    format!("{e:#}; {hint}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsRawFd;

    /// The tests run as root (CI does): the program registers, the kernel lists it, a socket
    /// runs it.
    #[test]
    fn the_program_registers_and_a_socket_runs_it() {
        for program in [Program::Paced, Program::Plain] {
            provide(program).unwrap();
            assert!(registered(program));
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            let s = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
            let name = program.name().as_bytes();
            // SAFETY: a valid socket and a buffer of the given length.
            let r = unsafe {
                libc::setsockopt(
                    s.as_raw_fd(),
                    libc::IPPROTO_TCP,
                    libc::TCP_CONGESTION,
                    name.as_ptr().cast(),
                    name.len() as u32,
                )
            };
            assert_eq!(r, 0, "{}", std::io::Error::last_os_error());
            // A second call answers the first one's outcome.
            provide(program).unwrap();
            // Data sent and acknowledged: the paced program shows its pacing law.
            let (mut peer, _) = l.accept().unwrap();
            let reader =
                std::thread::spawn(move || std::io::copy(&mut peer, &mut std::io::sink()).unwrap());
            let mut s = s;
            std::io::Write::write_all(&mut s, &vec![7u8; 8 << 20]).unwrap();
            let view = pace_view(std::os::fd::AsFd::as_fd(&s));
            drop(s);
            assert_eq!(reader.join().unwrap(), 8 << 20);
            match program {
                Program::Paced => {
                    let v = view.expect("a view of the paced program");
                    assert!(v.ceiling > 0, "{v:?}");
                    // Loopback may drop under load (a full backlog), so eab may be set; the
                    // law's answer to a loss is tested on traces (law.rs). Whatever happened,
                    // the period is a second doubled zero or more times.
                    let periods = v.time_eabp_ms / 1000;
                    assert!(
                        v.time_eabp_ms.is_multiple_of(1000) && periods.is_power_of_two(),
                        "{v:?}"
                    );
                }
                Program::Plain => assert_eq!(view, None, "the plain program shows nothing"),
            }
        }
    }
}
