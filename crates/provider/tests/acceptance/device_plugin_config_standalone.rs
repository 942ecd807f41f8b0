//! `fracgpu_device_plugin_config` with delivery "nvidia_device_plugin", through the real terraform
//! against the sandbox: a cluster that runs no GPU operator, where NVIDIA's standalone device
//! plugin chart v0.20.0 (`shared/fixtures/charts`) was installed by real helm 4 or helm 3 with the
//! platform team's own configs. A time-sliced node pool and its config are applied together; the
//! chart's daemonset then mounts the resource's ConfigMap with its default, and the twin's nodes
//! (whose config-managers read what the daemonset says) advertise the pool's slices. The plan
//! after is empty; a hand `helm upgrade --reuse-values --set config.default=...` is drift that
//! apply repairs; destroy gives the release back the values it had.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use serde_json::{Value, json};

use crate::common::sandbox::{self, RunningStack};
use crate::common::terraform::{REQUIRED_PROVIDERS, Workspace};
use crate::common::tools::{self, Tool};

pub(crate) const RELEASE: &str = "nvdp";
pub(crate) const NS: &str = "nvidia-device-plugin";
pub(crate) const POOL: &str = "ts";

fn config(url: &str, kubeconfig: &Path, helm: &Path, chart: &Path) -> String {
    pool_config(
        url,
        kubeconfig,
        helm,
        chart,
        "time_slicing { replicas = 4 }",
    )
}

/// [`config`] with the pool shared as `sharing` (a sharing block) says.
pub(crate) fn pool_config(
    url: &str,
    kubeconfig: &Path,
    helm: &Path,
    chart: &Path,
    sharing: &str,
) -> String {
    format!(
        r#"{REQUIRED_PROVIDERS}
provider "fracgpu" {{
  sandbox = "{url}"
}}
resource "fracgpu_nodepool" "ts" {{
  name         = "{POOL}"
  machine_type = "Standard_NC4as_T4_v3"
  node_count   = 2
  aks {{
    resource_group = "sandbox-rg"
    cluster_name   = "sandbox-aks"
  }}
  {sharing}
}}
resource "fracgpu_device_plugin_config" "this" {{
  delivery       = "nvidia_device_plugin"
  default_config = "all"
  kubernetes {{
    config_path = "{kc}"
  }}
  config {{ name = "all" }}
  config {{
    name = fracgpu_nodepool.ts.device_plugin_config_name
    yaml = fracgpu_nodepool.ts.device_plugin_config
  }}
  nvidia_device_plugin {{
    release   = "{RELEASE}"
    namespace = "{NS}"
    chart     = "{chart}"
    helm_path = "{helm}"
  }}
}}
"#,
        kc = kubeconfig.display(),
        chart = chart.display(),
        helm = helm.display(),
    )
}

/// A sandbox cluster without the GPU operator, the helm that installs the standalone chart, and
/// the chart (None when a tool or the fixtures are missing, which `tools::require` reports).
pub(crate) struct Standalone {
    pub(crate) stack: RunningStack,
    pub(crate) kc: PathBuf,
    pub(crate) h: PathBuf,
    pub(crate) chart: PathBuf,
}

impl Standalone {
    pub(crate) fn start(helm_tool: Tool, op_time: Duration) -> Option<Standalone> {
        let (Some(h), Some(_), Some(fixtures)) = (
            tools::require(helm_tool),
            tools::require(Tool::Kubectl),
            testkit::apiserver::fixtures(),
        ) else {
            return None;
        };
        let stack = sandbox::start_stack_with(::sandbox::Config {
            op_time,
            gpu_operator: false,
            pod_buffers: ::sandbox::PodBuffers::NONE,
            ..::sandbox::Config::default()
        });
        let kc = stack.kubeconfig("aks", "sandbox-aks");
        let chart = fixtures.join("charts/nvidia-device-plugin-0.20.0.tgz");
        Some(Standalone {
            stack,
            kc,
            h,
            chart,
        })
    }
}

pub(crate) fn helm(helm: &Path, kubeconfig: &Path, args: &[&str]) -> String {
    let out = Command::new(helm)
        .args(args)
        .args(["-n", NS, "--kubeconfig"])
        .arg(kubeconfig)
        .env("KUBECONFIG", "/nonexistent/kubeconfig")
        .output()
        .expect("helm runs");
    assert!(
        out.status.success(),
        "helm {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn values(h: &Path, kc: &Path) -> Value {
    let out = helm(h, kc, &["get", "values", RELEASE, "-o", "json"]);
    match serde_json::from_str(&out).expect("helm prints JSON") {
        Value::Null => json!({}),
        v => v,
    }
}

fn kubectl(stack: &RunningStack, args: &[&str]) -> Option<Value> {
    let kubectl = testkit::tools::find(testkit::tools::Tool::Kubectl).expect("kubectl");
    let out = Command::new(kubectl)
        .arg("--kubeconfig")
        .arg(stack.kubeconfig("aks", "sandbox-aks"))
        .args(args)
        .args(["-o", "json"])
        .output()
        .expect("kubectl runs");
    out.status
        .success()
        .then(|| serde_json::from_slice(&out.stdout).expect("JSON"))
}

/// What the chart's device plugin daemonset reads: the ConfigMap it mounts and its default.
fn plugin_reads(stack: &RunningStack) -> (String, String) {
    let ds = kubectl(
        stack,
        &["get", "daemonset", "-n", NS, "nvdp-nvidia-device-plugin"],
    )
    .expect("the chart's daemonset");
    let spec = &ds["spec"]["template"]["spec"];
    let configmap = spec["volumes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["name"] == "available-configs")
        .map(|v| v["configMap"]["name"].as_str().unwrap().to_string())
        .unwrap_or_default();
    let default = spec["containers"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|c| c["env"].as_array().cloned().unwrap_or_default())
        .find(|e| e["name"] == "DEFAULT_CONFIG")
        .map(|e| e["value"].as_str().unwrap_or_default().to_string())
        .unwrap_or_default();
    (configmap, default)
}

fn slices(stack: &RunningStack) -> Vec<String> {
    stack
        .nodes("aks", "sandbox-aks", POOL)
        .iter()
        .map(|n| {
            n["status"]["allocatable"]["nvidia.com/gpu"]
                .as_str()
                .unwrap_or_default()
                .to_string()
        })
        .collect()
}

fn lifecycle(helm_tool: Tool) {
    let Some(Standalone {
        stack,
        kc,
        h,
        chart,
    }) = Standalone::start(helm_tool, Duration::from_millis(50))
    else {
        return;
    };
    let chart_s = chart.display().to_string();
    // The platform team's own configs, which destroy must give back.
    let platform = json!({"platform": "version: v1\n"}).to_string();
    helm(
        &h,
        &kc,
        &[
            "install",
            RELEASE,
            &chart_s,
            "--create-namespace",
            "--set-json",
            &format!("config.map={platform}"),
            "--set",
            "config.default=platform",
        ],
    );
    let before = values(&h, &kc);

    let ws = Workspace::new(&config(&stack.url, &kc, &h, &chart));
    ws.init();
    ws.apply();
    let cm = kubectl(
        &stack,
        &["get", "configmap", "-n", NS, "time-slicing-config"],
    )
    .expect("the resource's ConfigMap");
    let keys: Vec<&String> = cm["data"].as_object().unwrap().keys().collect();
    assert_eq!(keys, ["all", "fracgpu-ts"]);
    assert_eq!(
        plugin_reads(&stack),
        ("time-slicing-config".to_string(), "all".to_string())
    );
    let v = values(&h, &kc);
    assert_eq!(v["config"]["name"], "time-slicing-config", "{v}");
    assert_eq!(v["config"]["map"], json!({}), "{v}");
    // The pool's nodes carry the pool's config and the chart's plugin serves it.
    assert_eq!(slices(&stack), ["4", "4"]);
    let (code, plan) = ws.plan_exit_code();
    assert_eq!(code, 0, "{}", plan.text());

    // Someone changes the default by hand: drift, which apply repairs.
    helm(
        &h,
        &kc,
        &[
            "upgrade",
            RELEASE,
            &chart_s,
            "--reuse-values",
            "--set",
            "config.default=fracgpu-ts",
        ],
    );
    assert_eq!(plugin_reads(&stack).1, "fracgpu-ts");
    let (code, plan) = ws.plan_exit_code();
    assert_eq!(code, 2, "a hand helm upgrade is drift:\n{}", plan.text());
    assert!(plan.stdout.contains("default_config"), "{}", plan.stdout);
    ws.apply();
    assert_eq!(plugin_reads(&stack).1, "all");
    let (code, plan) = ws.plan_exit_code();
    assert_eq!(code, 0, "{}", plan.text());

    // Destroy gives the release its values back; the chart renders its own map again.
    ws.ok(&["destroy", "-auto-approve", "-no-color"]);
    assert_eq!(values(&h, &kc), before);
    assert!(
        kubectl(
            &stack,
            &["get", "configmap", "-n", NS, "time-slicing-config"]
        )
        .is_none()
    );
    assert_eq!(
        plugin_reads(&stack),
        (
            "nvdp-nvidia-device-plugin-configs".to_string(),
            "platform".to_string()
        )
    );
}

/// The example `examples/standalone-device-plugin` on such a cluster: applied, its pool's nodes
/// served four slices each by the chart's plugin, planned empty, destroyed.
#[test]
fn the_standalone_device_plugin_example_applies_plans_empty_and_destroys() {
    let Some(Standalone {
        stack,
        kc,
        h,
        chart,
    }) = Standalone::start(Tool::Helm4, Duration::ZERO)
    else {
        return;
    };
    helm(
        &h,
        &kc,
        &[
            "install",
            RELEASE,
            &chart.display().to_string(),
            "--create-namespace",
        ],
    );
    let root = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../..")).join("examples");
    let ws = Workspace::with_tree(&root, "standalone-device-plugin")
        .env("FRACGPU_SANDBOX", &stack.url)
        .env("TF_VAR_kubeconfig", &kc.display().to_string())
        .env("TF_VAR_chart", &chart.display().to_string())
        .env("TF_VAR_helm_path", &h.display().to_string());
    ws.init();
    ws.apply();
    let nodes = stack.nodes("aks", "sandbox-aks", "t4ts");
    let served: Vec<&str> = nodes
        .iter()
        .map(|n| {
            n["status"]["allocatable"]["nvidia.com/gpu"]
                .as_str()
                .unwrap_or("")
        })
        .collect();
    assert_eq!(served, ["4", "4"]);
    let (code, plan) = ws.plan_exit_code();
    assert_eq!(code, 0, "{}", plan.text());
    ws.ok(&["destroy", "-auto-approve", "-no-color"]);
    assert_eq!(stack.pools(), vec![]);
}

#[test]
fn nvidia_device_plugin_delivery_lifecycle_helm4() {
    lifecycle(Tool::Helm4);
}

#[test]
fn nvidia_device_plugin_delivery_lifecycle_helm3() {
    lifecycle(Tool::Helm3);
}

/// Import by the delivery's ID (`nvidia_device_plugin:<namespace>/<release>/<configmap>`): the
/// state rebuilt from the cluster plans only what the cluster does not keep (the chart's source
/// and the helm executable), in place, never a replacement; the apply after plans empty; and an
/// ID without the release is refused with every form named.
#[test]
fn an_imported_standalone_config_plans_in_place_only_what_the_cluster_does_not_keep() {
    let Some(Standalone {
        stack,
        kc,
        h,
        chart,
    }) = Standalone::start(Tool::Helm4, Duration::ZERO)
    else {
        return;
    };
    let chart_s = chart.display().to_string();
    helm(
        &h,
        &kc,
        &["install", RELEASE, &chart_s, "--create-namespace"],
    );
    // An import has only the ID: it reaches the cluster the provider's way (here KUBECONFIG),
    // not by the resource's `kubernetes` block, which is the configuration's.
    let ws = Workspace::new(&config(&stack.url, &kc, &h, &chart))
        .env("KUBECONFIG", &kc.display().to_string());
    ws.init();
    ws.apply();
    let addr = "fracgpu_device_plugin_config.this";
    ws.ok(&["state", "rm", addr]);

    let bad = ws.run(&[
        "import",
        "-no-color",
        addr,
        &format!("nvidia_device_plugin:{NS}/time-slicing-config"),
    ]);
    assert_ne!(bad.code, 0);
    assert!(
        bad.stderr.contains("Invalid import ID")
            && bad
                .stderr
                .contains("nvidia_device_plugin:<namespace>/<release>/<configmap>"),
        "{}",
        bad.stderr
    );

    let id = format!("nvidia_device_plugin:{NS}/{RELEASE}/time-slicing-config");
    ws.ok(&["import", "-no-color", addr, &id]);
    let shown = ws.ok(&["state", "show", "-no-color", addr]).stdout;
    assert!(
        shown.contains("delivery") && shown.contains("\"nvidia_device_plugin\""),
        "{shown}"
    );
    let (code, plan) = ws.plan_exit_code();
    assert_eq!(code, 2, "{}", plan.text());
    // Set where the state has none: the chart's source and the helm executable, and the
    // resource's own `kubernetes` block.
    plan.assert_sets_in_place(&["chart", "helm_path", "config_path"]);
    let out = &plan.stdout;
    assert!(!out.contains("default_config"), "{out}");
    ws.apply();
    let (code, plan) = ws.plan_exit_code();
    assert_eq!(code, 0, "{}", plan.text());
    assert_eq!(
        plugin_reads(&stack),
        ("time-slicing-config".to_string(), "all".to_string())
    );
    assert_eq!(slices(&stack), ["4", "4"]);

    // Without a record of the values before the import, destroy removes this resource's.
    ws.ok(&["destroy", "-auto-approve", "-no-color"]);
    let v = values(&h, &kc);
    assert_eq!(v["config"]["name"], Value::Null, "{v}");
    assert!(
        kubectl(
            &stack,
            &["get", "configmap", "-n", NS, "time-slicing-config"]
        )
        .is_none()
    );
}
