//! Discovery: what the API server says about itself (version, root paths, API groups and their
//! resources, in the legacy documents and in aggregated discovery), generated from the kinds the
//! cluster serves, so that kubectl, helm and client libraries find the built-in kinds and every
//! kind an established CRD adds. The shapes are kube-apiserver v1.34's (k8s.io/apiserver
//! pkg/endpoints/discovery, and pkg/endpoints/discovery/aggregated for `apidiscovery.k8s.io/v2`;
//! apiextensions-apiserver pkg/apiserver/customresource_discovery_controller.go for CRDs).

use serde_json::{Map, Value, json};

use super::kinds::{self, Kind};

/// The version the sandbox answers as: the release whose discovery and OpenAPI documents it
/// models (`shared/fixtures/kube-api-v1.34.9/version.json` has the real server's).
pub(super) fn version() -> Value {
    json!({"major": "1", "minor": "34", "emulationMajor": "1", "emulationMinor": "34",
        "minCompatibilityMajor": "1", "minCompatibilityMinor": "33", "gitVersion": "v1.34.9",
        "gitCommit": "sandbox", "gitTreeState": "clean", "buildDate": "2026-01-01T00:00:00Z",
        "goVersion": "go1.24.9", "compiler": "gc", "platform": "linux/amd64"})
}

/// The Accept type of aggregated discovery (KEP-3352), which kubectl and helm ask for first.
pub(super) fn wants_aggregated(accept: &str) -> bool {
    accept.split(',').any(|part| {
        let p: Vec<&str> = part.split(';').map(str::trim).collect();
        p.first() == Some(&"application/json")
            && p.contains(&"g=apidiscovery.k8s.io")
            && p.contains(&"v=v2")
            && p.contains(&"as=APIGroupDiscoveryList")
    })
}

/// The content type an aggregated discovery answer carries.
pub(super) const AGGREGATED_CONTENT_TYPE: &str =
    "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList";

/// The groups other than core with their versions, in discovery's order: the built-in groups in
/// kube-apiserver's priority order, then the CRDs' groups by name; versions by
/// [`kinds::version_priority`].
pub(super) fn groups(served: &[Kind]) -> Vec<(&'static str, Vec<&'static str>)> {
    let mut out: Vec<(&'static str, Vec<&'static str>)> = Vec::new();
    let mut custom: Vec<(&'static str, Vec<&'static str>)> = Vec::new();
    for k in served.iter().filter(|k| !k.group.is_empty()) {
        let list = if k.custom { &mut custom } else { &mut out };
        match list.iter_mut().find(|(g, _)| *g == k.group) {
            Some((_, vs)) if !vs.contains(&k.version) => vs.push(k.version),
            Some(_) => {}
            None => list.push((k.group, vec![k.version])),
        }
    }
    custom.sort_by(|a, b| a.0.cmp(b.0));
    out.extend(custom);
    for (_, vs) in out.iter_mut() {
        vs.sort_by(|a, b| kinds::version_priority(a, b));
    }
    out
}

/// `GET /`: every path the server serves discovery at, sorted.
pub(super) fn root_paths(served: &[Kind]) -> Value {
    let mut paths = vec![
        "/api".to_string(),
        "/api/v1".into(),
        "/apis".into(),
        "/apis/".into(),
        "/healthz".into(),
        "/livez".into(),
        "/openapi/v2".into(),
        "/openapi/v3".into(),
        "/openapi/v3/".into(),
        "/readyz".into(),
        "/version".into(),
    ];
    for (g, vs) in groups(served) {
        paths.push(format!("/apis/{g}"));
        paths.extend(vs.iter().map(|v| format!("/apis/{g}/{v}")));
    }
    paths.sort();
    json!({"paths": paths})
}

/// `GET /api`.
pub(super) fn api_versions() -> Value {
    json!({"kind": "APIVersions", "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1"}]})
}

fn group_version(g: &str, v: &str) -> Value {
    json!({"groupVersion": format!("{g}/{v}"), "version": v})
}

/// `GET /apis/{group}`; None when no kind of that group is served.
pub(super) fn group_doc(served: &[Kind], group: &str) -> Option<Value> {
    let (g, vs) = groups(served).into_iter().find(|(g, _)| *g == group)?;
    let versions: Vec<Value> = vs.iter().map(|v| group_version(g, v)).collect();
    Some(
        json!({"kind": "APIGroup", "apiVersion": "v1", "name": g, "versions": versions,
        "preferredVersion": group_version(g, vs[0])}),
    )
}

/// `GET /apis`.
pub(super) fn group_list(served: &[Kind]) -> Value {
    let groups: Vec<Value> = groups(served)
        .into_iter()
        .map(|(g, vs)| {
            let versions: Vec<Value> = vs.iter().map(|v| group_version(g, v)).collect();
            json!({"name": g, "versions": versions, "preferredVersion": group_version(g, vs[0])})
        })
        .collect();
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
}

/// What a subresource answers with and the verbs it takes: (group, version, kind) of the
/// response, where empty means the resource's own kind.
fn subresource(
    k: &Kind,
    sub: &str,
) -> (
    &'static str,
    &'static str,
    &'static str,
    &'static [&'static str],
) {
    const GPU: &[&str] = &["get", "patch", "update"];
    match sub {
        "scale" => ("autoscaling", "v1", "Scale", GPU),
        "token" => ("authentication.k8s.io", "v1", "TokenRequest", &["create"]),
        "eviction" => ("policy", "v1", "Eviction", &["create"]),
        "finalize" => ("", "", k.kind, &["update"]),
        _ => ("", "", k.kind, GPU),
    }
}

/// The order a resource's subresources are listed in: a CRD lists status before scale; the
/// built-in registries list theirs by name.
fn subresources_in_order(k: &Kind) -> Vec<&'static str> {
    let mut subs = k.subresources.to_vec();
    if k.custom {
        subs.sort_by(|a, b| b.cmp(a));
    }
    subs
}

/// `GET /api/v1` or `/apis/{group}/{version}`: one entry per resource and per subresource.
pub(super) fn resource_list(served: &[Kind], g: &str, v: &str) -> Option<Value> {
    let mut resources: Vec<Value> = Vec::new();
    for k in served.iter().filter(|k| k.group == g && k.version == v) {
        let mut r = json!({"name": k.plural, "singularName": k.singular,
            "namespaced": k.namespaced, "kind": k.kind, "verbs": k.verbs});
        if !k.short_names.is_empty() {
            r["shortNames"] = json!(k.short_names);
        }
        if !k.categories.is_empty() {
            r["categories"] = json!(k.categories);
        }
        if !k.virtual_kind() && k.verbs != kinds::GET_LIST {
            r["storageVersionHash"] = json!(k.storage_version_hash());
        }
        resources.push(r);
        for sub in subresources_in_order(k) {
            let (sg, sv, skind, verbs) = subresource(k, sub);
            let mut r = json!({"name": format!("{}/{sub}", k.plural), "singularName": "",
                "namespaced": k.namespaced});
            if !sg.is_empty() {
                r["group"] = json!(sg);
                r["version"] = json!(sv);
            }
            r["kind"] = json!(skind);
            r["verbs"] = json!(verbs);
            resources.push(r);
        }
    }
    if resources.is_empty() {
        return None;
    }
    let gv = if g.is_empty() {
        v.to_string()
    } else {
        format!("{g}/{v}")
    };
    Some(
        json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": resources}),
    )
}

fn response_kind(k: &Kind, g: &str, v: &str, kind: &str) -> Value {
    // Built-in resources leave group and version of their own kind empty; a CRD names them.
    if !g.is_empty() {
        json!({"group": g, "version": v, "kind": kind})
    } else if k.custom {
        json!({"group": k.group, "version": k.version, "kind": kind})
    } else {
        json!({"group": "", "version": "", "kind": kind})
    }
}

fn aggregated_resource(k: &Kind) -> Value {
    let mut r = json!({"resource": k.plural, "responseKind": response_kind(k, "", "", k.kind),
        "scope": if k.namespaced { "Namespaced" } else { "Cluster" },
        "singularResource": k.singular, "verbs": k.verbs});
    if !k.short_names.is_empty() {
        r["shortNames"] = json!(k.short_names);
    }
    if !k.categories.is_empty() {
        r["categories"] = json!(k.categories);
    }
    let subs: Vec<Value> = subresources_in_order(k)
        .into_iter()
        .map(|sub| {
            let (sg, sv, skind, verbs) = subresource(k, sub);
            json!({"subresource": sub, "responseKind": response_kind(k, sg, sv, skind), "verbs": verbs})
        })
        .collect();
    if !subs.is_empty() {
        r["subresources"] = json!(subs);
    }
    r
}

/// Aggregated discovery (`apidiscovery.k8s.io/v2`): of the core group (`/api`) or of every other
/// group (`/apis`), each version's resources in full.
pub(super) fn aggregated(served: &[Kind], core: bool) -> Value {
    let version_doc = |g: &str, v: &str| {
        let resources: Vec<Value> = served
            .iter()
            .filter(|k| k.group == g && k.version == v)
            .map(aggregated_resource)
            .collect();
        json!({"version": v, "resources": resources, "freshness": "Current"})
    };
    let items: Vec<Value> = if core {
        vec![json!({"metadata": {}, "versions": [version_doc("", "v1")]})]
    } else {
        groups(served)
            .into_iter()
            .map(|(g, vs)| {
                let versions: Vec<Value> = vs.iter().map(|v| version_doc(g, v)).collect();
                json!({"metadata": {"name": g}, "versions": versions})
            })
            .collect()
    };
    let mut doc = Map::new();
    doc.insert("kind".into(), json!("APIGroupDiscoveryList"));
    doc.insert("apiVersion".into(), json!("apidiscovery.k8s.io/v2"));
    doc.insert("metadata".into(), json!({}));
    doc.insert("items".into(), json!(items));
    Value::Object(doc)
}
