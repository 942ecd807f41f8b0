//! Bad configurations of `fracgpu_nodepool` are refused at plan time, before any API call, with
//! a diagnostic that names the problem and points at the offending line.

use crate::common::terraform::{REQUIRED_PROVIDERS, Workspace};

const AKS: &str =
    "aks {\n    resource_group = \"sandbox-rg\"\n    cluster_name = \"sandbox-aks\"\n  }";
const GKE: &str = "gke {\n    location = \"us-central1\"\n    cluster = \"sandbox-gke\"\n  }";
const EKS: &str = "eks {\n    cluster_name = \"sandbox-eks\"\n    node_role_arn = \"arn:aws:iam::1:role/r\"\n    subnet_ids = [\"s-1\"]\n  }";

/// (what it is, resource body, text that must appear in terraform's output: the summary and the
/// offending line or value).
// Every row is built the same way, also the few that interpolate nothing.
#[allow(clippy::useless_format)]
fn cases() -> Vec<(&'static str, String, Vec<&'static str>)> {
    let a100 = "machine_type = \"Standard_NC24ads_A100_v4\"";
    let c = |s: &str| s.to_string();
    vec![
        (
            "uppercase AKS name",
            format!("name = \"A100\"\n  {a100}\n  {AKS}"),
            vec!["Invalid pool name", "name = \"A100\""],
        ),
        (
            "AKS name too long",
            format!("name = \"abcdefghijklmn\"\n  {a100}\n  {AKS}"),
            vec!["Invalid pool name", "1 to 12"],
        ),
        (
            "unknown machine type",
            format!("name = \"p\"\n  machine_type = \"Standard_NC24ads_A100_v9\"\n  {AKS}"),
            vec!["Unknown machine type", "Standard_NC24ads_A100_v4"],
        ),
        (
            "profile of another GPU",
            format!("name = \"p\"\n  {a100}\n  {AKS}\n  mig {{ profile = \"1g.5gb\" }}"),
            vec![
                "Invalid MIG profile",
                "mig { profile = \"1g.5gb\" }",
                "1g.10gb",
            ],
        ),
        (
            "MIG on a T4",
            format!(
                "name = \"p\"\n  machine_type = \"Standard_NC4as_T4_v3\"\n  {AKS}\n  mig {{ profile = \"1g.5gb\" }}"
            ),
            vec!["MIG not supported"],
        ),
        (
            "one replica",
            format!("name = \"p\"\n  {a100}\n  {AKS}\n  time_slicing {{ replicas = 1 }}"),
            vec!["Value out of range", "replicas = 1"],
        ),
        (
            "49 replicas",
            format!("name = \"p\"\n  {a100}\n  {AKS}\n  time_slicing {{ replicas = 49 }}"),
            vec!["Value out of range", "between 2 and 48"],
        ),
        (
            "zero MPS clients",
            format!("name = \"p\"\n  {a100}\n  {AKS}\n  mps {{ replicas = 0 }}"),
            vec!["Value out of range", "replicas = 0"],
        ),
        (
            "two sharing modes",
            format!(
                "name = \"p\"\n  {a100}\n  {AKS}\n  mps {{ replicas = 2 }}\n  time_slicing {{ replicas = 2 }}"
            ),
            vec!["Conflicting arguments"],
        ),
        (
            "no cluster",
            format!("name = \"p\"\n  {a100}"),
            vec!["Missing required argument", "aks"],
        ),
        (
            "two clusters",
            format!("name = \"p\"\n  {a100}\n  {AKS}\n  {GKE}"),
            vec!["Conflicting arguments"],
        ),
        (
            "count and autoscaling",
            format!(
                "name = \"p\"\n  {a100}\n  {AKS}\n  node_count = 2\n  autoscaling {{\n    min_nodes = 1\n    max_nodes = 2\n  }}"
            ),
            vec!["Conflicting arguments"],
        ),
        (
            "min above max",
            format!(
                "name = \"p\"\n  {a100}\n  {AKS}\n  autoscaling {{\n    min_nodes = 5\n    max_nodes = 2\n  }}"
            ),
            vec!["Invalid autoscaling bounds", "min_nodes = 5"],
        ),
        (
            "too many nodes",
            format!("name = \"p\"\n  {a100}\n  {AKS}\n  node_count = 1001"),
            vec!["Value out of range", "node_count = 1001"],
        ),
        (
            "bad taint effect",
            format!(
                "name = \"p\"\n  {a100}\n  {AKS}\n  taints = [{{ key = \"k\", value = \"v\", effect = \"NoWay\" }}]"
            ),
            vec!["Invalid attribute value", "NoWay", "NoSchedule"],
        ),
        (
            "unknown OS SKU",
            format!(
                "name = \"p\"\n  {a100}\n  aks {{\n    resource_group = \"rg\"\n    cluster_name = \"c\"\n    os_sku = \"Windows\"\n  }}"
            ),
            vec!["Invalid attribute value", "os_sku = \"Windows\""],
        ),
        (
            "MIG on Azure Linux",
            format!(
                "name = \"p\"\n  {a100}\n  aks {{\n    resource_group = \"rg\"\n    cluster_name = \"c\"\n    os_sku = \"AzureLinux\"\n  }}\n  mig {{ profile = \"1g.10gb\" }}"
            ),
            vec!["Unsupported OS SKU"],
        ),
        (
            "rename on GKE",
            format!(
                "name = \"p\"\n  machine_type = \"g2-standard-4\"\n  {GKE}\n  time_slicing {{\n    replicas = 4\n    rename_by_default = true\n  }}"
            ),
            vec!["rename_by_default = true"],
        ),
        (
            "GKE partition GKE lacks",
            format!(
                "name = \"p\"\n  machine_type = \"a2-highgpu-1g\"\n  {GKE}\n  mig {{ profile = \"1g.10gb\" }}"
            ),
            vec!["Invalid MIG profile", "1g.5gb"],
        ),
        (
            // NVIDIA's 4g.20gb exists on the 40 GB A100, but GKE's partition table has no 4g size.
            "GKE partition NVIDIA has and GKE lacks",
            format!(
                "name = \"p\"\n  machine_type = \"a2-highgpu-1g\"\n  {GKE}\n  mig {{ profile = \"4g.20gb\" }}"
            ),
            vec![
                "Invalid MIG profile",
                "4g.20gb",
                "1g.5gb, 2g.10gb, 3g.20gb, 7g.40gb",
            ],
        ),
        (
            // GKE taints GPU nodes nvidia.com/gpu=present:NoSchedule itself; a second taint of that
            // key and effect would keep the nodes from registering.
            "a second GPU taint on GKE",
            format!(
                "name = \"p\"\n  machine_type = \"g2-standard-4\"\n  {GKE}\n  taints = [{{ key = \"nvidia.com/gpu\", value = \"Present\", effect = \"NoSchedule\" }}]"
            ),
            vec![
                "Conflicting taint",
                "taints = [",
                "nvidia.com/gpu=present:NoSchedule",
                "unique by key and effect",
            ],
        ),
        (
            "MPS on GKE partitions",
            format!(
                "name = \"p\"\n  machine_type = \"a2-highgpu-1g\"\n  {GKE}\n  mig {{\n    profile = \"1g.5gb\"\n    gke_sharing {{\n      strategy = \"mps\"\n      max_clients = 2\n    }}\n  }}"
            ),
            vec!["Invalid GPU sharing", "time-sharing"],
        ),
        (
            "49 GKE clients",
            format!(
                "name = \"p\"\n  machine_type = \"a2-highgpu-1g\"\n  {GKE}\n  mig {{\n    profile = \"1g.5gb\"\n    gke_sharing {{\n      strategy = \"time-sharing\"\n      max_clients = 49\n    }}\n  }}"
            ),
            vec!["Value out of range", "max_clients = 49"],
        ),
        (
            "unknown GKE strategy",
            format!(
                "name = \"p\"\n  machine_type = \"a2-highgpu-1g\"\n  {GKE}\n  mig {{\n    profile = \"1g.5gb\"\n    gke_sharing {{\n      strategy = \"slicing\"\n      max_clients = 2\n    }}\n  }}"
            ),
            vec!["Invalid attribute value", "strategy = \"slicing\""],
        ),
        (
            "non-GPU EKS AMI",
            format!(
                "name = \"p\"\n  machine_type = \"g4dn.xlarge\"\n  eks {{\n    cluster_name = \"c\"\n    node_role_arn = \"r\"\n    subnet_ids = [\"s\"]\n    ami_type = \"AL2_x86_64\"\n  }}"
            ),
            vec!["Invalid attribute value", "AL2023_x86_64_NVIDIA"],
        ),
        (
            "mixed MIG on Bottlerocket",
            format!(
                "name = \"p\"\n  machine_type = \"p4d.24xlarge\"\n  eks {{\n    cluster_name = \"c\"\n    node_role_arn = \"r\"\n    subnet_ids = [\"s\"]\n    ami_type = \"BOTTLEROCKET_x86_64_NVIDIA\"\n  }}\n  mig {{\n    profile = \"1g.5gb\"\n    strategy = \"mixed\"\n  }}"
            ),
            vec![
                "MIG strategy not supported on Bottlerocket",
                "strategy = \"mixed\"",
                "mig.strategy = \"single\"",
                "AL2023_x86_64_NVIDIA",
            ],
        ),
        (
            "relaxed MPS on Bottlerocket",
            format!(
                "name = \"p\"\n  machine_type = \"g4dn.xlarge\"\n  eks {{\n    cluster_name = \"c\"\n    node_role_arn = \"r\"\n    subnet_ids = [\"s\"]\n    ami_type = \"BOTTLEROCKET_x86_64_NVIDIA\"\n  }}\n  mps {{\n    replicas = 4\n    fail_requests_greater_than_one = false\n  }}"
            ),
            vec![
                "Invalid GPU sharing",
                "fail_requests_greater_than_one = false",
                "only the replica count",
                "AL2023 NVIDIA image",
            ],
        ),
        (
            "relaxed MPS on GKE",
            format!(
                "name = \"p\"\n  machine_type = \"g2-standard-4\"\n  {GKE}\n  mps {{\n    replicas = 4\n    fail_requests_greater_than_one = false\n  }}"
            ),
            vec![
                "Invalid GPU sharing",
                "fail_requests_greater_than_one = false",
                "Remove it on GKE",
            ],
        ),
        (
            "EKS without subnets",
            format!(
                "name = \"p\"\n  machine_type = \"g4dn.xlarge\"\n  eks {{\n    cluster_name = \"c\"\n    node_role_arn = \"r\"\n  }}"
            ),
            vec!["Missing required argument", "subnet_ids"],
        ),
        (
            "unknown MIG strategy",
            format!(
                "name = \"p\"\n  {a100}\n  {AKS}\n  mig {{\n    profile = \"1g.10gb\"\n    strategy = \"both\"\n  }}"
            ),
            vec!["Invalid attribute value", "strategy = \"both\""],
        ),
        (
            "tiny disk",
            format!("name = \"p\"\n  {a100}\n  {AKS}\n  disk_size_gb = 5"),
            vec!["Value out of range", "disk_size_gb = 5"],
        ),
        (
            "zero GPUs",
            format!("name = \"p\"\n  {a100}\n  {AKS}\n  gpu_count = 0"),
            vec!["Value out of range", "gpu_count = 0"],
        ),
        (
            "label the provider owns",
            format!(
                "name = \"p\"\n  {a100}\n  {AKS}\n  time_slicing {{ replicas = 4 }}\n  labels = {{ \"nvidia.com/device-plugin.config\" = \"mine\" }}"
            ),
            vec!["Conflicting node label"],
        ),
        (
            "bad timeout",
            format!("name = \"p\"\n  {a100}\n  {AKS}\n  timeouts {{ create = \"forever\" }}"),
            vec!["Invalid duration", "create = \"forever\""],
        ),
        (
            "GKE name with underscore",
            format!("name = \"pool_1\"\n  machine_type = \"g2-standard-4\"\n  {GKE}"),
            vec!["Invalid pool name", "name = \"pool_1\""],
        ),
        (
            "EKS name with a space",
            format!("name = \"bad name\"\n  machine_type = \"g4dn.xlarge\"\n  {EKS}"),
            vec!["Invalid pool name"],
        ),
        (
            "n1 without its GPU",
            format!("name = \"p\"\n  machine_type = \"n1-standard-8\"\n  {GKE}"),
            vec!["Unknown machine type", "nvidia-tesla-t4"],
        ),
        (
            "unknown GPU model",
            format!(
                "name = \"p\"\n  machine_type = \"n1-standard-8\"\n  gpu_model = \"V100\"\n  gpu_count = 1\n  {GKE}"
            ),
            vec!["Unknown GPU model", "gpu_model = \"V100\""],
        ),
        (
            "AKS machine type on EKS",
            format!("name = \"p\"\n  {a100}\n  {EKS}"),
            vec!["Unknown machine type", "AKS"],
        ),
        (
            "unknown attribute",
            c("name = \"p\"\n  size = 3"),
            vec!["Unsupported argument", "size"],
        ),
    ]
}

#[test]
fn every_bad_configuration_is_refused_with_its_attribute() {
    let provider = format!(
        "{REQUIRED_PROVIDERS}\nprovider \"fracgpu\" {{\n  sandbox = \"http://127.0.0.1:9\"\n}}\n"
    );
    let ws = Workspace::new(&provider);
    ws.init();
    let cases = cases();
    assert!(cases.len() >= 30);
    let mut failures = Vec::new();
    for (what, body, expected) in &cases {
        ws.write(
            "main.tf",
            &format!("{provider}\nresource \"fracgpu_nodepool\" \"p\" {{\n  {body}\n}}\n"),
        );
        let out = ws.run(&["plan", "-no-color", "-input=false"]);
        let text = out.text();
        // The sandbox address is unreachable: a configuration that got as far as an API call
        // would fail differently, so these are refused before any request.
        if out.code != 1 || text.contains("unreachable") || text.contains("could not be reached") {
            failures.push(format!(
                "{what}: exit {} without a plan-time refusal:\n{text}",
                out.code
            ));
            continue;
        }
        let missing: Vec<&&str> = expected.iter().filter(|e| !text.contains(**e)).collect();
        if !missing.is_empty() {
            failures.push(format!("{what}: missing {missing:?} in:\n{text}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}
