//! EKS AMI types as they really are: Amazon Linux 2 GPU AMIs end with Kubernetes 1.32 (a plan-time
//! warning names the replacement; EKS itself refuses them on 1.33 clusters), and Bottlerocket's NVIDIA
//! variants share GPUs only through their own settings: a Bottlerocket pool without sharing
//! advertises whole GPUs, and one that shares gets them through its launch template's user data,
//! read back, versioned and deleted with the node group (checked with the aws CLI).

use std::time::Duration;

use base64::Engine as _;
use serde_json::Value;

use crate::common::outside::Outside;
use crate::common::sandbox;
use crate::common::terraform::{REQUIRED_PROVIDERS, Workspace, flat};

fn config(url: &str, ami: &str, sharing: &str) -> String {
    format!(
        "{REQUIRED_PROVIDERS}\nprovider \"fracgpu\" {{\n  sandbox = \"{url}\"\n}}\n\nresource \"fracgpu_nodepool\" \"p\" {{\n  name         = \"gpus\"\n  machine_type = \"g4dn.xlarge\"\n  eks {{\n    cluster_name  = \"sandbox-eks\"\n    node_role_arn = \"arn:aws:iam::123456789012:role/gpu-nodes\"\n    subnet_ids    = [\"subnet-0a1\"]\n    ami_type      = \"{ami}\"\n  }}\n{sharing}\n}}\n\noutput \"pool\" {{ value = fracgpu_nodepool.p }}\n"
    )
}

#[test]
fn eks_al2_gpu_ami_warns_at_plan_and_eks_refuses_it_on_1_33() {
    let sb = sandbox::start(Duration::ZERO);
    let ws = Workspace::new(&config(
        &sb.url,
        "AL2_x86_64_GPU",
        "  time_slicing { replicas = 4 }",
    ));
    ws.init();
    let (code, plan) = ws.plan_exit_code();
    assert_eq!(code, 2, "{}", plan.text());
    let text = plan.text();
    for needle in [
        "Warning: Amazon Linux 2 GPU AMI",
        "ami_type      = \"AL2_x86_64_GPU\"",
        "2025-11-26",
        "1.33",
        "AL2023_x86_64_NVIDIA",
    ] {
        assert!(
            flat(&text).contains(&flat(needle)),
            "missing {needle:?} in:\n{text}"
        );
    }
    // The sandbox's cluster runs Kubernetes 1.33: EKS has no AL2 AMI for it.
    let out = ws.run(&["apply", "-no-color", "-auto-approve", "-input=false"]);
    assert_eq!(out.code, 1, "{}", out.text());
    assert!(
        flat(&out.text()).contains(
            "AMI Type AL2_x86_64_GPU is only supported for kubernetes versions 1.32 or earlier"
        ),
        "{}",
        out.text()
    );
    assert_eq!(sb.pools(), vec![]);
    // The default needs no warning.
    ws.write(
        "main.tf",
        &config(
            &sb.url,
            "AL2023_x86_64_NVIDIA",
            "  time_slicing { replicas = 4 }",
        ),
    );
    let (code, plan) = ws.plan_exit_code();
    assert_eq!(code, 2, "{}", plan.text());
    assert!(!plan.text().contains("Warning"), "{}", plan.text());
}

#[test]
fn eks_bottlerocket_pool_without_sharing_gets_whole_gpus() {
    let sb = sandbox::start_stack(Duration::ZERO);
    let ws = Workspace::new(&config(&sb.url, "BOTTLEROCKET_x86_64_NVIDIA", ""));
    ws.init();
    ws.apply();
    let p = &ws.output_json()["pool"]["value"];
    assert_eq!(p["resource_name"], "nvidia.com/gpu");
    assert_eq!(p["slices_per_node"], 1);
    let nodes = sb.nodes("eks", "sandbox-eks", "gpus");
    assert_eq!(nodes.len(), 1);
    assert!(
        nodes[0]["status"]["nodeInfo"]["osImage"]
            .as_str()
            .is_some_and(|o| o.starts_with("Bottlerocket")),
        "{}",
        nodes[0]
    );
    assert_eq!(nodes[0]["status"]["allocatable"]["nvidia.com/gpu"], "1");
    assert_eq!(ws.plan_exit_code().0, 0);
    // Sharing asked of it later needs a launch template, which EKS cannot give a node group made
    // without one: the plan replaces the group, and says which change forces it.
    ws.write(
        "main.tf",
        &config(
            &sb.url,
            "BOTTLEROCKET_x86_64_NVIDIA",
            "  time_slicing { replicas = 4 }",
        ),
    );
    let (code, plan) = ws.plan_exit_code();
    assert_eq!(code, 2, "{}", plan.text());
    let text = flat(&plan.text());
    assert!(
        text.contains("must be replaced") && text.contains("# forces replacement"),
        "{}",
        plan.text()
    );
    ws.write(
        "main.tf",
        &config(&sb.url, "BOTTLEROCKET_x86_64_NVIDIA", ""),
    );
    ws.ok(&["destroy", "-auto-approve", "-no-color"]);
}

const TEMPLATE: &str = "fracgpu/sandbox-eks/gpus";

/// The launch template version the node group uses, as the aws CLI reads it: its number, the
/// user data decoded, and the data volume's size.
fn template_in_use(outside: &Outside) -> (String, String, Value) {
    let ng: Value = serde_json::from_str(&outside.aws_eks(&[
        "describe-nodegroup",
        "--cluster-name",
        "sandbox-eks",
        "--nodegroup-name",
        "gpus",
    ]))
    .unwrap();
    let lt = &ng["nodegroup"]["launchTemplate"];
    assert_eq!(lt["name"], TEMPLATE, "{ng}");
    let version = lt["version"].as_str().expect("a version").to_string();
    let versions: Value = serde_json::from_str(&outside.aws_ec2(&[
        "describe-launch-template-versions",
        "--launch-template-id",
        lt["id"].as_str().expect("an id"),
        "--versions",
        &version,
    ]))
    .unwrap();
    let data = &versions["LaunchTemplateVersions"][0]["LaunchTemplateData"];
    let user_data = base64::engine::general_purpose::STANDARD
        .decode(data["UserData"].as_str().expect("user data"))
        .unwrap();
    (
        version,
        String::from_utf8(user_data).unwrap(),
        data["BlockDeviceMappings"].clone(),
    )
}

/// The aws CLI finds no template of the pool's name.
fn assert_no_template(outside: &Outside) {
    let gone = outside.aws_fails(
        "ec2",
        &[
            "describe-launch-templates",
            "--launch-template-names",
            TEMPLATE,
        ],
    );
    assert!(
        gone.contains("InvalidLaunchTemplateName.NotFoundException"),
        "{gone}"
    );
}

fn shared_config(url: &str, replicas: u32) -> String {
    config(
        url,
        "BOTTLEROCKET_x86_64_NVIDIA",
        &format!("  disk_size_gb = 80\n  time_slicing {{ replicas = {replicas} }}"),
    )
}

#[test]
fn eks_bottlerocket_pool_shares_through_its_launch_template() {
    let sb = sandbox::start_stack(Duration::ZERO);
    let Some(outside) = Outside::new(&sb.url) else {
        return;
    };
    let ws = Workspace::new(&shared_config(&sb.url, 4));
    ws.init();
    ws.apply();
    let p = &ws.output_json()["pool"]["value"];
    assert_eq!(p["resource_name"], "nvidia.com/gpu");
    assert_eq!(p["slices_per_node"], 4);
    assert_eq!(p["disk_size_gb"], 80);
    // The settings are in the template the node group names, the disk is its data volume, and
    // the twin's Bottlerocket nodes advertise what its host device plugin would.
    let (version, settings, volumes) = template_in_use(&outside);
    assert!(
        settings.contains("[settings.kubelet-device-plugins.nvidia]")
            && settings.contains("device-sharing-strategy = \"time-slicing\"")
            && settings.contains("replicas = 4"),
        "{settings}"
    );
    assert_eq!(volumes[0]["DeviceName"], "/dev/xvdb", "{volumes}");
    assert_eq!(volumes[0]["Ebs"]["VolumeSize"], 80, "{volumes}");
    let nodes = sb.nodes("eks", "sandbox-eks", "gpus");
    assert_eq!(nodes[0]["status"]["allocatable"]["nvidia.com/gpu"], "4");
    assert_eq!(ws.plan_exit_code().0, 0);

    // More replicas: a new template version rolled out in place, not a new node group.
    ws.write("main.tf", &shared_config(&sb.url, 8));
    let (code, plan) = ws.plan_exit_code();
    assert_eq!(code, 2, "{}", plan.text());
    assert!(
        plan.text().contains("1 to change, 0 to destroy"),
        "{}",
        plan.text()
    );
    ws.apply();
    let (rolled, settings, _) = template_in_use(&outside);
    assert_ne!(rolled, version);
    assert!(settings.contains("replicas = 8"), "{settings}");
    let nodes = sb.nodes("eks", "sandbox-eks", "gpus");
    assert_eq!(nodes[0]["status"]["allocatable"]["nvidia.com/gpu"], "8");
    assert_eq!(ws.plan_exit_code().0, 0);

    // Someone rolls the group to a version of their own, with a setting of theirs beside: the
    // plan shows the sharing and sets it back, and their setting stays.
    let theirs = format!(
        "[settings.kernel]\nlockdown = \"integrity\"\n\n{}",
        settings.replace("replicas = 8", "replicas = 2")
    );
    let created: Value = serde_json::from_str(
        &outside.aws_ec2(&[
            "create-launch-template-version",
            "--launch-template-name",
            TEMPLATE,
            "--source-version",
            &rolled,
            "--launch-template-data",
            &serde_json::json!({
                "UserData": base64::engine::general_purpose::STANDARD.encode(&theirs)
            })
            .to_string(),
        ]),
    )
    .unwrap();
    let theirs_version = created["LaunchTemplateVersion"]["VersionNumber"].to_string();
    outside.aws_eks(&[
        "update-nodegroup-version",
        "--cluster-name",
        "sandbox-eks",
        "--nodegroup-name",
        "gpus",
        "--launch-template",
        &format!("name={TEMPLATE},version={theirs_version}"),
    ]);
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while template_in_use(&outside).0 != theirs_version {
        assert!(
            std::time::Instant::now() < deadline,
            "the update never ended"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let (code, plan) = ws.plan_exit_code();
    assert_eq!(code, 2, "{}", plan.text());
    assert!(
        flat(&plan.text()).contains("replicas = 2 -> 8"),
        "{}",
        plan.text()
    );
    ws.apply();
    let (_, settings, _) = template_in_use(&outside);
    assert!(
        settings.contains("replicas = 8") && settings.contains("lockdown = \"integrity\""),
        "{settings}"
    );
    let nodes = sb.nodes("eks", "sandbox-eks", "gpus");
    assert_eq!(nodes[0]["status"]["allocatable"]["nvidia.com/gpu"], "8");
    assert_eq!(ws.plan_exit_code().0, 0);

    // Imported, the group reads as the same time-sliced pool.
    ws.ok(&["state", "rm", "fracgpu_nodepool.p"]);
    ws.ok(&[
        "import",
        "-no-color",
        "fracgpu_nodepool.p",
        "sandbox-eks:gpus",
    ]);
    let (code, plan) = ws.plan_exit_code();
    assert_eq!(code, 0, "{}", plan.text());

    // Destroyed, the template goes with the group.
    ws.ok(&["destroy", "-auto-approve", "-no-color"]);
    assert_eq!(sb.pools(), vec![]);
    assert_no_template(&outside);
}

/// A create EKS refuses leaves no launch template behind, and a throttled template call is
/// ridden out: nothing is left in the cloud without a state entry.
#[test]
fn eks_bottlerocket_create_cleans_up_and_rides_out_throttling() {
    let sb = sandbox::start(Duration::ZERO);
    let Some(outside) = Outside::new(&sb.url) else {
        return;
    };
    // A subnet EKS does not know: the template is made first, the node group refused.
    let refused = shared_config(&sb.url, 4).replace("subnet-0a1", "sn-0a1");
    let ws = Workspace::new(&refused);
    ws.init();
    let out = ws.run(&["apply", "-no-color", "-auto-approve", "-input=false"]);
    assert_eq!(out.code, 1, "{}", out.text());
    assert!(flat(&out.text()).contains("sn-0a1"), "{}", out.text());
    assert_eq!(sb.pools(), vec![]);
    assert_no_template(&outside);
    assert!(ws.show_json()["values"].is_null());

    // The first two template calls are throttled (EC2 and Auto Scaling share `POST /`; this pool
    // has no autoscaling, so the first POSTs there are the template's).
    sb.inject(serde_json::json!({
        "match": {"method": "POST", "path_contains": "/"},
        "count": 2,
        "kind": "429",
        "retry_after": 1
    }));
    ws.write("main.tf", &shared_config(&sb.url, 4));
    ws.apply();
    assert!(sb.armed().is_empty(), "{:?}", sb.armed());
    let (_, settings, _) = template_in_use(&outside);
    assert!(settings.contains("replicas = 4"), "{settings}");
    assert_eq!(ws.plan_exit_code().0, 0);
    ws.ok(&["destroy", "-auto-approve", "-no-color"]);
}
