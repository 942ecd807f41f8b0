//! How GKE's v1 paths map to operations: resources by path, custom methods as `name:verb` in the
//! last segment; reads are answered here, mutations start Operations in `operations.rs`. Compute
//! Engine's instance group managers, which tell a pool's current size, are `compute.rs`.

use axum::http::{Method, StatusCode};
use axum::response::Response;
use serde_json::{Value, json};

use super::documents::{cluster_json, op_json, pool_json};
use super::error::{GError, gerr};
use super::operations::{Mutation, PoolPath, create, mutate, update_cluster};
use super::world::{cluster, pool_missing};
use crate::Sandbox;
use crate::api::{ApiRequest, CloudApi};
use crate::util::{json_response, segments};

/// The GKE v1 API.
pub(crate) struct Gke;

impl CloudApi for Gke {
    type Error = GError;

    fn dispatch(sb: &Sandbox, req: &ApiRequest) -> Result<Response, GError> {
        dispatch(sb, req)
    }

    fn injected(status: StatusCode, message: String) -> GError {
        gerr(status.as_u16(), message)
    }
}

fn dispatch(sb: &Sandbox, req: &ApiRequest) -> Result<Response, GError> {
    let method = &req.method;
    let segs = segments(req.uri.path());
    let s: Vec<&str> = segs.iter().map(String::as_str).collect();
    match s.as_slice() {
        ["v1", "projects", p, "locations", l, "clusters"] if method == Method::GET => {
            list_clusters(sb, p, l)
        }
        ["v1", "projects", p, "locations", l, "clusters", c] => on_cluster(sb, req, p, l, c),
        [
            "v1",
            "projects",
            p,
            "locations",
            l,
            "clusters",
            c,
            "nodePools",
        ] => on_pools(sb, req, p, l, c),
        [
            "v1",
            "projects",
            project,
            "locations",
            location,
            "clusters",
            cluster,
            "nodePools",
            np,
        ] => {
            let (pool, verb) = split_verb(np);
            let at = PoolPath {
                project,
                location,
                cluster,
                pool,
            };
            on_pool(sb, req, &at, verb)
        }
        ["v1", "projects", p, "locations", l, "operations"] if method == Method::GET => {
            list_operations(sb, req, p, l)
        }
        ["v1", "projects", p, "locations", l, "operations", op] if method == Method::GET => {
            get_operation(sb, req, p, l, op)
        }
        _ => Err(gerr(404, format!("Not found: {}.", req.uri.path()))),
    }
}

/// The answer to a method a resource does not have.
fn not_allowed(req: &ApiRequest) -> GError {
    gerr(
        405,
        format!(
            "Method {} is not supported on {}.",
            req.method,
            req.uri.path()
        ),
    )
}

/// clusters.list: location "-" matches all zones and all regions, and each Cluster of the answer
/// carries its `nodePools` (GKE REST reference, projects.locations.clusters.list and
/// ListClustersResponse). `missingZones` names zones GKE could not reach; the sandbox reaches all
/// of them, so it is left out.
fn list_clusters(sb: &Sandbox, p: &str, l: &str) -> Result<Response, GError> {
    sb.with_world(|w, _| {
        let list: Vec<Value> = w
            .gke
            .clusters
            .values()
            .filter(|c| c.project == *p && (c.location == *l || l == "-"))
            .map(cluster_json)
            .collect();
        Ok(json_response(StatusCode::OK, &json!({ "clusters": list })))
    })
}

/// clusters.get and clusters.update.
fn on_cluster(
    sb: &Sandbox,
    req: &ApiRequest,
    p: &str,
    l: &str,
    c: &str,
) -> Result<Response, GError> {
    let (cname, verb) = split_verb(c);
    match (&req.method, verb) {
        (&Method::GET, None) => sb.with_world(|w, _| {
            Ok(json_response(
                StatusCode::OK,
                &cluster_json(cluster(&w.gke, p, l, cname)?),
            ))
        }),
        (&Method::PUT, None) => update_cluster(sb, req, p, l, cname),
        _ => Err(not_allowed(req)),
    }
}

/// nodePools.list and nodePools.create.
fn on_pools(sb: &Sandbox, req: &ApiRequest, p: &str, l: &str, c: &str) -> Result<Response, GError> {
    match req.method {
        Method::GET => sb.with_world(|w, _| {
            let c = cluster(&w.gke, p, l, c)?;
            let list: Vec<Value> = c.pools.values().map(|np| pool_json(c, np)).collect();
            Ok(json_response(StatusCode::OK, &json!({ "nodePools": list })))
        }),
        Method::POST => create(sb, req, p, l, c),
        _ => Err(not_allowed(req)),
    }
}

/// nodePools.get, update and delete, and the pool's custom methods.
fn on_pool(
    sb: &Sandbox,
    req: &ApiRequest,
    at: &PoolPath,
    verb: Option<&str>,
) -> Result<Response, GError> {
    let mutation = match (&req.method, verb) {
        (&Method::GET, None) => {
            return sb.with_world(|w, _| {
                let c = cluster(&w.gke, at.project, at.location, at.cluster)?;
                let pool = c
                    .pools
                    .get(at.pool)
                    .ok_or_else(|| pool_missing(c, at.pool))?;
                Ok(json_response(StatusCode::OK, &pool_json(c, pool)))
            });
        }
        (&Method::PUT, None) => Mutation::Update,
        (&Method::DELETE, None) => Mutation::Delete,
        (&Method::POST, Some("setSize")) => Mutation::SetSize,
        (&Method::POST, Some("setAutoscaling")) => Mutation::SetAutoscaling,
        (&Method::POST, Some("setManagement")) => Mutation::SetManagement,
        _ => return Err(not_allowed(req)),
    };
    mutate(sb, req, at, &req.body, mutation)
}

fn list_operations(sb: &Sandbox, req: &ApiRequest, p: &str, l: &str) -> Result<Response, GError> {
    let base = &req.base();
    sb.with_world(|w, _| {
        let ops: Vec<Value> = w
            .gke
            .ops
            .values()
            .filter(|o| o.project == *p && (o.location == *l || l == "-"))
            .map(|o| op_json(base, o))
            .collect();
        Ok(json_response(StatusCode::OK, &json!({ "operations": ops })))
    })
}

fn get_operation(
    sb: &Sandbox,
    req: &ApiRequest,
    p: &str,
    l: &str,
    op: &str,
) -> Result<Response, GError> {
    let base = &req.base();
    sb.with_world(|w, _| {
        let o = w
            .gke
            .ops
            .get(op)
            .filter(|o| o.project == *p && o.location == *l)
            .ok_or_else(|| gerr(404, format!("Not found: operation {op}.")))?;
        Ok(json_response(StatusCode::OK, &op_json(base, o)))
    })
}

/// `name:verb` custom methods share the resource's path segment.
fn split_verb(seg: &str) -> (&str, Option<&str>) {
    match seg.split_once(':') {
        Some((n, v)) => (n, Some(v)),
        None => (seg, None),
    }
}
