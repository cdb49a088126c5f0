//! The body of a third-party `COPY`'s answer: performance markers while the copy runs (the
//! format XRootD's XrdTpc, dCache and StoRM write and gfal2/davix read), then one line with
//! the outcome.

use std::time::Duration;

/// How often a marker goes out while a copy runs (WLCG HTTP-TPC: at least every 5 s; FTS3
/// gives up on a copy whose markers stop for its timeout).
pub const MARKER_EVERY: Duration = Duration::from_secs(5);

/// A marker: `bytes` moved by the time `unix_s`.
pub fn marker(unix_s: u64, bytes: u64) -> String {
    format!(
        "Perf Marker\n\tTimestamp: {unix_s}\n\tStripe Index: 0\n\tStripe Bytes Transferred: {bytes}\n\tTotal Stripe Count: 1\nEnd\n"
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

/// Longest line kept while it is incomplete; a longer one is dropped.
const MAX_LINE: usize = 4096;

/// What a third-party copy's answer body has said so far, read as it arrives in any chunks.
#[derive(Debug, Default)]
pub struct Reading {
    /// Bytes moved, from the latest marker.
    pub bytes: u64,
    /// The outcome, once the last line came.
    pub outcome: Option<Result<(), String>>,
    line: Vec<u8>,
}

impl Reading {
    /// Takes the next part of the body.
    pub fn feed(&mut self, chunk: &[u8]) {
        for &b in chunk {
            if b == b'\n' {
                let line = String::from_utf8_lossy(&self.line).into_owned();
                self.line.clear();
                self.line_done(line.trim());
            } else if self.line.len() < MAX_LINE {
                self.line.push(b);
            }
        }
    }

    fn line_done(&mut self, line: &str) {
        let Some((key, value)) = line.split_once(':') else {
            return;
        };
        let value = value.trim();
        match key.trim() {
            "Stripe Bytes Transferred" => {
                if let Ok(n) = value.parse::<u64>() {
                    self.bytes = self.bytes.max(n);
                }
            }
            "success" => self.outcome = Some(Ok(())),
            "failure" => self.outcome = Some(Err(value.to_string())),
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_is_written_reads_back_in_any_chunks() {
        let body = format!(
            "{}{}{}",
            marker(1, 10),
            marker(2, 4096),
            outcome(&Err("the source answered 404".into()))
        );
        for cut in [1, 3, 7, body.len()] {
            let mut r = Reading::default();
            for c in body.as_bytes().chunks(cut) {
                r.feed(c);
            }
            assert_eq!(r.bytes, 4096);
            assert_eq!(r.outcome, Some(Err("the source answered 404".into())));
        }
        let mut r = Reading::default();
        r.feed(b"Perf Marker\nStripe Bytes Transferred: x\nsuccess: Created\n");
        assert_eq!((r.bytes, r.outcome), (0, Some(Ok(()))));
    }

    #[test]
    fn markers_and_outcomes_as_gfal2_reads_them() {
        let m = marker(1700000000, 1234);
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
