//! The node template an autoscaled pool tells its cluster autoscaler, through the real terraform
//! against the sandbox over HTTP: on AKS the agent pool's tags (which AKS copies to the scale set
//! cluster-autoscaler reads) say what a node offers once its device plugin runs, its labels and
//! its taints; they are set on create, read back into state, set back when changed outside
//! terraform (drift that `plan -detailed-exitcode` sees), removed when the pool stops
//! autoscaling, and other tags are left alone. GKE's autoscaler counts shared GPUs itself: its
//! pools carry no template.

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::{Value, json};

use crate::common::outside::Outside;
use crate::common::sandbox::{self, Running};
use crate::common::terraform::{REQUIRED_PROVIDERS, Workspace};

const RESOURCES: &str = "k8s.io_cluster-autoscaler_node-template_resources_";
const LABEL: &str = "k8s.io_cluster-autoscaler_node-template_label_";
const TAINT: &str = "k8s.io_cluster-autoscaler_node-template_taint_";

/// One A100 per node, time-sliced four ways; autoscaled from zero, or a fixed node when `fixed`.
fn config(url: &str, fixed: bool, labels: usize) -> String {
    let scaling = if fixed {
        "  node_count   = 1\n".to_string()
    } else {
        "  autoscaling {\n    min_nodes = 0\n    max_nodes = 3\n  }\n".to_string()
    };
    let labels: String = (0..labels).map(|i| format!("    l{i} = \"v\"\n")).collect();
    format!(
        "{REQUIRED_PROVIDERS}\nprovider \"fracgpu\" {{\n  sandbox = \"{url}\"\n}}\n\
         resource \"fracgpu_nodepool\" \"a100\" {{\n  name         = \"a100ts\"\n  \
         machine_type = \"Standard_NC24ads_A100_v4\"\n{scaling}  labels = {{\n    team = \"ml\"\n{labels}  }}\n  \
         aks {{\n    resource_group = \"sandbox-rg\"\n    cluster_name   = \"sandbox-aks\"\n  }}\n  \
         time_slicing {{ replicas = 4 }}\n}}\n\
         resource \"fracgpu_nodepool\" \"l4\" {{\n  name         = \"l4ts\"\n  \
         machine_type = \"g2-standard-4\"\n  autoscaling {{\n    min_nodes = 0\n    max_nodes = 3\n  }}\n  \
         gke {{\n    location = \"us-central1\"\n    cluster  = \"sandbox-gke\"\n  }}\n  \
         time_slicing {{ replicas = 4 }}\n}}\n"
    )
}

fn tags(sb: &Running, pool: &str) -> BTreeMap<String, String> {
    serde_json::from_value(sb.pool(pool)["properties"]["tags"].clone()).unwrap_or_default()
}

fn template(tags: &BTreeMap<String, String>) -> BTreeMap<String, String> {
    tags.iter()
        .filter(|(k, _)| k.starts_with("k8s.io_cluster-autoscaler_node-template_"))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

pub(crate) fn state_of(ws: &Workspace, name: &str) -> Value {
    ws.show_json()["values"]["root_module"]["resources"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|r| r["address"] == format!("fracgpu_nodepool.{name}"))
        .map(|r| r["values"].clone())
        .unwrap_or(Value::Null)
}

#[test]
fn an_autoscaled_aks_pool_tells_cluster_autoscaler_its_slices_labels_and_taints() {
    let sb = sandbox::start(Duration::ZERO);
    // curl speaks ARM for the change made outside terraform.
    let Some(outside) = Outside::new(&sb.url) else {
        return;
    };
    let ws = Workspace::new(&config(&sb.url, false, 0));
    ws.init();
    ws.apply();

    let t = template(&tags(&sb, "a100ts"));
    assert_eq!(t[&format!("{RESOURCES}nvidia.com_gpu")], "4", "{t:?}");
    assert_eq!(t[&format!("{LABEL}team")], "ml");
    assert_eq!(
        t[&format!("{LABEL}nvidia.com_device-plugin.config")],
        "fracgpu-a100ts"
    );
    assert_eq!(t[&format!("{LABEL}fracgpu.dev_sharing")], "time-sliced-4");
    assert_eq!(t[&format!("{TAINT}nvidia.com_gpu")], "Present:NoSchedule");
    let state = state_of(&ws, "a100");
    assert_eq!(
        serde_json::from_value::<BTreeMap<String, String>>(
            state["autoscaler_node_template"].clone()
        )
        .unwrap(),
        t
    );
    assert_eq!(state_of(&ws, "l4")["autoscaler_node_template"], json!({}));
    let (code, plan) = ws.plan_exit_code();
    assert_eq!(code, 0, "the plan is empty:\n{}", plan.text());

    // Someone drops the resources tag and adds a stale one, with ARM's API: the plan sees it and
    // the apply sets the template back, keeping the provider's other tag.
    let mut props = sb.pool("a100ts")["properties"].clone();
    let mut changed = tags(&sb, "a100ts");
    changed.remove(&format!("{RESOURCES}nvidia.com_gpu"));
    changed.insert(format!("{LABEL}stale"), "x".into());
    props["tags"] = json!(changed);
    for read_only in [
        "provisioningState",
        "currentOrchestratorVersion",
        "nodeImageVersion",
    ] {
        props.as_object_mut().unwrap().remove(read_only);
    }
    outside.arm_put_pool("a100ts", props);
    sb.sandbox.settle();
    let (code, plan) = ws.plan_exit_code();
    assert_eq!(code, 2, "drift shows:\n{}", plan.text());
    assert!(
        plan.stdout
            .contains("fracgpu_nodepool.a100 will be updated in-place"),
        "{}",
        plan.stdout
    );
    ws.apply();
    let after = tags(&sb, "a100ts");
    assert_eq!(template(&after), t);
    assert!(after.contains_key("fracgpu-cloud-defaults"), "{after:?}");

    // A fixed pool needs no template: its tags go, the provider's own stays.
    ws.write("main.tf", &config(&sb.url, true, 0));
    ws.apply();
    let fixed = tags(&sb, "a100ts");
    assert!(template(&fixed).is_empty(), "{fixed:?}");
    assert!(fixed.contains_key("fracgpu-cloud-defaults"), "{fixed:?}");
    assert_eq!(state_of(&ws, "a100")["autoscaler_node_template"], json!({}));
    let (code, plan) = ws.plan_exit_code();
    assert_eq!(code, 0, "the plan is empty:\n{}", plan.text());
}

/// Azure allows 50 tags on a resource: an autoscaled pool whose labels and taints need more is
/// refused at plan time, naming `labels`, before anything is created.
#[test]
fn an_autoscaled_aks_pool_over_azures_tag_limit_is_refused_at_plan_time() {
    let sb = sandbox::start(Duration::ZERO);
    let ws = Workspace::new(&config(&sb.url, false, 48));
    ws.init();
    let out = ws.run(&["plan", "-no-color", "-input=false"]);
    assert_ne!(out.code, 0, "{}", out.text());
    let text = out.text();
    assert!(
        text.contains("Too many labels and taints for an autoscaled AKS pool"),
        "{text}"
    );
    assert!(text.contains("labels"), "{text}");
    assert!(text.contains("fixed node_count"), "{text}");
    assert!(sb.pools().iter().all(|(_, _, n)| n != "a100ts"));
    // As a fixed pool it fits.
    ws.write("main.tf", &config(&sb.url, true, 48));
    let out = ws.run(&["plan", "-no-color", "-input=false"]);
    assert_eq!(out.code, 0, "{}", out.text());
}

const EKS_PREFIX: &str = "k8s.io/cluster-autoscaler/node-template/";

fn eks_config(url: &str) -> String {
    format!(
        "{REQUIRED_PROVIDERS}\nprovider \"fracgpu\" {{\n  sandbox = \"{url}\"\n}}\n\
         resource \"fracgpu_nodepool\" \"t4\" {{\n  name         = \"t4auto\"\n  \
         machine_type = \"g4dn.xlarge\"\n  autoscaling {{\n    min_nodes = 0\n    max_nodes = 3\n  }}\n  \
         eks {{\n    cluster_name  = \"sandbox-eks\"\n    \
         node_role_arn = \"arn:aws:iam::123456789012:role/gpu-nodes\"\n    \
         subnet_ids    = [\"subnet-0a1\"]\n  }}\n  time_slicing {{ replicas = 10 }}\n}}\n"
    )
}

/// EKS does not copy a node group's tags to its Auto Scaling group: the provider tags the group,
/// which the aws CLI reads back; a tag deleted with the CLI is drift the next apply repairs.
#[test]
fn an_autoscaled_eks_group_carries_its_template_on_its_auto_scaling_group() {
    let sb = sandbox::start(Duration::ZERO);
    let Some(outside) = Outside::new(&sb.url) else {
        return;
    };
    let ws = Workspace::new(&eks_config(&sb.url));
    ws.init();
    ws.apply();
    let group: Value = serde_json::from_str(&outside.aws_eks(&[
        "describe-nodegroup",
        "--cluster-name",
        "sandbox-eks",
        "--nodegroup-name",
        "t4auto",
    ]))
    .unwrap();
    let asg = group["nodegroup"]["resources"]["autoScalingGroups"][0]["name"]
        .as_str()
        .expect("the node group names its Auto Scaling group")
        .to_string();
    let tags = |outside: &Outside| -> BTreeMap<String, String> {
        let out: Value = serde_json::from_str(&outside.aws_autoscaling(&[
            "describe-tags",
            "--filters",
            &format!("Name=auto-scaling-group,Values={asg}"),
        ]))
        .unwrap();
        out["Tags"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| {
                (
                    t["Key"].as_str().unwrap().to_string(),
                    t["Value"].as_str().unwrap().to_string(),
                )
            })
            .collect()
    };
    let resource = format!("{EKS_PREFIX}resources/nvidia.com/gpu");
    let on_group = tags(&outside);
    assert_eq!(on_group[&resource], "10", "{on_group:?}");
    assert_eq!(
        on_group[&format!("{EKS_PREFIX}label/eks.amazonaws.com/nodegroup")],
        "t4auto"
    );
    assert_eq!(
        on_group[&format!("{EKS_PREFIX}taint/nvidia.com/gpu")],
        "Present:NoSchedule"
    );
    assert_eq!(
        on_group["eks:nodegroup-name"], "t4auto",
        "EKS's own tags stay"
    );
    let state: BTreeMap<String, String> =
        serde_json::from_value(state_of(&ws, "t4")["autoscaler_node_template"].clone()).unwrap();
    assert_eq!(
        state,
        on_group
            .iter()
            .filter(|(k, _)| k.starts_with(EKS_PREFIX))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect::<BTreeMap<_, _>>()
    );
    let (code, plan) = ws.plan_exit_code();
    assert_eq!(code, 0, "the plan is empty:\n{}", plan.text());

    outside.aws_autoscaling(&[
        "delete-tags",
        "--tags",
        &format!("ResourceId={asg},ResourceType=auto-scaling-group,Key={resource}"),
    ]);
    let (code, plan) = ws.plan_exit_code();
    assert_eq!(code, 2, "drift shows:\n{}", plan.text());
    assert!(
        plan.stdout
            .contains("fracgpu_nodepool.t4 will be updated in-place"),
        "{}",
        plan.stdout
    );
    ws.apply();
    assert_eq!(tags(&outside)[&resource], "10");
    ws.ok(&["destroy", "-auto-approve", "-input=false"]);
    let gone: Value = serde_json::from_str(&outside.aws_autoscaling(&[
        "describe-auto-scaling-groups",
        "--auto-scaling-group-names",
        &asg,
    ]))
    .unwrap();
    assert_eq!(
        gone["AutoScalingGroups"],
        json!([]),
        "the group went with its node group"
    );
}

/// One pool per cloud, one GPU per node shared ten ways, autoscaled from zero; on AKS and EKS the
/// device plugin config delivered to the cluster's GPU operator.
fn every_cloud(url: &str, kubeconfigs: &BTreeMap<&str, String>) -> String {
    let mut out =
        format!("{REQUIRED_PROVIDERS}\nprovider \"fracgpu\" {{\n  sandbox = \"{url}\"\n}}\n");
    let pools = [
        (
            "aks",
            "Standard_NC4as_T4_v3",
            "aks {\n    resource_group = \"sandbox-rg\"\n    cluster_name   = \"sandbox-aks\"\n  }",
        ),
        (
            "gke",
            "g2-standard-4",
            "gke {\n    location = \"us-central1\"\n    cluster  = \"sandbox-gke\"\n  }",
        ),
        (
            "eks",
            "g4dn.xlarge",
            "eks {\n    cluster_name  = \"sandbox-eks\"\n    node_role_arn = \"arn:aws:iam::123456789012:role/gpu-nodes\"\n    subnet_ids    = [\"subnet-0a1\"]\n  }",
        ),
    ];
    for (cloud, machine, block) in pools {
        out.push_str(&format!(
            "\nresource \"fracgpu_nodepool\" \"{cloud}\" {{\n  name         = \"zero{cloud}\"\n  \
             machine_type = \"{machine}\"\n  autoscaling {{\n    min_nodes = 0\n    max_nodes = 5\n  }}\n  \
             {block}\n  time_slicing {{ replicas = 10 }}\n}}\n"
        ));
        if let Some(kubeconfig) = kubeconfigs.get(cloud) {
            out.push_str(&format!(
                "\nresource \"fracgpu_device_plugin_config\" \"{cloud}\" {{\n  \
                 kubernetes {{\n    config_path = \"{kubeconfig}\"\n  }}\n  \
                 default_config = \"all\"\n  config {{ name = \"all\" }}\n  config {{\n    \
                 name = fracgpu_nodepool.{cloud}.device_plugin_config_name\n    \
                 yaml = fracgpu_nodepool.{cloud}.device_plugin_config\n  }}\n}}\n"
            ));
        }
    }
    out
}

/// `n` pending pods of one slice each, placed as the pool's computed attributes say.
pub(crate) fn pods(pool: &Value, n: usize) -> String {
    (0..n)
        .map(|i| {
            json!({
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": format!("slice-{i}"), "namespace": "default"},
                "spec": {
                    "nodeSelector": pool["node_selector"],
                    "tolerations": pool["tolerations"],
                    "containers": [{
                        "name": "model",
                        "image": "registry.example/model:1",
                        "resources": {"limits": {pool["resource_name"].as_str().unwrap(): "1"}}
                    }]
                }
            })
            .to_string()
        })
        .collect::<Vec<_>>()
        .join("\n---\n")
}

/// `n` pending pods of one slice on `pool`, applied with kubectl to the cluster of `kubeconfig`.
fn apply_pods(kubectl: &std::path::Path, kubeconfig: &std::path::Path, pool: &Value, n: usize) {
    kubectl_apply(kubectl, kubeconfig, &pods(pool, n));
}

/// The twin's cluster-autoscalers read what the real ones read: ten pending pods of one slice on
/// a pool of one GPU x ten replicas at zero nodes bring one node, on every cloud, and the
/// autoscaler says why.
#[test]
fn shared_pools_scale_from_zero_by_slices_on_every_cloud() {
    let Some(kubectl) = testkit::tools::require(testkit::tools::Tool::Kubectl) else {
        return;
    };
    let stack = sandbox::start_stack(Duration::ZERO);
    let kubeconfigs: BTreeMap<&str, String> = ["aks", "eks"]
        .into_iter()
        .map(|c| {
            let cluster = format!("sandbox-{c}");
            (c, stack.kubeconfig(c, &cluster).display().to_string())
        })
        .collect();
    let ws = Workspace::new(&every_cloud(&stack.url, &kubeconfigs));
    ws.init();
    ws.apply();
    for cloud in ["aks", "gke", "eks"] {
        let cluster = format!("sandbox-{cloud}");
        let pool_name = format!("zero{cloud}");
        assert!(
            stack.nodes(cloud, &cluster, &pool_name).is_empty(),
            "{cloud}: no node before any pod"
        );
        let pool = state_of(&ws, cloud);
        assert_eq!(pool["slices_per_node"], 10);
        apply_pods(&kubectl, &stack.kubeconfig(cloud, &cluster), &pool, 10);
        let nodes = stack.nodes(cloud, &cluster, &pool_name);
        assert_eq!(
            nodes.len(),
            1,
            "{cloud}: ten slices fit one node: {nodes:#?}"
        );
        let log = get_json(&format!("{}/_sandbox/autoscaler", stack.url));
        let decision = log["decisions"]
            .as_array()
            .unwrap()
            .iter()
            .rev()
            .find(|d| d["cloud"] == cloud && d["reason"] == "TriggeredScaleUp")
            .unwrap_or_else(|| panic!("{cloud}: a scale-up is recorded: {log:#}"));
        assert!(
            decision.to_string().contains(&pool_name),
            "{cloud}: {decision:#}"
        );
    }
    // The autoscaler's nodes are no drift: the pools' bounds are what the configuration says.
    let (code, plan) = ws.plan_exit_code();
    assert_eq!(code, 0, "the plan is empty:\n{}", plan.text());
}

/// Applies one manifest with kubectl to the cluster of `kubeconfig`.
pub(crate) fn kubectl_apply(
    kubectl: &std::path::Path,
    kubeconfig: &std::path::Path,
    manifest: &str,
) {
    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(file.path(), manifest).unwrap();
    let out = std::process::Command::new(kubectl)
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(["apply", "-f"])
        .arg(file.path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "kubectl apply: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The twin's autoscaler decisions on one cloud with this reason, oldest first.
fn decisions(stack: &sandbox::RunningStack, cloud: &str, reason: &str) -> Vec<Value> {
    get_json(&format!("{}/_sandbox/autoscaler", stack.url))["decisions"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|d| d["cloud"] == cloud && d["reason"] == reason)
        .cloned()
        .collect()
}

/// Pods created one request at a time, as a user runs `kubectl apply` for each, with
/// cluster-autoscaler's own waits for more pods (2 s, and 30 s for pods that request
/// `nvidia.com/gpu`): ten pods of one slice on a pool of one GPU x ten replicas bring one node
/// once the oldest is 30 s old, the ten in one scale-up, and an eleventh brings a second 30 s
/// after it was created. The three clouds' pods are interleaved, so the three waits overlap.
#[test]
fn pods_created_one_at_a_time_bring_the_nodes_cluster_autoscaler_would() {
    let Some(kubectl) = testkit::tools::require(testkit::tools::Tool::Kubectl) else {
        return;
    };
    let stack = sandbox::start_stack_with(::sandbox::Config {
        op_time: Duration::from_millis(500),
        pod_buffers: ::sandbox::PodBuffers::UPSTREAM,
        ..::sandbox::Config::default()
    });
    let kubeconfigs: BTreeMap<&str, String> = ["aks", "eks"]
        .into_iter()
        .map(|c| {
            let cluster = format!("sandbox-{c}");
            (c, stack.kubeconfig(c, &cluster).display().to_string())
        })
        .collect();
    let ws = Workspace::new(&every_cloud(&stack.url, &kubeconfigs));
    ws.init();
    ws.apply();
    let clouds = ["aks", "gke", "eks"];
    let manifests: BTreeMap<&str, Vec<String>> = clouds
        .iter()
        .map(|c| {
            let docs = pods(&state_of(&ws, c), 11);
            (*c, docs.split("\n---\n").map(str::to_string).collect())
        })
        .collect();
    let kc = |cloud: &str| stack.kubeconfig(cloud, &format!("sandbox-{cloud}"));
    let nodes = |cloud: &str| {
        stack
            .nodes(cloud, &format!("sandbox-{cloud}"), &format!("zero{cloud}"))
            .len()
    };
    let wait_for = |cloud: &str, n: usize| {
        let start = std::time::Instant::now();
        while nodes(cloud) < n && start.elapsed() < Duration::from_secs(90) {
            std::thread::sleep(Duration::from_millis(200));
        }
    };
    let t0 = dates_now_ms();
    // Interleaved: the first pod of each cloud, then the second of each, and so on.
    let interleaved = (0..10).flat_map(|i| clouds.map(|c| (c, &manifests[c][i])));
    for (cloud, manifest) in interleaved {
        kubectl_apply(&kubectl, &kc(cloud), manifest);
    }
    let created_in = dates_now_ms() - t0;
    for cloud in clouds {
        assert_eq!(
            nodes(cloud),
            0,
            "{cloud}: no node while the autoscaler waits for more pods (the 30 pods took {created_in} ms)"
        );
        let waits = decisions(&stack, cloud, "ScaleUpInCooldown");
        assert!(!waits.is_empty(), "{cloud}: the wait is in the log");
    }
    for cloud in clouds {
        wait_for(cloud, 1);
        assert_eq!(nodes(cloud), 1, "{cloud}: ten slices bring one node");
        let ups = decisions(&stack, cloud, "TriggeredScaleUp");
        assert_eq!(ups.len(), 1, "{cloud}: one scale-up: {ups:#?}");
        assert_eq!(ups[0]["pods"].as_array().map(Vec::len), Some(10), "{cloud}");
        assert_eq!(ups[0]["sizes"], json!([0, 1]), "{cloud}");
        // The oldest pod's creationTimestamp is in whole seconds: 30 s after it is at least
        // 29 s after the first request.
        let at = ups[0]["at"].as_u64().unwrap();
        assert!(
            at >= t0 + 29_000,
            "{cloud}: scaled {} ms after the first pod",
            at - t0
        );
    }
    for cloud in clouds {
        kubectl_apply(&kubectl, &kc(cloud), &manifests[cloud][10]);
        assert_eq!(
            nodes(cloud),
            1,
            "{cloud}: the eleventh pod is waited for too"
        );
    }
    for cloud in clouds {
        wait_for(cloud, 2);
        assert_eq!(
            nodes(cloud),
            2,
            "{cloud}: the eleventh slice brings a second node"
        );
        let ups = decisions(&stack, cloud, "TriggeredScaleUp");
        assert_eq!(ups.len(), 2, "{cloud}: {ups:#?}");
        assert_eq!(ups[1]["sizes"], json!([1, 2]), "{cloud}");
    }
}

fn dates_now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

fn get_json(url: &str) -> Value {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async { reqwest::get(url).await.unwrap().json().await.unwrap() })
}

/// A Bottlerocket node group scales from zero the same way: the template on its Auto Scaling group
/// says ten slices, so ten pending pods bring one node, whose host device plugin (set up by the
/// launch template's settings, with no GPU operator config at all) advertises the ten.
#[test]
fn a_bottlerocket_group_scales_from_zero_by_slices() {
    let Some(kubectl) = testkit::tools::require(testkit::tools::Tool::Kubectl) else {
        return;
    };
    let stack = sandbox::start_stack(Duration::ZERO);
    let config = format!(
        "{REQUIRED_PROVIDERS}\nprovider \"fracgpu\" {{\n  sandbox = \"{}\"\n}}\n\n\
         resource \"fracgpu_nodepool\" \"br\" {{\n  name         = \"zerobr\"\n  \
         machine_type = \"g4dn.xlarge\"\n  autoscaling {{\n    min_nodes = 0\n    max_nodes = 5\n  }}\n  \
         eks {{\n    cluster_name  = \"sandbox-eks\"\n    \
         node_role_arn = \"arn:aws:iam::123456789012:role/gpu-nodes\"\n    \
         subnet_ids    = [\"subnet-0a1\"]\n    ami_type      = \"BOTTLEROCKET_x86_64_NVIDIA\"\n  }}\n  \
         time_slicing {{ replicas = 10 }}\n}}\n",
        stack.url
    );
    let ws = Workspace::new(&config);
    ws.init();
    ws.apply();
    assert!(stack.nodes("eks", "sandbox-eks", "zerobr").is_empty());
    let pool = state_of(&ws, "br");
    apply_pods(&kubectl, &stack.kubeconfig("eks", "sandbox-eks"), &pool, 10);
    let nodes = stack.nodes("eks", "sandbox-eks", "zerobr");
    assert_eq!(nodes.len(), 1, "ten slices fit one node: {nodes:#?}");
    assert_eq!(nodes[0]["status"]["allocatable"]["nvidia.com/gpu"], "10");
    let (code, plan) = ws.plan_exit_code();
    assert_eq!(code, 0, "the plan is empty:\n{}", plan.text());
}
