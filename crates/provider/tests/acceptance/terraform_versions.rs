//! The core lifecycles under both terraform versions the project supports: 1.11.4 (protocol 6.8,
//! on the PATH) and 1.15.5 (protocol 6.10, from `scripts/test-tools`). A pool on each cloud with
//! function calls beside it, a device plugin config with each delivery, `terraform import`, and
//! an `import` block whose `-generate-config-out` output plans as a clean import.

use std::path::PathBuf;
use std::time::Duration;

use crate::common::operator::{Chart, MISSING_KUBECONFIG, OperatorCluster};
use crate::common::sandbox;
use crate::common::terraform::{REQUIRED_PROVIDERS, Workspace};
use crate::common::tools::{self, Tool};

/// The terraform of each version, None (after saying so) when it is missing outside CI.
fn terraform(version: Tool) -> Option<PathBuf> {
    tools::require(version)
}

/// One test per scenario and terraform version, so a failure names both.
macro_rules! on_each_terraform {
    ($($scenario:ident),* $(,)?) => {$(
        mod $scenario {
            use super::*;
            #[test]
            fn terraform_1_11() {
                if let Some(tf) = terraform(Tool::Terraform) {
                    super::$scenario(tf);
                }
            }
            #[test]
            fn terraform_1_15() {
                if let Some(tf) = terraform(Tool::Terraform115) {
                    super::$scenario(tf);
                }
            }
        }
    )*};
}

on_each_terraform!(
    pools_on_each_cloud,
    import_by_id_and_by_generated_config,
    device_plugin_config_with_each_delivery,
);

pub(crate) const AKS: &str =
    "  aks {\n    resource_group = \"sandbox-rg\"\n    cluster_name   = \"sandbox-aks\"\n  }";
pub(crate) const GKE: &str =
    "  gke {\n    location = \"us-central1\"\n    cluster  = \"sandbox-gke\"\n  }";
pub(crate) const EKS: &str = "  eks {\n    cluster_name  = \"sandbox-eks\"\n    node_role_arn = \"arn:aws:iam::123456789012:role/gpu-nodes\"\n    subnet_ids    = [\"subnet-0a1\", \"subnet-0b2\"]\n  }";

pub(crate) fn provider(url: &str) -> String {
    format!("{REQUIRED_PROVIDERS}\nprovider \"fracgpu\" {{\n  sandbox = \"{url}\"\n}}\n")
}

pub(crate) fn pools(url: &str, team: &str) -> String {
    format!(
        r#"{provider}
resource "fracgpu_nodepool" "aks" {{
{AKS}
  name         = "a100ts"
  machine_type = "Standard_NC24ads_A100_v4"
  node_count   = 1
  labels       = {{ team = "{team}" }}
  time_slicing {{ replicas = 10 }}
}}

resource "fracgpu_nodepool" "gke" {{
{GKE}
  name         = "a100mig"
  machine_type = "a2-highgpu-1g"
  node_count   = 3
  labels       = {{ team = "{team}" }}
  mig {{ profile = "1g.5gb" }}
}}

resource "fracgpu_nodepool" "eks" {{
{EKS}
  name         = "t4mps"
  machine_type = "g4dn.xlarge"
  node_count   = 1
  labels       = {{ team = "{team}" }}
  mps {{ replicas = 4 }}
}}

output "resource_names" {{
  value = [fracgpu_nodepool.aks.resource_name, fracgpu_nodepool.gke.resource_name, fracgpu_nodepool.eks.resource_name]
}}
output "slices" {{ value = provider::fracgpu::slices_for(4000, 15360, 10) }}
output "profiles" {{ value = length(provider::fracgpu::mig_profiles("A100-40GB")) }}
"#,
        provider = provider(url)
    )
}

/// Create on AKS, GKE and EKS; state and cloud agree; empty plan; an in-place update; destroy.
fn pools_on_each_cloud(tf: PathBuf) {
    let sb = sandbox::start(Duration::ZERO);
    let ws = Workspace::new(&pools(&sb.url, "ml")).with_terraform(&tf);
    ws.init();
    ws.apply();
    let out = ws.output_json();
    // GKE's own device plugin advertises a partition as nvidia.com/gpu.
    assert_eq!(
        out["resource_names"]["value"],
        serde_json::json!(["nvidia.com/gpu", "nvidia.com/gpu", "nvidia.com/gpu"])
    );
    assert_eq!(out["slices"]["value"], 3);
    assert_eq!(out["profiles"]["value"], 7);
    assert_eq!(
        sb.pools()
            .iter()
            .map(|(c, _, n)| format!("{c}/{n}"))
            .collect::<Vec<_>>(),
        ["aks/a100ts", "eks/t4mps", "gke/a100mig"]
    );
    let (code, plan) = ws.plan_exit_code();
    assert_eq!(code, 0, "{}", plan.text());

    ws.write("main.tf", &pools(&sb.url, "research"));
    let (code, plan) = ws.plan_exit_code();
    assert_eq!(code, 2, "{}", plan.text());
    assert!(
        plan.stdout.contains("0 to add, 3 to change, 0 to destroy"),
        "labels change in place on every cloud:\n{}",
        plan.stdout
    );
    ws.apply();
    assert_eq!(
        sb.pool("a100ts")["properties"]["nodeLabels"]["team"],
        "research"
    );
    let (code, plan) = ws.plan_exit_code();
    assert_eq!(code, 0, "{}", plan.text());

    ws.ok(&["destroy", "-auto-approve", "-no-color"]);
    assert!(sb.pools().is_empty(), "{:?}", sb.pools());
}

/// Pools made by one workspace are adopted by another: one with `terraform import`, one with an
/// `import` block and `plan -generate-config-out`, whose output plans as a clean import.
fn import_by_id_and_by_generated_config(tf: PathBuf) {
    let sb = sandbox::start(Duration::ZERO);
    let maker = Workspace::new(&pools(&sb.url, "ml")).with_terraform(&tf);
    maker.init();
    maker.apply();
    let ids: serde_json::Value = {
        let show = maker.show_json();
        let resources = show["values"]["root_module"]["resources"].clone();
        resources
            .as_array()
            .unwrap()
            .iter()
            .map(|r| {
                (
                    r["name"].as_str().unwrap().to_string(),
                    r["values"]["id"].clone(),
                )
            })
            .collect::<serde_json::Map<_, _>>()
            .into()
    };
    for name in ["aks", "gke", "eks"] {
        maker.ok(&["state", "rm", &format!("fracgpu_nodepool.{name}")]);
    }

    // `terraform import` with the EKS ID into a written configuration.
    let eks_only = format!(
        "{}\nresource \"fracgpu_nodepool\" \"eks\" {{\n{EKS}\n  name         = \"t4mps\"\n  machine_type = \"g4dn.xlarge\"\n  node_count   = 1\n  labels       = {{ team = \"ml\" }}\n  mps {{ replicas = 4 }}\n}}\n",
        provider(&sb.url)
    );
    let adopter = Workspace::new(&eks_only).with_terraform(&tf);
    adopter.init();
    adopter.ok(&[
        "import",
        "-no-color",
        "fracgpu_nodepool.eks",
        ids["eks"].as_str().unwrap(),
    ]);
    let (code, plan) = adopter.plan_exit_code();
    assert_eq!(code, 0, "plan after import is empty:\n{}", plan.text());

    // `import` blocks for the AKS and GKE pools, with the configuration generated by terraform.
    adopter.write(
        "imports.tf",
        &format!(
            "import {{\n  to = fracgpu_nodepool.aks\n  id = {}\n}}\n\nimport {{\n  to = fracgpu_nodepool.gke\n  id = {}\n}}\n",
            ids["aks"], ids["gke"]
        ),
    );
    let out = adopter.run(&["plan", "-no-color", "-generate-config-out=generated.tf"]);
    assert!(
        adopter.dir.join("generated.tf").exists(),
        "terraform wrote the configuration:\n{}",
        out.text()
    );
    let generated = std::fs::read_to_string(adopter.dir.join("generated.tf")).unwrap();
    let out = adopter.run(&["plan", "-no-color", "-input=false"]);
    assert!(
        out.stdout
            .contains("Plan: 2 to import, 0 to add, 0 to change, 0 to destroy"),
        "the generated configuration plans as a clean import:\n{}\n--- generated.tf:\n{generated}",
        out.text()
    );
    adopter.apply();
    let (code, plan) = adopter.plan_exit_code();
    assert_eq!(code, 0, "{}\n--- generated.tf:\n{generated}", plan.text());
    adopter.ok(&["destroy", "-auto-approve", "-no-color"]);
    assert!(sb.pools().is_empty(), "{:?}", sb.pools());
}

/// On two control planes (`testkit::apiserver`): a config delivered as a ConfigMap with the ClusterPolicy pointer
/// beside NVIDIA's chart, and one through the operator's Helm release (the wrapping chart, real
/// helm 4): create, empty plan, destroy.
fn device_plugin_config_with_each_delivery(tf: PathBuf) {
    let (Some(policy), Some(released)) = (
        OperatorCluster::start(Tool::Helm4),
        OperatorCluster::start(Tool::Helm4),
    ) else {
        return;
    };
    policy.install(Chart::Nvidia, &[]);
    released.install(Chart::Wrapper, &[]);
    let (release, ns, values_path) = Chart::Wrapper.release();
    let config = format!(
        r#"{REQUIRED_PROVIDERS}
resource "fracgpu_device_plugin_config" "policy" {{
  kubernetes {{ config_path = "{policy_kc}" }}
  default_config = "all"
  config {{ name = "all" }}
  config {{
    name = "time-sliced-4"
    time_slicing {{ replicas = 4 }}
  }}
}}

resource "fracgpu_device_plugin_config" "helm" {{
  kubernetes {{ config_path = "{released_kc}" }}
  delivery       = "helm"
  default_config = "all"
  config {{ name = "all" }}
  config {{
    name = "time-sliced-10"
    time_slicing {{ replicas = 10 }}
  }}
  helm {{
    release     = "{release}"
    namespace   = "{ns}"
    chart       = "{chart}"
    values_path = "{values_path}"
    helm_path   = "{helm}"
  }}
}}
"#,
        policy_kc = policy.kc(),
        released_kc = released.kc(),
        chart = released.chart(Chart::Wrapper),
        helm = released.helm.display()
    );
    let ws = Workspace::new(&config)
        .with_terraform(&tf)
        .env("KUBECONFIG", MISSING_KUBECONFIG);
    ws.init();
    ws.apply();
    let (_, policy_ns, _) = Chart::Nvidia.release();
    assert_eq!(policy.operator_reads(policy_ns).1, ["all", "time-sliced-4"]);
    assert_eq!(released.operator_reads(ns).1, ["all", "time-sliced-10"]);
    let (code, plan) = ws.plan_exit_code();
    assert_eq!(code, 0, "{}", plan.text());
    ws.ok(&["destroy", "-auto-approve", "-no-color"]);
    assert!(policy.configmap(policy_ns, "time-slicing-config").is_none());
    assert!(released.configmap(ns, "time-slicing-config").is_none());
}
