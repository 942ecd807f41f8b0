//! What EKS shows: node group, update and cluster documents (restJson1, timestamps in epoch
//! seconds), and the nodes EKS creates for a node group with EKS's node labels, for the Kubernetes
//! twin.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::asg::asg_name;
use super::world::{EKS_VERSION, EksCluster, EksUpdate, NgLaunchTemplate, Nodegroup};
use crate::AWS_ACCOUNT;
use crate::catalog;
use crate::dates::epoch_secs;
use crate::nodes::{OsImage, PoolNodes, k8s_effect};
use crate::util::fnv1a;

/// The nodes EKS creates for a node group, with EKS's node labels.
pub(crate) fn pool_nodes(cluster: &str, region: &str, ng: &Nodegroup) -> PoolNodes {
    let instances = super::asg::instances(region, ng);
    let s = &ng.spec;
    let itype = s.instance_types.first().cloned().unwrap_or_default();
    let mut labels = BTreeMap::new();
    labels.insert("eks.amazonaws.com/nodegroup".to_string(), ng.name.clone());
    labels.insert(
        "eks.amazonaws.com/nodegroup-image".to_string(),
        format!("ami-0{:016x}", fnv1a(&s.ami_type) >> 4),
    );
    labels.insert(
        "eks.amazonaws.com/capacityType".to_string(),
        s.capacity_type.clone(),
    );
    labels.insert(
        "node.kubernetes.io/instance-type".to_string(),
        itype.clone(),
    );
    labels.insert("kubernetes.io/os".to_string(), "linux".to_string());
    for (k, v) in &s.labels {
        labels.insert(k.clone(), v.clone());
    }
    let gpu = catalog::aws_instance_type(&itype).and_then(|m| m.gpu);
    PoolNodes {
        cloud: "eks",
        cluster: cluster.to_string(),
        pool: ng.name.clone(),
        // A node group scaled to zero (desiredSize 0) has no nodes.
        node_count: instances.len() as u32,
        zones: instances.iter().map(|i| i.zone.clone()).collect(),
        instances: instances
            .iter()
            .map(|i| (i.node_name.clone(), i.provider_id()))
            .collect(),
        labels,
        taints: s
            .taints
            .iter()
            .map(|(k, v, e)| (k.clone(), v.clone(), k8s_effect(e).to_string()))
            .collect(),
        gpu_product: gpu.map(|(g, _)| g.product.to_string()),
        gpus_per_node: gpu.map_or(0, |(_, n)| n),
        gpu_memory_mib: gpu.map_or(0, |(g, _)| g.memory_mib),
        // EKS has no MIG field: MIG comes from the GPU operator's MIG manager, not the node group.
        mig_profile: None,
        mig_instances_per_gpu: 0,
        gke_sharing: None,
        os_image: Some(OsImage {
            name: os_image(&s.ami_type, &s.version),
            user_data: s.launch_template.as_ref().and_then(user_data),
        }),
    }
}

/// The user data a node of the group boots with, decoded as the instance reads it (EC2 holds it
/// base64-encoded; IMDS serves it decoded). Bottlerocket reads its settings there. EKS merges its
/// own bootstrap settings into a Bottlerocket template's TOML; the twin needs only the user's.
fn user_data(lt: &NgLaunchTemplate) -> Option<String> {
    use base64::Engine as _;
    let raw = base64::engine::general_purpose::STANDARD
        .decode(lt.user_data.as_deref()?.trim())
        .ok()?;
    Some(String::from_utf8_lossy(&raw).into_owned())
}

/// What a node of an AMI type reports as its OS image (`kubectl get nodes -o wide`); Bottlerocket
/// names its variant, e.g. `aws-k8s-1.33-nvidia`.
fn os_image(ami_type: &str, version: &str) -> String {
    if ami_type.starts_with("BOTTLEROCKET") {
        let nvidia = if ami_type.contains("NVIDIA") {
            "-nvidia"
        } else {
            ""
        };
        format!("Bottlerocket OS 1.51.0 (aws-k8s-{version}{nvidia})")
    } else if ami_type.starts_with("WINDOWS") {
        "Windows Server 2022 Datacenter".to_string()
    } else if ami_type.starts_with("AL2_") {
        "Amazon Linux 2".to_string()
    } else {
        "Amazon Linux 2023.9.20251117".to_string()
    }
}

fn ng_arn(c: &EksCluster, ng: &Nodegroup) -> String {
    format!(
        "arn:aws:eks:{}:{AWS_ACCOUNT}:nodegroup/{}/{}/{}",
        c.region, c.name, ng.name, ng.uid
    )
}

fn secs(ms: u64) -> Value {
    json!(epoch_secs(ms))
}

pub(crate) fn nodegroup_json(c: &EksCluster, ng: &Nodegroup) -> Value {
    let s = &ng.spec;
    let mut v = json!({
        "nodegroupName": ng.name,
        "nodegroupArn": ng_arn(c, ng),
        "clusterName": c.name,
        "version": s.version,
        "releaseVersion": s.release_version,
        "createdAt": secs(ng.created_at),
        "modifiedAt": secs(ng.modified_at),
        "status": ng.status,
        "capacityType": s.capacity_type,
        "scalingConfig": {"minSize": s.min_size, "maxSize": s.max_size, "desiredSize": s.desired_size},
        "instanceTypes": s.instance_types,
        "subnets": s.subnets,
        "amiType": s.ami_type,
        "nodeRole": s.node_role,
        "labels": s.labels,
        "taints": s.taints.iter().map(|(k, v, e)| json!({"key": k, "value": v, "effect": e})).collect::<Vec<_>>(),
        "resources": {"autoScalingGroups": [{"name": asg_name(ng)}]},
        "health": {"issues": ng.health_issues},
        "updateConfig": {"maxUnavailable": s.max_unavailable},
        "tags": s.tags,
    });
    if let Some(d) = s.disk_size {
        v["diskSize"] = json!(d);
    }
    if let Some(r) = &s.remote_access {
        v["remoteAccess"] = r.clone();
    }
    if let Some(lt) = &s.launch_template {
        v["launchTemplate"] = json!({"name": lt.name, "version": lt.version, "id": lt.id});
    }
    v
}

pub(super) fn update_json(u: &EksUpdate) -> Value {
    json!({
        "id": u.id,
        "status": u.status,
        "type": u.update_type,
        "params": u.params.iter().map(|(t, v)| json!({"type": t, "value": v})).collect::<Vec<_>>(),
        "createdAt": secs(u.created_at),
        "errors": u.errors,
    })
}

pub(super) fn cluster_json(c: &EksCluster) -> Value {
    json!({
        "name": c.name,
        "arn": format!("arn:aws:eks:{}:{AWS_ACCOUNT}:cluster/{}", c.region, c.name),
        "createdAt": secs(c.created_at),
        "version": EKS_VERSION,
        "endpoint": format!("https://{}.sandbox.eks.local", c.name),
        "roleArn": format!("arn:aws:iam::{AWS_ACCOUNT}:role/{}-cluster-role", c.name),
        "resourcesVpcConfig": {"subnetIds": ["subnet-0sandbox1", "subnet-0sandbox2"], "securityGroupIds": [], "vpcId": "vpc-0sandbox", "endpointPublicAccess": true, "endpointPrivateAccess": false},
        "kubernetesNetworkConfig": {"serviceIpv4Cidr": "10.100.0.0/16", "ipFamily": "ipv4"},
        "status": "ACTIVE",
        "certificateAuthority": {"data": ""},
        "platformVersion": "eks.10",
        "tags": {},
    })
}
