//! The node template cluster-autoscaler reads for an EKS node group that has no node to copy
//! (scale from zero): tags on the Auto Scaling group EKS made for the group, named in
//! DescribeNodegroup's `resources.autoScalingGroups`. EKS does not copy a node group's tags to it
//! (aws/containers-roadmap#608), so the provider tags the group itself, with the Auto Scaling API.
//!
//! cluster-autoscaler's AWS provider (kubernetes/autoscaler
//! `cluster-autoscaler/cloudprovider/aws/aws_manager.go`, `buildNodeFromTemplate`) builds the
//! template node from the instance type (its GPUs as `nvidia.com/gpu`) and the group's tags:
//! - `k8s.io/cluster-autoscaler/node-template/resources/<resource>` = a quantity, which replaces
//!   the instance type's value (extractAllocatableResourcesFromAsg);
//! - `.../label/<key>` = the label's value (extractLabelsFromAsg);
//! - `.../taint/<key>` = `<value>:<effect>` (extractTaintsFromAsg).
//!
//! It also reads a managed node group's labels and taints through DescribeNodegroup, but only for
//! a group that has never had a node (its README, on `eks:DescribeNodegroup`), so the labels and
//! taints are written as tags too. The tags under the prefix are the provider's on the groups it
//! manages: others under it are drift, removed by the next apply; tags outside it are left alone.

use std::collections::{BTreeMap, HashMap};

use aws_sdk_autoscaling::types::Tag;
use aws_sdk_eks::types::Nodegroup;
use tfplugin::{AttrPath, Diagnostic};

use super::client::EksClient;
use crate::cloud::error::CloudError;
use crate::cloud::pool::NodeTemplate;
use crate::operation::OpCtx;

const PREFIX: &str = "k8s.io/cluster-autoscaler/node-template/";
/// Auto Scaling's limits (API reference, `Tag`): 50 tags on a group, keys of at most 128
/// characters. EKS puts four of its own on the group (`eks:cluster-name`, `eks:nodegroup-name`,
/// `k8s.io/cluster-autoscaler/enabled`, `k8s.io/cluster-autoscaler/<cluster>`).
const MAX_TAGS: usize = 50 - 4;
const MAX_KEY: usize = 128;
/// Group names one DescribeAutoScalingGroups may name (its `MaxRecords` is at most 100).
const NAMES_PER_DESCRIBE: usize = 50;
/// DescribeAutoScalingGroups calls of one refresh in flight: Auto Scaling publishes no read
/// rate either, and four covers 200 groups in one round trip.
const TEMPLATE_DESCRIBES_IN_FLIGHT: usize = 4;

/// The template's tags.
fn tags(t: &NodeTemplate<'_>) -> BTreeMap<String, String> {
    let mut tags = BTreeMap::new();
    for (resource, n) in t.resources {
        tags.insert(format!("{PREFIX}resources/{resource}"), n.to_string());
    }
    for (k, v) in t.labels {
        tags.insert(format!("{PREFIX}label/{k}"), v.clone());
    }
    for taint in t.taints {
        tags.insert(
            format!("{PREFIX}taint/{}", taint.key),
            format!("{}:{}", taint.value, taint.effect),
        );
    }
    tags
}

/// The template's tags, or why the group cannot carry them.
pub(super) fn checked_tags(t: &NodeTemplate<'_>) -> Result<BTreeMap<String, String>, Diagnostic> {
    let tags = tags(t);
    let refuse = |detail: String| {
        Err(Diagnostic::error(
            "Labels and taints an Auto Scaling group cannot carry",
            detail,
        )
        .at(AttrPath::attr("labels")))
    };
    if tags.len() > MAX_TAGS {
        return refuse(format!(
            "An autoscaled EKS pool tells cluster-autoscaler what a node offers, and which labels \
             and taints it carries, in tags on the node group's Auto Scaling group: {} for this \
             pool, and the group takes {MAX_TAGS} beside the ones EKS sets. Use fewer labels or \
             taints, or a fixed node_count.",
            tags.len()
        ));
    }
    if let Some(k) = tags.keys().find(|k| k.chars().count() > MAX_KEY) {
        return refuse(format!(
            "The tag {k} is longer than the {MAX_KEY} characters Auto Scaling allows in a tag \
             key. Use a shorter label or taint key, or a fixed node_count."
        ));
    }
    Ok(tags)
}

/// The node group's Auto Scaling groups (one for a managed node group).
pub(super) fn asg_names(ng: &Nodegroup) -> Vec<String> {
    ng.resources()
        .map(|r| {
            r.auto_scaling_groups()
                .iter()
                .filter_map(|g| g.name().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

impl EksClient {
    /// The template tags of each named group that exists, by name, in as few
    /// DescribeAutoScalingGroups calls as the API allows, those of different names at once (a
    /// refresh of 200 node groups waits one round trip for their templates, not four).
    pub(super) async fn templates(
        &self,
        region: &str,
        names: &[String],
        ctx: &OpCtx,
    ) -> Result<HashMap<String, BTreeMap<String, String>>, CloudError> {
        use futures_util::stream::{self, StreamExt, TryStreamExt};
        if names.is_empty() {
            return Ok(HashMap::new());
        }
        let client = &self.asg_client(region)?;
        let chunks: Vec<HashMap<String, BTreeMap<String, String>>> =
            stream::iter(names.chunks(NAMES_PER_DESCRIBE).map(<[String]>::to_vec))
                .map(|chunk| async move { self.templates_of_chunk(client, &chunk, ctx).await })
                .buffer_unordered(TEMPLATE_DESCRIBES_IN_FLIGHT)
                .try_collect()
                .await?;
        Ok(chunks.into_iter().flatten().collect())
    }

    /// One DescribeAutoScalingGroups of at most [`NAMES_PER_DESCRIBE`] names, every page.
    async fn templates_of_chunk(
        &self,
        client: &aws_sdk_autoscaling::Client,
        chunk: &[String],
        ctx: &OpCtx,
    ) -> Result<HashMap<String, BTreeMap<String, String>>, CloudError> {
        let req = client
            .describe_auto_scaling_groups()
            .set_auto_scaling_group_names(Some(chunk.to_vec()));
        self.templates_described(req, ctx).await
    }

    /// The template tags of every Auto Scaling group of the cluster's managed node groups, by
    /// group name: one DescribeAutoScalingGroups filtered on the `eks:cluster-name` tag (100
    /// groups a page), which needs no group name and so can go out beside ListNodegroups instead
    /// of after the describes. EKS puts that tag on every managed node group's group
    /// (kubernetes/autoscaler `cluster-autoscaler/proposals/circumvent-tag-limit-aws.md`, by the
    /// EKS team; in the EKS user guide's "AWS managed policies", the policy of EKS's node group
    /// role allows CreateAutoScalingGroup only in a request that carries one of the tag keys
    /// `eks`, `eks:cluster-name`, `eks:nodegroup-name`). A group someone stripped of the tag is
    /// simply not in the answer: the list reads it by name ([`Self::templates`]).
    pub(super) async fn cluster_templates(
        &self,
        region: &str,
        cluster: &str,
        ctx: &OpCtx,
    ) -> Result<HashMap<String, BTreeMap<String, String>>, CloudError> {
        let client = self.asg_client(region)?;
        let filter = aws_sdk_autoscaling::types::Filter::builder()
            .name("tag:eks:cluster-name")
            .values(cluster)
            .build();
        let req = client.describe_auto_scaling_groups().filters(filter);
        self.templates_described(req, ctx).await
    }

    /// Every page of one DescribeAutoScalingGroups: each group's template tags, by group name.
    async fn templates_described(
        &self,
        req: aws_sdk_autoscaling::operation::describe_auto_scaling_groups::builders::DescribeAutoScalingGroupsFluentBuilder,
        ctx: &OpCtx,
    ) -> Result<HashMap<String, BTreeMap<String, String>>, CloudError> {
        let mut out = HashMap::new();
        let mut token: Option<String> = None;
        loop {
            let req = req.clone().max_records(100).set_next_token(token.clone());
            let page = self
                .call(ctx, "DescribeAutoScalingGroups", || req.clone().send())
                .await?;
            for g in page.auto_scaling_groups() {
                let template = g
                    .tags()
                    .iter()
                    .filter_map(|t| Some((t.key()?.to_string(), t.value()?.to_string())))
                    .filter(|(k, _)| k.starts_with(PREFIX))
                    .collect();
                out.insert(
                    g.auto_scaling_group_name().unwrap_or_default().to_string(),
                    template,
                );
            }
            match page.next_token().filter(|t| !t.is_empty()) {
                Some(t) => token = Some(t.to_string()),
                None => return Ok(out),
            }
        }
    }

    /// The template tags of the Auto Scaling groups EKS tagged as one node group's
    /// (`eks:cluster-name` and `eks:nodegroup-name`, as [`Self::cluster_templates`] says): a
    /// read that needs no group name, so a single read of a node group sends it beside the
    /// group's describe rather than after it.
    pub(super) async fn nodegroup_templates(
        &self,
        region: &str,
        cluster: &str,
        nodegroup: &str,
        ctx: &OpCtx,
    ) -> Result<HashMap<String, BTreeMap<String, String>>, CloudError> {
        let client = self.asg_client(region)?;
        let tag = |key: &str, value: &str| {
            aws_sdk_autoscaling::types::Filter::builder()
                .name(format!("tag:{key}"))
                .values(value)
                .build()
        };
        let req = client
            .describe_auto_scaling_groups()
            .filters(tag("eks:cluster-name", cluster))
            .filters(tag("eks:nodegroup-name", nodegroup));
        self.templates_described(req, ctx).await
    }

    /// The template of `ng` from what a tag-filtered read found (`tagged`), or, where that missed
    /// the node group's Auto Scaling group (a tag someone removed, a failed read), read by name.
    pub(super) async fn template_from(
        &self,
        region: &str,
        ng: &Nodegroup,
        tagged: Option<HashMap<String, BTreeMap<String, String>>>,
        ctx: &OpCtx,
    ) -> Result<BTreeMap<String, String>, CloudError> {
        let mut tagged = tagged.unwrap_or_default();
        match asg_names(ng).iter().find_map(|n| tagged.remove(n)) {
            Some(template) => Ok(template),
            None => self.template_of(region, ng, ctx).await,
        }
    }

    /// The template a node group's groups carry (the first group's: EKS makes one).
    pub(super) async fn template_of(
        &self,
        region: &str,
        ng: &Nodegroup,
        ctx: &OpCtx,
    ) -> Result<BTreeMap<String, String>, CloudError> {
        let names = asg_names(ng);
        let mut found = self.templates(region, &names, ctx).await?;
        Ok(names
            .iter()
            .find_map(|n| found.remove(n))
            .unwrap_or_default())
    }

    /// Brings every group of the node group to `want`: tags that differ are written, template
    /// tags `want` does not name are deleted. Returns what the groups then carry: `want`, once
    /// every call has succeeded.
    pub(super) async fn set_template(
        &self,
        region: &str,
        ng: &Nodegroup,
        want: &BTreeMap<String, String>,
        ctx: &OpCtx,
    ) -> Result<BTreeMap<String, String>, CloudError> {
        let names = asg_names(ng);
        let have = self.templates(region, &names, ctx).await?;
        let client = self.asg_client(region)?;
        for name in &names {
            let Some(current) = have.get(name) else {
                if want.is_empty() {
                    // Nothing to write, and nothing of ours to remove.
                    continue;
                }
                return Err(CloudError::Api {
                    status: 0,
                    code: "AutoScalingGroupNotFound".into(),
                    message: format!(
                        "the Auto Scaling group {name} of the node group does not exist, so \
                         cluster-autoscaler's node template cannot be written to it"
                    ),
                });
            };
            let tag = |k: &str, v: Option<&str>| {
                Tag::builder()
                    .resource_id(name)
                    .resource_type("auto-scaling-group")
                    .key(k)
                    .set_value(v.map(str::to_string))
                    .propagate_at_launch(false)
                    .build()
            };
            let stale: Vec<Tag> = current
                .keys()
                .filter(|k| !want.contains_key(*k))
                .map(|k| tag(k, None))
                .collect();
            if !stale.is_empty() {
                let req = client.delete_tags().set_tags(Some(stale));
                self.call(ctx, &format!("DeleteTags of {name}"), || req.clone().send())
                    .await?;
            }
            let changed: Vec<Tag> = want
                .iter()
                .filter(|(k, v)| current.get(*k) != Some(*v))
                .map(|(k, v)| tag(k, Some(v)))
                .collect();
            if !changed.is_empty() {
                let req = client.create_or_update_tags().set_tags(Some(changed));
                self.call(ctx, &format!("CreateOrUpdateTags of {name}"), || {
                    req.clone().send()
                })
                .await?;
            }
        }
        Ok(want.clone())
    }
}
