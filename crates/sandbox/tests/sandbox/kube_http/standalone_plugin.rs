//! NVIDIA's standalone device plugin chart (v0.20.0, `shared/fixtures/charts`) installed by real
//! helm on a sandbox cluster without the GPU operator: the twin's nodes run the plugin its
//! DaemonSet describes, with the configs of `config.map`, `config.default` as the default and the
//! node label `nvidia.com/device-plugin.config` choosing per node, as the chart's config-manager
//! containers do.

use super::*;

const TS4: &str = "version: v1\nsharing:\n  timeSlicing:\n    resources:\n    - name: nvidia.com/gpu\n      replicas: 4\n";

fn gpus(k: &Kubectl) -> Vec<(String, Option<String>)> {
    let nodes = k.json(&["get", "nodes", "-l", "agentpool=gpua100"]);
    nodes["items"]
        .as_array()
        .expect("items")
        .iter()
        .map(|n| {
            (
                n["metadata"]["name"].as_str().unwrap().to_string(),
                allocatable(n, "nvidia.com/gpu"),
            )
        })
        .collect()
}

#[test]
fn the_standalone_charts_configs_reach_the_nodes_it_runs_on() {
    let api = KubeApi::new();
    api.add_cluster_without_operator("aks", "sandbox-aks");
    let srv = serve_with(api);
    srv.api.pool_changed(&aks_a100_pool(None));
    let (Some(k), Some(helm), Some(fixtures)) = (
        Kubectl::new(&srv, "aks", "sandbox-aks"),
        tools::require(Tool::Helm4),
        testkit::apiserver::fixtures(),
    ) else {
        return;
    };
    let chart = fixtures.join("charts/nvidia-device-plugin-0.20.0.tgz");
    let helm_ok = |args: &[&str]| {
        let out = Command::new(&helm)
            .args(args)
            .arg("--kubeconfig")
            .arg(k.dir().join("kubeconfig"))
            .args(["-n", "nvidia-device-plugin"])
            .env("KUBECONFIG", "/nonexistent/kubeconfig")
            .output()
            .expect("helm runs");
        assert!(
            out.status.success(),
            "helm {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr)
        );
    };
    let map = json!({"all": "version: v1\n", "ts-4": TS4}).to_string();
    let chart = chart.display().to_string();
    helm_ok(&[
        "install",
        "nvdp",
        &chart,
        "--create-namespace",
        "--set-json",
        &format!("config.map={map}"),
        "--set",
        "config.default=all",
    ]);
    // The chart's DaemonSet rolled onto the nodes with the default config: whole GPUs.
    let nodes = gpus(&k);
    assert_eq!(nodes.len(), 2);
    assert!(
        nodes.iter().all(|(_, g)| g.as_deref() == Some("1")),
        "{nodes:?}"
    );

    // One node labelled: its sidecar links ts-4 and signals the plugin.
    let (first, second) = (nodes[0].0.clone(), nodes[1].0.clone());
    k.ok(&[
        "label",
        "node",
        &first,
        "nvidia.com/device-plugin.config=ts-4",
    ]);
    let nodes = gpus(&k);
    assert_eq!(nodes[0], (first.clone(), Some("4".into())), "{nodes:?}");
    assert_eq!(nodes[1].1.as_deref(), Some("1"), "{nodes:?}");

    // A new default changes the pod template: the pods roll, the unlabelled node follows it.
    helm_ok(&[
        "upgrade",
        "nvdp",
        &chart,
        "--reuse-values",
        "--set",
        "config.default=ts-4",
    ]);
    let nodes = gpus(&k);
    assert!(
        nodes.iter().all(|(_, g)| g.as_deref() == Some("4")),
        "{nodes:?}"
    );

    // A label naming a config the chart does not render: the restarted plugin cannot start.
    k.ok(&[
        "label",
        "node",
        &second,
        "nvidia.com/device-plugin.config=ts-9",
    ]);
    helm_ok(&[
        "upgrade",
        "nvdp",
        &chart,
        "--reuse-values",
        "--set",
        "config.default=all",
    ]);
    let nodes = gpus(&k);
    assert_eq!(nodes[0].1.as_deref(), Some("4"), "{nodes:?}");
    assert_eq!(nodes[1], (second, Some("0".into())), "{nodes:?}");
}
