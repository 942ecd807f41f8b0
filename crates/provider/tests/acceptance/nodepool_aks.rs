//! `fracgpu_nodepool` on AKS, through the real terraform binary against the sandbox's ARM API:
//! create, state, empty plan, in-place update, replacement, out-of-band drift, import, destroy.

use std::time::Duration;

use crate::common::sandbox::{self, Running};
use crate::common::terraform::{REQUIRED_PROVIDERS, Workspace};

const RG: &str = "sandbox-rg";
const CLUSTER: &str = "sandbox-aks";
const SUB: &str = "00000000-0000-0000-0000-000000000000";

fn config(sb: &Running, pool_body: &str) -> String {
    format!(
        r#"{REQUIRED_PROVIDERS}
provider "fracgpu" {{
  sandbox = "{url}"
}}

resource "fracgpu_nodepool" "p" {{
  aks {{
    resource_group = "{RG}"
    cluster_name   = "{CLUSTER}"
  }}
{pool_body}
}}

output "pool" {{ value = fracgpu_nodepool.p }}
"#,
        url = sb.url
    )
}

fn arm_pool_url(sb: &Running, name: &str) -> String {
    format!(
        "{}/subscriptions/{SUB}/resourceGroups/{RG}/providers/Microsoft.ContainerService/managedClusters/{CLUSTER}/agentPools/{name}?api-version=2025-10-01",
        sb.url
    )
}

/// Changes a pool behind terraform's back through the ARM API, as `az aks nodepool update` would.
fn out_of_band(sb: &Running, name: &str, change: impl FnOnce(&mut serde_json::Value)) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let http = reqwest::Client::new();
        let token: serde_json::Value = http
            .post(format!("{}/{SUB}/oauth2/v2.0/token", sb.url))
            .header("content-type", "application/x-www-form-urlencoded")
            .body("grant_type=client_credentials&client_id=someone&client_secret=s3cret&scope=https%3A%2F%2Fmanagement.azure.com%2F.default")
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let bearer = format!("Bearer {}", token["access_token"].as_str().expect("token"));
        let mut pool: serde_json::Value =
            http.get(arm_pool_url(sb, name)).header("authorization", &bearer).send().await.unwrap().json().await.unwrap();
        change(&mut pool);
        let put = http.put(arm_pool_url(sb, name)).header("authorization", &bearer).json(&pool).send().await.unwrap();
        assert!(put.status().is_success(), "out-of-band PUT: {}", put.text().await.unwrap());
    });
    // Let the update's operation settle in the sandbox.
    std::thread::sleep(Duration::from_millis(200));
    sb.sandbox.settle();
}

#[test]
fn aks_time_sliced_pool_lifecycle() {
    let sb = sandbox::start(Duration::ZERO);
    let ws = Workspace::new(&config(
        &sb,
        r#"  name         = "a100ts"
  machine_type = "Standard_NC24ads_A100_v4"
  node_count   = 2
  labels       = { team = "ml" }
  time_slicing { replicas = 10 }"#,
    ));
    ws.init();
    let (code, plan) = ws.plan_exit_code();
    assert_eq!(code, 2, "{}", plan.text());
    // Derived facts are known at plan time.
    assert!(
        plan.stdout
            .contains(r#"device_plugin_config_name = "fracgpu-a100ts""#),
        "{}",
        plan.stdout
    );
    ws.apply();

    // State holds what workloads need.
    let p = &ws.output_json()["pool"]["value"];
    // ARM resource IDs compare case-insensitively (AKS itself answers `resourcegroups`).
    assert_eq!(
        p["id"].as_str().unwrap().to_lowercase(),
        format!(
            "/subscriptions/{SUB}/resourceGroups/{RG}/providers/Microsoft.ContainerService/managedClusters/{CLUSTER}/agentPools/a100ts"
        ).to_lowercase()
    );
    assert_eq!(p["device_plugin_config_name"], "fracgpu-a100ts");
    assert_eq!(p["slices_per_node"], 10);
    assert_eq!(p["resource_name"], "nvidia.com/gpu");
    assert_eq!(p["gpu"]["model"], "A100-80GB");
    assert_eq!(p["node_selector"]["agentpool"], "a100ts");
    assert_eq!(
        p["node_selector"]["nvidia.com/device-plugin.config"],
        "fracgpu-a100ts"
    );
    assert_eq!(p["taints"][0]["key"], "nvidia.com/gpu");
    assert_eq!(p["status"], "Succeeded");
    // The cloud holds the pool as declared.
    let arm = sb.pool("a100ts");
    assert_eq!(arm["properties"]["count"], 2);
    assert_eq!(arm["properties"]["vmSize"], "Standard_NC24ads_A100_v4");
    assert_eq!(
        arm["properties"]["nodeLabels"]["nvidia.com/device-plugin.config"],
        "fracgpu-a100ts"
    );
    assert_eq!(
        arm["properties"]["nodeLabels"]["fracgpu.dev/sharing"],
        "time-sliced-10"
    );
    assert_eq!(arm["properties"]["nodeLabels"]["team"], "ml");
    assert_eq!(
        arm["properties"]["nodeTaints"][0],
        "nvidia.com/gpu=Present:NoSchedule"
    );

    let (code, plan) = ws.plan_exit_code();
    assert_eq!(code, 0, "second plan is empty:\n{}", plan.text());

    // In place: count, labels and the replicas (a label on AKS).
    ws.write(
        "main.tf",
        &config(
            &sb,
            r#"  name         = "a100ts"
  machine_type = "Standard_NC24ads_A100_v4"
  node_count   = 3
  labels       = { team = "ml", tier = "gold" }
  time_slicing { replicas = 5 }"#,
        ),
    );
    let (code, plan) = ws.plan_exit_code();
    assert_eq!(code, 2);
    assert!(plan.stdout.contains("updated in-place"), "{}", plan.stdout);
    assert!(
        !plan.stdout.contains("forces replacement"),
        "{}",
        plan.stdout
    );
    ws.apply();
    let arm = sb.pool("a100ts");
    assert_eq!(arm["properties"]["count"], 3);
    assert_eq!(
        arm["properties"]["nodeLabels"]["nvidia.com/device-plugin.config"], "fracgpu-a100ts",
        "the replicas change keeps the nodes' config name"
    );
    assert_eq!(
        arm["properties"]["nodeLabels"]["fracgpu.dev/sharing"],
        "time-sliced-5"
    );
    assert_eq!(ws.plan_exit_code().0, 0);

    // Replacement: a MIG profile needs new nodes on AKS.
    ws.write(
        "main.tf",
        &config(
            &sb,
            r#"  name         = "a100ts"
  machine_type = "Standard_NC24ads_A100_v4"
  node_count   = 3
  labels       = { team = "ml", tier = "gold" }
  mig { profile = "1g.10gb" }"#,
        ),
    );
    let (code, plan) = ws.plan_exit_code();
    assert_eq!(code, 2);
    assert!(plan.stdout.contains("must be replaced"), "{}", plan.stdout);
    assert!(
        plan.stdout.contains("# forces replacement"),
        "{}",
        plan.stdout
    );
    ws.apply();
    assert_eq!(
        sb.pool("a100ts")["properties"]["gpuInstanceProfile"],
        "MIG1g"
    );
    let p = &ws.output_json()["pool"]["value"];
    assert_eq!(p["resource_name"], "nvidia.com/mig-1g.10gb");
    assert_eq!(p["slices_per_node"], 7);
    assert_eq!(ws.plan_exit_code().0, 0);

    // Drift: someone scales the pool and edits a label through the ARM API.
    out_of_band(&sb, "a100ts", |pool| {
        pool["properties"]["count"] = 5.into();
        pool["properties"]["nodeLabels"]["team"] = "other".into();
    });
    let (code, plan) = ws.plan_exit_code();
    assert_eq!(
        code,
        2,
        "drift shows in plan -detailed-exitcode:\n{}",
        plan.text()
    );
    assert!(
        plan.stdout.contains("node_count") && plan.stdout.contains("team"),
        "{}",
        plan.stdout
    );
    ws.apply();
    assert_eq!(sb.pool("a100ts")["properties"]["count"], 3);
    assert_eq!(ws.plan_exit_code().0, 0);

    // Import into an empty state: the next plan is empty.
    let id = ws.output_json()["pool"]["value"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let fresh = Workspace::new(&std::fs::read_to_string(ws.dir.join("main.tf")).unwrap());
    fresh.init();
    fresh.ok(&["import", "-no-color", "fracgpu_nodepool.p", &id]);
    let (code, plan) = fresh.plan_exit_code();
    assert_eq!(code, 0, "plan after import is empty:\n{}", plan.text());

    ws.ok(&["destroy", "-auto-approve", "-no-color"]);
    assert_eq!(sb.pools(), vec![], "destroy leaves the sandbox empty");
}

#[test]
fn aks_pool_vanishing_out_of_band_is_planned_for_creation() {
    let sb = sandbox::start(Duration::ZERO);
    let ws = Workspace::new(&config(
        &sb,
        r#"  name         = "gone"
  machine_type = "Standard_NC24ads_A100_v4"
  mps { replicas = 4 }"#,
    ));
    ws.init();
    ws.apply();
    assert_eq!(sb.pools().len(), 1);
    sb.sandbox.with_world(|w, _| {
        for c in w.aks.clusters.values_mut() {
            c.pools.clear();
        }
    });
    let (code, plan) = ws.plan_exit_code();
    assert_eq!(code, 2, "{}", plan.text());
    assert!(plan.stdout.contains("will be created"), "{}", plan.stdout);
    ws.apply();
    assert_eq!(sb.pools().len(), 1);
}

fn config_with_aks(sb: &Running, aks_extra: &str, pool_body: &str) -> String {
    config(sb, pool_body).replace(
        &format!("    cluster_name   = \"{CLUSTER}\"\n  }}"),
        &format!("    cluster_name   = \"{CLUSTER}\"\n{aks_extra}  }}"),
    )
}

/// How many creates made the pool, per the sandbox's counters.
fn times_created(sb: &Running, name: &str) -> u64 {
    crate::common::pools::creates(&sb.sandbox.inventory())
        .get(&("aks".to_string(), CLUSTER.to_string(), name.to_string()))
        .map_or(0, |c| c.made)
}

fn plan_in_place(ws: &Workspace) {
    let (code, plan) = ws.plan_exit_code();
    assert_eq!(code, 2, "{}", plan.text());
    assert!(plan.stdout.contains("updated in-place"), "{}", plan.stdout);
    assert!(
        !plan.stdout.contains("forces replacement"),
        "{}",
        plan.stdout
    );
}

#[test]
fn aks_os_sku_moves_between_ubuntu_and_azure_linux_in_place() {
    let sb = sandbox::start(Duration::ZERO);
    let body = r#"  name         = "osmove"
  machine_type = "Standard_NC24ads_A100_v4"
  time_slicing { replicas = 4 }"#;
    // Created with AKS's default image (no os_sku), then moved to Azure Linux, Azure Linux 3 and
    // Ubuntu 24.04: each a reimage of the same pool.
    let ws = Workspace::new(&config(&sb, body));
    ws.init();
    ws.apply();
    for sku in ["AzureLinux", "AzureLinux3", "Ubuntu2404"] {
        ws.write(
            "main.tf",
            &config_with_aks(&sb, &format!("    os_sku         = \"{sku}\"\n"), body),
        );
        plan_in_place(&ws);
        ws.apply();
        assert_eq!(sb.pool("osmove")["properties"]["osSKU"], sku);
        let (code, plan) = ws.plan_exit_code();
        assert_eq!(code, 0, "{sku}: the plan is empty:\n{}", plan.text());
    }
    assert_eq!(times_created(&sb, "osmove"), 1, "never replaced");
    // Leaving os_sku out again keeps what the pool runs.
    ws.write("main.tf", &config(&sb, body));
    assert_eq!(ws.plan_exit_code().0, 0);
    ws.ok(&["destroy", "-auto-approve", "-no-color"]);
}

#[test]
fn aks_gpu_driver_none_leaves_the_driver_to_the_gpu_operator() {
    let sb = sandbox::start(Duration::ZERO);
    let body = r#"  name         = "opdriver"
  machine_type = "Standard_NC24ads_A100_v4"
  time_slicing { replicas = 4 }"#;
    let ws = Workspace::new(&config_with_aks(
        &sb,
        "    gpu_driver     = \"None\"\n",
        body,
    ));
    ws.init();
    ws.apply();
    assert_eq!(
        sb.pool("opdriver")["properties"]["gpuProfile"]["driver"],
        "None"
    );
    let p = &ws.output_json()["pool"]["value"];
    assert_eq!(p["aks"][0]["gpu_driver"], "None");
    assert_eq!(ws.plan_exit_code().0, 0);
    // Imported, it plans empty.
    let fresh = Workspace::new(&std::fs::read_to_string(ws.dir.join("main.tf")).unwrap());
    fresh.init();
    let id = p["id"].as_str().unwrap().to_string();
    fresh.ok(&["import", "-no-color", "fracgpu_nodepool.p", &id]);
    let (code, plan) = fresh.plan_exit_code();
    assert_eq!(code, 0, "plan after import is empty:\n{}", plan.text());
    // AKS sets the driver up when it creates the nodes: a change needs a new pool.
    ws.write(
        "main.tf",
        &config_with_aks(&sb, "    gpu_driver     = \"Install\"\n", body),
    );
    let (code, plan) = ws.plan_exit_code();
    assert_eq!(code, 2, "{}", plan.text());
    assert!(
        plan.stdout.contains("# forces replacement"),
        "{}",
        plan.stdout
    );
    ws.apply();
    assert_eq!(
        sb.pool("opdriver")["properties"]["gpuProfile"]["driver"],
        "Install"
    );
    assert_eq!(times_created(&sb, "opdriver"), 2);
    // Left out, the driver setting the pool has stays.
    ws.write("main.tf", &config(&sb, body));
    assert_eq!(ws.plan_exit_code().0, 0);
    ws.ok(&["destroy", "-auto-approve", "-no-color"]);
}
