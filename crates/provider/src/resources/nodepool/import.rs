//! How a pool is named from outside: the clouds' own IDs (`terraform import`, `import { id }`)
//! and the resource identity (terraform 1.12 and later: `import { identity }`, list results),
//! which spells the same coordinates out as attributes.

use crate::cloud::Location;
use crate::provider::Settings;
use tfplugin::api::{IdentityAttribute, IdentitySchema};
use tfplugin::{Diagnostic, Diagnostics, Type, Value};

/// The identity's attributes: the cloud, the cluster's coordinates there, and the pool's name.
/// One flat object for the three clouds, the coordinates of the others null, so that one module
/// can import pools on any of them.
pub fn identity_schema() -> IdentitySchema {
    let attr = |name, required, description| IdentityAttribute {
        name,
        ty: Type::String,
        required_for_import: required,
        optional_for_import: !required,
        description,
    };
    IdentitySchema {
        version: 0,
        attributes: vec![
            attr("cloud", true, "`aks`, `gke` or `eks`."),
            attr("name", true, "Name of the pool (the node group on EKS)."),
            attr("cluster", true, "Name of the cluster."),
            attr(
                "subscription_id",
                false,
                "AKS: the cluster's subscription. Default: the provider's.",
            ),
            attr(
                "resource_group",
                false,
                "AKS: the cluster's resource group (required on AKS).",
            ),
            attr(
                "project",
                false,
                "GKE: the cluster's project. Default: the provider's.",
            ),
            attr(
                "location",
                false,
                "GKE: the cluster's region or zone (required on GKE).",
            ),
            attr(
                "region",
                false,
                "EKS: the cluster's region. Default: the provider's.",
            ),
        ],
    }
}

/// The identity of the pool `name` at `loc`, every attribute of the other clouds null.
pub fn identity(loc: &Location, name: &str) -> Value {
    let (cloud, cluster) = match loc {
        Location::Aks { cluster, .. }
        | Location::Gke { cluster, .. }
        | Location::Eks { cluster, .. } => (loc.cloud(), cluster),
    };
    let mut v = Value::object([
        ("cloud", cloud.into()),
        ("name", name.into()),
        ("cluster", cluster.as_str().into()),
        ("subscription_id", Value::Null),
        ("resource_group", Value::Null),
        ("project", Value::Null),
        ("location", Value::Null),
        ("region", Value::Null),
    ]);
    let mut set = |k: &str, val: &str| *v.get_mut(k).expect("declared") = val.into();
    match loc {
        Location::Aks {
            subscription_id,
            resource_group,
            ..
        } => {
            set("subscription_id", subscription_id);
            set("resource_group", resource_group);
        }
        Location::Gke {
            project, location, ..
        } => {
            set("project", project);
            set("location", location);
        }
        Location::Eks { region, .. } => set("region", region),
    }
    v
}

/// Where an identity from an `import` block points, with the provider's defaults for what it
/// leaves out; what it lacks or mixes up is an error naming the attribute to set.
pub fn parse_identity(
    identity: &Value,
    settings: &Settings,
    diags: &mut Diagnostics,
) -> Option<(Location, String)> {
    let get = |k: &str| {
        identity
            .get(k)
            .as_str()
            .filter(|s| !s.is_empty())
            .map(str::to_string)
    };
    let mut fail = |detail: String| {
        diags.push(Diagnostic::error("Invalid import identity", detail));
        None
    };
    let (Some(cloud), Some(name), Some(cluster)) = (get("cloud"), get("name"), get("cluster"))
    else {
        return fail(
            "The identity of a fracgpu_nodepool needs `cloud`, `cluster` and `name`.".into(),
        );
    };
    let others: &[&str] = match cloud.as_str() {
        "aks" => &["project", "location", "region"],
        "gke" => &["subscription_id", "resource_group", "region"],
        "eks" => &["subscription_id", "resource_group", "project", "location"],
        _ => return fail(format!("`cloud` is {cloud:?}; use `aks`, `gke` or `eks`.")),
    };
    if let Some(k) = others.iter().find(|k| get(k).is_some()) {
        return fail(format!(
            "`{k}` does not belong to a pool on {}; remove it.",
            cloud.to_uppercase()
        ));
    }
    let missing = |what: &str, attr: &str, fix: &str| {
        format!(
            "A pool on {} needs `{attr}` ({what}){fix}.",
            cloud.to_uppercase()
        )
    };
    let loc = match cloud.as_str() {
        "aks" => {
            let sub =
                get("subscription_id").or_else(|| settings.cloud.azure.subscription_id.clone());
            let (Some(subscription_id), Some(resource_group)) = (sub, get("resource_group")) else {
                return fail(if get("resource_group").is_none() {
                    missing("the cluster's resource group", "resource_group", "")
                } else {
                    missing(
                        "the cluster's subscription",
                        "subscription_id",
                        ", or the provider's `azure.subscription_id` or ARM_SUBSCRIPTION_ID",
                    )
                });
            };
            Location::Aks {
                subscription_id,
                resource_group,
                cluster,
            }
        }
        "gke" => {
            let project = get("project").or_else(|| settings.cloud.google.project.clone());
            let (Some(project), Some(location)) = (project, get("location")) else {
                return fail(if get("location").is_none() {
                    missing("the cluster's region or zone", "location", "")
                } else {
                    missing(
                        "the cluster's project",
                        "project",
                        ", or the provider's `google.project` or GOOGLE_PROJECT",
                    )
                });
            };
            Location::Gke {
                project,
                location,
                cluster,
            }
        }
        _ => {
            let Some(region) = get("region").or_else(|| settings.cloud.aws.region.clone()) else {
                return fail(missing(
                    "the cluster's region",
                    "region",
                    ", or the provider's `aws.region` or AWS_REGION",
                ));
            };
            Location::Eks { region, cluster }
        }
    };
    Some((loc, name))
}

/// Parses the clouds' own IDs (see the import diagnostic for the three forms).
pub fn parse_import_id(id: &str, settings: &Settings) -> Option<(Location, String)> {
    let parts: Vec<&str> = id.trim_matches('/').split('/').collect();
    let eq = |a: &str, b: &str| a.eq_ignore_ascii_case(b);
    if parts.len() == 10
        && eq(parts[0], "subscriptions")
        && eq(parts[2], "resourceGroups")
        && eq(parts[4], "providers")
        && eq(parts[5], "Microsoft.ContainerService")
        && eq(parts[6], "managedClusters")
        && eq(parts[8], "agentPools")
    {
        let loc = Location::Aks {
            subscription_id: parts[1].into(),
            resource_group: parts[3].into(),
            cluster: parts[7].into(),
        };
        return Some((loc, parts[9].into()));
    }
    if parts.len() == 8
        && parts[0] == "projects"
        && parts[2] == "locations"
        && parts[4] == "clusters"
        && parts[6] == "nodePools"
    {
        let loc = Location::Gke {
            project: parts[1].into(),
            location: parts[3].into(),
            cluster: parts[5].into(),
        };
        return Some((loc, parts[7].into()));
    }
    if let Some((cluster, group)) = id.split_once(':')
        && !cluster.is_empty()
        && !group.is_empty()
        && !id.contains('/')
    {
        let region = settings.cloud.aws.region.clone()?;
        return Some((
            Location::Eks {
                region,
                cluster: cluster.into(),
            },
            group.into(),
        ));
    }
    None
}
