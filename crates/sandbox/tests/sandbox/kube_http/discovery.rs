//! The sandbox describes its built-in kinds as a real kube-apiserver v1.34.9 does: its
//! aggregated discovery (`apidiscovery.k8s.io/v2`, what kubectl and helm read first) is compared
//! resource by resource with the real server's own, captured in the fixtures
//! (`shared/fixtures/kube-api-v1.34.9/aggregated-api.json` and `aggregated-apis.json`), and its
//! OpenAPI v3 index lists every group version it serves.
//!
//! The sandbox serves every resource the real server lists; of the subresources it leaves out
//! those it does not model, each listed in [`NOT_SERVED`] with its reason. The test fails on any
//! other difference and on a listed omission that no longer is one.

use super::*;

const AGGREGATED: &str = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList";

/// Subresources the real server serves and the sandbox does not: (resource, subresource, why).
const NOT_SERVED: &[(&str, &str, &str)] = &[
    ("nodes", "proxy", PROXY),
    ("pods", "attach", KUBELET),
    (
        "pods",
        "binding",
        "no scheduler binds pods here; the twin places them",
    ),
    ("pods", "ephemeralcontainers", KUBELET),
    ("pods", "exec", KUBELET),
    ("pods", "log", KUBELET),
    ("pods", "portforward", KUBELET),
    ("pods", "proxy", PROXY),
    ("pods", "resize", KUBELET),
    ("services", "proxy", PROXY),
];
const PROXY: &str = "nothing runs behind the sandbox's objects to proxy to";
const KUBELET: &str = "no kubelet runs containers here";

fn fixture(file: &str) -> Option<Value> {
    let dir = testkit::apiserver::fixtures()?;
    let path = dir.join("kube-api-v1.34.9").join(file);
    let text = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    Some(serde_json::from_slice(&text).expect("JSON"))
}

/// Every resource of a discovery list as (group/version/resource, its document), subresources
/// split out as (…/resource/subresource, document).
fn resources(doc: &Value) -> BTreeMap<String, Value> {
    let mut out = BTreeMap::new();
    for g in doc["items"].as_array().expect("items") {
        let group = g["metadata"]["name"].as_str().unwrap_or_default();
        for v in g["versions"].as_array().expect("versions") {
            let version = v["version"].as_str().unwrap_or_default();
            for r in v["resources"].as_array().expect("resources") {
                let id = format!(
                    "{group}/{version}/{}",
                    r["resource"].as_str().unwrap_or_default()
                );
                let mut r = r.clone();
                for s in r["subresources"].as_array().cloned().unwrap_or_default() {
                    let sub = s["subresource"].as_str().unwrap_or_default();
                    out.insert(format!("{id}/{sub}"), s);
                }
                if let Some(m) = r.as_object_mut() {
                    m.remove("subresources");
                }
                out.insert(id, r);
            }
        }
    }
    out
}

#[test]
fn aggregated_discovery_matches_a_real_v1_34_server() {
    let (Some(real_core), Some(real_apis)) = (
        fixture("aggregated-api.json"),
        fixture("aggregated-apis.json"),
    ) else {
        return;
    };
    let srv = serve();
    srv.api.add_cluster_without_operator("aks", "bare");
    let ask = |path: &str| {
        let full = format!("{}{path}", srv.prefix("aks", "bare"));
        let r = srv.raw_with(
            "GET",
            &full,
            "",
            b"",
            Some(&srv.token("aks", "bare")),
            &[("Accept", AGGREGATED)],
        );
        assert_eq!(r.code, 200, "{path}: {}", r.body);
        assert_eq!(
            r.body["kind"], "APIGroupDiscoveryList",
            "{path}: {}",
            r.body
        );
        r.body
    };
    let mut real = resources(&real_core);
    real.extend(resources(&real_apis));
    let mut mine = resources(&ask("/api"));
    mine.extend(resources(&ask("/apis")));

    // Every built-in resource and subresource of the real server is compared.
    assert!(real.len() > 100, "{} resources in the fixtures", real.len());
    let mut differences = Vec::new();
    let mut omitted = Vec::new();
    for (id, want) in &real {
        match mine.get(id) {
            Some(got) if got == want => {}
            Some(got) => differences.push(format!("{id}:\n  real    {want}\n  sandbox {got}")),
            None => omitted.push(id.clone()),
        }
    }
    for id in mine.keys().filter(|id| !real.contains_key(*id)) {
        differences.push(format!(
            "{id}: served by the sandbox, not by the real server"
        ));
    }
    let listed: Vec<String> = NOT_SERVED
        .iter()
        .map(|(r, s, _)| {
            let parent = real
                .keys()
                .find(|id| id.ends_with(&format!("/{r}")) && !id.starts_with("events.k8s.io"))
                .unwrap_or_else(|| panic!("no real resource {r}"));
            format!("{parent}/{s}")
        })
        .collect();
    for id in &omitted {
        if !listed.contains(id) {
            differences.push(format!("{id}: not served by the sandbox"));
        }
    }
    for id in &listed {
        if !omitted.contains(id) {
            differences.push(format!("{id}: listed as not served, but it is"));
        }
    }
    assert!(
        differences.is_empty(),
        "the sandbox's discovery differs from kube-apiserver v1.34.9's:\n{}",
        differences.join("\n")
    );

    // The group order of the legacy list is the real server's.
    let legacy = srv.get_accept("/apis", "application/json").body;
    let names = |d: &Value| -> Vec<String> {
        d["groups"]
            .as_array()
            .expect("groups")
            .iter()
            .map(|g| g["name"].as_str().unwrap_or_default().to_string())
            .collect()
    };
    let real_legacy = fixture("apis.json").expect("apis.json");
    let mut want = names(&real_legacy);
    want.push("nvidia.com".into());
    assert_eq!(names(&legacy), want);
}

#[test]
fn every_served_group_version_has_an_openapi_v3_document() {
    let Some(dir) = testkit::apiserver::fixtures() else {
        return;
    };
    let docs = sandbox::kube::OpenApiDocs::from_dir(&dir.join("kube-api-v1.34.9")).expect("docs");
    let srv = serve_with(KubeApi::with_openapi(docs));
    let index = srv.call("GET", "/openapi/v3", None);
    assert_eq!(index.code, 200, "{}", index.body);
    let paths = index.body["paths"].as_object().expect("paths").clone();
    let discovery = srv.get_accept("/apis", AGGREGATED).body;
    let mut served = vec!["api/v1".to_string()];
    for g in discovery["items"].as_array().expect("items") {
        for v in g["versions"].as_array().expect("versions") {
            served.push(format!(
                "apis/{}/{}",
                g["metadata"]["name"].as_str().unwrap_or_default(),
                v["version"].as_str().unwrap_or_default()
            ));
        }
    }
    for gv in &served {
        let entry = paths
            .get(gv)
            .unwrap_or_else(|| panic!("/openapi/v3 does not list {gv}"));
        let url = entry["serverRelativeURL"]
            .as_str()
            .expect("serverRelativeURL");
        assert!(url.starts_with(&format!("/openapi/v3/{gv}?hash=")), "{url}");
        let doc = srv.call("GET", &format!("/openapi/v3/{gv}"), None);
        assert_eq!(doc.code, 200, "{gv}: {}", doc.body);
        // kubectl and helm leave validation to the server when the PATCH operation of the kind
        // declares `fieldValidation`: every kind of the group version must.
        let patches: Vec<&Value> = doc.body["paths"]
            .as_object()
            .expect("paths")
            .values()
            .filter_map(|p| p.get("patch"))
            .collect();
        let names: Vec<&str> = patches
            .iter()
            .flat_map(|op| op["parameters"].as_array().into_iter().flatten())
            .filter_map(|p| p["name"].as_str())
            .collect();
        if !patches.is_empty() {
            assert!(
                names.contains(&"fieldValidation"),
                "{gv}: no fieldValidation on PATCH"
            );
        }
    }
    // The built-in documents are the real server's own, as given.
    let apps = srv.call("GET", "/openapi/v3/apis/apps/v1", None).body;
    assert!(
        apps.pointer("/components/schemas/io.k8s.api.apps.v1.DaemonSet/properties/spec")
            .is_some(),
        "the apps/v1 document is not the real one"
    );
    // The seeded ClusterPolicy CRD's document carries its structural schema, named as
    // apiextensions-apiserver names it.
    let cp = srv.call("GET", "/openapi/v3/apis/nvidia.com/v1", None).body;
    let schema = &cp["components"]["schemas"]["com.nvidia.v1.ClusterPolicy"];
    assert_eq!(
        schema["x-kubernetes-group-version-kind"],
        json!([{"group": "nvidia.com", "kind": "ClusterPolicy", "version": "v1"}])
    );
    assert!(
        schema
            .pointer("/properties/spec/properties/devicePlugin")
            .is_some(),
        "{schema}"
    );
    assert!(
        cp["paths"]["/apis/nvidia.com/v1/clusterpolicies/{name}"]["patch"].is_object(),
        "{}",
        cp["paths"]
    );
}
