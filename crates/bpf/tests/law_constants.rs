//! The BPF law (`bic_law.h`) and the user-space laws share their thresholds: the delay test
//! that says a window reached the queue (`fatpipe_tune::path::queue`) and adaptive pacing's
//! constants (`fatpipe_tune::pacing::adaptive`). C cannot read Rust's constants, so this test
//! reads the header's `#define`s and fails when the two drift apart.

use fatpipe_tune::pacing::adaptive;
use fatpipe_tune::path::queue;
use std::time::Duration;

const HEADER: &str = include_str!("../src/bpf/bic_law.h");

/// The value of `#define NAME VALUE` in the header.
fn define(name: &str) -> u64 {
    let found = HEADER.lines().find_map(|line| {
        let mut words = line.split_whitespace();
        (words.next() == Some("#define") && words.next() == Some(name))
            .then(|| words.next())
            .flatten()
    });
    let value = found.unwrap_or_else(|| panic!("bic_law.h defines no {name}"));
    value
        .parse()
        .unwrap_or_else(|e| panic!("bic_law.h's {name} is {value}: {e}"))
}

fn permille(share: f64) -> u64 {
    (share * 1000.0).round() as u64
}

#[test]
fn the_delay_test_is_the_path_estimates() {
    assert_eq!(define("SS_DELAY_SHARE"), u64::from(queue::DELAY_SHARE));
    assert_eq!(
        Duration::from_micros(define("SS_DELAY_MIN_US")),
        queue::DELAY_MIN
    );
    assert_eq!(
        Duration::from_micros(define("SS_DELAY_MAX_US")),
        queue::DELAY_MAX
    );
}

#[test]
fn adaptive_pacing_has_the_same_constants_in_both_laws() {
    assert_eq!(
        define("PACE_NEAR_EAB_PERMILLE"),
        permille(adaptive::NEAR_EAB)
    );
    assert_eq!(define("PACE_STABLE_PERMILLE"), permille(adaptive::STABLE));
    assert_eq!(
        Duration::from_millis(define("PACE_FIRST_EABP_MS")),
        adaptive::FIRST_EABP
    );
    assert_eq!(
        Duration::from_millis(define("PACE_LONGEST_EABP_MS")),
        adaptive::LONGEST_EABP
    );
}

#[test]
fn a_missing_define_is_found_missing() {
    let missing = std::panic::catch_unwind(|| define("NO_SUCH_CONSTANT"));
    assert!(missing.is_err());
}
