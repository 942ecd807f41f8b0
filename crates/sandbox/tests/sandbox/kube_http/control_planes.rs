//! The sandbox's control plane (`fracgpu-sandbox apiserver`) beside a real one, where
//! `KUBEBUILDER_ASSETS` gives it, asked the same things through the same clients: the aggregated
//! discovery and the OpenAPI v3 document of a CRD installed by kubectl, an RBAC denial, a
//! server-side apply conflict, a pod's requests defaulted from its limits, and what NVIDIA's
//! gpu-operator chart leaves after `helm install`
//! (every object it renders, and the ClusterPolicy as the CRD's defaulting stores it).

use std::process::Command;

use serde_json::{Value, json};
use testkit::apiserver::{self, ApiServer};
use testkit::tools::{self, Tool};

const AGGREGATED: &str = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList";

/// A GET as `token` with an Accept header: (status, body).
fn get(server: &ApiServer, path: &str, accept: &str, token: &str) -> (u16, Value) {
    let out = Command::new("curl")
        .args([
            "-sS",
            "--max-time",
            "20",
            "-w",
            "\n%{http_code}",
            "--cacert",
        ])
        .arg(server.dir().join("ca.crt"))
        .args([
            "-H",
            &format!("Authorization: Bearer {token}"),
            "-H",
            &format!("Accept: {accept}"),
        ])
        .arg(format!("{}{path}", server.url))
        .output()
        .expect("curl runs");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let (body, code) = text.rsplit_once('\n').unwrap_or((&text, "0"));
    (
        code.trim().parse().unwrap_or(0),
        serde_json::from_str(body).unwrap_or(Value::String(body.into())),
    )
}

/// kubectl's server-side apply of `obj` as `manager`: (success, what it printed).
fn apply(server: &ApiServer, obj: &Value, manager: &str) -> (bool, String) {
    let manager = format!("--field-manager={manager}");
    let out = server.kubectl_input(
        &["apply", "--server-side", &manager, "-f", "-"],
        &obj.to_string(),
    );
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    (out.status.success(), text)
}

/// What both answer must be the same; `what` names it in the failure.
fn same(diffs: &mut Vec<String>, what: &str, sandbox: &Value, real: &Value) {
    if sandbox != real {
        diffs.push(format!("{what}:\n  sandbox {sandbox}\n  real    {real}"));
    }
}

/// The names of a group version document's paths and the GVK and top-level properties of one
/// of its schemas.
fn openapi_outline(doc: &Value, schema: &str) -> Value {
    let mut paths: Vec<&String> = doc["paths"]
        .as_object()
        .map(|m| m.keys().collect())
        .unwrap_or_default();
    paths.sort();
    let s = &doc["components"]["schemas"][schema];
    let mut props: Vec<&String> = s["properties"]
        .as_object()
        .map(|m| m.keys().collect())
        .unwrap_or_default();
    props.sort();
    json!({"paths": paths, "gvk": s["x-kubernetes-group-version-kind"], "properties": props,
        "required": s["required"]})
}

#[test]
fn the_sandbox_and_a_real_control_plane_agree() {
    let Some(real) = ApiServer::start_real() else {
        return;
    };
    let (Some(sandbox), Some(fixtures), Some(helm)) = (
        ApiServer::start_sandbox(),
        apiserver::fixtures(),
        tools::require(Tool::Helm4),
    ) else {
        return;
    };
    let both = [&sandbox, &real];
    let mut diffs = Vec::new();

    // A CRD installed by kubectl: its discovery and its OpenAPI document.
    for s in both {
        s.install_crds(&fixtures, &["karpenter.sh_nodepools.yaml"]);
    }
    let ask = |s: &ApiServer, path: &str, accept: &str| get(s, path, accept, s.admin_token());
    let group = |s: &ApiServer| {
        let (_, d) = ask(s, "/apis", AGGREGATED);
        d["items"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|g| g["metadata"]["name"] == "karpenter.sh")
            .cloned()
            .unwrap_or_default()
    };
    let found = group(&real);
    assert!(
        found["versions"][0]["resources"].is_array(),
        "the real server serves karpenter.sh: {found}"
    );
    same(
        &mut diffs,
        "aggregated discovery of karpenter.sh",
        &group(&sandbox),
        &found,
    );
    let (_, s_legacy) = ask(&sandbox, "/apis/karpenter.sh/v1", "application/json");
    let (_, r_legacy) = ask(&real, "/apis/karpenter.sh/v1", "application/json");
    same(
        &mut diffs,
        "discovery of karpenter.sh/v1",
        &s_legacy,
        &r_legacy,
    );
    // kube-apiserver publishes a new CRD's OpenAPI a moment after it is established (its
    // openapi controller works through a queue): asked until the document has the kind.
    let outline = |s: &ApiServer| {
        let start = std::time::Instant::now();
        loop {
            let doc = ask(s, "/openapi/v3/apis/karpenter.sh/v1", "application/json").1;
            let o = openapi_outline(&doc, "sh.karpenter.v1.NodePool");
            if !o["gvk"].is_null() || start.elapsed() > std::time::Duration::from_secs(30) {
                return o;
            }
            std::thread::sleep(std::time::Duration::from_millis(200));
        }
    };
    let real_outline = outline(&real);
    assert!(
        real_outline["paths"]
            .as_array()
            .is_some_and(|p| p.len() >= 3),
        "{real_outline}"
    );
    same(
        &mut diffs,
        "OpenAPI v3 of karpenter.sh/v1",
        &outline(&sandbox),
        &real_outline,
    );

    // An RBAC denial of a ServiceAccount's token.
    let denial = |s: &ApiServer| {
        let token = s.service_account_token("default", "nobody");
        let (code, body) = get(
            s,
            "/api/v1/namespaces/default/configmaps/x",
            "application/json",
            &token,
        );
        json!({"code": code, "message": body["message"], "details": body["details"]})
    };
    let real_denial = denial(&real);
    assert_eq!(real_denial["code"], 403, "{real_denial}");
    same(
        &mut diffs,
        "an RBAC denial",
        &denial(&sandbox),
        &real_denial,
    );

    // A server-side apply conflict between two managers.
    let conflict = |s: &ApiServer| {
        let cm = |v: &str| json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "shared", "namespace": "default"}, "data": {"k": v}});
        assert!(apply(s, &cm("a"), "first").0);
        let (ok, text) = apply(s, &cm("b"), "second");
        json!({"ok": ok, "said": text.lines().filter(|l| !l.trim().is_empty()).take(3).collect::<Vec<_>>()})
    };
    let real_conflict = conflict(&real);
    assert_eq!(real_conflict["ok"], false, "{real_conflict}");
    same(
        &mut diffs,
        "a server-side apply conflict",
        &conflict(&sandbox),
        &real_conflict,
    );

    // A pod that limits a GPU without requesting it: the API server requests it at its limit.
    let pod_resources = |s: &ApiServer| {
        let pod = json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "limited", "namespace": "default"},
            "spec": {
                "initContainers": [{"name": "i", "image": "x",
                    "resources": {"limits": {"cpu": "1"}, "requests": {"memory": "1Gi"}}}],
                "containers": [{"name": "m", "image": "x",
                    "resources": {"limits": {"nvidia.com/gpu": "1", "memory": "2Gi"}}}]}});
        s.kubectl_stdin(&["create", "-f", "-"], &pod.to_string());
        let (_, p) = ask(
            s,
            "/api/v1/namespaces/default/pods/limited",
            "application/json",
        );
        json!([
            p["spec"]["initContainers"][0]["resources"],
            p["spec"]["containers"][0]["resources"]
        ])
    };
    let real_resources = pod_resources(&real);
    assert_eq!(
        real_resources[1]["requests"]["nvidia.com/gpu"], "1",
        "{real_resources}"
    );
    same(
        &mut diffs,
        "a pod's requests defaulted from its limits",
        &pod_resources(&sandbox),
        &real_resources,
    );

    // NVIDIA's chart installed by helm 4: every object it renders, and the ClusterPolicy as the
    // CRD's defaulting leaves it.
    let chart = fixtures.join(apiserver::GPU_OPERATOR_CHART);
    let install = |s: &ApiServer| {
        let _hooks = s.complete_hook_jobs();
        let out = Command::new(&helm)
            .args(["install", "gpu-operator"])
            .arg(&chart)
            .args(["-n", "gpu-operator", "--create-namespace", "--kubeconfig"])
            .arg(s.kubeconfig())
            .env("KUBECONFIG", "/nonexistent/kubeconfig")
            .output()
            .expect("helm runs");
        assert!(
            out.status.success(),
            "helm install on {}: {}",
            s.what(),
            String::from_utf8_lossy(&out.stderr)
        );
        objects(s)
    };
    let real_objects = install(&real);
    assert!(
        real_objects.as_array().is_some_and(|o| o.len() > 15),
        "{real_objects}"
    );
    same(
        &mut diffs,
        "the chart's objects",
        &install(&sandbox),
        &real_objects,
    );
    let policy = |s: &ApiServer| {
        let (_, p) = ask(
            s,
            "/apis/nvidia.com/v1/clusterpolicies/cluster-policy",
            "application/json",
        );
        p["spec"].clone()
    };
    let real_policy = policy(&real);
    assert!(real_policy["devicePlugin"].is_object(), "{real_policy}");
    same(
        &mut diffs,
        "the chart's ClusterPolicy",
        &policy(&sandbox),
        &real_policy,
    );

    assert!(
        diffs.is_empty(),
        "the sandbox's control plane differs from the real one:\n{}",
        diffs.join("\n")
    );
}

/// Every object in the namespace `gpu-operator` and every cluster-scoped object the chart made
/// (by the label helm's charts put on them), as sorted `kind/namespace/name`.
fn objects(s: &ApiServer) -> Value {
    let mut names = Vec::new();
    for kind in [
        "deployments.apps",
        "daemonsets.apps",
        "serviceaccounts",
        "configmaps",
        "roles.rbac.authorization.k8s.io",
        "rolebindings.rbac.authorization.k8s.io",
        "clusterroles.rbac.authorization.k8s.io",
        "clusterrolebindings.rbac.authorization.k8s.io",
        "customresourcedefinitions.apiextensions.k8s.io",
        "clusterpolicies.nvidia.com",
    ] {
        let out = s.kubectl_ok(&[
            "get",
            kind,
            "-A",
            "-l",
            "app.kubernetes.io/managed-by=Helm",
            "-o",
            "json",
        ]);
        let list: Value = serde_json::from_str(&out).expect("JSON");
        for o in list["items"].as_array().into_iter().flatten() {
            let m = &o["metadata"];
            names.push(format!(
                "{kind}/{}/{}",
                m["namespace"].as_str().unwrap_or(""),
                m["name"].as_str().unwrap_or("")
            ));
        }
    }
    names.sort();
    json!(names)
}
