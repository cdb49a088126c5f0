//! What one file's copy over HTTPS came to, as `fatpipe cp` reports every copy: the FTP copy's
//! result type, so that both front-ends share one summary, one `--json` and one set of exit
//! codes.

use fatpipe_ftp::client::copy::FileResult;
use std::time::Instant;

/// A file that arrived.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Got {
    /// Bytes moved by this run.
    pub bytes: u64,
    /// Bytes a partial copy held from before (`--resume`).
    pub resumed_from: u64,
}

impl Got {
    /// A file moved whole by this run.
    pub fn new(bytes: u64) -> Got {
        Got {
            bytes,
            resumed_from: 0,
        }
    }
}

/// A file that did not arrive.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failed {
    /// Why, for the user.
    pub error: String,
    /// Bytes this run moved that a partial file keeps.
    pub kept: u64,
}

impl From<String> for Failed {
    fn from(error: String) -> Failed {
        Failed { error, kept: 0 }
    }
}

/// The result of copying `source` to `destination`, begun at `started`.
pub fn file_result(
    source: &str,
    destination: &str,
    started: Instant,
    outcome: Result<Got, Failed>,
) -> FileResult {
    let mut r = FileResult {
        source: source.to_string(),
        destination: destination.to_string(),
        tls: true,
        ..FileResult::default()
    };
    match outcome {
        Ok(got) => {
            r.bytes = got.bytes;
            r.resumed_from = got.resumed_from;
            r.data_seconds = Some(started.elapsed().as_secs_f64());
        }
        Err(f) => {
            r.bytes = f.kept;
            r.fail_with(f.error);
        }
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;
    use fatpipe_ftp::client::failure::Failure;

    #[test]
    fn a_result_carries_what_moved_or_why_not() {
        let t = Instant::now();
        let ok = file_result(
            "https://h/f",
            "f",
            t,
            Ok(Got {
                bytes: 5,
                resumed_from: 3,
            }),
        );
        assert_eq!((ok.bytes, ok.resumed_from, ok.error), (5, 3, None));
        assert!(ok.tls && ok.data_seconds.is_some());
        let cut = Failed {
            error: "the body was cut: connection reset".into(),
            kept: 7,
        };
        let bad = file_result("https://h/f", "f", t, Err(cut));
        assert_eq!(bad.bytes, 7);
        assert_eq!(bad.failure, Some(Failure::Lost));
    }
}
