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
//! Here, the client and its `NodePools` methods; `config` holds the settings and builds the SDK
//! clients, `calls` the retried call and how the SDK's errors map, `operations` the describes and
//! waits, `mapping` node groups and [`PoolSpec`]s.

mod calls;
mod client;
mod config;
mod ec2;
mod launch;
mod mapping;
mod operations;
mod target;
mod template;
#[cfg(test)]
mod tests;
mod window;

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

use async_trait::async_trait;

use crate::cloud::across::AcrossClusters;
use crate::cloud::error::CloudError;
use crate::cloud::pool::{Listening, Location, NodePools, Pool, PoolSpec, TargetFields};
use crate::operation::OpCtx;
use crate::operation::{Backoff, Start};
use mapping::{ConfigChange, eks_location, operation_failed, status_of, to_pool, to_spec};

use client::has_code;
pub use client::{EksClient, MAX_ATTEMPTS};
pub use config::EksConfig;
pub use mapping::{canonical_scaling, canonical_spec, request_token};
pub use target::{DEFAULT_EKS_AMI, Eks, RETIRED_EKS_AMI, SANDBOX_REGION};
use window::Window;

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
        let mut backoff = Backoff::polling(self.poll_first, self.poll_cap);
        let mut last = None;
        for _ in 0..3 {
            match self
                .call(ctx, &format!("DeleteNodegroup of {cluster}:{name}"), || {
                    req.clone().send()
                })
                .await
            {
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
                    return self.delete_made_template(region, template, ctx).await;
                }
                Err(e) if has_code(&e, "ResourceNotFoundException") => return Ok(()),
                // Already DELETING (a retried request), or CREATING/UPDATING: wait, then decide.
                Err(e) if has_code(&e, "ResourceInUseException") => {
                    if self
                        .wait_settled(&client, cluster, name, ctx)
                        .await?
                        .is_none()
                    {
                        return Ok(());
                    }
                    last = Some(e);
                    ctx.sleep(backoff.next_delay(None), "DeleteNodegroup to be accepted")
                        .await?;
                }
                Err(e) => return Err(e),
            }
        }
        // A settled group that keeps refusing deletion: say why rather than wait for nothing.
        Err(last.unwrap_or_else(|| gone(cluster, name)))
    }
}

impl EksClient {
    /// Every node group of the cluster as a pool, handed to `to` once it is described and its
    /// node template known. The templates of the cluster's groups come beside the describes,
    /// from one read that needs no group name ([`Self::cluster_templates`]); a group that read
    /// missed (or every group, if it failed) is asked after by name, in as few calls as the API
    /// allows, once the describes are done.
    async fn list_each(
        &self,
        cluster: &Location,
        ctx: &OpCtx,
        to: &dyn Listening,
    ) -> Result<(), CloudError> {
        let (region, name) = eks_location(cluster)?;
        let client = self.client(region)?;
        let pool_of =
            |ng: &aws_sdk_eks::types::Nodegroup,
             templates: &mut HashMap<String, std::collections::BTreeMap<_, _>>| {
                let mut pool = to_pool(region, name, ng);
                pool.spec.node_template = template::asg_names(ng)
                    .iter()
                    .find_map(|n| templates.remove(n))
                    .unwrap_or_default();
                pool
            };
        // A Bottlerocket group's launch template is read before its pool is handed on; one that
        // cannot be read leaves the pool out, to be read on its own.
        let hand_on = |mut pool: Pool, ng: &aws_sdk_eks::types::Nodegroup| {
            let ng = ng.clone();
            async move {
                match self.read_template(region, &ng, &mut pool, ctx).await {
                    Ok(()) => to.found(pool),
                    Err(e) => tracing::debug!(nodegroup = %pool.spec.name, error = %e,
                        "eks: a node group's launch template was not read; reading the group on its own"),
                }
            }
        };
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        // `tx` goes with the describes: when they end, so does the loop that takes their groups.
        let describes = async move {
            let mut send = |ng| {
                let _ = tx.send(ng);
            };
            self.describe_each(&client, name, ctx, to, &mut send).await
        };
        let templating = async {
            let mut templates = self
                .cluster_templates(region, name, ctx)
                .await
                .unwrap_or_else(|e| {
                    tracing::debug!(error = %e, "the cluster's Auto Scaling groups were not \
                        listed; reading each node group's by name");
                    HashMap::new()
                });
            let mut missed = Vec::new();
            while let Some(ng) = rx.recv().await {
                if status_of(&ng) == "DELETING" {
                    continue;
                }
                let groups = template::asg_names(&ng);
                if groups.is_empty() || groups.iter().any(|n| templates.contains_key(n)) {
                    hand_on(pool_of(&ng, &mut templates), &ng).await;
                } else {
                    missed.push(ng);
                }
            }
            (templates, missed)
        };
        let (described, (mut templates, missed)) = tokio::join!(describes, templating);
        described?;
        if !missed.is_empty() {
            let names: Vec<String> = missed.iter().flat_map(template::asg_names).collect();
            templates.extend(self.templates(region, &names, ctx).await?);
            for ng in &missed {
                hand_on(pool_of(ng, &mut templates), ng).await;
            }
        }
        Ok(())
    }

    /// Every node group of the cluster, described, each handed to `on`: the describes of a page
    /// of ListNodegroups start as soon as the page is in, beside the next page, and as many are
    /// in flight as the list's [`Window`] allows. The groups reads wait for (`to.wanted()`) are
    /// described at once, whatever the window and before their page is in: terraform holds one
    /// of its `-parallelism` slots for each of those reads, so they are bounded by it, and each
    /// would be a describe of its own without the list. The first failure ends the list (a
    /// shared read then falls back to each pool's own read). Groups gone between the list and
    /// their describe are left out.
    async fn describe_each(
        &self,
        client: &aws_sdk_eks::Client,
        cluster: &str,
        ctx: &OpCtx,
        to: &dyn Listening,
        on: &mut (dyn FnMut(aws_sdk_eks::types::Nodegroup) + Send),
    ) -> Result<(), CloudError> {
        use futures_util::stream::{FuturesUnordered, StreamExt};
        use std::collections::{HashSet, VecDeque};
        use std::sync::atomic::Ordering;

        enum Event<P, D> {
            Page(P),
            Described(D),
            Asked,
        }
        let throttles = || self.throttles.load(Ordering::Relaxed);
        let page_of = |token, n| Box::pin(self.list_page(client, cluster, token, n, ctx));
        let describe = |ng: String| async move {
            let described = self.describe(client, cluster, &ng, ctx).await;
            (ng, described)
        };
        let asked = || async {
            match to.asked() {
                Some(asked) => asked.notified().await,
                None => std::future::pending().await,
            }
        };
        let mut pages = 1;
        let mut page = Some(page_of(None, 0));
        let mut queued = VecDeque::new();
        let mut in_flight = FuturesUnordered::new();
        let mut window = Window::new(throttles());
        // Every name given to a describe (or queued for one): a group is described once.
        let mut named = HashSet::new();
        loop {
            for ng in to.wanted() {
                // Not named yet, or queued behind others: described now.
                let queued_at = queued.iter().position(|q| *q == ng);
                if let Some(at) = queued_at {
                    queued.remove(at);
                }
                if named.insert(ng.clone()) || queued_at.is_some() {
                    in_flight.push(describe(ng));
                }
            }
            while in_flight.len() < window.size()
                && let Some(ng) = queued.pop_front()
            {
                in_flight.push(describe(ng));
            }
            let busy = page.is_some() || !in_flight.is_empty();
            let event = tokio::select! {
                listed = async { page.as_mut().expect("only while a page is due").await },
                    if page.is_some() => Event::Page(listed),
                Some(described) = in_flight.next(), if !in_flight.is_empty() => {
                    Event::Described(described)
                }
                () = asked(), if busy => Event::Asked,
                else => break,
            };
            match event {
                Event::Page(listed) => {
                    let (names, next) = listed?;
                    queued.extend(names.into_iter().filter(|ng| named.insert(ng.clone())));
                    page = next.map(|token| page_of(Some(token), pages));
                    pages += 1;
                }
                Event::Described((name, described)) => {
                    window.answered(throttles());
                    match described? {
                        Some(ng) => on(ng),
                        None => to.gone(&name),
                    }
                }
                Event::Asked => {}
            }
        }
        Ok(())
    }
}

impl EksClient {
    /// Creates the node group and waits until it is ACTIVE (its template aside).
    async fn create_group(
        &self,
        spec: &PoolSpec,
        template: Option<&ec2::TemplateRef>,
        ctx: &OpCtx,
    ) -> Result<Pool, CloudError> {
        let (region, cluster) = eks_location(&spec.location)?;
        let TargetFields::Eks(_) = &spec.target else {
            return Err(CloudError::Api {
                status: 0,
                code: "InvalidSpec".into(),
                message: "an EKS node group needs node_role_arn, subnet_ids and ami_type".into(),
            });
        };
        let client = self.client(region)?;
        tracing::debug!(cluster, nodegroup = %spec.name, "eks: creating node group");
        // A create can meet a group of that name: ours from an earlier attempt (adopted), one that
        // is still being deleted (waited for), or someone else's (an error). Bounded: a group that
        // keeps appearing and vanishing is not worth chasing.
        let mut token = request_token(spec);
        for attempt in 0..3 {
            let err = match self
                .send_create(&client, cluster, spec, template, &token, ctx)
                .await
            {
                // Created at once (moto does so): nothing to wait for.
                Ok(Some(ng)) if status_of(&ng) == "ACTIVE" => {
                    return Ok(to_pool(region, cluster, &ng));
                }
                // A group just created is CREATING: no look before the first delay. Only a wait
                // right after our own CreateNodegroup is timed: a group an earlier attempt made
                // (adopted below) has been creating for an unknown time.
                Ok(_) => match self
                    .wait_active(
                        &client,
                        region,
                        cluster,
                        &spec.name,
                        ctx,
                        Some(("CreateNodegroup", Start::Sleep(None))),
                    )
                    .await
                {
                    // Accepted, yet gone at once: EKS replayed an earlier create with this token
                    // whose group has since been deleted (destroy and re-create of the same spec
                    // inside the idempotency window). A fresh token makes it a new request.
                    Err(e) if attempt == 0 && is_vanished(&e) => {
                        let now = std::time::SystemTime::now()
                            .duration_since(std::time::UNIX_EPOCH)
                            .map(|d| d.as_secs())
                            .unwrap_or(0);
                        token = format!("{}-{now:x}", request_token(spec));
                        continue;
                    }
                    r => return r,
                },
                Err(e) if has_code(&e, "ResourceInUseException") => e,
                Err(e) => return Err(e),
            };
            let existing = self.describe(&client, cluster, &spec.name, ctx).await?;
            let Some(ng) = existing else { continue };
            if status_of(&ng) == "DELETING" {
                self.wait_gone(&client, cluster, &spec.name, ctx, None)
                    .await?;
                continue;
            }
            // The node template lives on the Auto Scaling group, the Bottlerocket settings and
            // the data volume in the launch template: not in the node group.
            let group_of = |mut s: PoolSpec| {
                s.node_template.clear();
                if s.eks_mut().bottlerocket_settings.take().is_some() {
                    s.disk_size_gb = None;
                }
                s
            };
            if to_spec(region, cluster, &ng) == group_of(canonical_spec(spec)) {
                tracing::debug!(cluster, nodegroup = %spec.name, "eks: adopting the node group an earlier attempt created");
                return self
                    .wait_active(&client, region, cluster, &spec.name, ctx, None)
                    .await;
            }
            let CloudError::Api {
                status,
                code,
                message,
            } = err
            else {
                return Err(err);
            };
            return Err(CloudError::Api {
                status,
                code,
                message: format!(
                    "{message}. A node group named {name} already exists in cluster {cluster} with a different configuration: import it with `terraform import <address> {cluster}:{name}` or choose another name.",
                    name = spec.name
                ),
            });
        }
        Err(CloudError::Api {
            status: 409,
            code: "ResourceInUseException".into(),
            message: format!(
                "node group {cluster}:{} kept conflicting with a node group of the same name",
                spec.name
            ),
        })
    }

    /// Brings the node group's configuration to `spec` (its template aside).
    async fn update_group(
        &self,
        current: &Pool,
        spec: &PoolSpec,
        ctx: &OpCtx,
    ) -> Result<(Pool, aws_sdk_eks::types::Nodegroup), CloudError> {
        let (region, cluster) = eks_location(&spec.location)?;
        let client = self.client(region)?;
        let name = &current.spec.name;
        // The diff is taken against what EKS holds now, not `current`: that also repairs labels or
        // taints changed out of band. Each submission carries its own token, so a retried request
        // is the same update and a second submission is a new one.
        let mut backoff = Backoff::polling(self.poll_first, self.poll_cap);
        let mut last = None;
        for _ in 0..3 {
            let ng = self
                .wait_settled(&client, cluster, name, ctx)
                .await?
                .ok_or_else(|| gone(cluster, name))?;
            let status = status_of(&ng);
            if matches!(status.as_str(), "CREATE_FAILED" | "DELETE_FAILED") {
                // EKS refuses config updates in these states; only a replacement helps.
                return Err(operation_failed(&ng, &status));
            }
            let Some(change) = ConfigChange::between(&ng, spec) else {
                return Ok((to_pool(region, cluster, &ng), ng));
            };
            tracing::debug!(cluster, nodegroup = %name, "eks: updating node group config");
            let mut req = client
                .update_nodegroup_config()
                .cluster_name(cluster)
                .nodegroup_name(name)
                .client_request_token(format!("fracgpu-{:016x}", fastrand::u64(..)));
            if let Some(l) = change.labels {
                req = req.labels(l);
            }
            if let Some(t) = change.taints {
                req = req.taints(t);
            }
            if let Some(s) = change.scaling {
                req = req.scaling_config(s);
            }
            match self
                .call(
                    ctx,
                    &format!("UpdateNodegroupConfig of {cluster}:{name}"),
                    || req.clone().send(),
                )
                .await
            {
                Ok(out) => {
                    let update = out.update.ok_or_else(|| {
                        CloudError::BadResponse(
                            "UpdateNodegroupConfig answered without an update".into(),
                        )
                    })?;
                    self.wait_update(&client, cluster, name, update, ctx)
                        .await?;
                }
                // Busy with another change (or our own earlier attempt): wait and diff again.
                Err(e) if has_code(&e, "ResourceInUseException") => {
                    last = Some(e);
                    ctx.sleep(
                        backoff.next_delay(None),
                        "UpdateNodegroupConfig to be accepted",
                    )
                    .await?;
                }
                Err(e) if has_code(&e, "ResourceNotFoundException") => {
                    return Err(gone(cluster, name));
                }
                Err(e) => return Err(e),
            }
        }
        let ng = self
            .wait_settled(&client, cluster, name, ctx)
            .await?
            .ok_or_else(|| gone(cluster, name))?;
        if ConfigChange::between(&ng, spec).is_none() {
            return Ok((to_pool(region, cluster, &ng), ng));
        }
        if let Some(e) = last {
            return Err(e);
        }
        Err(CloudError::OperationFailed {
            code: "UpdateDidNotConverge".into(),
            message: format!(
                "node group {cluster}:{name} still differs from the configuration after three updates"
            ),
        })
    }
}

impl EksClient {
    /// A create that failed before its node group existed leaves no template behind: the error
    /// is returned as it was, with what the clean-up could not do added to the log.
    async fn unmake_template(
        &self,
        spec: &PoolSpec,
        template: Option<ec2::TemplateRef>,
        error: CloudError,
        ctx: &OpCtx,
    ) -> CloudError {
        let Some(t) = template else { return error };
        let Ok((region, cluster)) = eks_location(&spec.location) else {
            return error;
        };
        let Ok(client) = self.client(region) else {
            return error;
        };
        // A group that uses the template (still creating past the deadline, say) keeps it: the
        // state keeps the group, and its delete deletes both. No group, or someone else's group
        // of that name, leaves the template to no one: it goes.
        match self.describe(&client, cluster, &spec.name, ctx).await {
            Ok(Some(ng)) if launch::used_by(&ng).is_some_and(|u| u.name == t.name) => {}
            Ok(_) => {
                if let Err(e) = self.delete_made_template(region, Some(t), ctx).await {
                    tracing::warn!(cluster, nodegroup = %spec.name, error = %e,
                        "eks: the launch template of a node group that was not created is left behind");
                }
            }
            Err(e) => tracing::warn!(cluster, nodegroup = %spec.name, error = %e,
                "eks: could not tell whether the node group exists; its launch template is kept"),
        }
        error
    }
}

fn gone(cluster: &str, name: &str) -> CloudError {
    CloudError::Api {
        status: 404,
        code: "ResourceNotFoundException".into(),
        message: format!("node group {cluster}:{name} no longer exists"),
    }
}

fn is_vanished(e: &CloudError) -> bool {
    matches!(e, CloudError::OperationFailed { code, .. } if code == "ResourceNotFoundException")
}
