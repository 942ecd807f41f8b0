//! The twin's cluster-autoscalers: pools made through the clouds' APIs, pending pods made through
//! each cluster's Kubernetes API, and the nodes that appear, with the decisions read back from
//! `GET /_sandbox/autoscaler`. The rule under test (issue 23): 10 pods of one slice on a pool of
//! 1-GPU nodes time-sliced 10 ways bring 1 node when the autoscaler is told what a node offers,
//! 10 (or the maximum) when it is not, and none when they ask for what no template offers or
//! select what no pool has.

use axum::http::{Method, StatusCode};
use sandbox::kube::KubeApi;
use serde_json::{Value, json};

use crate::support::*;

const TIME_SLICED_10: &str = "version: v1\nsharing:\n  timeSlicing:\n    resources:\n    - name: nvidia.com/gpu\n      replicas: 10\n";

async fn kube(s: &Srv, k: &KubeApi, cloud: &str, method: Method, path: &str, body: &Value) -> Resp {
    let cluster = format!("sandbox-{cloud}");
    let auth = format!("Bearer {}", k.token(cloud, &cluster).unwrap());
    let ctype = if method == Method::PATCH {
        "application/merge-patch+json"
    } else {
        "application/json"
    };
    s.call(
        method,
        &format!("/k8s/{cloud}/{cluster}{path}"),
        &[("authorization", &auth), ("content-type", ctype)],
        body.to_string().as_bytes(),
    )
    .await
}

/// Points the GPU operator's device plugin at a time-slicing config of 10 replicas, so nodes
/// that start from now on advertise 10 `nvidia.com/gpu` per GPU, as the tags will say.
async fn time_slice(s: &Srv, k: &KubeApi, cloud: &str) {
    let r = kube(
        s,
        k,
        cloud,
        Method::POST,
        "/api/v1/namespaces/gpu-operator/configmaps",
        &json!({"metadata": {"name": "time-slicing"}, "data": {"ts-10": TIME_SLICED_10}}),
    )
    .await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.text);
    let r = kube(s, k, cloud, Method::PATCH, "/apis/nvidia.com/v1/clusterpolicies/cluster-policy",
        &json!({"spec": {"devicePlugin": {"config": {"name": "time-slicing", "default": "ts-10"}}}})).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
}

/// `n` pods asking for `amount` of `resource`, tolerating every taint, selecting `selector`.
async fn pods(s: &Srv, k: &KubeApi, cloud: &str, n: usize, resource: &str, selector: Value) {
    static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    for _ in 0..n {
        let i = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let pod = json!({"metadata": {"name": format!("{}-{i}", resource.replace(['/', '.'], "-"))},
            "spec": {"containers": [{"name": "infer", "image": "registry.example/infer:1",
                "resources": {"limits": {resource: 1}}}],
                "nodeSelector": selector,
                "tolerations": [{"operator": "Exists"}]}});
        let r = kube(
            s,
            k,
            cloud,
            Method::POST,
            "/api/v1/namespaces/default/pods",
            &pod,
        )
        .await;
        assert_eq!(r.status, StatusCode::CREATED, "{}", r.text);
    }
}

async fn decisions(s: &Srv) -> Vec<Value> {
    let r = s.call(Method::GET, "/_sandbox/autoscaler", &[], b"").await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    r.body["decisions"].as_array().cloned().unwrap_or_default()
}

async fn aks_pool(s: &Srv, name: &str, max: u32, tags: Value) {
    let tok = s.azure_token().await;
    let r = s
        .arm(
            &tok,
            Method::PUT,
            &format!("{}/{name}?{API}", aks_pools("sandbox-aks")),
            Some(
                &json!({"properties": {"vmSize": "Standard_NC4as_T4_v3", "count": 0,
                "enableAutoScaling": true, "minCount": 0, "maxCount": max, "mode": "User",
                "tags": tags}}),
            ),
        )
        .await;
    assert!(r.status.is_success(), "{}", r.text);
    s.sb.settle();
    let r = s
        .arm(
            &tok,
            Method::GET,
            &format!("{}/{name}?{API}", aks_pools("sandbox-aks")),
            None,
        )
        .await;
    assert_eq!(
        r.body["properties"]["provisioningState"], "Succeeded",
        "{}",
        r.text
    );
}

async fn aks_count(s: &Srv, name: &str) -> Value {
    let tok = s.azure_token().await;
    let r = s
        .arm(
            &tok,
            Method::GET,
            &format!("{}/{name}?{API}", aks_pools("sandbox-aks")),
            None,
        )
        .await;
    r.body["properties"]["count"].clone()
}

#[tokio::test]
async fn aks_time_sliced_pool_scales_from_zero_by_slices() {
    let (s, k) = start_twin(0).await;
    time_slice(&s, &k, "aks").await;
    aks_pool(
        &s,
        "ts",
        10,
        json!({"k8s.io_cluster-autoscaler_node-template_resources_nvidia.com_gpu": "10"}),
    )
    .await;
    assert!(k.pool_node_names("aks", "sandbox-aks", "ts").is_empty());
    pods(
        &s,
        &k,
        "aks",
        10,
        "nvidia.com/gpu",
        json!({"kubernetes.azure.com/agentpool": "ts"}),
    )
    .await;
    assert_eq!(k.pool_node_names("aks", "sandbox-aks", "ts").len(), 1);
    assert_eq!(aks_count(&s, "ts").await, 1);
    let node = k
        .object(
            "aks",
            "sandbox-aks",
            "nodes",
            "",
            &k.pool_node_names("aks", "sandbox-aks", "ts")[0],
        )
        .unwrap();
    assert_eq!(node["status"]["allocatable"]["nvidia.com/gpu"], "10");
    let d = decisions(&s).await;
    let up: Vec<&Value> = d
        .iter()
        .filter(|d| d["reason"] == "TriggeredScaleUp")
        .collect();
    assert_eq!(up.len(), 1, "{d:?}");
    assert_eq!(up[0]["pool"], "ts");
    assert_eq!(up[0]["sizes"], json!([0, 1]));
}

#[tokio::test]
async fn aks_pool_without_a_template_scales_by_whole_gpus_up_to_its_maximum() {
    let (s, k) = start_twin(0).await;
    aks_pool(&s, "whole", 6, json!({})).await;
    pods(&s, &k, "aks", 10, "nvidia.com/gpu", json!({})).await;
    assert_eq!(k.pool_node_names("aks", "sandbox-aks", "whole").len(), 6);
    assert_eq!(aks_count(&s, "whole").await, 6);
    let d = decisions(&s).await;
    assert!(
        d.iter().any(|d| d["reason"] == "NotTriggerScaleUp"
            && d["message"]
                .as_str()
                .unwrap()
                .contains("whole: max node group size reached")),
        "{d:?}"
    );
}

#[tokio::test]
async fn aks_pods_no_template_can_take_bring_no_node() {
    let (s, k) = start_twin(0).await;
    aks_pool(
        &s,
        "ts",
        10,
        json!({"k8s.io_cluster-autoscaler_node-template_resources_nvidia.com_gpu": "10"}),
    )
    .await;
    // A renamed resource the template does not offer: upstream's "pod didn't trigger scale-up".
    pods(&s, &k, "aks", 3, "nvidia.com/gpu.shared", json!({})).await;
    // A selector no template matches (the pool's nodeLabels are not in the template: only tags are).
    pods(
        &s,
        &k,
        "aks",
        2,
        "nvidia.com/gpu",
        json!({"nvidia.com/device-plugin.config": "ts-10"}),
    )
    .await;
    assert!(k.pool_node_names("aks", "sandbox-aks", "ts").is_empty());
    let d = decisions(&s).await;
    let why: Vec<&str> = d
        .iter()
        .filter(|d| d["reason"] == "NotTriggerScaleUp")
        .map(|d| d["message"].as_str().unwrap())
        .collect();
    assert!(
        why.iter()
            .any(|m| m.contains("ts: Insufficient nvidia.com/gpu.shared")),
        "{why:?}"
    );
    assert!(
        why.iter()
            .any(|m| m.contains("ts: node(s) didn't match Pod's node affinity/selector")),
        "{why:?}"
    );
    assert!(!d.iter().any(|d| d["reason"] == "TriggeredScaleUp"));
    // The label tag puts it in the template: the next pod's write finds the pool.
    let tok = s.azure_token().await;
    let r = s.arm(&tok, Method::PUT, &format!("{}/ts?{API}", aks_pools("sandbox-aks")),
        Some(&json!({"properties": {"vmSize": "Standard_NC4as_T4_v3", "count": 0, "enableAutoScaling": true,
            "minCount": 0, "maxCount": 10, "mode": "User", "tags": {
                "k8s.io_cluster-autoscaler_node-template_resources_nvidia.com_gpu": "10",
                "k8s.io_cluster-autoscaler_node-template_label_nvidia.com_device-plugin.config": "ts-10"}}}))).await;
    assert!(r.status.is_success(), "{}", r.text);
    s.sb.settle();
    assert_eq!(k.pool_node_names("aks", "sandbox-aks", "ts").len(), 1);
}

#[tokio::test]
async fn eks_node_group_scales_from_its_auto_scaling_group_tags() {
    let (s, k) = start_twin(0).await;
    time_slice(&s, &k, "eks").await;
    let r = s.eks(Method::POST, "/clusters/sandbox-eks/node-groups", Some(&json!({
        "nodegroupName": "ts", "nodeRole": "arn:aws:iam::123456789012:role/n", "subnets": ["subnet-1"],
        "instanceTypes": ["g5.xlarge"], "amiType": "AL2023_x86_64_NVIDIA",
        "scalingConfig": {"minSize": 0, "maxSize": 10, "desiredSize": 0},
        "labels": {"team": "ml"},
        "taints": [{"key": "nvidia.com/gpu", "value": "true", "effect": "NO_SCHEDULE"}]}))).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    let asg = r.body["nodegroup"]["resources"]["autoScalingGroups"][0]["name"]
        .as_str()
        .unwrap()
        .to_string();
    s.sb.settle();
    // Before the tag: the instance type's one GPU per node. One pod brings one node...
    pods(&s, &k, "eks", 1, "nvidia.com/gpu", json!({"team": "ml"})).await;
    assert_eq!(k.pool_node_names("eks", "sandbox-eks", "ts").len(), 1);
    // ... and that node, time-sliced, takes nine more pods without another.
    let tag = |k: &str, v: &str| {
        format!(
            "Tags.member.1.ResourceId={asg}&Tags.member.1.ResourceType=auto-scaling-group&Tags.member.1.Key={k}&Tags.member.1.Value={v}&Tags.member.1.PropagateAtLaunch=false"
        )
    };
    let r = s
        .autoscaling(&format!(
            "Action=CreateOrUpdateTags&{}",
            tag(
                "k8s.io%2Fcluster-autoscaler%2Fnode-template%2Fresources%2Fnvidia.com%2Fgpu",
                "10"
            )
        ))
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    for i in 1..10 {
        let pod = json!({"metadata": {"name": format!("more-{i}")}, "spec": {"containers": [{"name": "c", "image": "i",
            "resources": {"limits": {"nvidia.com/gpu": 1}}}], "nodeSelector": {"team": "ml"},
            "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]}});
        let r = kube(
            &s,
            &k,
            "eks",
            Method::POST,
            "/api/v1/namespaces/default/pods",
            &pod,
        )
        .await;
        assert_eq!(r.status, StatusCode::CREATED, "{}", r.text);
    }
    assert_eq!(k.pool_node_names("eks", "sandbox-eks", "ts").len(), 1);
    // Ten more slices: the tag says a node offers 10, so one more node.
    pods(&s, &k, "eks", 10, "nvidia.com/gpu", json!({"team": "ml"})).await;
    assert_eq!(k.pool_node_names("eks", "sandbox-eks", "ts").len(), 2);
    let r = s
        .eks(Method::GET, "/clusters/sandbox-eks/node-groups/ts", None)
        .await;
    assert_eq!(r.body["nodegroup"]["scalingConfig"]["desiredSize"], 2);
    let r = s
        .autoscaling(&format!(
            "Action=DescribeAutoScalingGroups&AutoScalingGroupNames.member.1={asg}"
        ))
        .await;
    assert!(
        r.text.contains("<DesiredCapacity>2</DesiredCapacity>"),
        "{}",
        r.text
    );
    // Pods that do not tolerate the node group's taint (read from DescribeNodegroup) bring none.
    let pod = json!({"metadata": {"name": "intolerant"}, "spec": {"containers": [{"name": "c", "image": "i",
        "resources": {"limits": {"nvidia.com/gpu": 1}}}], "nodeSelector": {"team": "ml"}}});
    kube(
        &s,
        &k,
        "eks",
        Method::POST,
        "/api/v1/namespaces/default/pods",
        &pod,
    )
    .await;
    assert_eq!(k.pool_node_names("eks", "sandbox-eks", "ts").len(), 2);
    let d = decisions(&s).await;
    assert!(
        d.iter().any(|d| d["pods"] == json!(["default/intolerant"])
            && d["message"]
                .as_str()
                .unwrap()
                .contains("untolerated taint {nvidia.com/gpu}")),
        "{d:?}"
    );
}

#[tokio::test]
async fn gke_pool_scales_by_its_own_sharing() {
    let (s, k) = start_twin(0).await;
    let create = json!({"nodePool": {"name": "ts", "initialNodeCount": 0,
        "autoscaling": {"enabled": true, "totalMinNodeCount": 0, "totalMaxNodeCount": 5},
        "config": {"machineType": "n1-standard-4",
            "accelerators": [{"acceleratorCount": "1", "acceleratorType": "nvidia-tesla-t4",
                "gpuSharingConfig": {"gpuSharingStrategy": "TIME_SHARING", "maxSharedClientsPerGpu": 10}}]}}});
    let r = s
        .gke(
            Method::POST,
            &format!("{GKE_CLUSTER}/nodePools"),
            Some(&create),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    s.sb.settle();
    let sel = json!({"cloud.google.com/gke-gpu-sharing-strategy": "time-sharing"});
    pods(&s, &k, "gke", 10, "nvidia.com/gpu", sel).await;
    assert_eq!(k.pool_node_names("gke", "sandbox-gke", "ts").len(), 1);
    let d = decisions(&s).await;
    assert!(
        d.iter()
            .any(|d| d["cloud"] == "gke" && d["sizes"] == json!([0, 1])),
        "{d:?}"
    );
    // A partition size the pool does not have: no node.
    pods(
        &s,
        &k,
        "gke",
        1,
        "nvidia.com/gpu",
        json!({"cloud.google.com/gke-gpu-partition-size": "1g.5gb"}),
    )
    .await;
    assert_eq!(k.pool_node_names("gke", "sandbox-gke", "ts").len(), 1);
}
