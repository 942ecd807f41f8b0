//! Reads of one refresh shared per cluster. Terraform refreshes every pool on its own, at its
//! `-parallelism`; against a cloud that answers in 100-300 ms that is one round trip (or more) per
//! pool. Instead, the first refresh read of a cluster lists the cluster once ([`NodePools::list`]:
//! one ARM agent pool list, GKE's node pool list, EKS's node group list with the node groups
//! described concurrently) and every other refresh read of that cluster answers from that
//! snapshot.
//!
//! The first read of a cluster in a refresh is a single read all the same, and the list starts
//! with the second: a cluster of which the configuration manages one pool costs one request, as
//! before (on EKS a list describes every node group of the cluster), and a refresh of many pools
//! of a cluster costs one read and one list.
//!
//! The rules that keep drift exact:
//! - A snapshot belongs to one refresh: terraform configures the provider once per graph walk,
//!   and configuring clears every snapshot (as does age, for a provider process kept alive across
//!   runs).
//! - A write to a cluster (create, update, delete) drops its snapshot, before and after, and
//!   every read the refresh shares between clusters (`across`: GKE's instance group sizes of a
//!   project), since those cover the cluster written to.
//!   Create, update, delete and import read the cloud themselves ([`NodePools::get`]), never
//!   through a snapshot.
//! - A pool the snapshot lacks is read once on its own before it is reported gone, so a pool
//!   created after the list (by an import walk, say) is never dropped from state.
//! - A list that fails is not an error of every pool of the cluster: each read falls back to its
//!   own GET, which reports its own error if the cloud still fails.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

use tokio::sync::OnceCell;

use super::across::{AcrossClusters, MAX_AGE};
use super::error::CloudError;
use super::pool::{Location, NodePools, Pool};
use crate::operation::OpCtx;

/// One cluster's pools as a list saw them, or None when the list failed.
type Listed = Option<Arc<HashMap<String, Pool>>>;

struct Snapshot {
    /// When the list was started.
    at: Instant,
    /// Reads of the cluster so far in this snapshot.
    reads: AtomicUsize,
    pools: OnceCell<Listed>,
}

/// The snapshots of one provider process, per cluster.
#[derive(Default)]
pub struct SharedReads {
    clusters: Mutex<HashMap<Location, Arc<Snapshot>>>,
    /// What the clusters' lists share (see `across`).
    across: AcrossClusters,
}

impl SharedReads {
    /// The pool a refresh sees: the first of a cluster read on its own, the others from the
    /// cluster's snapshot, taken now if there is none.
    pub async fn read(
        &self,
        client: &dyn NodePools,
        location: &Location,
        name: &str,
        ctx: &OpCtx,
    ) -> Result<Option<Pool>, CloudError> {
        let snapshot = self.snapshot(location);
        if snapshot.reads.fetch_add(1, Ordering::Relaxed) == 0 {
            return client.get(location, name, ctx).await;
        }
        let listed = snapshot
            .pools
            .get_or_init(|| async {
                match client.list_in_refresh(location, &self.across, ctx).await {
                    Ok(pools) => {
                        tracing::debug!(
                            cloud = location.cloud().as_str(),
                            pools = pools.len(),
                            "listed the cluster's pools for this refresh"
                        );
                        Some(Arc::new(
                            pools
                                .into_iter()
                                .map(|p| (p.spec.name.clone(), p))
                                .collect(),
                        ))
                    }
                    Err(e) => {
                        tracing::warn!(cloud = location.cloud().as_str(), error = %e, "listing the \
                            cluster's pools failed; reading each pool on its own");
                        None
                    }
                }
            })
            .await;
        match listed.as_ref().and_then(|pools| pools.get(name)) {
            Some(pool) => Ok(Some(pool.clone())),
            None => client.get(location, name, ctx).await,
        }
    }

    /// Drops the cluster's snapshot and what the clusters share: a write is about to change
    /// them, or has.
    pub fn forget(&self, location: &Location) {
        self.lock().remove(location);
        self.across.clear();
    }

    /// Drops every snapshot: a new refresh begins.
    pub fn clear(&self) {
        self.lock().clear();
        self.across.clear();
    }

    fn snapshot(&self, location: &Location) -> Arc<Snapshot> {
        let mut clusters = self.lock();
        let fresh = |s: &Arc<Snapshot>| s.at.elapsed() < MAX_AGE;
        match clusters.get(location).filter(|s| fresh(s)) {
            Some(s) => s.clone(),
            None => {
                let s = Arc::new(Snapshot {
                    at: Instant::now(),
                    reads: AtomicUsize::new(0),
                    pools: OnceCell::new(),
                });
                clusters.insert(location.clone(), s.clone());
                s
            }
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Location, Arc<Snapshot>>> {
        self.clusters.lock().unwrap_or_else(PoisonError::into_inner)
    }
}
