//! Waiting done right: exponential backoff with a cap and jitter, Retry-After honoured, the
//! `timeouts` deadline enforced, and terraform's StopProvider ending every wait at once.

use std::time::{Duration, Instant};

use tokio::sync::watch;

use super::CloudError;

/// Set once when terraform calls StopProvider; every wait watches it.
#[derive(Clone)]
pub struct StopSignal {
    rx: watch::Receiver<bool>,
    tx: std::sync::Arc<watch::Sender<bool>>,
}

impl Default for StopSignal {
    fn default() -> Self {
        let (tx, rx) = watch::channel(false);
        StopSignal {
            rx,
            tx: std::sync::Arc::new(tx),
        }
    }
}

impl StopSignal {
    pub fn stop(&self) {
        let _ = self.tx.send(true);
    }
    pub fn is_stopped(&self) -> bool {
        *self.rx.borrow()
    }
    pub async fn stopped(&self) {
        let mut rx = self.rx.clone();
        let _ = rx.wait_for(|s| *s).await;
    }
}

/// The limits of one operation: its deadline and the stop signal.
#[derive(Clone)]
pub struct OpCtx {
    pub started: Instant,
    pub deadline: Instant,
    pub stop: StopSignal,
}

impl OpCtx {
    pub fn new(timeout: Duration, stop: StopSignal) -> OpCtx {
        let started = Instant::now();
        OpCtx {
            started,
            deadline: started + timeout,
            stop,
        }
    }

    /// Sleeps for `delay` unless the deadline or a stop comes first.
    pub async fn sleep(&self, delay: Duration, waiting_for: &str) -> Result<(), CloudError> {
        if self.stop.is_stopped() {
            return Err(CloudError::Stopped);
        }
        let now = Instant::now();
        if now >= self.deadline {
            return Err(self.timeout(waiting_for));
        }
        let wake = (now + delay).min(self.deadline);
        tracing::debug!(
            waiting_for,
            elapsed_s = self.started.elapsed().as_secs(),
            next_check_ms = (wake - now).as_millis() as u64,
            "waiting"
        );
        tokio::select! {
            () = tokio::time::sleep_until(wake.into()) => {
                if wake >= self.deadline && Instant::now() >= self.deadline {
                    Err(self.timeout(waiting_for))
                } else {
                    Ok(())
                }
            }
            () = self.stop.stopped() => Err(CloudError::Stopped),
        }
    }

    fn timeout(&self, waiting_for: &str) -> CloudError {
        CloudError::Timeout {
            waited: self.started.elapsed(),
            waiting_for: waiting_for.to_string(),
        }
    }
}

/// Delays between polls or retries: doubling from `first` up to `cap`, with up to 20% jitter so
/// that many pools polled at once do not move in lockstep. A server's Retry-After wins.
pub struct Backoff {
    next: Duration,
    cap: Duration,
    growth: f64,
}

impl Backoff {
    /// Retries of a failed or throttled request: the delay doubles, to give the API room.
    pub fn new(first: Duration, cap: Duration) -> Backoff {
        Backoff {
            next: first,
            cap,
            growth: 2.0,
        }
    }

    /// Polls of an operation that is running fine: the delay grows by half, so an operation is
    /// seen done sooner after it ends (before jitter, a 2 s operation polled from 250 ms is seen
    /// at 2.0 s rather than 3.75 s, a 16 s update polled from 1 s up to 10 s at 20.8 s rather
    /// than 25 s) for a poll or two more; at the cap, where a long create spends most of its
    /// polls, the two are the same.
    pub fn polling(first: Duration, cap: Duration) -> Backoff {
        Backoff {
            next: first,
            cap,
            growth: 1.5,
        }
    }

    pub fn next_delay(&mut self, retry_after: Option<Duration>) -> Duration {
        let base = self.next;
        self.next = self.next.mul_f64(self.growth).min(self.cap);
        if let Some(ra) = retry_after {
            return ra.min(Duration::from_secs(120));
        }
        let jitter = base.mul_f64(fastrand::f64() * 0.2);
        base + jitter
    }
}

/// Whether an HTTP status is worth retrying: throttling and server-side trouble.
pub fn retryable_status(status: u16) -> bool {
    matches!(status, 408 | 429 | 500 | 502 | 503 | 504)
}

/// Parses a Retry-After header given in seconds.
pub fn retry_after_seconds(value: Option<&str>) -> Option<Duration> {
    value
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map(Duration::from_secs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_to_the_cap_and_honours_retry_after() {
        let mut b = Backoff::new(Duration::from_millis(100), Duration::from_millis(400));
        let d: Vec<Duration> = (0..4).map(|_| b.next_delay(None)).collect();
        assert!(d[0] >= Duration::from_millis(100) && d[0] <= Duration::from_millis(120));
        assert!(d[1] >= Duration::from_millis(200) && d[1] <= Duration::from_millis(240));
        assert!(d[3] >= Duration::from_millis(400) && d[3] <= Duration::from_millis(480));
        assert_eq!(
            b.next_delay(Some(Duration::from_secs(3))),
            Duration::from_secs(3)
        );
        assert_eq!(
            retry_after_seconds(Some(" 7 ")),
            Some(Duration::from_secs(7))
        );
        assert_eq!(
            retry_after_seconds(Some("Wed, 21 Oct 2015 07:28:00 GMT")),
            None
        );
    }

    #[test]
    fn polls_grow_by_half_to_the_cap() {
        let mut b = Backoff::polling(Duration::from_millis(200), Duration::from_millis(500));
        let d: Vec<Duration> = (0..4).map(|_| b.next_delay(None)).collect();
        for (got, base) in d.iter().zip([200, 300, 450, 500]) {
            let base = Duration::from_millis(base);
            assert!(*got >= base && *got <= base.mul_f64(1.2), "{d:?}");
        }
    }

    #[tokio::test]
    async fn sleeps_end_at_the_deadline_or_a_stop() {
        let stop = StopSignal::default();
        let ctx = OpCtx::new(Duration::from_millis(50), stop.clone());
        assert!(matches!(
            ctx.sleep(Duration::from_secs(10), "x").await,
            Err(CloudError::Timeout { .. })
        ));

        let ctx = OpCtx::new(Duration::from_secs(60), stop.clone());
        let waiter = tokio::spawn(async move { ctx.sleep(Duration::from_secs(60), "x").await });
        tokio::time::sleep(Duration::from_millis(20)).await;
        stop.stop();
        assert!(matches!(waiter.await.unwrap(), Err(CloudError::Stopped)));
    }
}
