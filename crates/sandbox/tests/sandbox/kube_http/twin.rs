//! What the nodes of each cloud advertise: GKE sharing and partitions at once, EKS and AKS through
//! the MIG manager and the device plugin config, and pool lifecycles that keep API-set labels.

use super::*;

#[test]
fn gke_sharing_and_partitions_advertise_at_once() {
    let srv = serve();
    srv.api
        .pool_changed(&gke_pool("shared", 2, None, Some(("TIME_SHARING", 4))));
    srv.api
        .pool_changed(&gke_pool("parted", 1, Some(("1g.5gb", 7)), None));
    srv.api
        .pool_changed(&gke_pool("both", 1, Some(("3g.20gb", 2)), Some(("MPS", 3))));
    let list = srv.get_in(
        "gke",
        "sandbox-gke",
        "/api/v1/nodes?labelSelector=cloud.google.com%2Fgke-nodepool%3Dshared",
    );
    let nodes = items(&list);
    assert_eq!(nodes.len(), 1);
    let n = &nodes[0];
    let name = n["metadata"]["name"].as_str().unwrap_or_default();
    assert!(name.starts_with("gke-sandbox-gke-shared-"), "{name}");
    assert_eq!(allocatable(n, "nvidia.com/gpu").as_deref(), Some("8"));
    assert_eq!(
        label(n, "cloud.google.com/gke-gpu-sharing-strategy").as_deref(),
        Some("time-sharing")
    );
    assert_eq!(
        label(n, "cloud.google.com/gke-max-shared-clients-per-gpu").as_deref(),
        Some("4")
    );
    assert_eq!(n["spec"]["taints"][0]["key"], "nvidia.com/gpu");
    let parted = items(&srv.get_in(
        "gke",
        "sandbox-gke",
        "/api/v1/nodes?labelSelector=cloud.google.com%2Fgke-nodepool%3Dparted",
    ));
    assert_eq!(
        allocatable(&parted[0], "nvidia.com/gpu").as_deref(),
        Some("7")
    );
    assert_eq!(
        label(&parted[0], "cloud.google.com/gke-gpu-partition-size").as_deref(),
        Some("1g.5gb")
    );
    let both = items(&srv.get_in(
        "gke",
        "sandbox-gke",
        "/api/v1/nodes?labelSelector=cloud.google.com%2Fgke-nodepool+in+(both,nothing)",
    ));
    assert_eq!(
        allocatable(&both[0], "nvidia.com/gpu").as_deref(),
        Some("6")
    );
    assert_eq!(
        label(&both[0], "cloud.google.com/gke-gpu-sharing-strategy").as_deref(),
        Some("mps")
    );
    // GKE's device plugin is not the operator's: restarting the daemonset or a ClusterPolicy config changes nothing.
    let r = srv.send_in(
        "gke",
        "sandbox-gke",
        "PATCH",
        "/apis/nvidia.com/v1/clusterpolicies/cluster-policy",
        "application/merge-patch+json",
        r#"{"spec":{"devicePlugin":{"config":{"name":"nope","default":"x"}}}}"#,
    );
    assert_eq!(r.code, 200, "{}", r.body);
    let r = srv.send_in("gke", "sandbox-gke", "PATCH", "/apis/apps/v1/namespaces/gpu-operator/daemonsets/nvidia-device-plugin-daemonset",
        "application/strategic-merge-patch+json", r#"{"spec":{"template":{"metadata":{"annotations":{"kubectl.kubernetes.io/restartedAt":"now"}}}}}"#);
    assert_eq!(r.code, 200, "{}", r.body);
    let all = items(&srv.get_in("gke", "sandbox-gke", "/api/v1/nodes"));
    let mut got: Vec<String> = all
        .iter()
        .filter_map(|n| allocatable(n, "nvidia.com/gpu"))
        .collect();
    got.sort();
    assert_eq!(got, ["6", "7", "8"]);
}

#[test]
fn eks_mig_manager_and_strategies() {
    let srv = serve();
    let pool = PoolNodes {
        instances: Vec::new(),
        cloud: "eks",
        cluster: "sandbox-eks".into(),
        pool: "p4d".into(),
        node_count: 1,
        zones: vec![],
        labels: BTreeMap::from([(
            "nvidia.com/mig.config".to_string(),
            "all-1g.5gb".to_string(),
        )]),
        taints: vec![],
        gpu_product: Some("NVIDIA-A100-SXM4-40GB".into()),
        gpus_per_node: 8,
        gpu_memory_mib: 40960,
        mig_profile: None,
        mig_instances_per_gpu: 0,
        gke_sharing: None,
        os_image: None,
    };
    srv.api.pool_changed(&pool);
    let n = &items(&srv.get_in(
        "eks",
        "sandbox-eks",
        "/api/v1/nodes?labelSelector=eks.amazonaws.com%2Fnodegroup%3Dp4d",
    ))[0];
    let name = n["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(
        name.starts_with("ip-10-") && name.ends_with(".ec2.internal"),
        "{name}"
    );
    // The chart's default strategy is single: 8 GPUs x 7 instances as nvidia.com/gpu.
    assert_eq!(
        label(n, "nvidia.com/mig.config.state").as_deref(),
        Some("success")
    );
    assert_eq!(allocatable(n, "nvidia.com/gpu").as_deref(), Some("56"));
    assert_eq!(
        label(n, "nvidia.com/gpu.product").as_deref(),
        Some("NVIDIA-A100-SXM4-40GB-MIG-1g.5gb")
    );
    // Switch to mixed; it takes effect at the next restart.
    let r = srv.send_in(
        "eks",
        "sandbox-eks",
        "PATCH",
        "/apis/nvidia.com/v1/clusterpolicies/cluster-policy",
        "application/json-patch+json",
        r#"[{"op":"replace","path":"/spec/mig/strategy","value":"mixed"}]"#,
    );
    assert_eq!(r.code, 200, "{}", r.body);
    let n = srv
        .get_in("eks", "sandbox-eks", &format!("/api/v1/nodes/{name}"))
        .body;
    assert_eq!(allocatable(&n, "nvidia.com/gpu").as_deref(), Some("56"));
    let r = srv.send_in("eks", "sandbox-eks", "PATCH", "/apis/apps/v1/namespaces/gpu-operator/daemonsets/nvidia-device-plugin-daemonset",
        "application/strategic-merge-patch+json", r#"{"spec":{"template":{"metadata":{"annotations":{"kubectl.kubernetes.io/restartedAt":"t1"}}}}}"#);
    assert_eq!(r.code, 200);
    let n = srv
        .get_in("eks", "sandbox-eks", &format!("/api/v1/nodes/{name}"))
        .body;
    assert_eq!(
        allocatable(&n, "nvidia.com/mig-1g.5gb").as_deref(),
        Some("56"),
        "{n}"
    );
    assert_eq!(allocatable(&n, "nvidia.com/gpu"), None);
    assert_eq!(
        label(&n, "nvidia.com/mig-1g.5gb.count").as_deref(),
        Some("56")
    );
    // A profile this GPU does not have: the MIG manager fails and the GPUs stay whole.
    let r = srv.send_in(
        "eks",
        "sandbox-eks",
        "PATCH",
        &format!("/api/v1/nodes/{name}"),
        "application/merge-patch+json",
        r#"{"metadata":{"labels":{"nvidia.com/mig.config":"all-1g.20gb"}}}"#,
    );
    assert_eq!(r.code, 200);
    assert_eq!(
        label(&r.body, "nvidia.com/mig.config.state").as_deref(),
        Some("failed")
    );
    assert_eq!(allocatable(&r.body, "nvidia.com/gpu").as_deref(), Some("8"));
    assert_eq!(allocatable(&r.body, "nvidia.com/mig-1g.5gb"), None);
}

#[test]
fn aks_mig_pool_with_time_slicing_and_default_config() {
    let srv = serve();
    let mut pool = aks_a100_pool(None);
    pool.pool = "mig".into();
    pool.gpus_per_node = 2;
    pool.mig_profile = Some("1g.10gb".into());
    pool.mig_instances_per_gpu = 7;
    // Without its own MIG config label the operator would label the node all-disabled and its MIG
    // manager would undo the partitions AKS made.
    pool.labels
        .insert("nvidia.com/mig.config".into(), "all-1g.10gb".into());
    srv.api.pool_changed(&pool);
    let n = &items(&srv.call("GET", "/api/v1/nodes?labelSelector=agentpool%3Dmig", None))[0];
    let name = n["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert_eq!(allocatable(n, "nvidia.com/gpu").as_deref(), Some("14"));
    // A config named by the ClusterPolicy default (the node has no label), rename by default.
    let cfg = "version: v1\nsharing:\n  timeSlicing:\n    renameByDefault: true\n    resources:\n    - name: nvidia.com/gpu\n      replicas: 3\n";
    let r = srv.call("POST", "/api/v1/namespaces/gpu-operator/configmaps",
        Some(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "dp"}, "data": {"ts3": cfg, "all": ""}})));
    assert_eq!(r.code, 201, "{}", r.body);
    // Server-side apply with a JSON body, as kube-rs sends it.
    let r = srv.patch("/apis/nvidia.com/v1/clusterpolicies/cluster-policy?fieldManager=fracgpu&force=true", "application/apply-patch+yaml",
        &json!({"apiVersion": "nvidia.com/v1", "kind": "ClusterPolicy", "metadata": {"name": "cluster-policy"},
            "spec": {"devicePlugin": {"config": {"name": "dp", "default": "ts3"}}}}).to_string());
    assert_eq!(r.code, 200, "{}", r.body);
    let r = srv.patch(
        "/apis/apps/v1/namespaces/gpu-operator/daemonsets/nvidia-device-plugin-daemonset",
        "application/merge-patch+json",
        r#"{"spec":{"template":{"metadata":{"annotations":{"fracgpu.dev/restartedAt":"1"}}}}}"#,
    );
    assert_eq!(r.code, 200, "{}", r.body);
    assert_eq!(
        r.body["status"]["numberReady"], 2,
        "the rollout reports both GPU nodes"
    );
    let n = srv.call("GET", &format!("/api/v1/nodes/{name}"), None).body;
    assert_eq!(
        allocatable(&n, "nvidia.com/gpu.shared").as_deref(),
        Some("42"),
        "{n}"
    );
    assert_eq!(allocatable(&n, "nvidia.com/gpu"), None);
    assert_eq!(
        label(&n, "nvidia.com/gpu.product").as_deref(),
        Some("NVIDIA-A100-80GB-PCIe-MIG-1g.10gb")
    );
    assert_eq!(label(&n, "nvidia.com/gpu.replicas").as_deref(), Some("3"));
}

#[test]
fn pool_lifecycle_keeps_api_labels_and_names() {
    let srv = serve();
    let mut pool = aks_a100_pool(None);
    pool.node_count = 3;
    srv.api.pool_changed(&pool);
    let names = srv.api.pool_node_names("aks", "sandbox-aks", "gpua100");
    assert_eq!(names.len(), 3);
    let first = names[0].clone();
    let r = srv.patch(
        &format!("/api/v1/nodes/{first}"),
        "application/merge-patch+json",
        r#"{"metadata":{"labels":{"added-by":"kubectl"}}}"#,
    );
    assert_eq!(r.code, 200, "{}", r.body);
    pool.node_count = 1;
    pool.labels = BTreeMap::from([("team".to_string(), "infra".to_string())]);
    srv.api.pool_changed(&pool);
    assert_eq!(
        srv.api.pool_node_names("aks", "sandbox-aks", "gpua100"),
        vec![first.clone()]
    );
    let n = srv
        .call("GET", &format!("/api/v1/nodes/{first}"), None)
        .body;
    assert_eq!(label(&n, "team").as_deref(), Some("infra"));
    assert_eq!(label(&n, "added-by").as_deref(), Some("kubectl"));
    assert_eq!(
        label(&n, "kubernetes.azure.com/agentpool").as_deref(),
        Some("gpua100")
    );
    srv.api.pool_deleted("aks", "sandbox-aks", "gpua100");
    assert_eq!(
        srv.call("GET", &format!("/api/v1/nodes/{first}"), None)
            .code,
        404
    );
    assert!(items(&srv.call("GET", "/api/v1/nodes", None)).is_empty());
}

/// An EKS p4d node group whose nodes select the `ts10` config, on the given OS image.
fn eks_p4d_pool(pool: &str, os_image: &str) -> PoolNodes {
    PoolNodes {
        instances: Vec::new(),
        cloud: "eks",
        cluster: "sandbox-eks".into(),
        pool: pool.into(),
        node_count: 1,
        zones: Vec::new(),
        labels: BTreeMap::from([(
            "nvidia.com/device-plugin.config".to_string(),
            "ts10".to_string(),
        )]),
        taints: vec![],
        gpu_product: Some("NVIDIA-A100-SXM4-40GB".into()),
        gpus_per_node: 8,
        gpu_memory_mib: 40960,
        mig_profile: None,
        mig_instances_per_gpu: 0,
        gke_sharing: None,
        os_image: Some(os_image.into()),
    }
}

#[test]
fn bottlerocket_nodes_ignore_the_operators_config_and_mig_manager() {
    let srv = serve();
    srv.api
        .pool_changed(&eks_p4d_pool("al2023", "Amazon Linux 2023.9.20251117"));
    srv.api.pool_changed(&eks_p4d_pool(
        "bottlerocket",
        "Bottlerocket OS 1.51.0 (aws-k8s-1.33-nvidia)",
    ));
    let node = |pool: &str| {
        items(&srv.get_in(
            "eks",
            "sandbox-eks",
            &format!("/api/v1/nodes?labelSelector=eks.amazonaws.com%2Fnodegroup%3D{pool}"),
        ))[0]
            .clone()
    };
    let br = node("bottlerocket");
    assert_eq!(
        br["status"]["nodeInfo"]["osImage"],
        "Bottlerocket OS 1.51.0 (aws-k8s-1.33-nvidia)"
    );
    // The operator delivers the time-slicing config both nodes' label names, and restarts its plugin.
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "dp"}, "data": {"ts10": TS10}});
    let r = srv.send_in(
        "eks",
        "sandbox-eks",
        "POST",
        "/api/v1/namespaces/gpu-operator/configmaps",
        "application/json",
        &cm.to_string(),
    );
    assert_eq!(r.code, 201, "{}", r.body);
    let r = srv.send_in(
        "eks",
        "sandbox-eks",
        "PATCH",
        "/apis/nvidia.com/v1/clusterpolicies/cluster-policy",
        "application/merge-patch+json",
        r#"{"spec":{"devicePlugin":{"config":{"name":"dp"}}}}"#,
    );
    assert_eq!(r.code, 200, "{}", r.body);
    let r = srv.send_in("eks", "sandbox-eks", "PATCH", "/apis/apps/v1/namespaces/gpu-operator/daemonsets/nvidia-device-plugin-daemonset",
        "application/strategic-merge-patch+json", r#"{"spec":{"template":{"metadata":{"annotations":{"kubectl.kubernetes.io/restartedAt":"t1"}}}}}"#);
    assert_eq!(r.code, 200, "{}", r.body);
    // AL2023: the operator's plugin shares each of the 8 GPUs 10 ways.
    assert_eq!(
        allocatable(&node("al2023"), "nvidia.com/gpu").as_deref(),
        Some("80")
    );
    // Bottlerocket: the host's own plugin never read that config: 8 whole GPUs.
    let br = node("bottlerocket");
    assert_eq!(allocatable(&br, "nvidia.com/gpu").as_deref(), Some("8"));
    assert_eq!(label(&br, "nvidia.com/gpu.replicas"), None, "{br}");
    // Nor does the operator's MIG manager partition it.
    let name = br["metadata"]["name"].as_str().unwrap_or_default();
    let r = srv.send_in(
        "eks",
        "sandbox-eks",
        "PATCH",
        &format!("/api/v1/nodes/{name}"),
        "application/merge-patch+json",
        r#"{"metadata":{"labels":{"nvidia.com/mig.config":"all-1g.5gb"}}}"#,
    );
    assert_eq!(r.code, 200, "{}", r.body);
    assert_eq!(label(&r.body, "nvidia.com/mig.config.state"), None);
    assert_eq!(allocatable(&r.body, "nvidia.com/gpu").as_deref(), Some("8"));
    assert_eq!(allocatable(&r.body, "nvidia.com/mig-1g.5gb"), None);
}

/// The API server refuses a Node whose taints repeat a key and effect (validateNodeTaints), through
/// the API and when a pool's machines register: GKE's own `nvidia.com/gpu=present:NoSchedule` next
/// to a pool taint `nvidia.com/gpu=Present:NoSchedule` keeps the nodes from ever appearing.
#[test]
fn nodes_whose_taints_repeat_a_key_and_effect_are_refused() {
    let srv = serve();
    let mut doubled = gke_pool("doubled", 1, None, None);
    doubled.taints.insert(
        0,
        (
            "nvidia.com/gpu".into(),
            "Present".into(),
            "NoSchedule".into(),
        ),
    );
    doubled.node_count = 2;
    srv.api.pool_changed(&doubled);
    assert!(
        srv.api
            .pool_node_names("gke", "sandbox-gke", "doubled")
            .len()
            == 2,
        "the machines exist"
    );
    let listed = items(&srv.get_in(
        "gke",
        "sandbox-gke",
        "/api/v1/nodes?labelSelector=cloud.google.com%2Fgke-nodepool%3Ddoubled",
    ));
    assert!(listed.is_empty(), "no node registered: {listed:?}");
    let errors = srv
        .api
        .node_registration_errors("gke", "sandbox-gke", "doubled");
    assert_eq!(errors.len(), 2);
    for e in errors.values() {
        assert!(
            e.contains("is invalid: spec.taints[1]: Duplicate value: core.Taint{Key:\"nvidia.com/gpu\", Value:\"present\", Effect:\"NoSchedule\", TimeAdded:<nil>}: taints must be unique by key and effect pair"),
            "{e}"
        );
    }

    // The same key with GKE's taint alone registers; the pool's nodes then appear.
    srv.api.pool_changed(&gke_pool("doubled", 1, None, None));
    assert!(
        srv.api
            .node_registration_errors("gke", "sandbox-gke", "doubled")
            .is_empty()
    );
    let single = items(&srv.get_in(
        "gke",
        "sandbox-gke",
        "/api/v1/nodes?labelSelector=cloud.google.com%2Fgke-nodepool%3Ddoubled",
    ));
    assert_eq!(single.len(), 1);

    // Through the API: a second NoSchedule taint on the key is refused with 422; another effect is not.
    let name = single[0]["metadata"]["name"].as_str().unwrap().to_string();
    let path = format!("/api/v1/nodes/{name}");
    let r = srv.send_in(
        "gke",
        "sandbox-gke",
        "PATCH",
        &path,
        "application/merge-patch+json",
        r#"{"spec":{"taints":[{"key":"nvidia.com/gpu","value":"present","effect":"NoSchedule"},{"key":"nvidia.com/gpu","value":"other","effect":"NoSchedule"}]}}"#,
    );
    assert_eq!(r.code, 422, "{}", r.body);
    assert!(
        r.body["message"]
            .as_str()
            .unwrap_or_default()
            .contains("taints must be unique by key and effect pair"),
        "{}",
        r.body
    );
    assert_eq!(
        r.body["details"]["causes"][0]["reason"],
        "FieldValueDuplicate"
    );
    let r = srv.send_in(
        "gke",
        "sandbox-gke",
        "PATCH",
        &path,
        "application/merge-patch+json",
        r#"{"spec":{"taints":[{"key":"nvidia.com/gpu","value":"present","effect":"NoSchedule"},{"key":"nvidia.com/gpu","value":"present","effect":"NoExecute"}]}}"#,
    );
    assert_eq!(r.code, 200, "{}", r.body);
}
