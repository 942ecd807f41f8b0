//! Adopting pools that already exist: the identity terraform 1.12 and later keep beside each
//! state, and `import` blocks that name a pool by it (terraform 1.15.5, from
//! `scripts/test-tools`).

use std::time::Duration;

use crate::common::outside::Outside;
use crate::common::sandbox;
use crate::common::terraform::Workspace;
use crate::common::tools::{self, Tool};

use super::terraform_versions::{pools, provider};

#[test]
fn the_state_keeps_each_pools_identity_and_import_by_identity_adopts_it() {
    let Some(tf) = tools::require(Tool::Terraform115) else {
        return;
    };
    let sb = sandbox::start(Duration::ZERO);
    let maker = Workspace::new(&pools(&sb.url, "ml")).with_terraform(&tf);
    maker.init();
    maker.apply();
    let show = maker.show_json();
    let resources = show["values"]["root_module"]["resources"]
        .as_array()
        .unwrap();
    let identity = |name: &str| {
        resources
            .iter()
            .find(|r| r["name"] == name)
            .map(|r| r["identity"].clone())
            .unwrap()
    };
    assert_eq!(identity("gke")["cloud"], "gke");
    assert_eq!(identity("gke")["location"], "us-central1");
    assert_eq!(identity("gke")["cluster"], "sandbox-gke");
    assert_eq!(identity("gke")["name"], "a100mig");
    assert!(identity("gke")["resource_group"].is_null());
    assert_eq!(identity("aks")["resource_group"], "sandbox-rg");
    assert!(
        identity("aks")["subscription_id"].is_string(),
        "the provider's default subscription is part of the identity: {}",
        identity("aks")
    );
    assert!(identity("eks")["region"].is_string(), "{}", identity("eks"));
    for name in ["aks", "gke", "eks"] {
        maker.ok(&["state", "rm", &format!("fracgpu_nodepool.{name}")]);
    }

    let adopter = Workspace::new(&provider(&sb.url)).with_terraform(&tf);
    adopter.init();
    // The import blocks of the resource's documentation, as a user copies them.
    let imports = std::fs::read_to_string(
        examples().join("resources/fracgpu_nodepool/import-by-identity.hcl"),
    )
    .unwrap();
    adopter.write("imports.tf", &imports);
    let out = adopter.run(&["plan", "-no-color", "-generate-config-out=generated.tf"]);
    let generated = std::fs::read_to_string(adopter.dir.join("generated.tf"))
        .unwrap_or_else(|_| panic!("terraform wrote no configuration:\n{}", out.text()));
    let out = adopter.run(&["plan", "-no-color", "-input=false"]);
    assert!(
        out.stdout
            .contains("Plan: 3 to import, 0 to add, 0 to change, 0 to destroy"),
        "{}\n--- generated.tf:\n{generated}",
        out.text()
    );
    adopter.apply();
    let (code, plan) = adopter.plan_exit_code();
    assert_eq!(code, 0, "{}\n--- generated.tf:\n{generated}", plan.text());
    let show = adopter.show_json();
    let adopted = &show["values"]["root_module"]["resources"];
    assert_eq!(adopted.as_array().unwrap().len(), 3, "{adopted}");
    assert!(
        adopted
            .as_array()
            .unwrap()
            .iter()
            .all(|r| r["identity"]["name"].is_string()),
        "{adopted}"
    );
    adopter.ok(&["destroy", "-auto-approve", "-no-color"]);
    assert!(sb.pools().is_empty(), "{:?}", sb.pools());
}

#[test]
fn an_identity_that_lacks_or_mixes_coordinates_names_the_attribute_to_fix() {
    let Some(tf) = tools::require(Tool::Terraform115) else {
        return;
    };
    let sb = sandbox::start(Duration::ZERO);
    let ws = Workspace::new(&provider(&sb.url)).with_terraform(&tf);
    ws.init();
    for (identity, expected) in [
        (
            r#"{ cloud = "gke", cluster = "sandbox-gke", name = "x" }"#,
            "needs `location`",
        ),
        (
            r#"{ cloud = "gke", location = "us-central1", resource_group = "rg", cluster = "sandbox-gke", name = "x" }"#,
            "`resource_group` does not belong to a pool on GKE",
        ),
        (
            r#"{ cloud = "azure", cluster = "c", name = "x" }"#,
            "use `aks`, `gke` or `eks`",
        ),
        (
            r#"{ cloud = "gke", location = "us-central1", cluster = "sandbox-gke", name = "missing" }"#,
            "Cannot import non-existent node pool",
        ),
    ] {
        ws.write(
            "imports.tf",
            &format!("import {{\n  to       = fracgpu_nodepool.x\n  identity = {identity}\n}}\n"),
        );
        let out = ws.run(&["plan", "-no-color", "-generate-config-out=generated.tf"]);
        assert_ne!(out.code, 0, "{identity}: {}", out.text());
        assert!(
            out.text().contains(expected),
            "{identity}: expected {expected:?} in\n{}",
            out.text()
        );
        let _ = std::fs::remove_file(ws.dir.join("generated.tf"));
    }
}

/// Pools someone made by hand on each cloud: with gcloud on GKE (a MIG pool labelled for the
/// operator's MIG manager, a time-shared pool and a pool without GPUs), with the aws CLI on EKS (a node group labelled for time-slicing as
/// NVIDIA's operator expects) and with ARM's REST API on AKS (a MIG pool labelled for the
/// operator's MIG manager and device plugin, and one left without those labels).
fn pools_made_outside_terraform(outside: &Outside) {
    outside.gcloud_node_pools(&[
        "create",
        "mig",
        "--machine-type",
        "a2-highgpu-1g",
        "--num-nodes",
        "1",
        // What the GPU operator's MIG manager must read to leave GKE's partitions alone.
        "--node-labels",
        "nvidia.com/mig.config=all-1g.5gb",
        "--accelerator",
        "type=nvidia-tesla-a100,count=1,gpu-partition-size=1g.5gb,gpu-driver-version=latest",
    ]);
    outside.gcloud_node_pools(&[
        "create",
        "shared",
        "--machine-type",
        "g2-standard-8",
        // Per zone: 6 nodes over the regional cluster's three zones.
        "--num-nodes",
        "2",
        "--accelerator",
        "type=nvidia-l4,count=1,gpu-sharing-strategy=time-sharing,max-shared-clients-per-gpu=10,gpu-driver-version=latest",
    ]);
    outside.gcloud_node_pools(&[
        "create",
        "system",
        "--machine-type",
        "n1-standard-4",
        "--num-nodes",
        "1",
    ]);
    outside.aws_eks(&[
        "create-nodegroup",
        "--cluster-name",
        "sandbox-eks",
        "--nodegroup-name",
        "t4ts",
        "--node-role",
        "arn:aws:iam::123456789012:role/gpu-nodes",
        "--subnets",
        "subnet-0a1",
        "subnet-0b2",
        "--instance-types",
        "g4dn.xlarge",
        "--ami-type",
        "AL2023_x86_64_NVIDIA",
        "--scaling-config",
        "minSize=1,maxSize=4,desiredSize=1",
        "--labels",
        "nvidia.com/device-plugin.config=time-sliced-4",
        "--taints",
        "key=nvidia.com/gpu,value=Present,effect=NO_SCHEDULE",
    ]);
    for (name, labels) in [
        (
            "a100mig",
            serde_json::json!({
                "nvidia.com/device-plugin.config": "mig-mixed",
                "nvidia.com/mig.config": "all-1g.10gb",
            }),
        ),
        ("a100raw", serde_json::json!({})),
    ] {
        outside.arm_put_pool(
            name,
            serde_json::json!({
                "vmSize": "Standard_NC24ads_A100_v4",
                "count": 1,
                "mode": "User",
                "osType": "Linux",
                "gpuInstanceProfile": "MIG1g",
                "nodeLabels": labels,
                "nodeTaints": ["nvidia.com/gpu=Present:NoSchedule"],
            }),
        );
    }
}

#[test]
fn terraform_query_finds_pools_made_outside_terraform_and_generates_a_clean_import() {
    let Some(tf) = tools::require(Tool::Terraform115) else {
        return;
    };
    let sb = sandbox::start(Duration::ZERO);
    let Some(outside) = Outside::new(&sb.url) else {
        return;
    };
    pools_made_outside_terraform(&outside);

    // The guide's own files, as a user copies them.
    let ws = Workspace::with_tree(&examples(), "guides/adopting-existing-gpu-pools")
        .with_terraform(&tf)
        .env("FRACGPU_SANDBOX", &sb.url);
    ws.init();
    let found = ws.ok(&["query", "-no-color"]);
    for shown in [
        "a100mig (Standard_NC24ads_A100_v4, MIG 1g.10gb, 1 node)",
        "a100raw (Standard_NC24ads_A100_v4, MIG 1g.10gb, 1 node)",
        "mig (a2-highgpu-1g, MIG 1g.5gb, 3 nodes)",
        "shared (g2-standard-8, time-slicing x10, 6 nodes)",
        "t4ts (g4dn.xlarge, time-slicing x4, 1-4 nodes)",
    ] {
        assert!(
            found.stdout.contains(shown),
            "{shown:?} in:\n{}",
            found.text()
        );
    }
    assert!(
        !found.stdout.contains("system"),
        "the pool without GPUs is left out by default:\n{}",
        found.stdout
    );

    // The list resource's documented example: the MIG pools of the GKE cluster only.
    let docs = Workspace::new(&provider(&sb.url)).with_terraform(&tf);
    docs.init();
    docs.write(
        "mig.tfquery.hcl",
        &std::fs::read_to_string(
            examples().join("list-resources/fracgpu_nodepool/list-resource.tfquery.hcl"),
        )
        .unwrap(),
    );
    let mig = docs.ok(&["query", "-no-color"]);
    assert!(
        mig.stdout
            .contains("mig (a2-highgpu-1g, MIG 1g.5gb, 3 nodes)"),
        "{}",
        mig.text()
    );
    assert!(!mig.stdout.contains("shared ("), "{}", mig.text());

    ws.ok(&["query", "-no-color", "-generate-config-out=pools.tf"]);
    let generated = std::fs::read_to_string(ws.dir.join("pools.tf")).unwrap();
    assert_eq!(generated.matches("import {").count(), 5, "{generated}");
    assert!(generated.contains("identity = {"), "{generated}");
    // Every pool imports as it is, except the one made without the labels NVIDIA's operator
    // reads, and the autoscaled EKS group whose Auto Scaling group carries no node template for
    // cluster-autoscaler: adopting them adds those, in place, and the plan says so.
    let out = ws.run(&["plan", "-no-color", "-input=false"]);
    assert!(
        out.stdout
            .contains("Plan: 5 to import, 0 to add, 2 to change, 0 to destroy"),
        "{}\n--- pools.tf:\n{generated}",
        out.text()
    );
    let changed: Vec<&str> = out
        .stdout
        .lines()
        .map(str::trim)
        .filter(|l| l.starts_with('+') || l.starts_with('~'))
        .collect();
    assert_eq!(
        changed,
        [
            "~ update in-place",
            "~ resource \"fracgpu_nodepool\" \"aks_1\" {",
            "~ node_labels               = {",
            "+ \"nvidia.com/device-plugin.config\" = \"mig-mixed\"",
            "+ \"nvidia.com/mig.config\"           = \"all-1g.10gb\"",
            "~ resource \"fracgpu_nodepool\" \"eks_0\" {",
            "~ autoscaler_node_template  = {",
            "+ \"k8s.io/cluster-autoscaler/node-template/label/eks.amazonaws.com/nodegroup\"     = \"t4ts\"",
            "+ \"k8s.io/cluster-autoscaler/node-template/label/nvidia.com/device-plugin.config\" = \"time-sliced-4\"",
            "+ \"k8s.io/cluster-autoscaler/node-template/resources/nvidia.com/gpu\"              = \"4\"",
            "+ \"k8s.io/cluster-autoscaler/node-template/taint/nvidia.com/gpu\"                  = \"Present:NoSchedule\"",
        ],
        "{}",
        out.stdout
    );
    ws.apply();
    let (code, plan) = ws.plan_exit_code();
    assert_eq!(code, 0, "{}\n--- pools.tf:\n{generated}", plan.text());
    // Adopted pools are the user's now: destroy removes them, and only them.
    ws.ok(&["destroy", "-auto-approve", "-no-color"]);
    assert_eq!(
        sb.pools(),
        [(
            "gke".to_string(),
            "sandbox-gke".to_string(),
            "system".to_string()
        )]
    );
}

fn examples() -> std::path::PathBuf {
    std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../..")).join("examples")
}

/// Terraform before 1.14 has no `terraform query`: the data source answers the same question, and
/// `terraform import` by the cloud's ID still adopts a pool.
#[test]
fn the_data_source_lists_the_pools_with_their_sharing_and_import_by_id_still_works() {
    let Some(tf) = tools::require(Tool::Terraform) else {
        return;
    };
    let sb = sandbox::start(Duration::ZERO);
    let Some(outside) = Outside::new(&sb.url) else {
        return;
    };
    pools_made_outside_terraform(&outside);
    let config = format!(
        r#"{provider}
data "fracgpu_nodepools" "gke" {{
  gke {{
    location = "us-central1"
    cluster  = "sandbox-gke"
  }}
}}

data "fracgpu_nodepools" "gke_all" {{
  gke {{
    location = "us-central1"
    cluster  = "sandbox-gke"
  }}
  gpu_only = false
}}

data "fracgpu_nodepools" "aks_mig" {{
  aks {{
    resource_group = "sandbox-rg"
    cluster_name   = "sandbox-aks"
  }}
  sharing = "mig"
}}

data "fracgpu_nodepools" "eks" {{
  eks {{ cluster_name = "sandbox-eks" }}
}}

output "gke" {{ value = data.fracgpu_nodepools.gke.pools }}
output "gke_all" {{ value = data.fracgpu_nodepools.gke_all.pools }}
output "aks_mig" {{ value = data.fracgpu_nodepools.aks_mig.pools }}
output "eks" {{ value = data.fracgpu_nodepools.eks.pools }}
"#,
        provider = provider(&sb.url)
    );
    let ws = Workspace::new(&config).with_terraform(&tf);
    ws.init();
    ws.apply();
    let out = ws.output_json();
    let names = |k: &str| -> Vec<String> {
        out[k]["value"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["name"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(names("gke"), ["mig", "shared"]);
    assert_eq!(names("gke_all"), ["mig", "shared", "system"]);
    assert_eq!(names("aks_mig"), ["a100mig", "a100raw"]);
    assert_eq!(names("eks"), ["t4ts"]);

    let shared = &out["gke"]["value"][1];
    assert_eq!(shared["sharing"], "time_slicing");
    assert_eq!(shared["replicas"], 10);
    assert_eq!(shared["gpu_model"], "L4");
    // gcloud's --num-nodes 2 is per zone; node_count is the pool's total.
    assert_eq!(shared["node_count"], 6);
    assert_eq!(shared["resource_name"], "nvidia.com/gpu");
    assert_eq!(shared["slices_per_node"], 10);
    assert_eq!(
        shared["node_selector"]["cloud.google.com/gke-gpu-sharing-strategy"], "time-sharing",
        "{shared}"
    );
    let system = &out["gke_all"]["value"][2];
    assert!(
        system["gpu_model"].is_null() && system["sharing"].is_null(),
        "{system}"
    );
    assert_eq!(system["machine_type"], "n1-standard-4");

    let mig = &out["aks_mig"]["value"][0];
    assert_eq!(mig["mig_profile"], "1g.10gb");
    assert_eq!(mig["resource_name"], "nvidia.com/mig-1g.10gb");
    assert_eq!(mig["slices_per_node"], 7);
    assert_eq!(mig["memory_per_slice_mb"], 10240);

    let t4 = &out["eks"]["value"][0];
    assert_eq!(t4["sharing"], "time_slicing");
    assert_eq!(t4["replicas"], 4);
    assert!(t4["node_count"].is_null(), "{t4}");
    assert_eq!(
        (t4["min_nodes"].clone(), t4["max_nodes"].clone()),
        (1.into(), 4.into())
    );
    assert_eq!(t4["device_plugin_config_name"], "time-sliced-4");
    assert_eq!(
        t4["node_selector"]["nvidia.com/device-plugin.config"],
        "time-sliced-4"
    );
    assert_eq!(t4["tolerations"][0]["key"], "nvidia.com/gpu", "{t4}");

    // The EKS node group, adopted by its ID with the configuration the data source describes.
    ws.write(
        "adopt.tf",
        r#"resource "fracgpu_nodepool" "t4" {
  name         = "t4ts"
  machine_type = "g4dn.xlarge"
  eks {
    cluster_name  = "sandbox-eks"
    node_role_arn = "arn:aws:iam::123456789012:role/gpu-nodes"
    subnet_ids    = ["subnet-0a1", "subnet-0b2"]
  }
  autoscaling {
    min_nodes = 1
    max_nodes = 4
  }
  taints = [{ key = "nvidia.com/gpu", value = "Present", effect = "NoSchedule" }]
  time_slicing { replicas = 4 }
}
"#,
    );
    ws.ok(&[
        "import",
        "-no-color",
        "fracgpu_nodepool.t4",
        "sandbox-eks:t4ts",
    ]);
    // The group was made without cluster-autoscaler's node template on its Auto Scaling group:
    // the one change after the import adds it, in place.
    let (code, plan) = ws.plan_exit_code();
    assert_eq!(code, 2, "the template is added:\n{}", plan.text());
    assert!(
        plan.stdout
            .contains("Plan: 0 to add, 1 to change, 0 to destroy"),
        "{}",
        plan.stdout
    );
    assert!(
        plan.stdout
            .contains("k8s.io/cluster-autoscaler/node-template/resources/nvidia.com/gpu"),
        "{}",
        plan.stdout
    );
    ws.apply();
    let (code, plan) = ws.plan_exit_code();
    assert_eq!(code, 0, "plan after the apply is empty:\n{}", plan.text());
}

/// A list block that names no cluster, two clusters, or a filter that does not exist.
#[test]
fn bad_list_configs_name_the_attribute_to_fix() {
    let Some(tf) = tools::require(Tool::Terraform115) else {
        return;
    };
    let sb = sandbox::start(Duration::ZERO);
    let ws = Workspace::new(&provider(&sb.url)).with_terraform(&tf);
    ws.init();
    const GKE_BLOCK: &str =
        "gke {\n      location = \"us-central1\"\n      cluster  = \"sandbox-gke\"\n    }";
    const EKS_BLOCK: &str = "eks {\n      cluster_name = \"sandbox-eks\"\n    }";
    for (config, expected) in [
        (
            "sharing = \"mig\"",
            "Exactly one of `aks`, `gke`, `eks` must be set; none is.",
        ),
        (
            &format!("{GKE_BLOCK}\n    {EKS_BLOCK}") as &str,
            "Exactly one of `aks`, `gke`, `eks` must be set; gke and eks are.",
        ),
        (
            &format!("{GKE_BLOCK}\n    sharing = \"fractional\""),
            "8:     sharing = \"fractional\"",
        ),
        (
            &format!("{GKE_BLOCK}\n    sharing = \"fractional\""),
            "\"fractional\"",
        ),
        (
            &format!("{GKE_BLOCK}\n    gpu_model = \"A100\""),
            "An argument named \"gpu_model\" is not expected here.",
        ),
        (
            "gke {\n      cluster = \"sandbox-gke\"\n    }",
            "The argument \"location\" is required",
        ),
    ] {
        ws.write(
            "q.tfquery.hcl",
            &format!(
                "list \"fracgpu_nodepool\" \"x\" {{\n  provider = fracgpu\n  config {{\n    {config}\n  }}\n}}\n"
            ),
        );
        let out = ws.run(&["query", "-no-color"]);
        assert_ne!(out.code, 0, "{config}: {}", out.text());
        assert!(
            out.text().contains(expected),
            "{config}: expected {expected:?} in\n{}",
            out.text()
        );
    }
}

/// The device plugin config's documented `import` block names the ConfigMap by its identity
/// (namespace and name); the generated configuration plans as a clean import.
#[test]
fn a_device_plugin_config_is_imported_by_its_identity() {
    let Some(tf) = tools::require(Tool::Terraform115) else {
        return;
    };
    let st = crate::common::sandbox::start_stack(Duration::ZERO);
    let provider = format!(
        "{}\nprovider \"fracgpu\" {{\n  kubernetes {{\n    config_path = \"{}\"\n  }}\n}}\n",
        crate::common::terraform::REQUIRED_PROVIDERS,
        st.kubeconfig("aks", "sandbox-aks").display()
    );
    let resource = r#"
resource "fracgpu_device_plugin_config" "aks" {
  default_config = "all"
  config { name = "all" }
  config {
    name = "time-sliced-4"
    time_slicing { replicas = 4 }
  }
}
"#;
    let ws = Workspace::new(&format!("{provider}{resource}")).with_terraform(&tf);
    ws.init();
    ws.apply();
    let show = ws.show_json();
    let identity = &show["values"]["root_module"]["resources"][0]["identity"];
    assert_eq!(
        identity,
        &serde_json::json!({"namespace": "gpu-operator", "name": "time-slicing-config"})
    );
    ws.ok(&["state", "rm", "fracgpu_device_plugin_config.aks"]);

    ws.write("main.tf", &provider);
    ws.write(
        "imports.tf",
        &std::fs::read_to_string(
            examples().join("resources/fracgpu_device_plugin_config/import-by-identity.hcl"),
        )
        .unwrap(),
    );
    let out = ws.run(&["plan", "-no-color", "-generate-config-out=generated.tf"]);
    let generated = std::fs::read_to_string(ws.dir.join("generated.tf"))
        .unwrap_or_else(|_| panic!("terraform wrote no configuration:\n{}", out.text()));
    let out = ws.run(&["plan", "-no-color", "-input=false"]);
    assert!(
        out.stdout
            .contains("Plan: 1 to import, 0 to add, 0 to change, 0 to destroy"),
        "{}\n--- generated.tf:\n{generated}",
        out.text()
    );
    ws.apply();
    let (code, plan) = ws.plan_exit_code();
    assert_eq!(code, 0, "{}\n--- generated.tf:\n{generated}", plan.text());
}

/// A GKE pool whose GPUs are attached to an N1 machine (`--accelerator type=nvidia-tesla-t4`): the
/// machine type alone names no GPU, so the pool is read through the accelerator GKE reports. The
/// data source lists it with its sharing, and it imports by ID with the `gpu_model` and
/// `gpu_count` a user writes for such a machine (terraform 1.11).
#[test]
fn an_n1_pool_with_attached_t4s_is_listed_and_imports_cleanly() {
    let Some(tf) = tools::require(Tool::Terraform) else {
        return;
    };
    let sb = sandbox::start(Duration::ZERO);
    let Some(outside) = Outside::new(&sb.url) else {
        return;
    };
    outside.gcloud_node_pools(&[
        "create",
        "t4",
        "--machine-type",
        "n1-standard-8",
        "--num-nodes",
        "1",
        "--accelerator",
        "type=nvidia-tesla-t4,count=1,gpu-sharing-strategy=time-sharing,max-shared-clients-per-gpu=4,gpu-driver-version=latest",
    ]);
    let config = format!(
        r#"{provider}
data "fracgpu_nodepools" "gke" {{
  gke {{
    location = "us-central1"
    cluster  = "sandbox-gke"
  }}
}}

output "gke" {{ value = data.fracgpu_nodepools.gke.pools }}

resource "fracgpu_nodepool" "t4" {{
  name         = "t4"
  machine_type = "n1-standard-8"
  gpu_model    = "nvidia-tesla-t4"
  gpu_count    = 1
  node_count   = 3
  gke {{
    location = "us-central1"
    cluster  = "sandbox-gke"
  }}
  time_slicing {{ replicas = 4 }}
}}
"#,
        provider = provider(&sb.url)
    );
    let ws = Workspace::new(&config).with_terraform(&tf);
    ws.init();
    ws.ok(&[
        "import",
        "-no-color",
        "fracgpu_nodepool.t4",
        "projects/sandbox-project/locations/us-central1/clusters/sandbox-gke/nodePools/t4",
    ]);
    let (code, plan) = ws.plan_exit_code();
    assert_eq!(code, 0, "plan after import is empty:\n{}", plan.text());
    ws.apply();
    let out = ws.output_json();
    let t4 = &out["gke"]["value"][0];
    assert_eq!(t4["name"], "t4", "{t4}");
    assert_eq!(t4["gpu_model"], "T4", "{t4}");
    assert_eq!(t4["sharing"], "time_slicing", "{t4}");
    assert_eq!(t4["replicas"], 4, "{t4}");
    assert_eq!(t4["node_count"], 3, "{t4}");
}
