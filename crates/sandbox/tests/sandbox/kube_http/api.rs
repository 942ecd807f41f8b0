//! API semantics over raw HTTP: discovery, versions, persistence, and watches that stream changes
//! and expire.

use super::*;

#[test]
fn api_semantics_discovery_versions_and_persistence() {
    let srv = serve();
    let v = srv.get_in("aks", "sandbox-aks", "/version");
    assert_eq!(v.body["major"], "1");
    assert_eq!(srv.call("GET", "/api", None).body["versions"][0], "v1");
    let groups = srv.call("GET", "/apis", None).body;
    let names: Vec<&str> = groups["groups"]
        .as_array()
        .expect("groups")
        .iter()
        .filter_map(|g| g["name"].as_str())
        .collect();
    // The built-in groups as a real v1.34.9 server lists them (the fixtures' apis.json), then the
    // seeded ClusterPolicy CRD's.
    let Some(fixtures) = testkit::apiserver::fixtures() else {
        return;
    };
    let real: Value = serde_json::from_slice(
        &std::fs::read(fixtures.join("kube-api-v1.34.9/apis.json")).expect("apis.json"),
    )
    .expect("JSON");
    let mut want: Vec<&str> = real["groups"]
        .as_array()
        .expect("groups")
        .iter()
        .filter_map(|g| g["name"].as_str())
        .collect();
    want.push("nvidia.com");
    assert_eq!(names, want);
    let core = srv.call("GET", "/api/v1", None).body;
    assert!(
        core["resources"]
            .as_array()
            .expect("resources")
            .iter()
            .any(|r| r["name"] == "configmaps" && r["namespaced"] == true)
    );
    let nv = srv.call("GET", "/apis/nvidia.com/v1", None).body;
    assert_eq!(nv["resources"][0]["kind"], "ClusterPolicy");
    assert_eq!(nv["resources"][0]["namespaced"], false);

    // Create: uid, resourceVersion, creationTimestamp, managedFields from the user agent; a
    // ConfigMap has no generation (only kinds whose spec a controller observes keep one).
    let r = srv.call(
        "POST",
        "/api/v1/namespaces/default/configmaps",
        Some(json!({"metadata": {"name": "a", "labels": {"tier": "x"}}, "data": {"k": "v"}})),
    );
    assert_eq!(r.code, 201, "{}", r.body);
    let m = &r.body["metadata"];
    assert!(m["uid"].as_str().is_some_and(|u| u.len() == 36));
    assert!(
        m["creationTimestamp"]
            .as_str()
            .is_some_and(|t| t.ends_with('Z'))
    );
    assert_eq!(m.get("generation"), None);
    assert_eq!(m["managedFields"][0]["manager"], "sandbox-test");
    let rv1: u64 = m["resourceVersion"]
        .as_str()
        .and_then(|s| s.parse().ok())
        .expect("rv");
    // A no-op patch keeps the resourceVersion; a change bumps it.
    let same = srv.patch(
        "/api/v1/namespaces/default/configmaps/a",
        "application/merge-patch+json",
        r#"{"data":{"k":"v"}}"#,
    );
    assert_eq!(
        same.body["metadata"]["resourceVersion"],
        m["resourceVersion"]
    );
    let changed = srv.patch(
        "/api/v1/namespaces/default/configmaps/a",
        "application/merge-patch+json",
        r#"{"data":{"k":"w"}}"#,
    );
    let rv2: u64 = changed.body["metadata"]["resourceVersion"]
        .as_str()
        .and_then(|s| s.parse().ok())
        .expect("rv");
    assert!(rv2 > rv1);
    // PUT with the current resourceVersion succeeds.
    let mut obj = changed.body.clone();
    obj["data"]["k2"] = json!("z");
    let put = srv.call("PUT", "/api/v1/namespaces/default/configmaps/a", Some(obj));
    assert_eq!(put.code, 200, "{}", put.body);
    // Label and field selectors.
    srv.call(
        "POST",
        "/api/v1/namespaces/default/configmaps",
        Some(json!({"metadata": {"name": "b", "labels": {"tier": "y"}}})),
    );
    let sel = |q: &str| -> Vec<String> {
        items(&srv.call(
            "GET",
            &format!("/api/v1/namespaces/default/configmaps?{q}"),
            None,
        ))
        .iter()
        .filter_map(|i| i["metadata"]["name"].as_str().map(str::to_string))
        .collect()
    };
    assert_eq!(sel("labelSelector=tier%3Dx"), ["a"]);
    assert_eq!(sel("labelSelector=tier+notin+(x)"), ["b"]);
    assert_eq!(sel("labelSelector=tier%2C%21nothing"), ["a", "b"]);
    assert_eq!(sel("fieldSelector=metadata.name%3Db"), ["b"]);
    assert_eq!(sel("fieldSelector=metadata.name%21%3Db"), ["a"]);
    assert_eq!(
        items(&srv.call("GET", "/api/v1/configmaps?labelSelector=tier", None)).len(),
        2
    );
    // Server-side apply with a YAML body (what a hand-written apply sends).
    let yaml =
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: y\ndata:\n  cfg: |\n    version: v1\n";
    let r = srv.patch(
        "/api/v1/namespaces/default/configmaps/y?fieldManager=me",
        "application/apply-patch+yaml",
        yaml,
    );
    assert_eq!(r.code, 201, "{}", r.body);
    assert_eq!(r.body["data"]["cfg"], "version: v1\n");
    // Dry run persists nothing.
    let dry = srv.call(
        "POST",
        "/api/v1/namespaces/default/configmaps?dryRun=All",
        Some(json!({"metadata": {"name": "dry"}})),
    );
    assert_eq!(dry.code, 201);
    assert_eq!(
        srv.call("GET", "/api/v1/namespaces/default/configmaps/dry", None)
            .code,
        404
    );
    // Secrets: stringData folds into base64 data; a helm release secret is stored as is.
    let s = srv.call("POST", "/api/v1/namespaces/default/secrets", Some(json!({"metadata": {"name": "sh.helm.release.v1.op.v1",
        "labels": {"owner": "helm", "status": "deployed", "name": "op", "version": "1"}}, "type": "helm.sh/release.v1", "data": {"release": "SDRzSQ=="}, "stringData": {"x": "y"}})));
    assert_eq!(s.code, 201, "{}", s.body);
    assert_eq!(s.body["data"], json!({"release": "SDRzSQ==", "x": "eQ=="}));
    assert_eq!(s.body["type"], "helm.sh/release.v1");
    // Delete answers a Success Status; deleting a namespace takes its objects along.
    let d = srv.call("DELETE", "/api/v1/namespaces/default/configmaps/b", None);
    assert_eq!((d.code, d.body["status"].as_str()), (200, Some("Success")));
    assert_eq!(
        srv.call(
            "POST",
            "/api/v1/namespaces",
            Some(json!({"metadata": {"name": "tmp"}}))
        )
        .code,
        201
    );
    srv.call(
        "POST",
        "/api/v1/namespaces/tmp/configmaps",
        Some(json!({"metadata": {"name": "c"}})),
    );
    assert_eq!(srv.call("DELETE", "/api/v1/namespaces/tmp", None).code, 200);
    assert!(
        items(&srv.call(
            "GET",
            "/api/v1/configmaps?fieldSelector=metadata.namespace%3Dtmp",
            None
        ))
        .is_empty()
    );

    // Snapshot and restore into a new API: same objects, same token, same CA.
    srv.api.pool_changed(&aks_a100_pool(None));
    let snap = srv.api.snapshot();
    let other = KubeApi::new();
    other.restore(&snap).expect("restore");
    assert_eq!(other.snapshot(), snap);
    assert_eq!(
        other.token("aks", "sandbox-aks"),
        srv.api.token("aks", "sandbox-aks")
    );
    assert_eq!(other.ca_pem(), srv.api.ca_pem());
    assert_eq!(
        other
            .object("aks", "sandbox-aks", "configmaps", "default", "a")
            .map(|o| o["data"]["k2"].clone()),
        Some(json!("z"))
    );
    assert!(other.restore(&json!({"clusters": 3})).is_err());
    let dir = tempfile::tempdir().expect("tempdir");
    let written = srv
        .api
        .write_kubeconfigs(dir.path(), &srv.base)
        .expect("kubeconfigs");
    assert_eq!(written.len(), 3);
    let aks = written.iter().find(|(c, _, _)| c == "aks").expect("aks");
    assert!(aks.2.ends_with("aks-sandbox-aks.kubeconfig"));
    assert!(
        std::fs::read_to_string(&aks.2)
            .expect("read")
            .contains(&srv.token("aks", "sandbox-aks"))
    );
    assert!(
        srv.api
            .kubeconfig("aks", "sandbox-aks", &srv.base)
            .contains("certificate-authority-data: ")
    );
}

#[test]
fn watches_stream_changes_and_expire() {
    let srv = serve();
    let list = srv.call("GET", "/api/v1/namespaces/gpu-operator/configmaps", None);
    let rv = list.body["metadata"]["resourceVersion"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    // Changes after the list's resourceVersion, filtered by label, then the stream ends at timeoutSeconds.
    srv.call(
        "POST",
        "/api/v1/namespaces/gpu-operator/configmaps",
        Some(json!({"metadata": {"name": "w1", "labels": {"w": "yes"}}})),
    );
    srv.call(
        "POST",
        "/api/v1/namespaces/gpu-operator/configmaps",
        Some(json!({"metadata": {"name": "w2"}})),
    );
    srv.patch(
        "/api/v1/namespaces/gpu-operator/configmaps/w1",
        "application/merge-patch+json",
        r#"{"data":{"a":"b"}}"#,
    );
    srv.call(
        "DELETE",
        "/api/v1/namespaces/gpu-operator/configmaps/w1",
        None,
    );
    let r = srv.call("GET", &format!("/api/v1/namespaces/gpu-operator/configmaps?watch=true&resourceVersion={rv}&labelSelector=w%3Dyes&timeoutSeconds=1"), None);
    assert_eq!(r.code, 200);
    let text = r
        .body
        .as_str()
        .map(str::to_string)
        .unwrap_or_else(|| r.body.to_string());
    let events: Vec<Value> = text
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).expect("event JSON"))
        .collect();
    let kinds: Vec<&str> = events.iter().filter_map(|e| e["type"].as_str()).collect();
    assert_eq!(kinds, ["ADDED", "MODIFIED", "DELETED"], "{text}");
    assert!(
        events
            .iter()
            .all(|e| e["object"]["metadata"]["name"] == "w1")
    );
    // Without a resourceVersion: the current objects first.
    let r = srv.call("GET", "/api/v1/namespaces?watch=1&timeoutSeconds=1", None);
    let text = r
        .body
        .as_str()
        .map(str::to_string)
        .unwrap_or_else(|| r.body.to_string());
    assert!(
        text.lines().filter(|l| l.contains("\"ADDED\"")).count() >= 5,
        "{text}"
    );
    // History does not survive a restore: resuming from before it is 410 Expired.
    srv.api.restore(&srv.api.snapshot()).expect("restore");
    let r = srv.call("GET", &format!("/api/v1/namespaces/gpu-operator/configmaps?watch=true&resourceVersion={rv}&timeoutSeconds=1"), None);
    let text = r
        .body
        .as_str()
        .map(str::to_string)
        .unwrap_or_else(|| r.body.to_string());
    let e: Value =
        serde_json::from_str(text.lines().next().unwrap_or_default()).expect("one event");
    assert_eq!(
        (
            e["type"].as_str(),
            e["object"]["code"].as_i64(),
            e["object"]["reason"].as_str()
        ),
        (Some("ERROR"), Some(410), Some("Expired"))
    );
}
