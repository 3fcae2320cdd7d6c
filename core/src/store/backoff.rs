//! How long a polling feed sleeps between looks, shared by the backends whose feeds
//! poll (memory, JSONL).

use std::time::{Duration, Instant};

/// How long a polling feed sleeps while nothing new came: it starts short, so a busy
/// log is followed closely, and backs off to `max` on an idle one.
#[derive(Debug)]
pub(crate) struct Backoff {
    deadline: Instant,
    pause: Duration,
    max: Duration,
}

impl Backoff {
    /// The longest pause of a polling feed: the latency of following an idle log.
    pub const MAX: Duration = Duration::from_millis(20);

    pub fn new(timeout: Duration) -> Backoff {
        Backoff {
            deadline: Instant::now().checked_add(timeout).unwrap_or_else(far),
            pause: Duration::from_micros(500),
            max: Self::MAX,
        }
    }

    /// Sleeps before the next look; `false` once the timeout has passed.
    pub fn wait(&mut self) -> bool {
        let now = Instant::now();
        if now >= self.deadline {
            return false;
        }
        std::thread::sleep(self.pause.min(self.deadline - now));
        self.pause = (self.pause * 2).min(self.max);
        true
    }
}

fn far() -> Instant {
    Instant::now() + Duration::from_secs(365 * 24 * 3600)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_backoff_ends_at_its_deadline() {
        let mut b = Backoff::new(Duration::from_millis(5));
        let start = Instant::now();
        while b.wait() {}
        assert!(start.elapsed() >= Duration::from_millis(5));
        assert!(!Backoff::new(Duration::ZERO).wait());
    }
}
