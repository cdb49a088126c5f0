//! A connection's plan: the buffer law and the pacing law that run on it together, answering
//! each sample with one [`Decision`] that carries both buffer sizes and a pacing.

use crate::law::{Decision, Law, Setup};
use crate::pacing::{Pace, Pacing, PacingLaw};
use crate::sample::{Role, Sample};
use crate::{Params, Tuning};

/// The laws of one end of one data connection.
pub struct Plan {
    buffers: Box<dyn Law>,
    pacing: Box<dyn PacingLaw>,
}

impl Plan {
    /// The buffer law of `tuning` for `role`, beside the pacing law of `pacing` (a receiving
    /// end paces nothing: pacing is the sender's).
    pub fn new(tuning: Tuning, role: Role, params: &Params, pacing: Pacing) -> Plan {
        let pacing = match role {
            Role::Sender => pacing,
            Role::Receiver => Pacing::Off,
        };
        Plan {
            buffers: tuning.law(role, params),
            pacing: pacing.law(),
        }
    }

    /// Buffers to set before and just after the connection is made.
    pub fn setup(&self) -> Setup {
        self.buffers.setup()
    }

    /// The pacing to set once the connection is made.
    pub fn pace_at_setup(&self) -> Option<Pace> {
        self.pacing.setup()
    }

    /// Starts the buffer law at `bytes` (see [`Law::seed`]); whether it took it.
    pub fn seed(&mut self, bytes: u64) -> bool {
        self.buffers.seed(bytes)
    }

    /// Tells the buffer law how many connections the transfer runs (see [`Law::set_streams`]).
    pub fn set_streams(&mut self, streams: u32) {
        self.buffers.set_streams(streams);
    }

    /// Tells the buffer law that the sending peer paces (see [`Law::sender_paces`]).
    pub fn sender_paces(&mut self) {
        self.buffers.sender_paces();
    }

    /// Takes one sample; both laws decide.
    pub fn on_sample(&mut self, s: &Sample) -> Decision {
        let mut d = self.buffers.on_sample(s);
        if let Some(p) = self.pacing.on_sample(s) {
            d.pace = Some(p.pace);
            d.note = match (d.note.take(), p.note) {
                (Some(a), Some(b)) => Some(format!("{a}; {b}")),
                (a, b) => a.or(b),
            };
        }
        if let Some(n) = self.pacing.next() {
            d.next = d.next.min(n);
        }
        d
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_sender_paces() {
        let p = Params::default();
        let sender = Plan::new(Tuning::Drs, Role::Sender, &p, Pacing::Tcp);
        assert_eq!(sender.pace_at_setup(), Some(Pace::Tcp));
        let receiver = Plan::new(Tuning::Drs, Role::Receiver, &p, Pacing::Tcp);
        assert_eq!(receiver.pace_at_setup(), None);
        let one = Plan::new(Tuning::Drs, Role::Sender, &p, Pacing::Off);
        assert_eq!(one.pace_at_setup(), None);
    }

    #[test]
    fn a_decision_carries_the_buffer_law_s_sizes() {
        let mut plan = Plan::new(
            Tuning::Static(1 << 20),
            Role::Sender,
            &Params::default(),
            Pacing::Tcp,
        );
        let d = plan.on_sample(&Sample::default());
        assert_eq!(d.pace, None);
        assert_eq!(plan.setup().before_connect.sndbuf, Some(1 << 20));
    }
}
