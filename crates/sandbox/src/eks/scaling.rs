//! The Auto Scaling calls that size a node group's group, as cluster-autoscaler's AWS provider
//! makes them (kubernetes/autoscaler cluster-autoscaler/cloudprovider/aws, `aws_wrapper.go` and
//! `auto_scaling_groups.go`): SetDesiredCapacity to grow or shrink it, TerminateInstanceInAutoScalingGroup
//! to take one instance out, and DescribeScalingActivities, where it looks for a launch that failed.
//! The group's size is the node group's (`NgSpec::desired_size`): EKS reports it as the node group's
//! `desiredSize`, and the group's instances (`asg.rs`) become Nodes at once, where real ones boot for
//! minutes.
//!
//! Written from the Amazon EC2 Auto Scaling API reference (the three actions, `Activity`) and
//! botocore's data/autoscaling/2011-01-01/service-2.json. Errors, `ValidationError`:
//! - a capacity outside the group's bounds: "New SetDesiredCapacity value 5 is above max value 4
//!   for the AutoScalingGroup." (and "below min value"), as the service words them in answers
//!   quoted in kubernetes/autoscaler issues;
//! - terminating without replacement at the minimum: "Currently, desiredSize equals minSize (0).
//!   Terminating instance without replacement will violate group's min size constraint. Either
//!   set shouldDecrementDesiredCapacity flag to false or lower group's min size." (quoted the same
//!   way);
//! - a group or an instance that does not exist: the sandbox's own words, in the form of the
//!   tagging calls' "AutoScalingGroup not found" answer.
//!
//! Activities are kept per group, newest first, the last 50 (the sandbox's bound): a launch or a
//! termination is Successful as soon as it is asked for.

use super::asg::{asg_name, find_group, instances, retire};
use super::documents::pool_nodes;
use super::query::{Params, QueryError, answer, el, list, validation};
use super::world::{Activity, EksWorld, Nodegroup};
use crate::Ctx;
use crate::dates::rfc3339_millis;
use crate::nodes::NodeEvent;
use axum::response::Response;

/// Activities kept per group.
const KEEP: usize = 50;

fn activity_xml(group: &str, a: &Activity) -> String {
    [
        el("ActivityId", &a.id),
        el("AutoScalingGroupName", group),
        el("Description", &a.description),
        el("Cause", &a.cause),
        el("StartTime", &rfc3339_millis(a.start)),
        el("EndTime", &rfc3339_millis(a.start)),
        el("StatusCode", &a.status),
        el("Progress", "100"),
        el("Details", "{}"),
    ]
    .concat()
}

fn record(ng: &mut Nodegroup, ctx: &mut Ctx, description: String, cause: String) -> Activity {
    let id = format!(
        "{:08x}-{:04x}-{:04x}-{:04x}-{:012x}",
        crate::util::fnv1a(&format!("{}/{}", ng.uid, ctx.new_id())) as u32,
        ctx.now & 0xffff,
        0x4000 | (ctx.now >> 16) & 0x0fff,
        0x8000 | (ctx.next_id & 0x3fff),
        ctx.now & 0xffff_ffff_ffff
    );
    let a = Activity {
        id,
        description,
        cause,
        start: ctx.now,
        status: "Successful".into(),
    };
    ng.activities.insert(0, a.clone());
    ng.activities.truncate(KEEP);
    a
}

fn group_missing(group: &str) -> QueryError {
    validation(format!(
        "AutoScalingGroup not found - AutoScaling Group {group} not found"
    ))
}

fn required<'a>(p: &'a Params, name: &str, wire: &str) -> Result<&'a str, QueryError> {
    p.get(name).filter(|v| !v.is_empty()).ok_or_else(|| {
        validation(format!(
            "1 validation error detected: Value null at '{wire}' failed to satisfy constraint: \
             Member must not be null"
        ))
    })
}

/// SetDesiredCapacity: the node group's size within its bounds, its instances launched or
/// terminated (the newest first) at once.
pub(super) fn set_desired(
    eks: &mut EksWorld,
    ctx: &mut Ctx,
    region: &str,
    p: &Params,
) -> Result<Response, QueryError> {
    let group = required(p, "AutoScalingGroupName", "autoScalingGroupName")?;
    let raw = required(p, "DesiredCapacity", "desiredCapacity")?;
    let desired: i64 = raw
        .parse()
        .map_err(|_| validation(format!("Invalid DesiredCapacity value: {raw}")))?;
    let (ck, ngn) =
        find_group(eks.clusters.iter(), region, group).ok_or_else(|| group_missing(group))?;
    let c = eks.clusters.get_mut(&ck).expect("found");
    let cluster = c.name.clone();
    let ng = c.nodegroups.get_mut(&ngn).expect("found");
    let (min, max) = (ng.spec.min_size, ng.spec.max_size);
    if desired > max {
        return Err(validation(format!(
            "New SetDesiredCapacity value {desired} is above max value {max} for the \
             AutoScalingGroup."
        )));
    }
    if desired < min {
        return Err(validation(format!(
            "New SetDesiredCapacity value {desired} is below min value {min} for the \
             AutoScalingGroup."
        )));
    }
    let before = instances(region, ng);
    let from = ng.spec.desired_size;
    ng.spec.desired_size = desired;
    let after = instances(region, ng);
    let cause = format!(
        "At {} a user request explicitly set group desired capacity changing the desired \
         capacity from {from} to {desired}.",
        rfc3339_millis(ctx.now)
    );
    for i in after.iter().filter(|i| !before.contains(i)) {
        record(
            ng,
            ctx,
            format!("Launching a new EC2 instance: {}", i.id),
            cause.clone(),
        );
    }
    for i in before.iter().filter(|i| !after.contains(i)) {
        record(
            ng,
            ctx,
            format!("Terminating EC2 instance: {}", i.id),
            cause.clone(),
        );
    }
    if from != desired {
        ctx.events
            .push(NodeEvent::Changed(pool_nodes(&cluster, region, ng)));
        ctx.mutated();
    }
    Ok(answer("SetDesiredCapacity", None))
}

/// TerminateInstanceInAutoScalingGroup: the instance leaves its group for good; with
/// `ShouldDecrementDesiredCapacity` the group shrinks by one, else it launches a replacement.
pub(super) fn terminate(
    eks: &mut EksWorld,
    ctx: &mut Ctx,
    region: &str,
    p: &Params,
) -> Result<Response, QueryError> {
    let id = required(p, "InstanceId", "instanceId")?;
    let decrement = required(
        p,
        "ShouldDecrementDesiredCapacity",
        "shouldDecrementDesiredCapacity",
    )? == "true";
    let found = eks
        .clusters
        .iter()
        .filter(|(_, c)| c.region == region)
        .find_map(|(ck, c)| {
            c.nodegroups
                .values()
                .find(|ng| instances(region, ng).iter().any(|i| i.id == id))
                .map(|ng| (ck.clone(), ng.name.clone()))
        });
    let (ck, ngn) = found.ok_or_else(|| {
        validation(format!(
            "Instance Id not found - No managed instance found for instance ID: {id}"
        ))
    })?;
    let c = eks.clusters.get_mut(&ck).expect("found");
    let cluster = c.name.clone();
    let ng = c.nodegroups.get_mut(&ngn).expect("found");
    if decrement && ng.spec.desired_size <= ng.spec.min_size {
        return Err(validation(format!(
            "Currently, desiredSize equals minSize ({}). Terminating instance without replacement \
             will violate group's min size constraint. Either set shouldDecrementDesiredCapacity \
             flag to false or lower group's min size.",
            ng.spec.min_size
        )));
    }
    let before = instances(region, ng);
    retire(region, ng, id);
    let cause = format!(
        "At {} instance {id} was taken out of service in response to a user request{}.",
        rfc3339_millis(ctx.now),
        if decrement {
            ", shrinking the capacity from ".to_string()
                + &format!("{} to {}", ng.spec.desired_size, ng.spec.desired_size - 1)
        } else {
            String::new()
        }
    );
    if decrement {
        ng.spec.desired_size -= 1;
    }
    let a = record(
        ng,
        ctx,
        format!("Terminating EC2 instance: {id}"),
        cause.clone(),
    );
    // Without the decrement the group launches a replacement at once.
    for i in instances(region, ng).iter().filter(|i| !before.contains(i)) {
        record(
            ng,
            ctx,
            format!("Launching a new EC2 instance: {}", i.id),
            cause.clone(),
        );
    }
    ctx.events
        .push(NodeEvent::Changed(pool_nodes(&cluster, region, ng)));
    ctx.mutated();
    Ok(answer(
        "TerminateInstanceInAutoScalingGroup",
        Some(&format!(
            "<Activity>{}</Activity>",
            activity_xml(&asg_name(ng), &a)
        )),
    ))
}

/// DescribeScalingActivities of one group (or of every group of the region), newest first.
pub(super) fn describe(eks: &EksWorld, region: &str, p: &Params) -> Result<Response, QueryError> {
    let wanted = p.get("AutoScalingGroupName").filter(|g| !g.is_empty());
    if let Some(g) = wanted
        && find_group(eks.clusters.iter(), region, g).is_none()
    {
        return Err(group_missing(g));
    }
    let members: Vec<String> = eks
        .clusters
        .values()
        .filter(|c| c.region == region)
        .flat_map(|c| c.nodegroups.values())
        .filter(|ng| wanted.is_none_or(|g| asg_name(ng) == g))
        .flat_map(|ng| {
            let group = asg_name(ng);
            ng.activities.iter().map(move |a| activity_xml(&group, a))
        })
        .collect();
    Ok(answer(
        "DescribeScalingActivities",
        Some(&list("Activities", &members)),
    ))
}
