//! Where `tracing`'s events go: standard error, filtered by `-v` or `FATPIPE_LOG`. A client's
//! lines read as its own (`fatpipe: …`, `fatpipe: warning: …`) up to `-v`; the server's log and
//! the protocol (`-vv`) carry times and levels.

use std::fmt;
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::registry::LookupSpan;

/// How log lines look.
pub enum Style {
    /// The command's own lines (`fatpipe: …`): a client up to `-v`.
    Story,
    /// Timestamped, with levels: the server, and the protocol (`-vv`).
    Timed,
    /// One JSON object a line (`serve --log-format json`).
    Json,
}

/// Starts logging at `default` (a filter) in `style`.
pub fn init(default: &str, style: Style) {
    let filter = tracing_subscriber::EnvFilter::try_from_env("FATPIPE_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    let log = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        // Colour codes only for a person at a terminal, never in a log file or a pipe.
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_target(false)
        // A closed standard error must not turn into a panic in the logger.
        .log_internal_errors(false);
    match style {
        Style::Story => log.event_format(Story).init(),
        Style::Timed => log.init(),
        Style::Json => log.json().init(),
    }
}

/// An event as one line of the command's own: `fatpipe: `, then `warning: ` or `error: `
/// where it is one, then the message and its fields.
struct Story;

impl<S, N> FormatEvent<S, N> for Story
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        let tag = match *event.metadata().level() {
            Level::ERROR => "error: ",
            Level::WARN => "warning: ",
            _ => "",
        };
        write!(writer, "fatpipe: {tag}")?;
        ctx.field_format().format_fields(writer.by_ref(), event)?;
        writeln!(writer)
    }
}
