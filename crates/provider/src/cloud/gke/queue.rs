//! GKE runs at most five operations at once on a cluster and refuses a sixth with 429
//! RESOURCE_EXHAUSTED ("Too many operations: cluster ... hits the concurrent operations quota 5,
//! please try again later."). The google provider retries such refusals; this client does not let
//! them happen for its own operations: a mutation takes one of its cluster's turns before it is
//! sent and gives it back once its operation has ended, so the others wait here, in the order they
//! came (tokio's semaphore is fair), each bounded by its own deadline and terraform's stop. Other
//! clients' operations can still fill the cluster; those refusals are waited out in `calls`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::cloud::error::CloudError;
use crate::operation::OpCtx;

/// GKE's concurrent operations quota per cluster.
pub(super) const MAX_OPERATIONS_PER_CLUSTER: usize = 5;

/// The turns of each cluster this provider process works on, by cluster path.
#[derive(Debug, Default)]
pub(super) struct Queues {
    clusters: Mutex<HashMap<String, Arc<Semaphore>>>,
}

/// One operation's turn on its cluster; dropping it lets the next one start.
pub(super) type Turn = OwnedSemaphorePermit;

impl Queues {
    /// Waits for a turn on `cluster` (`projects/P/locations/L/clusters/C`) for `what`.
    pub(super) async fn turn(
        &self,
        cluster: &str,
        what: &str,
        ctx: &OpCtx,
    ) -> Result<Turn, CloudError> {
        if ctx.stop.is_stopped() {
            return Err(CloudError::Stopped);
        }
        let slots = {
            let mut clusters = self.clusters.lock().unwrap_or_else(|e| e.into_inner());
            clusters
                .entry(cluster.to_string())
                .or_insert_with(|| Arc::new(Semaphore::new(MAX_OPERATIONS_PER_CLUSTER)))
                .clone()
        };
        if let Ok(turn) = slots.clone().try_acquire_owned() {
            return Ok(turn);
        }
        tracing::debug!(
            cluster,
            call = what,
            "{MAX_OPERATIONS_PER_CLUSTER} operations of this provider run on the cluster; waiting \
                for a turn"
        );
        let waiting_for = format!(
            "a turn among the operations on {cluster} (GKE runs {MAX_OPERATIONS_PER_CLUSTER} at \
                once) to {what}"
        );
        ctx.run(&waiting_for, slots.acquire_owned())
            .await?
            // The semaphore is never closed.
            .map_err(|e| CloudError::Transport(format!("operation queue of {cluster}: {e}").into()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::operation::StopSignal;
    use std::time::Duration;

    #[tokio::test]
    async fn a_sixth_operation_waits_for_a_turn_and_gets_it_when_one_ends() {
        let q = Queues::default();
        let ctx = OpCtx::new(Duration::from_secs(5), StopSignal::default());
        let mut turns = Vec::new();
        for _ in 0..MAX_OPERATIONS_PER_CLUSTER {
            turns.push(q.turn("c1", "create", &ctx).await.unwrap());
        }
        // Another cluster has turns of its own.
        let other = q.turn("c2", "create", &ctx).await.unwrap();
        let short = OpCtx::new(Duration::from_millis(50), StopSignal::default());
        match q.turn("c1", "create p6", &short).await {
            Err(CloudError::Timeout { waiting_for, .. }) => {
                assert!(
                    waiting_for.contains("a turn among the operations on c1"),
                    "{waiting_for}"
                )
            }
            other => panic!("expected a timeout, got {other:?}"),
        }
        turns.pop();
        let p6 = q.turn("c1", "create p6", &ctx).await.unwrap();
        drop(p6);
        drop(other);
        let stop = StopSignal::default();
        let stopped = OpCtx::new(Duration::from_secs(5), stop.clone());
        stop.stop();
        assert!(matches!(
            q.turn("c1", "create p7", &stopped).await,
            Err(CloudError::Stopped)
        ));
    }
}
