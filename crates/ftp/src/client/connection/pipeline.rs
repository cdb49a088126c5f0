//! The control connection's pipeline, as data: what this end asked besides the command it
//! waits on (ahead of it, behind a transfer, the next files' downloads and the uploads sent
//! before their turn), the replies owed in the order the server sends them, and the answers
//! kept. The ways of asking are ahead.rs's, pipelined.rs's and stored.rs's; they all keep
//! their books here.

use super::{describe, Streams};
use anyhow::bail;
use fatpipe_net::admission::Token;
use fatpipe_proto::drs::DrsOpts;
use fatpipe_proto::gridftp::Parallelism;
use fatpipe_proto::{Command, Reply};
use std::collections::VecDeque;

/// Most answers kept for later (an answer nobody asked for is dropped after these): room for
/// those of eight uploads sent ahead (stored.rs).
pub(super) const KEPT: usize = 24;

/// What this end does with the reply to a command asked ahead.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Want {
    /// Keeps it until asked for ([`Connection::ask`]).
    Answer,
    /// A success: a refusal fails the command it went out with.
    Setting,
    /// `USER`, `PASS` or `FEAT` sent with the session's first commands: a refusal fails them
    /// all (login.rs).
    Login,
    /// No command: the server's greeting, read with the answers to the first commands where
    /// they went out before it came (login.rs).
    Greeting,
    /// Nothing but a line in the log.
    Nothing,
    /// An upload sent before its turn: its replies to the final one, and the answers to what
    /// went behind it (stored.rs).
    Stored,
}

/// A command asked ahead, and what its reply is wanted for.
#[derive(Debug)]
pub(super) struct Ahead {
    pub(super) cmd: Command,
    pub(super) want: Want,
}

/// What a control connection asked besides the command it waits on, and the answers kept.
#[derive(Debug, Default)]
pub(super) struct Pipeline {
    /// Asked ahead: to go out with the next command.
    pub(super) ahead: Vec<Ahead>,
    /// Asked behind: to go out right after the next transfer command.
    pub(super) behind: Vec<Ahead>,
    /// Sent, their replies not read yet, in order: they come before the next command's.
    pub(super) owed: VecDeque<Ahead>,
    /// Sent behind a transfer command: their replies come after its final reply.
    pub(super) trailing: Vec<Ahead>,
    /// Sent while a transfer ran, for what comes after it (the next try's passive address
    /// as it leaves TCP): owed after its final reply and the trailing answers, and kept
    /// whatever its outcome.
    pub(super) during: Vec<Ahead>,
    /// Replies kept until asked for.
    pub(super) answers: Vec<(Command, Reply)>,
    /// The next files' downloads, to go out behind the next MODE E download (pipelined.rs),
    /// with the checksum question behind each.
    pub(super) next_files: Vec<NextFile>,
    /// ... ready to go out with the next transfer command.
    pub(super) next: Vec<Queued>,
    /// ... sent: their replies come after those of the transfer before them, in order.
    pub(super) queued: VecDeque<Queued>,
    /// The transfer command waited on went out before its turn (taken from `queued`).
    pub(super) sent: bool,
    /// Probes and notices of transfers that ended before their answers came: taken wherever
    /// they come (see `Connection::read_one_reply`).
    pub(super) unanswered: usize,
    /// Uploads sent before their turn whose replies are not read yet, in order (stored.rs).
    pub(super) stores: VecDeque<Store>,
    /// ... and those read: how each ended, until the copy asks.
    pub(super) stored: Vec<(Command, anyhow::Result<u64>)>,
    /// Session settings asked ahead whose answers change what the session does, in the order
    /// asked: settled before the next transfer (`Connection::settle`).
    pub(super) unsettled: Vec<Unsettled>,
}

/// A session setting asked ahead whose answer changes what the session does.
#[derive(Debug)]
pub(super) enum Unsettled {
    /// `OPTS DRS`: whether the server speaks the drsFTP messages.
    Drs(DrsOpts),
    /// `OPTS DCREUSE ON`: whether MODE E data connections stay open between files.
    Reuse,
    /// `DTOK`: the data token the server takes.
    Token(Token),
    /// `SITE SETNETSTACK udp` (the command): whether transfers take the UDP channel; refused,
    /// the session goes on over TCP with these streams (`true`: the user asked for the
    /// channel, so the refusal is a warning).
    Udp(Command, Streams, bool),
    /// `SITE UDPREADY` (the command): whether the server takes the socket named for the
    /// next download (set once its answer is read).
    UdpReady(Command, std::sync::Arc<std::sync::atomic::AtomicBool>),
}

impl Pipeline {
    /// Whether nothing is asked and no reply owed: a command sent now goes alone.
    pub(super) fn is_empty(&self) -> bool {
        self.ahead.is_empty() && self.owed.is_empty()
    }

    /// Whether replies to commands already sent are still to be read.
    pub(super) fn owes(&self) -> bool {
        !self.owed.is_empty()
    }

    /// Whether a setting waits to go out with the next command.
    pub(super) fn sets_ahead(&self) -> bool {
        self.ahead.iter().any(|a| a.want == Want::Setting)
    }

    /// What went out behind the transfer command just sent, taken (an upload sent ahead reads
    /// it with its own replies: stored.rs).
    pub(super) fn take_behind_sent(&mut self) -> Vec<Ahead> {
        std::mem::take(&mut self.trailing)
    }

    /// A reply (or, for an upload sent ahead, replies) now owed after those owed before.
    pub(super) fn owe(&mut self, a: Ahead) {
        self.owed.push_back(a);
    }

    /// The command whose reply comes next, taken.
    pub(super) fn next_owed(&mut self) -> Option<Ahead> {
        self.owed.pop_front()
    }

    /// A transfer command sent earlier is the one now waited on: the replies to `settings`
    /// come before its own, those to `behind` after its final one.
    pub(super) fn expect(&mut self, settings: Vec<Ahead>, behind: Vec<Ahead>) {
        self.owed.extend(settings);
        self.trailing.extend(behind);
    }
}

/// Whether `cmd` starts a file transfer (what a command asked behind goes out after).
pub(super) fn starts_transfer(cmd: &Command) -> bool {
    matches!(
        cmd,
        Command::Retr(_)
            | Command::Stor(_)
            | Command::Appe(_)
            | Command::Eret { .. }
            | Command::Esto { .. }
    )
}

/// A file to download after the current one: its `RETR`, and the checksum question to ask
/// behind it.
pub type NextFile = (Command, Option<Command>);

/// A transfer command that goes out, or went out, before its turn: the settings before it,
/// the command, and the questions behind it.
#[derive(Debug)]
pub(super) struct Queued {
    /// The parallelism its settings put in force.
    pub(super) parallelism: Option<Parallelism>,
    pub(super) settings: Vec<Ahead>,
    pub(super) cmd: Command,
    pub(super) behind: Vec<Ahead>,
}

impl Queued {
    /// Whether `cmd` is one of its questions (asked: not to be asked again).
    pub(super) fn asks(&self, cmd: &Command) -> bool {
        self.behind.iter().any(|a| a.cmd == *cmd)
    }
}

/// An upload sent before its turn: its command, the questions behind it, and how its data
/// side ended (bytes sent).
#[derive(Debug)]
pub(super) struct Store {
    pub(super) cmd: Command,
    pub(super) behind: Vec<Ahead>,
    pub(super) moved: anyhow::Result<u64>,
}

impl Store {
    /// Whether `cmd` is one of its questions (asked: not to be asked again).
    pub(super) fn asks(&self, cmd: &Command) -> bool {
        self.behind.iter().any(|a| a.cmd == *cmd)
    }
}

/// Commands asked, on the wire, and those it carries. One the control channel cannot carry is
/// left out (a setting among them fails the whole).
pub(super) fn on_the_wire(asked: Vec<Ahead>) -> anyhow::Result<(Vec<u8>, Vec<Ahead>)> {
    let mut wire = Vec::new();
    let mut sent = Vec::new();
    for a in asked {
        match a.cmd.to_wire() {
            Ok(w) => {
                wire.extend(w);
                sent.push(a);
            }
            Err(e) if matches!(a.want, Want::Setting | Want::Login) => {
                bail!("{}: {}", describe(&a.cmd), e.message)
            }
            Err(e) => tracing::warn!("not sent: {}", e.message),
        }
    }
    Ok((wire, sent))
}
