//! How the provider waits. Every long-running operation and every retried request runs under an
//! [`OpCtx`]: the `timeouts` deadline ends it with a Timeout that names what it was waiting for,
//! and terraform's StopProvider ends it at once (terraform waits for the provider's answer before
//! it exits, so nothing may keep sleeping). Between looks, a `Backoff` spaces the requests out
//! and a server's Retry-After wins over it. `poll_until` is the one loop that waits for an
//! operation and `retry` the one loop that retries a request; `OpCtx::run` holds a request in
//! flight to the same limits, and `bounded` any other future to a time limit and the stop.

use std::future::Future;
use std::time::{Duration, Instant};

use tokio::sync::watch;

/// Why a wait ended before its work did: the operation's own error, which every client's error
/// type takes (`From`), so that this module depends on none of them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Interrupted {
    /// The `timeouts` limit ran out while waiting for `waiting_for`.
    Timeout {
        waited: Duration,
        waiting_for: String,
    },
    /// Terraform asked the provider to stop (Ctrl-C).
    Stopped,
}

/// The longest Retry-After honoured: a server asking for more is not waited for that long.
const MAX_RETRY_AFTER: Duration = Duration::from_secs(120);

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

    pub(crate) fn is_stopped(&self) -> bool {
        *self.rx.borrow()
    }

    pub(crate) async fn stopped(&self) {
        let mut rx = self.rx.clone();
        let _ = rx.wait_for(|s| *s).await;
    }
}

/// The limits of one operation: its deadline and the stop signal; for a paced wait, also what
/// other waits of its kind see (see [`Pace::watching`]).
#[derive(Clone)]
pub struct OpCtx {
    pub(crate) started: Instant,
    pub(crate) deadline: Instant,
    pub(crate) stop: StopSignal,
    nudge: Option<std::sync::Arc<Nudge>>,
}

impl OpCtx {
    pub fn new(timeout: Duration, stop: StopSignal) -> OpCtx {
        let started = Instant::now();
        OpCtx {
            started,
            deadline: started + timeout,
            stop,
            nudge: None,
        }
    }

    /// Sleeps for `delay` unless the deadline or a stop comes first.
    pub(crate) async fn sleep(
        &self,
        delay: Duration,
        waiting_for: &str,
    ) -> Result<(), Interrupted> {
        if self.stop.is_stopped() {
            return Err(Interrupted::Stopped);
        }
        let now = Instant::now();
        if now >= self.deadline {
            return Err(self.timeout(waiting_for));
        }
        let wake = (now + delay).min(self.deadline);
        self.log_wait(waiting_for, wake - now);
        let nudged = async {
            match &self.nudge {
                Some(n) if !n.spent.load(std::sync::atomic::Ordering::Relaxed) => {
                    n.peer_done(n.began.elapsed()).await;
                    n.spent.store(true, std::sync::atomic::Ordering::Relaxed);
                }
                _ => std::future::pending().await,
            }
        };
        tokio::select! {
            () = tokio::time::sleep_until(wake.into()) => {
                if wake >= self.deadline && Instant::now() >= self.deadline {
                    Err(self.timeout(waiting_for))
                } else {
                    Ok(())
                }
            }
            () = self.stop.stopped() => Err(Interrupted::Stopped),
            // Another operation of this kind was just seen done: look again now.
            () = nudged => Ok(()),
        }
    }

    /// Runs `work` (a request in flight, a token being fetched) until it ends, the deadline passes
    /// (a Timeout naming `what`) or terraform stops the provider; once stopped, nothing starts.
    pub(crate) async fn run<T>(
        &self,
        what: &str,
        work: impl Future<Output = T>,
    ) -> Result<T, Interrupted> {
        if self.stop.is_stopped() {
            return Err(Interrupted::Stopped);
        }
        let left = self.deadline.saturating_duration_since(Instant::now());
        // The same line a sleep writes: a debug log then shows what an operation is blocked on.
        if !left.is_zero() {
            self.log_wait(what, left);
        }
        bounded(left, &self.stop, work)
            .await
            .map_err(|cut| match cut {
                Cut::Timeout => self.timeout(what),
                Cut::Stop => Interrupted::Stopped,
            })
    }

    fn log_wait(&self, waiting_for: &str, next: Duration) {
        tracing::debug!(
            waiting_for,
            elapsed_s = self.started.elapsed().as_secs(),
            next_check_ms = next.as_millis() as u64,
            "waiting"
        );
    }

    fn timeout(&self, waiting_for: &str) -> Interrupted {
        Interrupted::Timeout {
            waited: self.started.elapsed(),
            waiting_for: waiting_for.to_string(),
        }
    }
}

/// Delays between polls or retries: growing from `first` up to `cap`, with up to 20% jitter so
/// that many pools polled at once do not move in lockstep. A server's Retry-After wins.
pub(crate) struct Backoff {
    next: Duration,
    cap: Duration,
    growth: f64,
    /// The largest share of a delay added at random.
    jitter: f64,
    floor: Duration,
    spread_retry_after: bool,
}

impl Backoff {
    /// Retries of a failed or throttled request: the delay doubles, to give the API room.
    pub(crate) fn new(first: Duration, cap: Duration) -> Backoff {
        Backoff {
            next: first,
            cap,
            growth: 2.0,
            jitter: 0.2,
            floor: Duration::ZERO,
            spread_retry_after: false,
        }
    }

    /// The same delay every time, without jitter: a wait on one cluster's objects that a person
    /// follows line by line (an action's drain, the MIG manager's verdict), paced by the action
    /// rather than by a cloud's API.
    pub(crate) fn every(period: Duration) -> Backoff {
        Backoff {
            growth: 1.0,
            jitter: 0.0,
            ..Backoff::new(period, period)
        }
    }

    /// Polls of an operation that is running fine: the delay grows by half, so an operation is
    /// seen done sooner after it ends (before jitter, a 2 s operation polled from 250 ms is seen
    /// at 2.0 s rather than 3.75 s, a 16 s update polled from 1 s up to 10 s at 20.8 s rather
    /// than 25 s) for a poll or two more; at the cap, where a long create spends most of its
    /// polls, the two are the same.
    pub(crate) fn polling(first: Duration, cap: Duration) -> Backoff {
        Backoff {
            growth: 1.5,
            ..Backoff::new(first, cap)
        }
    }

    /// The first delay no longer than `first`.
    pub(crate) fn first_at_most(self, first: Duration) -> Backoff {
        Backoff {
            next: self.next.min(first),
            ..self
        }
    }

    /// No delay shorter than `floor`, so that a `Retry-After: 0` never turns into a busy loop.
    pub(crate) fn at_least(self, floor: Duration) -> Backoff {
        Backoff { floor, ..self }
    }

    /// A server's Retry-After is a minimum: clients that got the same one come back up to 10%
    /// later, spread out (the backoff's own delays are jittered already).
    pub(crate) fn spread_retry_after(self) -> Backoff {
        Backoff {
            spread_retry_after: true,
            ..self
        }
    }

    pub(crate) fn next_delay(&mut self, retry_after: Option<Duration>) -> Duration {
        let base = self.next;
        self.next = self.next.mul_f64(self.growth).min(self.cap);
        let delay = match retry_after.map(|ra| ra.min(MAX_RETRY_AFTER)) {
            Some(ra) if self.spread_retry_after => ra + ra.mul_f64(fastrand::f64() * 0.1),
            Some(ra) => ra,
            None => base + base.mul_f64(fastrand::f64() * self.jitter),
        };
        delay.max(self.floor)
    }
}

/// What one look at a running operation found.
pub(crate) enum Check<T> {
    Done(T),
    /// Still running: look again after the backoff's next delay, or after the server's
    /// Retry-After. `waiting_for`, when given, is what the wait names from now on.
    Pending {
        retry_after: Option<Duration>,
        waiting_for: Option<String>,
    },
}

/// Whether a wait looks at once, or sleeps first as after an answer with this Retry-After (an
/// operation that just started is not done yet), or sleeps exactly this long first (see [`Pace`]).
pub(crate) enum Start {
    Now,
    Sleep(Option<Duration>),
    After(Duration),
}

/// How long each kind of operation has taken in this process, so that a wait for the next one
/// takes its first look shortly before an operation like it was last seen done, not at the
/// backoff's first few short delays. The clouds say nothing of when an operation will end (GKE's
/// Operation and EKS's node group carry no estimate), yet one apply starts many operations of
/// the same kind, on the same cluster, that take about as long: a node pool create that took
/// 4 minutes is not looked at after 0.25, 0.6 and 1.2 s the next time. What is kept is the
/// quickest wait seen; the first look comes at 95% of it and the next ones from 5% of it apart
/// (growing as the backoff does), so an operation as quick as the quickest is seen within a
/// twentieth of its time, a slower one after a few more looks, and one quicker than all before
/// it no later than that first look.
///
/// Operations started together usually end together, and a cloud says nothing when one ends: a
/// wait that sees its operation done tells the other waits of the same kind (see
/// [`Pace::watching`]), and those that have waited about as long look at once, instead of each
/// at its own next delay.
#[derive(Debug)]
pub(crate) struct Pace {
    quickest: std::sync::Mutex<std::collections::HashMap<String, Duration>>,
    /// The kind and wait of the last operation seen done.
    done: watch::Sender<Option<(String, Duration)>>,
}

impl Default for Pace {
    fn default() -> Self {
        Pace {
            quickest: Default::default(),
            done: watch::Sender::new(None),
        }
    }
}

/// A paced wait's ear for the other waits of its kind (see [`Pace::watching`]). It nudges a wait
/// once: the first peer seen done says that operations of this kind are ending now; after that
/// look the wait keeps to its own delays, so that peers ending one after another over a minute
/// do not each bring every waiting operation's next look forward (a look per peer and wait).
struct Nudge {
    done: watch::Receiver<Option<(String, Duration)>>,
    kind: String,
    began: Instant,
    spent: std::sync::atomic::AtomicBool,
}

impl Nudge {
    /// Resolves once another wait of this kind has seen its operation done after waiting longer
    /// than this one had when it went to sleep (`slept_at`; a shorter one says nothing new: this
    /// operation was still running then) and this one has waited 95% of that.
    async fn peer_done(&self, slept_at: Duration) {
        let mut done = self.done.clone();
        done.mark_unchanged();
        loop {
            if done.changed().await.is_err() {
                // The pace is gone: nothing will nudge this wait.
                return std::future::pending().await;
            }
            let seen = done.borrow_and_update().clone();
            if let Some((kind, took)) = seen
                && kind == self.kind
                && took > slept_at
            {
                let at = self.began + took.mul_f64(Pace::FIRST_LOOK);
                tokio::time::sleep_until(at.into()).await;
                return;
            }
        }
    }
}

impl Pace {
    /// The share of the quickest wait seen before the first look.
    const FIRST_LOOK: f64 = 0.95;
    /// The share of the quickest wait seen between the first look and the second.
    const STEP: f64 = 0.05;

    /// How a wait for a new operation of `kind` starts, and the backoff it then follows:
    /// `otherwise` and `backoff` until one has been seen done.
    ///
    /// Operations that ended before the backoff's first delay (an emulator's instant ones, a
    /// delete of what was already gone) teach nothing: pacing by them would only shrink the
    /// delays. Nor do the steps go below a fifth of the backoff's first delay.
    pub(crate) fn start(&self, kind: &str, otherwise: Start, backoff: Backoff) -> (Start, Backoff) {
        let quickest = self.lock().get(kind).copied();
        match quickest {
            Some(d) if d.mul_f64(Self::FIRST_LOOK) >= backoff.next => {
                let step = d.mul_f64(Self::STEP).max(backoff.next / 5);
                (
                    Start::After(d.mul_f64(Self::FIRST_LOOK)),
                    backoff.first_at_most(step),
                )
            }
            _ => (otherwise, backoff),
        }
    }

    /// Notes that a wait for an operation of `kind` saw it done after `took`, and tells the
    /// other waits of that kind.
    pub(crate) fn record(&self, kind: &str, took: Duration) {
        {
            let mut quickest = self.lock();
            let entry = quickest.entry(kind.to_string()).or_insert(took);
            *entry = (*entry).min(took);
        }
        self.done.send_replace(Some((kind.to_string(), took)));
    }

    /// `ctx` for a wait for an operation of `kind` that starts now: its sleeps also end when
    /// another wait of this kind sees its operation done after about as long a wait.
    pub(crate) fn watching(&self, kind: &str, ctx: &OpCtx) -> OpCtx {
        OpCtx {
            nudge: Some(std::sync::Arc::new(Nudge {
                done: self.done.subscribe(),
                kind: kind.to_string(),
                began: Instant::now(),
                spent: Default::default(),
            })),
            ..ctx.clone()
        }
    }

    /// Runs `wait` (a [`poll_until`] handed its start and backoff), timing it when it ends well.
    pub(crate) async fn time<T, E, Fut>(
        &self,
        kind: &str,
        otherwise: Start,
        backoff: Backoff,
        wait: impl FnOnce(Start, Backoff) -> Fut,
    ) -> Result<T, E>
    where
        Fut: Future<Output = Result<T, E>>,
    {
        let began = Instant::now();
        let (start, backoff) = self.start(kind, otherwise, backoff);
        let done = wait(start, backoff).await;
        if done.is_ok() {
            self.record(kind, began.elapsed());
        }
        done
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, std::collections::HashMap<String, Duration>> {
        // A panic while the map was held cannot leave it inconsistent (one insert or min).
        self.quickest
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// Looks at an operation with `check` until it reports done, sleeping between looks by `backoff`
/// or the server's Retry-After; the deadline ends the wait with a Timeout naming `waiting_for`
/// (as the last check put it), a stop with Stopped. `check` is handed that name too, so that its
/// own errors can say what the wait was for.
pub(crate) async fn poll_until<T, E, F, Fut>(
    ctx: &OpCtx,
    mut backoff: Backoff,
    mut waiting_for: String,
    start: Start,
    mut check: F,
) -> Result<T, E>
where
    E: From<Interrupted>,
    F: FnMut(&str) -> Fut,
    Fut: Future<Output = Result<Check<T>, E>>,
{
    match start {
        Start::Now => {}
        Start::Sleep(retry_after) => {
            ctx.sleep(backoff.next_delay(retry_after), &waiting_for)
                .await?;
        }
        Start::After(delay) => ctx.sleep(delay, &waiting_for).await?,
    }
    loop {
        match check(&waiting_for).await? {
            Check::Done(v) => return Ok(v),
            Check::Pending {
                retry_after,
                waiting_for: now,
            } => {
                if let Some(now) = now {
                    waiting_for = now;
                }
                ctx.sleep(backoff.next_delay(retry_after), &waiting_for)
                    .await?;
            }
        }
    }
}

/// How one attempt of a request ended, as its client judges it. An `Err` from the attempt is
/// final.
pub(crate) enum Attempt<T, E> {
    Done(T),
    /// A failure another attempt may not have: throttling, a server error, a dropped connection.
    /// Counts against the attempts allowed.
    Failed(Failure<T, E>),
    /// Refused because another operation runs: tried again until the deadline, not counted.
    Busy(Failure<T, E>),
    /// Nothing failed, but the attempt must start over (it waited for another operation to end).
    Again,
}

pub(crate) struct Failure<T, E> {
    /// What the caller gets when no attempts are left: the error, or the last answer as it came.
    pub(crate) last: Result<T, E>,
    pub(crate) retry_after: Option<Duration>,
    /// What the sleep before the next attempt waits for, as its timeout names it.
    pub(crate) waiting_for: String,
}

/// Runs `attempt` until it is done, a final error, or `max_attempts` have failed (then the last
/// failure's answer). Each retry sleeps by `backoff` or the server's Retry-After under `ctx`;
/// `on_retry` sees the failure, how many have counted so far and the delay, before the sleep.
pub(crate) async fn retry<T, E, F, Fut>(
    ctx: &OpCtx,
    mut backoff: Backoff,
    max_attempts: u32,
    mut attempt: F,
    mut on_retry: impl FnMut(&Failure<T, E>, u32, Duration),
) -> Result<T, E>
where
    E: From<Interrupted>,
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<Attempt<T, E>, E>>,
{
    let mut failures = 0;
    loop {
        let failure = match attempt().await? {
            Attempt::Done(v) => return Ok(v),
            Attempt::Again => continue,
            Attempt::Failed(f) => {
                failures += 1;
                if failures >= max_attempts {
                    return f.last;
                }
                f
            }
            Attempt::Busy(f) => f,
        };
        let delay = backoff.next_delay(failure.retry_after);
        on_retry(&failure, failures, delay);
        ctx.sleep(delay, &failure.waiting_for).await?;
    }
}

/// Why [`bounded`] gave up on its work.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Cut {
    /// The time limit ran out.
    Timeout,
    /// Terraform called StopProvider (Ctrl-C).
    Stop,
}

/// Runs `work` until it ends, `limit` passes or terraform asks the provider to stop. Work that
/// has finished wins over a limit or stop that comes at the same moment.
pub(crate) async fn bounded<T>(
    limit: Duration,
    stop: &StopSignal,
    work: impl Future<Output = T>,
) -> Result<T, Cut> {
    tokio::select! {
        biased;
        r = tokio::time::timeout(limit, work) => r.map_err(|_| Cut::Timeout),
        () = stop.stopped() => Err(Cut::Stop),
    }
}

/// Whether an HTTP status is worth retrying: throttling and server-side trouble.
pub(crate) fn retryable_status(status: u16) -> bool {
    matches!(status, 408 | 429 | 500 | 502 | 503 | 504)
}

/// Parses a Retry-After header given in seconds.
pub(crate) fn retry_after_seconds(value: Option<&str>) -> Option<Duration> {
    value
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map(Duration::from_secs)
}

#[cfg(test)]
mod tests;
