//! `/_sandbox/inventory`: the whole world in one stable document, for tests and people that want to
//! see every cloud at once. Each pool's entry embeds the document a GET on its cloud's API returns,
//! so the listing cannot disagree with the APIs.

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;
use serde_json::{Value, json};

use super::util::json_response;
use super::{Sandbox, World, arm, eks, gke};

pub(crate) async fn endpoint(State(sb): State<Sandbox>) -> Response {
    json_response(StatusCode::OK, &sb.inventory())
}

impl Sandbox {
    /// Every cluster and pool of every cloud in a stable JSON shape (see `/_sandbox/inventory`).
    pub fn inventory(&self) -> serde_json::Value {
        self.with_world(|w, _| inventory_of(w))
    }
}

/// A stable JSON listing of the world: clusters and pools sorted by cloud, cluster and name; each
/// pool carries its state and the document a GET on the cloud's API returns for it (GKE pools also
/// `nodes`, the sum of their instance groups' sizes, which no GKE document holds). `creates`
/// counts, per cloud, cluster and pool name, the creates that made a pool (`count`) and the create
/// requests that reached the cluster (`requests`); `refused` counts, per cloud, cluster and status,
/// the requests a cluster refused because other operations were in flight.
pub(crate) fn inventory_of(w: &World) -> Value {
    let mut clusters = Vec::new();
    let mut pools = Vec::new();
    for c in w.aks.clusters.values() {
        clusters.push(json!({"cloud": "aks", "name": c.name, "subscription": c.subscription, "resourceGroup": c.resource_group, "location": c.location}));
        for p in c.pools.values() {
            pools.push(json!({"cloud": "aks", "cluster": c.name, "name": p.name, "state": p.provisioning_state, "resource": arm::pool_json(c, p)}));
        }
    }
    for c in w.gke.clusters.values() {
        clusters.push(
            json!({"cloud": "gke", "name": c.name, "project": c.project, "location": c.location, "zones": c.zones()}),
        );
        let zones = c.zones();
        for p in c.pools.values() {
            // GKE's resource tells no current size: `nodes` is its instance groups' sizes summed.
            let nodes: i64 = gke::zone_sizes(&zones, p).iter().map(|(_, n)| n).sum();
            pools.push(json!({"cloud": "gke", "cluster": c.name, "name": p.name, "state": p.status, "nodes": nodes, "resource": gke::pool_json(c, p)}));
        }
    }
    for c in w.eks.clusters.values() {
        clusters.push(json!({"cloud": "eks", "name": c.name, "region": c.region}));
        for p in c.nodegroups.values() {
            pools.push(json!({"cloud": "eks", "cluster": c.name, "name": p.name, "state": p.status, "resource": eks::nodegroup_json(c, p)}));
        }
    }
    // Counted per pool name ever asked for, so they outlive the pools (a destroyed pool's count
    // stays).
    let mut keys: Vec<&String> = w.creates.keys().chain(w.create_requests.keys()).collect();
    keys.sort();
    keys.dedup();
    let creates: Vec<Value> = keys
        .into_iter()
        .filter_map(|k| {
            let mut parts = k.splitn(3, '/');
            let (cloud, cluster, name) = (parts.next()?, parts.next()?, parts.next()?);
            let count = w.creates.get(k).copied().unwrap_or(0);
            let requests = w.create_requests.get(k).copied().unwrap_or(0);
            Some(json!({"cloud": cloud, "cluster": cluster, "name": name, "count": count, "requests": requests}))
        })
        .collect();
    let refused: Vec<Value> = w
        .refused
        .iter()
        .filter_map(|(k, n)| {
            let mut parts = k.splitn(3, '/');
            let (cloud, cluster, status) = (parts.next()?, parts.next()?, parts.next()?);
            Some(json!({"cloud": cloud, "cluster": cluster, "status": status, "count": n}))
        })
        .collect();
    json!({"clusters": clusters, "pools": pools, "creates": creates, "refused": refused})
}
