//! How GKE's v1 paths map to operations: resources by path, custom methods as `name:verb` in the
//! last segment; reads are answered here, mutations start Operations in `operations.rs`. Also
//! Compute Engine's instance group managers, the one place that tells a pool's current size.

use axum::extract::State;
use axum::http::{Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::documents::{
    cluster_json, cluster_path, instance_group_name, op_json, pool_json, zone_sizes,
};
use super::operations::{Mutation, create, mutate, update_cluster};
use super::{GError, GkeCluster, gerr};
use crate::api::{ApiRequest, CloudApi};
use crate::util::{json_response, segments};
use crate::{Sandbox, World};

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
    let (method, uri, body) = (&req.method, &req.uri, &req.body[..]);
    let base = &req.base();
    let segs = segments(uri.path());
    let s: Vec<&str> = segs.iter().map(String::as_str).collect();
    let not_found = || gerr(404, format!("Not found: {}.", uri.path()));
    match s.as_slice() {
        ["v1", "projects", p, "locations", l, "clusters"] if method == Method::GET => sb
            .with_world(|w, _| {
                let list: Vec<Value> = w
                    .gke
                    .clusters
                    .values()
                    .filter(|c| c.project == *p && (c.location == *l || *l == "-"))
                    .map(cluster_json)
                    .collect();
                Ok(json_response(StatusCode::OK, &json!({ "clusters": list })))
            }),
        ["v1", "projects", p, "locations", l, "clusters", c] => {
            let (cname, verb) = split_verb(c);
            match (method, verb) {
                (&Method::GET, None) => sb.with_world(|w, _| {
                    Ok(json_response(
                        StatusCode::OK,
                        &cluster_json(cluster(w, p, l, cname)?),
                    ))
                }),
                (&Method::PUT, None) => update_cluster(sb, req, p, l, cname),
                _ => Err(gerr(
                    405,
                    format!("Method {method} is not supported on {}.", uri.path()),
                )),
            }
        }
        [
            "v1",
            "projects",
            p,
            "locations",
            l,
            "clusters",
            c,
            "nodePools",
        ] => match *method {
            Method::GET => sb.with_world(|w, _| {
                let c = cluster(w, p, l, c)?;
                let list: Vec<Value> = c.pools.values().map(|np| pool_json(c, np)).collect();
                Ok(json_response(StatusCode::OK, &json!({ "nodePools": list })))
            }),
            Method::POST => create(sb, req, p, l, c),
            _ => Err(gerr(
                405,
                format!("Method {method} is not supported on {}.", uri.path()),
            )),
        },
        [
            "v1",
            "projects",
            p,
            "locations",
            l,
            "clusters",
            c,
            "nodePools",
            np,
        ] => {
            let (name, verb) = split_verb(np);
            match (method, verb) {
                (&Method::GET, None) => sb.with_world(|w, _| {
                    let c = cluster(w, p, l, c)?;
                    let pool = c.pools.get(name).ok_or_else(|| pool_missing(c, name))?;
                    Ok(json_response(StatusCode::OK, &pool_json(c, pool)))
                }),
                (&Method::PUT, None) => mutate(sb, req, p, l, c, name, body, Mutation::Update),
                (&Method::DELETE, None) => mutate(sb, req, p, l, c, name, body, Mutation::Delete),
                (&Method::POST, Some("setSize")) => {
                    mutate(sb, req, p, l, c, name, body, Mutation::SetSize)
                }
                (&Method::POST, Some("setAutoscaling")) => {
                    mutate(sb, req, p, l, c, name, body, Mutation::SetAutoscaling)
                }
                (&Method::POST, Some("setManagement")) => {
                    mutate(sb, req, p, l, c, name, body, Mutation::SetManagement)
                }
                _ => Err(gerr(
                    405,
                    format!("Method {method} is not supported on {}.", uri.path()),
                )),
            }
        }
        ["v1", "projects", p, "locations", l, "operations"] if method == Method::GET => sb
            .with_world(|w, _| {
                let ops: Vec<Value> = w
                    .gke
                    .ops
                    .values()
                    .filter(|o| o.project == *p && (o.location == *l || *l == "-"))
                    .map(|o| op_json(base, o))
                    .collect();
                Ok(json_response(StatusCode::OK, &json!({ "operations": ops })))
            }),
        ["v1", "projects", p, "locations", l, "operations", op] if method == Method::GET => sb
            .with_world(|w, _| {
                let o = w
                    .gke
                    .ops
                    .get(*op)
                    .filter(|o| o.project == *p && o.location == *l)
                    .ok_or_else(|| gerr(404, format!("Not found: operation {op}.")))?;
                Ok(json_response(StatusCode::OK, &op_json(base, o)))
            }),
        _ => Err(not_found()),
    }
}

/// `name:verb` custom methods share the resource's path segment.
fn split_verb(seg: &str) -> (&str, Option<&str>) {
    match seg.split_once(':') {
        Some((n, v)) => (n, Some(v)),
        None => (seg, None),
    }
}

pub(super) fn cluster<'a>(
    w: &'a World,
    p: &str,
    l: &str,
    c: &str,
) -> Result<&'a GkeCluster, GError> {
    w.gke.clusters.get(&format!("{p}/{l}/{c}")).ok_or_else(|| {
        gerr(
            404,
            format!("Not found: projects/{p}/locations/{l}/clusters/{c}."),
        )
    })
}

pub(super) fn pool_missing(c: &GkeCluster, name: &str) -> GError {
    gerr(
        404,
        format!("Not found: {}/nodePools/{name}.", cluster_path(c)),
    )
}

/// Compute Engine's instance group managers of the pools, one per zone of a pool (`GET
/// /compute/v1/projects/{p}/zones/{z}/instanceGroupManagers/{name}`), reduced to what tells a pool's
/// current size: GKE's node pool resource keeps only `initialNodeCount`, so clients read each
/// zone's `targetSize` here, as the google provider does.
pub(crate) async fn instance_group_manager(State(sb): State<Sandbox>, uri: Uri) -> Response {
    let parts: Vec<&str> = uri.path().trim_matches('/').split('/').collect();
    let found = match parts.as_slice() {
        [
            "compute",
            "v1",
            "projects",
            project,
            "zones",
            zone,
            "instanceGroupManagers",
            name,
        ] => sb.with_world(|w, _| {
            w.gke.clusters.values().find_map(|c| {
                if c.project != *project {
                    return None;
                }
                let zones = c.zones();
                c.pools.values().find_map(|p| {
                    zone_sizes(&zones, p).into_iter().find_map(|(z, size)| {
                        (z == *zone && instance_group_name(&c.name, &p.name, &z) == *name)
                            .then(|| (size, (*name).to_string(), z))
                    })
                })
            })
        }),
        _ => None,
    };
    match found {
        Some((size, name, zone)) => {
            axum::response::IntoResponse::into_response(axum::Json(json!({
                "kind": "compute#instanceGroupManager",
                "name": name,
                "zone": zone,
                "targetSize": size,
            })))
        }
        None => gerr(404, format!("The resource '{}' was not found", uri.path())).into_response(),
    }
}
