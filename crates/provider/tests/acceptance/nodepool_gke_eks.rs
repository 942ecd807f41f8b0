//! `fracgpu_nodepool` on GKE and EKS through the real terraform binary against the sandbox:
//! create, state, empty plan, in-place update vs replacement as each cloud really needs it,
//! out-of-band drift through the cloud API, import, destroy.

use std::time::Duration;

use crate::common::sandbox::{self, Running};
use crate::common::terraform::{REQUIRED_PROVIDERS, Workspace};

fn config(sb: &Running, location: &str, body: &str) -> String {
    format!(
        "{REQUIRED_PROVIDERS}\nprovider \"fracgpu\" {{\n  sandbox = \"{}\"\n}}\n\nresource \"fracgpu_nodepool\" \"p\" {{\n{location}\n{body}\n}}\n\noutput \"pool\" {{ value = fracgpu_nodepool.p }}\n",
        sb.url
    )
}

const GKE: &str = "  gke {\n    location = \"us-central1\"\n    cluster  = \"sandbox-gke\"\n  }";
const EKS: &str = "  eks {\n    cluster_name  = \"sandbox-eks\"\n    node_role_arn = \"arn:aws:iam::123456789012:role/gpu-nodes\"\n    subnet_ids    = [\"subnet-0a1\", \"subnet-0b2\"]\n  }";

/// Sends one request to the sandbox's cloud API, as the cloud's own CLI would.
fn call(method: &str, url: &str, headers: &[(&str, &str)], body: serde_json::Value) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let mut req = reqwest::Client::new()
            .request(method.parse().unwrap(), url)
            .json(&body);
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        let resp = req.send().await.unwrap();
        assert!(
            resp.status().is_success(),
            "{method} {url}: {}",
            resp.text().await.unwrap()
        );
    });
}

fn settle(sb: &Running) {
    std::thread::sleep(Duration::from_millis(100));
    sb.sandbox.settle();
}

/// A well-formed SigV4 Authorization header (the sandbox checks the form, not the key).
const SIGV4: [(&str, &str); 2] = [
    (
        "authorization",
        "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20261130/us-east-1/eks/aws4_request, SignedHeaders=host;x-amz-date, Signature=0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
    ),
    ("x-amz-date", "20261130T000000Z"),
];

fn plan_has(ws: &Workspace, code: i32, needles: &[&str], absent: &[&str]) {
    let (got, plan) = ws.plan_exit_code();
    assert_eq!(got, code, "{}", plan.text());
    for n in needles {
        assert!(
            plan.stdout.contains(n),
            "expected {n:?} in:\n{}",
            plan.stdout
        );
    }
    for n in absent {
        assert!(
            !plan.stdout.contains(n),
            "unexpected {n:?} in:\n{}",
            plan.stdout
        );
    }
}

#[test]
fn gke_time_sharing_pool_lifecycle() {
    let sb = sandbox::start(Duration::ZERO);
    let body = |count: u32, clients: u32, team: &str| {
        format!(
            "  name         = \"l4shared\"\n  machine_type = \"g2-standard-4\"\n  node_count   = {count}\n  labels       = {{ team = \"{team}\" }}\n  time_slicing {{ replicas = {clients} }}"
        )
    };
    // Three nodes in all: one in each of the regional cluster's zones.
    let ws = Workspace::new(&config(&sb, GKE, &body(3, 10, "ml")));
    ws.init();
    ws.apply();
    let p = &ws.output_json()["pool"]["value"];
    assert_eq!(
        p["id"],
        "projects/sandbox-project/locations/us-central1/clusters/sandbox-gke/nodePools/l4shared"
    );
    assert_eq!(p["resource_name"], "nvidia.com/gpu");
    assert_eq!(p["slices_per_node"], 10);
    assert_eq!(
        p["device_plugin_config_name"],
        serde_json::Value::Null,
        "GKE's own plugin reads no config"
    );
    assert_eq!(
        p["node_selector"]["cloud.google.com/gke-max-shared-clients-per-gpu"],
        "10"
    );
    assert_eq!(
        p["node_selector"]["cloud.google.com/gke-gpu-sharing-strategy"],
        "time-sharing"
    );
    let gke = sb.pool("l4shared");
    let acc = &gke["config"]["accelerators"][0];
    assert_eq!(acc["acceleratorType"], "nvidia-l4");
    assert_eq!(
        acc["gpuSharingConfig"]["gpuSharingStrategy"],
        "TIME_SHARING"
    );
    assert_eq!(
        acc["gpuSharingConfig"]["maxSharedClientsPerGpu"]
            .to_string()
            .trim_matches('"'),
        "10"
    );
    plan_has(&ws, 0, &[], &[]);

    // Labels and size change in place on GKE.
    ws.write("main.tf", &config(&sb, GKE, &body(6, 10, "search")));
    plan_has(&ws, 2, &["updated in-place"], &["forces replacement"]);
    ws.apply();
    assert_eq!(sb.pool("l4shared")["config"]["labels"]["team"], "search");
    plan_has(&ws, 0, &[], &[]);

    // GKE cannot change the sharing config of a pool: replacement.
    ws.write("main.tf", &config(&sb, GKE, &body(6, 5, "search")));
    plan_has(&ws, 2, &["must be replaced", "# forces replacement"], &[]);
    ws.apply();
    let acc = &sb.pool("l4shared")["config"]["accelerators"][0];
    assert_eq!(
        acc["gpuSharingConfig"]["maxSharedClientsPerGpu"]
            .to_string()
            .trim_matches('"'),
        "5"
    );
    plan_has(&ws, 0, &[], &[]);

    // Drift: labels replaced through the GKE API (nodePools.update).
    call(
        "PUT",
        &format!(
            "{}/v1/projects/sandbox-project/locations/us-central1/clusters/sandbox-gke/nodePools/l4shared",
            sb.url
        ),
        &[],
        serde_json::json!({"labels": {"labels": {"team": "intruder"}}}),
    );
    settle(&sb);
    plan_has(&ws, 2, &["intruder"], &[]);
    ws.apply();
    assert_eq!(sb.pool("l4shared")["config"]["labels"]["team"], "search");
    plan_has(&ws, 0, &[], &[]);

    // Import into an empty state plans empty.
    let fresh = Workspace::new(&std::fs::read_to_string(ws.dir.join("main.tf")).unwrap());
    fresh.init();
    fresh.ok(&[
        "import",
        "-no-color",
        "fracgpu_nodepool.p",
        "projects/sandbox-project/locations/us-central1/clusters/sandbox-gke/nodePools/l4shared",
    ]);
    plan_has(&fresh, 0, &[], &[]);

    ws.ok(&["destroy", "-auto-approve", "-no-color"]);
    assert_eq!(sb.pools(), vec![]);
}

#[test]
fn gke_partitions_time_shared() {
    let sb = sandbox::start(Duration::ZERO);
    let ws = Workspace::new(&config(
        &sb,
        GKE,
        "  name         = \"a100mig\"\n  machine_type = \"a2-highgpu-1g\"\n  mig {\n    profile = \"1g.5gb\"\n    gke_sharing {\n      strategy    = \"time-sharing\"\n      max_clients = 2\n    }\n  }",
    ));
    ws.init();
    ws.apply();
    let p = &ws.output_json()["pool"]["value"];
    assert_eq!(p["slices_per_node"], 14, "7 partitions x 2 clients");
    assert_eq!(
        p["node_selector"]["cloud.google.com/gke-gpu-partition-size"],
        "1g.5gb"
    );
    let acc = &sb.pool("a100mig")["config"]["accelerators"][0];
    assert_eq!(acc["gpuPartitionSize"], "1g.5gb");
    assert_eq!(
        acc["gpuSharingConfig"]["gpuSharingStrategy"],
        "TIME_SHARING"
    );
    plan_has(&ws, 0, &[], &[]);
    ws.ok(&["destroy", "-auto-approve", "-no-color"]);
    assert_eq!(sb.pools(), vec![]);
}

#[test]
fn eks_sharing_changes_in_place_through_labels() {
    let sb = sandbox::start(Duration::ZERO);
    let body = |sharing: &str| {
        format!(
            "  name         = \"t4shared\"\n  machine_type = \"g4dn.xlarge\"\n  autoscaling {{\n    min_nodes = 1\n    max_nodes = 4\n  }}\n  labels       = {{ team = \"ml\" }}\n  {sharing}"
        )
    };
    let ws = Workspace::new(&config(&sb, EKS, &body("time_slicing { replicas = 10 }")));
    ws.init();
    ws.apply();
    let p = &ws.output_json()["pool"]["value"];
    assert_eq!(p["id"], "sandbox-eks:t4shared");
    assert_eq!(
        p["node_selector"]["eks.amazonaws.com/nodegroup"],
        "t4shared"
    );
    assert_eq!(
        p["node_selector"]["nvidia.com/device-plugin.config"],
        "fracgpu-t4shared"
    );
    assert_eq!(p["eks"][0]["ami_type"], "AL2023_x86_64_NVIDIA");
    let ng = sb.pool("t4shared");
    assert_eq!(
        ng["labels"]["nvidia.com/device-plugin.config"],
        "fracgpu-t4shared"
    );
    assert_eq!(ng["scalingConfig"]["minSize"], 1);
    assert_eq!(ng["scalingConfig"]["maxSize"], 4);
    assert_eq!(ng["taints"][0]["effect"], "NO_SCHEDULE");
    plan_has(&ws, 0, &[], &[]);

    // On EKS, MPS is a device plugin config label: in place.
    ws.write("main.tf", &config(&sb, EKS, &body("mps { replicas = 4 }")));
    plan_has(
        &ws,
        2,
        &["updated in-place", "mps-4"],
        &["forces replacement"],
    );
    ws.apply();
    assert_eq!(
        sb.pool("t4shared")["labels"]["fracgpu.dev/sharing"],
        "mps-4"
    );
    plan_has(&ws, 0, &[], &[]);

    // Drift through UpdateNodegroupConfig: a label edited, the config label removed.
    call(
        "POST",
        &format!(
            "{}/clusters/sandbox-eks/node-groups/t4shared/update-config",
            sb.url
        ),
        &SIGV4,
        serde_json::json!({"labels": {"addOrUpdateLabels": {"team": "intruder"}, "removeLabels": ["nvidia.com/device-plugin.config"]}}),
    );
    settle(&sb);
    // The sharing label still says mps-4: the plan puts the config label back, nothing else.
    plan_has(&ws, 2, &["intruder", "fracgpu-t4shared"], &["mps-4"]);
    ws.apply();
    let ng = sb.pool("t4shared");
    assert_eq!(ng["labels"]["team"], "ml");
    assert_eq!(
        ng["labels"]["nvidia.com/device-plugin.config"],
        "fracgpu-t4shared"
    );
    plan_has(&ws, 0, &[], &[]);

    let fresh = Workspace::new(&std::fs::read_to_string(ws.dir.join("main.tf")).unwrap());
    fresh.init();
    fresh.ok(&[
        "import",
        "-no-color",
        "fracgpu_nodepool.p",
        "sandbox-eks:t4shared",
    ]);
    plan_has(&fresh, 0, &[], &[]);

    ws.ok(&["destroy", "-auto-approve", "-no-color"]);
    assert_eq!(sb.pools(), vec![]);
}

#[test]
fn eks_mig_through_the_mig_manager_label() {
    let sb = sandbox::start(Duration::ZERO);
    let ws = Workspace::new(&config(
        &sb,
        EKS,
        "  name         = \"a100mig\"\n  machine_type = \"p4d.24xlarge\"\n  spot         = true\n  mig { profile = \"1g.5gb\" }",
    ));
    ws.init();
    ws.apply();
    let p = &ws.output_json()["pool"]["value"];
    assert_eq!(p["resource_name"], "nvidia.com/mig-1g.5gb");
    assert_eq!(p["slices_per_node"], 56, "7 instances x 8 GPUs");
    let ng = sb.pool("a100mig");
    assert_eq!(ng["labels"]["nvidia.com/mig.config"], "all-1g.5gb");
    assert_eq!(ng["capacityType"], "SPOT");
    plan_has(&ws, 0, &[], &[]);
    ws.ok(&["destroy", "-auto-approve", "-no-color"]);
    assert_eq!(sb.pools(), vec![]);
}

/// The pool's GKE nodes in all, from the sandbox's instance groups.
fn gke_nodes(sb: &Running, pool: &str) -> serde_json::Value {
    sb.sandbox.inventory()["pools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == pool)
        .map(|p| p["nodes"].clone())
        .unwrap_or_default()
}

/// GKE counts nodes per zone; `node_count` and the autoscaling bounds are the pool's total. On the
/// regional sandbox cluster (three zones) a total is split evenly over the zones, read back as the
/// sum of the zones' instance groups, and a total the zones cannot split is refused at plan time.
#[test]
fn gke_node_count_is_the_pools_total_across_its_zones() {
    let sb = sandbox::start(Duration::ZERO);
    let body = |scale: &str, locations: &str| {
        format!(
            "  name         = \"l4zones\"\n  machine_type = \"g2-standard-4\"\n{scale}\n  time_slicing {{ replicas = 4 }}\n  gke {{\n    location = \"us-central1\"\n    cluster  = \"sandbox-gke\"\n{locations}  }}"
        )
    };
    let cfg = |scale: &str, locations: &str| {
        format!(
            "{REQUIRED_PROVIDERS}\nprovider \"fracgpu\" {{\n  sandbox = \"{}\"\n}}\n\nresource \"fracgpu_nodepool\" \"p\" {{\n{}\n}}\n\noutput \"pool\" {{ value = fracgpu_nodepool.p }}\n",
            sb.url,
            body(scale, locations)
        )
    };
    let ws = Workspace::new(&cfg("  node_count   = 3", ""));
    ws.init();
    ws.apply();
    assert_eq!(gke_nodes(&sb, "l4zones"), 3, "three nodes in all, not nine");
    let np = sb.pool("l4zones");
    assert_eq!(np["initialNodeCount"], 1, "one node per zone");
    let p = &ws.output_json()["pool"]["value"];
    assert_eq!(p["node_count"], 3);
    assert_eq!(
        p["gke"][0]["node_locations"],
        serde_json::json!(["us-central1-a", "us-central1-b", "us-central1-c"])
    );
    plan_has(&ws, 0, &[], &[]);

    // A bigger total, in place: setSize is per zone.
    ws.write("main.tf", &cfg("  node_count   = 6", ""));
    plan_has(&ws, 2, &["updated in-place"], &["forces replacement"]);
    ws.apply();
    assert_eq!(gke_nodes(&sb, "l4zones"), 6);
    plan_has(&ws, 0, &[], &[]);

    // Four nodes do not split over three zones: refused at plan time, saying what would.
    ws.write("main.tf", &cfg("  node_count   = 4", ""));
    let (code, plan) = ws.plan_exit_code();
    assert_eq!(code, 1, "{}", plan.text());
    // Terraform wraps a diagnostic's lines.
    let text = plan.text().split_whitespace().collect::<Vec<_>>().join(" ");
    for needle in [
        "node_count = 4",
        "us-central1-a, us-central1-b, us-central1-c",
        "multiple of 3",
        "node_locations",
    ] {
        assert!(text.contains(needle), "{needle:?} in:\n{text}");
    }

    // Fewer zones for the pool: four nodes in two zones, two in each.
    let two = "    node_locations = [\"us-central1-a\", \"us-central1-b\"]\n";
    ws.write("main.tf", &cfg("  node_count   = 4", two));
    plan_has(&ws, 2, &["updated in-place"], &["forces replacement"]);
    ws.apply();
    let np = sb.pool("l4zones");
    assert_eq!(
        np["locations"],
        serde_json::json!(["us-central1-a", "us-central1-b"])
    );
    assert_eq!(gke_nodes(&sb, "l4zones"), 4);
    plan_has(&ws, 0, &[], &[]);

    // Autoscaling bounds are the pool's total too: GKE's total limits.
    ws.write(
        "main.tf",
        &cfg(
            "  autoscaling {\n    min_nodes = 1\n    max_nodes = 5\n  }",
            two,
        ),
    );
    ws.apply();
    let a = &sb.pool("l4zones")["autoscaling"];
    assert_eq!(
        (
            &a["totalMinNodeCount"],
            &a["totalMaxNodeCount"],
            &a["minNodeCount"]
        ),
        (
            &serde_json::json!(1),
            &serde_json::json!(5),
            &serde_json::Value::Null
        )
    );
    plan_has(&ws, 0, &[], &[]);

    // Import reads the total and the zones back.
    let fresh = Workspace::new(&std::fs::read_to_string(ws.dir.join("main.tf")).unwrap());
    fresh.init();
    fresh.ok(&[
        "import",
        "-no-color",
        "fracgpu_nodepool.p",
        "projects/sandbox-project/locations/us-central1/clusters/sandbox-gke/nodePools/l4zones",
    ]);
    plan_has(&fresh, 0, &[], &[]);
    ws.ok(&["destroy", "-auto-approve", "-no-color"]);
    assert_eq!(sb.pools(), vec![]);
}

/// GKE refuses a pool whose accelerator one of its zones lacks, and the provider quotes it; with
/// zones that have it, the pool is made. (europe-west4-c has no A100s.)
#[test]
fn gke_accelerator_missing_in_a_zone_is_gkes_error_and_node_locations_avoid_it() {
    let sb = sandbox::start_with(::sandbox::Config {
        op_time: Duration::ZERO,
        clusters: vec![::sandbox::ClusterSpec::Gke {
            project: "sandbox-project".into(),
            location: "europe-west4".into(),
            name: "eu".into(),
        }],
        ..::sandbox::Config::default()
    });
    let cfg = |locations: &str| {
        config(
            &sb,
            &format!(
                "  gke {{\n    location = \"europe-west4\"\n    cluster  = \"eu\"\n{locations}  }}"
            ),
            "  name         = \"a100\"\n  machine_type = \"a2-highgpu-1g\"\n  node_count   = 2\n  mig { profile = \"1g.5gb\" }",
        )
    };
    let ws = Workspace::new(&cfg(
        "    node_locations = [\"europe-west4-a\", \"europe-west4-b\", \"europe-west4-c\"]\n",
    ));
    ws.init();
    let (code, plan) = ws.plan_exit_code();
    assert_eq!(code, 1, "{}", plan.text());
    assert!(plan.text().contains("node_count"), "{}", plan.text());
    let ws = Workspace::new(&cfg(
        "    node_locations = [\"europe-west4-a\", \"europe-west4-c\"]\n",
    ));
    ws.init();
    let out = ws.run(&["apply", "-no-color", "-auto-approve", "-input=false"]);
    assert_eq!(out.code, 1, "{}", out.text());
    assert!(
        out.text().contains(
            "Accelerator type \"nvidia-tesla-a100\" does not exist in zone europe-west4-c."
        ),
        "{}",
        out.text()
    );
    assert_eq!(sb.pools(), vec![]);
    ws.write(
        "main.tf",
        &cfg("    node_locations = [\"europe-west4-a\", \"europe-west4-b\"]\n"),
    );
    ws.apply();
    assert_eq!(gke_nodes(&sb, "a100"), 2);
    plan_has(&ws, 0, &[], &[]);
    ws.ok(&["destroy", "-auto-approve", "-no-color"]);
}

/// When the cluster cannot be read at plan time, the plan says so and leaves the zones (and a
/// defaulted node count) to the apply, which reads them again.
#[test]
fn gke_zones_unreadable_at_plan_time_are_read_at_apply() {
    let sb = sandbox::start(Duration::ZERO);
    let ws = Workspace::new(&config(
        &sb,
        GKE,
        "  name         = \"late\"\n  machine_type = \"g2-standard-4\"\n  time_slicing { replicas = 2 }",
    ));
    ws.init();
    // Answers that are no cluster, not worth retrying: one for this plan, one for the apply's.
    sb.inject(serde_json::json!({"match": {"method": "GET", "path_contains": "/clusters/sandbox-gke"}, "count": 2, "kind": "malformed"}));
    let (code, plan) = ws.plan_exit_code();
    assert_eq!(code, 2, "{}", plan.text());
    let text = plan.text().split_whitespace().collect::<Vec<_>>().join(" ");
    for needle in [
        "Warning: GKE cluster zones unknown at plan time",
        "projects/sandbox-project/locations/us-central1/clusters/sandbox-gke",
        "node_locations = (known after apply)",
        "node_count = (known after apply)",
    ] {
        assert!(text.contains(needle), "{needle:?} in:\n{text}");
    }
    assert_eq!(sb.armed().len(), 1, "the plan read the cluster once");
    // The apply's own plan cannot read it either; the create reads it.
    ws.apply();
    assert!(sb.armed().is_empty());
    let p = &ws.output_json()["pool"]["value"];
    assert_eq!(
        p["node_count"], 3,
        "one node in each of the cluster's zones"
    );
    assert_eq!(gke_nodes(&sb, "late"), 3);
    plan_has(&ws, 0, &[], &[]);
    ws.ok(&["destroy", "-auto-approve", "-no-color"]);
}
