//! The congestion control of a sending data connection (`--cc`): set with `TCP_CONGESTION`,
//! read back so that the summary and telemetry say what each connection really ran. `bic` is
//! fatpipe's own (BIC with adaptive pacing, a BPF program registered on first use).

use fatpipe_tune::telemetry::KernelPace;
use fatpipe_tune::Pacing;
use nix::sys::socket::{getsockopt, setsockopt, sockopt::TcpCongestion};
use std::ffi::OsString;
use std::os::fd::BorrowedFd;

/// `--cc bic`: fatpipe's own BIC, a BPF program; with adaptive pacing (the default) the program
/// paces its connection itself (CWP/EABP in the kernel), with any other `--pacing` it is BIC
/// alone under that pacing law.
pub const BIC: &str = "bic";
/// The kernel's name of BIC with adaptive pacing.
pub const BIC_PACED: &str = "fatpipe_bic";
/// The kernel's name of BIC alone.
pub const BIC_PLAIN: &str = "fatpipe_bicx";

/// The kernel's name for the congestion control `wanted` under `pacing` (the user's), with
/// fatpipe's own registered first when it is the one asked for; why it cannot be had otherwise.
pub fn provide(wanted: &str, pacing: Option<Pacing>) -> Result<&str, String> {
    if wanted != BIC {
        return Ok(wanted);
    }
    let paced = matches!(pacing, None | Some(Pacing::Adaptive));
    register_bic(paced).map(|()| if paced { BIC_PACED } else { BIC_PLAIN })
}

/// Whether `wanted` can run here: a control the kernel lists, or fatpipe's own once registered.
pub fn check(wanted: &str) -> Result<(), String> {
    let name = provide(wanted, None)?;
    let here = available();
    if here.iter().any(|c| c == name) {
        return Ok(());
    }
    Err(format!(
        "congestion control {wanted} is not available here ({} and {BIC})",
        here.join(" ")
    ))
}

#[cfg(feature = "bpf")]
fn register_bic(paced: bool) -> Result<(), String> {
    use fatpipe_bpf::Program;
    let program = if paced {
        Program::Paced
    } else {
        Program::Plain
    };
    fatpipe_bpf::provide(program).map_err(|e| e.to_string())
}

/// What `fatpipe_bic` shows of its pacing law on the socket `fd` (which runs `cc`).
#[cfg(feature = "bpf")]
pub fn kernel_pace(fd: BorrowedFd<'_>, cc: Option<&str>) -> Option<KernelPace> {
    if cc != Some(BIC_PACED) {
        return None;
    }
    let v = fatpipe_bpf::pace_view(fd)?;
    Some(KernelPace {
        state: v.state.name().into(),
        eab: v.eab,
        ceiling: v.ceiling.into(),
    })
}

/// Without the BPF program no connection runs it.
#[cfg(not(feature = "bpf"))]
pub fn kernel_pace(_fd: BorrowedFd<'_>, _cc: Option<&str>) -> Option<KernelPace> {
    None
}

#[cfg(not(feature = "bpf"))]
fn register_bic(_paced: bool) -> Result<(), String> {
    Err(format!(
        "this fatpipe was built without its BPF congestion control {BIC}: build it with \
         `cargo build --release --features bpf` (needs clang, libelf-dev and zlib1g-dev)"
    ))
}

/// Sets `wanted` (if any) on `fd`; returns the congestion control the socket runs. A refusal
/// (not built in, not allowed to an unprivileged process, fatpipe's own not registrable) is
/// added to `problems` and the system's default stays.
pub fn choose(
    fd: BorrowedFd<'_>,
    wanted: Option<&str>,
    pacing: Option<Pacing>,
    problems: &mut impl Extend<String>,
) -> Option<String> {
    if let Some(name) = wanted {
        match provide(name, pacing) {
            Err(e) => problems.extend([format!("{e}; the system's default runs")]),
            Ok(kernel) => {
                if let Err(e) = setsockopt(&fd, TcpCongestion, &OsString::from(kernel)) {
                    problems.extend([format!(
                        "congestion control {name} refused ({e}); the system's default runs \
                         (see net.ipv4.tcp_allowed_congestion_control)"
                    )]);
                }
            }
        }
    }
    // The kernel fills the whole name buffer: the name ends at the first NUL.
    getsockopt(&fd, TcpCongestion).ok().map(|n| {
        let name = n.to_string_lossy();
        name.trim_end_matches('\0').to_string()
    })
}

/// The congestion controls this kernel offers (`tcp_available_congestion_control`).
pub fn available() -> Vec<String> {
    std::fs::read_to_string("/proc/sys/net/ipv4/tcp_available_congestion_control")
        .map(|t| t.split_whitespace().map(str::to_string).collect())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsFd;

    #[test]
    fn a_socket_runs_the_control_asked_for_or_says_why_not() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let s = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let mut problems: Vec<String> = Vec::new();
        // reno is built into every Linux and allowed to every process.
        assert_eq!(
            choose(s.as_fd(), Some("reno"), None, &mut problems).as_deref(),
            Some("reno")
        );
        assert!(problems.is_empty(), "{problems:?}");
        assert!(available().iter().any(|c| c == "reno"));
        let before = choose(s.as_fd(), None, None, &mut problems);
        assert_eq!(before.as_deref(), Some("reno"));
        choose(s.as_fd(), Some("no-such-control"), None, &mut problems);
        assert_eq!(problems.len(), 1, "{problems:?}");
    }

    #[cfg(feature = "bpf")]
    #[test]
    fn bic_is_the_bpf_program_paced_unless_another_pacing_law_was_asked_for() {
        use fatpipe_bpf::Program;
        assert_eq!(BIC_PACED, Program::Paced.name());
        assert_eq!(BIC_PLAIN, Program::Plain.name());
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let s = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let mut problems: Vec<String> = Vec::new();
        for (pacing, name) in [
            (None, BIC_PACED),
            (Some(Pacing::Adaptive), BIC_PACED),
            (Some(Pacing::Cwp), BIC_PLAIN),
            (Some(Pacing::Off), BIC_PLAIN),
        ] {
            let ran = choose(s.as_fd(), Some(BIC), pacing, &mut problems);
            assert_eq!(ran.as_deref(), Some(name), "{problems:?}");
        }
        assert!(check(BIC).is_ok());
    }
}
