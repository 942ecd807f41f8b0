//! Reads of one refresh shared per cluster. Terraform refreshes every pool on its own, at its
//! `-parallelism`; against a cloud that answers in 100-300 ms that is one round trip (or more) per
//! pool. Instead, the first refresh read of a cluster lists the cluster once
//! ([`NodePools::list_in_refresh`]: ARM's managed cluster document, whose agentPoolProfiles hold
//! every agent pool; on GKE the project's clusters, each with its node pools, listed once for
//! all of them; EKS's node group list with the node groups described concurrently) and every
//! other refresh read of that cluster answers from that snapshot.
//!
//! Where a list costs more than a read of one pool (EKS, whose list describes every node group of
//! the cluster), the first read of a cluster in a refresh is a single read all the same, and the
//! list starts with the second: a cluster of which the configuration manages one pool costs one
//! request, as before, and a refresh of many pools of a cluster costs one read and one list.
//! Where it costs no more (`NodePools::lists_for_a_read`: AKS, GKE) the first read runs the list,
//! so a refresh costs one list per cluster. Each read after the one that runs the list is
//! answered as soon as the list has found its pool (on EKS, where the list is a describe per node
//! group, as its group is described: the groups reads wait for are described at once, before
//! the list has named them), so terraform's work on the first pools overlaps the describes of
//! the rest. However the listing read ends (done, failed, or dropped by terraform), the listing
//! ends with it, and a read still waiting reads its pool on its own.
//!
//! What this cannot shorten: terraform refreshes a configuration's resource blocks one after
//! another. Each resource instance holds one of the walk's `-parallelism` slots while it is read
//! and planned (`ContextGraphWalker.Execute` in terraform's `internal/terraform`, around a
//! semaphore that is a Go channel, whose blocked senders are served first come, first served),
//! and a block's instances ask for slots when the block is expanded, so they queue behind every
//! instance of the blocks expanded before. The clusters of a second block are not named to the
//! provider before the first block's reads are nearly done, so each block waits for its own
//! lists in turn; `-parallelism` as large as the number of pools lets every block's reads in at
//! once, and costs no more requests, a cluster being listed once however many reads wait on it
//! (measured in the `latency` benchmark and the large-configurations guide).
//!
//! The rules that keep drift exact:
//! - A snapshot belongs to one refresh: terraform configures the provider once per graph walk,
//!   and configuring clears every snapshot (as does age, for a provider process kept alive across
//!   runs).
//! - A write to a cluster (create, update, delete) drops its snapshot, before and after, and
//!   every read the refresh shares between clusters (`across`: GKE's cluster list and instance
//!   group sizes of a project), since those cover the cluster written to.
//!   Create, update, delete and import read the cloud themselves ([`NodePools::get`]), never
//!   through a snapshot.
//! - A pool the snapshot lacks is read once on its own before it is reported gone (by the read,
//!   or by the list where it reads that one pool: EKS describes the groups reads wait for), so a
//!   pool created after the list (by an import walk, say) is never dropped from state.
//! - A list that fails is not an error of every pool of the cluster: each read falls back to its
//!   own GET, which reports its own error if the cloud still fails.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

use tokio::sync::watch;

use super::across::{AcrossClusters, MAX_AGE};
use super::error::CloudError;
use super::pool::{Listening, Location, NodePools, Pool};
use crate::operation::OpCtx;

/// One cluster's pools as its list has found them so far.
#[derive(Default)]
struct Listing {
    pools: HashMap<String, Pool>,
    /// Pools a read of their own, made by the list, found gone.
    gone: std::collections::HashSet<String>,
    /// The list is over (done, failed, or abandoned): a pool it did not find is read on its own.
    ended: bool,
}

struct Snapshot {
    /// When the snapshot was started.
    at: Instant,
    /// Reads of the cluster so far in this snapshot.
    reads: AtomicUsize,
    /// Whether a read has started the list.
    listing: AtomicBool,
    found: watch::Sender<Listing>,
    /// Pools reads wait for that the list has not been told of yet.
    wanted: Mutex<Vec<String>>,
    /// Notified when a name joins `wanted`.
    asked: tokio::sync::Notify,
}

/// The reads of one snapshot, as its list sees them.
struct Listener<'a> {
    snapshot: &'a Snapshot,
    count: AtomicUsize,
}

impl Listening for Listener<'_> {
    fn found(&self, pool: Pool) {
        self.count.fetch_add(1, Ordering::Relaxed);
        self.snapshot.found.send_modify(|l| {
            l.pools.insert(pool.spec.name.clone(), pool);
        });
    }

    fn wanted(&self) -> Vec<String> {
        std::mem::take(
            &mut *self
                .snapshot
                .wanted
                .lock()
                .unwrap_or_else(PoisonError::into_inner),
        )
    }

    fn asked(&self) -> Option<&tokio::sync::Notify> {
        Some(&self.snapshot.asked)
    }

    fn gone(&self, name: &str) {
        self.snapshot.found.send_modify(|l| {
            l.gone.insert(name.to_string());
        });
    }
}

/// Ends a listing when the read running the list is done with it, however that happens: a read
/// terraform abandons (a stop) must not leave the others waiting for a list nobody runs.
struct EndOnDrop<'a>(&'a watch::Sender<Listing>);

impl Drop for EndOnDrop<'_> {
    fn drop(&mut self) {
        self.0.send_modify(|l| l.ended = true);
    }
}

/// The snapshots of one provider process, per cluster.
#[derive(Default)]
pub struct SharedReads {
    clusters: Mutex<HashMap<Location, Arc<Snapshot>>>,
    /// What the clusters' lists share (see `across`).
    across: AcrossClusters,
}

impl SharedReads {
    /// The pool a refresh sees: from the cluster's snapshot, taken now if there is none, but for
    /// the first read of a cluster whose list costs more than a read, which reads on its own.
    /// The first read that lists runs the list, and every later read is answered as soon as the
    /// list has found its pool (on EKS, as its node group is described), not when the list ends.
    pub async fn read(
        &self,
        client: &dyn NodePools,
        location: &Location,
        name: &str,
        ctx: &OpCtx,
    ) -> Result<Option<Pool>, CloudError> {
        let snapshot = self.snapshot(location);
        if snapshot.reads.fetch_add(1, Ordering::Relaxed) == 0 && !client.lists_for_a_read() {
            return client.get(location, name, ctx).await;
        }
        let mut found = snapshot.found.subscribe();
        if !snapshot.found.borrow().ended {
            let mut wanted = snapshot
                .wanted
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            wanted.push(name.to_string());
            drop(wanted);
            snapshot.asked.notify_one();
        }
        if !snapshot.listing.swap(true, Ordering::Relaxed) {
            let _end = EndOnDrop(&snapshot.found);
            let listener = Listener {
                snapshot: &snapshot,
                count: AtomicUsize::new(0),
            };
            let listed = client
                .list_in_refresh(location, &self.across, ctx, &listener)
                .await;
            let pools = listener.count.load(Ordering::Relaxed);
            match listed {
                Ok(()) => tracing::debug!(
                    cloud = location.cloud().as_str(),
                    pools,
                    "listed the cluster's pools for this refresh"
                ),
                Err(e) => tracing::warn!(cloud = location.cloud().as_str(), pools, error = %e,
                    "listing the cluster's pools failed; reading each pool it did not find on \
                    its own"),
            }
        }
        let listed = found
            .wait_for(|l| l.ended || l.pools.contains_key(name) || l.gone.contains(name))
            .await
            .ok()
            .and_then(|l| match l.pools.get(name) {
                Some(pool) => Some(Some(pool.clone())),
                None => l.gone.contains(name).then_some(None),
            });
        match listed {
            Some(pool) => Ok(pool),
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
                    listing: AtomicBool::new(false),
                    found: watch::Sender::new(Listing::default()),
                    wanted: Mutex::default(),
                    asked: tokio::sync::Notify::new(),
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
