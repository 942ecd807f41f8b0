//! `fracgpu_karpenter_nodepool` through terraform on a control plane (`testkit::apiserver`) serving the real
//! Karpenter CRDs (AWS provider v1.14.1, Azure provider v1.14.2, from the shared fixtures):
//! create -> every object as rendered -> an empty plan -> hand edits and a deleted overlay are
//! drift that apply sets back -> an update that drops a GPU count deletes its overlay -> a
//! NodePool deleted out of band is made again -> import reads the declaration back -> destroy.
//! Also: the plan's warning when Karpenter runs with the NodeOverlay gate off, the refusal of a
//! NodePool the provider did not make, `terraform query` listing the NodePools and generating a
//! configuration that imports clean, the twin's Karpenter scaling the pool from zero by slices,
//! and bad input refused at plan time on its attribute.

use super::karpenter_objects::{KARPENTER, karpenter_server};
use crate::common::terraform::{REQUIRED_PROVIDERS, Workspace, flat};
use crate::common::tools::{self, Tool};
use ::sandbox::kube::remote_karpenter::{KarpenterReport, LAUNCHED_FOR};
use ::sandbox::kube::remote_twin::RemoteTwin;
use serde_json::{Value, json};
use testkit::apiserver::ApiServer;

fn pool_tf(replicas: u32, counts: &str) -> String {
    format!(
        r#"{REQUIRED_PROVIDERS}
provider "fracgpu" {{}}

resource "fracgpu_karpenter_nodepool" "t4" {{
  name           = "t4-slices"
  gpu_model      = "T4"
  gpu_counts     = {counts}
  capacity_types = ["spot", "on-demand"]
  limit_gpus     = 8
  labels         = {{ team = "inference" }}
  time_slicing {{
    replicas          = {replicas}
    rename_by_default = true
  }}
  eks {{
    node_class {{
      role                = "KarpenterNodeRole-sandbox"
      subnet_tags         = {{ "karpenter.sh/discovery" = "sandbox-eks" }}
      security_group_tags = {{ "karpenter.sh/discovery" = "sandbox-eks" }}
    }}
  }}
  disruption {{
    consolidate_after = "5m"
    budget {{ nodes = "10%" }}
  }}
}}

output "t4" {{ value = fracgpu_karpenter_nodepool.t4 }}
"#
    )
}

fn get(server: &ApiServer, kind: &str, name: &str) -> Option<Value> {
    let out = server.kubectl(&["get", kind, name, "-o", "json"]);
    out.status
        .success()
        .then(|| serde_json::from_slice(&out.stdout).expect("kubectl prints the object"))
}

fn overlay_capacity(server: &ApiServer, name: &str) -> Option<String> {
    get(server, "nodeoverlays.karpenter.sh", name).and_then(|o| {
        o["spec"]["capacity"]["nvidia.com/gpu.shared"]
            .as_str()
            .map(str::to_string)
    })
}

#[test]
fn lifecycle_drift_and_import_on_a_control_plane() {
    let Some(server) = karpenter_server() else {
        return;
    };
    let kc = server.kubeconfig().display().to_string();
    let ws = Workspace::new(&pool_tf(10, "[1, 4]")).env("KUBECONFIG", &kc);
    ws.init();

    // Karpenter installed by its chart, with the NodeOverlay gate at its default (off).
    server.kubectl_stdin(
        &["apply", "-f", "-"],
        &KARPENTER.replace("ON_OR_OFF", "false"),
    );
    let (code, plan) = ws.plan_exit_code();
    assert_eq!(code, 2, "{}", plan.text());
    let text = flat(&plan.text());
    assert!(
        text.contains("Karpenter ignores NodeOverlays")
            && text.contains("kube-system/karpenter")
            && text.contains("settings.featureGates.nodeOverlay=true"),
        "{text}"
    );
    server.kubectl_stdin(
        &["apply", "-f", "-"],
        &KARPENTER.replace("ON_OR_OFF", "true"),
    );
    let out = ws.apply();
    assert!(
        !out.text().contains("ignores NodeOverlays"),
        "{}",
        out.text()
    );

    let pool = get(&server, "nodepools.karpenter.sh", "t4-slices").expect("the NodePool");
    let labels = &pool["spec"]["template"]["metadata"]["labels"];
    let t4 = &ws.output_json()["t4"]["value"];
    // The config the nodes select is the one the pool tells fracgpu_device_plugin_config of.
    assert_eq!(
        labels["nvidia.com/device-plugin.config"],
        t4["device_plugin_config_name"]
    );
    assert!(
        t4["device_plugin_config"]
            .as_str()
            .is_some_and(|c| c.contains("replicas: 10") && c.contains("renameByDefault: true")),
        "{t4}"
    );
    assert_eq!(labels["team"], "inference");
    assert_eq!(
        pool["spec"]["limits"]["nvidia.com/gpu.shared"], "80",
        "8 GPUs x 10"
    );
    assert_eq!(
        pool["spec"]["template"]["spec"]["nodeClassRef"]["name"],
        "t4-slices"
    );
    assert_eq!(pool["spec"]["disruption"]["consolidateAfter"], "5m");
    assert!(
        pool["metadata"]["annotations"]["fracgpu.dev/declaration"]
            .as_str()
            .is_some_and(|d| d.contains("\"gpu_model\":\"T4\"") && !d.contains("kubernetes")),
        "{pool}"
    );
    assert_eq!(
        overlay_capacity(&server, "t4-slices-gpu1").as_deref(),
        Some("10")
    );
    assert_eq!(
        overlay_capacity(&server, "t4-slices-gpu4").as_deref(),
        Some("40")
    );
    let class = get(&server, "ec2nodeclasses.karpenter.k8s.aws", "t4-slices").expect("class");
    assert_eq!(class["spec"]["role"], "KarpenterNodeRole-sandbox");
    assert_eq!(t4["resource_name"], "nvidia.com/gpu.shared");
    assert_eq!(t4["node_capacity"], serde_json::json!({"1": 10, "4": 40}));
    assert_eq!(t4["node_selector"]["karpenter.sh/nodepool"], "t4-slices");
    assert_eq!(t4["tolerations"][0]["key"], "nvidia.com/gpu");
    let (code, plan) = ws.plan_exit_code();
    assert_eq!(code, 0, "a plan after apply is empty: {}", plan.text());

    // Hand edits: an overlay's capacity, the pool's limits. Both are drift, set back in place.
    server.kubectl_ok(&[
        "patch",
        "nodeoverlays.karpenter.sh",
        "t4-slices-gpu4",
        "--type=merge",
        "-p",
        r#"{"spec":{"capacity":{"nvidia.com/gpu.shared":"4"}}}"#,
    ]);
    server.kubectl_ok(&[
        "patch",
        "nodepools.karpenter.sh",
        "t4-slices",
        "--type=merge",
        "-p",
        r#"{"spec":{"limits":{"nvidia.com/gpu.shared":"1000"}}}"#,
    ]);
    let (code, plan) = ws.plan_exit_code();
    assert_eq!(code, 2, "{}", plan.text());
    assert!(
        plan.stdout.contains("update in-place")
            && plan.stdout.contains("NodeOverlay/t4-slices-gpu4")
            && plan.stdout.contains("\"1000\"")
            && !plan.stdout.contains("must be replaced"),
        "{}",
        plan.stdout
    );
    ws.apply();
    assert_eq!(
        overlay_capacity(&server, "t4-slices-gpu4").as_deref(),
        Some("40")
    );
    let pool = get(&server, "nodepools.karpenter.sh", "t4-slices").unwrap();
    assert_eq!(pool["spec"]["limits"]["nvidia.com/gpu.shared"], "80");

    // An overlay deleted out of band is made again.
    server.kubectl_ok(&["delete", "nodeoverlays.karpenter.sh", "t4-slices-gpu1"]);
    let (code, plan) = ws.plan_exit_code();
    assert_eq!(code, 2, "{}", plan.text());
    ws.apply();
    assert_eq!(
        overlay_capacity(&server, "t4-slices-gpu1").as_deref(),
        Some("10")
    );

    // Fewer slices and no 4-GPU nodes: in place, and the 4-GPU overlay goes.
    ws.write("main.tf", &pool_tf(4, "[1]"));
    let (code, plan) = ws.plan_exit_code();
    assert_eq!(code, 2, "{}", plan.text());
    assert!(plan.stdout.contains("1 to change"), "{}", plan.stdout);
    ws.apply();
    assert_eq!(
        overlay_capacity(&server, "t4-slices-gpu1").as_deref(),
        Some("4")
    );
    assert_eq!(overlay_capacity(&server, "t4-slices-gpu4"), None);
    let pool = get(&server, "nodepools.karpenter.sh", "t4-slices").unwrap();
    assert_eq!(pool["spec"]["limits"]["nvidia.com/gpu.shared"], "32");

    // The NodePool deleted out of band: the plan makes it again, taking back the overlay and the
    // node class this provider made for it.
    server.kubectl_ok(&["delete", "nodepools.karpenter.sh", "t4-slices"]);
    let (code, plan) = ws.plan_exit_code();
    assert_eq!(code, 2, "{}", plan.text());
    assert!(plan.stdout.contains("will be created"), "{}", plan.stdout);
    ws.apply();
    assert!(get(&server, "nodepools.karpenter.sh", "t4-slices").is_some());
    let (code, plan) = ws.plan_exit_code();
    assert_eq!(code, 0, "{}", plan.text());

    // Import: a NodePool the provider did not make is refused; the declaration on one it made
    // gives every argument back.
    ws.ok(&["state", "rm", "fracgpu_karpenter_nodepool.t4"]);
    server.kubectl_stdin(
        &["apply", "-f", "-"],
        r#"{"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "by-hand"},
          "spec": {"template": {"spec": {"nodeClassRef": {"group": "karpenter.k8s.aws",
            "kind": "EC2NodeClass", "name": "default"}, "requirements": []}}}}"#,
    );
    let out = ws.run(&[
        "import",
        "-no-color",
        "fracgpu_karpenter_nodepool.t4",
        "by-hand",
    ]);
    assert_ne!(out.code, 0);
    let text = flat(&out.text());
    assert!(
        text.contains("NodePool not made by this provider"),
        "{text}"
    );
    ws.ok(&["import", "fracgpu_karpenter_nodepool.t4", "t4-slices"]);
    let (code, plan) = ws.plan_exit_code();
    assert_eq!(code, 0, "an imported pool plans empty: {}", plan.text());

    ws.ok(&["destroy", "-auto-approve", "-no-color"]);
    for (kind, name) in [
        ("nodepools.karpenter.sh", "t4-slices"),
        ("nodeoverlays.karpenter.sh", "t4-slices-gpu1"),
        ("ec2nodeclasses.karpenter.k8s.aws", "t4-slices"),
    ] {
        assert!(
            get(&server, kind, name).is_none(),
            "{kind} {name} left behind"
        );
    }
    assert!(get(&server, "nodepools.karpenter.sh", "by-hand").is_some());

    // Create refuses to take over a NodePool it did not make.
    let taken = pool_tf(4, "[1]").replace("\"t4-slices\"", "\"by-hand\"");
    ws.write("main.tf", &taken);
    let out = ws.run(&["apply", "-auto-approve", "-no-color"]);
    assert_ne!(out.code, 0);
    let text = flat(&out.text());
    assert!(
        text.contains("NodePool already exists") && text.contains("terraform import"),
        "{text}"
    );
    let kept = get(&server, "nodepools.karpenter.sh", "by-hand").unwrap();
    assert!(
        kept["spec"]["template"]["metadata"].get("labels").is_none(),
        "untouched: {kept}"
    );
}

/// `terraform query` (terraform 1.15) lists every NodePool, those made otherwise by name; the
/// documented filter keeps the time-sliced ones; the configuration it generates imports the pool
/// and then plans empty.
#[test]
fn terraform_query_lists_the_node_pools_and_generates_a_clean_import() {
    let Some(tf) = tools::require(Tool::Terraform115) else {
        return;
    };
    let Some(server) = karpenter_server() else {
        return;
    };
    let kc = server.kubeconfig().display().to_string();
    server.kubectl_stdin(
        &["apply", "-f", "-"],
        &KARPENTER.replace("ON_OR_OFF", "true"),
    );
    let ws = Workspace::new(&pool_tf(10, "[1, 4]"))
        .with_terraform(&tf)
        .env("KUBECONFIG", &kc);
    ws.init();
    ws.apply();
    server.kubectl_stdin(
        &["apply", "-f", "-"],
        r#"{"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "by-hand"},
          "spec": {"template": {"spec": {"nodeClassRef": {"group": "karpenter.k8s.aws",
            "kind": "EC2NodeClass", "name": "default"}, "requirements": []}}}}"#,
    );

    // A declaration edited by hand: left out, and said so.
    server.kubectl_stdin(
        &["apply", "-f", "-"],
        r#"{"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "garbled",
          "annotations": {"fracgpu.dev/declaration": "{\"gpu_model\": 4"}},
          "spec": {"template": {"spec": {"nodeClassRef": {"group": "karpenter.k8s.aws",
            "kind": "EC2NodeClass", "name": "default"}, "requirements": []}}}}"#,
    );

    ws.write(
        "all.tfquery.hcl",
        "list \"fracgpu_karpenter_nodepool\" \"all\" {\n  provider = fracgpu\n}\n",
    );
    let all = ws.ok(&["query", "-no-color"]);
    for shown in [
        "t4-slices (EKS Karpenter, T4 x1 or x4, time-slicing x10)",
        "by-hand (not made by fracgpu)",
    ] {
        assert!(all.stdout.contains(shown), "{shown:?} in:\n{}", all.text());
    }
    let text = flat(&all.text());
    assert!(
        text.contains("NodePool left out") && text.contains("NodePool garbled's"),
        "{text}"
    );
    server.kubectl_ok(&["delete", "nodepools.karpenter.sh", "garbled"]);

    // The documented example: the time-sliced pools only.
    std::fs::remove_file(ws.dir.join("all.tfquery.hcl")).unwrap();
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    ws.write(
        "time_sliced.tfquery.hcl",
        &std::fs::read_to_string(
            root.join(
                "examples/list-resources/fracgpu_karpenter_nodepool/list-resource.tfquery.hcl",
            ),
        )
        .unwrap(),
    );
    let sliced = ws.ok(&["query", "-no-color"]);
    assert!(sliced.stdout.contains("t4-slices ("), "{}", sliced.text());
    assert!(!sliced.stdout.contains("by-hand"), "{}", sliced.text());

    // Forget the pool and let the query write its configuration: an import, then nothing to do.
    std::fs::remove_file(ws.dir.join("time_sliced.tfquery.hcl")).unwrap();
    ws.ok(&["state", "rm", "fracgpu_karpenter_nodepool.t4"]);
    ws.write(
        "main.tf",
        &format!("{REQUIRED_PROVIDERS}\nprovider \"fracgpu\" {{}}\n"),
    );
    ws.write(
        "all.tfquery.hcl",
        "list \"fracgpu_karpenter_nodepool\" \"all\" {\n  provider = fracgpu\n}\n",
    );
    let generated = ws.ok(&["query", "-no-color", "-generate-config-out=pools.tf"]);
    let text = flat(&generated.text());
    assert!(
        text.contains("NodePools not made by this provider left out") && text.contains("by-hand"),
        "{text}"
    );
    let pools = std::fs::read_to_string(ws.dir.join("pools.tf")).unwrap();
    assert_eq!(pools.matches("import {").count(), 1, "{pools}");
    assert!(pools.contains("\"t4-slices\""), "{pools}");
    let (code, plan) = ws.plan_exit_code();
    assert_eq!(code, 2, "{}", plan.text());
    assert!(
        plan.stdout
            .contains("1 to import, 0 to add, 0 to change, 0 to destroy"),
        "{}",
        plan.stdout
    );
    ws.apply();
    let (code, plan) = ws.plan_exit_code();
    assert_eq!(code, 0, "an imported pool plans empty: {}", plan.text());
    ws.ok(&["destroy", "-auto-approve", "-no-color"]);
    assert!(get(&server, "nodepools.karpenter.sh", "t4-slices").is_none());
}

/// A cluster without Karpenter: the query finds nothing and says why.
#[test]
fn terraform_query_says_when_the_cluster_has_no_karpenter() {
    let Some(tf) = tools::require(Tool::Terraform115) else {
        return;
    };
    let Some(server) = ApiServer::start() else {
        return;
    };
    let ws = Workspace::new(&format!(
        "{REQUIRED_PROVIDERS}\nprovider \"fracgpu\" {{}}\n"
    ))
    .with_terraform(&tf)
    .env("KUBECONFIG", &server.kubeconfig().display().to_string());
    ws.init();
    ws.write(
        "all.tfquery.hcl",
        "list \"fracgpu_karpenter_nodepool\" \"all\" {\n  provider = fracgpu\n}\n",
    );
    let out = ws.ok(&["query", "-no-color"]);
    let text = flat(&out.text());
    assert!(
        text.contains("No Karpenter on this cluster") && text.contains("karpenter.sh/v1"),
        "{text}"
    );
}

/// One pass of the twin's Karpenter against the server.
fn karpenter_pass(server: &ApiServer) -> KarpenterReport {
    let twin = RemoteTwin::new(&server.url, Some(&server.ca_pem()), server.admin_token()).unwrap();
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(twin.karpenter_once())
        .expect("karpenter pass")
}

/// Pods that ask for one slice each, placed as the pool's outputs say.
fn slice_pods(t4: &Value, from: usize, to: usize) -> String {
    let resource = t4["resource_name"].as_str().unwrap();
    let items: Vec<Value> = (from..to)
        .map(|i| {
            json!({"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": format!("model-{i:02}"), "namespace": "default"},
                "spec": {"nodeSelector": t4["node_selector"], "tolerations": t4["tolerations"],
                    "containers": [{"name": "m", "image": "example.com/model:1",
                        "resources": {"limits": {resource: 1}}}]}})
        })
        .collect();
    json!({"apiVersion": "v1", "kind": "List", "items": items}).to_string()
}

/// The twin's Karpenter on the control plane reads the NodePool and NodeOverlays the provider wrote:
/// ten pending pods of one slice on a 1-GPU x 10 pool bring one node, not ten; a second pass adds
/// none; five more bring a second; with the NodeOverlay gate off no instance type offers slices.
#[test]
fn the_twins_karpenter_scales_the_pool_from_zero_by_slices() {
    let Some(server) = karpenter_server() else {
        return;
    };
    server.kubectl_stdin(
        &["apply", "-f", "-"],
        &KARPENTER.replace("ON_OR_OFF", "true"),
    );
    let ws = Workspace::new(&pool_tf(10, "[1, 4]"))
        .env("KUBECONFIG", &server.kubeconfig().display().to_string());
    ws.init();
    ws.apply();
    let t4 = ws.output_json()["t4"]["value"].clone();
    let pass = || karpenter_pass(&server);
    let nodes = || -> Vec<Value> {
        let list: Value = serde_json::from_str(&server.kubectl_ok(&[
            "get",
            "nodes",
            "-l",
            "karpenter.sh/nodepool=t4-slices",
            "-o",
            "json",
        ]))
        .unwrap();
        list["items"].as_array().cloned().unwrap_or_default()
    };

    server.kubectl_stdin(&["create", "-f", "-"], &slice_pods(&t4, 0, 10));
    let r = pass();
    assert!(r.overlays_read, "{r:?}");
    assert_eq!(r.launched.len(), 1, "{r:?}");
    assert_eq!(r.launched[0].instance_type, "g4dn.xlarge");
    assert_eq!(r.launched[0].pods.len(), 10);
    let made = nodes();
    assert_eq!(made.len(), 1);
    let labels = &made[0]["metadata"]["labels"];
    assert_eq!(
        labels["nvidia.com/device-plugin.config"],
        t4["device_plugin_config_name"]
    );
    assert_eq!(labels["karpenter.k8s.aws/instance-gpu-count"], "1");
    assert!(
        made[0]["metadata"]["annotations"][LAUNCHED_FOR]
            .as_str()
            .is_some_and(|p| p.contains("default/model-00")),
        "{}",
        made[0]
    );
    let r = pass();
    assert!(r.launched.is_empty(), "the new node holds them: {r:?}");

    server.kubectl_stdin(&["create", "-f", "-"], &slice_pods(&t4, 10, 15));
    let r = pass();
    assert_eq!(r.launched.len(), 1, "{r:?}");
    assert_eq!(r.launched[0].pods.len(), 5);
    assert_eq!(nodes().len(), 2);

    // Without the gate Karpenter sizes nodes by whole GPUs: slices fit no instance type.
    server.kubectl_stdin(
        &["apply", "-f", "-"],
        &KARPENTER.replace("ON_OR_OFF", "false"),
    );
    server.kubectl_ok(&["delete", "nodes", "-l", "karpenter.sh/nodepool=t4-slices"]);
    let r = pass();
    assert!(!r.overlays_read && r.launched.is_empty(), "{r:?}");
    assert_eq!(r.pending.len(), 15, "{r:?}");
    let resource = t4["resource_name"].as_str().unwrap();
    assert!(
        r.pending[0].1.contains(&format!("Insufficient {resource}")),
        "{r:?}"
    );
}

/// The docs' example, applied, planned empty and destroyed on a control plane.
#[test]
fn the_example_applies_on_a_control_plane() {
    let Some(server) = karpenter_server() else {
        return;
    };
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let ws = Workspace::with_tree(
        &root.join("examples"),
        "resources/fracgpu_karpenter_nodepool",
    )
    .env("KUBECONFIG", &server.kubeconfig().display().to_string());
    ws.init();
    ws.apply();
    let nap = get(&server, "nodepools.karpenter.sh", "a100-mps").expect("the NAP pool");
    assert_eq!(
        nap["spec"]["template"]["spec"]["nodeClassRef"]["kind"],
        "AKSNodeClass"
    );
    assert_eq!(
        overlay_capacity(&server, "t4-slices-gpu4"),
        None,
        "not renamed"
    );
    let overlay = get(&server, "nodeoverlays.karpenter.sh", "t4-slices-gpu4").unwrap();
    assert_eq!(overlay["spec"]["capacity"]["nvidia.com/gpu"], "40");
    let (code, plan) = ws.plan_exit_code();
    assert_eq!(code, 0, "{}", plan.text());

    // The twin's Karpenter (self-hosted, gate on) scales the NAP pool from zero: eight pods of
    // one MPS share on 1-GPU A100s shared four ways bring two nodes.
    server.kubectl_stdin(
        &["apply", "-f", "-"],
        &KARPENTER.replace("ON_OR_OFF", "true"),
    );
    let state = ws.show_json();
    let nap = state["values"]["root_module"]["resources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["address"] == "fracgpu_karpenter_nodepool.nap")
        .map(|r| r["values"].clone())
        .expect("the NAP pool in state");
    server.kubectl_stdin(&["create", "-f", "-"], &slice_pods(&nap, 0, 8));
    let r = karpenter_pass(&server);
    let types: Vec<&str> = r
        .launched
        .iter()
        .map(|l| l.instance_type.as_str())
        .collect();
    assert_eq!(
        types,
        ["Standard_NC24ads_A100_v4", "Standard_NC24ads_A100_v4"],
        "{r:?}"
    );
    assert!(
        r.launched
            .iter()
            .all(|l| l.node_pool == "a100-mps" && l.pods.len() == 4)
    );
    server.kubectl_ok(&["delete", "pods", "--all", "-n", "default"]);
    server.kubectl_ok(&["delete", "nodes", "-l", "karpenter.sh/nodepool=a100-mps"]);
    ws.ok(&["destroy", "-auto-approve", "-no-color"]);
    assert!(get(&server, "nodepools.karpenter.sh", "a100-mps").is_none());
}

/// Bad input is refused by the plan, before anything is written, on the attribute to fix.
#[test]
fn bad_input_is_refused_at_plan_time_on_its_attribute() {
    let cases: &[(&str, &str, &[&str])] = &[
        (
            "gpu_counts     = [4]\n  limit_gpus = 2",
            "limit_gpus",
            &["Limit below one node", "at least 4"],
        ),
        (
            "gpu_counts     = [3]",
            "gpu_counts",
            &["GPU count not offered", "Counts offered: 1, 4, 8"],
        ),
        (
            "gpu_counts     = [1]\n  capacity_types = [\"preemptible\"]",
            "capacity_types",
            &["Invalid capacity type"],
        ),
    ];
    for (args, attribute, wanted) in cases {
        let tf = format!(
            r#"{REQUIRED_PROVIDERS}
resource "fracgpu_karpenter_nodepool" "x" {{
  name      = "bad"
  gpu_model = "T4"
  {args}
  time_slicing {{ replicas = 4 }}
  eks {{ node_class_name = "default" }}
}}
"#
        );
        let ws = Workspace::new(&tf);
        ws.init();
        let out = ws.run(&["plan", "-no-color"]);
        assert_eq!(out.code, 1, "{args}: {}", out.text());
        let text = flat(&out.text());
        for w in *wanted {
            assert!(text.contains(w), "{args}: wanted {w:?} in {text}");
        }
        assert!(
            out.stderr
                .lines()
                .any(|l| l.trim_start().contains(&format!("{attribute} ")) && l.contains(':')),
            "{args}: the diagnostic points at {attribute}: {}",
            out.stderr
        );
    }
    // MIG on node auto-provisioning, which passes no GPU instance profile to its nodes.
    let tf = format!(
        r#"{REQUIRED_PROVIDERS}
resource "fracgpu_karpenter_nodepool" "x" {{
  name       = "nap-mig"
  gpu_model  = "A100-80GB"
  gpu_counts = [1]
  mig {{ profile = "1g.10gb" }}
  aks {{ node_class_name = "default" }}
}}
"#
    );
    let ws = Workspace::new(&tf);
    ws.init();
    let out = ws.run(&["plan", "-no-color"]);
    assert_eq!(out.code, 1, "{}", out.text());
    let text = flat(&out.text());
    assert!(
        text.contains("MIG not supported by node auto-provisioning")
            && text.contains("Use time_slicing or mps"),
        "{text}"
    );
}

/// A time-sliced pool on `nvidia.com/gpu` itself (not renamed), with a limit of 8 GPUs.
fn whole_gpu_pool_tf() -> String {
    pool_tf(10, "[1, 4]").replace("rename_by_default = true", "rename_by_default = false")
}

/// The NodeOverlay gate off (its default) or unknown: real Karpenter then sizes the pool's nodes
/// by whole GPUs, one pod of one slice counting as one GPU, and sums them against the NodePool's
/// limits. The provider writes the limits in whole GPUs then, so the twin's Karpenter (which
/// does what the real one does without the gate) launches no more than `limit_gpus` GPUs for
/// fifty pending pods; the plan says so. With the gate turned on (here by the controller's
/// `--feature-gates` argument, which wins over its environment) a refresh reads it, and the plan
/// sets the limits to slices in place.
#[test]
fn without_the_overlay_gate_the_pool_launches_at_most_limit_gpus() {
    let Some(server) = karpenter_server() else {
        return;
    };
    let ws = Workspace::new(&whole_gpu_pool_tf())
        .env("KUBECONFIG", &server.kubeconfig().display().to_string());
    ws.init();
    // No Karpenter Deployment to read (managed Karpenter looks like this): unknown.
    let (code, plan) = ws.plan_exit_code();
    assert_eq!(code, 2, "{}", plan.text());
    let text = flat(&plan.text());
    assert!(
        text.contains("Karpenter ignores NodeOverlays") && text.contains("could not be read"),
        "{text}"
    );
    // Karpenter's chart with the gate at its default, off.
    server.kubectl_stdin(
        &["apply", "-f", "-"],
        &KARPENTER.replace("ON_OR_OFF", "false"),
    );
    let out = ws.apply();
    let text = flat(&out.text());
    assert!(
        text.contains("kube-system/karpenter runs with the NodeOverlay feature gate off")
            && text.contains("never launches more than limit_gpus = 8 GPUs"),
        "{text}"
    );
    let t4 = ws.output_json()["t4"]["value"].clone();
    assert_eq!(t4["node_overlay_gate"], "off");
    assert_eq!(t4["limits"]["nvidia.com/gpu"], 8, "{t4}");
    let pool = get(&server, "nodepools.karpenter.sh", "t4-slices").expect("the NodePool");
    assert_eq!(pool["spec"]["limits"]["nvidia.com/gpu"], "8");

    server.kubectl_stdin(&["create", "-f", "-"], &slice_pods(&t4, 0, 50));
    let r = karpenter_pass(&server);
    assert!(!r.overlays_read, "{r:?}");
    let gpus: u32 = r
        .launched
        .iter()
        .map(|l| match l.instance_type.as_str() {
            "g4dn.xlarge" => 1,
            "g4dn.12xlarge" => 4,
            other => panic!("an instance type the pool excludes: {other}"),
        })
        .sum();
    assert!(
        gpus > 0 && gpus <= 8,
        "launched {gpus} GPUs for 50 pods: {r:?}"
    );
    assert!(!r.pending.is_empty(), "the rest wait at the limit: {r:?}");
    let again = karpenter_pass(&server);
    assert!(
        again.launched.is_empty(),
        "nothing past the limit: {again:?}"
    );

    // The gate turned on by the controller's argument (its environment still says off).
    let on = KARPENTER.replace("ON_OR_OFF", "false").replace(
        r#""env": ["#,
        r#""args": ["--feature-gates=NodeOverlay=true"], "env": ["#,
    );
    server.kubectl_stdin(&["apply", "-f", "-"], &on);
    let (code, plan) = ws.plan_exit_code();
    assert_eq!(code, 2, "the limits move to slices:\n{}", plan.text());
    let out = ws.apply();
    assert!(
        !out.text().contains("ignores NodeOverlays"),
        "{}",
        out.text()
    );
    let pool = get(&server, "nodepools.karpenter.sh", "t4-slices").expect("the NodePool");
    assert_eq!(
        pool["spec"]["limits"]["nvidia.com/gpu"], "80",
        "8 GPUs x 10"
    );
    let (code, plan) = ws.plan_exit_code();
    assert_eq!(code, 0, "{}", plan.text());
}

/// A NodePool made again by hand with a node class of another group and kind (Karpenter's CRD
/// makes `nodeClassRef.group` and `.kind` immutable, so that is the only way such a change
/// happens): the plan replaces the pool instead of an update in place the API server would
/// refuse, and the apply puts it back.
#[test]
fn a_node_class_of_another_kind_replaces_the_pool() {
    let Some(server) = karpenter_server() else {
        return;
    };
    server.kubectl_stdin(
        &["apply", "-f", "-"],
        &KARPENTER.replace("ON_OR_OFF", "true"),
    );
    let ws = Workspace::new(&pool_tf(10, "[1, 4]"))
        .env("KUBECONFIG", &server.kubeconfig().display().to_string());
    ws.init();
    ws.apply();
    let mut pool = get(&server, "nodepools.karpenter.sh", "t4-slices").expect("the NodePool");
    pool["spec"]["template"]["spec"]["nodeClassRef"] =
        json!({"group": "karpenter.azure.com", "kind": "AKSNodeClass", "name": "t4-slices"});
    for k in [
        "resourceVersion",
        "uid",
        "creationTimestamp",
        "managedFields",
        "generation",
    ] {
        pool["metadata"].as_object_mut().unwrap().remove(k);
    }
    pool.as_object_mut().unwrap().remove("status");
    server.kubectl_ok(&["delete", "nodepools.karpenter.sh", "t4-slices"]);
    server.kubectl_stdin(&["create", "-f", "-"], &pool.to_string());
    let (code, plan) = ws.plan_exit_code();
    assert_eq!(code, 2, "{}", plan.text());
    assert!(
        plan.text().contains("must be replaced") && plan.text().contains("forces replacement"),
        "{}",
        plan.text()
    );
    ws.apply();
    let pool = get(&server, "nodepools.karpenter.sh", "t4-slices").expect("the NodePool");
    assert_eq!(
        pool["spec"]["template"]["spec"]["nodeClassRef"],
        json!({"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "t4-slices"})
    );
    let (code, plan) = ws.plan_exit_code();
    assert_eq!(code, 0, "{}", plan.text());
}
