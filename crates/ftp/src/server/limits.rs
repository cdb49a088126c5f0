//! What one source address may take of the server before anyone is authenticated: sessions
//! at once, and failed logins in a sliding window. Pure bookkeeping (time is passed in), so that
//! the rules are tested without sockets or clocks.

use std::collections::{HashMap, VecDeque};
use std::net::IpAddr;
use std::time::{Duration, Instant};

/// How long a failed login counts against its source.
pub const FAILURE_WINDOW: Duration = Duration::from_secs(60);
/// Sources tracked at most; beyond it the oldest failure records are dropped (memory stays
/// bounded whatever the number of addresses an attacker has).
const MAX_SOURCES: usize = 4096;

/// Per-source limits and their current use.
#[derive(Debug)]
pub struct HostLimits {
    max_sessions: usize,
    max_failures: u32,
    hosts: HashMap<IpAddr, Host>,
}

#[derive(Debug, Default)]
struct Host {
    sessions: usize,
    failures: VecDeque<Instant>,
}

/// The source an address counts as: itself for IPv4, its /64 for IPv6 (one site's hosts
/// usually share a /64, and one attacker has all of it).
pub fn source(ip: IpAddr) -> IpAddr {
    match ip.to_canonical() {
        IpAddr::V6(v6) => {
            let s = v6.segments();
            IpAddr::V6(std::net::Ipv6Addr::new(s[0], s[1], s[2], s[3], 0, 0, 0, 0))
        }
        v4 => v4,
    }
}

impl HostLimits {
    /// At most `max_sessions` sessions and `max_failures` failed logins per minute per source.
    pub fn new(max_sessions: usize, max_failures: u32) -> Self {
        HostLimits {
            max_sessions,
            max_failures,
            hosts: HashMap::new(),
        }
    }

    /// Takes a session slot for `ip`, unless it holds all it may; release it with [`Self::leave`].
    pub fn admit(&mut self, ip: IpAddr) -> bool {
        let h = self.hosts.entry(source(ip)).or_default();
        if h.sessions >= self.max_sessions {
            return false;
        }
        h.sessions += 1;
        true
    }

    /// A session of `ip` ended.
    pub fn leave(&mut self, ip: IpAddr, now: Instant) {
        let key = source(ip);
        if let Some(h) = self.hosts.get_mut(&key) {
            h.sessions = h.sessions.saturating_sub(1);
        }
        self.forget_idle(key, now);
    }

    /// Whether `ip` may try a password now (fewer failures than the limit in the window).
    pub fn may_try(&mut self, ip: IpAddr, now: Instant) -> bool {
        let key = source(ip);
        let Some(h) = self.hosts.get_mut(&key) else {
            return true;
        };
        expire(&mut h.failures, now);
        h.failures.len() < self.max_failures as usize
    }

    /// `ip` failed a login at `now`.
    pub fn failed(&mut self, ip: IpAddr, now: Instant) {
        if self.hosts.len() >= MAX_SOURCES {
            self.prune(now);
        }
        let h = self.hosts.entry(source(ip)).or_default();
        expire(&mut h.failures, now);
        h.failures.push_back(now);
        // Only the last `max_failures` matter for the decision.
        while h.failures.len() > self.max_failures.max(1) as usize {
            h.failures.pop_front();
        }
    }

    /// Sources tracked (for tests of the memory bound).
    #[cfg(test)]
    pub fn tracked(&self) -> usize {
        self.hosts.len()
    }

    fn forget_idle(&mut self, key: IpAddr, now: Instant) {
        if let Some(h) = self.hosts.get_mut(&key) {
            expire(&mut h.failures, now);
            if h.sessions == 0 && h.failures.is_empty() {
                self.hosts.remove(&key);
            }
        }
    }

    /// Drops expired records, then, if still full, the failure records of idle sources with
    /// the oldest last failure.
    fn prune(&mut self, now: Instant) {
        self.hosts.retain(|_, h| {
            expire(&mut h.failures, now);
            h.sessions > 0 || !h.failures.is_empty()
        });
        if self.hosts.len() < MAX_SOURCES {
            return;
        }
        let mut idle: Vec<(Instant, IpAddr)> = self
            .hosts
            .iter()
            .filter(|(_, h)| h.sessions == 0)
            .filter_map(|(k, h)| h.failures.back().map(|t| (*t, *k)))
            .collect();
        idle.sort();
        for (_, k) in idle.iter().take(self.hosts.len() + 1 - MAX_SOURCES / 2) {
            self.hosts.remove(k);
        }
    }
}

/// The connections that have not logged in yet, oldest first: a pool of their own, apart
/// from `--max-sessions` (which only logged-in sessions count against), so that idle
/// connections cannot lock real clients out. When it is full, a newcomer takes the place of
/// the oldest, which is closed: holding the pool then costs an attacker a stream of new
/// connections, and a real client keeps its place while it logs in.
#[derive(Debug)]
pub struct WaitingLogins<T> {
    max: usize,
    queue: VecDeque<(u64, T)>,
}

impl<T> WaitingLogins<T> {
    /// A pool of `max` places (at least one).
    pub fn new(max: usize) -> Self {
        WaitingLogins {
            max: max.max(1),
            queue: VecDeque::new(),
        }
    }

    /// Connection `id` waits to log in (with `handle`, which says how to close it); returns the
    /// handle of the oldest connection when it had to make room.
    pub fn arrive(&mut self, id: u64, handle: T) -> Option<T> {
        let evicted = (self.queue.len() >= self.max)
            .then(|| self.queue.pop_front().map(|(_, h)| h))
            .flatten();
        self.queue.push_back((id, handle));
        evicted
    }

    /// Connection `id` logged in or went away.
    pub fn leave(&mut self, id: u64) {
        self.queue.retain(|(i, _)| *i != id);
    }

    /// Connections waiting now (for tests).
    #[cfg(test)]
    fn len(&self) -> usize {
        self.queue.len()
    }
}

fn expire(failures: &mut VecDeque<Instant>, now: Instant) {
    while failures
        .front()
        .is_some_and(|t| now.saturating_duration_since(*t) >= FAILURE_WINDOW)
    {
        failures.pop_front();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn sessions_per_source_are_capped_and_released() {
        let mut l = HostLimits::new(2, 5);
        let now = Instant::now();
        assert!(l.admit(ip("10.0.0.1")));
        assert!(
            l.admit(ip("::ffff:10.0.0.1")),
            "a mapped address is the same source"
        );
        assert!(!l.admit(ip("10.0.0.1")));
        assert!(l.admit(ip("10.0.0.2")), "other sources are not affected");
        l.leave(ip("10.0.0.1"), now);
        assert!(l.admit(ip("10.0.0.1")));
        // One IPv6 /64 is one source.
        assert!(l.admit(ip("2001:db8::1")));
        assert!(l.admit(ip("2001:db8::2")));
        assert!(!l.admit(ip("2001:db8::ffff")));
        assert!(l.admit(ip("2001:db8:0:1::1")));
    }

    #[test]
    fn a_full_pool_of_waiting_logins_closes_its_oldest_for_a_newcomer() {
        let mut w = WaitingLogins::new(3);
        assert_eq!(w.arrive(1, "a"), None);
        assert_eq!(w.arrive(2, "b"), None);
        assert_eq!(w.arrive(3, "c"), None);
        assert_eq!(w.arrive(4, "d"), Some("a"));
        w.leave(2);
        assert_eq!(w.len(), 2);
        assert_eq!(w.arrive(5, "e"), None);
        assert_eq!(w.arrive(6, "f"), Some("c"));
        w.leave(99);
        assert_eq!(w.len(), 3);
    }

    #[test]
    fn failures_lock_a_source_out_for_the_window_only() {
        let mut l = HostLimits::new(8, 3);
        let t0 = Instant::now();
        let a = ip("192.0.2.7");
        for i in 0..3 {
            assert!(l.may_try(a, t0 + Duration::from_secs(i)));
            l.failed(a, t0 + Duration::from_secs(i));
        }
        assert!(!l.may_try(a, t0 + Duration::from_secs(10)));
        assert!(l.may_try(ip("192.0.2.8"), t0 + Duration::from_secs(10)));
        // The first failure leaves the window at 60 s: one more try.
        assert!(l.may_try(a, t0 + FAILURE_WINDOW));
        assert!(l.may_try(a, t0 + FAILURE_WINDOW + Duration::from_secs(3)));
    }

    #[test]
    fn memory_stays_bounded_whatever_the_number_of_sources() {
        let mut l = HostLimits::new(8, 3);
        let t0 = Instant::now();
        for i in 0..(3 * MAX_SOURCES as u32) {
            let a = IpAddr::V4(std::net::Ipv4Addr::from(0x0a00_0000 + i));
            l.failed(a, t0 + Duration::from_millis(u64::from(i)));
        }
        assert!(l.tracked() <= MAX_SOURCES, "{}", l.tracked());
        // Sources with sessions are never dropped.
        let mut l = HostLimits::new(8, 3);
        assert!(l.admit(ip("10.1.1.1")));
        for i in 0..(2 * MAX_SOURCES as u32) {
            l.failed(IpAddr::V4(std::net::Ipv4Addr::from(i)), t0);
        }
        for _ in 0..7 {
            assert!(l.admit(ip("10.1.1.1")));
        }
        assert!(!l.admit(ip("10.1.1.1")), "its count survived pruning");
    }
}
