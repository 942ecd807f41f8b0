//! Amazon EC2 Auto Scaling, as far as a managed node group's group goes: DescribeAutoScalingGroups,
//! DescribeTags, CreateOrUpdateTags and DeleteTags over awsQuery (and the calls that size a group,
//! `scaling.rs`) (`POST /`, SigV4 service
//! `autoscaling`). The groups are the node groups' (`asg.rs`): made with the node group, gone with
//! it, sized by its scaling config. This is where a client writes cluster-autoscaler's node
//! templates, since EKS does not copy a node group's tags to its group.
//!
//! Written from the Amazon EC2 Auto Scaling API reference (actions, `Filter`, `Tag`,
//! `TagDescription`, `AutoScalingGroup`) and botocore's data/autoscaling/2011-01-01/service-2.json
//! (shapes, limits, error codes). Errors, as the service answers them:
//! - a parameter out of its shape's bounds: `ValidationError` with the service's constraint text,
//!   e.g. "Value '..' at 'tags.6.member.key' failed to satisfy constraint: Member must have length
//!   less than or equal to 128" (quoted from a real answer in fog/fog-aws#125);
//! - tagging a group that does not exist: `ValidationError` "AutoScalingGroup not found -
//!   AutoScaling Group <name> not found" (a real CreateOrUpdateTags answer quoted in
//!   cloud-custodian/cloud-custodian#380); moto raises a KeyError there, so it is no guide;
//! - more than 50 tags on a group: `LimitExceeded` (service-2.json LimitExceededFault, HTTP 400;
//!   the message is the sandbox's own, none was found quoted);
//! - more than 50 names to DescribeAutoScalingGroups without a larger MaxRecords: `ValidationError`
//!   "The number of group names that may be passed in is limited to 50." (kubernetes/kops#4832);
//! - a bad NextToken: `InvalidNextToken`; an unknown action or version: `InvalidAction`; no action:
//!   `MissingAction` (the API reference's Common Errors).
//!
//! Describing a group that does not exist is not an error: the answer leaves it out. A group
//! lists its instances (`asg.rs`), whose ids its Nodes' provider IDs carry.

use std::collections::BTreeMap;

use axum::http::{Method, StatusCode};
use axum::response::Response;

use super::asg::{
    MAX_KEY, MAX_TAGS, MAX_VALUE, asg_name, eks_template_id, eks_template_name, find_group,
    instances, zones,
};
use super::query::{Params, QueryError, VERSION, answer, el, list, query_error, validation};
use super::scaling;
use super::sigv4::sigv4_region;
use super::world::{AsgTag, EksCluster, EksWorld, Nodegroup};
use crate::api::{ApiRequest, CloudApi};
use crate::dates::rfc3339_millis;
use crate::{AWS_ACCOUNT, Sandbox};

/// The Auto Scaling API.
pub(crate) struct AutoScaling;

impl CloudApi for AutoScaling {
    type Error = QueryError;

    fn dispatch(sb: &Sandbox, req: &ApiRequest) -> Result<Response, QueryError> {
        dispatch(sb, req)
    }

    fn injected(status: StatusCode, message: String) -> QueryError {
        let code = match status.as_u16() {
            429 => "Throttling",
            503 => "ServiceUnavailable",
            _ => "InternalFailure",
        };
        query_error(status, code, message)
    }
}

/// Default and largest page (service-2.json `MaxRecords` docs: "The default value is 50 and the
/// maximum value is 100").
const PAGE: usize = 50;
const MAX_PAGE: usize = 100;

fn dispatch(sb: &Sandbox, req: &ApiRequest) -> Result<Response, QueryError> {
    let region = sigv4_region(&req.headers, "autoscaling").map_err(|e| {
        let (status, code, message) = e.parts();
        query_error(status, code, message)
    })?;
    let p = if req.method == Method::GET {
        Params::parse(req.uri.query().unwrap_or_default().as_bytes())
    } else {
        Params::parse(&req.body)
    };
    let Some(action) = p.get("Action") else {
        return Err(query_error(
            StatusCode::BAD_REQUEST,
            "MissingAction",
            "The request must contain the parameter Action.",
        ));
    };
    let version = p.get("Version").unwrap_or_default();
    let unknown = || {
        query_error(
            StatusCode::BAD_REQUEST,
            "InvalidAction",
            format!("Could not find operation {action} for version {version}"),
        )
    };
    if version != VERSION {
        return Err(unknown());
    }
    match action {
        "DescribeAutoScalingGroups" => sb.with_world(|w, _| describe_groups(&w.eks, &region, &p)),
        "DescribeTags" => sb.with_world(|w, _| describe_tags(&w.eks, &region, &p)),
        "CreateOrUpdateTags" => sb.with_world(|w, ctx| {
            let r = change_tags(&mut w.eks, &region, &p, true)?;
            ctx.mutated();
            Ok(r)
        }),
        "SetDesiredCapacity" => {
            sb.with_world(|w, ctx| scaling::set_desired(&mut w.eks, ctx, &region, &p))
        }
        "TerminateInstanceInAutoScalingGroup" => {
            sb.with_world(|w, ctx| scaling::terminate(&mut w.eks, ctx, &region, &p))
        }
        "DescribeScalingActivities" => sb.with_world(|w, _| scaling::describe(&w.eks, &region, &p)),
        "DeleteTags" => sb.with_world(|w, ctx| {
            let r = change_tags(&mut w.eks, &region, &p, false)?;
            ctx.mutated();
            Ok(r)
        }),
        _ => Err(unknown()),
    }
}

/// MaxRecords and NextToken of a describe call: (start, page size).
fn page(p: &Params) -> Result<(usize, usize), QueryError> {
    let size = match p.get("MaxRecords") {
        None => PAGE,
        Some(m) => match m.parse::<usize>() {
            Ok(n) if (1..=MAX_PAGE).contains(&n) => n,
            _ => {
                return Err(validation(format!(
                    "1 validation error detected: Value '{m}' at 'maxRecords' failed to satisfy \
                     constraint: Member must have value between 1 and {MAX_PAGE}"
                )));
            }
        },
    };
    let start = match p.get("NextToken") {
        None | Some("") => 0,
        Some(t) => t.parse::<usize>().map_err(|_| {
            query_error(
                StatusCode::BAD_REQUEST,
                "InvalidNextToken",
                "The token provided is not valid.",
            )
        })?,
    };
    Ok((start, size))
}

/// A filter: its name and values (values of one filter are alternatives; filters all apply).
fn filters(p: &Params) -> Vec<(String, Vec<String>)> {
    p.members("Filters")
        .into_iter()
        .map(|f| {
            (
                f.get("Name").unwrap_or_default().to_string(),
                f.strings("Values"),
            )
        })
        .collect()
}

/// Every group of a region, by name: (name, cluster, node group).
fn groups<'a>(
    eks: &'a EksWorld,
    region: &str,
) -> BTreeMap<String, (&'a EksCluster, &'a Nodegroup)> {
    eks.clusters
        .values()
        .filter(|c| c.region == region)
        .flat_map(|c| c.nodegroups.values().map(move |ng| (asg_name(ng), (c, ng))))
        .collect()
}

fn tag_member(group: &str, key: &str, t: &AsgTag) -> String {
    [
        el("ResourceId", group),
        el("ResourceType", "auto-scaling-group"),
        el("Key", key),
        el("Value", &t.value),
        el(
            "PropagateAtLaunch",
            if t.propagate_at_launch {
                "true"
            } else {
                "false"
            },
        ),
    ]
    .concat()
}

fn describe_groups(eks: &EksWorld, region: &str, p: &Params) -> Result<Response, QueryError> {
    let names = p.strings("AutoScalingGroupNames");
    let (start, size) = page(p)?;
    if names.len() > size.max(PAGE) {
        return Err(validation(
            "The number of group names that may be passed in is limited to 50.",
        ));
    }
    let fs = filters(p);
    for (name, _) in &fs {
        if !(name == "tag-key" || name == "tag-value" || name.starts_with("tag:")) {
            return Err(validation(format!(
                "Filter type {name} is not correct. Allowed Filter types are: tag-key tag-value \
                 tag:<key>"
            )));
        }
    }
    let all = groups(eks, region);
    let chosen: Vec<(&String, &(&EksCluster, &Nodegroup))> = all
        .iter()
        .filter(|(n, _)| names.is_empty() || names.contains(n))
        .filter(|(_, (c, ng))| {
            let tags = ng.asg_tags(&c.name);
            fs.iter().all(|(name, values)| match name.as_str() {
                "tag-key" => tags.keys().any(|k| values.contains(k)),
                "tag-value" => tags.values().any(|t| values.contains(&t.value)),
                n => {
                    let key = &n["tag:".len()..];
                    tags.get(key).is_some_and(|t| values.contains(&t.value))
                }
            })
        })
        .collect();
    let members: Vec<String> = chosen
        .iter()
        .skip(start)
        .take(size)
        .map(|(name, (c, ng))| group_document(region, name, c, ng))
        .collect();
    let mut result = list("AutoScalingGroups", &members);
    if start + size < chosen.len() {
        result.push_str(&el("NextToken", &(start + size).to_string()));
    }
    Ok(answer("DescribeAutoScalingGroups", Some(&result)))
}

/// One group as DescribeAutoScalingGroups shows it (the `AutoScalingGroup` shape's members a
/// managed node group's group has: EKS launches it from its own launch template across the node
/// group's subnets).
fn group_document(region: &str, name: &str, c: &EksCluster, ng: &Nodegroup) -> String {
    let s = &ng.spec;
    let zones = zones(region, ng);
    let template = [
        el("LaunchTemplateId", &eks_template_id(ng)),
        el("LaunchTemplateName", &eks_template_name(ng)),
        el("Version", "1"),
    ]
    .concat();
    let itype = s
        .instance_types
        .first()
        .map(String::as_str)
        .unwrap_or_default();
    let instances: Vec<String> = instances(region, ng)
        .iter()
        .map(|i| {
            [
                el("InstanceId", &i.id),
                el("InstanceType", itype),
                el("AvailabilityZone", &i.zone),
                el("LifecycleState", "InService"),
                el("HealthStatus", "Healthy"),
                format!("<LaunchTemplate>{template}</LaunchTemplate>"),
                el("ProtectedFromScaleIn", "false"),
            ]
            .concat()
        })
        .collect();
    let tags: Vec<String> = ng
        .asg_tags(&c.name)
        .iter()
        .map(|(k, t)| tag_member(name, k, t))
        .collect();
    [
        el("AutoScalingGroupName", name),
        el(
            "AutoScalingGroupARN",
            &format!(
                "arn:aws:autoscaling:{region}:{AWS_ACCOUNT}:autoScalingGroup:{}:autoScalingGroupName/{name}",
                ng.uid
            ),
        ),
        format!(
            "<MixedInstancesPolicy><LaunchTemplate><LaunchTemplateSpecification>{template}\
             </LaunchTemplateSpecification><Overrides>{}</Overrides></LaunchTemplate>\
             </MixedInstancesPolicy>",
            s.instance_types
                .iter()
                .map(|t| format!("<member>{}</member>", el("InstanceType", t)))
                .collect::<String>()
        ),
        el("MinSize", &s.min_size.to_string()),
        el("MaxSize", &s.max_size.to_string()),
        el("DesiredCapacity", &s.desired_size.to_string()),
        el("DefaultCooldown", "300"),
        list("AvailabilityZones", &zones),
        "<LoadBalancerNames/><TargetGroupARNs/>".to_string(),
        el("HealthCheckType", "EC2"),
        el("HealthCheckGracePeriod", "15"),
        list("Instances", &instances),
        el("CreatedTime", &rfc3339_millis(ng.created_at)),
        "<SuspendedProcesses/>".to_string(),
        el("VPCZoneIdentifier", &s.subnets.join(",")),
        "<EnabledMetrics/>".to_string(),
        list("Tags", &tags),
        list(
            "TerminationPolicies",
            &["AllocationStrategy", "OldestLaunchTemplate", "OldestInstance"].map(String::from),
        ),
        el("NewInstancesProtectedFromScaleIn", "false"),
        el(
            "ServiceLinkedRoleARN",
            &format!(
                "arn:aws:iam::{AWS_ACCOUNT}:role/aws-service-role/autoscaling.amazonaws.com/AWSServiceRoleForAutoScaling"
            ),
        ),
        el(
            "CapacityRebalance",
            if s.capacity_type == "SPOT" { "true" } else { "false" },
        ),
    ]
    .concat()
}

fn describe_tags(eks: &EksWorld, region: &str, p: &Params) -> Result<Response, QueryError> {
    let (start, size) = page(p)?;
    let fs = filters(p);
    for (name, _) in &fs {
        if !["auto-scaling-group", "key", "value", "propagate-at-launch"].contains(&name.as_str()) {
            return Err(validation(format!(
                "Filter type {name} is not correct. Allowed Filter types are: auto-scaling-group \
                 key value propagate-at-launch"
            )));
        }
    }
    let mut tags = Vec::new();
    for (group, (c, ng)) in groups(eks, region) {
        for (k, t) in ng.asg_tags(&c.name) {
            let keep = fs.iter().all(|(name, values)| match name.as_str() {
                "auto-scaling-group" => values.contains(&group),
                "key" => values.contains(&k),
                "value" => values.contains(&t.value),
                _ => values.contains(&t.propagate_at_launch.to_string()),
            });
            if keep {
                tags.push(tag_member(&group, &k, &t));
            }
        }
    }
    let page: Vec<String> = tags.iter().skip(start).take(size).cloned().collect();
    let mut result = list("Tags", &page);
    if start + size < tags.len() {
        result.push_str(&el("NextToken", &(start + size).to_string()));
    }
    Ok(answer("DescribeTags", Some(&result)))
}

/// CreateOrUpdateTags (`put`) or DeleteTags: every tag is checked before any is changed, so a
/// refused call changes nothing.
fn change_tags(
    eks: &mut EksWorld,
    region: &str,
    p: &Params,
    put: bool,
) -> Result<Response, QueryError> {
    let wanted = requested_tags(p)?;
    // Resolve every group first: a missing one refuses the whole call.
    let mut located = Vec::new();
    for tag in wanted {
        let Some((ck, ngn)) = find_group(eks.clusters.iter(), region, &tag.group) else {
            return Err(validation(format!(
                "AutoScalingGroup not found - AutoScaling Group {} not found",
                tag.group
            )));
        };
        located.push((ck, ngn, tag));
    }
    let changed = changed_tags(eks, located, put)?;
    for ((ck, ngn), tags) in changed {
        if let Some(c) = eks.clusters.get_mut(&ck) {
            let cluster = c.name.clone();
            if let Some(ng) = c.nodegroups.get_mut(&ngn) {
                *ng.asg_tags_mut(&cluster) = tags;
            }
        }
    }
    Ok(answer(
        if put {
            "CreateOrUpdateTags"
        } else {
            "DeleteTags"
        },
        None,
    ))
}

/// One tag a CreateOrUpdateTags or DeleteTags call names.
struct TagRequest {
    group: String,
    key: String,
    value: String,
    propagate: bool,
}

/// The call's `Tags` members, each within its shape's bounds: the length errors of all of them
/// come back as one ValidationError, as the service counts them; a member that names no group of
/// the one resource type is refused at once.
fn requested_tags(p: &Params) -> Result<Vec<TagRequest>, QueryError> {
    let members = p.members("Tags");
    if members.is_empty() {
        return Err(validation(
            "1 validation error detected: Value null at 'tags' failed to satisfy constraint: \
             Member must not be null",
        ));
    }
    let mut errors = Vec::new();
    let mut wanted = Vec::new();
    for (i, m) in members.iter().enumerate() {
        let n = i + 1;
        let key = m.get("Key").unwrap_or_default();
        let value = m.get("Value").unwrap_or_default();
        errors.extend(length_errors(n, key, value));
        let Some(group) = m.get("ResourceId").filter(|g| !g.is_empty()) else {
            return Err(validation(format!(
                "The ResourceId of tag {n} must be the name of an Auto Scaling group."
            )));
        };
        match m.get("ResourceType") {
            None | Some("auto-scaling-group") => {}
            Some(other) => {
                return Err(validation(format!(
                    "Invalid resource type {other}: the only resource type is auto-scaling-group."
                )));
            }
        }
        wanted.push(TagRequest {
            group: group.to_string(),
            key: key.to_string(),
            value: value.to_string(),
            propagate: m.get("PropagateAtLaunch").is_some_and(|v| v == "true"),
        });
    }
    if !errors.is_empty() {
        let n = errors.len();
        let s = if n == 1 { "" } else { "s" };
        return Err(validation(format!(
            "{n} validation error{s} detected: {}",
            errors.join("; ")
        )));
    }
    Ok(wanted)
}

/// What tag `n` (from 1) breaks of the `Tag` shape's lengths, in the service's words.
fn length_errors(n: usize, key: &str, value: &str) -> Vec<String> {
    let mut errors = Vec::new();
    let chars = key.chars().count();
    if chars == 0 {
        errors.push(format!(
            "Value '{key}' at 'tags.{n}.member.key' failed to satisfy constraint: Member must \
             have length greater than or equal to 1"
        ));
    } else if chars > MAX_KEY {
        errors.push(format!(
            "Value '{key}' at 'tags.{n}.member.key' failed to satisfy constraint: Member must \
             have length less than or equal to {MAX_KEY}"
        ));
    }
    if value.chars().count() > MAX_VALUE {
        errors.push(format!(
            "Value '{value}' at 'tags.{n}.member.value' failed to satisfy constraint: Member \
             must have length less than or equal to {MAX_VALUE}"
        ));
    }
    errors
}

/// Groups' tags by (cluster key, node group name).
type GroupTags = BTreeMap<(String, String), BTreeMap<String, AsgTag>>;

/// Each touched group's tags with the call applied, on copies, refused when a group would have more
/// than it may.
fn changed_tags(
    eks: &EksWorld,
    located: Vec<(String, String, TagRequest)>,
    put: bool,
) -> Result<GroupTags, QueryError> {
    let mut changed = GroupTags::new();
    for (ck, ngn, tag) in located {
        let c = &eks.clusters[&ck];
        let tags = changed
            .entry((ck.clone(), ngn.clone()))
            .or_insert_with(|| c.nodegroups[&ngn].asg_tags(&c.name));
        if !put {
            tags.remove(&tag.key);
            continue;
        }
        tags.insert(
            tag.key,
            AsgTag {
                value: tag.value,
                propagate_at_launch: tag.propagate,
            },
        );
        if tags.len() > MAX_TAGS {
            return Err(query_error(
                StatusCode::BAD_REQUEST,
                "LimitExceeded",
                format!(
                    "The Auto Scaling group {} would have more than {MAX_TAGS} tags, the \
                     most a group can have.",
                    tag.group
                ),
            ));
        }
    }
    Ok(changed)
}
