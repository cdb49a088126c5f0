//! The UDP data channel on the client side: `SITE SETNETSTACK udp` with a fatpipe server, and
//! MODE S binary transfers whose bytes then move as UDP packets beside the data connection.

use super::pipeline::Unsettled;
use super::{receive_error, send_error, Connection, Streams};
use crate::client::transport;
use anyhow::Context;
use fatpipe_net::mover::{StreamMover, StreamWork};
use fatpipe_net::udp::{ReadyAhead, UdpConfig, UdpReceiver, UdpSender};
use fatpipe_net::{Mover, Pump};
use fatpipe_proto::gridftp::parse_transfer_notes;
use fatpipe_proto::udp::{NetStack, SETNETSTACK, UDPREADY};
use fatpipe_proto::{Command, TransferType};
use fatpipe_tune::Role;
use std::fs::File;
use std::io::Seek;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

impl Connection {
    /// Moves MODE S binary transfers over the UDP channel from now on, as `udp` says (this
    /// end's side; `stack` is what the server is told). Returns why not when the server cannot
    /// by its features. `SITE SETNETSTACK` goes out with the next command (not a round trip of
    /// its own) and its answer is read before the first transfer: a server that refuses it
    /// then moves the data over TCP with `fallback` streams (`asked`: the user asked for the
    /// channel, and hears why not as a warning).
    pub fn use_udp(
        &mut self,
        stack: &NetStack,
        udp: UdpConfig,
        fallback: Streams,
        asked: bool,
    ) -> anyhow::Result<Option<String>> {
        self.udp.config = None;
        if let Some(why) = self.no_udp() {
            return Ok(Some(why));
        }
        let cmd = setnetstack(stack);
        self.ask_ahead(cmd.clone());
        self.udp.config = Some(udp);
        self.pipe
            .unsettled
            .push(Unsettled::Udp(cmd, fallback, asked));
        Ok(None)
    }

    /// The server's answer to `cmd`, a `SITE SETNETSTACK udp` sent ahead (see
    /// [`Connection::use_udp`]): a refusal ends the UDP channel, and the session's transfers go
    /// over TCP with the `fallback` streams.
    pub(super) fn settle_udp(
        &mut self,
        cmd: &Command,
        fallback: Streams,
        asked: bool,
    ) -> anyhow::Result<()> {
        let r = self.ask(cmd)?;
        if r.is_success() {
            return Ok(());
        }
        let why = format!("{} refused the UDP data channel: {r}", self.peer);
        match asked {
            true => tracing::warn!("{why}: the data goes over TCP"),
            false => tracing::info!("{why}: the data goes over TCP"),
        }
        self.udp.config = None;
        self.udp.started = None;
        self.set_streams(fallback)
    }

    /// `--transport auto` with a server path memory knows nothing of: where the control
    /// connection's round trip makes a long path for a file of `size`
    /// ([`transport::long_path_start`]), the session's transfers start on the UDP channel `udp`
    /// (what the server is told: `stack`) instead of TCP streams; a server that refuses it gets
    /// them over TCP with `fallback` streams. Returns why, when it starts on it.
    pub fn start_on_udp_if_long(
        &mut self,
        stack: &NetStack,
        udp: UdpConfig,
        fallback: Streams,
        size: Option<u64>,
    ) -> anyhow::Result<Option<String>> {
        let Some(why) = transport::long_path_start(self.round_trip(), self.link_bits(), size)
        else {
            return Ok(None);
        };
        let blocks = self.blocks.take();
        let udp = UdpConfig {
            unreached: Some(Arc::default()),
            ..udp
        };
        let not = self.use_udp(stack, udp, fallback, false);
        if !matches!(not, Ok(None)) {
            self.blocks = blocks;
            if let Ok(Some(why)) = &not {
                tracing::debug!("{why}: the data goes over TCP");
            }
            return not.map(|_| None);
        }
        tracing::info!("transport udp: {why}");
        self.udp.leave_on_random_loss = false;
        self.udp.started = Some(why.clone());
        Ok(Some(why))
    }

    /// The speed (bits/s) of the local link the control connection leaves by, where the system
    /// tells it.
    fn link_bits(&self) -> Option<u64> {
        let local = self.control.get_ref().tcp().local_addr().ok()?;
        fatpipe_net::interface::speed_of(local.ip())
    }

    /// A download session that may start on the UDP channel (a new long path: see
    /// [`Connection::start_on_udp_if_long`]): its first passive address is asked with the
    /// login, so that the data connection opens as the `RETR` leaves, with `SITE SETNETSTACK`
    /// beside it, a round trip sooner. A MODE E download forgets it (the server connects).
    pub fn expect_udp_start(&mut self) {
        let long = transport::long_path(self.round_trip(), self.link_bits()).is_some();
        if long && self.no_udp().is_none() {
            self.expect_passive();
        }
    }

    /// Whether the latest transfer ended because no UDP packet got through a channel the
    /// session started on unasked ([`UdpConfig::unreached`]; answered once).
    pub fn left_udp_unreached(&mut self) -> bool {
        self.udp
            .config
            .as_ref()
            .and_then(|c| c.unreached.as_ref())
            .is_some_and(|f| f.swap(false, Ordering::SeqCst))
    }

    /// After a transfer that left the UDP channel unreached: the session's transfers go over
    /// TCP with `streams` from now on (`SITE SETNETSTACK tcp` goes out with the next command).
    pub fn back_to_tcp(&mut self, streams: Streams) -> anyhow::Result<()> {
        self.udp.config = None;
        self.udp.started = self.udp.started.take().map(|why| {
            format!("{why}; but no UDP packet got through, and the copy went on over TCP streams")
        });
        self.set_ahead(setnetstack(&NetStack::default()));
        self.set_streams(streams)
    }

    /// Why the session's transfers started on the UDP channel where the copy's plan said TCP
    /// ([`Connection::start_on_udp_if_long`]), and whether they stayed on it.
    pub fn udp_started(&self) -> Option<&str> {
        self.udp.started.as_deref()
    }

    /// From now on a download ends as soon as its sending server says it met random loss (it
    /// paces with bbr, chosen on it, where this end asked for no control), for the caller to
    /// go on over the UDP channel ([`Connection::move_to_udp`], [`Connection::left_tcp_on_random_loss`]):
    /// `--transport auto` on a path not known to be lossy. Only with a server that can take
    /// the channel.
    pub fn leave_tcp_on_random_loss(&mut self) {
        let asked_cc = self.tune.as_ref().is_some_and(|t| t.cc.is_some());
        self.udp.leave_on_random_loss =
            !asked_cc && self.udp.config.is_none() && self.no_udp().is_none();
    }

    /// Whether the latest transfer ended to leave TCP on random loss (answered once).
    pub fn left_tcp_on_random_loss(&mut self) -> bool {
        std::mem::take(&mut self.udp.left_on_random_loss)
    }

    /// After a download left TCP on random loss: the session's transfers from now on go over
    /// the UDP channel, one MODE S stream; returns why not when the server cannot.
    pub fn move_to_udp(
        &mut self,
        stack: &NetStack,
        udp: UdpConfig,
    ) -> anyhow::Result<Option<String>> {
        self.udp.leave_on_random_loss = false;
        self.udp.config = None;
        if let Some(why) = self.no_udp() {
            return Ok(Some(why));
        }
        // The server met the loss and said so: it takes the channel, and `SITE SETNETSTACK`
        // goes out as a setting with the transfer that goes on (one write, not a round trip
        // of its own; a refusal fails that transfer).
        self.set_ahead(setnetstack(stack));
        self.udp.config = Some(udp);
        self.blocks = None;
        Ok(None)
    }

    /// Whether the server's `FEAT` lists the UDP channel among its stacks (a fatpipe server's
    /// `SETNETSTACK tcp,udp`): it takes `SITE SETNETSTACK udp`.
    fn udp_listed(&self) -> bool {
        self.feature_params(SETNETSTACK).any(|stacks| {
            stacks
                .split(',')
                .any(|s| s.trim().eq_ignore_ascii_case("udp"))
        })
    }

    /// Why transfers cannot move over the UDP channel with this server, if they cannot.
    fn no_udp(&self) -> Option<String> {
        if self.data_secured() {
            return Some(format!(
                "data connections to {} are TLS, and the UDP channel has no encryption",
                self.peer
            ));
        }
        if !self.udp_listed() {
            return Some(format!(
                "{} has no UDP data channel (its FEAT lists no SETNETSTACK with udp)",
                self.peer
            ));
        }
        None
    }

    /// Whether transfers move over the UDP channel.
    pub fn uses_udp(&self) -> bool {
        self.udp.config.is_some()
    }

    /// What the UDP channel of the latest transfer did (`udp: …`), if it ran.
    pub fn last_udp(&self) -> Option<&str> {
        self.last.udp.as_deref()
    }

    /// A transfer's start: with the UDP channel on (or asked for with the transfer command,
    /// whose answer the transfer settles: [`Connection::settle_before_transfer`]), `TYPE I`,
    /// and this end's side of the channel with where `file` stands; `None` when transfers go
    /// over TCP.
    fn udp_start(&mut self, mut file: &File) -> anyhow::Result<Option<(UdpConfig, u64)>> {
        self.last.udp = None;
        let Some(config) = self.udp.config.clone() else {
            return Ok(None);
        };
        self.set_type(TransferType::Image);
        let at = file
            .stream_position()
            .context("cannot tell the local file's position")?;
        Ok(Some((config, at)))
    }

    /// Downloads `path` from `offset` into `file` at its current position, `most` bytes at
    /// most (what `SIZE` said is left: a server that sends more is stopped): over the UDP
    /// channel when it is on, keeping in `in_place` how many bytes are written without a gap
    /// (packets land out of order), else as [`Connection::retrieve`] does (in order).
    pub fn retrieve_file(
        &mut self,
        path: &str,
        offset: u64,
        file: &File,
        most: Option<u64>,
        pump: &Arc<Pump>,
        in_place: Option<Arc<AtomicU64>>,
    ) -> anyhow::Result<u64> {
        // Spliced in the kernel where the connection and the file allow.
        let work = StreamWork::ReceiveFile { file, most };
        let Some((config, at)) = self.udp_start(file)? else {
            return self.retrieve_work(path, offset, work, pump);
        };
        let ahead = most.and_then(|length| self.name_udp_socket(&config, length));
        let secure = self.secure.clone();
        let make = move |link, proof, udp| match udp {
            true => Box::new(UdpReceiver {
                link,
                file,
                offset: at,
                limit: most.unwrap_or(u64::MAX),
                config,
                proof,
                in_place,
                ahead: ahead.and_then(|(a, taken)| taken.load(Ordering::SeqCst).then_some(a)),
            }) as Box<dyn Mover + '_>,
            false => StreamMover::new(link, work, secure, proof),
        };
        let retr = Command::Retr(path.into());
        let (moved, fin) =
            self.run_mode_s(retr, offset, Some(Role::Receiver), pump, make, |e| {
                receive_error(path, e)
            })?;
        // The sender (the server) says what its channel did.
        self.last.udp = parse_transfer_notes(&fin)
            .udp
            .or_else(|| moved.udp.map(|u| u.to_string()));
        Ok(moved.bytes)
    }

    /// Uploads `file` from its current position to `path` at `offset`: over the UDP channel
    /// when it is on, else as [`Connection::store`] does.
    pub fn store_file(
        &mut self,
        path: &str,
        offset: u64,
        file: &File,
        pump: &Arc<Pump>,
    ) -> anyhow::Result<u64> {
        let Some((config, at)) = self.udp_start(file)? else {
            return self.store(path, offset, file, pump);
        };
        let len = file.metadata().context("cannot read the local file")?.len();
        let secure = self.secure.clone();
        let make = move |link, proof, udp| match udp {
            true => Box::new(UdpSender {
                link,
                file,
                offset: at,
                length: len.saturating_sub(at),
                config,
                proof,
                launched: None,
            }) as Box<dyn Mover + '_>,
            false => {
                let work = StreamWork::SendFile { file, ascii: false };
                StreamMover::new(link, work, secure, proof)
            }
        };
        let stor = Command::Stor(path.into());
        let (moved, _) = self.run_mode_s(stor, offset, Some(Role::Sender), pump, make, |e| {
            send_error(path, e)
        })?;
        self.last.udp = moved.udp.map(|u| u.to_string());
        Ok(moved.bytes)
    }

    /// A download of `length` bytes over the UDP channel (`config`, this end's side) with a
    /// server that lists `UDPREADY`: the receiving socket bound now and named with the
    /// transfer command (`SITE UDPREADY` goes out with it, no round trip of its own), so that
    /// the server sends its packet train as it reads the command, a round trip before the
    /// data connection is up. With whether the server took it, known once its answer is read
    /// (before the transfer's). `None` where the server cannot, or the socket cannot be bound
    /// (the transfer goes the usual way).
    fn name_udp_socket(
        &mut self,
        config: &UdpConfig,
        length: u64,
    ) -> Option<(ReadyAhead, Arc<AtomicBool>)> {
        if !self.has_feature(UDPREADY) {
            return None;
        }
        let bound = ReadyAhead::bind(self.control.get_ref().tcp(), config, length);
        let ahead = bound
            .map_err(|e| tracing::debug!("no UDP socket bound ahead ({e})"))
            .ok()?;
        let cmd = Command::Site(format!("{UDPREADY} {}", ahead.ready()));
        self.ask_ahead(cmd.clone());
        let taken = Arc::new(AtomicBool::new(false));
        self.pipe
            .unsettled
            .push(Unsettled::UdpReady(cmd, taken.clone()));
        Some((ahead, taken))
    }

    /// The server's answer to `cmd`, a `SITE UDPREADY` sent ahead: whether it `taken` it.
    pub(super) fn settle_udp_ready(
        &mut self,
        cmd: &Command,
        taken: &AtomicBool,
    ) -> anyhow::Result<()> {
        let r = self.ask(cmd)?;
        if !r.is_success() {
            tracing::debug!("{} refused the UDP socket named ahead: {r}", self.peer);
        }
        taken.store(r.is_success(), Ordering::SeqCst);
        Ok(())
    }
}

/// `SITE SETNETSTACK` with what the server is told.
fn setnetstack(stack: &NetStack) -> Command {
    Command::Site(format!("{SETNETSTACK} {stack}"))
}

#[cfg(test)]
mod tests {
    use super::super::fake_server::{take, with_features};
    use super::*;
    use fatpipe_net::udp::UdpConfig;

    /// A client that asks for the UDP channel, then a file's size; the server answers
    /// `SETNETSTACK` with `answer`. Whether the channel is on after the answer is read.
    fn asked_with_size(answer: &'static str) -> (Vec<String>, bool) {
        let mut on = false;
        let got = with_features(
            &["SETNETSTACK tcp,udp"],
            "331 pass\r\n230 in\r\n",
            // Only a client that sent both in one write gets past this.
            move |r, w| take(r, w, 3, &format!("{answer}\r\n200 I\r\n213 5\r\n")),
            |mut c| {
                let stack = NetStack::parse("udp control=default").unwrap();
                let why = c.use_udp(&stack, UdpConfig::default(), Streams::Fixed(1), true);
                assert_eq!(why.unwrap(), None);
                assert_eq!(c.size("/f").unwrap(), Some(5));
                c.settle().unwrap();
                on = c.uses_udp();
            },
        );
        (got, on)
    }

    #[test]
    fn the_udp_channel_is_asked_for_with_the_transfer_command_and_a_refusal_takes_tcp() {
        use std::io::{Read, Seek, Write};
        let mut file = tempfile::tempfile().unwrap();
        let got = with_features(
            &["SETNETSTACK tcp,udp"],
            "331 pass\r\n230 in\r\n",
            |r, w| {
                let data = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
                let port = data.local_addr().unwrap().port();
                let replies = format!(
                    "501 unknown rate control\r\n200 I\r\n\
                     229 Entering Extended Passive Mode (|||{port}|)\r\n150 Here\r\n"
                );
                // Only a client that sent the channel's command with the transfer's gets
                // past this; refused, the server sends the file over the data connection.
                let lines = take(r, w, 4, &replies);
                let (mut d, _) = data.accept().unwrap();
                d.write_all(b"hello").unwrap();
                drop(d);
                w.write_all(b"226 Done\r\n").unwrap();
                lines
            },
            |mut c| {
                let stack = NetStack::parse("udp control=default").unwrap();
                let why = c.use_udp(&stack, UdpConfig::default(), Streams::Fixed(1), false);
                assert_eq!(why.unwrap(), None);
                let pump = Arc::new(Pump::default());
                let n = c.retrieve_file("/f", 0, &file, Some(5), &pump, None);
                assert_eq!(n.unwrap(), 5);
                assert!(!c.uses_udp(), "refused: the session goes on over TCP");
                assert_eq!(c.last_udp(), None);
            },
        );
        let sent = [
            "SITE SETNETSTACK udp control=default",
            "TYPE I",
            "EPSV",
            "RETR /f",
        ];
        assert_eq!(got[4..], sent);
        let mut back = String::new();
        file.rewind().unwrap();
        file.read_to_string(&mut back).unwrap();
        assert_eq!(back, "hello");
    }

    #[test]
    fn a_server_that_lists_no_udp_stack_is_not_asked_for_the_channel() {
        let got = with_features(
            &["SETNETSTACK tcp"],
            "331 pass\r\n230 in\r\n",
            |r, w| take(r, w, 2, "200 I\r\n213 5\r\n"),
            |mut c| {
                let stack = NetStack::parse("udp control=default").unwrap();
                let why = c.use_udp(&stack, UdpConfig::default(), Streams::Fixed(1), true);
                assert!(why.unwrap().unwrap().contains("no SETNETSTACK with udp"));
                assert_eq!(c.size("/f").unwrap(), Some(5));
                assert!(!c.uses_udp());
            },
        );
        assert_eq!(got[4..], ["TYPE I", "SIZE /f"]);
    }

    #[test]
    fn the_udp_channel_is_asked_for_with_the_next_command_and_a_refusal_leaves_tcp() {
        let (got, on) = asked_with_size("200 Network stack: udp");
        let sent = ["SITE SETNETSTACK udp control=default", "TYPE I", "SIZE /f"];
        assert_eq!(got[4..], sent);
        assert!(on);
        let (_, on) = asked_with_size("501 unknown rate control");
        assert!(!on, "refused: the data goes over TCP");
    }
}
