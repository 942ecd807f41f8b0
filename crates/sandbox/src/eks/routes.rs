//! How EKS's restJson1 paths map to operations (SigV4 first, as AWS authenticates before it
//! routes); reads are answered here, mutations in `operations.rs`.

use axum::http::{Method, StatusCode, Uri};
use axum::response::Response;
use serde_json::json;

use super::documents::{cluster_json, nodegroup_json, update_json};
use super::error::{AwsError, aws, invalid};
use super::operations::{create, delete, update_config, update_version};
use super::sigv4::sigv4_region;
use super::world::{cluster, ng_missing};
use crate::Sandbox;
use crate::api::{ApiRequest, CloudApi};
use crate::util::{json_response, query_get, segments};

/// The EKS API.
pub(crate) struct Eks;

impl CloudApi for Eks {
    type Error = AwsError;

    fn dispatch(sb: &Sandbox, req: &ApiRequest) -> Result<Response, AwsError> {
        dispatch(sb, req)
    }

    fn injected(status: StatusCode, message: String) -> AwsError {
        let kind = match status.as_u16() {
            429 => "ThrottlingException",
            503 => "ServiceUnavailableException",
            _ => "ServerException",
        };
        aws(status, kind, message)
    }
}

fn dispatch(sb: &Sandbox, req: &ApiRequest) -> Result<Response, AwsError> {
    let (method, uri) = (&req.method, &req.uri);
    let region = sigv4_region(&req.headers, "eks")?;
    let segs = segments(uri.path());
    let s: Vec<&str> = segs.iter().map(String::as_str).collect();
    let no_route = || {
        aws(
            StatusCode::NOT_FOUND,
            "UnknownOperationException",
            format!("No operation at {method} {}", uri.path()),
        )
    };
    match (method, s.as_slice()) {
        (&Method::GET, ["clusters"]) => sb.with_world(|w, _| {
            let names: Vec<&String> = w
                .eks
                .clusters
                .values()
                .filter(|c| c.region == region)
                .map(|c| &c.name)
                .collect();
            Ok(json_response(StatusCode::OK, &json!({ "clusters": names })))
        }),
        (&Method::GET, ["clusters", c]) => sb.with_world(|w, _| {
            Ok(json_response(
                StatusCode::OK,
                &json!({"cluster": cluster_json(cluster(&w.eks, &region, c)?)}),
            ))
        }),
        (&Method::POST, ["clusters", c, "node-groups"]) => create(sb, req, &region, c),
        (&Method::GET, ["clusters", c, "node-groups"]) => list(sb, &region, c, uri),
        (&Method::GET, ["clusters", c, "node-groups", ng]) => sb.with_world(|w, _| {
            let cl = cluster(&w.eks, &region, c)?;
            let n = cl.nodegroups.get(*ng).ok_or_else(|| ng_missing(c, ng))?;
            Ok(json_response(
                StatusCode::OK,
                &json!({"nodegroup": nodegroup_json(cl, n)}),
            ))
        }),
        (&Method::DELETE, ["clusters", c, "node-groups", ng]) => delete(sb, req, &region, c, ng),
        (&Method::POST, ["clusters", c, "node-groups", ng, "update-config"]) => {
            update_config(sb, req, &region, c, ng)
        }
        (&Method::POST, ["clusters", c, "node-groups", ng, "update-version"]) => {
            update_version(sb, req, &region, c, ng)
        }
        (&Method::GET, ["clusters", c, "updates"]) => sb.with_world(|w, _| {
            let cl = cluster(&w.eks, &region, c)?;
            let key = format!("{}/{}", cl.region, cl.name);
            let ng = query_get(uri.query(), "nodegroupName");
            let ids: Vec<&String> = w
                .eks
                .updates
                .values()
                .filter(|u| u.cluster_key == key && ng.as_ref().is_none_or(|n| *n == u.nodegroup))
                .map(|u| &u.id)
                .collect();
            Ok(json_response(StatusCode::OK, &json!({ "updateIds": ids })))
        }),
        (&Method::GET, ["clusters", c, "updates", id]) => sb.with_world(|w, _| {
            let cl = cluster(&w.eks, &region, c)?;
            let key = format!("{}/{}", cl.region, cl.name);
            let ng = query_get(uri.query(), "nodegroupName");
            let u =
                w.eks.updates.get(*id).filter(|u| {
                    u.cluster_key == key && ng.as_ref().is_none_or(|n| *n == u.nodegroup)
                });
            let u = u.ok_or_else(|| {
                aws(
                    StatusCode::NOT_FOUND,
                    "ResourceNotFoundException",
                    format!("No update found for ID: {id}."),
                )
                .with("clusterName", c)
            })?;
            Ok(json_response(
                StatusCode::OK,
                &json!({"update": update_json(u)}),
            ))
        }),
        _ => Err(no_route()),
    }
}

fn list(sb: &Sandbox, region: &str, c: &str, uri: &Uri) -> Result<Response, AwsError> {
    let max = match query_get(uri.query(), "maxResults") {
        None => 100,
        Some(m) => match m.parse::<usize>() {
            Ok(n) if (1..=100).contains(&n) => n,
            _ => {
                return Err(invalid(format!(
                    "maxResults must be between 1 and 100, got {m}."
                )));
            }
        },
    };
    let start = match query_get(uri.query(), "nextToken") {
        None => 0,
        Some(t) => t
            .parse::<usize>()
            .map_err(|_| invalid("The nextToken is invalid."))?,
    };
    sb.with_world(|w, _| {
        let cl = cluster(&w.eks, region, c)?;
        let names: Vec<&String> = cl.nodegroups.keys().skip(start).take(max).collect();
        let mut v = json!({ "nodegroups": names });
        if start + max < cl.nodegroups.len() {
            v["nextToken"] = json!((start + max).to_string());
        }
        Ok(json_response(StatusCode::OK, &v))
    })
}
