//! The runtimes bulk transfers run on. A connection's TLS and the hand-over of its bytes run
//! best on one thread: on a runtime with a second worker every piece went from the
//! connection's task to the one that takes the body and back across threads, and that cost
//! half an HTTPS download's CPU on loopback. So a transfer of one connection gets a thread of
//! its own, one of several a worker per connection up to the host's cores (each connection's
//! TLS beside the others').

use fatpipe_net::TunerConfig;
use tokio::runtime::{Builder, Runtime};

/// A runtime for a transfer with at most `connections` data connections open at once.
pub fn for_connections(connections: usize) -> std::io::Result<Runtime> {
    let threads = connections.min(fatpipe_net::conductor::host_cores() as usize);
    match threads {
        0 | 1 => Builder::new_current_thread(),
        n => {
            let mut b = Builder::new_multi_thread();
            b.worker_threads(n);
            b
        }
    }
    .enable_all()
    .build()
}

/// Most connections one fetch opens.
pub const MAX_STREAMS: u32 = 16;

/// Data connections a fetch over `streams` connections may open at once (`None`: as a cold
/// start opens, one where nothing caps a connection's window).
pub fn connections(streams: Option<u32>, tune: &TunerConfig) -> usize {
    let most = match (streams, tune.control.receive_cap()) {
        (Some(n), _) => n.min(MAX_STREAMS),
        (None, Some(_)) => MAX_STREAMS,
        (None, None) => 1,
    };
    most as usize
}
