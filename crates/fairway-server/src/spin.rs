//! Waiting for the next turn by polling a little before sleeping.
//!
//! A thread that blocks on an empty channel sleeps, and on a virtual machine whose idle vCPU
//! halts, waking it again costs tens of microseconds (a pipe round trip between two idle
//! threads took 48 µs on machine F of BENCHMARKS.md, 12 µs when the machine was busy). A lone
//! request crosses three such hand-offs inside the server (HTTP task to writer, writer to
//! store thread, store thread back to the HTTP task). The writer and the store thread poll
//! their channel for [`Limits::idle_spin_us`](crate::Limits::idle_spin_us) first, yielding
//! the CPU between polls so that a runnable thread on the same vCPU is not held off; a turn
//! that arrives meanwhile is taken without a wake-up. Measured on machine F (BENCHMARKS.md,
//! item 26, medians of 12 alternating runs): sequential submissions 3,090 -> 3,809 a second,
//! 64 in flight 56,109 -> 66,138, for 8% more CPU across the benchmark.

use std::sync::mpsc::{Receiver, RecvTimeoutError, TryRecvError};
use std::time::{Duration, Instant};

/// The default poll before sleeping, in microseconds. 200 caught the hand-offs of a
/// sequential client on machine F (50 did not; 500 did no better and cost twice the extra CPU).
pub(crate) const DEFAULT_SPIN_US: u64 = 200;

/// The next message within `timeout` (`Duration::MAX`: no limit), polled for up to `spin`,
/// yielding between polls, before blocking for the rest.
pub(crate) fn recv_spinning<T>(
    rx: &Receiver<T>,
    spin: Duration,
    timeout: Duration,
) -> Result<T, RecvTimeoutError> {
    let started = Instant::now();
    let spin = spin.min(timeout);
    loop {
        match rx.try_recv() {
            Ok(m) => return Ok(m),
            Err(TryRecvError::Disconnected) => return Err(RecvTimeoutError::Disconnected),
            Err(TryRecvError::Empty) => {}
        }
        let waited = started.elapsed();
        if waited >= spin {
            // `recv_timeout` blocks without limit when the deadline overflows.
            return rx.recv_timeout(timeout.saturating_sub(waited));
        }
        std::thread::yield_now();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc::channel;

    const LONG: Duration = Duration::from_secs(10);

    #[test]
    fn a_waiting_message_is_taken_at_once() {
        let (tx, rx) = channel();
        tx.send(7).unwrap();
        let started = Instant::now();
        assert_eq!(recv_spinning(&rx, LONG, LONG), Ok(7));
        assert!(started.elapsed() < Duration::from_secs(1));
    }

    /// A message sent while the receiver polls, and one sent after it has gone to sleep, both
    /// arrive; the second wakes it well before the timeout.
    #[test]
    fn messages_arrive_during_the_poll_and_after_it() {
        for (spin, delay) in [
            (Duration::from_millis(500), Duration::from_millis(20)),
            (Duration::from_millis(1), Duration::from_millis(50)),
            (Duration::ZERO, Duration::from_millis(20)),
        ] {
            let (tx, rx) = channel();
            let sender = std::thread::spawn(move || {
                std::thread::sleep(delay);
                tx.send(1).unwrap();
            });
            let started = Instant::now();
            assert_eq!(recv_spinning(&rx, spin, LONG), Ok(1), "spin {spin:?}");
            let took = started.elapsed();
            assert!(took >= delay, "{took:?} before the send at {delay:?}");
            assert!(took < Duration::from_secs(5), "{took:?}: not woken");
            sender.join().unwrap();
        }
    }

    #[test]
    fn the_timeout_holds_whether_it_ends_in_the_poll_or_the_sleep() {
        let (_tx, rx) = channel::<u8>();
        for (spin, timeout) in [
            (Duration::from_millis(200), Duration::from_millis(30)),
            (Duration::from_millis(10), Duration::from_millis(60)),
        ] {
            let started = Instant::now();
            assert_eq!(
                recv_spinning(&rx, spin, timeout),
                Err(RecvTimeoutError::Timeout)
            );
            let took = started.elapsed();
            assert!(took >= timeout, "{took:?} < {timeout:?}");
            assert!(took < timeout + Duration::from_secs(2), "{took:?}");
        }
    }

    #[test]
    fn a_hung_up_sender_ends_the_wait_in_the_poll_and_in_the_sleep() {
        let (tx, rx) = channel::<u8>();
        drop(tx);
        assert_eq!(
            recv_spinning(&rx, LONG, Duration::MAX),
            Err(RecvTimeoutError::Disconnected)
        );
        let (tx, rx) = channel::<u8>();
        let sender = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(30));
            drop(tx);
        });
        let started = Instant::now();
        assert_eq!(
            recv_spinning(&rx, Duration::from_millis(1), Duration::MAX),
            Err(RecvTimeoutError::Disconnected)
        );
        assert!(started.elapsed() < Duration::from_secs(5));
        sender.join().unwrap();
    }
}
