//! ARM's asynchronous operations: a PUT or DELETE answers at once with `Azure-AsyncOperation` (and,
//! for DELETE, `Location`) and `Retry-After`; the operation document then reports InProgress until
//! the shared settle mechanism finishes it as Succeeded, Failed (fault injection) or Canceled (its
//! pool changed under it), following the ARM async-operation guidelines.

use axum::http::{HeaderValue, StatusCode};
use axum::response::Response;
use serde_json::json;

use super::changes::immutable_changes;
use super::documents::{pool_json, pool_nodes};
use super::error::{ArmError, err, error_body};
use super::validate::parse_props;
use super::world::{
    AgentPool, AksCluster, AksWorld, ArmOp, MAX_AGENT_POOLS, Pending, cluster_key, find_cluster,
};
use crate::api::ApiRequest;
use crate::dates::rfc3339_millis;
use crate::nodes::NodeEvent;
use crate::operations::{Kind, Operations, Queue, retry_after_secs};
use crate::util::json_response;
use crate::{Ctx, Sandbox, World};

impl Operations for AksWorld {
    type Entry = (u64, String);

    fn queue(&mut self) -> &mut Queue<(u64, String)> {
        &mut self.pending
    }

    fn finish(&mut self, (_, id): (u64, String), now: u64, events: &mut Vec<NodeEvent>) -> bool {
        let Some(op) = self.ops.get_mut(&id) else {
            return false;
        };
        if op.end.is_some() {
            return false;
        }
        let Some(cluster) = self.clusters.get_mut(&op.cluster) else {
            op.status = "Canceled".into();
            op.end = Some(now);
            return true;
        };
        let Some(pool) = cluster.pools.get_mut(&op.pool) else {
            op.status = "Canceled".into();
            op.end = Some(now);
            return true;
        };
        let Some(p) = pool.pending.clone().filter(|p| p.op == op.id) else {
            // Superseded (e.g. a delete while creating).
            op.status = "Canceled".into();
            op.end = Some(now);
            return true;
        };
        op.end = Some(now);
        pool.pending = None;
        if p.fail {
            op.status = "Failed".into();
            op.error = Some((
                "AllocationFailed".into(),
                format!(
                    "Allocation failed. We do not have sufficient capacity for the requested VM \
                        size {} in this region (sandbox fault injection).",
                    pool.props.vm_size
                ),
            ));
            pool.provisioning_state = "Failed".into();
            return true;
        }
        op.status = "Succeeded".into();
        if p.kind == Kind::Delete {
            cluster.pools.remove(&op.pool);
            events.push(NodeEvent::Deleted {
                cloud: "aks",
                cluster: cluster.name.clone(),
                pool: op.pool.clone(),
            });
        } else {
            pool.provisioning_state = "Succeeded".into();
            events.push(NodeEvent::Changed(pool_nodes(&cluster.name, pool)));
        }
        true
    }
}

fn async_headers(
    r: &mut Response,
    base: &str,
    c: &AksCluster,
    op: &str,
    api_version: &str,
    retry: u64,
    location: bool,
) {
    let prefix = format!(
        "{base}/subscriptions/{}/providers/Microsoft.ContainerService/locations/{}",
        c.subscription, c.location
    );
    let h = r.headers_mut();
    if let Ok(v) = HeaderValue::from_str(&format!(
        "{prefix}/operations/{op}?api-version={api_version}"
    )) {
        h.insert("azure-asyncoperation", v);
    }
    if location
        && let Ok(v) = HeaderValue::from_str(&format!(
            "{prefix}/operationresults/{op}?api-version={api_version}"
        ))
    {
        h.insert("location", v);
    }
    h.insert("retry-after", HeaderValue::from(retry));
}

fn new_op(w: &mut World, ctx: &mut Ctx, key: &str, pool: &str, kind: Kind) -> Pending {
    let id = format!(
        "{:08x}-0000-4000-8000-{:012x}",
        ctx.new_id(),
        fastrand::u64(..) & 0xffff_ffff_ffff
    );
    let deadline = ctx.deadline();
    w.aks.pending.add(ctx, (deadline, id.clone()));
    w.aks.ops.insert(
        id.clone(),
        ArmOp {
            id: id.clone(),
            kind,
            status: "InProgress".into(),
            start: ctx.now,
            end: None,
            deadline,
            error: None,
            cluster: key.into(),
            pool: pool.into(),
        },
    );
    Pending {
        op: id,
        kind,
        deadline,
        fail: ctx.fail_operation,
    }
}

pub(super) fn put_pool(
    sb: &Sandbox,
    req: &ApiRequest,
    sub: &str,
    rg: &str,
    cluster: &str,
    name: &str,
    api_version: &str,
) -> Result<Response, ArmError> {
    let base = req.base();
    sb.with_world_opts(req.fail, |w, ctx| {
        let key = cluster_key(sub, rg, cluster);
        let c = find_cluster(&mut w.aks, sub, rg, cluster)?;
        let existing = c.pools.get(name).cloned();
        // A PUT of a pool not yet made (or whose creation is pending or failed) asks for a create.
        if existing
            .as_ref()
            .is_none_or(|p| matches!(p.provisioning_state.as_str(), "Creating" | "Failed"))
        {
            let cluster_name = c.name.clone();
            w.count_create_request("aks", &cluster_name, name);
        }
        let c = find_cluster(&mut w.aks, sub, rg, cluster)?;
        if let Some(p) = &existing
            && let Some(pending) = &p.pending
        {
            let what = pending.kind.in_progress();
            return Err(err(
                StatusCode::CONFLICT,
                "OperationNotAllowed",
                format!(
                    "Operation is not allowed because there's an in progress {what} agent \
                        pool operation on agent pool '{name}'. Please wait for it to finish before \
                        starting a new operation."
                ),
            ));
        }
        // The documented limit of node pools per cluster. AKS does not publish the error it answers
        // a create past it with; this is ARM's code for a limit reached (QuotaExceeded), in ARM's shape.
        if existing.is_none() && c.pools.len() >= MAX_AGENT_POOLS {
            return Err(err(
                StatusCode::BAD_REQUEST,
                "QuotaExceeded",
                format!(
                    "Cannot add agent pool '{name}': managed cluster '{}' already has {} agent \
                    pools, the maximum (maxAgentPools) a cluster can have.",
                    c.name,
                    c.pools.len()
                ),
            ));
        }
        let props = parse_props(name, &req.body, existing.as_ref().map(|p| &p.props))?;
        if let Some(old) = &existing
            && let Some((field, a, b)) = immutable_changes(&old.props, &props)
        {
            return Err(ArmError {
                status: StatusCode::BAD_REQUEST,
                code: "PropertyChangeNotAllowed",
                message: format!("Changing property '{field}' is not allowed (from {a} to {b})."),
                target: Some(field.into()),
            });
        }
        let (kind, status, state) = if existing.is_some() {
            (Kind::Update, StatusCode::OK, "Updating")
        } else {
            (Kind::Create, StatusCode::CREATED, "Creating")
        };
        if kind == Kind::Create {
            let cluster_name = c.name.clone();
            w.count_create("aks", &cluster_name, name);
        }
        let pending = new_op(w, ctx, &key, name, kind);
        let op = pending.op.clone();
        let c = w.aks.clusters.get_mut(&key).expect("found above");
        let autoscaled_count = existing
            .as_ref()
            .and_then(|p| p.autoscaled_count)
            .filter(|_| props.enable_auto_scaling);
        let pool = AgentPool {
            name: name.to_string(),
            props,
            provisioning_state: state.into(),
            pending: Some(pending),
            // The autoscaler's count stays while autoscaling does (a PUT that keeps it on).
            autoscaled_count,
        };
        let mut r = json_response(status, &pool_json(c, &pool));
        c.pools.insert(name.to_string(), pool);
        async_headers(
            &mut r,
            &base,
            c,
            &op,
            api_version,
            retry_after_secs(ctx.now, ctx.deadline()),
            false,
        );
        Ok(r)
    })
}

pub(super) fn delete_pool(
    sb: &Sandbox,
    req: &ApiRequest,
    sub: &str,
    rg: &str,
    cluster: &str,
    name: &str,
    api_version: &str,
) -> Result<Response, ArmError> {
    let base = req.base();
    sb.with_world_opts(req.fail, |w, ctx| {
        let key = cluster_key(sub, rg, cluster);
        let c = find_cluster(&mut w.aks, sub, rg, cluster)?;
        let Some(p) = c.pools.get(name) else {
            // ARM DELETE is idempotent: a missing resource is 204.
            return Ok(Response::builder().status(StatusCode::NO_CONTENT).body(axum::body::Body::empty()).unwrap_or_default());
        };
        if let Some(pending) = &p.pending
            && pending.kind == Kind::Delete {
                let op = pending.op.clone();
                let deadline = pending.deadline;
                let mut r = Response::builder().status(StatusCode::ACCEPTED).body(axum::body::Body::empty()).unwrap_or_default();
                async_headers(&mut r, &base, c, &op, api_version, retry_after_secs(ctx.now, deadline), true);
                return Ok(r);
            }
        if p.props.mode == "System" && !c.pools.values().any(|o| o.name != name && o.props.mode == "System") {
            return Err(err(StatusCode::BAD_REQUEST, "OperationNotAllowed", format!(
                "Cannot delete agent pool '{name}': it is the last System mode agent pool of the \
                cluster.")));
        }
        let pending = new_op(w, ctx, &key, name, Kind::Delete);
        let op = pending.op.clone();
        let c = w.aks.clusters.get_mut(&key).expect("found above");
        let pool = c.pools.get_mut(name).expect("found above");
        pool.pending = Some(pending);
        pool.provisioning_state = "Deleting".into();
        let mut r = Response::builder().status(StatusCode::ACCEPTED).body(axum::body::Body::empty()).unwrap_or_default();
        async_headers(&mut r, &base, c, &op, api_version, retry_after_secs(ctx.now, ctx.deadline()), true);
        Ok(r)
    })
}

pub(super) fn operation(
    sb: &Sandbox,
    req: &ApiRequest,
    segs: &[String],
    result: bool,
    api_version: &str,
) -> Result<Response, ArmError> {
    let base = req.base();
    let id = &segs[7];
    sb.with_world(|w, ctx| {
        let op = w.aks.ops.get(id).cloned().ok_or_else(|| err(StatusCode::NOT_FOUND, "NotFound", format!("Operation '{id}' was not found.")))?;
        if !result {
            let mut doc = json!({"id": format!("/subscriptions/{}/providers/Microsoft.ContainerService/locations/{}/operations/{}", segs[1], segs[5], op.id),
                "name": op.id, "status": op.status, "startTime": rfc3339_millis(op.start)});
            if let Some(e) = op.end {
                doc["endTime"] = json!(rfc3339_millis(e));
            }
            if let Some((code, message)) = &op.error {
                doc["error"] = json!({"code": code, "message": message});
            }
            let mut r = json_response(StatusCode::OK, &doc);
            if op.end.is_none() {
                r.headers_mut().insert("retry-after", HeaderValue::from(retry_after_secs(ctx.now, op.deadline)));
            }
            return Ok(r);
        }
        // Location polling: 202 while running, then the final result.
        if op.end.is_none() {
            let mut r = Response::builder().status(StatusCode::ACCEPTED).body(axum::body::Body::empty()).unwrap_or_default();
            if let Ok(v) = HeaderValue::from_str(&format!(
                "{base}/subscriptions/{}/providers/Microsoft.ContainerService/locations/{}/operationresults/{}?api-version={api_version}", segs[1], segs[5], op.id)) {
                r.headers_mut().insert("location", v);
            }
            r.headers_mut().insert("retry-after", HeaderValue::from(retry_after_secs(ctx.now, op.deadline)));
            return Ok(r);
        }
        if let Some((code, message)) = &op.error {
            return Ok(json_response(StatusCode::BAD_REQUEST, &error_body(code, message)));
        }
        if op.kind == Kind::Delete {
            return Ok(Response::builder().status(StatusCode::NO_CONTENT).body(axum::body::Body::empty()).unwrap_or_default());
        }
        let c = w.aks.clusters.get(&op.cluster);
        match c.and_then(|c| c.pools.get(&op.pool).map(|p| pool_json(c, p))) {
            Some(doc) => Ok(json_response(StatusCode::OK, &doc)),
            None => Ok(Response::builder().status(StatusCode::NO_CONTENT).body(axum::body::Body::empty()).unwrap_or_default()),
        }
    })
}
