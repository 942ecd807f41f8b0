//! GKE's long-running Operations: every mutation answers with a RUNNING Operation, at most
//! [`MAX_CONCURRENT_OPS`] per cluster, and the shared settle mechanism later marks it DONE, with an
//! error and the pool rolled back when fault injection failed it.

use std::collections::BTreeMap;

use axum::http::StatusCode;
use axum::response::Response;
use serde_json::{Map, Value};

use super::documents::{op_json, pool_nodes};
use super::error::{GError, gerr, invalid};
use super::fields::{boolean, int, object, parse_body, string};
use super::validate::{apply_update, parse_autoscaling, parse_pool};
use super::world::{
    GkeCluster, GkeOp, GkeWorld, NodePool, Pending, PoolSpec, cluster, cluster_path, pool_missing,
};
use crate::api::ApiRequest;
use crate::nodes::NodeEvent;
use crate::operations::{Kind, Operations, Queue};
use crate::util::json_response;
use crate::{Ctx, Sandbox, World};

impl Operations for GkeWorld {
    type Entry = (u64, String);

    fn queue(&mut self) -> &mut Queue<(u64, String)> {
        &mut self.pending
    }

    fn finish(&mut self, (_, name): (u64, String), now: u64, events: &mut Vec<NodeEvent>) -> bool {
        let Some(op) = self.ops.get_mut(&name) else {
            return false;
        };
        if op.end.is_some() {
            return false;
        }
        op.end = Some(now);
        op.status = "DONE".into();
        let key = format!("{}/{}/{}", op.project, op.location, op.cluster);
        let (Some(cluster), Some(pool_name)) = (self.clusters.get_mut(&key), op.pool.clone())
        else {
            return true;
        };
        let cluster_zones = cluster.zones();
        let Some(pool) = cluster.pools.get_mut(&pool_name) else {
            return true;
        };
        let Some(p) = pool.pending.take_if(|p| p.op == op.name) else {
            return true;
        };
        if p.fail {
            let zone = pool
                .spec
                .locations
                .first()
                .cloned()
                .unwrap_or_else(|| cluster_zones[0].clone());
            op.error = Some((
                8,
                format!(
                    "Insufficient quota to satisfy the request: ZONE_RESOURCE_POOL_EXHAUSTED for \
                        {} in {zone} (sandbox fault injection).",
                    pool.spec.machine_type
                ),
            ));
            match p.kind {
                Kind::Create => pool.status = "ERROR".into(),
                Kind::Update => {
                    if let Some(prev) = p.previous {
                        pool.spec = *prev;
                    }
                    pool.status = "RUNNING".into();
                }
                Kind::Delete => pool.status = "RUNNING".into(),
            }
            return true;
        }
        if p.kind == Kind::Delete {
            cluster.pools.remove(&pool_name);
            events.push(NodeEvent::Deleted {
                cloud: "gke",
                cluster: cluster.name.clone(),
                pool: pool_name,
            });
        } else {
            pool.status = "RUNNING".into();
            events.push(NodeEvent::Changed(pool_nodes(
                &cluster.name,
                &cluster_zones,
                pool,
            )));
        }
        true
    }
}

/// GKE runs at most this many operations on one cluster at a time.
pub const MAX_CONCURRENT_OPS: usize = 5;

/// How GKE names an operation in progress in its refusals ("Operation operation-... is currently
/// creating a node pool for cluster c1. Please wait and try again once it is done.",
/// hashicorp/terraform-provider-google#10366; "... is currently upgrading cluster c1. ...", #3650).
/// The wording for a cluster update and for a node pool update follows that pattern; we have not
/// seen those two quoted.
fn in_progress(op: &GkeOp) -> String {
    let what = match op.op_type.as_str() {
        "CREATE_NODE_POOL" => "creating a node pool for cluster",
        "DELETE_NODE_POOL" => "deleting a node pool for cluster",
        "UPGRADE_MASTER" => "upgrading cluster",
        "UPDATE_CLUSTER" if op.pool.is_none() => "updating cluster",
        _ => "updating a node pool for cluster",
    };
    format!(
        "Operation {} is currently {what} {}. Please wait and try again once it is done.",
        op.name, op.cluster
    )
}

/// Whether GKE lets one more operation start on the cluster now. An operation on the cluster itself
/// (a master upgrade, a cluster update) runs alone: while one runs every node pool operation is
/// refused, and it is refused while any other runs (400 FAILED_PRECONDITION, as above). Operations on
/// different pools run side by side, at most [`MAX_CONCURRENT_OPS`] at once; one more is refused with
/// 429 RESOURCE_EXHAUSTED "Too many operations: cluster \"c1\" hits the concurrent operations quota
/// 5, please try again later." (hashicorp/terraform-provider-google#15205, #15579). A pool's own
/// operation in flight is checked by `mutate`. Every refusal is counted for the inventory.
fn check_cluster_ops(w: &mut World, c: &GkeCluster, on_cluster: bool) -> Result<(), GError> {
    let running: Vec<&GkeOp> = w
        .gke
        .pending
        .iter()
        .filter_map(|(_, name)| w.gke.ops.get(name))
        .filter(|o| {
            o.end.is_none()
                && o.project == c.project
                && o.location == c.location
                && o.cluster == c.name
        })
        .collect();
    let refusal = if let Some(op) = running.iter().find(|o| o.pool.is_none()) {
        Some(gerr(400, in_progress(op)))
    } else if let (true, Some(op)) = (on_cluster, running.first()) {
        Some(gerr(400, in_progress(op)))
    } else if running.len() >= MAX_CONCURRENT_OPS {
        Some(gerr(
            429,
            format!(
                "Too many operations: cluster \"{}\" hits the concurrent operations quota \
                    {MAX_CONCURRENT_OPS}, please try again later.",
                c.name
            ),
        ))
    } else {
        None
    };
    match refusal {
        Some(e) => Err(refused(w, c, e)),
        None => Ok(()),
    }
}

/// Counts a refusal of an operation on the cluster (see `World::refused`).
fn refused(w: &mut World, c: &GkeCluster, e: GError) -> GError {
    w.count_refused("gke", &c.name, e.status());
    e
}

fn new_op(
    w: &mut World,
    ctx: &mut Ctx,
    c: &GkeCluster,
    pool: Option<&str>,
    op_type: &str,
) -> GkeOp {
    let id = ctx.new_id() as u32 ^ fastrand::u32(..);
    let name = format!("operation-{}-{id:08x}", ctx.now);
    let target = match pool {
        Some(p) => format!("{}/nodePools/{p}", cluster_path(c)),
        None => cluster_path(c),
    };
    let deadline = ctx.deadline();
    let op = GkeOp {
        name: name.clone(),
        op_type: op_type.into(),
        status: "RUNNING".into(),
        project: c.project.clone(),
        location: c.location.clone(),
        target,
        cluster: c.name.clone(),
        pool: pool.map(str::to_string),
        start: ctx.now,
        end: None,
        deadline,
        error: None,
    };
    w.gke.pending.add(ctx, (deadline, name.clone()));
    w.gke.ops.insert(name, op.clone());
    op
}

pub(super) fn create(
    sb: &Sandbox,
    request: &ApiRequest,
    p: &str,
    l: &str,
    c: &str,
) -> Result<Response, GError> {
    let (base, fail) = (&request.base(), request.fail);
    let req = parse_body(&request.body)?;
    let Some(np) = object(&req, "nodePool")? else {
        return Err(invalid(
            "Invalid JSON payload received. Required field 'nodePool' is missing.",
        ));
    };
    sb.with_world_opts(fail, |w, ctx| {
        let full = cluster(&w.gke, p, l, c)?;
        // The pool's zones and what they offer are the cluster's business.
        let (name, spec) = parse_pool(np, full)?;
        let cluster_name = full.name.clone();
        w.count_create_request("gke", &cluster_name, &name);
        let full = cluster(&w.gke, p, l, c)?;
        if full.pools.contains_key(&name) {
            return Err(gerr(
                409,
                format!("Already exists: {}/nodePools/{name}.", cluster_path(full)),
            ));
        }
        let cl = full.clone_shallow();
        check_cluster_ops(w, &cl, false)?;
        let op = new_op(w, ctx, &cl, Some(&name), "CREATE_NODE_POOL");
        let key = format!("{p}/{l}/{c}");
        let pool = NodePool {
            name: name.clone(),
            spec,
            status: "PROVISIONING".into(),
            autoscaled_total: None,
            pending: Some(Pending {
                op: op.name.clone(),
                kind: Kind::Create,
                deadline: op.deadline,
                fail: ctx.fail_operation,
                previous: None,
            }),
        };
        w.count_create("gke", &cl.name, &name);
        if let Some(cm) = w.gke.clusters.get_mut(&key) {
            cm.pools.insert(name, pool);
        }
        Ok(json_response(StatusCode::OK, &op_json(base, &op)))
    })
}

impl GkeCluster {
    /// The cluster's identity without its pools (enough for paths and operations).
    fn clone_shallow(&self) -> GkeCluster {
        GkeCluster {
            project: self.project.clone(),
            location: self.location.clone(),
            name: self.name.clone(),
            pools: BTreeMap::new(),
            zones: self.zones(),
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Mutation {
    Update,
    Delete,
    SetSize,
    SetAutoscaling,
    /// clusters.update with desiredNodePoolAutoscaling: the same change, reported as UPDATE_CLUSTER.
    ClusterAutoscaling,
    SetManagement,
}

/// The node pool a call names by its path,
/// `projects/{project}/locations/{location}/clusters/{cluster}/nodePools/{pool}`.
pub(super) struct PoolPath<'a> {
    pub(super) project: &'a str,
    pub(super) location: &'a str,
    pub(super) cluster: &'a str,
    pub(super) pool: &'a str,
}

/// Starts the operation that makes mutation `m` (with `body`, the request's or one made for it) of
/// the pool at `at`.
pub(super) fn mutate(
    sb: &Sandbox,
    request: &ApiRequest,
    at: &PoolPath,
    body: &[u8],
    m: Mutation,
) -> Result<Response, GError> {
    let (base, fail) = (&request.base(), request.fail);
    let (p, l, c, name) = (at.project, at.location, at.cluster, at.pool);
    let req = if m == Mutation::Delete || body.is_empty() {
        Map::new()
    } else {
        parse_body(body)?
    };
    sb.with_world_opts(fail, |w, ctx| {
        let cl = cluster(&w.gke, p, l, c)?;
        let pool = cl.pools.get(name).ok_or_else(|| pool_missing(cl, name))?;
        // One operation at a time on a pool.
        if let Some(op) = pool.pending.as_ref().and_then(|p| w.gke.ops.get(&p.op)) {
            let e = gerr(400, in_progress(op));
            let shallow = cl.clone_shallow();
            return Err(refused(w, &shallow, e));
        }
        let mut spec = pool.spec.clone();
        let (op_type, kind) = change(m, &mut spec, &req, cl)?;
        let shallow = cl.clone_shallow();
        check_cluster_ops(w, &shallow, false)?;
        let op = new_op(w, ctx, &shallow, Some(name), op_type);
        let cm = w
            .gke
            .clusters
            .get_mut(&format!("{p}/{l}/{c}"))
            .expect("found above");
        let pool = cm.pools.get_mut(name).expect("found above");
        let previous = (kind == Kind::Update).then(|| Box::new(pool.spec.clone()));
        pool.spec = spec;
        pool.status = if kind == Kind::Delete {
            "STOPPING"
        } else {
            "RECONCILING"
        }
        .into();
        pool.pending = Some(Pending {
            op: op.name.clone(),
            kind,
            deadline: op.deadline,
            fail: ctx.fail_operation,
            previous,
        });
        Ok(json_response(StatusCode::OK, &op_json(base, &op)))
    })
}

/// Reads mutation `m`'s body into the pool's `spec`: the operation type GKE reports for it and
/// what it does to the pool.
fn change(
    m: Mutation,
    spec: &mut PoolSpec,
    req: &Map<String, Value>,
    cl: &GkeCluster,
) -> Result<(&'static str, Kind), GError> {
    Ok(match m {
        Mutation::Delete => ("DELETE_NODE_POOL", Kind::Delete),
        Mutation::Update => {
            apply_update(spec, req, cl)?;
            ("UPGRADE_NODES", Kind::Update)
        }
        Mutation::SetSize => {
            let n = int(req, "nodeCount")?
                .ok_or_else(|| invalid("Required field 'nodeCount' is missing."))?;
            if !(0..=1000).contains(&n) {
                return Err(invalid(format!(
                    "nodeCount must be between 0 and 1000 (got {n})."
                )));
            }
            spec.node_count = n;
            ("SET_NODE_POOL_SIZE", Kind::Update)
        }
        Mutation::SetAutoscaling | Mutation::ClusterAutoscaling => {
            let a = object(req, "autoscaling")?
                .ok_or_else(|| invalid("Required field 'autoscaling' is missing."))?;
            spec.autoscaling = parse_autoscaling(a)?;
            let t = if m == Mutation::ClusterAutoscaling {
                "UPDATE_CLUSTER"
            } else {
                "SET_NODE_POOL_AUTOSCALING"
            };
            (t, Kind::Update)
        }
        Mutation::SetManagement => {
            let mg = object(req, "management")?
                .ok_or_else(|| invalid("Required field 'management' is missing."))?;
            spec.auto_repair = boolean(mg, "autoRepair")?.unwrap_or(false);
            spec.auto_upgrade = boolean(mg, "autoUpgrade")?.unwrap_or(false);
            ("SET_NODE_POOL_MANAGEMENT", Kind::Update)
        }
    })
}

/// clusters.update: only `desiredNodePoolId` + `desiredNodePoolAutoscaling` touch node pools (that is
/// how `gcloud container node-pools update --enable-autoscaling` changes autoscaling).
pub(super) fn update_cluster(
    sb: &Sandbox,
    request: &ApiRequest,
    p: &str,
    l: &str,
    c: &str,
) -> Result<Response, GError> {
    let (base, fail) = (&request.base(), request.fail);
    let req = parse_body(&request.body)?;
    let Some(update) = object(&req, "update")? else {
        return Err(invalid("Required field 'update' is missing."));
    };
    if let Some(a) = object(update, "desiredNodePoolAutoscaling")? {
        let pool = string(update, "desiredNodePoolId")?.ok_or_else(|| {
            invalid("desiredNodePoolId must be set with desiredNodePoolAutoscaling.")
        })?;
        let mut body = Map::new();
        body.insert("autoscaling".into(), Value::Object(a.clone()));
        let at = PoolPath {
            project: p,
            location: l,
            cluster: c,
            pool,
        };
        return mutate(
            sb,
            request,
            &at,
            Value::Object(body).to_string().as_bytes(),
            Mutation::ClusterAutoscaling,
        );
    }
    sb.with_world_opts(fail, |w, ctx| {
        let cl = cluster(&w.gke, p, l, c)?.clone_shallow();
        check_cluster_ops(w, &cl, true)?;
        let op = new_op(w, ctx, &cl, None, "UPDATE_CLUSTER");
        Ok(json_response(StatusCode::OK, &op_json(base, &op)))
    })
}
