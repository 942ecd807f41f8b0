//! GKE's long-running operations and reads: an `Operation` polled until DONE, a pool read back
//! (its size from the Compute instance group managers when they can be read), and the adoption of
//! a pool an earlier attempt of a create left behind.

use std::future::Future;
use std::sync::Arc;

use google_cloud_container_v1 as gcc;
use google_cloud_container_v1::model::{self as m, NodePool, Operation};

use super::calls::operation_state;
use super::client::{GkeClient, POLL_CAP};
use super::mapping::{
    canonical_spec, cluster_path, compute_url, gke_location, pool_id, pool_message, spec_of,
    status_name,
};

/// Instance group managers' targetSize, by the manager's URL as a pool's `instanceGroupUrls`
/// names it.
pub(super) type GroupSizes = std::collections::HashMap<String, u64>;

/// Pages of one aggregated list followed at most (500 managers a page).
const MAX_PAGES: usize = 100;

/// The pool's size from the listings (one per project), when they hold every one of the pool's
/// groups.
fn listed_size(sizes: &[Arc<GroupSizes>], np: &NodePool) -> Option<u32> {
    if np.instance_group_urls.is_empty() {
        return None;
    }
    let total = np
        .instance_group_urls
        .iter()
        .map(|url| sizes.iter().find_map(|s| s.get(url).copied()))
        .sum::<Option<u64>>()?;
    u32::try_from(total).ok()
}

/// A count in Compute's JSON: int32 as a number, but a string accepted as int64s are sent.
fn number(v: &serde_json::Value) -> Option<u64> {
    match v {
        serde_json::Value::Number(n) => n.as_u64(),
        serde_json::Value::String(s) => s.parse().ok(),
        _ => None,
    }
}

/// A page token in a query string.
fn encode(token: &str) -> String {
    token
        .bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}
use crate::cloud::across::AcrossClusters;
use crate::cloud::error::CloudError;
use crate::cloud::pool::{Location, Pool, PoolSpec, Scaling};
use crate::operation::OpCtx;
use crate::operation::{Backoff, Check, Start, poll_until};

/// The node pools of a project's clusters, by (location, cluster name), as one refresh listed
/// them (`GkeClient::project_pools`).
pub(super) type ProjectPools = std::collections::HashMap<(String, String), Vec<NodePool>>;

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
        self.pool_sized(loc, np, None).await
    }

    /// The pool, its size taken from `sizes` (a listing of its instance group managers) when
    /// they hold every one of its groups, or else read from the groups themselves.
    pub(super) async fn pool_sized(
        &self,
        loc: &Location,
        np: &NodePool,
        sizes: Option<&[Arc<GroupSizes>]>,
    ) -> Result<Pool, CloudError> {
        let mut spec = spec_of(loc, np);
        if let Scaling::Fixed { .. } = spec.scaling {
            let listed = sizes.and_then(|sizes| listed_size(sizes, np));
            let size = match listed {
                Some(n) => Some(n),
                None => self.current_size(np).await,
            };
            if let Some(nodes) = size {
                spec.scaling = Scaling::Fixed { nodes };
            }
        }
        Ok(Pool {
            id: pool_id(loc, &np.name)?,
            spec,
            status: status_name(np),
        })
    }

    /// The targetSize of every instance group manager of the projects the fixed-size pools'
    /// groups are in, from Compute's `instanceGroupManagers.aggregatedList` (one request per
    /// project and 500 managers, however many zones and pools), one map per project, keyed by the
    /// manager's URL as `instanceGroupUrls` names it. A refresh takes each project's list once
    /// (`across`) for all its clusters. None when a list fails: the pools' groups are then read
    /// on their own, as a single read does.
    pub(super) async fn group_sizes(
        &self,
        pools: &[NodePool],
        across: Option<&AcrossClusters>,
        ctx: &OpCtx,
    ) -> Option<Vec<Arc<GroupSizes>>> {
        let fixed = pools.iter().filter(|np| {
            !np.autoscaling.as_ref().is_some_and(|a| a.enabled)
                && !np.instance_group_urls.is_empty()
        });
        let projects: std::collections::BTreeSet<&str> = fixed
            .flat_map(|np| np.instance_group_urls.iter())
            .filter_map(|url| url.split_once("/zones/").map(|(project, _)| project))
            .collect();
        let mut out = Vec::new();
        for project in projects {
            out.push(self.project_sizes(project, across, ctx).await?);
        }
        Some(out)
    }

    /// The node pools of every cluster of `project` the refresh can see, by (location, cluster),
    /// from one `clusters.list` over every location (`locations/-`, which "matches all zones and
    /// all regions"; each Cluster of the answer holds its `nodePools`, and the answer has no page
    /// token), taken once per project per refresh through `across`. None when that list fails
    /// (e.g. a role without `container.clusters.list`); a cluster it lacks (GKE names the zones
    /// it could not reach in `missingZones`) is read on its own.
    /// <https://cloud.google.com/kubernetes-engine/docs/reference/rest/v1/projects.locations.clusters/list>
    pub(super) async fn project_pools(
        &self,
        project: &str,
        across: &AcrossClusters,
        ctx: &OpCtx,
    ) -> Option<Arc<ProjectPools>> {
        let take = || async {
            let parent = format!("projects/{project}/locations/-");
            let what = format!("GET {parent}/clusters");
            let listed = self.call(ctx, &what, false, || {
                self.cm.list_clusters().set_parent(parent.clone()).send()
            });
            match listed.await {
                Ok(listed) => {
                    if !listed.missing_zones.is_empty() {
                        tracing::debug!(project, missing = ?listed.missing_zones,
                            "the project's cluster list lacks zones; their clusters are listed \
                            on their own");
                    }
                    let pools = listed
                        .clusters
                        .into_iter()
                        .map(|c| ((c.location, c.name), c.node_pools));
                    Some(pools.collect::<ProjectPools>())
                }
                Err(e) => {
                    tracing::debug!(project, error = %e, "cannot list the project's clusters; \
                        listing each cluster's node pools");
                    None
                }
            }
        };
        across
            .get_or_take(&format!("container clusters {project}"), take)
            .await
    }

    /// One project's instance group sizes (`project` as instance group URLs name it), shared by
    /// the refresh's clusters when `across` is given. None when they cannot be listed.
    pub(super) async fn project_sizes(
        &self,
        project: &str,
        across: Option<&AcrossClusters>,
        ctx: &OpCtx,
    ) -> Option<Arc<GroupSizes>> {
        let take = || async {
            let mut sizes = GroupSizes::new();
            match self.aggregated_sizes(project, &mut sizes, ctx).await {
                Ok(()) => Some(sizes),
                Err(e) => {
                    tracing::debug!(project, error = %e, "cannot list the instance group \
                        managers; reading each pool's groups");
                    None
                }
            }
        };
        match across {
            Some(across) => {
                let key = format!("compute instanceGroupManagers {project}");
                across.get_or_take(&key, take).await
            }
            None => take().await.map(Arc::new),
        }
    }

    /// One project's managers (`project` as the URLs name it: `https://.../compute/v1/projects/p`),
    /// every page, into `sizes`.
    async fn aggregated_sizes(
        &self,
        project: &str,
        sizes: &mut GroupSizes,
        ctx: &OpCtx,
    ) -> Result<(), String> {
        // Documented: https://cloud.google.com/compute/docs/reference/rest/v1/instanceGroupManagers/aggregatedList
        let list = compute_url(
            self.sandbox.as_deref(),
            &format!("{project}/aggregated/instanceGroupManagers"),
        )
        .ok_or_else(|| format!("not a Compute URL: {project}"))?;
        let mut token: Option<String> = None;
        for _ in 0..MAX_PAGES {
            let url = match &token {
                Some(t) => format!("{list}?maxResults=500&pageToken={}", encode(t)),
                None => format!("{list}?maxResults=500"),
            };
            let what = format!("GET {list}");
            let page = ctx
                .run(&what, self.get_json(&url))
                .await
                .map_err(|e| CloudError::from(e).to_string())??;
            let items = page["items"].as_object();
            for (scope, v) in items.into_iter().flatten() {
                let Some(zone) = scope.strip_prefix("zones/") else {
                    continue;
                };
                for m in v["instanceGroupManagers"].as_array().into_iter().flatten() {
                    if let (Some(name), Some(size)) = (m["name"].as_str(), number(&m["targetSize"]))
                    {
                        let url = format!("{project}/zones/{zone}/instanceGroupManagers/{name}");
                        sizes.insert(url, size);
                    }
                }
            }
            token = page["nextPageToken"]
                .as_str()
                .filter(|t| !t.is_empty())
                .map(str::to_string);
            if token.is_none() {
                return Ok(());
            }
        }
        Err(format!("more than {MAX_PAGES} pages"))
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
                tracing::debug!(url = %url, error = %e, "cannot read the instance group size; \
                    using initialNodeCount");
            })
        }))
        .await;
        let total = sizes.into_iter().sum::<Result<u64, ()>>().ok()?;
        u32::try_from(total).ok()
    }

    async fn target_size(&self, url: &str) -> Result<u64, String> {
        number(&self.get_json(url).await?["targetSize"])
            .ok_or_else(|| "no targetSize in the instance group manager".to_string())
    }

    /// One Compute read, its answer as JSON.
    async fn get_json(&self, url: &str) -> Result<serde_json::Value, String> {
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
        serde_json::from_slice(&body).map_err(|e| e.to_string())
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
                        "GKE reported node pool {id} as existing but it is gone now; retry the \
                            apply"
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
                        "node pool {id} already exists with a different configuration; import it \
                            with `terraform import <address> {id}` or choose another name"
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
