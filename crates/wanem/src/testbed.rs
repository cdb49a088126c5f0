//! A whole emulated path: namespaces `<name>-a` and `<name>-b`, each with a TUN device `fp0`
//! addressed 198.18.0.1 (a) and 198.18.0.2 (b) (the benchmarking range, RFC 2544), a TCP
//! profile, and the [`Engine`] between them. Torn down when dropped, also on panic.

use crate::engine::{Direction, Engine};
use crate::link::{LinkParams, LinkStats};
use crate::schedule::Schedule;
use crate::units::QueueLimit;
use crate::{netns, tun};
use serde::{Deserialize, Serialize};
use std::net::Ipv4Addr;
use std::process::Command;
use std::time::Duration;

/// Which end of the path.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Side {
    /// The client side, 198.18.0.1.
    A,
    /// The server side, 198.18.0.2.
    B,
}

/// TCP settings inside both namespaces.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Profile {
    /// This kernel's default buffers, congestion control cubic.
    Stock,
    /// `tcp_rmem`/`tcp_wmem` maximum raised to [`TUNED_MAX`] bytes, congestion control cubic.
    Tuned,
}

/// The autotuning ceiling of the tuned profile (256 MiB), far above any BDP the emulator reaches.
pub const TUNED_MAX: u64 = 256 << 20;

impl Profile {
    /// Parses `stock` or `tuned`.
    pub fn parse(s: &str) -> Result<Profile, String> {
        match s {
            "stock" => Ok(Profile::Stock),
            "tuned" => Ok(Profile::Tuned),
            _ => Err(format!("unknown profile {s:?}: stock or tuned")),
        }
    }

    /// The profile as `parse` takes it.
    pub fn name(self) -> &'static str {
        match self {
            Profile::Stock => "stock",
            Profile::Tuned => "tuned",
        }
    }
}

/// Everything that defines a path.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TestbedConfig {
    /// Prefix of the namespace names (at most 12 characters).
    pub name: String,
    /// Settings of a → b, and of b → a unless `reverse` is given (the RTT is the sum of both
    /// one-way delays).
    pub link: LinkParams,
    /// Settings of b → a when they differ from a → b.
    pub reverse: Option<LinkParams>,
    /// Seed of the loss pattern.
    pub seed: u64,
    /// TCP profile of both namespaces.
    pub profile: Profile,
    /// Changes over time, if any.
    #[serde(skip)]
    pub schedule: Option<Schedule>,
}

impl TestbedConfig {
    /// A symmetric path (set `reverse` for an asymmetric one) with round-trip time `rtt` and bottleneck `rate_bps` in each direction.
    pub fn new(name: &str, rtt: Duration, rate_bps: u64) -> Self {
        TestbedConfig {
            name: name.to_string(),
            link: LinkParams {
                rate_bps,
                delay: rtt / 2,
                queue: QueueLimit::Bdp(1.0),
                loss: 0.0,
                cross_bps: 0,
            },
            reverse: None,
            seed: 1,
            profile: Profile::Stock,
            schedule: None,
        }
    }
}

/// A running emulated path.
#[derive(Debug)]
pub struct Testbed {
    config: TestbedConfig,
    engine: Option<Engine>,
}

const DEV: &str = "fp0";

impl Testbed {
    /// Builds the path (removing any leftover of the same name first). Needs root.
    pub fn up(config: TestbedConfig) -> anyhow::Result<Testbed> {
        if config.name.is_empty()
            || config.name.len() > 12
            || !config
                .name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-')
        {
            anyhow::bail!(
                "testbed name {:?} must be 1 to 12 letters, digits or '-'",
                config.name
            );
        }
        let mut tb = Testbed {
            config,
            engine: None,
        };
        for side in [Side::A, Side::B] {
            netns::create(&tb.ns(side))?;
            // `ip netns exec` mounts this over /etc/hosts: programs that resolve their own host
            // name at start (globus-gridftp-server) find it, and the sides have names.
            netns::write_hosts(
                &tb.ns(side),
                Self::addr(side),
                &[
                    (Self::addr(Side::A), "side-a"),
                    (Self::addr(Side::B), "side-b"),
                ],
            )?;
        }
        let tun_a = tun::open_in_netns(&tb.ns(Side::A), DEV)?;
        let tun_b = tun::open_in_netns(&tb.ns(Side::B), DEV)?;
        let cc = "cubic";
        for side in [Side::A, Side::B] {
            let ns = tb.ns(side);
            let (me, peer) = (
                Self::addr(side).to_string(),
                Self::addr(tb_other(side)).to_string(),
            );
            netns::configure_p2p(&ns, DEV, &me, &peer, cc)?;
            // Independent runs: no cached ssthresh/RTT from an earlier connection.
            netns::sysctl(&ns, "net/ipv4/tcp_no_metrics_save", "1")?;
            if tb.config.profile == Profile::Tuned {
                netns::sysctl(
                    &ns,
                    "net/ipv4/tcp_rmem",
                    &format!("4096 131072 {TUNED_MAX}"),
                )?;
                netns::sysctl(&ns, "net/ipv4/tcp_wmem", &format!("4096 16384 {TUNED_MAX}"))?;
            }
        }
        let seed = tb.config.seed;
        let (ab, ba) = (tb.config.link, tb.config.reverse.unwrap_or(tb.config.link));
        let dirs = [
            Direction {
                input: tun_a.try_clone()?,
                output: tun_b.try_clone()?,
                params: ab,
                seed,
            },
            Direction {
                input: tun_b,
                output: tun_a,
                params: ba,
                seed: seed.wrapping_add(1),
            },
        ];
        tb.engine = Some(Engine::start(dirs, tb.config.schedule.clone()));
        Ok(tb)
    }

    /// The configuration it was built with.
    pub fn config(&self) -> &TestbedConfig {
        &self.config
    }

    /// The namespace name of a side.
    pub fn ns(&self, side: Side) -> String {
        namespace(&self.config.name, side)
    }

    /// The IPv4 address of a side.
    pub fn addr(side: Side) -> Ipv4Addr {
        match side {
            Side::A => Ipv4Addr::new(198, 18, 0, 1),
            Side::B => Ipv4Addr::new(198, 18, 0, 2),
        }
    }

    /// A command that runs `program` inside a side's namespace.
    pub fn command(&self, side: Side, program: &str) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.ns(side), program]);
        c
    }

    /// Runs `f` on a thread inside a side's namespace (see [`netns::spawn_in`]).
    pub fn spawn_in<T: Send + 'static>(
        &self,
        side: Side,
        f: impl FnOnce() -> anyhow::Result<T> + Send + 'static,
    ) -> std::thread::JoinHandle<anyhow::Result<T>> {
        netns::spawn_in(&self.ns(side), f)
    }

    /// [`Testbed::spawn_in`] and wait for the result.
    pub fn run_in<T: Send + 'static>(
        &self,
        side: Side,
        f: impl FnOnce() -> anyhow::Result<T> + Send + 'static,
    ) -> anyhow::Result<T> {
        netns::run_in(&self.ns(side), f)
    }

    /// When the emulator's clock started (schedule times count from here).
    pub fn started(&self) -> Option<std::time::Instant> {
        self.engine.as_ref().map(Engine::started)
    }

    /// Counters of `[a→b, b→a]`.
    pub fn stats(&self) -> [LinkStats; 2] {
        self.engine.as_ref().map(Engine::stats).unwrap_or_default()
    }

    /// Stops the emulator and removes the namespaces.
    pub fn down(mut self) -> anyhow::Result<()> {
        self.teardown()
    }

    fn teardown(&mut self) -> anyhow::Result<()> {
        if let Some(mut e) = self.engine.take() {
            e.stop();
        }
        let a = netns::delete(&self.ns(Side::A));
        let b = netns::delete(&self.ns(Side::B));
        a.and(b)
    }
}

impl Drop for Testbed {
    fn drop(&mut self) {
        if let Err(e) = self.teardown() {
            tracing::warn!("testbed teardown: {e:#}");
        }
    }
}

fn tb_other(side: Side) -> Side {
    match side {
        Side::A => Side::B,
        Side::B => Side::A,
    }
}

/// The namespace name of a side of testbed `name`.
pub fn namespace(name: &str, side: Side) -> String {
    match side {
        Side::A => format!("{name}-a"),
        Side::B => format!("{name}-b"),
    }
}
