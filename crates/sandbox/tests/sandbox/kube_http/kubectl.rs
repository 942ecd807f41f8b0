//! kubectl against the emulator: the time-slicing scenario of the digital twin, and server-side
//! apply with its conflicts.

use super::*;

#[test]
fn kubectl_time_slicing_twin_scenario() {
    let srv = serve();
    srv.api.pool_changed(&aks_a100_pool(Some("time-sliced-10")));
    let Some(k) = Kubectl::new(&srv, "aks", "sandbox-aks") else {
        return;
    };

    // kubectl lists the pool's nodes, named and labelled as AKS does.
    let nodes = k.json(&["get", "nodes", "-l", "agentpool=gpua100"]);
    let items = nodes["items"].as_array().expect("items");
    assert_eq!(items.len(), 2);
    let name = items[0]["metadata"]["name"]
        .as_str()
        .expect("name")
        .to_string();
    assert!(
        name.starts_with("aks-gpua100-") && name.contains("-vmss00000"),
        "{name}"
    );
    assert_eq!(label(&items[0], "team").as_deref(), Some("ml"));
    assert_eq!(items[0]["spec"]["taints"][0]["effect"], "NoSchedule");
    assert_eq!(
        allocatable(&items[0], "nvidia.com/gpu").as_deref(),
        Some("1")
    );
    // Server-side printing: the columns kubectl users know.
    let table = k.ok(&["get", "nodes", "-L", "nvidia.com/gpu.replicas"]);
    let header: Vec<&str> = table
        .lines()
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .collect();
    assert_eq!(
        header,
        ["NAME", "STATUS", "ROLES", "AGE", "VERSION", "GPU.REPLICAS"],
        "{table}"
    );
    assert!(
        table
            .lines()
            .any(|l| l.starts_with(&name) && l.contains(" Ready ") && l.trim_end().ends_with(" 1")),
        "{table}"
    );
    let described = k.ok(&["describe", "node", &name]);
    assert!(
        described.contains("nvidia.com/gpu:") && described.contains("Non-terminated Pods:"),
        "{described}"
    );

    // NVIDIA's documented steps: the ConfigMap from a file, then point the ClusterPolicy at it.
    let file = k.dir().join("time-sliced-10");
    std::fs::write(&file, TS10).expect("write");
    k.ok(&[
        "create",
        "configmap",
        "time-slicing-config",
        "-n",
        "gpu-operator",
        &format!("--from-file={}", file.display()),
    ]);
    let cm = k.json(&[
        "get",
        "configmap",
        "time-slicing-config",
        "-n",
        "gpu-operator",
    ]);
    assert_eq!(cm["data"]["time-sliced-10"], TS10);
    k.ok(&[
        "patch",
        "clusterpolicies.nvidia.com/cluster-policy",
        "--type",
        "merge",
        "-p",
        r#"{"spec":{"devicePlugin":{"config":{"name":"time-slicing-config","default":"any"}}}}"#,
    ]);
    let cp = k.json(&["get", "clusterpolicies.nvidia.com", "cluster-policy"]);
    assert_eq!(
        cp["spec"]["devicePlugin"]["config"]["name"],
        "time-slicing-config"
    );
    assert_eq!(cp["spec"]["mig"]["strategy"], "single");
    assert_eq!(cp["metadata"]["generation"], 2);

    // The operator renders the config into its operands' pod templates (the ConfigMap's volume,
    // the config-manager containers: gpu-operator controllers/object_controls.go
    // `handleDevicePluginConfig`): their pods roll and load the config the node's label names.
    let node = k.json(&["get", "node", &name]);
    assert_eq!(allocatable(&node, "nvidia.com/gpu").as_deref(), Some("10"));
    let ds = k.json(&[
        "get",
        "daemonset",
        "gpu-feature-discovery",
        "-n",
        "gpu-operator",
    ]);
    assert_eq!(
        ds["spec"]["template"]["spec"]["volumes"][1]["configMap"]["name"], "time-slicing-config",
        "{ds}"
    );

    k.ok(&[
        "rollout",
        "restart",
        "daemonset/nvidia-device-plugin-daemonset",
        "-n",
        "gpu-operator",
    ]);
    // rollout status watches the daemonset until the rollout is done.
    let out = k.ok(&[
        "rollout",
        "status",
        "daemonset/nvidia-device-plugin-daemonset",
        "-n",
        "gpu-operator",
        "--timeout=20s",
    ]);
    assert!(out.contains("successfully rolled out"), "{out}");
    let ds = k.json(&[
        "get",
        "daemonset",
        "nvidia-device-plugin-daemonset",
        "-n",
        "gpu-operator",
    ]);
    assert!(
        ds["spec"]["template"]["metadata"]["annotations"]["kubectl.kubernetes.io/restartedAt"]
            .is_string()
    );
    for item in k.json(&["get", "nodes", "-l", "agentpool=gpua100"])["items"]
        .as_array()
        .expect("items")
    {
        assert_eq!(
            allocatable(item, "nvidia.com/gpu").as_deref(),
            Some("10"),
            "{item}"
        );
        assert_eq!(item["status"]["capacity"]["nvidia.com/gpu"], "10");
        assert_eq!(
            label(item, "nvidia.com/gpu.replicas").as_deref(),
            Some("10")
        );
        assert_eq!(
            label(item, "nvidia.com/gpu.sharing-strategy").as_deref(),
            Some("time-slicing")
        );
        assert_eq!(
            label(item, "nvidia.com/gpu.product").as_deref(),
            Some("NVIDIA-A100-80GB-PCIe-SHARED")
        );
        assert_eq!(label(item, "nvidia.com/gpu.count").as_deref(), Some("1"));
    }

    // Editing the ConfigMap changes nothing until the next restart.
    k.ok(&[
        "patch",
        "configmap",
        "time-slicing-config",
        "-n",
        "gpu-operator",
        "--type",
        "merge",
        "-p",
        &json!({"data": {"time-sliced-10": TS10.replace("replicas: 10", "replicas: 4")}})
            .to_string(),
    ]);
    assert_eq!(
        allocatable(&k.json(&["get", "node", &name]), "nvidia.com/gpu").as_deref(),
        Some("10")
    );
    restart_again(&k);
    assert_eq!(
        allocatable(&k.json(&["get", "node", &name]), "nvidia.com/gpu").as_deref(),
        Some("4")
    );

    // A broken config: the plugin fails to load it and exits (k8s-device-plugin
    // cmd/nvidia-device-plugin/main.go `startPlugins`), so the node serves no GPU and says why.
    let set = |replicas: &str| {
        k.ok(&[
            "patch",
            "configmap",
            "time-slicing-config",
            "-n",
            "gpu-operator",
            "--type",
            "merge",
            "-p",
            &json!({"data": {"time-sliced-10": TS10.replace("replicas: 10", replicas)}})
                .to_string(),
        ]);
        restart_again(&k);
    };
    set("replicas: 1");
    let node = k.json(&["get", "node", &name]);
    assert_eq!(allocatable(&node, "nvidia.com/gpu").as_deref(), Some("0"));
    let why = node["metadata"]["annotations"]["sandbox.fracgpu.dev/device-plugin-error"]
        .as_str()
        .unwrap_or_default();
    assert!(why.contains("replicas must be >= 2"), "{why}");
    set("replicas: 4");
    assert_eq!(
        allocatable(&k.json(&["get", "node", &name]), "nvidia.com/gpu").as_deref(),
        Some("4")
    );

    // Relabelling a node to a config the ConfigMap does not have: config-manager's sidecar links
    // it and signals the plugin, whose reload fails: no GPU either.
    k.ok(&[
        "label",
        "node",
        &name,
        "--overwrite",
        "nvidia.com/device-plugin.config=nope",
    ]);
    let node = k.json(&["get", "node", &name]);
    assert_eq!(allocatable(&node, "nvidia.com/gpu").as_deref(), Some("0"));
    assert!(
        node["metadata"]["annotations"]["sandbox.fracgpu.dev/device-plugin-error"]
            .as_str()
            .unwrap_or_default()
            .contains("missing config nope"),
        "{node}"
    );
}

#[test]
fn kubectl_server_side_apply_and_conflicts() {
    let srv = serve();
    let Some(k) = Kubectl::new(&srv, "eks", "sandbox-eks") else {
        return;
    };
    let cm = |v: &str| {
        format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: dp\n  namespace: gpu-operator\n  labels:\n    owner: tf\ndata:\n  all: \"\"\n  ts: \"{v}\"\n"
        )
    };
    let f = k.dir().join("cm.yaml");
    std::fs::write(&f, cm("a")).expect("write");
    let fp = f.display().to_string();
    let out = k.ok(&[
        "apply",
        "--server-side",
        "--field-manager",
        "fracgpu",
        "-f",
        &fp,
    ]);
    assert!(out.contains("serverside-applied"), "{out}");
    let got = k.json(&[
        "get",
        "cm",
        "dp",
        "-n",
        "gpu-operator",
        "--show-managed-fields",
    ]);
    assert_eq!(got["data"]["ts"], "a");
    let mf = &got["metadata"]["managedFields"][0];
    assert_eq!(mf["manager"], "fracgpu");
    assert_eq!(mf["operation"], "Apply");
    assert!(mf["fieldsV1"]["f:data"]["f:ts"].is_object(), "{mf}");

    // Someone else changes the field: our next apply with another value conflicts, unless forced.
    k.ok(&[
        "patch",
        "cm",
        "dp",
        "-n",
        "gpu-operator",
        "--type",
        "merge",
        "-p",
        r#"{"data":{"ts":"hand-edit"}}"#,
    ]);
    std::fs::write(&f, cm("b")).expect("write");
    let (ok, _, err) = k.run(&[
        "apply",
        "--server-side",
        "--field-manager",
        "fracgpu",
        "-f",
        &fp,
    ]);
    assert!(!ok);
    assert!(
        err.contains("conflict") && err.contains("kubectl-patch") && err.contains(".data.ts"),
        "{err}"
    );
    k.ok(&[
        "apply",
        "--server-side",
        "--field-manager",
        "fracgpu",
        "--force-conflicts",
        "-f",
        &fp,
    ]);
    assert_eq!(
        k.json(&["get", "cm", "dp", "-n", "gpu-operator"])["data"]["ts"],
        "b"
    );

    // Dropping a field from the applied configuration removes it (nobody else owns it now).
    std::fs::write(&f, "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: dp\n  namespace: gpu-operator\ndata:\n  all: \"\"\n").expect("write");
    k.ok(&[
        "apply",
        "--server-side",
        "--field-manager",
        "fracgpu",
        "-f",
        &fp,
    ]);
    let got = k.json(&["get", "cm", "dp", "-n", "gpu-operator"]);
    assert_eq!(got["data"], json!({"all": ""}));
    assert!(got["metadata"]["labels"].get("owner").is_none(), "{got}");

    // Server-side apply of the ClusterPolicy pointer, as the provider will do it.
    let cp = k.dir().join("cp.yaml");
    std::fs::write(&cp, "apiVersion: nvidia.com/v1\nkind: ClusterPolicy\nmetadata:\n  name: cluster-policy\nspec:\n  devicePlugin:\n    config:\n      name: dp\n      default: all\n").expect("write");
    k.ok(&[
        "apply",
        "--server-side",
        "--field-manager",
        "fracgpu",
        "-f",
        &cp.display().to_string(),
    ]);
    let got = k.json(&["get", "clusterpolicies.nvidia.com", "cluster-policy"]);
    assert_eq!(
        got["spec"]["devicePlugin"]["config"],
        json!({"name": "dp", "default": "all"})
    );
    assert_eq!(
        got["spec"]["devicePlugin"]["enabled"], true,
        "fields owned by helm stay"
    );
    // The chart's manager owns mig.strategy: changing it by apply conflicts with "helm".
    std::fs::write(&cp, "apiVersion: nvidia.com/v1\nkind: ClusterPolicy\nmetadata:\n  name: cluster-policy\nspec:\n  mig:\n    strategy: mixed\n").expect("write");
    let (ok, _, err) = k.run(&[
        "apply",
        "--server-side",
        "--field-manager",
        "fracgpu",
        "-f",
        &cp.display().to_string(),
    ]);
    assert!(
        !ok && err.contains("\"helm\"") && err.contains(".spec.mig.strategy"),
        "{err}"
    );

    // Client-side apply (kubectl's default, validated through the OpenAPI v3 verifier), twice: create, then
    // a strategic merge patch carrying the last-applied annotation.
    let ca = k.dir().join("ca.yaml");
    let ds = |img: &str| {
        format!(
            "apiVersion: apps/v1\nkind: DaemonSet\nmetadata:\n  name: probe\n  namespace: default\nspec:\n  selector:\n    matchLabels:\n      app: probe\n  template:\n    metadata:\n      labels:\n        app: probe\n    spec:\n      containers:\n      - name: c\n        image: {img}\n"
        )
    };
    std::fs::write(&ca, ds("busybox:1")).expect("write");
    assert!(
        k.ok(&["apply", "-f", &ca.display().to_string()])
            .contains("created")
    );
    std::fs::write(&ca, ds("busybox:2")).expect("write");
    assert!(
        k.ok(&["apply", "-f", &ca.display().to_string()])
            .contains("configured")
    );
    let got = k.json(&["get", "ds", "probe"]);
    assert_eq!(
        got["spec"]["template"]["spec"]["containers"],
        json!([{"name": "c", "image": "busybox:2"}])
    );
    assert_eq!(got["metadata"]["generation"], 2);
    assert!(
        got["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"]
            .is_string()
    );

    // Namespaces, labels and deletes through kubectl's typed (protobuf) and patch paths.
    k.ok(&["create", "namespace", "team-a"]);
    k.ok(&["label", "namespace", "team-a", "tier=gpu"]);
    assert_eq!(
        k.json(&["get", "ns", "-l", "tier=gpu"])["items"][0]["metadata"]["name"],
        "team-a"
    );
    k.ok(&[
        "create",
        "configmap",
        "c",
        "-n",
        "team-a",
        "--from-literal=k=v",
    ]);
    k.ok(&["delete", "namespace", "team-a"]);
    let (ok, _, err) = k.run(&["get", "cm", "c", "-n", "team-a"]);
    assert!(!ok && err.contains("not found"), "{err}");

    // kubectl get for the other kinds, and delete.
    assert!(k.ok(&["get", "namespaces"]).contains("gpu-operator"));
    assert!(
        k.ok(&["get", "ds", "-A"])
            .contains("nvidia-device-plugin-daemonset")
    );
    assert!(k.ok(&["get", "crd"]).contains("clusterpolicies.nvidia.com"));
    k.ok(&[
        "create",
        "secret",
        "generic",
        "s1",
        "-n",
        "default",
        "--from-literal=k=v",
    ]);
    assert_eq!(k.json(&["get", "secret", "s1"])["data"]["k"], "dg==");
    k.ok(&["delete", "cm", "dp", "-n", "gpu-operator"]);
    let (ok, _, err) = k.run(&["get", "cm", "dp", "-n", "gpu-operator"]);
    assert!(!ok && err.contains("configmaps \"dp\" not found"), "{err}");
}
