//! GKE node pools through Google's official `google-cloud-container-v1` client (REST v1).
//!
//! A [`PoolSpec`] becomes a `NodePool`; every mutation answers with a GKE `Operation` (not a
//! google.longrunning LRO) that we poll ourselves under the [`OpCtx`] deadline and stop signal.
//! The client library's own retry loop is switched off (`NeverRetry`) so that retries happen in one
//! place, here, where Retry-After, the deadline and terraform's stop are known.
//!
//! Reading a pool back must give the spec it was created from, or terraform sees a perpetual diff
//! (magic-modules #11152): values GKE fills in itself (driver installation config, the default disk
//! size, management defaults, its own `cloud.google.com/` labels and GPU taint) are dropped on read,
//! and [`canonical_spec`] applies the same normalisation to a user's spec before comparing.
//!
//! Counts are per zone on GKE and totals here (see `mapping`): a pool's zones are its
//! `node_locations`, or the cluster's `locations`, which the client reads once per cluster and
//! keeps for the life of the provider process ([`GkeClient::cluster_zones`]): the plan needs them
//! to tell whether a total splits over the zones, and a plan of many pools on one cluster should
//! cost one read of it, not one per pool.
//!
//! The v1 `NodePool` resource has no current-size field: `initialNodeCount` stays what create set.
//! Like the google provider, a fixed-size pool's size is read from its Compute instance group
//! managers (`instanceGroupUrls`, one per zone, `targetSize`), summed over the zones (the google
//! provider averages them, because its `node_count` is per zone). That read is best effort: when it
//! fails (or the sandbox serves no Compute API) the size falls back to `initialNodeCount` times the
//! zones. A pool read back right after our own create or resize has just been given its size, so
//! that read is left out there (a read per zone saved on every apply). A list of the cluster's
//! pools (a refresh's shared read, see `cloud::SharedReads`) takes every size from Compute's
//! `instanceGroupManagers.aggregatedList`, one request per project and 500 managers, and reads
//! the groups of a pool on their own only when that list lacks them or fails. In a refresh the
//! clusters of one project share that list (`cloud::AcrossClusters`): it is taken once per project
//! per refresh, not once per cluster; and so do they share the project's cluster list over every
//! location, whose clusters hold their node pools (`GkeClient::project_pools`), so that a refresh
//! of many clusters of a project waits one round trip, not one for each cluster it comes to.
//!
//! Waits for operations are paced ([`Pace`](crate::operation::Pace)): the first look at an
//! operation comes shortly before the quickest one of its type (CREATE_NODE_POOL, ...) was seen
//! done in this process.
//!
//! Here, the client and its `NodePools` methods; `config` holds the settings and credentials,
//! `transport` the bounded HTTP transport under the official client, `calls` the retried call and
//! how GKE's errors map, `operations` the waits and reads, `mapping` NodePools and [`PoolSpec`]s.

mod calls;
mod client;
mod config;
mod mapping;
mod operations;
mod queue;
mod target;
#[cfg(test)]
mod tests;
mod transport;

use std::time::Duration;

use async_trait::async_trait;
use google_cloud_container_v1::client::ClusterManager;
use google_cloud_container_v1::model::{self as m, NodeLabels, NodeTaints};

use crate::cloud::across::AcrossClusters;
use crate::cloud::error::{CloudError, Detail};
use crate::cloud::pool::{Listening, Location, NodePools, Pool, PoolSpec, Scaling};
use crate::operation::OpCtx;
use config::{StaticToken, credentials_from};
use mapping::{
    clamp_i32, cluster_path, gke_autoscaling, gke_labels, gke_taints, node_pool_of, per_zone,
    replacement_fields, zones_of,
};

pub use client::{GkeClient, GkeTiming};
pub use config::GkeConfig;
pub use mapping::canonical_spec;
pub(crate) use mapping::pool_id;
pub use target::{Gke, SANDBOX_PROJECT};

impl GkeClient {
    pub async fn new(cfg: GkeConfig) -> Result<GkeClient, CloudError> {
        let endpoint = cfg
            .sandbox
            .as_deref()
            .or(cfg.endpoint.as_deref())
            .unwrap_or("https://container.googleapis.com")
            .trim_end_matches('/')
            .to_string();
        let creds = if cfg.sandbox.is_some() {
            google_cloud_auth::credentials::anonymous::Builder::new().build()
        } else if let Some(t) = &cfg.access_token {
            google_cloud_auth::credentials::Credentials::from(StaticToken::new(t)?)
        } else if let Some(c) = &cfg.credentials {
            credentials_from(c)?
        } else {
            // Application Default Credentials: GOOGLE_APPLICATION_CREDENTIALS, gcloud's ADC file,
            // the metadata server.
            google_cloud_auth::credentials::Builder::default()
                .build()
                .map_err(|e| {
                    CloudError::Auth(Detail::caused_by(format!(
                        "no Google credentials: {e}; set GOOGLE_APPLICATION_CREDENTIALS, run `gcloud auth application-default login`, or set the provider's credentials"
                    ), e))
                })?
        };
        let http = transport::http_client().map_err(|e| {
            let message = format!("cannot set up an HTTP client: {e}");
            CloudError::Transport(Detail::caused_by(message, e))
        })?;
        // Our own transport under the official client: every answer is read with a size cap
        // and a time limit (see transport). Retries stay ours too (`call`).
        let cm = ClusterManager::from_stub(transport::BoundedTransport {
            http: http.clone(),
            endpoint,
            creds: creds.clone(),
        });
        // The sandbox's operations take about two seconds, not minutes: poll and retry sooner, as
        // the AKS and EKS clients do against it.
        let timing = if cfg.sandbox.is_some() {
            GkeTiming {
                poll_first: Duration::from_millis(250),
                retry_first: Duration::from_millis(100),
            }
        } else {
            GkeTiming::default()
        };
        Ok(GkeClient {
            cm,
            timing,
            creds,
            http,
            sandbox: cfg.sandbox.map(|s| s.trim_end_matches('/').to_string()),
            queues: Default::default(),
            cluster_zones: Default::default(),
            pace: Default::default(),
        })
    }

    pub fn with_timing(mut self, timing: GkeTiming) -> GkeClient {
        self.timing = timing;
        self
    }

    /// The cluster's zones (its `locations`), read once per cluster for the life of the client.
    pub async fn cluster_zones(
        &self,
        loc: &Location,
        ctx: &OpCtx,
    ) -> Result<Vec<String>, CloudError> {
        let path = cluster_path(loc)?;
        let cell = {
            let mut cache = self.cluster_zones.lock().unwrap_or_else(|e| e.into_inner());
            cache.entry(path.clone()).or_default().clone()
        };
        cell.get_or_try_init(|| async {
            let cluster = self
                .call(ctx, &format!("GET {path}"), false, || {
                    self.cm.get_cluster().set_name(path.clone()).send()
                })
                .await?;
            let mut zones = cluster.locations;
            zones.sort();
            if zones.is_empty() {
                return Err(CloudError::BadResponse(
                    format!("cluster {path} lists no locations (zones)").into(),
                ));
            }
            Ok(zones)
        })
        .await
        .cloned()
    }

    /// `spec` with its zones known: its own, or the cluster's.
    async fn with_zones(&self, spec: &PoolSpec, ctx: &OpCtx) -> Result<PoolSpec, CloudError> {
        let mut s = spec.clone();
        let mut zones = zones_of(spec);
        if zones.is_empty() {
            zones = self.cluster_zones(&spec.location, ctx).await?;
        }
        s.gke_mut().node_locations = zones;
        Ok(s)
    }

    /// Every pool of the cluster; the fixed-size pools' sizes from Compute's aggregated lists,
    /// taken from `across` when a refresh shares them.
    async fn list_sized(
        &self,
        cluster: &Location,
        across: Option<&AcrossClusters>,
        ctx: &OpCtx,
    ) -> Result<Vec<Pool>, CloudError> {
        use futures_util::stream::{self, StreamExt, TryStreamExt};
        let parent = mapping::cluster_path(cluster)?;
        // ListNodePoolsResponse has no page token: one answer holds every pool.
        let what = format!("GET {parent}/nodePools");
        let list = || async {
            let listed = self.call(ctx, &what, false, || {
                self.cm.list_node_pools().set_parent(parent.clone()).send()
            });
            listed.await.map(|l| l.node_pools)
        };
        // In a refresh, the project's clusters are listed once for all of them (one round trip
        // for every cluster of the project, whose reads terraform sends as they come), and the
        // project's instance group sizes beside them rather than after (they live in the
        // cluster's project, which instance group URLs name by its ID; a project written as its
        // number, or clusters without fixed-size pools, make this list one the refresh did not
        // need). A cluster the project's list lacks lists its own pools.
        let listed = match across {
            Some(across) => {
                let (project, location, name) = mapping::gke_location(cluster)?;
                let compute = format!("{}/projects/{project}", mapping::COMPUTE_V1);
                let sizes = self.project_sizes(&compute, Some(across), ctx);
                let clusters = self.project_pools(project, across, ctx);
                let (clusters, _) = tokio::join!(clusters, sizes);
                let key = (location.to_string(), name.to_string());
                match clusters.as_deref().and_then(|c| c.get(&key)) {
                    Some(pools) => pools.clone(),
                    None => list().await?,
                }
            }
            None => list().await?,
        };
        let live: Vec<m::NodePool> = listed
            .into_iter()
            .filter(|np| np.status != m::node_pool::Status::Stopping)
            .collect();
        // Every fixed-size pool's instance groups from one aggregated list (per project), not
        // a read per zone and pool; a pool the list lacks reads its own groups.
        let sizes = &self.group_sizes(&live, across, ctx).await;
        let mut pools: Vec<Pool> = stream::iter(live)
            .map(|np| async move { self.pool_sized(cluster, &np, sizes.as_deref()).await })
            .buffered(crate::cloud::pool::LIST_READS_IN_FLIGHT)
            .try_collect()
            .await?;
        pools.sort_by(|a, b| a.spec.name.cmp(&b.spec.name));
        Ok(pools)
    }

    /// Brings the pool's node labels and taints from `have` to `want`, an update each where they
    /// differ.
    async fn update_labels_and_taints(
        &self,
        loc: &Location,
        id: &str,
        have: &PoolSpec,
        want: &PoolSpec,
        ctx: &OpCtx,
    ) -> Result<(), CloudError> {
        if have.labels != want.labels {
            let mut labels = NodeLabels::default();
            labels.labels = gke_labels(&want.labels);
            self.mutate(loc, &format!("update labels of {id}"), ctx, || {
                self.cm
                    .update_node_pool()
                    .set_name(id)
                    .set_labels(labels.clone())
                    .send()
            })
            .await?;
        }
        if have.taints != want.taints {
            let mut taints = NodeTaints::default();
            taints.taints = gke_taints(&want.taints)?;
            self.mutate(loc, &format!("update taints of {id}"), ctx, || {
                self.cm
                    .update_node_pool()
                    .set_name(id)
                    .set_taints(taints.clone())
                    .send()
            })
            .await?;
        }
        Ok(())
    }
}

#[async_trait]
impl NodePools for GkeClient {
    fn lists_for_a_read(&self) -> bool {
        true
    }

    async fn get(
        &self,
        location: &Location,
        name: &str,
        ctx: &OpCtx,
    ) -> Result<Option<Pool>, CloudError> {
        match self.get_raw(location, name, ctx).await? {
            // A pool being deleted is gone for the user.
            Some(np) if np.status == m::node_pool::Status::Stopping => Ok(None),
            Some(np) => Ok(Some(self.pool_of(location, &np).await?)),
            None => Ok(None),
        }
    }

    async fn create(&self, spec: &PoolSpec, ctx: &OpCtx) -> Result<Pool, CloudError> {
        let spec = &self.with_zones(spec, ctx).await?;
        let parent = cluster_path(&spec.location)?;
        let np = node_pool_of(spec)?;
        let what = format!("create node pool {parent}/nodePools/{}", spec.name);
        let turn = self.queues.turn(&parent, &what, ctx).await?;
        let sent = self
            .call(ctx, &what, true, || {
                self.cm
                    .create_node_pool()
                    .set_parent(parent.clone())
                    .set_node_pool(np.clone())
                    .send()
            })
            .await;
        match sent {
            Ok(op) => {
                self.wait(&spec.location, op, ctx).await?;
                drop(turn);
                self.reread(&spec.location, &spec.name, ctx).await
            }
            // A retried create (ours after a lost answer, or terraform's after a crash) finds the
            // pool that the first attempt made.
            Err(CloudError::Api { code, .. }) if code == "ALREADY_EXISTS" => {
                self.adopt(spec, ctx).await
            }
            Err(e) => Err(e),
        }
    }

    async fn update(
        &self,
        current: &Pool,
        spec: &PoolSpec,
        ctx: &OpCtx,
    ) -> Result<Pool, CloudError> {
        let spec = &self.with_zones(spec, ctx).await?;
        let loc = &spec.location;
        let id = pool_id(loc, &spec.name)?;
        let want = canonical_spec(spec);
        let have = canonical_spec(&current.spec);
        let zones = zones_of(&want);
        let moved = zones_of(&have) != zones;
        let fixed = replacement_fields(&have, &want);
        if !fixed.is_empty() {
            return Err(CloudError::Api {
                status: 400,
                code: "INVALID_ARGUMENT".into(),
                message: format!(
                    "GKE cannot change {} of node pool {id} in place; the pool must be replaced",
                    fixed.join(", ")
                ),
            });
        }
        // A fixed total must split over the zones before anything changes.
        let size = match want.scaling {
            Scaling::Fixed { nodes } => Some(per_zone(nodes, &zones, &id)?),
            Scaling::Auto { .. } => None,
        };
        if moved {
            // Every zone keeps the per-zone size: the setSize below brings the total back.
            self.mutate(loc, &format!("update locations of {id}"), ctx, || {
                self.cm
                    .update_node_pool()
                    .set_name(id.clone())
                    .set_locations(zones.clone())
                    .send()
            })
            .await?;
        }
        if have.scaling != want.scaling || (moved && size.is_some()) {
            if let Scaling::Auto { .. } = want.scaling {
                let a = gke_autoscaling(want.scaling);
                self.mutate(loc, &format!("setAutoscaling {id}"), ctx, || {
                    self.cm
                        .set_node_pool_autoscaling()
                        .set_name(id.clone())
                        .set_autoscaling(a.clone())
                        .send()
                })
                .await?;
            } else if let Some(per_zone) = size {
                if let Scaling::Auto { .. } = have.scaling {
                    let off = gke_autoscaling(want.scaling);
                    self.mutate(loc, &format!("setAutoscaling {id}"), ctx, || {
                        self.cm
                            .set_node_pool_autoscaling()
                            .set_name(id.clone())
                            .set_autoscaling(off.clone())
                            .send()
                    })
                    .await?;
                }
                self.mutate(loc, &format!("setSize {id}"), ctx, || {
                    self.cm
                        .set_node_pool_size()
                        .set_name(id.clone())
                        .set_node_count(clamp_i32(per_zone))
                        .send()
                })
                .await?;
            }
        }
        self.update_labels_and_taints(loc, &id, &have, &want, ctx)
            .await?;
        let mut pool = self.reread(loc, &spec.name, ctx).await?;
        if let Scaling::Fixed { .. } = want.scaling {
            // The read back gives initialNodeCount (see `reread`); the setSize operation above
            // finished, or the size already was what the plan wants, so the size is ours.
            pool.spec.scaling = want.scaling;
        }
        Ok(pool)
    }

    async fn list(&self, cluster: &Location, ctx: &OpCtx) -> Result<Vec<Pool>, CloudError> {
        self.list_sized(cluster, None, ctx).await
    }

    /// The list, each project's instance group sizes taken once per refresh: the clusters of a
    /// project share one aggregated list.
    async fn list_in_refresh(
        &self,
        cluster: &Location,
        across: &AcrossClusters,
        ctx: &OpCtx,
        to: &dyn Listening,
    ) -> Result<(), CloudError> {
        for pool in self.list_sized(cluster, Some(across), ctx).await? {
            to.found(pool);
        }
        Ok(())
    }

    async fn default_zones(
        &self,
        location: &Location,
        ctx: &OpCtx,
    ) -> Result<Option<Vec<String>>, CloudError> {
        self.cluster_zones(location, ctx).await.map(Some)
    }

    async fn delete(&self, location: &Location, name: &str, ctx: &OpCtx) -> Result<(), CloudError> {
        let id = pool_id(location, name)?;
        let what = format!("delete node pool {id}");
        let _turn = self
            .queues
            .turn(&cluster_path(location)?, &what, ctx)
            .await?;
        let sent = self
            .call(ctx, &what, true, || {
                self.cm.delete_node_pool().set_name(id.clone()).send()
            })
            .await;
        match sent {
            Ok(op) => self.wait(location, op, ctx).await,
            Err(e) if e.is_not_found() => Ok(()),
            Err(e) => Err(e),
        }
    }
}
