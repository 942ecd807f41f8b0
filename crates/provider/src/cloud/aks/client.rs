//! The ARM agent pool client's state and timings, in a module of their own: the client's
//! methods live beside what they do (`http`, `operations`, `mapping`) and its `NodePools`
//! methods in the folder's root, all of which use these and none of which these use.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use azure_core::credentials::TokenCredential;
use reqwest::Url;

use crate::operation::Backoff;

/// Delays of one client: a local sandbox answers in milliseconds, Azure in seconds.
#[derive(Clone, Copy, Debug)]
pub(super) struct Timing {
    pub(super) retry_first: Duration,
    pub(super) retry_cap: Duration,
    pub(super) poll_first: Duration,
    pub(super) poll_cap: Duration,
    /// Floor under any delay, so a `Retry-After: 0` never turns into a busy loop.
    pub(super) min_delay: Duration,
    /// Consecutive retryable failures of one request before giving up (the deadline may come first).
    pub(super) max_attempts: u32,
    pub(super) request_timeout: Duration,
}

impl Timing {
    /// Retries of a request. Backoff already jitters its own delays; a server's Retry-After is a
    /// minimum, so clients that got the same one are spread a little beyond it.
    pub(super) fn retries(&self) -> Backoff {
        Backoff::new(self.retry_first, self.retry_cap)
            .at_least(self.min_delay)
            .spread_retry_after()
    }

    /// Polls of a long-running operation, spread like retries.
    pub(super) fn polls(&self) -> Backoff {
        Backoff::polling(self.poll_first, self.poll_cap)
            .at_least(self.min_delay)
            .spread_retry_after()
    }
}

pub(super) const AZURE_TIMING: Timing = Timing {
    retry_first: Duration::from_secs(1),
    retry_cap: Duration::from_secs(30),
    poll_first: Duration::from_secs(5),
    poll_cap: Duration::from_secs(30),
    min_delay: Duration::from_secs(1),
    max_attempts: 12,
    request_timeout: Duration::from_secs(60),
};

pub(super) const SANDBOX_TIMING: Timing = Timing {
    retry_first: Duration::from_millis(100),
    retry_cap: Duration::from_secs(2),
    poll_first: Duration::from_millis(100),
    poll_cap: Duration::from_secs(1),
    min_delay: Duration::from_millis(20),
    max_attempts: 12,
    request_timeout: Duration::from_secs(30),
};

/// The ARM agent pool client.
pub struct AksClient {
    pub(super) http: reqwest::Client,
    pub(super) arm: Url,
    pub(super) scope: String,
    pub(super) credential: Arc<dyn TokenCredential>,
    /// Which credential was chosen, for messages (never its secret).
    pub(super) credential_kind: &'static str,
    pub(super) timing: Timing,
}

impl fmt::Debug for AksClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AksClient")
            .field("arm", &self.arm.as_str())
            .field("credential", &self.credential_kind)
            .finish_non_exhaustive()
    }
}
