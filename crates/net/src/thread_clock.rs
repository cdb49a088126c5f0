//! The CPU time one thread has used, readable from any other thread of the process: the stream
//! policy tells a stream held by a busy core from one held by the path (`-p auto`).

use std::time::Duration;

/// The CPU-time clock of the thread that made it.
#[derive(Debug, Clone, Copy)]
pub struct ThreadClock(libc::clockid_t);

impl ThreadClock {
    /// The calling thread's clock, where the system has one.
    pub fn current() -> Option<ThreadClock> {
        let mut id: libc::clockid_t = 0;
        // SAFETY: pthread_self() is the calling thread, alive for the call; `id` is a valid
        // place for the answer.
        let rc = unsafe { libc::pthread_getcpuclockid(libc::pthread_self(), &mut id) };
        (rc == 0).then_some(ThreadClock(id))
    }

    /// CPU time (user and system) the thread has used so far; `None` once it has ended.
    pub fn used(&self) -> Option<Duration> {
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: `ts` is a valid timespec to write; a clock of a thread that ended is an
        // error (EINVAL), not undefined behaviour.
        let rc = unsafe { libc::clock_gettime(self.0, &mut ts) };
        (rc == 0).then(|| Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc::channel;

    #[test]
    fn a_busy_thread_s_clock_advances_and_an_idle_one_s_hardly() {
        let (busy_tx, busy_rx) = channel();
        let (end_tx, end_rx) = channel::<()>();
        let worker = std::thread::spawn(move || {
            let clock = ThreadClock::current();
            let start = std::time::Instant::now();
            let mut x = 0u64;
            while start.elapsed() < Duration::from_millis(200) {
                x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
            }
            std::hint::black_box(x);
            busy_tx.send(clock).unwrap();
            let _ = end_rx.recv();
        });
        let clock = busy_rx.recv().unwrap().unwrap();
        let busy = clock.used().unwrap();
        assert!(busy >= Duration::from_millis(100), "{busy:?}");
        // Waiting, the worker uses next to nothing.
        std::thread::sleep(Duration::from_millis(100));
        assert!(clock.used().unwrap() - busy < Duration::from_millis(50));
        end_tx.send(()).unwrap();
        worker.join().unwrap();
    }
}
