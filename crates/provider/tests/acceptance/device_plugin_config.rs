//! `fracgpu_device_plugin_config` with delivery "cluster_policy", through the real terraform
//! binary against the sandbox stack's Kubernetes API: create -> ConfigMap, ClusterPolicy pointer
//! and daemonset restart -> the digital twin's time-sliced nodes advertise the shared resource ->
//! empty plan -> update replicas -> hand edit with kubectl -> plan shows drift -> apply repairs
//! -> import -> destroy.

use std::process::Command;
use std::time::Duration;

use crate::common::sandbox::{RunningStack, start_stack};
use crate::common::terraform::{REQUIRED_PROVIDERS, Workspace, flat};
use serde_json::Value;

const SUB: &str = "00000000-0000-0000-0000-000000000000";
const CM: &str = "time-slicing-config";
const NS: &str = "gpu-operator";

pub(crate) fn config(kubeconfig: &str, replicas: u32) -> String {
    format!(
        r#"{REQUIRED_PROVIDERS}
provider "fracgpu" {{
  kubernetes {{
    config_path = "{kubeconfig}"
  }}
}}

resource "fracgpu_device_plugin_config" "this" {{
  default_config = "all"
  mig_strategy   = "none"
  # Import rebuilds the blocks in name order, so they are written in name order here.
  config {{ name = "all" }}
  config {{
    name = "mps-4"
    mps {{ replicas = 4 }}
  }}
  config {{
    name = "time-sliced-10"
    time_slicing {{
      replicas          = {replicas}
      rename_by_default = true
    }}
  }}
}}

output "dpc" {{ value = fracgpu_device_plugin_config.this }}
"#
    )
}

/// Adds an AKS agent pool through the sandbox's ARM API, as `az aks nodepool add` would, with the
/// device plugin label; its nodes then appear in the cluster.
pub(crate) fn add_pool(st: &RunningStack, name: &str, label: &str) {
    add_pool_of(st, name, label, "Standard_NC24ads_A100_v4");
}

/// [`add_pool`] of another VM size.
pub(crate) fn add_pool_of(st: &RunningStack, name: &str, label: &str, vm_size: &str) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let http = reqwest::Client::new();
        let token: Value = http
            .post(format!("{}/{SUB}/oauth2/v2.0/token", st.url))
            .header("content-type", "application/x-www-form-urlencoded")
            .body("grant_type=client_credentials&client_id=someone&client_secret=s3cret&scope=https%3A%2F%2Fmanagement.azure.com%2F.default")
            .send().await.unwrap().json().await.unwrap();
        let bearer = format!("Bearer {}", token["access_token"].as_str().expect("token"));
        let url = format!(
            "{}/subscriptions/{SUB}/resourceGroups/sandbox-rg/providers/Microsoft.ContainerService/managedClusters/sandbox-aks/agentPools/{name}?api-version=2025-10-01",
            st.url
        );
        let body = serde_json::json!({"properties": {"vmSize": vm_size, "count": 1, "mode": "User",
            "nodeLabels": {"nvidia.com/device-plugin.config": label}}});
        let put = http.put(&url).header("authorization", &bearer).json(&body).send().await.unwrap();
        assert!(put.status().is_success(), "PUT pool: {}", put.text().await.unwrap());
    });
    std::thread::sleep(Duration::from_millis(100));
    st.stack.sandbox.settle();
}

pub(crate) fn object(st: &RunningStack, kind: &str, ns: &str, name: &str) -> Option<Value> {
    st.stack.kube.object("aks", "sandbox-aks", kind, ns, name)
}

pub(crate) fn node_allocatable(st: &RunningStack, pool: &str, resource: &str) -> Option<String> {
    let names = st.stack.kube.pool_node_names("aks", "sandbox-aks", pool);
    assert!(!names.is_empty(), "pool {pool} has nodes");
    let node = object(st, "nodes", "", &names[0])?;
    node.pointer(&format!(
        "/status/allocatable/{}",
        resource.replace('/', "~1")
    ))
    .and_then(Value::as_str)
    .map(str::to_string)
}

fn restart_annotation(st: &RunningStack) -> Option<String> {
    object(st, "daemonsets.apps", NS, "nvidia-device-plugin-daemonset")?
        .pointer("/spec/template/metadata/annotations/fracgpu.dev~1restartedAt")
        .and_then(Value::as_str)
        .map(str::to_string)
}

/// A merge patch of the resource's ConfigMap by hand, as kubectl does it.
pub(crate) fn patch_configmap(kubeconfig: &str, patch: &str) {
    kubectl(
        kubeconfig,
        &[
            "-n",
            NS,
            "patch",
            "configmap",
            CM,
            "--type",
            "merge",
            "-p",
            patch,
        ],
    );
}

pub(crate) fn kubectl(kubeconfig: &str, args: &[&str]) -> String {
    let out = Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(args)
        .output()
        .expect("kubectl runs");
    assert!(
        out.status.success(),
        "kubectl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn cluster_policy_delivery_lifecycle() {
    let st = start_stack(std::time::Duration::ZERO);
    let kc = st.kubeconfig("aks", "sandbox-aks").display().to_string();
    add_pool(&st, "ts10", "time-sliced-10");
    assert_eq!(
        node_allocatable(&st, "ts10", "nvidia.com/gpu").as_deref(),
        Some("1")
    );

    let ws = Workspace::new(&config(&kc, 10));
    ws.init();
    let out = ws.apply();
    assert!(
        !out.text().contains("Node label names no config"),
        "{}",
        out.text()
    );

    // The ConfigMap under our field manager, the pointer, the restart.
    let cm = object(&st, "configmaps", NS, CM).expect("ConfigMap created");
    let ts = cm["data"]["time-sliced-10"].as_str().unwrap();
    assert!(
        ts.contains("timeSlicing") && ts.contains("replicas: 10"),
        "{ts}"
    );
    assert_eq!(cm["data"]["all"], "");
    assert!(cm["data"]["mps-4"].as_str().unwrap().contains("mps:"));
    assert!(
        cm["metadata"]["managedFields"]
            .as_array()
            .unwrap()
            .iter()
            .any(|m| m["manager"] == "terraform-provider-fracgpu" && m["operation"] == "Apply"),
        "{cm}"
    );
    let cp = object(&st, "clusterpolicies.nvidia.com", "", "cluster-policy").unwrap();
    assert_eq!(cp["spec"]["devicePlugin"]["config"]["name"], CM);
    assert_eq!(cp["spec"]["devicePlugin"]["config"]["default"], "all");
    assert_eq!(
        cp["spec"]["mig"]["strategy"], "none",
        "taken over from helm"
    );
    let first_restart = restart_annotation(&st).expect("daemonset restarted");

    // The twin: a time-sliced, renamed pool advertises 10 shared GPUs.
    assert_eq!(
        node_allocatable(&st, "ts10", "nvidia.com/gpu.shared").as_deref(),
        Some("10")
    );
    let state = &ws.output_json()["dpc"]["value"];
    assert_eq!(state["id"], format!("{NS}/{CM}"));
    assert_eq!(state["restarted_at"], first_restart.as_str());
    assert_eq!(
        state["data"]["all"], "",
        "the whole-GPU config is the empty document"
    );
    assert!(
        state["helm_values"]
            .as_str()
            .unwrap()
            .contains("devicePlugin:\n  config:\n    create: true\n"),
        "{}",
        state["helm_values"]
    );

    let (code, plan) = ws.plan_exit_code();
    assert_eq!(code, 0, "plan after create is empty:\n{}", plan.text());

    // Update replicas in place: new data, restart, the nodes follow.
    std::thread::sleep(Duration::from_millis(1100));
    ws.write("main.tf", &config(&kc, 4));
    let (code, plan) = ws.plan_exit_code();
    assert_eq!(code, 2, "{}", plan.text());
    assert!(plan.stdout.contains("update in-place"), "{}", plan.stdout);
    ws.apply();
    let cm = object(&st, "configmaps", NS, CM).unwrap();
    assert!(
        cm["data"]["time-sliced-10"]
            .as_str()
            .unwrap()
            .contains("replicas: 4")
    );
    assert_ne!(restart_annotation(&st).unwrap(), first_restart);
    assert_eq!(
        node_allocatable(&st, "ts10", "nvidia.com/gpu.shared").as_deref(),
        Some("4")
    );
    let (code, plan) = ws.plan_exit_code();
    assert_eq!(code, 0, "{}", plan.text());

    // Re-formatting the ConfigMap by hand (same meaning) is not drift.
    let reformatted = "version: v1\nsharing:\n  timeSlicing:\n    renameByDefault: true\n    resources: [{name: gpu, replicas: 4}]\n";
    let patch = serde_json::json!({"data": {"time-sliced-10": reformatted}}).to_string();
    patch_configmap(&kc, &patch);
    let (code, plan) = ws.plan_exit_code();
    assert_eq!(code, 0, "same meaning is no drift:\n{}", plan.text());

    // A hand edit that changes the meaning is drift; apply repairs it.
    let edited = reformatted.replace("replicas: 4", "replicas: 7");
    let patch = serde_json::json!({"data": {"time-sliced-10": edited}}).to_string();
    patch_configmap(&kc, &patch);
    let (code, plan) = ws.plan_exit_code();
    assert_eq!(code, 2, "hand edit shows as drift:\n{}", plan.text());
    assert!(plan.stdout.contains("replicas: 7"), "{}", plan.stdout);
    ws.apply();
    let cm = object(&st, "configmaps", NS, CM).unwrap();
    assert!(
        cm["data"]["time-sliced-10"]
            .as_str()
            .unwrap()
            .contains("replicas: 4")
    );
    let (code, plan) = ws.plan_exit_code();
    assert_eq!(code, 0, "{}", plan.text());

    // A changed ClusterPolicy pointer is drift too.
    let patch = r#"{"spec":{"devicePlugin":{"config":{"name":"other","default":"all"}}}}"#;
    kubectl(
        &kc,
        &[
            "patch",
            "clusterpolicies.nvidia.com",
            "cluster-policy",
            "--type",
            "merge",
            "-p",
            patch,
        ],
    );
    let (code, plan) = ws.plan_exit_code();
    assert_eq!(code, 2, "pointer change shows as drift:\n{}", plan.text());
    assert!(
        plan.text().contains("ClusterPolicy points elsewhere"),
        "{}",
        plan.text()
    );
    ws.apply();
    let cp = object(&st, "clusterpolicies.nvidia.com", "", "cluster-policy").unwrap();
    assert_eq!(cp["spec"]["devicePlugin"]["config"]["name"], CM);

    // A node labelled with a config this resource lacks: a warning, not an error.
    add_pool(&st, "odd", "time-sliced-3");
    let (code, plan) = ws.plan_exit_code();
    assert_eq!(code, 0, "{}", plan.text());
    assert!(
        plan.text().contains("Node label names no config"),
        "{}",
        plan.text()
    );

    // Import into a fresh state: the plan is empty again.
    ws.ok(&["state", "rm", "fracgpu_device_plugin_config.this"]);
    ws.ok(&[
        "import",
        "-no-color",
        "fracgpu_device_plugin_config.this",
        &format!("{NS}/{CM}"),
    ]);
    let (code, plan) = ws.plan_exit_code();
    assert_eq!(code, 0, "plan after import is empty:\n{}", plan.text());
    let bad = ws.run(&[
        "import",
        "-no-color",
        "fracgpu_device_plugin_config.x",
        "nope",
    ]);
    assert_ne!(bad.code, 0);

    // Destroy: ConfigMap gone, pointer given up, everything else untouched, restarted.
    let before = restart_annotation(&st).unwrap();
    std::thread::sleep(Duration::from_millis(1100));
    ws.ok(&["destroy", "-auto-approve", "-no-color"]);
    assert!(
        object(&st, "configmaps", NS, CM).is_none(),
        "ConfigMap deleted"
    );
    let cp = object(&st, "clusterpolicies.nvidia.com", "", "cluster-policy").unwrap();
    assert!(
        cp["spec"]["devicePlugin"].get("config").is_none(),
        "pointer removed: {}",
        cp["spec"]["devicePlugin"]
    );
    assert_eq!(
        cp["spec"]["devicePlugin"]["enabled"], true,
        "helm's fields stay"
    );
    assert_eq!(
        cp["spec"]["migManager"]["config"]["name"],
        "default-mig-parted-config"
    );
    assert_ne!(restart_annotation(&st).unwrap(), before);
}

/// A state the provider cannot read (another provider version's, or one edited by hand) fails the
/// refresh with a diagnostic on the attribute that does not fit, what it should be and the fixes;
/// the resource stays in state, and the state put right plans empty again.
#[test]
fn a_state_that_does_not_fit_is_refused_on_its_attribute() {
    let st = start_stack(Duration::ZERO);
    let kc = st.kubeconfig("aks", "sandbox-aks").display().to_string();
    let ws = Workspace::new(&config(&kc, 10));
    ws.init();
    ws.apply();
    let good: Value = serde_json::from_str(&ws.ok(&["state", "pull"]).stdout).unwrap();
    // -force: the pushed state is what the test says, whatever serial terraform keeps.
    let push = |state: &Value| {
        ws.write("pushed.tfstate", &state.to_string());
        ws.ok(&["state", "push", "-force", "pushed.tfstate"]);
    };
    let mut bad = good.clone();
    // config[2] is "time-sliced-10": a fraction of a replica fits no u32.
    let replicas = "/resources/0/instances/0/attributes/config/2/time_slicing/0/replicas";
    *bad.pointer_mut(replicas).expect("the replicas attribute") = serde_json::json!(2.5);
    push(&bad);

    let out = ws.run(&["plan", "-no-color", "-input=false"]);
    assert_eq!(out.code, 1, "{}", out.text());
    let text = flat(&out.text());
    for phrase in [
        "Unreadable state",
        "The state's `config[2].time_slicing[0].replicas` should be a whole number from 0 to 4294967295, but is the number 2.5",
        "`terraform apply -refresh-only` with the provider version that wrote it",
        "`terraform import` with `namespace/name` of the ConfigMap",
    ] {
        assert!(text.contains(phrase), "{phrase:?} not in:\n{}", out.text());
    }
    let listed = ws.ok(&["state", "list"]).stdout;
    assert!(
        listed.contains("fracgpu_device_plugin_config.this"),
        "{listed}"
    );

    push(&good);
    let (code, out) = ws.plan_exit_code();
    assert_eq!(code, 0, "{}", out.text());
}

/// Applies the config with a 5 s create limit while the first `method` request to a path
/// containing `path` trickles, and checks that the create timed out.
fn create_timing_out_on(st: &RunningStack, kc: &str, method: &str, path: &str) -> Workspace {
    let main_tf = config(kc, 10).replace(
        "  mig_strategy   = \"none\"\n",
        "  mig_strategy   = \"none\"\n  timeouts {\n    create = \"5s\"\n  }\n",
    );
    let ws = Workspace::new(&main_tf);
    ws.init();
    crate::common::sandbox::inject(
        &st.url,
        serde_json::json!({
            "match": {"method": method, "path_contains": path},
            "count": 1,
            "kind": "trickle",
            "delay_ms": 500
        }),
    );
    let out = ws.run(&["apply", "-no-color", "-auto-approve", "-input=false"]);
    assert_eq!(out.code, 1, "{}", out.text());
    assert!(out.text().contains("Operation timed out"), "{}", out.text());
    ws
}

/// A create that runs out of time after it wrote the ConfigMap (the ClusterPolicy answers too
/// slowly) keeps the config in state, tainted, rather than leaving a ConfigMap no state knows:
/// the next apply replaces it instead of failing on "ConfigMap already exists".
#[test]
fn a_create_that_times_out_after_writing_keeps_its_configmap_in_state() {
    let st = start_stack(Duration::ZERO);
    let kc = st.kubeconfig("aks", "sandbox-aks").display().to_string();
    let ws = create_timing_out_on(&st, &kc, "PATCH", "clusterpolicies");
    assert!(
        object(&st, "configmaps", NS, CM).is_some(),
        "the create wrote the ConfigMap before the slow step"
    );
    let listed = ws.ok(&["state", "list"]).stdout;
    assert!(
        listed.contains("fracgpu_device_plugin_config.this"),
        "the written ConfigMap is in state: {listed}"
    );
    let shown = ws.show_json();
    let res = &shown["values"]["root_module"]["resources"][0];
    assert_eq!(res["tainted"], true, "{res}");

    // The trickle is spent: the next apply replaces the tainted config and converges.
    let out = ws.apply();
    assert!(
        out.text().contains("1 added, 0 changed, 1 destroyed"),
        "{}",
        out.text()
    );
    let cp = object(&st, "clusterpolicies.nvidia.com", "", "cluster-policy").unwrap();
    assert_eq!(cp["spec"]["devicePlugin"]["config"]["name"], CM);
    let (code, out) = ws.plan_exit_code();
    assert_eq!(code, 0, "{}", out.text());
}

/// The other side of the same rule: a create that runs out of time before it wrote anything
/// (here, while checking that the name is free) leaves state empty, so a ConfigMap someone else
/// keeps under that name is never taken into state, and never deleted by a later replace.
#[test]
fn a_create_that_times_out_before_writing_takes_no_foreign_configmap() {
    let st = start_stack(Duration::ZERO);
    let kc = st.kubeconfig("aks", "sandbox-aks").display().to_string();
    kubectl(
        &kc,
        &[
            "create",
            "configmap",
            CM,
            "-n",
            NS,
            "--from-literal=theirs=keep",
        ],
    );
    let ws = create_timing_out_on(&st, &kc, "GET", &format!("configmaps/{CM}"));
    let listed = ws.ok(&["state", "list"]).stdout;
    assert!(listed.trim().is_empty(), "nothing in state: {listed}");
    // The next apply refuses the name instead of replacing what it never made.
    let out = ws.run(&["apply", "-no-color", "-auto-approve", "-input=false"]);
    assert_eq!(out.code, 1, "{}", out.text());
    assert!(
        out.text().contains("ConfigMap already exists"),
        "{}",
        out.text()
    );
    let cm = object(&st, "configmaps", NS, CM).expect("their ConfigMap stays");
    assert_eq!(cm["data"], serde_json::json!({"theirs": "keep"}));
}

/// What the operator will do with a config as delivered, said when no error stops it: a
/// mixed-strategy MIG config under a ClusterPolicy whose `spec.mig.strategy` overrides it
/// (the chart sets `single`), and a ConfigMap outside the operator's namespace, which the
/// operator never reads. Both leave nodes without what the configs describe.
#[test]
fn operator_mismatches_are_warnings_on_the_attribute_that_fixes_them() {
    let st = start_stack(Duration::ZERO);
    let kc = st.kubeconfig("aks", "sandbox-aks").display().to_string();
    let resource = |extra: &str| {
        format!(
            r#"{REQUIRED_PROVIDERS}
resource "fracgpu_device_plugin_config" "this" {{
  kubernetes {{ config_path = "{kc}" }}
  default_config = "all"
{extra}
  config {{ name = "all" }}
  config {{
    name = "mig-mixed"
    yaml = "version: v1\nflags:\n  migStrategy: mixed\n"
  }}
}}
"#
        )
    };
    let ws = Workspace::new(&resource(""));
    ws.init();
    // terraform wraps details at 78 columns.
    let flat = |t: String| t.split_whitespace().collect::<Vec<_>>().join(" ");
    let text = flat(ws.apply().text());
    assert!(
        text.contains("Warning: MIG strategy overridden by the ClusterPolicy")
            && text.contains("Set mig_strategy = \"mixed\"")
            && text.contains("\"single\""),
        "{text}"
    );
    // Told what to do, the user sets the strategy, and the warning is gone from later plans.
    ws.write("main.tf", &resource("  mig_strategy = \"mixed\""));
    ws.apply();
    let (code, plan) = ws.plan_exit_code();
    assert_eq!(code, 0, "{}", plan.text());
    assert!(
        !plan.text().contains("MIG strategy overridden"),
        "{}",
        plan.text()
    );

    // A ConfigMap in another namespace reaches no node.
    ws.write(
        "main.tf",
        &resource("  mig_strategy = \"mixed\"\n  namespace    = \"kube-system\""),
    );
    let text = flat(ws.apply().text());
    assert!(
        text.contains("Warning: ConfigMap outside the operator's namespace")
            && text.contains("Set namespace = \"gpu-operator\"")
            && text.contains("namespace = \"kube-system\""),
        "the warning points at the namespace line: {text}"
    );
    assert!(object(&st, "configmaps", "kube-system", CM).is_some());
}
