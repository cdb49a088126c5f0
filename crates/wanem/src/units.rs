//! Parsing of the emulator's quantities: rates (`100mbit`), durations (`50ms`), queue limits
//! (`1bdp`, `100p`, `256kb`) and loss (`0.01` or `1%`).

use std::time::Duration;

/// Parses a rate in bit/s: a number with `bit`, `kbit`, `mbit` or `gbit` (also `bps`, `k`, `m`, `g`).
pub fn parse_rate(s: &str) -> Result<u64, String> {
    let t = s.trim().to_ascii_lowercase();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: f64 = num
        .parse()
        .map_err(|_| format!("bad rate {s:?}: expected e.g. 100mbit"))?;
    let mult = match unit {
        "" | "bit" | "bps" => 1.0,
        "k" | "kbit" | "kbps" => 1e3,
        "m" | "mbit" | "mbps" => 1e6,
        "g" | "gbit" | "gbps" => 1e9,
        _ => {
            return Err(format!(
                "bad rate unit in {s:?}: use bit, kbit, mbit or gbit"
            ))
        }
    };
    let bps = n * mult;
    if !(1000.0..=1e12).contains(&bps) {
        return Err(format!("rate {s:?} out of range (1kbit to 1000gbit)"));
    }
    Ok(bps as u64)
}

/// Parses the rate of cross traffic: a rate as [`parse_rate`], or `0`/`off` for none.
pub fn parse_cross(s: &str) -> Result<u64, String> {
    match s.trim() {
        "0" | "off" => Ok(0),
        r => parse_rate(r),
    }
}

/// Parses a duration such as `100ms`, `1.5s`, `250us`.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let t = s.trim();
    if let Some(ms) = t.strip_suffix("ms") {
        if let Ok(v) = ms.parse::<f64>() {
            if (0.0..1e7).contains(&v) {
                return Ok(Duration::from_secs_f64(v / 1e3));
            }
        }
    }
    humantime::parse_duration(t).map_err(|e| format!("bad duration {s:?}: {e}"))
}

/// How big the bottleneck queue may grow before it drops (drop-tail).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum QueueLimit {
    /// At most this many bytes waiting.
    Bytes(u64),
    /// At most this many packets waiting.
    Packets(u64),
    /// A multiple of the path's bandwidth-delay product (rate × RTT), in bytes.
    Bdp(f64),
}

impl QueueLimit {
    /// Parses `1bdp`, `0.5bdp`, `100p` (packets), `64kb`, `1mb`, or plain bytes.
    pub fn parse(s: &str) -> Result<QueueLimit, String> {
        let t = s.trim().to_ascii_lowercase();
        let bad = || format!("bad queue limit {s:?}: use e.g. 1bdp, 100p, 256kb");
        let num = |x: &str| {
            x.trim()
                .parse::<f64>()
                .ok()
                .filter(|v| *v > 0.0 && *v < 1e12)
        };
        if let Some(x) = t.strip_suffix("bdp") {
            return num(x).map(QueueLimit::Bdp).ok_or_else(bad);
        }
        for (suffix, mult) in [
            ("pkts", 0.0),
            ("p", 0.0),
            ("kb", 1024.0),
            ("mb", 1048576.0),
            ("b", 1.0),
        ] {
            if let Some(x) = t.strip_suffix(suffix) {
                let v = num(x).ok_or_else(bad)?;
                return Ok(if mult == 0.0 {
                    QueueLimit::Packets(v as u64)
                } else {
                    QueueLimit::Bytes((v * mult) as u64)
                });
            }
        }
        num(&t).map(|v| QueueLimit::Bytes(v as u64)).ok_or_else(bad)
    }
}

impl std::fmt::Display for QueueLimit {
    /// The form [`QueueLimit::parse`] reads back: `65536b`, `100p`, `1bdp`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            QueueLimit::Bytes(b) => write!(f, "{b}b"),
            QueueLimit::Packets(p) => write!(f, "{p}p"),
            QueueLimit::Bdp(k) => write!(f, "{k}bdp"),
        }
    }
}

/// Parses a loss probability: `0.01` or `1%`.
pub fn parse_loss(s: &str) -> Result<f64, String> {
    let t = s.trim();
    let v = match t.strip_suffix('%') {
        Some(p) => p.trim().parse::<f64>().map(|v| v / 100.0),
        None => t.parse::<f64>(),
    }
    .map_err(|_| format!("bad loss {s:?}: use 0.01 or 1%"))?;
    if (0.0..=1.0).contains(&v) {
        Ok(v)
    } else {
        Err(format!("loss {s:?} must be between 0 and 1 (0% and 100%)"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn units() {
        assert_eq!(parse_rate("1gbit"), Ok(1_000_000_000));
        assert_eq!(parse_rate("100Mbit"), Ok(100_000_000));
        assert_eq!(parse_rate("2.5mbit"), Ok(2_500_000));
        assert!(parse_rate("fast").is_err());
        assert!(parse_rate("10xbit").is_err());
        assert_eq!(parse_duration("100ms"), Ok(Duration::from_millis(100)));
        assert_eq!(parse_duration("0.5ms"), Ok(Duration::from_micros(500)));
        assert_eq!(parse_duration("2s"), Ok(Duration::from_secs(2)));
        assert_eq!(QueueLimit::parse("1bdp"), Ok(QueueLimit::Bdp(1.0)));
        assert_eq!(QueueLimit::parse("100p"), Ok(QueueLimit::Packets(100)));
        assert_eq!(QueueLimit::parse("64kb"), Ok(QueueLimit::Bytes(65536)));
        assert!(QueueLimit::parse("-1bdp").is_err());
        assert_eq!(parse_loss("1%"), Ok(0.01));
        assert_eq!(parse_loss("0.02"), Ok(0.02));
        assert!(parse_loss("2").is_err());
        assert_eq!(parse_cross("off"), Ok(0));
        assert_eq!(parse_cross("640mbit"), Ok(640_000_000));
        assert!(parse_cross("-1").is_err());
    }

    proptest! {
        #[test]
        fn queue_limit_display_parses_back(n in 1u64..1_000_000_000, k in 0.01f64..100.0, which in 0u8..3) {
            let q = match which {
                0 => QueueLimit::Bytes(n),
                1 => QueueLimit::Packets(n),
                _ => QueueLimit::Bdp(k),
            };
            prop_assert_eq!(QueueLimit::parse(&q.to_string()), Ok(q));
        }

        #[test]
        fn parsers_never_panic(s in "\\PC{0,16}") {
            let _ = parse_rate(&s);
            let _ = parse_duration(&s);
            let _ = QueueLimit::parse(&s);
            let _ = parse_loss(&s);
        }
    }
}
