//! The congestion control of a sending data connection (`--cc`): set with `TCP_CONGESTION`,
//! read back so that the summary and telemetry say what each connection really ran. `bic` is
//! fatpipe's own (BIC with adaptive pacing, a BPF program registered on first use). Names are
//! `fatpipe_tune::CongestionControl`'s; this module brings them to the kernel.

use fatpipe_tune::telemetry::KernelPace;
use fatpipe_tune::{CongestionControl, Pacing};
use nix::sys::socket::{getsockopt, setsockopt, sockopt::TcpCongestion};
use std::ffi::OsString;
use std::os::fd::BorrowedFd;

/// The control to set for `wanted` under `pacing` (the user's): fatpipe's BIC paced by its own
/// program unless another pacing law was asked for, registered first; why it cannot be had.
pub fn provide(
    wanted: &CongestionControl,
    pacing: Option<Pacing>,
) -> Result<CongestionControl, String> {
    if !wanted.is_fatpipe_bic() {
        return Ok(wanted.clone());
    }
    let paced = matches!(pacing, None | Some(Pacing::Adaptive));
    register_bic(paced).map(|()| wanted.clone().paced_in_kernel(paced))
}

/// Whether `wanted` can run here: a control the kernel lists, or fatpipe's own once registered.
pub fn check(wanted: &CongestionControl) -> Result<(), String> {
    let cc = provide(wanted, None)?;
    let here = available();
    if here.iter().any(|c| c == cc.kernel_name()) {
        return Ok(());
    }
    Err(format!(
        "congestion control {} is not available here ({} and {})",
        wanted.user_name(),
        here.join(" "),
        BIC.user_name()
    ))
}

/// fatpipe's BIC as the user names it.
const BIC: CongestionControl = CongestionControl::Bic { paced: true };

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
pub fn kernel_pace(fd: BorrowedFd<'_>, cc: Option<&CongestionControl>) -> Option<KernelPace> {
    if cc != Some(&BIC) {
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
pub fn kernel_pace(_fd: BorrowedFd<'_>, _cc: Option<&CongestionControl>) -> Option<KernelPace> {
    None
}

#[cfg(not(feature = "bpf"))]
fn register_bic(_paced: bool) -> Result<(), String> {
    Err(format!(
        "this fatpipe was built without its BPF congestion control {}: build it with \
         `cargo build --release --features bpf` (needs clang, libelf-dev and zlib1g-dev)",
        BIC.user_name()
    ))
}

/// Sets `wanted` (if any) on `fd`; returns the congestion control the socket runs. A refusal
/// (not built in, not allowed to an unprivileged process, fatpipe's own not registrable) is
/// added to `problems` and the system's default stays.
pub fn choose(
    fd: BorrowedFd<'_>,
    wanted: Option<&CongestionControl>,
    pacing: Option<Pacing>,
    problems: &mut impl Extend<String>,
) -> Option<CongestionControl> {
    if let Some(cc) = wanted {
        match provide(cc, pacing) {
            Err(e) => problems.extend([format!("{e}; the system's default runs")]),
            Ok(kernel) => {
                let name = OsString::from(kernel.kernel_name());
                if let Err(e) = setsockopt(&fd, TcpCongestion, &name) {
                    problems.extend([format!(
                        "congestion control {} refused ({e}); the system's default runs \
                         (see net.ipv4.tcp_allowed_congestion_control)",
                        cc.user_name()
                    )]);
                }
            }
        }
    }
    // The kernel fills the whole name buffer: the name ends at the first NUL.
    getsockopt(&fd, TcpCongestion)
        .ok()
        .map(|n| CongestionControl::from(n.to_string_lossy().trim_end_matches('\0')))
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
        let reno = CongestionControl::Reno;
        assert_eq!(
            choose(s.as_fd(), Some(&reno), None, &mut problems),
            Some(reno.clone())
        );
        assert!(problems.is_empty(), "{problems:?}");
        assert!(available().iter().any(|c| c == reno.kernel_name()));
        let before = choose(s.as_fd(), None, None, &mut problems);
        assert_eq!(before, Some(reno));
        let unknown = CongestionControl::from("no-such-control");
        choose(s.as_fd(), Some(&unknown), None, &mut problems);
        assert_eq!(problems.len(), 1, "{problems:?}");
    }

    #[cfg(feature = "bpf")]
    #[test]
    fn bic_is_the_bpf_program_paced_unless_another_pacing_law_was_asked_for() {
        use fatpipe_bpf::Program;
        let paced = CongestionControl::Bic { paced: true };
        let plain = CongestionControl::Bic { paced: false };
        assert_eq!(paced.kernel_name(), Program::Paced.name());
        assert_eq!(plain.kernel_name(), Program::Plain.name());
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let s = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let mut problems: Vec<String> = Vec::new();
        for (pacing, ran) in [
            (None, &paced),
            (Some(Pacing::Adaptive), &paced),
            (Some(Pacing::Cwp), &plain),
            (Some(Pacing::Off), &plain),
        ] {
            let got = choose(s.as_fd(), Some(&BIC), pacing, &mut problems);
            assert_eq!(got.as_ref(), Some(ran), "{problems:?}");
        }
        assert!(check(&BIC).is_ok());
    }
}
