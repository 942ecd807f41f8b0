//! How ARM routes a request: it authenticates the bearer token first, then checks the
//! api-version, then matches the resource path case-insensitively; reads of clusters and pools live
//! here, mutations in `operations.rs`.

use axum::http::{Method, StatusCode, Uri};
use axum::response::Response;
use serde_json::{Value, json};

use super::documents::pool_json;
use super::error::{ArmError, err};
use super::operations::{delete_pool, operation, put_pool};
use super::world::{KUBERNETES_VERSION, MAX_AGENT_POOLS, MIN_API_VERSION, find_cluster};
use crate::Sandbox;
use crate::api::{ApiRequest, CloudApi};
use crate::util::{json_response, query_get, segments};

/// The ARM agentPools API.
pub(crate) struct Arm;

impl CloudApi for Arm {
    type Error = ArmError;

    fn dispatch(sb: &Sandbox, req: &ApiRequest) -> Result<Response, ArmError> {
        dispatch(sb, req)
    }

    fn injected(status: StatusCode, message: String) -> ArmError {
        let code = match status.as_u16() {
            429 => "TooManyRequests",
            503 => "ServiceUnavailable",
            _ => "InternalServerError",
        };
        err(status, code, message)
    }
}

fn dispatch(sb: &Sandbox, req: &ApiRequest) -> Result<Response, ArmError> {
    let (method, uri, headers) = (&req.method, &req.uri, &req.headers);
    // ARM authenticates before it routes.
    let auth = headers.get("authorization").and_then(|h| h.to_str().ok());
    let Some(auth) = auth else {
        return Err(err(
            StatusCode::UNAUTHORIZED,
            "AuthenticationFailed",
            "Authentication failed. The 'Authorization' header is missing.",
        ));
    };
    let token = auth
        .strip_prefix("Bearer ")
        .or_else(|| auth.strip_prefix("bearer "))
        .map(str::trim);
    let Some(token) = token else {
        return Err(err(
            StatusCode::UNAUTHORIZED,
            "AuthenticationFailed",
            "Authentication failed. The 'Authorization' header is provided in an invalid format.",
        ));
    };
    if !sb.with_world(|w, _| w.aks.tokens.contains(token)) {
        return Err(err(
            StatusCode::UNAUTHORIZED,
            "InvalidAuthenticationToken",
            "The access token is invalid.",
        ));
    }
    let api_version = query_get(uri.query(), "api-version");
    let Some(api_version) = api_version else {
        return Err(err(
            StatusCode::BAD_REQUEST,
            "MissingApiVersionParameter",
            "The api-version query parameter (?api-version=) is required for all requests.",
        ));
    };
    let segs = segments(uri.path());
    let lower: Vec<String> = segs.iter().map(|s| s.to_ascii_lowercase()).collect();
    let l: Vec<&str> = lower.iter().map(String::as_str).collect();
    match l.as_slice() {
        [
            "subscriptions",
            _,
            "providers",
            "microsoft.containerservice",
            "locations",
            _,
            kind @ ("operations" | "operationresults"),
            _,
        ] => {
            check_api_version(&api_version, "locations/operations")?;
            operation(sb, req, &segs, kind == &"operationresults", &api_version)
        }
        [
            "subscriptions",
            _,
            "resourcegroups",
            _,
            "providers",
            "microsoft.containerservice",
            "managedclusters",
            _,
            "agentpools",
            rest @ ..,
        ] => {
            check_api_version(&api_version, "managedClusters/agentPools")?;
            let (sub, rg, cluster) = (&segs[1], &segs[3], &segs[7]);
            match (rest, method) {
                ([], &Method::GET) => list(sb, req, sub, rg, cluster),
                ([_], &Method::GET) => get_pool(sb, sub, rg, cluster, &segs[9]),
                ([_], &Method::PUT) => put_pool(sb, req, sub, rg, cluster, &segs[9], &api_version),
                ([_], &Method::DELETE) => {
                    delete_pool(sb, req, sub, rg, cluster, &segs[9], &api_version)
                }
                ([] | [_], _) => Err(err(
                    StatusCode::METHOD_NOT_ALLOWED,
                    "MethodNotAllowed",
                    format!("The method '{method}' is not allowed on this resource."),
                )),
                _ => Err(no_route(uri)),
            }
        }
        [
            "subscriptions",
            _,
            "resourcegroups",
            _,
            "providers",
            "microsoft.containerservice",
            "managedclusters",
            _,
        ] if method == Method::GET => {
            check_api_version(&api_version, "managedClusters")?;
            get_cluster(sb, &segs[1], &segs[3], &segs[7])
        }
        _ => Err(no_route(uri)),
    }
}

fn no_route(uri: &Uri) -> ArmError {
    err(
        StatusCode::NOT_FOUND,
        "InvalidResourceType",
        format!(
            "The resource type for '{}' could not be found in the namespace of this sandbox.",
            uri.path()
        ),
    )
}

/// ARM rejects api-versions the resource provider does not register; we serve 2025-10-01 and later.
fn check_api_version(v: &str, rtype: &str) -> Result<(), ArmError> {
    let date = v.get(..10).unwrap_or("");
    let well_formed = date.len() == 10
        && date.bytes().enumerate().all(|(i, b)| {
            if i == 4 || i == 7 {
                b == b'-'
            } else {
                b.is_ascii_digit()
            }
        })
        && (v.len() == 10 || v[10..].starts_with("-preview"));
    if !well_formed {
        return Err(err(
            StatusCode::BAD_REQUEST,
            "InvalidApiVersionParameter",
            format!(
                "The api-version '{v}' is invalid. The supported versions are '{MIN_API_VERSION}' \
                    and later."
            ),
        ));
    }
    if date < MIN_API_VERSION {
        return Err(err(
            StatusCode::BAD_REQUEST,
            "NoRegisteredProviderFound",
            format!(
                "No registered resource provider found for location 'eastus' and API version '{v}' \
                    for type '{rtype}'. The supported api-versions are '{MIN_API_VERSION}' and \
                    later."
            ),
        ));
    }
    Ok(())
}

fn pool_not_found(name: &str) -> ArmError {
    err(
        StatusCode::NOT_FOUND,
        "NotFound",
        format!("Could not find agent pool '{name}' in the managed cluster."),
    )
}

/// The managed cluster's document. Its `agentPoolProfiles` hold every agent pool of the cluster,
/// each the agent pool's `properties` with its `name` beside them: the AKS REST specification
/// (azure-rest-api-specs, containerservice managedClusters.json) declares
/// ManagedClusterAgentPoolProfile as ManagedClusterAgentPoolProfileProperties and a name, the
/// same properties an AgentPool resource carries.
fn get_cluster(sb: &Sandbox, sub: &str, rg: &str, cluster: &str) -> Result<Response, ArmError> {
    sb.with_world(|w, _| {
        let c = find_cluster(&mut w.aks, sub, rg, cluster)?;
        let profiles: Vec<Value> = c.pools.values().map(|p| {
            let mut v = pool_json(c, p)["properties"].clone();
            v["name"] = json!(p.name);
            v
        }).collect();
        Ok(json_response(
            StatusCode::OK,
            &json!({
                "id": format!("/subscriptions/{}/resourcegroups/{}/providers/Microsoft.ContainerService/managedClusters/{}", c.subscription, c.resource_group, c.name),
                "name": c.name, "type": "Microsoft.ContainerService/ManagedClusters", "location": c.location,
                "properties": {"provisioningState": "Succeeded", "kubernetesVersion": KUBERNETES_VERSION,
                    "currentKubernetesVersion": KUBERNETES_VERSION, "dnsPrefix": c.name, "agentPoolProfiles": profiles,
                    "maxAgentPools": MAX_AGENT_POOLS,
                    "powerState": {"code": "Running"}}
            }),
        ))
    })
}

/// Agent pools per page of a list. The REST specification declares the list pageable
/// (`x-ms-pageable` with `nextLinkName: nextLink` on AgentPools_List in azure-rest-api-specs
/// containerservice), and ARM's RPC has every list answer a page whose `nextLink` is the absolute
/// URL of the next one; the service's own page size is not published. The twin pages at 50, so that
/// a cluster near AKS's limit of 100 pools takes two pages and a client that stops at the first
/// one loses pools.
const LIST_PAGE: usize = 50;

fn list(
    sb: &Sandbox,
    req: &ApiRequest,
    sub: &str,
    rg: &str,
    cluster: &str,
) -> Result<Response, ArmError> {
    let skip = match query_get(req.uri.query(), "$skiptoken") {
        None => 0,
        Some(t) => t.parse::<usize>().map_err(|_| {
            err(
                StatusCode::BAD_REQUEST,
                "InvalidSkipToken",
                format!("The skip token '{t}' is not valid."),
            )
        })?,
    };
    sb.with_world(|w, _| {
        let c = find_cluster(&mut w.aks, sub, rg, cluster)?;
        let value: Vec<Value> = c
            .pools
            .values()
            .skip(skip)
            .take(LIST_PAGE)
            .map(|p| pool_json(c, p))
            .collect();
        let mut page = json!({ "value": value });
        if skip + LIST_PAGE < c.pools.len() {
            let api_version = query_get(req.uri.query(), "api-version").unwrap_or_default();
            page["nextLink"] = json!(format!(
                "{}{}?api-version={api_version}&$skiptoken={}",
                req.base(),
                req.uri.path(),
                skip + LIST_PAGE
            ));
        }
        Ok(json_response(StatusCode::OK, &page))
    })
}

fn get_pool(
    sb: &Sandbox,
    sub: &str,
    rg: &str,
    cluster: &str,
    name: &str,
) -> Result<Response, ArmError> {
    sb.with_world(|w, _| {
        let c = find_cluster(&mut w.aks, sub, rg, cluster)?;
        let p = c.pools.get(name).ok_or_else(|| pool_not_found(name))?;
        Ok(json_response(StatusCode::OK, &pool_json(c, p)))
    })
}
