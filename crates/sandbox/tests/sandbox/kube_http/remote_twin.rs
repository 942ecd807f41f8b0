//! The twin on any API server: one scenario, one expectation, two servers. On a control plane
//! without a twin (testkit's: a real kube-apiserver where `KUBEBUILDER_ASSETS` names one, else
//! `fracgpu-sandbox apiserver`; with NVIDIA's ClusterPolicy CRD) the nodes are made by hand and
//! `RemoteTwin` plays the GPU stack through the API; on the sandbox's API (a cluster without the
//! operator, set up the same way) its in-process twin does. The same kubectl steps run on both, and the same nodes must come out, so
//! the two twins cannot drift apart.

use super::*;
use sandbox::kube::remote_twin::RemoteTwin;
use testkit::apiserver::{self, ApiServer};

/// One API server the scenario runs on.
trait Side {
    fn name(&self) -> &'static str;
    /// kubectl as the cluster's admin; must succeed.
    fn kubectl(&self, args: &[&str]) -> String;
    /// Applies NVIDIA's ClusterPolicy CRD from the fixtures and waits until it is served.
    fn install_crd(&self, fixtures: &Path);
    /// Lets the GPU stack act on what changed.
    fn settle(&self);
}

struct Real {
    server: ApiServer,
    twin: RemoteTwin,
    rt: tokio::runtime::Runtime,
}

impl Side for Real {
    fn name(&self) -> &'static str {
        "kube-apiserver"
    }
    fn kubectl(&self, args: &[&str]) -> String {
        self.server.kubectl_ok(args)
    }
    fn install_crd(&self, fixtures: &Path) {
        self.server
            .install_crds(fixtures, &["nvidia.com_clusterpolicies.yaml"]);
    }
    fn settle(&self) {
        let r = self
            .rt
            .block_on(self.twin.sync_once())
            .unwrap_or_else(|e| panic!("twin sync: {e}"));
        assert_eq!(r.gpu_nodes.len(), 2, "{r:?}");
        assert!(r.refused.is_empty(), "{r:?}");
        // A second sync with nothing changed writes nothing.
        let again = self
            .rt
            .block_on(self.twin.sync_once())
            .unwrap_or_else(|e| panic!("twin sync: {e}"));
        assert!(
            again.written.is_empty() && !again.restarted,
            "second sync: {again:?}"
        );
    }
}

struct Sandboxed {
    _srv: Server,
    k: Kubectl,
}

impl Side for Sandboxed {
    fn name(&self) -> &'static str {
        "sandbox"
    }
    fn kubectl(&self, args: &[&str]) -> String {
        self.k.ok(args)
    }
    fn install_crd(&self, fixtures: &Path) {
        let f = fixtures.join("crds/nvidia.com_clusterpolicies.yaml");
        self.k
            .ok(&["apply", "--server-side", "-f", &f.display().to_string()]);
        self.k.ok(&[
            "wait",
            "--for",
            "condition=established",
            "crd/clusterpolicies.nvidia.com",
            "--timeout=20s",
        ]);
    }
    fn settle(&self) {
        // The sandbox's twin reacts to each write as it is made.
    }
}

const TS4: &str = "version: v1\nsharing:\n  timeSlicing:\n    resources:\n    - name: nvidia.com/gpu\n      replicas: 4\n";
const TS8: &str = "version: v1\nsharing:\n  timeSlicing:\n    resources:\n    - name: nvidia.com/gpu\n      replicas: 8\n";
const TS2_RENAMED: &str = "version: v1\nsharing:\n  timeSlicing:\n    renameByDefault: true\n    resources:\n    - name: nvidia.com/gpu\n      replicas: 2\n";

fn configmap(ts4: &str) -> String {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "time-slicing-config", "namespace": "gpu-operator"},
        "data": {"ts4": ts4, "ts2": TS2_RENAMED}})
    .to_string()
}

const DAEMONSET: &str = r#"{"apiVersion": "apps/v1", "kind": "DaemonSet",
  "metadata": {"name": "nvidia-device-plugin-daemonset", "namespace": "gpu-operator"},
  "spec": {"selector": {"matchLabels": {"app": "nvidia-device-plugin-daemonset"}},
    "template": {"metadata": {"labels": {"app": "nvidia-device-plugin-daemonset"}},
      "spec": {"nodeSelector": {"nvidia.com/gpu.deploy.device-plugin": "true"},
        "containers": [{"name": "nvidia-device-plugin", "image": "nvcr.io/nvidia/k8s-device-plugin:v0.18.1"}]}}}}"#;

/// GPU feature discovery's daemonset, which reads the same config through its own config-manager.
const GFD_DAEMONSET: &str = r#"{"apiVersion": "apps/v1", "kind": "DaemonSet",
  "metadata": {"name": "gpu-feature-discovery", "namespace": "gpu-operator"},
  "spec": {"selector": {"matchLabels": {"app": "gpu-feature-discovery"}},
    "template": {"metadata": {"labels": {"app": "gpu-feature-discovery"}},
      "spec": {"nodeSelector": {"nvidia.com/gpu.deploy.gpu-feature-discovery": "true"},
        "containers": [{"name": "gpu-feature-discovery", "image": "nvcr.io/nvidia/k8s-device-plugin:v0.18.1"}]}}}}"#;

/// Two nodes with the hardware labels GPU feature discovery puts on them (NVIDIA/k8s-device-plugin
/// README, "Catalog of Labels"): an 8 x A100 80GB that selects the `ts4` config, and an A10G that takes
/// the ClusterPolicy's default.
/// (Two documents, not a `v1 List`: kubectl validates a List against the server's OpenAPI, whose
/// `v1` document the sandbox's does not carry.)
const NODES: &str = r#"{"apiVersion": "v1", "kind": "Node", "metadata": {"name": "gpu-a100", "labels": {
    "kubernetes.io/hostname": "gpu-a100", "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB",
    "nvidia.com/gpu.count": "8", "nvidia.com/gpu.memory": "81920", "nvidia.com/mig.capable": "true",
    "nvidia.com/device-plugin.config": "ts4"}}}
---
{"apiVersion": "v1", "kind": "Node", "metadata": {"name": "gpu-a10g", "labels": {
    "kubernetes.io/hostname": "gpu-a10g", "nvidia.com/gpu.product": "NVIDIA-A10G",
    "nvidia.com/gpu.count": "1", "nvidia.com/gpu.memory": "23028", "nvidia.com/mig.capable": "false"}}}"#;

/// What one node must show: its `nvidia.com/` extended resources (capacity and allocatable, exactly)
/// and some labels (None: absent).
struct Expect {
    node: &'static str,
    resources: &'static [(&'static str, &'static str)],
    labels: &'static [(&'static str, Option<&'static str>)],
}

fn check(side: &dyn Side, step: &str, expect: &[Expect]) {
    for e in expect {
        let n: Value = serde_json::from_str(&side.kubectl(&["get", "node", e.node, "-o", "json"]))
            .expect("a node");
        let want: BTreeMap<String, String> = e
            .resources
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        for f in ["capacity", "allocatable"] {
            let got: BTreeMap<String, String> = n["status"][f]
                .as_object()
                .into_iter()
                .flatten()
                .filter(|(k, _)| k.starts_with("nvidia.com/"))
                .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string()))
                .collect();
            assert_eq!(
                got,
                want,
                "{} / {step}: {} status.{f}\n{n}",
                side.name(),
                e.node
            );
        }
        for (k, v) in e.labels {
            assert_eq!(
                label(&n, k).as_deref(),
                *v,
                "{} / {step}: {} label {k}\n{n}",
                side.name(),
                e.node
            );
        }
    }
}

const A10G_DEFAULT: Expect = Expect {
    node: "gpu-a10g",
    resources: &[("nvidia.com/gpu.shared", "2")],
    labels: &[
        ("nvidia.com/gpu.product", Some("NVIDIA-A10G")),
        ("nvidia.com/gpu.replicas", Some("2")),
        ("nvidia.com/gpu.sharing-strategy", Some("time-slicing")),
        ("nvidia.com/gpu.count", Some("1")),
        ("nvidia.com/gpu.memory", Some("23028")),
        ("nvidia.com/mig.strategy", Some("single")),
        ("nvidia.com/mig.config", None),
        ("nvidia.com/mig.config.state", None),
    ],
};

const A100_TS4: Expect = Expect {
    node: "gpu-a100",
    resources: &[("nvidia.com/gpu", "32")],
    labels: &[
        ("nvidia.com/gpu.present", Some("true")),
        (
            "nvidia.com/gpu.product",
            Some("NVIDIA-A100-SXM4-80GB-SHARED"),
        ),
        ("nvidia.com/gpu.replicas", Some("4")),
        ("nvidia.com/gpu.sharing-strategy", Some("time-slicing")),
        ("nvidia.com/gpu.count", Some("8")),
        ("nvidia.com/mig.strategy", Some("single")),
        // The operator labels a MIG-capable node that names no MIG config with the MIG manager's
        // default, and the MIG manager applies it.
        ("nvidia.com/mig.config", Some("all-disabled")),
        ("nvidia.com/mig.config.state", Some("success")),
    ],
};

fn scenario(side: &dyn Side, fixtures: &Path) {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = |name: &str, text: &str| {
        let p = dir.path().join(name);
        std::fs::write(&p, text).expect("manifest");
        p.display().to_string()
    };
    let apply = |name: &str, text: &str| {
        side.kubectl(&[
            "apply",
            "--server-side",
            "--force-conflicts",
            "-f",
            &file(name, text),
        ])
    };
    side.install_crd(fixtures);
    side.kubectl(&["create", "namespace", "gpu-operator"]);
    let sample = fixtures.join("samples/clusterpolicy.yaml");
    side.kubectl(&[
        "apply",
        "--server-side",
        "-f",
        &sample.display().to_string(),
    ]);
    apply("cm.json", &configmap(TS4));
    side.kubectl(&[
        "patch",
        "clusterpolicy",
        "cluster-policy",
        "--type",
        "merge",
        "-p",
        r#"{"spec":{"devicePlugin":{"config":{"name":"time-slicing-config","default":"ts2"}}}}"#,
    ]);
    apply("ds.json", DAEMONSET);
    apply("gfd.json", GFD_DAEMONSET);
    apply("nodes.yaml", NODES);
    side.settle();
    check(side, "first start", &[A100_TS4, A10G_DEFAULT]);

    // A ConfigMap edit reaches no plugin until the daemonset restarts.
    apply("cm.json", &configmap(TS8));
    side.settle();
    check(side, "config edited", &[A100_TS4, A10G_DEFAULT]);
    side.kubectl(&[
        "rollout",
        "restart",
        "daemonset/nvidia-device-plugin-daemonset",
        "-n",
        "gpu-operator",
    ]);
    side.settle();
    let a100_ts8 = Expect {
        resources: &[("nvidia.com/gpu", "64")],
        labels: &[
            (
                "nvidia.com/gpu.product",
                Some("NVIDIA-A100-SXM4-80GB-SHARED"),
            ),
            ("nvidia.com/gpu.replicas", Some("8")),
            ("nvidia.com/mig.config.state", Some("success")),
        ],
        ..A100_TS4
    };
    // GPU feature discovery still runs the config it loaded (k8s-device-plugin
    // cmd/gpu-feature-discovery: it reads the file again only on SIGHUP or a restart).
    let gfd_stale = Expect {
        labels: &[
            (
                "nvidia.com/gpu.product",
                Some("NVIDIA-A100-SXM4-80GB-SHARED"),
            ),
            ("nvidia.com/gpu.replicas", Some("4")),
        ],
        ..a100_ts8
    };
    check(side, "device plugin restarted", &[gfd_stale, A10G_DEFAULT]);
    side.kubectl(&[
        "rollout",
        "restart",
        "daemonset/gpu-feature-discovery",
        "-n",
        "gpu-operator",
    ]);
    side.settle();
    check(side, "restarted", &[a100_ts8, A10G_DEFAULT]);

    // MIG: the mixed strategy, then a MIG config on the A100; its MIG manager repartitions and
    // restarts the plugin there (which reads the strategy now set), and nowhere else.
    side.kubectl(&[
        "patch",
        "clusterpolicy",
        "cluster-policy",
        "--type",
        "merge",
        "-p",
        r#"{"spec":{"mig":{"strategy":"mixed"}}}"#,
    ]);
    side.kubectl(&[
        "label",
        "node",
        "gpu-a100",
        "nvidia.com/mig.config=all-1g.10gb",
        "--overwrite",
    ]);
    side.settle();
    let a100_mig = Expect {
        node: "gpu-a100",
        resources: &[("nvidia.com/mig-1g.10gb", "56")],
        labels: &[
            ("nvidia.com/mig.config", Some("all-1g.10gb")),
            ("nvidia.com/mig.config.state", Some("success")),
            ("nvidia.com/mig.strategy", Some("mixed")),
            ("nvidia.com/mig-1g.10gb.count", Some("56")),
            ("nvidia.com/mig-1g.10gb.memory", Some("10240")),
            ("nvidia.com/gpu.product", Some("NVIDIA-A100-SXM4-80GB")),
            ("nvidia.com/gpu.count", Some("8")),
            // The time-slicing config names nvidia.com/gpu, which a mixed MIG node no longer has.
            ("nvidia.com/gpu.replicas", Some("1")),
            ("nvidia.com/gpu.sharing-strategy", Some("none")),
        ],
    };
    check(side, "MIG mixed", &[a100_mig, A10G_DEFAULT]);
}

#[test]
fn twin_on_a_control_plane() {
    let Some(fixtures) = apiserver::fixtures() else {
        return;
    };
    let Some(server) = ApiServer::start() else {
        return;
    };
    tools::require(Tool::Kubectl).expect("kubectl");
    let twin =
        RemoteTwin::new(&server.url, Some(&server.ca_pem()), server.admin_token()).expect("a twin");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    scenario(&Real { server, twin, rt }, &fixtures);
}

#[test]
fn twin_on_the_sandbox_api() {
    let Some(fixtures) = apiserver::fixtures() else {
        return;
    };
    let srv = serve();
    srv.api.add_cluster_without_operator("eks", "hand-made");
    let Some(k) = Kubectl::new(&srv, "eks", "hand-made") else {
        return;
    };
    scenario(&Sandboxed { _srv: srv, k }, &fixtures);
}
