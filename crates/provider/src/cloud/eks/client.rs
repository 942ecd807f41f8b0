//! The EKS client's state and limits, and the errors its methods share, in a module of
//! their own: the client's methods live beside what they do (`calls`, `operations`, `config`)
//! and its `NodePools` methods in the folder's root, all of which use these and none of which
//! these use.

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::AtomicU64;
use std::time::Duration;

use aws_sdk_eks::Client;

use crate::cloud::error::CloudError;

/// Attempts per API call (the first try included) before a retryable failure is returned.
pub const MAX_ATTEMPTS: u32 = 6;

/// The EKS side of [`NodePools`]. One SDK client per region, built on first use and cached.
pub struct EksClient {
    pub(super) base: aws_sdk_eks::config::Builder,
    pub(super) default_region: Option<String>,
    pub(super) clients: Mutex<HashMap<String, Client>>,
    /// The same for the Auto Scaling API, which holds the node groups' Auto Scaling groups.
    pub(super) asg_base: aws_sdk_autoscaling::config::Builder,
    pub(super) asg_clients: Mutex<HashMap<String, aws_sdk_autoscaling::Client>>,
    /// EC2, for the launch templates of Bottlerocket node groups (the `ec2` module).
    pub(super) ec2: Ec2,
    pub(super) poll_first: Duration,
    pub(super) poll_cap: Duration,
    pub(super) retry_first: Duration,
    pub(super) retry_cap: Duration,
    pub(super) attempt_timeout: Duration,
    /// How long creates and deletes took, for the first look at the next (see `watch`).
    pub(super) pace: crate::operation::Pace,
    /// Calls of this client that the server throttled or failed (retryable API errors), so far:
    /// a list's describes narrow their window when it grows (see `window`).
    pub(super) throttles: AtomicU64,
}

/// Whether an API error carries the EKS error code `want`.
pub(super) fn has_code(e: &CloudError, want: &str) -> bool {
    matches!(e, CloudError::Api { code, .. } if code == want)
}

/// The error of a node group that went away while the client worked on it.
pub(super) fn gone(cluster: &str, name: &str) -> CloudError {
    CloudError::Api {
        status: 404,
        code: "ResourceNotFoundException".into(),
        message: format!("node group {cluster}:{name} no longer exists"),
    }
}

/// How the client reaches EC2: where, and as whom.
pub(crate) struct Ec2 {
    pub(super) http: reqwest::Client,
    /// Everything goes here when set (the sandbox, a moto server, an endpoint override); else
    /// the region's public endpoint.
    pub(super) endpoint: Option<String>,
    pub(super) credentials: Option<aws_credential_types::provider::SharedCredentialsProvider>,
}
