//! Compute Engine's instance group managers of GKE's pools, one per zone of a pool: the one place
//! that tells a pool's current size, since GKE's node pool resource keeps only
//! `initialNodeCount`.

use axum::extract::State;
use axum::http::Uri;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::documents::{instance_group_name, zone_sizes};
use super::error::{GError, gerr};
use crate::{Sandbox, World};

/// Compute Engine's instance group managers of the pools, one per zone of a pool, reduced to what
/// tells a pool's current size: GKE's node pool resource keeps only `initialNodeCount`, so clients
/// read each zone's `targetSize` here, as the google provider does. Three reads are served:
/// - `GET /compute/v1/projects/{p}/zones/{z}/instanceGroupManagers/{name}`: one manager.
/// - `GET /compute/v1/projects/{p}/zones/{z}/instanceGroupManagers`: a zone's managers,
///   `instanceGroupManagers.list` (<https://cloud.google.com/compute/docs/reference/rest/v1/instanceGroupManagers/list>):
///   `items`, paged by `maxResults` (at most 500, the default) and `pageToken`/`nextPageToken`.
/// - `GET /compute/v1/projects/{p}/aggregated/instanceGroupManagers`: every zone's,
///   `instanceGroupManagers.aggregatedList`
///   (<https://cloud.google.com/compute/docs/reference/rest/v1/instanceGroupManagers/aggregatedList>):
///   `items` is a map keyed by scope (`zones/{zone}`), each value `{"instanceGroupManagers": [...]}`
///   or, for a scope with nothing on this page, `{"warning": {"code": "NO_RESULTS_ON_PAGE", ...}}`;
///   `maxResults` counts managers across scopes and pages go on by `nextPageToken`. The scopes
///   listed are the zones of the project's clusters (the real API lists every zone and region).
///
/// `filter` is refused with 400 rather than ignored: the sandbox does not evaluate Compute's filter
/// expressions, and a list that quietly ignored one would answer more than a client asked for.
pub(crate) async fn instance_group_manager(State(sb): State<Sandbox>, uri: Uri) -> Response {
    let parts: Vec<&str> = uri.path().trim_matches('/').split('/').collect();
    let query = uri.query();
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
        ] => sb
            .with_world(|w, _| {
                managers(w, project)
                    .into_iter()
                    .find(|m| m.zone == *zone && m.name == *name)
            })
            .map(|m| m.json(project)),
        [
            "compute",
            "v1",
            "projects",
            project,
            "zones",
            zone,
            "instanceGroupManagers",
        ] => return zone_list(&sb, query, project, zone),
        [
            "compute",
            "v1",
            "projects",
            project,
            "aggregated",
            "instanceGroupManagers",
        ] => return aggregated_list(&sb, query, project),
        _ => None,
    };
    match found {
        Some(v) => axum::Json(v).into_response(),
        None => gerr(404, format!("The resource '{}' was not found", uri.path())).into_response(),
    }
}

/// `instanceGroupManagers.list`: one zone's managers, a page of them.
fn zone_list(sb: &Sandbox, query: Option<&str>, project: &str, zone: &str) -> Response {
    let all = sb.with_world(|w, _| managers(w, project));
    let zoned: Vec<Manager> = all.into_iter().filter(|m| m.zone == *zone).collect();
    match page(query, zoned.len()) {
        Ok((range, next)) => {
            let items: Vec<Value> = zoned[range].iter().map(|m| m.json(project)).collect();
            let v = json!({
                "kind": "compute#instanceGroupManagerList",
                "id": format!("projects/{project}/zones/{zone}/instanceGroupManagers"),
                "items": items,
                "selfLink": format!("{COMPUTE}/projects/{project}/zones/{zone}/instanceGroupManagers"),
            });
            list_page(v, next)
        }
        Err(e) => e.into_response(),
    }
}

/// `instanceGroupManagers.aggregatedList`: a page of every zone's managers, keyed by scope, each
/// zone of the project's clusters listed even when it has none on the page.
fn aggregated_list(sb: &Sandbox, query: Option<&str>, project: &str) -> Response {
    let (all, mut scopes) = sb.with_world(|w, _| {
        let zones: std::collections::BTreeSet<String> = w
            .gke
            .clusters
            .values()
            .filter(|c| c.project == *project)
            .flat_map(|c| c.zones())
            .collect();
        (managers(w, project), zones)
    });
    scopes.extend(all.iter().map(|m| m.zone.clone()));
    match page(query, all.len()) {
        Ok((range, next)) => {
            let mut items = serde_json::Map::new();
            for zone in &scopes {
                let here: Vec<Value> = all[range.clone()]
                    .iter()
                    .filter(|m| &m.zone == zone)
                    .map(|m| m.json(project))
                    .collect();
                let scope = format!("zones/{zone}");
                let entry = if here.is_empty() {
                    json!({"warning": {
                        "code": "NO_RESULTS_ON_PAGE",
                        "message": format!(
                            "There are no results for scope '{scope}' on this page."),
                        "data": [{"key": "scope", "value": scope}],
                    }})
                } else {
                    json!({ "instanceGroupManagers": here })
                };
                items.insert(scope, entry);
            }
            let v = json!({
                "kind": "compute#instanceGroupManagerAggregatedList",
                "id": format!("projects/{project}/aggregated/instanceGroupManagers"),
                "items": items,
                "selfLink": format!("{COMPUTE}/projects/{project}/aggregated/instanceGroupManagers"),
            });
            list_page(v, next)
        }
        Err(e) => e.into_response(),
    }
}

/// A list's answer, with the token of the next page when there is one.
fn list_page(mut v: Value, next: Option<String>) -> Response {
    if let Some(t) = next {
        v["nextPageToken"] = json!(t);
    }
    axum::Json(v).into_response()
}

const COMPUTE: &str = "https://www.googleapis.com/compute/v1";

/// One zone's instance group manager of a pool.
struct Manager {
    zone: String,
    name: String,
    size: i64,
}

impl Manager {
    fn json(&self, project: &str) -> Value {
        let (zone, name) = (&self.zone, &self.name);
        json!({
            "kind": "compute#instanceGroupManager",
            "name": name,
            "zone": zone,
            "targetSize": self.size,
            "selfLink": format!("{COMPUTE}/projects/{project}/zones/{zone}/instanceGroupManagers/{name}"),
            "instanceGroup": format!("{COMPUTE}/projects/{project}/zones/{zone}/instanceGroups/{name}"),
        })
    }
}

/// The project's managers, ordered by zone and name (the order pages are cut in).
fn managers(w: &World, project: &str) -> Vec<Manager> {
    let mut all: Vec<Manager> = w
        .gke
        .clusters
        .values()
        .filter(|c| c.project == project)
        .flat_map(|c| {
            let zones = c.zones();
            c.pools
                .values()
                .flat_map(|p| {
                    zone_sizes(&zones, p)
                        .into_iter()
                        .map(|(z, size)| Manager {
                            name: instance_group_name(&c.name, &p.name, &z),
                            zone: z,
                            size,
                        })
                        .collect::<Vec<_>>()
                })
                .collect::<Vec<_>>()
        })
        .collect();
    all.sort_by(|a, b| (&a.zone, &a.name).cmp(&(&b.zone, &b.name)));
    all
}

/// The range of `total` items a list page answers, and the token of the next page: `maxResults`
/// 0..=500 (500 when absent, as Compute's default), `pageToken` one this sandbox handed out.
fn page(
    query: Option<&str>,
    total: usize,
) -> Result<(std::ops::Range<usize>, Option<String>), GError> {
    if crate::util::query_get(query, "filter").is_some_and(|f| !f.is_empty()) {
        return Err(gerr(
            400,
            "Invalid value for field 'filter': the sandbox does not evaluate list filters.",
        ));
    }
    let max = match crate::util::query_get(query, "maxResults") {
        None => 500,
        Some(m) => match m.parse::<usize>() {
            Ok(m) if m <= 500 => m,
            _ => {
                return Err(gerr(
                    400,
                    format!(
                        "Invalid value for field 'maxResults': '{m}'. Must be less than or equal \
                            to 500"
                    ),
                ));
            }
        },
    };
    let start = match crate::util::query_get(query, "pageToken").filter(|t| !t.is_empty()) {
        None => 0,
        Some(t) => t
            .parse::<usize>()
            .ok()
            .filter(|s| *s <= total)
            .ok_or_else(|| gerr(400, format!("Invalid value for field 'pageToken': '{t}'.")))?,
    };
    // maxResults=0 is taken as the default, as Compute does.
    let max = if max == 0 { 500 } else { max };
    let end = (start + max).min(total);
    Ok((start..end, (end < total).then(|| end.to_string())))
}
