//! Node group creates, updates and deletes. EKS has no operation documents: a node group itself is
//! CREATING, UPDATING or DELETING (and an update has its own id and status) until the shared settle
//! mechanism makes it ACTIVE, removes it, or, under fault injection, leaves it CREATE_FAILED or
//! DELETE_FAILED with a health issue, or rolls an update back.

use axum::http::StatusCode;
use axum::response::Response;
use serde_json::{Map, Value, json};

use super::asg::{asg_name, eks_tags};
use super::documents::{nodegroup_json, pool_nodes, update_json};
use super::error::{AwsError, aws, invalid};
use super::launch_templates;
use super::validate::{
    check_ami_version, check_labels, check_scaling, launch_template_spec, opt_int, opt_str,
    parse_body, parse_create, parse_taints, str_list, str_map,
};
use super::world::{
    EKS_VERSION, EksUpdate, EksWorld, MAX_NODEGROUPS, NgLaunchTemplate, NgSpec, Nodegroup, Pending,
    RELEASE_VERSION, cluster, in_use, ng_missing,
};
use crate::api::ApiRequest;
use crate::nodes::NodeEvent;
use crate::operations::{Kind, Operations, Queue};
use crate::util::json_response;
use crate::{Ctx, Sandbox, World};

impl Operations for EksWorld {
    type Entry = (u64, String, String);

    fn queue(&mut self) -> &mut Queue<(u64, String, String)> {
        &mut self.pending
    }

    fn finish(
        &mut self,
        (_, key, name): (u64, String, String),
        now: u64,
        events: &mut Vec<NodeEvent>,
    ) -> bool {
        let Some(c) = self.clusters.get_mut(&key) else {
            return false;
        };
        let Some(ng) = c.nodegroups.get_mut(&name) else {
            return true;
        };
        let Some(p) = ng.pending.take_if(|p| p.deadline <= now) else {
            return true;
        };
        ng.modified_at = now;
        let update = p.update_id.as_ref().and_then(|id| self.updates.get_mut(id));
        if p.fail {
            let issue = json!({"code": "AsgInstanceLaunchFailures", "message": format!(
                "Could not launch On-Demand Instances. InsufficientInstanceCapacity - We currently \
                do not have sufficient {} capacity in the Availability Zone you requested (sandbox \
                fault injection).", ng.spec.instance_types.join(",")), "resourceIds": [asg_name(ng)]});
            match p.kind {
                Kind::Create => {
                    ng.status = "CREATE_FAILED".into();
                    ng.health_issues = vec![issue];
                }
                Kind::Update => {
                    if let Some(prev) = p.previous {
                        ng.spec = *prev;
                    }
                    ng.status = "ACTIVE".into();
                    if let Some(u) = update {
                        u.status = "Failed".into();
                        u.errors = vec![
                            json!({"errorCode": "AsgInstanceLaunchFailures", "errorMessage": issue["message"], "resourceIds": issue["resourceIds"]}),
                        ];
                    }
                }
                Kind::Delete => {
                    ng.status = "DELETE_FAILED".into();
                    ng.health_issues = vec![issue];
                }
            }
            return true;
        }
        if let Some(u) = update {
            u.status = "Successful".into();
        }
        if p.kind == Kind::Delete {
            c.nodegroups.remove(&name);
            events.push(NodeEvent::Deleted {
                cloud: "eks",
                cluster: c.name.clone(),
                pool: name,
            });
        } else {
            ng.status = "ACTIVE".into();
            events.push(NodeEvent::Changed(pool_nodes(&c.name, &c.region, ng)));
        }
        true
    }
}

pub(super) fn create(
    sb: &Sandbox,
    request: &ApiRequest,
    region: &str,
    c: &str,
) -> Result<Response, AwsError> {
    let req = parse_body(&request.body)?;
    sb.with_world_opts(request.fail, |w, ctx| {
        cluster(&w.eks, region, c)?;
        let (name, mut spec, token) = parse_create(&req)?;
        if let Some(want) = &spec.launch_template {
            spec.launch_template = Some(resolve_template(&w.eks, region, want)?);
        }
        w.count_create_request("eks", c, &name);
        let cl = cluster(&w.eks, region, c)?;
        if let Some(existing) = cl.nodegroups.get(&name) {
            // Same clientRequestToken: an idempotent retry, answered with the node group.
            if token.is_some() && existing.client_request_token == token {
                return Ok(json_response(
                    StatusCode::OK,
                    &json!({"nodegroup": nodegroup_json(cl, existing)}),
                ));
            }
            return Err(aws(
                StatusCode::CONFLICT,
                "ResourceInUseException",
                format!("NodeGroup already exists with name {name} and cluster name {c}"),
            )
            .with("clusterName", c)
            .with("nodegroupName", &name));
        }
        // The "Managed node groups per cluster" service quota (L-6D54EA21, 30 by default). EKS
        // answers a create past it with ResourceLimitExceededException, HTTP 400 (EKS API model);
        // the message follows the one EKS gives for its Fargate profile limit.
        if cl.nodegroups.len() >= cl.nodegroup_quota.unwrap_or(MAX_NODEGROUPS) {
            return Err(aws(
                StatusCode::BAD_REQUEST,
                "ResourceLimitExceededException",
                "Nodegroup limit exceeded for cluster.",
            )
            .with("clusterName", c)
            .with("nodegroupName", &name));
        }
        let deadline = ctx.deadline();
        let uid = uuid(ctx);
        let ng = Nodegroup {
            name: name.clone(),
            uid,
            created_at: ctx.now,
            modified_at: ctx.now,
            status: "CREATING".into(),
            spec,
            health_issues: Vec::new(),
            client_request_token: token,
            asg_tags: Some(eks_tags(c, &name)),
            retired: Vec::new(),
            activities: Vec::new(),
            pending: Some(Pending {
                kind: Kind::Create,
                update_id: None,
                deadline,
                fail: ctx.fail_operation,
                previous: None,
            }),
        };
        let key = format!("{region}/{c}");
        w.eks
            .pending
            .add(ctx, (deadline, key.clone(), name.clone()));
        w.count_create("eks", c, &name);
        let cm = w.eks.clusters.get_mut(&key).expect("found above");
        let doc = nodegroup_json(cm, &ng);
        cm.nodegroups.insert(name, ng);
        Ok(json_response(StatusCode::OK, &json!({ "nodegroup": doc })))
    })
}

/// The launch template a request names, looked up in the region: its id, name, version number
/// (the template's default version when the request gives none, as the EKS API reference has it
/// for `LaunchTemplateSpecification.version`) and that version's user data. A template or version
/// that does not exist is an InvalidParameterException naming it (the messages are the sandbox's
/// own: no real answer was found quoted).
fn resolve_template(
    eks: &EksWorld,
    region: &str,
    want: &NgLaunchTemplate,
) -> Result<NgLaunchTemplate, AwsError> {
    let (t, named) = if want.id.is_empty() {
        (
            launch_templates::by_name(&eks.launch_templates, region, &want.name),
            format!("name {}", want.name),
        )
    } else {
        (
            launch_templates::by_id(&eks.launch_templates, region, &want.id),
            format!("ID {}", want.id),
        )
    };
    let t = t.ok_or_else(|| {
        invalid(format!(
            "The launch template with {named} does not exist in {region}."
        ))
    })?;
    let asked = if want.version.is_empty() {
        "$Default"
    } else {
        want.version.as_str()
    };
    let v = t.version(asked).ok_or_else(|| {
        invalid(format!(
            "Version {asked} of launch template {} ({}) does not exist.",
            t.name, t.id
        ))
    })?;
    Ok(NgLaunchTemplate {
        id: t.id.clone(),
        name: t.name.clone(),
        version: v.number.to_string(),
        user_data: v.data.user_data.clone(),
    })
}

fn uuid(ctx: &mut Ctx) -> String {
    let a = ctx.new_id();
    let r = fastrand::u64(..);
    format!(
        "{:08x}-{:04x}-4{:03x}-8{:03x}-{:012x}",
        (a as u32) ^ (r as u32),
        (r >> 32) as u16,
        (r >> 48) & 0xfff,
        (r >> 20) & 0xfff,
        fastrand::u64(..) & 0xffff_ffff_ffff
    )
}

pub(super) fn delete(
    sb: &Sandbox,
    request: &ApiRequest,
    region: &str,
    c: &str,
    ng: &str,
) -> Result<Response, AwsError> {
    sb.with_world_opts(request.fail, |w, ctx| {
        let cl = cluster(&w.eks, region, c)?;
        let n = cl.nodegroups.get(ng).ok_or_else(|| ng_missing(c, ng))?;
        if n.pending.is_some() {
            return Err(in_use(c, n));
        }
        let deadline = ctx.deadline();
        w.eks
            .pending
            .add(ctx, (deadline, format!("{region}/{c}"), ng.to_string()));
        let cm = w
            .eks
            .clusters
            .get_mut(&format!("{region}/{c}"))
            .expect("found above");
        let n = cm.nodegroups.get_mut(ng).expect("found above");
        n.status = "DELETING".into();
        n.modified_at = ctx.now;
        n.pending = Some(Pending {
            kind: Kind::Delete,
            update_id: None,
            deadline,
            fail: ctx.fail_operation,
            previous: None,
        });
        let doc = nodegroup_json(cm, &cm.nodegroups[ng]);
        Ok(json_response(StatusCode::OK, &json!({ "nodegroup": doc })))
    })
}

/// An update's params, as DescribeUpdate lists them: (type, value).
type UpdateParams = Vec<(String, String)>;

/// Start an update of a node group: UPDATING now, ACTIVE (or back to the old spec on failure) later.
fn start_update(
    w: &mut World,
    ctx: &mut Ctx,
    key: &str,
    ng: &str,
    new_spec: NgSpec,
    update_type: &str,
    params: UpdateParams,
) -> Value {
    let deadline = ctx.deadline();
    let id = uuid(ctx);
    w.eks
        .pending
        .add(ctx, (deadline, key.to_string(), ng.to_string()));
    w.eks.updates.insert(
        id.clone(),
        EksUpdate {
            id: id.clone(),
            cluster_key: key.into(),
            nodegroup: ng.into(),
            update_type: update_type.into(),
            status: "InProgress".into(),
            params,
            created_at: ctx.now,
            deadline,
            errors: vec![],
        },
    );
    let cm = w
        .eks
        .clusters
        .get_mut(key)
        .expect("caller found the cluster");
    let n = cm
        .nodegroups
        .get_mut(ng)
        .expect("caller found the node group");
    let previous = std::mem::replace(&mut n.spec, new_spec);
    n.status = "UPDATING".into();
    n.modified_at = ctx.now;
    n.pending = Some(Pending {
        kind: Kind::Update,
        update_id: Some(id.clone()),
        deadline,
        fail: ctx.fail_operation,
        previous: Some(Box::new(previous)),
    });
    update_json(&w.eks.updates[&id])
}

/// UpdateNodegroupConfig: labels, taints, scaling and update config, each group the body names
/// changed in the node group's spec and reported among the update's params.
pub(super) fn update_config(
    sb: &Sandbox,
    request: &ApiRequest,
    region: &str,
    c: &str,
    ng: &str,
) -> Result<Response, AwsError> {
    let req = parse_body(&request.body)?;
    sb.with_world_opts(request.fail, |w, ctx| {
        let cl = cluster(&w.eks, region, c)?;
        let n = cl.nodegroups.get(ng).ok_or_else(|| ng_missing(c, ng))?;
        if n.status != "ACTIVE" && n.status != "DEGRADED" {
            return Err(in_use(c, n));
        }
        let mut spec = n.spec.clone();
        let mut params = Vec::new();
        update_labels(&req, &mut spec, &mut params)?;
        update_taints(&req, &mut spec, &mut params)?;
        update_scaling(&req, &mut spec, &mut params)?;
        if let Some(Value::Object(u)) = req.get("updateConfig")
            && let Some(m) = opt_int(u, "maxUnavailable")?
        {
            if !(1..=100).contains(&m) {
                return Err(invalid("maxUnavailable must be between 1 and 100."));
            }
            spec.max_unavailable = m;
            params.push(("MaxUnavailable".to_string(), m.to_string()));
        }
        if params.is_empty() {
            return Err(invalid(
                "No changes were requested: specify labels, taints, scalingConfig or updateConfig.",
            ));
        }
        let key = format!("{region}/{c}");
        let doc = start_update(w, ctx, &key, ng, spec, "ConfigUpdate", params);
        Ok(json_response(StatusCode::OK, &json!({ "update": doc })))
    })
}

/// `labels`: `addOrUpdateLabels` and `removeLabels`, never the same key in both.
fn update_labels(
    req: &Map<String, Value>,
    spec: &mut NgSpec,
    params: &mut UpdateParams,
) -> Result<(), AwsError> {
    let Some(l) = req.get("labels").filter(|v| !v.is_null()) else {
        return Ok(());
    };
    let l = l
        .as_object()
        .ok_or_else(|| invalid("labels must be an object."))?;
    let add = str_map(l.get("addOrUpdateLabels"), "addOrUpdateLabels")?;
    let remove = str_list(l, "removeLabels")?.unwrap_or_default();
    if let Some(k) = remove.iter().find(|k| add.contains_key(*k)) {
        return Err(invalid(format!(
            "The label '{k}' can't be both added and removed."
        )));
    }
    check_labels(&add)?;
    for k in &remove {
        spec.labels.remove(k);
    }
    spec.labels.extend(add.clone());
    if !add.is_empty() {
        params.push((
            "LabelsToAdd".to_string(),
            serde_json::to_string(&add).unwrap_or_default(),
        ));
    }
    if !remove.is_empty() {
        params.push((
            "LabelsToRemove".to_string(),
            serde_json::to_string(&remove).unwrap_or_default(),
        ));
    }
    Ok(())
}

/// `taints`: `addOrUpdateTaints` and `removeTaints`, a taint being its key and effect.
fn update_taints(
    req: &Map<String, Value>,
    spec: &mut NgSpec,
    params: &mut UpdateParams,
) -> Result<(), AwsError> {
    let Some(t) = req.get("taints").filter(|v| !v.is_null()) else {
        return Ok(());
    };
    let t = t
        .as_object()
        .ok_or_else(|| invalid("taints must be an object."))?;
    let add = parse_taints(t.get("addOrUpdateTaints"), "addOrUpdateTaints")?;
    let remove = parse_taints(t.get("removeTaints"), "removeTaints")?;
    spec.taints
        .retain(|(k, _, e)| !remove.iter().any(|(rk, _, re)| rk == k && re == e));
    for (k, v, e) in &add {
        spec.taints.retain(|(ok, _, oe)| !(ok == k && oe == e));
        spec.taints.push((k.clone(), v.clone(), e.clone()));
    }
    if spec.taints.len() > 50 {
        return Err(invalid("A node group can have at most 50 taints."));
    }
    let tj = |l: &[(String, String, String)]| {
        serde_json::to_string(
            &l.iter()
                .map(|(k, v, e)| json!({"key": k, "value": v, "effect": e}))
                .collect::<Vec<_>>(),
        )
        .unwrap_or_default()
    };
    if !add.is_empty() {
        params.push(("TaintsToAdd".to_string(), tj(&add)));
    }
    if !remove.is_empty() {
        params.push(("TaintsToRemove".to_string(), tj(&remove)));
    }
    Ok(())
}

/// `scalingConfig`: the sizes it names, checked together with those it leaves as they are.
fn update_scaling(
    req: &Map<String, Value>,
    spec: &mut NgSpec,
    params: &mut UpdateParams,
) -> Result<(), AwsError> {
    let Some(sc) = req.get("scalingConfig").filter(|v| !v.is_null()) else {
        return Ok(());
    };
    let sc = sc
        .as_object()
        .ok_or_else(|| invalid("scalingConfig must be an object."))?;
    for (field, slot, param) in [
        ("minSize", &mut spec.min_size, "MinSize"),
        ("maxSize", &mut spec.max_size, "MaxSize"),
        ("desiredSize", &mut spec.desired_size, "DesiredSize"),
    ] {
        if let Some(v) = opt_int(sc, field)? {
            *slot = v;
            params.push((param.to_string(), v.to_string()));
        }
    }
    check_scaling(spec.min_size, spec.max_size, spec.desired_size)
}

pub(super) fn update_version(
    sb: &Sandbox,
    request: &ApiRequest,
    region: &str,
    c: &str,
    ng: &str,
) -> Result<Response, AwsError> {
    let req = parse_body(&request.body)?;
    sb.with_world_opts(request.fail, |w, ctx| {
        let cl = cluster(&w.eks, region, c)?;
        let n = cl.nodegroups.get(ng).ok_or_else(|| ng_missing(c, ng))?;
        if n.status != "ACTIVE" && n.status != "DEGRADED" {
            return Err(in_use(c, n));
        }
        let mut spec = n.spec.clone();
        let version = opt_str(&req, "version")?.unwrap_or(EKS_VERSION);
        if !["1.31", "1.32", EKS_VERSION].contains(&version) {
            return Err(invalid(format!(
                "Requested Nodegroup version {version} is invalid. \
                Nodegroup version cannot be newer than the cluster version {EKS_VERSION}."
            )));
        }
        if version < spec.version.as_str() {
            return Err(invalid(format!(
                "Requested version {version} is older than the node group's \
                version {}; downgrades are not supported.",
                spec.version
            )));
        }
        let release = match opt_str(&req, "releaseVersion")? {
            Some(r) if !r.starts_with(&format!("{version}.")) => {
                return Err(invalid(format!(
                    "Requested release version {r} is not valid for kubernetes version {version}."
                )));
            }
            Some(r) => r.to_string(),
            None if version == EKS_VERSION => RELEASE_VERSION.to_string(),
            None => format!("{version}.10-20251120"),
        };
        check_ami_version(&spec.ami_type, version)?;
        spec.version = version.to_string();
        spec.release_version = release.clone();
        let mut params = vec![
            ("Version".to_string(), version.to_string()),
            ("ReleaseVersion".to_string(), release),
        ];
        // A new version of the group's own launch template (EKS API reference,
        // UpdateNodegroupVersion: "You can update a node group using a launch template only if the
        // node group was originally deployed with a launch template"; the template itself cannot
        // change, only its version). The messages for a group without one and for another
        // template are the sandbox's own.
        if let Some(want) = launch_template_spec(&req)? {
            let Some(current) = &spec.launch_template else {
                return Err(invalid(format!(
                    "Nodegroup {ng} was not created with a launch template, so it can't be \
                     updated with one."
                )));
            };
            let same = if want.id.is_empty() {
                want.name == current.name
            } else {
                want.id == current.id
            };
            if !same {
                return Err(invalid(format!(
                    "Nodegroup {ng} uses launch template {} ({}); a node group's launch template \
                     can't be changed, only its version.",
                    current.name, current.id
                )));
            }
            let resolved = resolve_template(&w.eks, region, &want)?;
            params.push(("LaunchTemplateName".to_string(), resolved.name.clone()));
            params.push((
                "LaunchTemplateVersion".to_string(),
                resolved.version.clone(),
            ));
            spec.launch_template = Some(resolved);
        }
        let key = format!("{region}/{c}");
        let doc = start_update(w, ctx, &key, ng, spec, "VersionUpdate", params);
        Ok(json_response(StatusCode::OK, &json!({ "update": doc })))
    })
}
