//! What a node pool operation that failed tells the user, and what it keeps: a create that may
//! have reached the cloud records what it made (tainted) so nothing is orphaned, and one the
//! cloud refused takes nothing, so a pool of that name that someone else owns is never adopted.

use std::time::Duration;

use crate::cloud::{self, CloudError, Location, Pool};
use crate::operation::{OpCtx, StopSignal};
use tfplugin::Diagnostic;

/// How long the read that records a pool may take after terraform asked the provider to stop:
/// terraform waits for the answer before it exits, and the provider must answer within 2 s.
const READ_AFTER_STOP: Duration = Duration::from_secs(1);
/// How long a failed create may spend looking for what it left behind.
const SALVAGE_READ: Duration = Duration::from_secs(30);

/// What to do when a cloud refuses a pool for a per-cluster limit: AKS allows 100 node pools per
/// cluster (a fixed limit, the cluster's `maxAgentPools`), EKS 30 managed node groups per cluster
/// unless its "Managed node groups per cluster" quota (L-6D54EA21) was raised.
fn limit_fix(e: &CloudError) -> Option<(&'static str, &'static str)> {
    let CloudError::Api { code, message, .. } = e else {
        return None;
    };
    match code.as_str() {
        "ResourceLimitExceededException" => Some((
            "Node pool limit reached",
            "EKS allows 30 managed node groups per cluster unless the \"Managed node groups per \
                cluster\" quota (L-6D54EA21) was raised: request a quota increase in Service \
                Quotas, or Delete node groups this cluster no longer needs, then apply again.",
        )),
        "QuotaExceeded" if message.to_ascii_lowercase().contains("agent pool") => Some((
            "Node pool limit reached",
            "AKS allows at most 100 node pools per cluster, a limit that cannot be raised: Delete \
                node pools this cluster no longer needs, or put this pool in another cluster, then \
                apply again.",
        )),
        "QuotaExceeded" => Some((
            "Cloud quota reached",
            "Request a quota increase for what the message names (Azure portal: Quotas), or ask \
                for less, then apply again.",
        )),
        _ => None,
    }
}

pub(super) fn cloud_diagnostic(action: &str, name: &str, e: &CloudError) -> Diagnostic {
    let (summary, fix) = match e {
        _ if let Some(limit) = limit_fix(e) => limit,
        CloudError::Api {
            status: 401 | 403, ..
        }
        | CloudError::Auth(_) => (
            "Cloud credentials refused",
            "Check the provider's credentials for this cloud and their permissions.",
        ),
        CloudError::Api { status: 404, .. } => (
            "Cluster or pool not found",
            "Check the cluster block: the cluster must exist.",
        ),
        CloudError::Api { status: 409, .. } => (
            "Pool conflict",
            "A pool of this name exists or is busy; import it with `terraform import`, or wait and \
                retry.",
        ),
        CloudError::Api { status: 429, .. } => (
            "Cloud API throttled",
            "The cloud kept answering \"too many requests\" after the provider's retries. Apply \
                again later, or with a lower -parallelism.",
        ),
        CloudError::Api { status: 500.., .. } => (
            "Cloud API error",
            "The cloud failed on its side and kept failing after the provider's retries; nothing \
                in the configuration needs to change. Apply again; what exists is kept in state.",
        ),
        CloudError::Api { .. } => (
            "Cloud API refused the request",
            "Fix the value the message names and apply again.",
        ),
        CloudError::OperationFailed { .. } => (
            "Cloud operation failed",
            "The pool is kept in state (tainted); the next apply replaces it. Check quotas and the \
                message.",
        ),
        CloudError::Timeout { .. } => (
            "Timed out",
            "Raise the limit in the resource's timeouts block, or apply again: the provider picks \
                up where the cloud is.",
        ),
        CloudError::Stopped => (
            "Interrupted",
            "Apply again to finish; what exists is kept in state.",
        ),
        CloudError::Transport(_) | CloudError::BadResponse(_) => (
            "Cloud API unreachable",
            "Check the endpoint and network, then apply again.",
        ),
    };
    // Clouds end their messages with a full stop; do not print two.
    let e = e.to_string();
    Diagnostic::error(
        summary,
        format!(
            "Could not {action} node pool {name:?}: {}. {fix}",
            e.trim_end_matches('.')
        ),
    )
}

/// The pool as the cloud holds it after a create or update failed with `e`, so that state can
/// record it: Some(None) when the cloud has no such pool, None when the cloud could not say.
pub(super) async fn read_after_failure(
    client: &dyn cloud::NodePools,
    loc: &Location,
    name: &str,
    e: &CloudError,
) -> Option<Option<Pool>> {
    // The operation's time is already spent: after a stop the look gets a second, otherwise
    // SALVAGE_READ, so that an API which made the operation fail by never finishing its answers
    // cannot hold terraform for the resource's whole read timeout. The look runs past terraform's
    // stop on purpose (a signal that already fired would end it at once), bounded by `limit`.
    let limit = if matches!(e, CloudError::Stopped) {
        READ_AFTER_STOP
    } else {
        SALVAGE_READ
    };
    let ctx = OpCtx::new(limit, StopSignal::default());
    tokio::time::timeout(limit, client.get(loc, name, &ctx))
        .await
        .ok()?
        .ok()
}

/// Whether a create that failed with `e` may still have made the pool: anything but a refusal
/// (credentials, a request the API rejected, a pool that belongs to someone else).
pub(super) fn may_have_created(e: &CloudError) -> bool {
    match e {
        CloudError::Auth(_) => false,
        CloudError::Api { status, .. } => {
            !matches!(status, 400..=499) || matches!(status, 408 | 429)
        }
        _ => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pool_limit_says_what_to_do_on_each_cloud() {
        let api = |code: &str, message: &str| CloudError::Api {
            status: 400,
            code: code.into(),
            message: message.into(),
        };
        let eks = cloud_diagnostic(
            "create",
            "p",
            &api(
                "ResourceLimitExceededException",
                "Nodegroup limit exceeded for cluster.",
            ),
        );
        assert_eq!(eks.summary, "Node pool limit reached");
        assert!(eks.detail.contains("L-6D54EA21") && eks.detail.contains("quota increase"));
        let aks = cloud_diagnostic(
            "create",
            "p",
            &api(
                "QuotaExceeded",
                "Cannot add agent pool 'p': the cluster already has 100 agent pools.",
            ),
        );
        assert_eq!(aks.summary, "Node pool limit reached");
        assert!(aks.detail.contains("another cluster"), "{}", aks.detail);
        let cores = cloud_diagnostic(
            "create",
            "p",
            &api(
                "QuotaExceeded",
                "Operation results in exceeding approved cores quota.",
            ),
        );
        assert_eq!(cores.summary, "Cloud quota reached");
    }

    #[test]
    fn only_a_refused_create_is_known_to_have_made_nothing() {
        let api = |status| CloudError::Api {
            status,
            code: "X".into(),
            message: "m".into(),
        };
        for e in [
            CloudError::Stopped,
            CloudError::Transport("reset".into()),
            CloudError::OperationFailed {
                code: "X".into(),
                message: "m".into(),
            },
            CloudError::Timeout {
                waited: Duration::from_secs(1),
                waiting_for: "x".into(),
            },
            api(429),
            api(503),
            api(408),
        ] {
            assert!(may_have_created(&e), "{e}");
        }
        for e in [CloudError::Auth("no".into()), api(400), api(403), api(409)] {
            assert!(!may_have_created(&e), "{e}");
        }
    }
}
