//! Discovery: what the API server says about itself (version, API groups and resources, and enough
//! OpenAPI v3 for kubectl), so that kubectl and client libraries find the kinds this emulator serves
//! under `/k8s/{cloud}/{cluster}`. The ClusterPolicy group appears only while its CRD exists.

use serde_json::{Value, json};

use super::kinds::{self, Kind};

pub(super) fn version() -> Value {
    json!({"major": "1", "minor": "32", "gitVersion": "v1.32.4", "gitCommit": "sandbox", "gitTreeState": "clean",
        "buildDate": "2026-01-01T00:00:00Z", "goVersion": "go1.23.8", "compiler": "gc", "platform": "linux/amd64"})
}

/// The served group-versions as OpenAPI v3 paths (`api/v1`, `apis/apps/v1`, ...).
fn served_gvs(crd: bool) -> Vec<(&'static str, &'static str, String)> {
    let mut out = vec![("", "v1", "api/v1".to_string())];
    for (g, v) in kinds::GROUPS {
        if g != "nvidia.com" || crd {
            out.push((g, v, format!("apis/{g}/{v}")));
        }
    }
    out
}

/// OpenAPI v3 discovery. kubectl's default `--validate=strict` looks here for the PATCH operation of the
/// object's kind and, when it declares the `fieldValidation` query parameter, leaves validation to the server
/// instead of downloading schemas. The URLs start with /openapi/v3 so client-go keeps the /k8s/... prefix.
pub(super) fn openapi_root(crd: bool) -> Value {
    let paths: serde_json::Map<String, Value> = served_gvs(crd)
        .into_iter()
        .map(|(_, _, p)| {
            (
                p.clone(),
                json!({"serverRelativeURL": format!("/openapi/v3/{p}?hash=sandbox1")}),
            )
        })
        .collect();
    json!({"paths": paths})
}

/// A group-version's OpenAPI v3 document: operations only (no schemas), enough for kubectl's verifier.
pub(super) fn openapi_gv(gv_path: &str, crd: bool) -> Option<Value> {
    let (g, v, base) = served_gvs(crd).into_iter().find(|(_, _, p)| p == gv_path)?;
    let mut paths = serde_json::Map::new();
    for k in kinds::ALL.iter().filter(|k| k.group == g && k.version == v) {
        let gvk = json!({"group": k.group, "version": k.version, "kind": k.kind});
        let params = json!([
            {"name": "fieldValidation", "in": "query", "schema": {"type": "string", "uniqueItems": true}},
            {"name": "fieldManager", "in": "query", "schema": {"type": "string", "uniqueItems": true}},
            {"name": "dryRun", "in": "query", "schema": {"type": "string", "uniqueItems": true}},
        ]);
        let op = |verb: &str| {
            json!({"operationId": format!("{verb}{}", k.kind), "x-kubernetes-action": verb, "x-kubernetes-group-version-kind": gvk,
                "parameters": params, "responses": {"200": {"description": "OK"}}})
        };
        let item = if k.namespaced {
            format!("/{base}/namespaces/{{namespace}}/{}/{{name}}", k.plural)
        } else {
            format!("/{base}/{}/{{name}}", k.plural)
        };
        paths.insert(item, json!({"get": op("get"), "put": op("put"), "patch": op("patch"), "delete": op("delete")}));
        let coll = if k.namespaced {
            format!("/{base}/namespaces/{{namespace}}/{}", k.plural)
        } else {
            format!("/{base}/{}", k.plural)
        };
        paths.insert(coll, json!({"get": op("list"), "post": op("post")}));
    }
    Some(
        json!({"openapi": "3.0.0", "info": {"title": "Kubernetes", "version": "v1.32.4"}, "paths": paths, "components": {"schemas": {}}}),
    )
}

pub(super) fn group_doc(g: &str, crd: bool) -> Option<Value> {
    let (_, v) = kinds::GROUPS
        .iter()
        .find(|(gg, _)| *gg == g && (g != "nvidia.com" || crd))?;
    let gv = json!({"groupVersion": format!("{g}/{v}"), "version": v});
    Some(
        json!({"kind": "APIGroup", "apiVersion": "v1", "name": g, "versions": [gv], "preferredVersion": gv}),
    )
}

pub(super) fn group_list(crd: bool) -> Value {
    let groups: Vec<Value> = kinds::GROUPS
        .iter()
        .filter_map(|(g, _)| group_doc(g, crd))
        .map(|mut d| {
            if let Some(m) = d.as_object_mut() {
                m.remove("kind");
                m.remove("apiVersion");
            }
            d
        })
        .collect();
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
}

pub(super) fn resource_list(g: &str, v: &str) -> Value {
    let gv = if g.is_empty() {
        v.to_string()
    } else {
        format!("{g}/{v}")
    };
    let mut resources: Vec<Value> = Vec::new();
    for k in kinds::ALL.iter().filter(|k| k.group == g && k.version == v) {
        resources.push(Kind::api_resource(k));
        if k.custom && k.status_subresource {
            // A CRD's status subresource is listed beside it; the sandbox serves it for reading.
            resources.push(
                json!({"name": format!("{}/status", k.plural), "singularName": "",
                "namespaced": k.namespaced, "kind": k.kind, "verbs": ["get"]}),
            );
        }
    }
    json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": resources})
}
