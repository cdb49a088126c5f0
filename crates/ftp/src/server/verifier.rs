//! Password checks on a few threads of their own. Argon2 is slow and memory-hard by design: run
//! on the runtime's blocking pool, every concurrent login took a fresh thread and a fresh hash's
//! memory (60 parallel wrong passwords held 5 GB). Here a fixed number of threads each keep one
//! hash's memory for their lifetime, and a full queue refuses instead of growing.

use super::auth::{Anonymous, Login, Scratch, Users};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender, TrySendError};
use std::sync::{Arc, Mutex, RwLock};
use tokio::sync::oneshot;

/// Checks waiting for a thread at most; more are refused at once.
const QUEUE: usize = 64;

struct Check {
    user: String,
    password: String,
    answer: oneshot::Sender<Option<Login>>,
}

/// The pool of checking threads.
#[derive(Debug)]
pub struct Verifier {
    queue: SyncSender<Check>,
    users: Arc<RwLock<Users>>,
}

/// Why a check did not run.
#[derive(Debug, PartialEq, Eq)]
pub enum Busy {
    /// Too many checks are waiting.
    Full,
    /// The checking threads are gone.
    Stopped,
}

impl Verifier {
    /// Starts `threads` checking threads for `users` (at least one).
    pub fn start(users: Users, anonymous: Anonymous, threads: usize) -> std::io::Result<Self> {
        let (queue, rx) = sync_channel::<Check>(QUEUE);
        let rx = Arc::new(Mutex::new(rx));
        let users = Arc::new(RwLock::new(users));
        for i in 0..threads.max(1) {
            let (rx, users) = (rx.clone(), users.clone());
            std::thread::Builder::new()
                .name(format!("fatpipe-login-{i}"))
                .spawn(move || work(&rx, &users, anonymous))?;
        }
        Ok(Verifier { queue, users })
    }

    /// Checks later logins against `users` (a users file read again); checks under way end
    /// against the accounts they began with.
    pub fn set_users(&self, users: Users) {
        if let Ok(mut u) = self.users.write() {
            *u = users;
        }
    }

    /// Checks a login on a checking thread; `Err` when the pool cannot take it now.
    pub async fn check(&self, user: &str, password: &str) -> Result<Option<Login>, Busy> {
        let (answer, rx) = oneshot::channel();
        let check = Check {
            user: user.to_string(),
            password: password.to_string(),
            answer,
        };
        match self.queue.try_send(check) {
            Ok(()) => rx.await.map_err(|_| Busy::Stopped),
            Err(TrySendError::Full(_)) => Err(Busy::Full),
            Err(TrySendError::Disconnected(_)) => Err(Busy::Stopped),
        }
    }
}

fn work(rx: &Mutex<Receiver<Check>>, users: &RwLock<Users>, anonymous: Anonymous) {
    let mut scratch = Scratch::default();
    loop {
        let next = match rx.lock() {
            Ok(r) => r.recv(),
            Err(_) => return,
        };
        let Ok(c) = next else {
            return; // the server is gone
        };
        let login = match users.read() {
            Ok(u) => u.check_with(&c.user, &c.password, anonymous, &mut scratch),
            Err(_) => None,
        };
        let _ = c.answer.send(login);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn checks_run_on_the_pool_and_a_full_queue_refuses() {
        let mut users = Users::default();
        users.add_plain("alice:pw").unwrap();
        let v = Arc::new(Verifier::start(users, Anonymous::Off, 1).unwrap());
        assert!(v.check("alice", "pw").await.unwrap().is_some());
        assert!(v.check("alice", "nope").await.unwrap().is_none());
        // Far more checks than the queue holds, all at once: some are refused, none hang.
        let all: Vec<_> = (0..QUEUE * 3)
            .map(|_| {
                let v = v.clone();
                tokio::spawn(async move { v.check("alice", "nope").await })
            })
            .collect();
        let mut refused = 0;
        for h in all {
            match h.await.unwrap() {
                Err(Busy::Full) => refused += 1,
                Ok(None) => {}
                other => panic!("{other:?}"),
            }
        }
        assert!(refused > 0);
    }
}
