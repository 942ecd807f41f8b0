//! `terraform query` (terraform 1.15) of `fracgpu_device_plugin_config` against a control plane
//! where NVIDIA's gpu-operator chart was installed by real helm and an Argo CD Application holds
//! another install's values: each config is listed with the delivery that writes it (the Helm
//! release that made the ClusterPolicy, the Application), the filter keeps one delivery, and
//! the configuration the query generates imports both through their own deliveries (an import
//! by identity, which names the ConfigMap alone) and then plans empty.

use super::device_plugin_config_gitops::gitops_cluster;
use super::device_plugin_config_helm::{helm_config, time_sliced};
use crate::common::operator::Chart;
use crate::common::terraform::{REQUIRED_PROVIDERS, Workspace, flat};
use crate::common::tools::{self, Tool};

fn provider(kc: &str) -> String {
    format!("provider \"fracgpu\" {{\n  kubernetes {{\n    config_path = \"{kc}\"\n  }}\n}}\n")
}

fn list_all() -> String {
    "list \"fracgpu_device_plugin_config\" \"all\" {\n  provider = fracgpu\n}\n".to_string()
}

#[test]
fn terraform_query_finds_each_config_through_the_delivery_that_writes_it() {
    let Some(tf) = tools::require(Tool::Terraform115) else {
        return;
    };
    let Some(op) = gitops_cluster() else {
        return;
    };
    op.install(Chart::Nvidia, &[]);
    let sample = op.fixtures.join("samples/application.yaml");
    op.server.kubectl_ok(&[
        "apply",
        "--server-side",
        "-f",
        &sample.display().to_string(),
    ]);
    let kc = op.kc();
    let by_helm = helm_config(
        &format!("    config_path = \"{kc}\""),
        &op.helm,
        &op.chart(Chart::Nvidia),
        Chart::Nvidia.release(),
        &format!("  config {{ name = \"all\" }}\n{}", time_sliced("ts", 4)),
        "all",
    );
    let by_argo = format!(
        r#"
resource "fracgpu_device_plugin_config" "argo" {{
  delivery       = "argocd"
  name           = "argo-slicing"
  default_config = "all"
  kubernetes {{
    config_path = "{kc}"
  }}
  config {{ name = "all" }}
  argocd {{ application = "gpu-operator" }}
}}
"#
    );
    let ws = Workspace::new(&format!("{by_helm}{by_argo}{}", provider(&kc))).with_terraform(&tf);
    ws.init();
    ws.apply();

    ws.write("all.tfquery.hcl", &list_all());
    let all = ws.ok(&["query", "-no-color"]);
    let text = flat(&all.text());
    for shown in [
        "gpu-operator/time-slicing-config (helm, through the Helm release gpu-operator/gpu-operator)",
        "gpu-operator/argo-slicing (argocd, through the Argo CD Application argocd/gpu-operator)",
    ] {
        assert!(text.contains(shown), "{shown:?} in:\n{text}");
    }
    std::fs::remove_file(ws.dir.join("all.tfquery.hcl")).unwrap();
    // The documented example: Argo CD's only.
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let example =
        root.join("examples/list-resources/fracgpu_device_plugin_config/list-resource.tfquery.hcl");
    ws.write(
        "argo.tfquery.hcl",
        &std::fs::read_to_string(example).unwrap(),
    );
    let argo = flat(&ws.ok(&["query", "-no-color"]).text());
    assert!(argo.contains("gpu-operator/argo-slicing (argocd"), "{argo}");
    assert!(!argo.contains("time-slicing-config"), "{argo}");
    std::fs::remove_file(ws.dir.join("argo.tfquery.hcl")).unwrap();

    // Forget both and let the query write their configuration: imports through the deliveries
    // that write them, then nothing to do.
    ws.ok(&[
        "state",
        "rm",
        "fracgpu_device_plugin_config.this",
        "fracgpu_device_plugin_config.argo",
    ]);
    ws.write(
        "main.tf",
        &format!("{REQUIRED_PROVIDERS}\n{}", provider(&kc)),
    );
    ws.write("all.tfquery.hcl", &list_all());
    ws.ok(&["query", "-no-color", "-generate-config-out=found.tf"]);
    let found = std::fs::read_to_string(ws.dir.join("found.tf")).unwrap();
    assert_eq!(found.matches("import {").count(), 2, "{found}");
    for written in [
        "delivery",
        "\"helm\"",
        "\"argocd\"",
        "application",
        "\"argo-slicing\"",
    ] {
        assert!(found.contains(written), "{written} in {found}");
    }
    let (code, plan) = ws.plan_exit_code();
    assert_eq!(code, 2, "{}", plan.text());
    assert!(
        plan.stdout
            .contains("2 to import, 0 to add, 0 to change, 0 to destroy"),
        "{}",
        plan.stdout
    );
    ws.apply();
    let (code, plan) = ws.plan_exit_code();
    assert_eq!(code, 0, "the imported configs plan empty: {}", plan.text());
}
