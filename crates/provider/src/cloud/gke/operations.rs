//! GKE's long-running operations and reads: an `Operation` polled until DONE, a pool read back
//! (its size from the Compute instance group managers when they can be read), and the adoption of
//! a pool an earlier attempt of a create left behind.

use std::future::Future;

use google_cloud_container_v1 as gcc;
use google_cloud_container_v1::model::{self as m, NodePool, Operation};

use super::calls::operation_state;
use super::mapping::{
    canonical_spec, cluster_path, compute_url, gke_location, pool_id, pool_message, spec_of,
    status_name,
};
use super::{GkeClient, POLL_CAP};
use crate::cloud::{CloudError, Location, OpCtx, Pool, PoolSpec, Scaling};
use crate::operation::{Backoff, Check, Start, poll_until};

impl GkeClient {
    /// Polls the operation until DONE. A failed operation is `OperationFailed` with google.rpc's code.
    pub(super) async fn wait(
        &self,
        loc: &Location,
        op: Operation,
        ctx: &OpCtx,
    ) -> Result<(), CloudError> {
        if let Check::Done(()) = operation_state(&op)? {
            return Ok(());
        }
        let (p, l, _) = gke_location(loc)?;
        let name = &if op.name.starts_with("projects/") {
            op.name.clone()
        } else {
            format!("projects/{p}/locations/{l}/operations/{}", op.name)
        };
        let what = &format!(
            "GKE operation {} ({})",
            op.name,
            op.operation_type.name().unwrap_or("?")
        );
        let backoff = Backoff::polling(self.timing.poll_first, POLL_CAP);
        let kind = op.operation_type.name().unwrap_or("?");
        // The waits between looks end early when another operation of this kind is seen done;
        // a look's own retries (throttling, server errors) keep their backoff.
        let watching = &self.pace.watching(kind, ctx);
        // An operation that just started is not done yet: sleep before the first look.
        self.pace
            .time(kind, Start::Sleep(None), backoff, |start, backoff| {
                poll_until(
                    watching,
                    backoff,
                    what.clone(),
                    start,
                    move |_| async move {
                        let op = self
                            .call(ctx, what, false, || {
                                self.cm.get_operation().set_name(name.clone()).send()
                            })
                            .await?;
                        operation_state(&op)
                    },
                )
            })
            .await
    }

    pub(super) async fn get_raw(
        &self,
        loc: &Location,
        name: &str,
        ctx: &OpCtx,
    ) -> Result<Option<NodePool>, CloudError> {
        let id = pool_id(loc, name)?;
        match self
            .call(ctx, &format!("GET {id}"), false, || {
                self.cm.get_node_pool().set_name(id.clone()).send()
            })
            .await
        {
            Ok(np) => Ok(Some(np)),
            Err(e) if e.is_not_found() => Ok(None),
            Err(e) => Err(e),
        }
    }

    pub(super) async fn pool_of(&self, loc: &Location, np: &NodePool) -> Result<Pool, CloudError> {
        let mut spec = spec_of(loc, np);
        if let Scaling::Fixed { .. } = spec.scaling
            && let Some(nodes) = self.current_size(np).await
        {
            spec.scaling = Scaling::Fixed { nodes };
        }
        Ok(Pool {
            id: pool_id(loc, &np.name)?,
            spec,
            status: status_name(np),
        })
    }

    /// The pool's current size in all: its instance group managers' targetSize summed over the
    /// zones, or None when any of them cannot be read. The zones are read together (a refresh
    /// then costs two round trips, the pool and its groups, whatever the number of zones).
    async fn current_size(&self, np: &NodePool) -> Option<u32> {
        if np.instance_group_urls.is_empty() {
            return None;
        }
        let urls = np
            .instance_group_urls
            .iter()
            .map(|url| compute_url(self.sandbox.as_deref(), url))
            .collect::<Option<Vec<String>>>()?;
        let sizes = futures_util::future::join_all(urls.iter().map(|url| async move {
            self.target_size(url).await.map_err(|e| {
                tracing::debug!(url = %url, error = %e, "cannot read the instance group size; using initialNodeCount");
            })
        }))
        .await;
        let total = sizes.into_iter().sum::<Result<u64, ()>>().ok()?;
        u32::try_from(total).ok()
    }

    async fn target_size(&self, url: &str) -> Result<u64, String> {
        use google_cloud_auth::credentials::CacheableResource;
        let headers = match self
            .creds
            .headers(http::Extensions::new())
            .await
            .map_err(|e| e.to_string())?
        {
            CacheableResource::New { data, .. } => data,
            CacheableResource::NotModified => http::HeaderMap::new(),
        };
        let r = self
            .http
            .get(url)
            .headers(headers)
            .send()
            .await
            .map_err(|e| e.to_string())?;
        if !r.status().is_success() {
            return Err(format!("HTTP {}", r.status()));
        }
        let body = super::transport::read_capped(r, super::transport::MAX_BODY)
            .await
            .map_err(|e| e.to_string())?;
        let v: serde_json::Value = serde_json::from_slice(&body).map_err(|e| e.to_string())?;
        // int32 in Compute's JSON, but accept a string as int64s are sent.
        match &v["targetSize"] {
            serde_json::Value::Number(n) => n.as_u64(),
            serde_json::Value::String(s) => s.parse().ok(),
            _ => None,
        }
        .ok_or_else(|| "no targetSize in the instance group manager".to_string())
    }

    /// A pool that was just created or changed, read back, its instance groups not read: a create
    /// that just ended has `initialNodeCount` nodes in each zone, which is what the pool reads as,
    /// and after a resize the caller knows the size it set.
    pub(super) async fn reread(
        &self,
        loc: &Location,
        name: &str,
        ctx: &OpCtx,
    ) -> Result<Pool, CloudError> {
        match self.get_raw(loc, name, ctx).await? {
            Some(np) => Ok(Pool {
                id: pool_id(loc, &np.name)?,
                spec: spec_of(loc, &np),
                status: status_name(&np),
            }),
            None => Err(CloudError::BadResponse(
                format!(
                    "node pool {} vanished right after its operation finished",
                    pool_id(loc, name)?
                )
                .into(),
            )),
        }
    }

    /// Adopts a pool an earlier attempt of this create left behind, once its own operation ends.
    pub(super) async fn adopt(&self, spec: &PoolSpec, ctx: &OpCtx) -> Result<Pool, CloudError> {
        let id = &pool_id(&spec.location, &spec.name)?;
        let backoff = Backoff::polling(self.timing.poll_first, POLL_CAP);
        let what = format!("node pool {id} to finish provisioning");
        poll_until(ctx, backoff, what, Start::Now, move |_| async move {
            let Some(np) = self.get_raw(&spec.location, &spec.name, ctx).await? else {
                return Err(CloudError::Api {
                    status: 409,
                    code: "ALREADY_EXISTS".into(),
                    message: format!(
                        "GKE reported node pool {id} as existing but it is gone now; retry the apply"
                    ),
                });
            };
            // Compared as created (initialNodeCount, not the instance groups' size, which may
            // still be ramping up while the pool provisions).
            if spec_of(&spec.location, &np) != canonical_spec(spec) {
                return Err(CloudError::Api {
                    status: 409,
                    code: "ALREADY_EXISTS".into(),
                    message: format!(
                        "node pool {id} already exists with a different configuration; import it with `terraform import <address> {id}` or choose another name"
                    ),
                });
            }
            use m::node_pool::Status as S;
            match np.status {
                S::Provisioning | S::Reconciling => Ok(Check::Pending {
                    retry_after: None,
                    waiting_for: None,
                }),
                S::Error | S::Stopping => Err(CloudError::OperationFailed {
                    code: status_name(&np),
                    message: format!(
                        "node pool {id} (left by an earlier attempt of this create) is {}: {}",
                        status_name(&np),
                        pool_message(&np)
                    ),
                }),
                _ => self.pool_of(&spec.location, &np).await.map(Check::Done),
            }
        })
        .await
    }

    /// Sends one mutation and waits for its operation.
    pub(super) async fn mutate<Fut>(
        &self,
        loc: &Location,
        what: &str,
        ctx: &OpCtx,
        f: impl FnMut() -> Fut,
    ) -> Result<(), CloudError>
    where
        Fut: Future<Output = gcc::Result<Operation>>,
    {
        let _turn = self.queues.turn(&cluster_path(loc)?, what, ctx).await?;
        let op = self.call(ctx, what, true, f).await?;
        tracing::debug!(call = what, operation = %op.name, "GKE operation started");
        self.wait(loc, op, ctx).await
    }
}
