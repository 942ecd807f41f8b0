//! `fracgpu_nodepool`: a GPU node pool on AKS, GKE or EKS, prepared for sharing by MIG,
//! time-slicing or MPS. In the fixed order: schema, model, plan, create, read, update, delete,
//! import. The cloud work lives in `cloud/`, the sharing rules in `gpu/`.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;

use crate::cloud::{
    self, CloudError, EksPoolFields, Location, OpCtx, Pool, PoolGpu, PoolTaint, Scaling, StopSignal,
};
use crate::model::{self, domain_diagnostic};
use crate::provider::{ProviderState, Settings};
use gpu::{self, Cloud, DEVICE_PLUGIN_CONFIG_LABEL, Field, MIG_CONFIG_LABEL, SharingMode};
use tfplugin::api::{PlanRequest, Private, Resource};
use tfplugin::plan::{Planned, Timeouts};
use tfplugin::schema::{Attribute, Block, Nesting, Schema};
use tfplugin::validators::{ConflictsWith, ExactlyOneOf, IntBetween, OneOf};
use tfplugin::{AttrPath, Diagnostic, Diagnostics, Type, Value};

pub const TYPE_NAME: &str = "fracgpu_nodepool";
/// A create, update or delete waits for the cloud's operation; a read is one GET with retries,
/// and past its limit an API that does not answer fails the refresh.
const TIMEOUTS: Timeouts = Timeouts(&[
    ("create", Duration::from_secs(45 * 60)),
    ("read", Duration::from_secs(120)),
    ("update", Duration::from_secs(45 * 60)),
    ("delete", Duration::from_secs(45 * 60)),
]);
pub const DEFAULT_EKS_AMI: &str = "AL2023_x86_64_NVIDIA";
const EKS_GPU_AMIS: &[&str] = &[
    "AL2023_x86_64_NVIDIA",
    "AL2023_ARM_64_NVIDIA",
    "AL2_x86_64_GPU",
    "BOTTLEROCKET_x86_64_NVIDIA",
    "BOTTLEROCKET_ARM_64_NVIDIA",
];
const AKS_OS_SKUS: &[&str] = &[
    "Ubuntu",
    "Ubuntu2204",
    "Ubuntu2404",
    "AzureLinux",
    "AzureLinux3",
];

// ---------------------------------------------------------------------------------------------
// Schema

pub fn schema() -> Schema {
    let aks = Block::new("Azure Kubernetes Service: the cluster the pool joins. Changing any argument replaces the pool.")
        .attr(Attribute::string("subscription_id").optional().computed().requires_replace().describe("Subscription of the cluster. Default: the provider's `azure.subscription_id` or `ARM_SUBSCRIPTION_ID`."))
        .attr(Attribute::string("resource_group").required().requires_replace().describe("Resource group of the cluster."))
        .attr(Attribute::string("cluster_name").required().requires_replace().describe("Name of the AKS cluster."))
        .attr(Attribute::string("os_sku").optional().computed().use_state_for_unknown().requires_replace().describe("Node OS image (`osSKU`). Default: AKS's (Ubuntu). MIG is not available on Azure Linux.").validate(OneOf(AKS_OS_SKUS)));
    let gke = Block::new("Google Kubernetes Engine: the cluster the pool joins. Changing any argument replaces the pool.")
        .attr(Attribute::string("project").optional().computed().requires_replace().describe("Project of the cluster. Default: the provider's `google.project`, `GOOGLE_PROJECT` or `GOOGLE_CLOUD_PROJECT`."))
        .attr(Attribute::string("location").required().requires_replace().describe("Region or zone of the cluster, e.g. `us-central1`."))
        .attr(Attribute::string("cluster").required().requires_replace().describe("Name of the GKE cluster."));
    let eks = Block::new("Amazon EKS: the cluster the managed node group joins. Changing any argument replaces the node group.")
        .attr(Attribute::string("region").optional().computed().requires_replace().describe("Region of the cluster. Default: the provider's `aws.region`, `AWS_REGION` or `AWS_DEFAULT_REGION`."))
        .attr(Attribute::string("cluster_name").required().requires_replace().describe("Name of the EKS cluster."))
        .attr(Attribute::string("node_role_arn").required().requires_replace().describe("IAM role of the nodes."))
        .attr(Attribute::new("subnet_ids", Type::list(Type::String)).required().requires_replace().describe("Subnets of the nodes."))
        .attr(
            Attribute::string("ami_type")
                .optional()
                .computed()
                .requires_replace()
                .describe(&format!("GPU AMI type. Default `{DEFAULT_EKS_AMI}`."))
                .validate(OneOf(EKS_GPU_AMIS)),
        );
    let autoscaling = Block::new(
        "Let the cloud's autoscaler size the pool between two bounds (instead of `node_count`).",
    )
    .attr(
        Attribute::number("min_nodes")
            .required()
            .describe("Fewest nodes; 0 lets an idle pool scale to zero.")
            .validate(IntBetween(0, 1000)),
    )
    .attr(
        Attribute::number("max_nodes")
            .required()
            .describe("Most nodes.")
            .validate(IntBetween(1, 1000)),
    );
    let gpu = vec![
        Attribute::string("model")
            .computed()
            .describe("GPU model id, e.g. `A100-80GB`."),
        Attribute::number("count")
            .computed()
            .describe("GPUs per node."),
        Attribute::number("memory_mb")
            .computed()
            .describe("Memory per GPU in MiB."),
    ];
    let block = Block::new(
        "A GPU node pool on AKS, GKE or EKS prepared for sharing its GPUs by MIG partitions, time-slicing or MPS. Everything the provider's GPU catalog can check is checked at plan time; the computed attributes tell workloads what to request and where to land.",
    )
    .attr(Attribute::string("id").computed().use_state_for_unknown().describe("The cloud's ID: the ARM resource ID (AKS), `projects/P/locations/L/clusters/C/nodePools/N` (GKE) or `cluster:nodegroup` (EKS)."))
    .attr(Attribute::string("name").required().requires_replace().describe("Name of the pool (AKS: 1-12 lowercase letters and digits; GKE: 1-40 lowercase letters, digits, `-`; EKS: 1-63)."))
    .attr(Attribute::string("machine_type").required().requires_replace().describe("VM size, machine type or instance type with GPUs, e.g. `Standard_NC24ads_A100_v4`, `a2-highgpu-1g`, `p4d.24xlarge`."))
    .attr(Attribute::string("gpu_model").optional().requires_replace().describe("Overrides the catalog's GPU model (e.g. `nvidia-tesla-t4` for GKE n1 machine types). Default: the catalog's model for `machine_type`."))
    .attr(Attribute::number("gpu_count").optional().requires_replace().describe("Overrides the catalog's GPUs per node. Default: the catalog's count for `machine_type`.").validate(IntBetween(1, 16)))
    .attr(Attribute::number("node_count").optional().computed().use_state_for_unknown().describe("Fixed number of nodes when `autoscaling` is not set. Default 1. Changes in place.").validate(IntBetween(0, 1000)))
    .attr(Attribute::bool("spot").optional().computed().requires_replace().describe("Spot / preemptible capacity. Default `false`."))
    .attr(Attribute::number("disk_size_gb").optional().computed().use_state_for_unknown().requires_replace().describe("OS disk size in GB. Default: the cloud's (read back after create).").validate(IntBetween(10, 65536)))
    .attr(Attribute::new("labels", Type::map(Type::String)).optional().describe("Node labels of your own. Default none. Changes in place."))
    .attr(model::taints_attribute("Node taints. Default: `nvidia.com/gpu=Present:NoSchedule`, so only pods that tolerate it land on GPU nodes; set `[]` for none. Changes in place.").optional().computed())
    .attr(Attribute::nested("gpu", Nesting::Single, gpu).computed().describe("The GPUs of each node."))
    .attr(Attribute::string("device_plugin_config_name").computed().describe("The NVIDIA device plugin config the nodes select through the `nvidia.com/device-plugin.config` label (AKS, EKS); null on GKE. Plug it into `fracgpu_device_plugin_config`."))
    .attr(Attribute::string("device_plugin_config").computed().describe("That config's YAML, as the device plugin reads it."))
    .attr(Attribute::string("resource_name").computed().describe("The extended resource workloads request, e.g. `nvidia.com/gpu` or `nvidia.com/mig-1g.10gb`."))
    .attr(Attribute::number("slices_per_node").computed().describe("Schedulable GPU units per node."))
    .attr(Attribute::number("memory_per_slice_mb").computed().describe("GPU memory of one unit in MiB (enforced by MIG and MPS only)."))
    .attr(Attribute::new("node_selector", Type::map(Type::String)).computed().describe("Labels that pin a workload to this pool's nodes."))
    .attr(model::tolerations_attribute("Tolerations for the pool's taints."))
    .attr(Attribute::new("node_labels", Type::map(Type::String)).computed().describe("Every label the provider sets on the nodes: yours and the ones sharing needs."))
    .attr(Attribute::string("status").computed().describe("The cloud's provisioning state (`Succeeded`, `RUNNING`, `ACTIVE`)."))
    .single_block("aks", aks)
    .single_block("gke", gke)
    .single_block("eks", eks)
    .single_block("autoscaling", autoscaling)
    .single_block("timeouts", TIMEOUTS.block())
    .validate(ExactlyOneOf(&["aks", "gke", "eks"]))
    .validate(ConflictsWith(&["node_count", "autoscaling"]));
    Schema::new(0, model::sharing_blocks(block, false))
}

// ---------------------------------------------------------------------------------------------
// Model: configuration or state value <-> cloud-neutral pool spec

/// Domain fields whose attribute has another name here.
const RENAME: &[(Field, &str)] = &[];

fn block_of<'a>(v: &'a Value, name: &str) -> Option<&'a Value> {
    v.get(name).elements().first()
}

fn opt_u32(v: &Value) -> Option<u32> {
    v.as_i64().and_then(|i| u32::try_from(i).ok())
}

fn str_map(v: &Value) -> BTreeMap<String, String> {
    v.entries()
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
                .collect()
        })
        .unwrap_or_default()
}

/// The cloud and location named by the `aks`/`gke`/`eks` block, with provider defaults applied.
fn location(v: &Value, settings: &Settings, diags: &mut Diagnostics) -> Option<Location> {
    let s = |b: &Value, k: &str| b.get(k).as_str().map(str::to_string);
    if let Some(b) = block_of(v, "aks") {
        let Some(subscription_id) =
            s(b, "subscription_id").or_else(|| settings.cloud.azure.subscription_id.clone())
        else {
            diags.push(
                Diagnostic::error(
                    "Missing Azure subscription",
                    "Set aks.subscription_id, the provider's azure.subscription_id, or ARM_SUBSCRIPTION_ID.",
                )
                .at(AttrPath::attr("aks").with_index(0).with_attr("subscription_id")),
            );
            return None;
        };
        return Some(Location::Aks {
            subscription_id,
            resource_group: s(b, "resource_group")?,
            cluster: s(b, "cluster_name")?,
        });
    }
    if let Some(b) = block_of(v, "gke") {
        let Some(project) = s(b, "project").or_else(|| settings.cloud.google.project.clone())
        else {
            diags.push(
                Diagnostic::error(
                    "Missing Google Cloud project",
                    "Set gke.project, the provider's google.project, or GOOGLE_PROJECT.",
                )
                .at(AttrPath::attr("gke").with_index(0).with_attr("project")),
            );
            return None;
        };
        return Some(Location::Gke {
            project,
            location: s(b, "location")?,
            cluster: s(b, "cluster")?,
        });
    }
    if let Some(b) = block_of(v, "eks") {
        let region = s(b, "region").or_else(|| settings.cloud.aws.region.clone());
        let Some(region) = region else {
            diags.push(
                Diagnostic::error(
                    "Missing AWS region",
                    "Set eks.region, the provider's aws.region, or AWS_REGION.",
                )
                .at(AttrPath::attr("eks").with_index(0).with_attr("region")),
            );
            return None;
        };
        return Some(Location::Eks {
            region,
            cluster: s(b, "cluster_name")?,
        });
    }
    None
}

fn cloud_of(loc: &Location) -> Cloud {
    match loc {
        Location::Aks { .. } => Cloud::Aks,
        Location::Gke { .. } => Cloud::Gke,
        Location::Eks { .. } => Cloud::Eks,
    }
}

/// Everything a pool value means: where it lives, what the domain derives from it, and the spec
/// to hand to the cloud.
pub struct Resolved {
    pub cloud: Cloud,
    pub derived: gpu::Derived,
    pub spec: cloud::PoolSpec,
}

/// Resolves a fully known configuration, plan or state value. Problems become diagnostics on
/// the attribute the user wrote; `None` means it cannot be resolved (yet).
fn resolve(v: &Value, settings: &Settings, diags: &mut Diagnostics) -> Option<Resolved> {
    let inputs = ["name", "machine_type", "gpu_model", "gpu_count", "labels"];
    if inputs.iter().any(|n| !v.get(n).is_fully_known()) {
        return None;
    }
    // Location fields the pool cannot do without must be known; computed extras (os_sku) need not.
    let required: [(&str, &[&str]); 3] = [
        (
            "aks",
            &["subscription_id", "resource_group", "cluster_name"],
        ),
        ("gke", &["project", "location", "cluster"]),
        (
            "eks",
            &[
                "region",
                "cluster_name",
                "node_role_arn",
                "subnet_ids",
                "ami_type",
            ],
        ),
    ];
    for (block, keys) in required {
        if let Some(b) = block_of(v, block)
            && keys.iter().any(|k| !b.get(k).is_fully_known())
        {
            return None;
        }
    }
    let loc = location(v, settings, diags)?;
    let cloud = cloud_of(&loc);
    let name = v.get("name").as_str()?.to_string();
    let machine = v.get("machine_type").as_str()?;
    let hardware = match gpu::resolve_hardware(
        cloud,
        machine,
        v.get("gpu_model").as_str(),
        opt_u32(v.get("gpu_count")),
    ) {
        Ok(h) => h,
        Err(errors) => {
            for e in &errors {
                diags.push(domain_diagnostic(e, RENAME));
            }
            return None;
        }
    };
    let sharing = model::sharing_mode(v)?;
    let taints = model::taints(v)?;
    let labels = str_map(v.get("labels"));
    let os_sku = block_of(v, "aks")
        .and_then(|b| b.get("os_sku").as_str())
        .map(str::to_string);
    let mut errors = Vec::new();
    if let Some(sku) = &os_sku
        && let Err(e) = gpu::check_aks_os_sku(&sharing, sku)
    {
        errors.push(e);
    }
    let machine_type = hardware.machine_type.clone();
    let derived = match gpu::validate(&gpu::PoolSpec {
        cloud,
        pool_name: name.clone(),
        hardware,
        sharing,
        taints,
        labels: labels.clone(),
    }) {
        Ok(d) => d,
        Err(mut es) => {
            errors.append(&mut es);
            for e in &errors {
                let mut d = domain_diagnostic(e, RENAME);
                if e.field == Field::OsSku {
                    d.path = Some(AttrPath::attr("aks").with_index(0).with_attr("os_sku"));
                }
                diags.push(d);
            }
            return None;
        }
    };
    if let Some(e) = errors.first() {
        diags.push(
            domain_diagnostic(e, RENAME)
                .at(AttrPath::attr("aks").with_index(0).with_attr("os_sku")),
        );
        return None;
    }
    let scaling = match block_of(v, "autoscaling") {
        Some(a) => {
            let (min, max) = (opt_u32(a.get("min_nodes"))?, opt_u32(a.get("max_nodes"))?);
            if min > max {
                diags.push(
                    Diagnostic::error(
                        "Invalid autoscaling bounds",
                        format!("autoscaling.min_nodes ({min}) is above max_nodes ({max}); make min_nodes at most max_nodes."),
                    )
                    .at(AttrPath::attr("autoscaling").with_index(0).with_attr("min_nodes")),
                );
                return None;
            }
            Scaling::Auto { min, max }
        }
        None => Scaling::Fixed {
            nodes: opt_u32(v.get("node_count")).unwrap_or(1),
        },
    };
    let mut node_labels = labels;
    node_labels.extend(derived.node_labels.clone());
    let eks = block_of(v, "eks").map(|b| EksPoolFields {
        node_role_arn: b
            .get("node_role_arn")
            .as_str()
            .unwrap_or_default()
            .to_string(),
        subnet_ids: b
            .get("subnet_ids")
            .elements()
            .iter()
            .filter_map(|s| s.as_str().map(str::to_string))
            .collect(),
        ami_type: b
            .get("ami_type")
            .as_str()
            .unwrap_or(DEFAULT_EKS_AMI)
            .to_string(),
    });
    let spec = cloud::PoolSpec {
        location: loc,
        name,
        machine_type,
        scaling,
        spot: v.get("spot").as_bool().unwrap_or(false),
        disk_size_gb: opt_u32(v.get("disk_size_gb")),
        labels: node_labels,
        taints: derived
            .taints
            .iter()
            .map(|t| PoolTaint {
                key: t.key.to_string(),
                value: t.value.to_string(),
                effect: t.effect.as_str().to_string(),
            })
            .collect(),
        gpu: PoolGpu {
            count: derived.gpus_per_node,
            gke_accelerator_type: derived
                .gke_accelerator
                .as_ref()
                .map(|a| a.accelerator_type.to_string()),
            gke_partition_size: derived
                .gke_accelerator
                .as_ref()
                .and_then(|a| a.gpu_partition_size)
                .map(str::to_string),
            gke_sharing: derived
                .gke_accelerator
                .as_ref()
                .and_then(|a| a.sharing)
                .map(|s| match s.strategy {
                    gpu::GkeSharingStrategy::TimeSharing => cloud::GkeSharing::TimeSharing {
                        max_clients: s.max_clients,
                    },
                    gpu::GkeSharingStrategy::Mps => cloud::GkeSharing::Mps {
                        max_clients: s.max_clients,
                    },
                }),
            aks_gpu_instance_profile: derived
                .aks_gpu_instance_profile
                .map(|p| p.as_str().to_string()),
        },
        os_sku,
        eks,
    };
    Some(Resolved {
        cloud,
        derived,
        spec,
    })
}

fn set(v: &mut Value, k: &str, new: Value) {
    if let Some(slot) = v.get_mut(k) {
        *slot = new;
    }
}

fn set_in_block(v: &mut Value, block: &str, k: &str, new: Value) {
    if let Some(Value::List(items)) = v.get_mut(block)
        && let Some(first) = items.first_mut()
    {
        set(first, k, new);
    }
}

/// Writes the derived, read-only facts into a plan or state value.
fn write_derived(v: &mut Value, d: &gpu::Derived) {
    set(
        v,
        "gpu",
        Value::object([
            ("model", d.gpu.id.into()),
            ("count", Value::int(d.gpus_per_node.into())),
            ("memory_mb", Value::int(d.gpu.memory_mib.into())),
        ]),
    );
    set(
        v,
        "device_plugin_config_name",
        Value::opt_string(d.device_plugin_config.as_ref().map(|c| c.name.clone())),
    );
    set(
        v,
        "device_plugin_config",
        Value::opt_string(
            d.device_plugin_config
                .as_ref()
                .and_then(|c| c.config.render().ok()),
        ),
    );
    set(v, "resource_name", Value::string(d.resource_name.clone()));
    set(v, "slices_per_node", Value::int(d.slices_per_node.into()));
    set(
        v,
        "memory_per_slice_mb",
        Value::int(d.memory_per_slice_mib.into()),
    );
    set(v, "node_selector", model::string_map(&d.node_selector));
    set(v, "tolerations", model::tolerations_value(&d.tolerations));
}

fn taints_value(taints: &[PoolTaint]) -> Value {
    Value::List(
        taints
            .iter()
            .map(|t| {
                Value::object([
                    ("key", Value::string(t.key.clone())),
                    (
                        "value",
                        if t.value.is_empty() {
                            Value::Null
                        } else {
                            Value::string(t.value.clone())
                        },
                    ),
                    ("effect", Value::string(t.effect.clone())),
                ])
            })
            .collect(),
    )
}

/// The sharing blocks for a mode, with every optional attribute spelled out (as plan fills them).
fn write_sharing(v: &mut Value, mode: &SharingMode) {
    let one = |o: Value| Value::List(vec![o]);
    let (mut mig, mut ts, mut mps) = (
        Value::List(vec![]),
        Value::List(vec![]),
        Value::List(vec![]),
    );
    match mode {
        SharingMode::None => {}
        SharingMode::Mig {
            profile,
            strategy,
            gke_sharing,
        } => {
            let gs = match gke_sharing {
                Some(s) => one(Value::object([
                    ("strategy", s.strategy.label_value().into()),
                    ("max_clients", Value::int(s.max_clients.into())),
                ])),
                None => Value::List(vec![]),
            };
            mig = one(Value::object([
                ("profile", Value::string(profile.clone())),
                ("strategy", strategy.as_str().into()),
                ("gke_sharing", gs),
            ]));
        }
        SharingMode::TimeSlicing {
            replicas,
            rename_by_default,
            fail_requests_greater_than_one,
        } => {
            ts = one(Value::object([
                ("replicas", Value::int((*replicas).into())),
                ("rename_by_default", Value::Bool(*rename_by_default)),
                (
                    "fail_requests_greater_than_one",
                    Value::Bool(*fail_requests_greater_than_one),
                ),
            ]));
        }
        SharingMode::Mps { replicas } => {
            mps = one(Value::object([(
                "replicas",
                Value::int((*replicas).into()),
            )]))
        }
    }
    set(v, "mig", mig);
    set(v, "time_slicing", ts);
    set(v, "mps", mps);
}

/// Fills what the configuration leaves to defaults, so the plan shows the values the pool will
/// have (and an imported pool, read back with the same values, plans empty). A default applies
/// whenever the configuration leaves the attribute null, so drift away from it is repaired.
fn fill_defaults(v: &mut Value, config: &Value, settings: &Settings) {
    if config.get("spot").is_null() {
        set(v, "spot", Value::Bool(false));
    }
    if config.get("node_count").is_null() {
        let fixed = v.get("autoscaling").elements().is_empty();
        let keep = v.get("node_count").is_known() && !v.get("node_count").is_null();
        if !fixed {
            set(v, "node_count", Value::Null);
        } else if !keep {
            set(v, "node_count", Value::int(1));
        }
    }
    if config.get("taints").is_null() {
        set(
            v,
            "taints",
            taints_value(&[PoolTaint {
                key: "nvidia.com/gpu".into(),
                value: "Present".into(),
                effect: "NoSchedule".into(),
            }]),
        );
    }
    let cfg_block = |block: &str, k: &str| {
        block_of(config, block)
            .map(|b| b.get(k).is_null())
            .unwrap_or(true)
    };
    if block_of(v, "mig").is_some() && cfg_block("mig", "strategy") {
        set_in_block(v, "mig", "strategy", "mixed".into());
    }
    if block_of(v, "time_slicing").is_some() {
        for k in ["rename_by_default", "fail_requests_greater_than_one"] {
            if cfg_block("time_slicing", k) {
                set_in_block(v, "time_slicing", k, Value::Bool(false));
            }
        }
    }
    let region = settings.cloud.aws.region.clone();
    for (block, k, default) in [
        (
            "aks",
            "subscription_id",
            settings.cloud.azure.subscription_id.clone(),
        ),
        ("gke", "project", settings.cloud.google.project.clone()),
        ("eks", "region", region),
        ("eks", "ami_type", Some(DEFAULT_EKS_AMI.to_string())),
    ] {
        if block_of(v, block).is_some() && cfg_block(block, k) {
            set_in_block(v, block, k, Value::opt_string(default));
        }
    }
}

/// Stands in for provider defaults during validation, which runs before the provider is
/// configured: a missing subscription, project or region is reported at plan time instead.
fn validation_settings() -> Settings {
    let mut s = Settings::default();
    s.cloud.azure.subscription_id = Some("validation".into());
    s.cloud.google.project = Some("validation".into());
    s.cloud.aws.region = Some("validation".into());
    s
}

/// The state value for a pool as the cloud reports it. `prior` (state or plan) supplies what the
/// cloud does not record: the spelling the user chose, GPU overrides, timeouts.
fn state_from_pool(
    pool: &Pool,
    prior: &Value,
    settings: &Settings,
    diags: &mut Diagnostics,
) -> Option<Value> {
    let schema_ty = schema().ty();
    let mut v = if prior.is_null() {
        Value::null_object(&schema_ty)
    } else {
        prior.clone()
    };
    let spec = &pool.spec;
    set(&mut v, "id", Value::string(pool.id.clone()));
    set(&mut v, "name", Value::string(spec.name.clone()));
    let user_spelling = prior
        .get("machine_type")
        .as_str()
        .filter(|m| m.eq_ignore_ascii_case(&spec.machine_type));
    set(
        &mut v,
        "machine_type",
        Value::string(user_spelling.unwrap_or(&spec.machine_type).to_string()),
    );
    let obj = |pairs: Vec<(&str, Value)>| Value::List(vec![Value::object(pairs)]);
    let empty = Value::List(vec![]);
    let (aks, gke, eks) = match &spec.location {
        Location::Aks {
            subscription_id,
            resource_group,
            cluster,
        } => (
            obj(vec![
                ("subscription_id", Value::string(subscription_id.clone())),
                ("resource_group", Value::string(resource_group.clone())),
                ("cluster_name", Value::string(cluster.clone())),
                ("os_sku", Value::opt_string(spec.os_sku.clone())),
            ]),
            empty.clone(),
            empty.clone(),
        ),
        Location::Gke {
            project,
            location,
            cluster,
        } => (
            empty.clone(),
            obj(vec![
                ("project", Value::string(project.clone())),
                ("location", Value::string(location.clone())),
                ("cluster", Value::string(cluster.clone())),
            ]),
            empty.clone(),
        ),
        Location::Eks { region, cluster } => {
            let f = spec.eks.clone().unwrap_or_default();
            (
                empty.clone(),
                empty.clone(),
                obj(vec![
                    ("region", Value::string(region.clone())),
                    ("cluster_name", Value::string(cluster.clone())),
                    ("node_role_arn", Value::string(f.node_role_arn)),
                    (
                        "subnet_ids",
                        Value::List(f.subnet_ids.into_iter().map(Value::String).collect()),
                    ),
                    ("ami_type", Value::string(f.ami_type)),
                ]),
            )
        }
    };
    set(&mut v, "aks", aks);
    set(&mut v, "gke", gke);
    set(&mut v, "eks", eks);
    match spec.scaling {
        Scaling::Fixed { nodes } => {
            set(&mut v, "node_count", Value::int(nodes.into()));
            set(&mut v, "autoscaling", Value::List(vec![]));
        }
        Scaling::Auto { min, max } => {
            set(&mut v, "node_count", Value::Null);
            set(
                &mut v,
                "autoscaling",
                obj(vec![
                    ("min_nodes", Value::int(min.into())),
                    ("max_nodes", Value::int(max.into())),
                ]),
            );
        }
    }
    set(&mut v, "spot", Value::Bool(spec.spot));
    set(
        &mut v,
        "disk_size_gb",
        spec.disk_size_gb
            .map(|d| Value::int(d.into()))
            .unwrap_or(Value::Null),
    );
    set(&mut v, "taints", taints_value(&spec.taints));

    // Sharing, read back from what the cloud holds, so a changed label shows as drift.
    let cloud = cloud_of(&spec.location);
    let hardware = match gpu::resolve_hardware(
        cloud,
        &spec.machine_type,
        prior.get("gpu_model").as_str(),
        opt_u32(prior.get("gpu_count")),
    ) {
        Ok(h) => h,
        Err(errors) => {
            for e in &errors {
                diags.push(domain_diagnostic(e, RENAME));
            }
            return None;
        }
    };
    let prior_mode = model::sharing_mode(prior);
    let observed = gpu::Observed {
        cloud,
        gpu: hardware.gpu,
        labels: &spec.labels,
        aks_gpu_instance_profile: spec.gpu.aks_gpu_instance_profile.as_deref(),
        gke_partition_size: spec.gpu.gke_partition_size.as_deref(),
        gke_sharing: spec.gpu.gke_sharing.map(|s| match s {
            cloud::GkeSharing::TimeSharing { max_clients } => gpu::GkeSharing {
                strategy: gpu::GkeSharingStrategy::TimeSharing,
                max_clients,
            },
            cloud::GkeSharing::Mps { max_clients } => gpu::GkeSharing {
                strategy: gpu::GkeSharingStrategy::Mps,
                max_clients,
            },
        }),
    };
    let mode = gpu::sharing_from_observed(&observed, prior_mode.as_ref());
    write_sharing(&mut v, &mode);
    // The user's own labels: everything but what sharing sets.
    let user: BTreeMap<String, String> = spec
        .labels
        .iter()
        .filter(|(k, _)| k.as_str() != DEVICE_PLUGIN_CONFIG_LABEL && k.as_str() != MIG_CONFIG_LABEL)
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let labels = if user.is_empty() && prior.get("labels").is_null() {
        Value::Null
    } else {
        model::string_map(&user)
    };
    set(&mut v, "labels", labels);
    set(&mut v, "node_labels", model::string_map(&spec.labels));
    set(&mut v, "status", Value::string(pool.status.clone()));
    // Derived facts follow from the state as read (when it is a valid pool).
    let mut quiet = Diagnostics::new();
    if let Some(r) = resolve(&v, settings, &mut quiet) {
        write_derived(&mut v, &r.derived);
    }
    Some(v)
}

fn cloud_diagnostic(action: &str, name: &str, e: &CloudError) -> Diagnostic {
    let (summary, fix) = match e {
        CloudError::Api {
            status: 401 | 403, ..
        }
        | CloudError::Auth(_) => (
            "Cloud credentials refused",
            "Check the provider's credentials for this cloud and their permissions.",
        ),
        CloudError::Api { status: 404, .. } => (
            "Cluster or pool not found",
            "Check the cluster block: the cluster must exist.",
        ),
        CloudError::Api { status: 409, .. } => (
            "Pool conflict",
            "A pool of this name exists or is busy; import it with `terraform import`, or wait and retry.",
        ),
        CloudError::Api { status: 429, .. } => (
            "Cloud API throttled",
            "The cloud kept answering \"too many requests\" after the provider's retries. Apply again later, or with a lower -parallelism.",
        ),
        CloudError::Api { status: 500.., .. } => (
            "Cloud API error",
            "The cloud failed on its side and kept failing after the provider's retries; nothing in the configuration needs to change. Apply again; what exists is kept in state.",
        ),
        CloudError::Api { .. } => (
            "Cloud API refused the request",
            "Fix the value the message names and apply again.",
        ),
        CloudError::OperationFailed { .. } => (
            "Cloud operation failed",
            "The pool is kept in state (tainted); the next apply replaces it. Check quotas and the message.",
        ),
        CloudError::Timeout { .. } => (
            "Timed out",
            "Raise the limit in the resource's timeouts block, or apply again: the provider picks up where the cloud is.",
        ),
        CloudError::Stopped => (
            "Interrupted",
            "Apply again to finish; what exists is kept in state.",
        ),
        CloudError::Transport(_) | CloudError::BadResponse(_) => (
            "Cloud API unreachable",
            "Check the endpoint and network, then apply again.",
        ),
    };
    // Clouds end their messages with a full stop; do not print two.
    let e = e.to_string();
    Diagnostic::error(
        summary,
        format!(
            "Could not {action} node pool {name:?}: {}. {fix}",
            e.trim_end_matches('.')
        ),
    )
}

/// How long the read that records a pool may take after terraform asked the provider to stop:
/// terraform waits for the answer before it exits, and the provider must answer within 2 s.
const READ_AFTER_STOP: Duration = Duration::from_secs(1);

/// The pool as the cloud holds it after a create or update failed with `e`, so that state can
/// record it: Some(None) when the cloud has no such pool, None when the cloud could not say.
async fn read_after_failure(
    client: &dyn cloud::NodePools,
    loc: &Location,
    name: &str,
    e: &CloudError,
) -> Option<Option<Pool>> {
    // The operation's time is already spent: after a stop the look gets a second, otherwise
    // SALVAGE_READ, so that an API which made the operation fail by never finishing its answers
    // cannot hold terraform for the resource's whole read timeout. The look runs past terraform's
    // stop on purpose (a signal that already fired would end it at once), bounded by `limit`.
    let limit = if matches!(e, CloudError::Stopped) {
        READ_AFTER_STOP
    } else {
        SALVAGE_READ
    };
    let ctx = OpCtx::new(limit, StopSignal::default());
    tokio::time::timeout(limit, client.get(loc, name, &ctx))
        .await
        .ok()?
        .ok()
}

/// Whether a create that failed with `e` may still have made the pool: anything but a refusal
/// (credentials, a request the API rejected, a pool that belongs to someone else).
fn may_have_created(e: &CloudError) -> bool {
    match e {
        CloudError::Auth(_) => false,
        CloudError::Api { status, .. } => {
            !matches!(status, 400..=499) || matches!(status, 408 | 429)
        }
        _ => true,
    }
}

/// The state of a pool whose create may have reached the cloud but that could not be read back:
/// the plan with its ID, and nothing unknown (terraform keeps unknowns out of state).
fn unread_pool(planned: &Value, spec: &cloud::PoolSpec) -> Value {
    let mut v = planned.unknowns_as_null();
    set(
        &mut v,
        "id",
        Value::string(spec.location.pool_id(&spec.name)),
    );
    set(&mut v, "status", Value::string("Unknown"));
    v
}

// ---------------------------------------------------------------------------------------------
// The resource

pub struct NodePool {
    state: Arc<ProviderState>,
}

impl NodePool {
    pub fn new(state: Arc<ProviderState>) -> NodePool {
        NodePool { state }
    }

    fn ctx(&self, v: &Value, op: &str) -> OpCtx {
        OpCtx::new(TIMEOUTS.of(v, op), self.state.stop.clone())
    }

    async fn client(
        &self,
        loc: &Location,
        diags: &mut Diagnostics,
    ) -> Option<Arc<dyn cloud::NodePools>> {
        match self.state.node_pools(loc.cloud()).await {
            Ok(c) => Some(c),
            Err(e) => {
                diags.push(Diagnostic::error(
                    "Cloud client unavailable",
                    format!("Could not set up the {} client: {e}. Configure the provider's credentials for it (or `sandbox`).", loc.cloud().to_uppercase()),
                ));
                None
            }
        }
    }
}

/// Per-cloud GPU settings that no cloud changes in place, as plan paths.
fn gpu_replacement(
    cloud: Cloud,
    old: &cloud::PoolSpec,
    new: &cloud::PoolSpec,
    prior: &Value,
    planned: &Value,
) -> Vec<AttrPath> {
    let immutable_changed = match cloud {
        Cloud::Aks => old.gpu.aks_gpu_instance_profile != new.gpu.aks_gpu_instance_profile,
        Cloud::Gke => old.gpu != new.gpu,
        // EKS expresses sharing with node labels only; all of it changes in place.
        Cloud::Eks => false,
    };
    if !immutable_changed {
        return Vec::new();
    }
    ["mig", "time_slicing", "mps"]
        .into_iter()
        .filter(|b| prior.get(b) != planned.get(b))
        .map(AttrPath::attr)
        .collect()
}

/// How long a failed create may spend looking for what it left behind.
const SALVAGE_READ: std::time::Duration = std::time::Duration::from_secs(30);

#[async_trait]
impl Resource for NodePool {
    fn type_name(&self) -> &'static str {
        TYPE_NAME
    }

    fn schema(&self) -> Schema {
        schema()
    }

    fn validate(&self, config: &Value, diags: &mut Diagnostics) {
        resolve(config, &validation_settings(), diags);
    }

    fn modify_plan(&self, req: &PlanRequest<'_>, planned: &mut Planned, diags: &mut Diagnostics) {
        let settings = self.state.settings();
        fill_defaults(&mut planned.state, req.config, &settings);
        let Some(new) = resolve(&planned.state, &settings, diags) else {
            return;
        };
        write_derived(&mut planned.state, &new.derived);
        set(
            &mut planned.state,
            "node_labels",
            model::string_map(&new.spec.labels),
        );
        if req.prior.is_null() {
            return;
        }
        let mut quiet = Diagnostics::new();
        if let Some(old) = resolve(req.prior, &settings, &mut quiet) {
            planned.requires_replace.extend(gpu_replacement(
                new.cloud,
                &old.spec,
                &new.spec,
                req.prior,
                &planned.state,
            ));
            // Nothing the cloud holds changes: keep the prior status rather than "known after apply".
            if old.spec == new.spec {
                set(
                    &mut planned.state,
                    "status",
                    req.prior.get("status").clone(),
                );
            }
        }
    }

    async fn create(&self, planned: &Value, _: &mut Private, diags: &mut Diagnostics) -> Value {
        let settings = self.state.settings();
        let Some(r) = resolve(planned, &settings, diags) else {
            return Value::Null;
        };
        let Some(client) = self.client(&r.spec.location, diags).await else {
            return Value::Null;
        };
        let ctx = self.ctx(planned, "create");
        let cloud = r.spec.location.cloud();
        tracing::info!(cloud, pool = %r.spec.name, machine_type = %r.spec.machine_type, "creating node pool");
        match client.create(&r.spec, &ctx).await {
            Ok(pool) => {
                tracing::info!(cloud, pool = %r.spec.name, elapsed_ms = ctx.started.elapsed().as_millis() as u64, "node pool created");
                state_from_pool(&pool, planned, &settings, diags).unwrap_or(Value::Null)
            }
            Err(e) => {
                tracing::warn!(cloud, pool = %r.spec.name, error = %e, "node pool create failed");
                diags.push(cloud_diagnostic("create", &r.spec.name, &e));
                // A refused create made nothing: a pool of that name is someone else's (the
                // clients adopt their own earlier attempts), and taking it into state, tainted,
                // would have the next apply destroy it.
                if !may_have_created(&e) {
                    return Value::Null;
                }
                // Whatever this create made is kept in state (tainted), so nothing is orphaned.
                // The look is bounded on its own (see read_after_failure).
                match read_after_failure(client.as_ref(), &r.spec.location, &r.spec.name, &e).await
                {
                    Some(Some(pool)) => {
                        state_from_pool(&pool, planned, &settings, diags).unwrap_or(Value::Null)
                    }
                    Some(None) => Value::Null,
                    // The cloud could not say: keep the pool in state as planned (tainted). The
                    // next refresh drops it if it is not there, whereas a pool left out of state
                    // would be orphaned.
                    None => unread_pool(planned, &r.spec),
                }
            }
        }
    }

    async fn read(&self, state: &Value, _: &mut Private, diags: &mut Diagnostics) -> Option<Value> {
        let settings = self.state.settings();
        let loc = location(state, &settings, diags)?;
        let name = state.get("name").as_str()?.to_string();
        let client = self.client(&loc, diags).await?;
        tracing::debug!(cloud = loc.cloud(), pool = %name, "reading node pool");
        let ctx = self.ctx(state, "read");
        match client.get(&loc, &name, &ctx).await {
            Ok(Some(pool)) => state_from_pool(&pool, state, &settings, diags),
            Ok(None) => {
                tracing::info!(cloud = loc.cloud(), pool = %name, "node pool no longer exists; dropping it from state");
                None
            }
            Err(e) => {
                diags.push(cloud_diagnostic("read", &name, &e));
                None
            }
        }
    }

    async fn update(
        &self,
        prior: &Value,
        planned: &Value,
        _: &mut Private,
        diags: &mut Diagnostics,
    ) -> Value {
        let settings = self.state.settings();
        let Some(r) = resolve(planned, &settings, diags) else {
            return prior.clone();
        };
        let Some(client) = self.client(&r.spec.location, diags).await else {
            return prior.clone();
        };
        let ctx = self.ctx(planned, "update");
        let current = match client.get(&r.spec.location, &r.spec.name, &ctx).await {
            Ok(Some(p)) => p,
            Ok(None) => {
                diags.push(Diagnostic::error(
                    "Node pool vanished",
                    format!("Node pool {:?} no longer exists; run `terraform apply` again to create it.", r.spec.name),
                ));
                return prior.clone();
            }
            Err(e) => {
                diags.push(cloud_diagnostic("read", &r.spec.name, &e));
                return prior.clone();
            }
        };
        let cloud = r.spec.location.cloud();
        tracing::info!(cloud, pool = %r.spec.name, "updating node pool in place");
        match client.update(&current, &r.spec, &ctx).await {
            Ok(pool) => {
                tracing::info!(cloud, pool = %r.spec.name, elapsed_ms = ctx.started.elapsed().as_millis() as u64, "node pool updated");
                state_from_pool(&pool, planned, &settings, diags).unwrap_or_else(|| prior.clone())
            }
            Err(e) => {
                tracing::warn!(cloud, pool = %r.spec.name, error = %e, "node pool update failed");
                diags.push(cloud_diagnostic("update", &r.spec.name, &e));
                // Record what the cloud now holds, so the next plan shows what is left to do.
                match read_after_failure(client.as_ref(), &r.spec.location, &r.spec.name, &e).await
                {
                    Some(Some(pool)) => state_from_pool(&pool, prior, &settings, diags)
                        .unwrap_or_else(|| prior.clone()),
                    _ => prior.clone(),
                }
            }
        }
    }

    async fn delete(&self, state: &Value, _: &Private, diags: &mut Diagnostics) {
        let settings = self.state.settings();
        let Some(loc) = location(state, &settings, diags) else {
            return;
        };
        let Some(name) = state.get("name").as_str() else {
            return;
        };
        let Some(client) = self.client(&loc, diags).await else {
            return;
        };
        let ctx = self.ctx(state, "delete");
        tracing::info!(cloud = loc.cloud(), pool = name, "deleting node pool");
        match client.delete(&loc, name, &ctx).await {
            Ok(()) => tracing::info!(
                cloud = loc.cloud(),
                pool = name,
                elapsed_ms = ctx.started.elapsed().as_millis() as u64,
                "node pool deleted"
            ),
            Err(e) => {
                tracing::warn!(cloud = loc.cloud(), pool = name, error = %e, "node pool delete failed");
                diags.push(cloud_diagnostic("delete", name, &e));
            }
        }
    }

    async fn import(&self, id: &str, diags: &mut Diagnostics) -> Option<Value> {
        let settings = self.state.settings();
        let Some((loc, name)) = parse_import_id(id, &settings) else {
            diags.push(Diagnostic::error(
                "Invalid import ID",
                format!(
                    "{id:?} is not a node pool ID. Use the cloud's own ID: AKS `/subscriptions/S/resourceGroups/RG/providers/Microsoft.ContainerService/managedClusters/C/agentPools/N`, GKE `projects/P/locations/L/clusters/C/nodePools/N`, EKS `cluster:nodegroup` (region from the provider)."
                ),
            ));
            return None;
        };
        let client = self.client(&loc, diags).await?;
        let ctx = self.ctx(&Value::Null, "read");
        let pool = match client.get(&loc, &name, &ctx).await {
            Ok(Some(p)) => p,
            Ok(None) => {
                diags.push(Diagnostic::error(
                    "Cannot import non-existent node pool",
                    format!("No node pool matches {id:?}."),
                ));
                return None;
            }
            Err(e) => {
                diags.push(cloud_diagnostic("import", &name, &e));
                return None;
            }
        };
        state_from_pool(&pool, &Value::Null, &settings, diags)
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use tfplugin::plan::plan;

    /// A configuration as terraform sends it: every attribute present, null unless set.
    fn config(set: &[(&str, Value)]) -> Value {
        let ty = schema().ty();
        let mut v = Value::null_object(&ty);
        for (k, val) in set {
            *v.get_mut(k).unwrap() = val.clone();
        }
        for b in [
            "aks",
            "gke",
            "eks",
            "mig",
            "time_slicing",
            "mps",
            "autoscaling",
            "timeouts",
        ] {
            if v.get(b).is_null() {
                *v.get_mut(b).unwrap() = Value::List(vec![]);
            }
        }
        v
    }

    fn aks_block() -> Value {
        Value::List(vec![Value::object([
            ("subscription_id", Value::Null),
            ("resource_group", "rg".into()),
            ("cluster_name", "c".into()),
            ("os_sku", Value::Null),
        ])])
    }

    fn sandbox_settings() -> Settings {
        Settings::from_config(&Value::object([("sandbox", "http://127.0.0.1:1".into())]))
    }

    /// The create plan of a time-sliced A100 pool on AKS, with the provider's defaults filled in.
    fn time_sliced_create_plan(name: &str, replicas: i64, settings: &Settings) -> Planned {
        let ts = Value::List(vec![Value::object([
            ("replicas", Value::int(replicas)),
            ("rename_by_default", Value::Null),
            ("fail_requests_greater_than_one", Value::Null),
        ])]);
        let cfg = config(&[
            ("name", name.into()),
            ("machine_type", "Standard_NC24ads_A100_v4".into()),
            ("aks", aks_block()),
            ("time_slicing", ts),
        ]);
        let mut planned = plan(&schema().block, &Value::Null, &cfg, &cfg);
        fill_defaults(&mut planned.state, &cfg, settings);
        planned
    }

    #[test]
    fn create_plan_knows_the_derived_facts() {
        let settings = sandbox_settings();
        let planned = time_sliced_create_plan("a100ts", 10, &settings);
        let mut diags = Diagnostics::new();
        let v = &planned.state;
        assert!(
            model::sharing_mode(v).is_some(),
            "sharing {:?}",
            v.get("time_slicing")
        );
        assert!(model::taints(v).is_some(), "taints {:?}", v.get("taints"));
        assert!(
            location(v, &settings, &mut diags).is_some(),
            "location {:?}",
            v.get("aks")
        );
        let r = resolve(&planned.state, &settings, &mut diags);
        assert!(diags.is_empty(), "{diags:?}");
        let r = r.expect("resolved");
        assert_eq!(
            r.derived.device_plugin_config.unwrap().name,
            "time-sliced-10"
        );
    }

    #[test]
    fn a_pool_that_cannot_be_read_after_a_failed_create_is_kept_whole_and_known() {
        let settings = sandbox_settings();
        let mut planned = time_sliced_create_plan("unread", 4, &settings);
        let mut diags = Diagnostics::new();
        let r = resolve(&planned.state, &settings, &mut diags).expect("resolved");
        // As modify_plan does.
        set(
            &mut planned.state,
            "node_labels",
            model::string_map(&r.spec.labels),
        );
        assert!(!planned.state.is_fully_known(), "the plan has unknowns");
        let v = unread_pool(&planned.state, &r.spec);
        assert!(v.is_fully_known(), "no unknown goes to state: {v:?}");
        assert_eq!(
            v.get("id").as_str(),
            Some(
                "/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/rg/providers/Microsoft.ContainerService/managedClusters/c/agentPools/unread"
            )
        );
        assert_eq!(v.get("status").as_str(), Some("Unknown"));
        assert_eq!(v.get("name"), planned.state.get("name"));
        assert_eq!(v.get("node_labels"), planned.state.get("node_labels"));
    }

    #[test]
    fn only_a_refused_create_is_known_to_have_made_nothing() {
        let api = |status| CloudError::Api {
            status,
            code: "X".into(),
            message: "m".into(),
        };
        for e in [
            CloudError::Stopped,
            CloudError::Transport("reset".into()),
            CloudError::OperationFailed {
                code: "X".into(),
                message: "m".into(),
            },
            CloudError::Timeout {
                waited: Duration::from_secs(1),
                waiting_for: "x".into(),
            },
            api(429),
            api(503),
            api(408),
        ] {
            assert!(may_have_created(&e), "{e}");
        }
        for e in [CloudError::Auth("no".into()), api(400), api(403), api(409)] {
            assert!(!may_have_created(&e), "{e}");
        }
    }
}
