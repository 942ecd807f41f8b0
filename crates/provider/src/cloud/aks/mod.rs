//! AKS node pools through Azure Resource Manager: `Microsoft.ContainerService/managedClusters/{c}/agentPools`
//! at api-version 2025-10-01 (the version azurerm pins). No maintained management crate exists, so this is a
//! small reqwest client with serde models of just the fields the provider uses; tokens come from one
//! `azure_identity` credential, chosen from the ARM_* settings in the order azurerm documents (client secret,
//! OIDC / AKS workload identity, managed identity, Azure CLI).
//!
//! Every request is retried on throttling, server errors and dropped connections, bounded by the operation's
//! deadline and terraform's stop signal. Mutations are ARM long-running operations: the client follows
//! `Azure-AsyncOperation` (else `Location`, else the pool's own `provisioningState`).
//!
//! Drift detection compares the [`PoolSpec`] read back with the one the pool was created from, so values AKS
//! fills in on its own must read back as "not set". `get` has no spec to compare against, so a create records
//! in the pool's tag `fracgpu-cloud-defaults` which optional fields (osDiskSizeGB, osSKU) it left to AKS. For a
//! pool without that tag (made elsewhere, then imported), AKS's documented defaults (128 GB, Ubuntu) read back
//! as "not set".
//!
//! Sandbox mode points ARM at a local `fracgpu-sandbox`. azure_identity refuses an authority host that is
//! not https, so the real `ClientSecretCredential` is given a made-up https authority host and an HTTP
//! transport that delivers requests for that host to the sandbox over plain http: the credential's own form
//! body, response parsing and token cache run against the emulator's token endpoint.
//!
//! Here, the client and its `NodePools` methods; `config` resolves the settings, `auth` picks the
//! credential, `http` sends (and retries) requests, `operations` follows long-running operations,
//! `mapping` turns agent pool documents into [`PoolSpec`]s and back.

mod auth;
mod client;
mod config;
mod http;
mod mapping;
mod operations;
mod target;
mod template;
#[cfg(test)]
mod tests;

use std::time::Duration;

use async_trait::async_trait;

use crate::cloud::across::AcrossClusters;
use crate::cloud::error::CloudError;
use crate::cloud::pool::{Listening, Location, NodePools, Pool, PoolSpec};
use crate::operation::OpCtx;
use crate::operation::{Attempt, retry};
use mapping::{
    IN_PLACE, cluster_name, create_body, profile_to_pool, spec_diff, terminal, to_pool, update_body,
};
use operations::{PutTarget, log_put_retry};

pub use client::AksClient;
pub use config::{AksConfig, AzureSettings};
pub use mapping::os_sku_changes_in_place;
pub use target::{Aks, SANDBOX_SUBSCRIPTION};

/// Pages of one agent pool list at most (AKS holds at most 100 pools a cluster).
const MAX_LIST_PAGES: usize = 100;

#[async_trait]
impl NodePools for AksClient {
    fn lists_for_a_read(&self) -> bool {
        true
    }

    /// Fetches the access token into the credential's cache (whose lock makes a call that asks
    /// meanwhile wait for this fetch rather than start another). Not with the Azure CLI
    /// credential, which runs `az` in a process of its own: a cost for plans without AKS pools
    /// whose machine merely has `az` logged in.
    async fn warm_up(&self, ctx: &OpCtx) {
        if self.credential_kind == auth::CLI_CREDENTIAL {
            return;
        }
        if let Err(e) = self.token(ctx).await {
            tracing::debug!(error = %e, "no Azure access token ahead of the first ARM call");
        }
    }

    async fn list(&self, cluster: &Location, ctx: &OpCtx) -> Result<Vec<Pool>, CloudError> {
        let mut url = self.pools_url(cluster)?;
        let mut pools = Vec::new();
        // A page that keeps naming a next one is a broken list, not a reason to loop forever.
        for _ in 0..MAX_LIST_PAGES {
            let r = self.send(reqwest::Method::GET, &url, None, ctx).await?;
            if r.status != 200 {
                return Err(r.api_error());
            }
            let page: serde_json::Value = r.json()?;
            for doc in page["value"].as_array().into_iter().flatten() {
                let name = doc["name"].as_str().ok_or_else(|| {
                    CloudError::BadResponse("an agent pool in the list has no name".into())
                })?;
                let pool = to_pool(cluster, name, doc)?;
                if !pool.status.eq_ignore_ascii_case("Deleting") {
                    pools.push(pool);
                }
            }
            match page["nextLink"].as_str().filter(|l| !l.is_empty()) {
                Some(next) => url = self.next_link(next)?,
                None => {
                    pools.sort_by(|a, b| a.spec.name.cmp(&b.spec.name));
                    return Ok(pools);
                }
            }
        }
        Err(CloudError::BadResponse(
            format!("the agent pool list did not end after {MAX_LIST_PAGES} pages").into(),
        ))
    }

    /// In a refresh, the cluster's own document (ARM's managed cluster GET): its
    /// `agentPoolProfiles` hold every agent pool, each the agent pool's properties with its name
    /// (ManagedClusterAgentPoolProfile in the AKS REST specification, beside AgentPool, whose
    /// `properties` are the same ManagedClusterAgentPoolProfileProperties), in one answer
    /// whatever the number of pools, where the agent pool list comes in pages (`nextLink`) of a
    /// size ARM does not publish: one round trip for a cluster of 100 pools.
    async fn list_in_refresh(
        &self,
        cluster: &Location,
        _across: &AcrossClusters,
        ctx: &OpCtx,
        to: &dyn Listening,
    ) -> Result<(), CloudError> {
        let r = self
            .send(reqwest::Method::GET, &self.cluster_url(cluster)?, None, ctx)
            .await?;
        if r.status != 200 {
            return Err(r.api_error());
        }
        let doc: serde_json::Value = r.json()?;
        let profiles = doc["properties"]["agentPoolProfiles"]
            .as_array()
            .ok_or_else(|| {
                CloudError::BadResponse("the managed cluster has no agentPoolProfiles".into())
            })?;
        for profile in profiles {
            let pool = profile_to_pool(cluster, doc["id"].as_str(), profile)?;
            if !pool.status.eq_ignore_ascii_case("Deleting") {
                to.found(pool);
            }
        }
        Ok(())
    }

    async fn get(
        &self,
        location: &Location,
        name: &str,
        ctx: &OpCtx,
    ) -> Result<Option<Pool>, CloudError> {
        self.get_with(location, name, ctx).await
    }

    async fn create(&self, spec: &PoolSpec, ctx: &OpCtx) -> Result<Pool, CloudError> {
        let location = &spec.location;
        let name = spec.name.as_str();
        let url = self.pool_url(location, name)?;
        let body = create_body(spec);
        let put = PutTarget {
            url: &url,
            location,
            name,
        };
        let (put, body) = (&put, &body);
        let attempt = move || async move {
            // A previous attempt (this call's or an earlier apply's) may have created the pool already.
            if let Some(doc) = self.get_raw(location, name, ctx).await? {
                let pool = to_pool(location, name, &doc)?;
                let state = pool.status.clone();
                if state.eq_ignore_ascii_case("Deleting") {
                    self.wait_gone(location, name, ctx, None).await?;
                    return Ok(Attempt::Again);
                }
                let diff = spec_diff(&pool.spec, spec);
                if !diff.is_empty() {
                    return Err(CloudError::Api {
                        status: 409,
                        code: "AgentPoolAlreadyExists".into(),
                        message: format!(
                            "agent pool '{name}' already exists in cluster '{}' with other settings ({}). Import it with `terraform import <address> {}` to manage it, or choose another name.",
                            cluster_name(location),
                            diff.join(", "),
                            pool.id
                        ),
                    });
                }
                match terminal(&state) {
                    Some(true) => return Ok(Attempt::Done(pool)),
                    None => {
                        return self
                            .wait_pool(location, name, ctx, None)
                            .await
                            .map(Attempt::Done);
                    }
                    // Failed or Canceled: a PUT of the same pool makes ARM retry the provisioning.
                    Some(false) => {}
                }
            }
            self.put_attempt(put, body, ctx).await
        };
        let (backoff, max) = (self.timing.retries(), self.timing.max_attempts);
        retry(ctx, backoff, max, attempt, log_put_retry).await
    }

    async fn update(
        &self,
        current: &Pool,
        spec: &PoolSpec,
        ctx: &OpCtx,
    ) -> Result<Pool, CloudError> {
        let location = &spec.location;
        let name = spec.name.as_str();
        // What cannot change in place: refused before any request against `current` (which may
        // be the pool as the last refresh saw it, see `update_reads_the_pool`), and again against
        // the pool as ARM holds it when each attempt below reads it.
        let in_place = |now: &Pool| -> Result<(), CloudError> {
            let os_sku_in_place = os_sku_changes_in_place(
                now.spec.aks().os_sku.as_deref(),
                spec.aks().os_sku.as_deref(),
            );
            let replace: Vec<&str> = spec_diff(&now.spec, spec)
                .into_iter()
                .filter(|f| !IN_PLACE.contains(f) || (*f == "os_sku" && !os_sku_in_place))
                .collect();
            if replace.is_empty() {
                return Ok(());
            }
            Err(CloudError::Api {
                status: 400,
                code: "PropertyChangeNotAllowed".into(),
                message: format!(
                    "AKS cannot change {} of agent pool '{name}' in place: the pool must be replaced",
                    replace.join(", ")
                ),
            })
        };
        let in_place = &in_place;
        in_place(current)?;
        let url = self.pool_url(location, name)?;
        let put = PutTarget {
            url: &url,
            location,
            name,
        };
        let put = &put;
        let attempt = move || async move {
            let Some(doc) = self.get_raw(location, name, ctx).await? else {
                return Err(CloudError::Api {
                    status: 404,
                    code: "NotFound".into(),
                    message: format!("agent pool '{name}' no longer exists"),
                });
            };
            let pool = to_pool(location, name, &doc)?;
            if pool.status.eq_ignore_ascii_case("Deleting") {
                return Err(CloudError::Api {
                    status: 409,
                    code: "OperationNotAllowed".into(),
                    message: format!("agent pool '{name}' is being deleted"),
                });
            }
            in_place(&pool)?;
            match terminal(&pool.status) {
                Some(true) if pool.spec == *spec => return Ok(Attempt::Done(pool)),
                // Another operation (or our own PUT whose answer was lost) is running: let it finish.
                None => {
                    let done = self.wait_pool(location, name, ctx, None).await?;
                    if done.spec == *spec {
                        return Ok(Attempt::Done(done));
                    }
                    return Ok(Attempt::Again);
                }
                _ => {}
            }
            let body = update_body(&doc, spec);
            self.put_attempt(put, &body, ctx).await
        };
        let (backoff, max) = (self.timing.retries(), self.timing.max_attempts);
        retry(ctx, backoff, max, attempt, log_put_retry).await
    }

    fn update_reads_the_pool(&self) -> bool {
        true
    }

    async fn delete(&self, location: &Location, name: &str, ctx: &OpCtx) -> Result<(), CloudError> {
        let url = self.pool_url(location, name)?;
        let r = self.send(reqwest::Method::DELETE, &url, None, ctx).await?;
        match r.status {
            204 | 404 => {
                // Only a missing pool is "already gone"; a missing cluster or subscription is an error.
                if r.status == 404
                    && let CloudError::Api { code, .. } = r.api_error()
                    && !matches!(code.as_str(), "NotFound" | "ResourceNotFound")
                {
                    return Err(r.api_error());
                }
                Ok(())
            }
            200 | 202 => {
                let what = format!("agent pool '{name}' to be deleted");
                self.wait_operation(&r, &what, ctx).await?;
                self.wait_gone(location, name, ctx, Some(Duration::ZERO))
                    .await
            }
            _ => Err(r.api_error()),
        }
    }
}
