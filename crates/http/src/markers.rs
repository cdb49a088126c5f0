//! The body of a third-party `COPY`'s answer: performance markers while the copy runs (the
//! format XRootD's XrdTpc, dCache and StoRM write and gfal2/davix read), then one line with
//! the outcome.

use std::time::Duration;

/// How often a marker goes out while a copy runs (WLCG HTTP-TPC: at least every 5 s; FTS3
/// gives up on a copy whose markers stop for its timeout).
pub const MARKER_EVERY: Duration = Duration::from_secs(5);

/// A marker: `bytes` moved by the time `unix_s`, over `streams` connections.
pub fn marker(unix_s: u64, bytes: u64, streams: u32) -> String {
    format!(
        "Perf Marker\n\tTimestamp: {unix_s}\n\tStripe Index: 0\n\tStripe Bytes Transferred: {bytes}\n\tTotal Stripe Count: 1\n\tRemoteConnections: {streams}\nEnd\n"
    )
}

/// The last line: `success: Created`, or `failure: REASON` (on one line).
pub fn outcome(result: &Result<(), String>) -> String {
    match result {
        Ok(()) => "success: Created\n".to_string(),
        Err(e) => format!("failure: {}\n", one_line(e)),
    }
}

fn one_line(s: &str) -> String {
    s.chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markers_and_outcomes_as_gfal2_reads_them() {
        let m = marker(1700000000, 1234, 4);
        assert!(m.starts_with("Perf Marker\n"));
        assert!(m.contains("\tStripe Bytes Transferred: 1234\n"));
        assert!(m.ends_with("End\n"));
        assert_eq!(outcome(&Ok(())), "success: Created\n");
        assert_eq!(
            outcome(&Err("source said 404\nNot Found".into())),
            "failure: source said 404 Not Found\n"
        );
    }
}
