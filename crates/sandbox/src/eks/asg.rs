//! The EC2 Auto Scaling group behind each managed node group: its name, its size (the node
//! group's scaling config, which is what EKS sets on it) and its tags, with the tags EKS puts on it
//! itself. The Auto Scaling API (`autoscaling.rs`) reads and writes these, the node group documents
//! name the group, and the twin's cluster-autoscaler reads the tags as node templates; so the model
//! stands apart from all three.
//!
//! Sources:
//! - One Auto Scaling group per managed node group, managed by EKS, named in DescribeNodegroup's
//!   `resources.autoScalingGroups` (EKS API reference, `NodegroupResources`; EKS user guide,
//!   "Simplify node lifecycle with managed node groups":
//!   https://docs.aws.amazon.com/eks/latest/userguide/managed-node-groups.html).
//! - EKS tags the group itself: "Nodes launched as part of a managed node group are automatically
//!   tagged for auto-discovery by the Kubernetes Cluster Autoscaler" (same page), i.e. the
//!   auto-discovery tags `k8s.io/cluster-autoscaler/enabled` and `k8s.io/cluster-autoscaler/<cluster>`
//!   (kubernetes/autoscaler cluster-autoscaler/cloudprovider/aws/README.md, "Auto-Discovery Setup");
//!   and `eks:cluster-name` / `eks:nodegroup-name`, "we automatically add them to every managed
//!   nodegroup" (kubernetes/autoscaler cluster-autoscaler/proposals/circumvent-tag-limit-aws.md,
//!   written by the EKS team). The two auto-discovery tags' values (`true`, `owned`) are the usual
//!   ones but were not confirmed in an EKS document; cluster-autoscaler's discovery
//!   (`asg:tag=<key>,<key>`) only checks that the keys exist.
//! - EKS does not copy the node group's own `tags` to the group (aws/containers-roadmap#608).
//! - Limits: 50 tags per group; keys 1..=128 characters, values 0..=256 (Amazon EC2 Auto Scaling
//!   API reference, `Tag`; botocore data/autoscaling/2011-01-01/service-2.json shapes TagKey, TagValue).
//! - The group's instances: as many as its desired capacity, each with an id (`i-` and 17
//!   hexadecimal digits) and the zone it runs in; the Node of each names it in `spec.providerID`
//!   as `aws:///<zone>/<instance id>`, which is how cluster-autoscaler's AWS provider matches
//!   Nodes to groups (kubernetes/autoscaler cluster-autoscaler/cloudprovider/aws,
//!   `buildInstanceRefFromAWS`), and the Node's name is the instance's private DNS name
//!   (`ip-<address>.ec2.internal`, EKS user guide). An instance terminated out of the group
//!   (TerminateInstanceInAutoScalingGroup) leaves for good: new ones get new ids.
//! - EKS launches the group from a launch template of its own, `eks-<node group uid>`, listed by
//!   EC2 like any other (EKS user guide, "Customize managed nodes with launch templates": EKS
//!   makes one whether or not the node group names one of the user's, copying the user's
//!   version into it); the group's mixed instances policy names it with the node group's
//!   instance types as overrides.

use std::collections::BTreeMap;

use super::launch_templates::{LaunchTemplate, LtData, LtVersion};
use super::world::{AsgTag, EksCluster, EksWorld, Nodegroup};
use crate::util::fnv1a;

/// Tags per Auto Scaling group (Amazon EC2 Auto Scaling quotas: "Tags per Auto Scaling group": 50).
pub(crate) const MAX_TAGS: usize = 50;
pub(crate) const MAX_KEY: usize = 128;
pub(crate) const MAX_VALUE: usize = 256;

/// The group's name, as DescribeNodegroup reports it: `eks-<nodegroup>-<uid>`.
pub(crate) fn asg_name(ng: &Nodegroup) -> String {
    format!("eks-{}-{}", ng.name, ng.uid)
}

/// The tags EKS puts on a node group's Auto Scaling group when it makes it.
pub(crate) fn eks_tags(cluster: &str, nodegroup: &str) -> BTreeMap<String, AsgTag> {
    let tag = |v: &str| AsgTag {
        value: v.to_string(),
        propagate_at_launch: true,
    };
    BTreeMap::from([
        ("eks:cluster-name".to_string(), tag(cluster)),
        ("eks:nodegroup-name".to_string(), tag(nodegroup)),
        ("k8s.io/cluster-autoscaler/enabled".to_string(), tag("true")),
        (format!("k8s.io/cluster-autoscaler/{cluster}"), tag("owned")),
    ])
}

impl Nodegroup {
    /// The group's tags now. A node group from a state file written before groups had tags has the
    /// ones EKS gave it.
    pub(crate) fn asg_tags(&self, cluster: &str) -> BTreeMap<String, AsgTag> {
        self.asg_tags
            .clone()
            .unwrap_or_else(|| eks_tags(cluster, &self.name))
    }

    /// The group's tags, to change them.
    pub(crate) fn asg_tags_mut(&mut self, cluster: &str) -> &mut BTreeMap<String, AsgTag> {
        let name = self.name.clone();
        self.asg_tags
            .get_or_insert_with(|| eks_tags(cluster, &name))
    }
}

/// The node group whose Auto Scaling group has this name, among a region's clusters: (cluster key,
/// node group name).
pub(crate) fn find_group<'a>(
    clusters: impl Iterator<Item = (&'a String, &'a EksCluster)>,
    region: &str,
    name: &str,
) -> Option<(String, String)> {
    for (key, c) in clusters.filter(|(_, c)| c.region == region) {
        if let Some(ng) = c.nodegroups.values().find(|ng| asg_name(ng) == name) {
            return Some((key.clone(), ng.name.clone()));
        }
    }
    None
}

/// The zones a group launches in: one per subnet, lettered in the region (the sandbox's subnets
/// carry no zone of their own).
pub(crate) fn zones(region: &str, ng: &Nodegroup) -> Vec<String> {
    (0..ng.spec.subnets.len().max(1))
        .map(|i| format!("{region}{}", (b'a' + (i % 6) as u8) as char))
        .collect()
}

/// One instance of a group.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Instance {
    pub(crate) id: String,
    pub(crate) zone: String,
    /// Its private DNS name, which is its Node's name.
    pub(crate) node_name: String,
}

impl Instance {
    /// What its Node carries in `spec.providerID`.
    pub(crate) fn provider_id(&self) -> String {
        format!("aws:///{}/{}", self.zone, self.id)
    }
}

/// The instance of slot `slot` of a group.
fn instance(region: &str, ng: &Nodegroup, zones: &[String], slot: u32) -> Instance {
    let h = fnv1a(&format!("{}/{slot}", ng.uid));
    let zone = zones[slot as usize % zones.len()].clone();
    let node_name = if region == "us-east-1" {
        format!(
            "ip-10-{}-{}-{}.ec2.internal",
            h % 256,
            (h >> 8) % 256,
            (h >> 16) % 250 + 4
        )
    } else {
        format!(
            "ip-10-{}-{}-{}.{region}.compute.internal",
            h % 256,
            (h >> 8) % 256,
            (h >> 16) % 250 + 4
        )
    };
    Instance {
        id: format!("i-0{:016x}", h >> 4),
        zone,
        node_name,
    }
}

/// The group's instances now: its desired capacity of them, the oldest first, the terminated
/// ones left out.
pub(crate) fn instances(region: &str, ng: &Nodegroup) -> Vec<Instance> {
    let zones = zones(region, ng);
    (0u32..)
        .filter(|slot| !ng.retired.contains(slot))
        .take(ng.spec.desired_size.max(0) as usize)
        .map(|slot| instance(region, ng, &zones, slot))
        .collect()
}

/// Takes one instance out of its group for good (its slot is not used again); false when the
/// group has no such instance.
pub(crate) fn retire(region: &str, ng: &mut Nodegroup, id: &str) -> bool {
    let zones = zones(region, ng);
    let slot = (0u32..)
        .filter(|slot| !ng.retired.contains(slot))
        .take(ng.spec.desired_size.max(0) as usize)
        .find(|slot| instance(region, ng, &zones, *slot).id == id);
    match slot {
        Some(s) => {
            ng.retired.push(s);
            true
        }
        None => false,
    }
}

/// The name of the launch template EKS makes for a node group.
pub(crate) fn eks_template_name(ng: &Nodegroup) -> String {
    format!("eks-{}", ng.uid)
}

/// Its id (stable for the node group).
pub(crate) fn eks_template_id(ng: &Nodegroup) -> String {
    format!("lt-0{:016x}", fnv1a(&ng.uid) >> 4)
}

/// The launch template EKS made for a node group, as EC2 shows it: one version, with the user
/// data of the user's template version the node group names, if any.
pub(crate) fn eks_template(region: &str, cluster: &str, ng: &Nodegroup) -> LaunchTemplate {
    LaunchTemplate {
        id: eks_template_id(ng),
        name: eks_template_name(ng),
        region: region.to_string(),
        created_at: ng.created_at,
        default_version: 1,
        versions: vec![LtVersion {
            number: 1,
            description: None,
            created_at: ng.created_at,
            data: LtData {
                user_data: ng
                    .spec
                    .launch_template
                    .as_ref()
                    .and_then(|t| t.user_data.clone()),
                block_devices: Vec::new(),
            },
        }],
        tags: vec![
            ("eks:cluster-name".into(), cluster.to_string()),
            ("eks:nodegroup-name".into(), ng.name.clone()),
        ],
        client_token: None,
    }
}

/// The launch templates EKS made for a region's node groups.
pub(crate) fn eks_templates<'a>(
    eks: &'a EksWorld,
    region: &'a str,
) -> impl Iterator<Item = LaunchTemplate> + 'a {
    eks.clusters
        .values()
        .filter(move |c| c.region == region)
        .flat_map(move |c| {
            c.nodegroups
                .values()
                .map(move |ng| eks_template(region, &c.name, ng))
        })
}
