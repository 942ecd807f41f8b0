//! EKS managed node groups through the official aws-sdk-eks: a [`PoolSpec`] becomes a
//! CreateNodegroup request, DescribeNodegroup is read back into the same neutral terms, and in-place
//! changes (labels, taints, scaling) go through one UpdateNodegroupConfig whose update is polled
//! with DescribeUpdate.
//!
//! Retries are ours, not the SDK's (its retry is disabled): one loop per call that retries
//! throttling, 5xx and broken connections with `Backoff`, honours Retry-After, gives up after
//! [`MAX_ATTEMPTS`], and never outlives the operation's deadline or a stop. That keeps every wait
//! under the `timeouts` block and StopProvider, which the SDK's own retry loop knows nothing about.
//!
//! Round-trip rule: [`EksClient::get`] maps a node group back to the spec it was created from, so
//! drift is a plain comparison. What EKS fills in on its own maps back to the spec's defaults:
//! diskSize 20 (EKS's Linux default) reads as `None`, `eks.amazonaws.com/*` labels, remoteAccess,
//! releaseVersion, version, tags and desiredSize of an autoscaled group are ignored. Values EKS
//! cannot express are folded by [`canonical_spec`]; a caller compares `get`'s spec against
//! `canonical_spec(desired)`.
//!
//! States: a group in DELETING reads as gone (a deletion cannot be stopped, and a create of the
//! same name waits for it to finish); DELETE_FAILED and CREATE_FAILED read as existing so the
//! resource keeps them in state; DEGRADED keeps a create waiting (it can recover) until the
//! deadline, whose Timeout then quotes the last status and health issues.
//!
//! Idempotency: a create's clientRequestToken is a hash of the spec ([`request_token`]), so a
//! retried create is the same request. Where the token does not help (moto ignores it; another
//! client made the group) a ResourceInUseException is resolved by comparing the existing group
//! with the spec: equal is adopted, different is an error that names the import ID.
//!
//! Here, the client's `NodePools` methods; `client` holds its state, `config` the settings and
//! builds the SDK clients, `calls` the retried call and how the SDK's errors map, `operations` the
//! describes and waits, `group` a node group's create and update, `list` a cluster's groups listed
//! and described, `mapping` node groups and [`PoolSpec`]s.

mod calls;
mod client;
mod config;
mod ec2;
mod group;
mod launch;
mod list;
mod mapping;
mod operations;
mod target;
mod template;
#[cfg(test)]
mod tests;
mod window;

use std::sync::{Mutex, PoisonError};

use async_trait::async_trait;

use crate::cloud::across::AcrossClusters;
use crate::cloud::error::CloudError;
use crate::cloud::pool::{Listening, Location, NodePools, Pool, PoolSpec};
use crate::operation::{Attempt, Backoff, Failure, OpCtx, Start, retry};
use mapping::{eks_location, status_of, to_pool};

pub use client::{EksClient, MAX_ATTEMPTS};
use client::{gone, has_code};
pub use config::EksConfig;
pub use mapping::{canonical_scaling, canonical_spec, request_token};
pub use target::{DEFAULT_EKS_AMI, Eks, RETIRED_EKS_AMI, SANDBOX_REGION};

#[async_trait]
impl NodePools for EksClient {
    /// None when the node group (or its cluster) does not exist, and also while it is DELETING:
    /// a deletion cannot be undone, so for the user the group is already gone, and a create of the
    /// same name waits for the deletion to finish instead of failing. DELETE_FAILED is returned.
    async fn get(
        &self,
        location: &Location,
        name: &str,
        ctx: &OpCtx,
    ) -> Result<Option<Pool>, CloudError> {
        let (region, cluster) = eks_location(location)?;
        let client = self.client(region)?;
        // The group's Auto Scaling group found by its EKS tags beside the describe, not by the
        // name the describe gives after it: one round trip instead of two.
        let (described, tagged) = tokio::join!(
            self.describe(&client, cluster, name, ctx),
            self.nodegroup_templates(region, cluster, name, ctx),
        );
        let Some(ng) = described?.filter(|ng| status_of(ng) != "DELETING") else {
            return Ok(None);
        };
        let mut pool = to_pool(region, cluster, &ng);
        let (template, settings) = tokio::join!(
            self.template_from(region, &ng, tagged.ok(), ctx),
            self.read_template(region, &ng, &mut pool, ctx),
        );
        settings?;
        pool.spec.node_template = template?;
        Ok(Some(pool))
    }

    async fn create(&self, spec: &PoolSpec, ctx: &OpCtx) -> Result<Pool, CloudError> {
        let (region, cluster) = eks_location(&spec.location)?;
        let template = self.template_for_create(region, cluster, spec, ctx).await?;
        let mut pool = match self.create_group(spec, template.as_ref(), ctx).await {
            Ok(pool) => pool,
            Err(e) => return Err(self.unmake_template(spec, template, e, ctx).await),
        };
        if template.is_some() {
            // What the template holds now: the create wrote it, or found it holding it.
            pool.spec.eks_mut().bottlerocket_settings = spec.eks().bottlerocket_settings.clone();
            pool.spec.disk_size_gb = canonical_spec(spec).disk_size_gb;
        }
        if spec.node_template.is_empty() {
            return Ok(pool);
        }
        // The group exists now, and its state entry must not be lost to a failed tag call: the
        // pool is returned without the template it could not get (the resource warns, and the
        // next refresh reads the Auto Scaling group's tags as they are, so the next plan shows the
        // template as a change that the next apply makes or names the cause of).
        let client = self.client(region)?;
        let written = match self.describe(&client, cluster, &spec.name, ctx).await? {
            Some(ng) => {
                self.set_template(region, &ng, &spec.node_template, ctx)
                    .await
            }
            None => Err(gone(cluster, &spec.name)),
        };
        match written {
            Ok(t) => pool.spec.node_template = t,
            Err(e) => tracing::warn!(
                cluster,
                nodegroup = %spec.name,
                error = %e,
                "eks: the node group is created, its Auto Scaling group's node template is not"
            ),
        }
        Ok(pool)
    }

    /// The node group's configuration first, then its Auto Scaling group's template.
    async fn update(
        &self,
        current: &Pool,
        spec: &PoolSpec,
        ctx: &OpCtx,
    ) -> Result<Pool, CloudError> {
        let (region, cluster) = eks_location(&spec.location)?;
        let (mut pool, mut ng) = self.update_group(current, spec, ctx).await?;
        if let Some(rolled) = self.roll_template(region, cluster, &ng, spec, ctx).await? {
            pool = to_pool(region, cluster, &rolled);
            ng = rolled;
        }
        self.read_template(region, &ng, &mut pool, ctx).await?;
        // Against the tags the group holds now, not `current` (which may be the last refresh's,
        // see `update_reads_the_pool`): one read, and a write only of what differs.
        pool.spec.node_template = self
            .set_template(region, &ng, &spec.node_template, ctx)
            .await?;
        Ok(pool)
    }

    fn update_reads_the_pool(&self) -> bool {
        true
    }

    async fn list(&self, cluster: &Location, ctx: &OpCtx) -> Result<Vec<Pool>, CloudError> {
        /// A list of the pools, all of them, in no order of interest.
        struct Collect(Mutex<Vec<Pool>>);
        impl Listening for Collect {
            fn found(&self, pool: Pool) {
                self.0
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .push(pool);
            }
            fn wanted(&self) -> Vec<String> {
                Vec::new()
            }
        }
        let pools = Collect(Mutex::new(Vec::new()));
        self.list_each(cluster, ctx, &pools).await?;
        let mut pools = pools.0.into_inner().unwrap_or_else(PoisonError::into_inner);
        pools.sort_by(|a, b| a.spec.name.cmp(&b.spec.name));
        Ok(pools)
    }

    /// The list, each pool handed on as soon as its node group is described (and its template
    /// known), not when the last is; the groups reads wait for are described first.
    async fn list_in_refresh(
        &self,
        cluster: &Location,
        _across: &AcrossClusters,
        ctx: &OpCtx,
        to: &dyn Listening,
    ) -> Result<(), CloudError> {
        self.list_each(cluster, ctx, to).await
    }

    async fn delete(&self, location: &Location, name: &str, ctx: &OpCtx) -> Result<(), CloudError> {
        let (region, cluster) = eks_location(location)?;
        let client = self.client(region)?;
        let req = client
            .delete_nodegroup()
            .cluster_name(cluster)
            .nodegroup_name(name);
        tracing::debug!(cluster, nodegroup = name, "eks: deleting node group");
        let what = format!("DeleteNodegroup of {cluster}:{name}");
        let attempt = || async {
            match self.call(ctx, &what, || req.clone().send()).await {
                Ok(out) => {
                    // The group names its template in the answer: no read more for it.
                    let template = out.nodegroup().and_then(launch::used_by);
                    self.wait_gone(
                        &client,
                        cluster,
                        name,
                        ctx,
                        Some(("DeleteNodegroup", Start::Now)),
                    )
                    .await?;
                    Ok(Attempt::Done(template))
                }
                Err(e) if has_code(&e, "ResourceNotFoundException") => Ok(Attempt::Done(None)),
                // Already DELETING (a retried request), or CREATING/UPDATING: wait, then decide.
                Err(e) if has_code(&e, "ResourceInUseException") => {
                    if self
                        .wait_settled(&client, cluster, name, ctx)
                        .await?
                        .is_none()
                    {
                        return Ok(Attempt::Done(None));
                    }
                    // A settled group that keeps refusing deletion: its refusal says why.
                    Ok(Attempt::Failed(Failure {
                        last: Err(e),
                        retry_after: None,
                        waiting_for: "DeleteNodegroup to be accepted".into(),
                    }))
                }
                Err(e) => Err(e),
            }
        };
        let backoff = Backoff::polling(self.poll_first, self.poll_cap);
        let template = retry(ctx, backoff, 3, attempt, |_, _, _| {}).await?;
        self.delete_made_template(region, template, ctx).await
    }
}
