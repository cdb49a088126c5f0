//! Buffer sizes as users write them (`64K`, `32MiB`, `1048576`) and as reports print them.

/// Parses a byte count: a number with an optional binary unit `K`/`KiB`, `M`/`MiB`, `G`/`GiB`
/// (case-insensitive; a trailing `B` is allowed).
pub fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim().to_ascii_lowercase();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: f64 = num
        .parse()
        .map_err(|_| format!("bad size {s:?}: expected e.g. 64K or 32M"))?;
    let mult: u64 = match unit.trim_end_matches('b').trim_end_matches('i') {
        "" => 1,
        "k" => 1 << 10,
        "m" => 1 << 20,
        "g" => 1 << 30,
        _ => return Err(format!("bad size unit in {s:?}: use K, M or G")),
    };
    let bytes = n * mult as f64;
    if !(1.0..=(1u64 << 40) as f64).contains(&bytes) {
        return Err(format!("size {s:?} out of range (1 byte to 1 TiB)"));
    }
    Ok(bytes as u64)
}

/// Formats a byte count with a binary unit: `64 KiB`, `12.5 MiB`.
pub fn format_size(bytes: u64) -> String {
    const UNITS: [(&str, u64); 3] = [("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)];
    for (unit, scale) in UNITS {
        if bytes >= scale {
            let v = bytes as f64 / scale as f64;
            return if v.fract() == 0.0 {
                format!("{v:.0} {unit}")
            } else {
                format!("{v:.1} {unit}")
            };
        }
    }
    format!("{bytes} B")
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn parses_units() {
        assert_eq!(parse_size("65536"), Ok(65536));
        assert_eq!(parse_size("64K"), Ok(65536));
        assert_eq!(parse_size("64KiB"), Ok(65536));
        assert_eq!(parse_size("32m"), Ok(32 << 20));
        assert_eq!(parse_size("1.5MB"), Ok(3 << 19));
        assert!(parse_size("0").is_err());
        assert!(parse_size("12 parsecs").is_err());
        assert!(parse_size("").is_err());
    }

    #[test]
    fn formats_units() {
        assert_eq!(format_size(65536), "64 KiB");
        assert_eq!(format_size(13_107_200), "12.5 MiB");
        assert_eq!(format_size(100), "100 B");
    }

    proptest! {
        #[test]
        fn whole_kibibytes_roundtrip(k in 1u64..1_000_000) {
            prop_assert_eq!(parse_size(&format!("{k}K")), Ok(k << 10));
        }

        #[test]
        fn never_panics(s in ".{0,20}") {
            let _ = parse_size(&s);
        }
    }
}
