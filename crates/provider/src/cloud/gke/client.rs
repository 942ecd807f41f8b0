//! The GKE client's state, timings and limits, in a module of their own: the client's methods
//! live beside what they do (`calls`, `operations`, `mapping`) and its `NodePools` methods in the
//! folder's root, all of which use these and none of which these use.

use std::collections::HashMap;
use std::time::Duration;

use google_cloud_container_v1::client::ClusterManager;

/// Transient failures (429, 5xx, dropped connections) retried per call before giving up.
pub(super) const MAX_TRANSIENT_RETRIES: u32 = 8;
pub(super) const RETRY_CAP: Duration = Duration::from_secs(20);
pub(super) const POLL_CAP: Duration = Duration::from_secs(10);

/// Delays of the client's waits. The defaults suit GKE, whose operations take minutes.
#[derive(Clone, Copy, Debug)]
pub struct GkeTiming {
    /// First delay between polls of an operation (growing by half up to 10 s).
    pub poll_first: Duration,
    /// First delay before retrying a throttled or failed call (doubling up to 20 s; Retry-After wins).
    pub retry_first: Duration,
}

impl Default for GkeTiming {
    fn default() -> Self {
        GkeTiming {
            poll_first: Duration::from_secs(1),
            retry_first: Duration::from_millis(500),
        }
    }
}

/// The GKE implementation of [`NodePools`].
#[derive(Clone, Debug)]
pub struct GkeClient {
    pub(super) cm: ClusterManager,
    pub(super) timing: GkeTiming,
    /// For the Compute instance group manager reads, which the container client cannot do.
    pub(super) creds: google_cloud_auth::credentials::Credentials,
    pub(super) http: reqwest::Client,
    /// Sandbox base URL: instance group URLs are rewritten to it.
    pub(super) sandbox: Option<String>,
    /// Each cluster's turns for operations (see `queue`), shared by the clones of this client.
    pub(super) queues: std::sync::Arc<super::queue::Queues>,
    /// Each cluster's zones, read once (see the module docs), by cluster path.
    pub(super) cluster_zones: ZoneCache,
    /// How long each type of operation took, for the first look at the next (shared by clones).
    pub(super) pace: std::sync::Arc<crate::operation::Pace>,
}

pub(super) type ZoneCache = std::sync::Arc<
    std::sync::Mutex<HashMap<String, std::sync::Arc<tokio::sync::OnceCell<Vec<String>>>>>,
>;
