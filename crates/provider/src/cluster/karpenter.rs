//! The Karpenter objects of a shared GPU pool, rendered from what a user declares: a `NodePool`
//! (karpenter.sh/v1) whose template carries the sharing, one `NodeOverlay` (karpenter.sh/v1alpha1)
//! per GPU count the pool allows, so that Karpenter sizes and consolidates nodes by slices, and,
//! when the pool makes its own, the node class (`EC2NodeClass` karpenter.k8s.aws/v1 on EKS,
//! `AKSNodeClass` karpenter.azure.com/v1beta1 on AKS node auto-provisioning).
//!
//! Pure: no I/O and no Terraform types. Every problem is a [`Problem`] naming the argument, and
//! all of them are reported at once, as the node pool's checks do. The objects are checked
//! against the real CRDs on a real kube-apiserver by the acceptance test `karpenter_objects`.
//!
//! Facts followed, with their sources:
//! - Karpenter's well-known GPU labels: on AWS `karpenter.k8s.aws/instance-gpu-{name,count,
//!   memory,manufacturer}`, the name in lower case and the memory in MiB as EC2 reports them
//!   (aws/karpenter-provider-aws website/content/en/docs/reference/instance-types.md, v1.14.1);
//!   on Azure `karpenter.azure.com/sku-gpu-{name,count,manufacturer}`, the name being the
//!   accelerator part of the VM size (`Standard_NC24ads_A100_v4` -> `A100`), absent when the size
//!   names none (Azure/karpenter-provider-azure pkg/providers/instancetype/instancetype.go
//!   `setRequirementsGPU`).
//! - An overlay's capacity replaces the instance type's value for each resource it names
//!   (kubernetes-sigs/karpenter pkg/cloudprovider/types.go, `lo.Assign`), and a requirement on
//!   `karpenter.sh/nodepool` scopes it to one NodePool (designs/node-overlay.md).
//! - NAP does not pass a MIG profile to the nodes it makes (Azure/karpenter-provider-azure
//!   pkg/providers/imagefamily/customscriptsbootstrap/provisionclientbootstrap.go: "Unsupported
//!   as of now (MIG)").
//! - Bottlerocket's NVIDIA variants run the device plugin on the host and read
//!   `settings.kubelet-device-plugins.nvidia`, never the ConfigMap (`gpu::bottlerocket` has the
//!   settings, the releases that brought each and their sources).

use std::collections::BTreeMap;

use gpu::{Cloud, DomainError, GpuModel, MigStrategy, SharingMode, Taint};
use serde_json::{Value, json};

use super::delivery::FIELD_MANAGER;

/// The resource an instance type's GPUs are offered as, overlays or not.
const GPU_RESOURCE: &str = "nvidia.com/gpu";

/// The label every object made here carries, as the ConfigMap's does.
const MANAGED_BY: &str = "app.kubernetes.io/managed-by";
/// Where Karpenter says which NodePool made a node.
pub const NODEPOOL_LABEL: &str = "karpenter.sh/nodepool";

/// Which Karpenter makes the nodes.
#[derive(Clone, Debug, PartialEq)]
pub enum Provisioner {
    /// Karpenter on EKS, with an EC2NodeClass.
    Aws(NodeClass<Ec2Class>),
    /// AKS node auto-provisioning (Karpenter run by AKS), with an AKSNodeClass.
    Nap(NodeClass<AksClass>),
}

/// A node class the pool refers to, or one it makes under its own name.
#[derive(Clone, Debug, PartialEq)]
pub enum NodeClass<T> {
    Existing(String),
    Made(T),
}

/// The AMI families a GPU EC2NodeClass can use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AmiFamily {
    /// AL2023 NVIDIA: the driver on the AMI, the device plugin from the GPU operator.
    Al2023,
    /// Bottlerocket NVIDIA: driver and device plugin on the host, set up by its settings.
    Bottlerocket,
}

impl AmiFamily {
    pub fn parse(s: &str) -> Option<AmiFamily> {
        match s {
            "al2023" => Some(AmiFamily::Al2023),
            "bottlerocket" => Some(AmiFamily::Bottlerocket),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            AmiFamily::Al2023 => "al2023",
            AmiFamily::Bottlerocket => "bottlerocket",
        }
    }
}

/// An EC2NodeClass the pool makes.
#[derive(Clone, Debug, PartialEq)]
pub struct Ec2Class {
    /// The IAM role of the nodes (Karpenter makes the instance profile).
    pub role: String,
    pub subnet_tags: BTreeMap<String, String>,
    pub security_group_tags: BTreeMap<String, String>,
    pub ami_family: AmiFamily,
    /// `latest` or a pinned version such as `v1.34.0` (Bottlerocket) or `v20240807` (AL2023).
    pub ami_version: String,
}

/// An AKSNodeClass the pool makes.
#[derive(Clone, Debug, PartialEq)]
pub struct AksClass {
    /// `Ubuntu2204`, `Ubuntu`, `AzureLinux`.
    pub image_family: String,
}

/// The pool's disruption settings, passed through to the NodePool.
#[derive(Clone, Debug, PartialEq)]
pub struct Disruption {
    pub consolidation_policy: String,
    pub consolidate_after: String,
    /// Budgets: `nodes` (a count or a percentage) with an optional cron `schedule` and `duration`.
    pub budgets: Vec<Budget>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Budget {
    pub nodes: String,
    pub schedule: Option<String>,
    pub duration: Option<String>,
}

/// A shared GPU pool as the user declares it.
#[derive(Clone, Debug, PartialEq)]
pub struct KarpenterPool {
    pub name: String,
    pub provisioner: Provisioner,
    pub gpu: &'static GpuModel,
    /// GPUs per node the pool may launch; one overlay each.
    pub gpu_counts: Vec<u32>,
    pub sharing: SharingMode,
    pub labels: BTreeMap<String, String>,
    /// None: the default GPU taint.
    pub taints: Option<Vec<Taint>>,
    /// `on-demand`, `spot`, `reserved`.
    pub capacity_types: Vec<String>,
    /// The most physical GPUs the pool's nodes may hold in all.
    pub limit_gpus: Option<u32>,
    pub disruption: Option<Disruption>,
    pub weight: Option<u32>,
    /// Whether the cluster's Karpenter reads the pool's NodeOverlays (its `NodeOverlay` feature
    /// gate is on). Karpenter sums its nodes' capacity against `spec.limits`: with the overlays
    /// that capacity counts slices, without them whole GPUs, so the limits are written in the
    /// unit Karpenter will count in.
    pub overlays_read: bool,
    /// The device plugin config name the pool's nodes carry now: one made while names said the
    /// settings is kept while they hold (a changed NodePool template would make Karpenter replace
    /// every node).
    pub config_name: Option<String>,
}

/// A problem with the declaration, on the argument it names (a dotted path such as `limit_gpus`,
/// or a domain error that names its own field).
#[derive(Clone, Debug, PartialEq)]
pub enum Problem {
    Argument {
        attribute: &'static str,
        summary: &'static str,
        detail: String,
    },
    Domain(DomainError),
}

fn problem(attribute: &'static str, summary: &'static str, detail: String) -> Problem {
    Problem::Argument {
        attribute,
        summary,
        detail,
    }
}

/// The objects of a pool and what workloads need to know of it.
#[derive(Clone, Debug, PartialEq)]
pub struct Rendered {
    pub node_pool: Value,
    /// One per GPU count, named `<pool>-gpu<count>`.
    pub overlays: Vec<Value>,
    /// The node class the pool makes, if it makes one.
    pub node_class: Option<Value>,
    /// The sharing's facts (for the smallest GPU count): resource name, slices per GPU, memory
    /// per slice, tolerations, the device plugin config.
    pub derived: gpu::Derived,
    /// What one node offers, per GPU count, as the overlays say it.
    pub capacity: BTreeMap<u32, BTreeMap<String, u32>>,
    /// The NodePool's `spec.limits`, translated from physical GPUs.
    pub limits: BTreeMap<String, u32>,
    /// What a workload selects the pool's nodes by.
    pub node_selector: BTreeMap<String, String>,
    /// Bottlerocket's settings, when the pool's nodes run it.
    pub user_data: Option<String>,
}

/// The AWS name and memory (MiB) of a catalog GPU, as Karpenter labels EC2 instance types.
fn aws_gpu(gpu: &GpuModel) -> Option<(&'static str, u32)> {
    Some(match gpu.id {
        "T4" => ("t4", 16384),
        "A10G" => ("a10g", 22888),
        "L4" => ("l4", 22888),
        "L40S" => ("l40s", 45776),
        "A100-40GB" => ("a100", 40960),
        "A100-80GB" => ("a100", 81920),
        "H100-80GB" => ("h100", 81920),
        "H200-141GB" => ("h200", 144384),
        "B200" => ("b200", 183359),
        _ => return None,
    })
}

/// The accelerator part of an Azure VM size (`Standard_NC4as_T4_v3` -> `T4`), as the Azure
/// provider's size parser reads it: the segment between the size and the version, if any.
fn azure_accelerator(size: &str) -> Option<&str> {
    let parts: Vec<&str> = size.split('_').collect();
    match parts.as_slice() {
        [_, _, acc, version] if version.starts_with('v') => Some(acc),
        _ => None,
    }
}

fn dns_label(name: &str) -> bool {
    let b = name.as_bytes();
    (1..=63).contains(&b.len())
        && b[0].is_ascii_lowercase()
        && b.last()
            .is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
        && b.iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
}

fn req(key: &str, op: &str, values: &[String]) -> Value {
    if values.is_empty() {
        json!({"key": key, "operator": op})
    } else {
        json!({"key": key, "operator": op, "values": values})
    }
}

fn strings<T: ToString>(v: &[T]) -> Vec<String> {
    v.iter().map(ToString::to_string).collect()
}

/// A pinned version below `min` (both `vMAJOR.MINOR.PATCH`); `latest` is never below.
fn below(version: &str, min: (u32, u32, u32)) -> bool {
    let parse = |s: &str| -> Option<(u32, u32, u32)> {
        let mut it = s.trim_start_matches('v').split('.').map(|p| p.parse().ok());
        Some((it.next()??, it.next()??, it.next().flatten().unwrap_or(0)))
    };
    parse(version).is_some_and(|v| v < min)
}

/// Bottlerocket's device plugin settings for a sharing mode, as TOML user data; an error names
/// what the pinned Bottlerocket version cannot do.
fn bottlerocket_settings(
    sharing: &SharingMode,
    gpu: &GpuModel,
    version: &str,
) -> Result<Option<String>, Problem> {
    if let SharingMode::Mig { strategy, .. } = sharing
        && *strategy != MigStrategy::Single
    {
        return Err(problem(
            "mig.strategy",
            "MIG strategy not supported on Bottlerocket",
            "Bottlerocket's device plugin supports MIG with the `single` strategy only \
            (bottlerocket-os/bottlerocket#4483). Set mig.strategy = \"single\", or use \
            eks.node_class.ami_family = \"al2023\", where the GPU operator's MIG manager \
            supports `mixed`."
                .to_string(),
        ));
    }
    if let Some((min, what)) = gpu::bottlerocket::min_version(sharing)
        && below(version, min)
    {
        return Err(problem(
            "eks.node_class.ami_version",
            "Bottlerocket version too old",
            format!(
                "Bottlerocket {version} has no {what} setting for its NVIDIA device plugin; \
                it came in {}.{}.{}. Pin that version or later, or use `latest`.",
                min.0, min.1, min.2
            ),
        ));
    }
    Ok(gpu::bottlerocket::settings(sharing, gpu))
}

/// Checks a pool and renders its objects; every problem found is returned.
pub fn render(p: &KarpenterPool) -> Result<Rendered, Vec<Problem>> {
    let mut problems = Vec::new();
    if !dns_label(&p.name) {
        problems.push(problem(
            "name",
            "Invalid NodePool name",
            format!(
                "\"{}\" cannot name a NodePool whose nodes carry it in the label {NODEPOOL_LABEL}: \
                use 1 to 63 lowercase letters, digits and '-', starting with a letter and ending \
                with a letter or digit.",
                p.name
            ),
        ));
    }
    let cloud = match &p.provisioner {
        Provisioner::Aws(_) => Cloud::Eks,
        Provisioner::Nap(_) => Cloud::Aks,
    };
    let machines: Vec<&gpu::MachineType> = gpu::machine_types_of(cloud)
        .filter(|m| std::ptr::eq(m.gpu, p.gpu))
        .collect();
    let offered: Vec<u32> = {
        let mut c: Vec<u32> = machines.iter().map(|m| m.gpu_count).collect();
        c.sort_unstable();
        c.dedup();
        c
    };
    let aws = aws_gpu(p.gpu);
    if offered.is_empty() || (cloud == Cloud::Eks && aws.is_none()) {
        let mut models: Vec<&str> = gpu::machine_types_of(cloud)
            .filter(|m| cloud != Cloud::Eks || aws_gpu(m.gpu).is_some())
            .map(|m| m.gpu.id)
            .collect();
        models.sort_unstable();
        models.dedup();
        problems.push(problem(
            "gpu_model",
            "GPU not offered",
            format!(
                "The catalog has no {} instance type with {} GPUs for Karpenter to choose. GPUs it \
                can choose there: {}.",
                cloud.as_str(),
                p.gpu.id,
                models.join(", ")
            ),
        ));
        return Err(problems);
    }
    let mut counts = p.gpu_counts.clone();
    counts.sort_unstable();
    counts.dedup();
    if counts.is_empty() {
        problems.push(problem(
            "gpu_counts",
            "No GPU count",
            format!(
                "gpu_counts is empty, so the pool could launch no node. Name one or more of the \
                counts {} instance types come with: {}.",
                p.gpu.id,
                strings(&offered).join(", ")
            ),
        ));
    }
    for c in &counts {
        if !offered.contains(c) {
            problems.push(problem(
                "gpu_counts",
                "GPU count not offered",
                format!(
                    "gpu_counts names {c}, but no {} instance type carries {c} {} GPUs: its \
                    overlay would match no instance type the requirements allow. Counts offered: \
                    {}.",
                    cloud.as_str(),
                    p.gpu.id,
                    strings(&offered).join(", ")
                ),
            ));
        }
    }
    if matches!(p.provisioner, Provisioner::Nap(_)) && matches!(p.sharing, SharingMode::Mig { .. })
    {
        problems.push(problem(
            "mig",
            "MIG not supported by node auto-provisioning",
            "AKS node auto-provisioning does not pass a GPU instance profile to the nodes it makes \
            (Azure/karpenter-provider-azure, provisionclientbootstrap.go: \"Unsupported as of now \
            (MIG)\"), so its nodes would have whole GPUs. Use time_slicing or mps here, or a \
            fracgpu_nodepool on AKS with a mig block."
                .to_string(),
        ));
    }
    if let SharingMode::Mig {
        gke_sharing: Some(_),
        ..
    } = &p.sharing
    {
        problems.push(problem(
            "mig.gke_sharing",
            "GKE-only setting",
            "mig.gke_sharing exists on GKE node pools only; remove it.".to_string(),
        ));
    }
    if let (Some(limit), Some(first)) = (p.limit_gpus, counts.first())
        && limit < *first
    {
        problems.push(problem(
            "limit_gpus",
            "Limit below one node",
            format!(
                "limit_gpus is {limit}, below the {first} GPUs of the smallest node gpu_counts \
                allows, so Karpenter could launch no node. Raise it to at least {first}."
            ),
        ));
    }
    let bottlerocket = match &p.provisioner {
        Provisioner::Aws(NodeClass::Made(c)) if c.ami_family == AmiFamily::Bottlerocket => {
            Some(c.ami_version.clone())
        }
        _ => None,
    };
    let user_data = match &bottlerocket {
        Some(v) => match bottlerocket_settings(&p.sharing, p.gpu, v) {
            Ok(u) => u,
            Err(e) => {
                problems.push(e);
                None
            }
        },
        None => None,
    };

    // The sharing's rules are the GPU operator's on both clouds: nodes pick the device plugin
    // config by label and the MIG manager partitions them, as on an EKS node group; only the
    // node selector differs (Karpenter's label, set below).
    let mut derived: Option<gpu::Derived> = None;
    let mut capacity = BTreeMap::new();
    for &c in counts.iter().filter(|c| offered.contains(c)) {
        let Some(machine) = machines.iter().find(|m| m.gpu_count == c) else {
            continue;
        };
        let spec = gpu::PoolSpec {
            cloud: Cloud::Eks,
            pool_name: p.name.clone(),
            hardware: gpu::Hardware {
                machine_type: machine.name.to_string(),
                gpu: p.gpu,
                gpus_per_node: c,
                gpu_product: machine.gpu_product(),
            },
            sharing: p.sharing.clone(),
            taints: p.taints.clone(),
            labels: p.labels.clone(),
        };
        match gpu::validate(&spec) {
            Ok(mut d) => {
                if let Some(name) = &p.config_name {
                    d.keep_config_name(name);
                }
                capacity.insert(c, d.node_resources());
                derived.get_or_insert(d);
            }
            Err(errors) => {
                problems.extend(errors.into_iter().map(Problem::Domain));
                break;
            }
        }
    }
    if !problems.is_empty() {
        // A name the domain checks with EKS's rules may be reported twice; keep one of each.
        problems.dedup();
        return Err(problems);
    }
    let Some(derived) = derived else {
        return Err(problems);
    };

    let mut labels = p.labels.clone();
    labels.extend(derived.node_labels.clone());
    // The settings' label serves reading a cloud's pool back; a NodePool is read back from the
    // objects the state holds, and a label of its template that changed with the replicas would
    // make Karpenter replace every node it launched (a NodePool template change is drift).
    labels.remove(gpu::SHARING_LABEL);
    if bottlerocket.is_some() {
        // The host's device plugin reads Bottlerocket's settings, and no MIG manager runs.
        labels.remove(gpu::DEVICE_PLUGIN_CONFIG_LABEL);
        labels.remove(gpu::MIG_CONFIG_LABEL);
    }
    let count_values = strings(&counts);
    let (count_key, mut requirements, class_ref) = match &p.provisioner {
        Provisioner::Aws(class) => {
            let (name, memory) = aws.unwrap_or_default();
            (
                "karpenter.k8s.aws/instance-gpu-count",
                vec![
                    req(
                        "karpenter.k8s.aws/instance-gpu-manufacturer",
                        "In",
                        &["nvidia".into()],
                    ),
                    req(
                        "karpenter.k8s.aws/instance-gpu-name",
                        "In",
                        &[name.to_string()],
                    ),
                    // The name alone does not tell an A100 of 40 GB from one of 80 GB.
                    req(
                        "karpenter.k8s.aws/instance-gpu-memory",
                        "In",
                        &[memory.to_string()],
                    ),
                ],
                json!({"group": "karpenter.k8s.aws", "kind": "EC2NodeClass",
                    "name": class_name(class, &p.name)}),
            )
        }
        Provisioner::Nap(class) => {
            let mut r = vec![req(
                "karpenter.azure.com/sku-gpu-manufacturer",
                "In",
                &["nvidia".into()],
            )];
            // The accelerator name pins the GPU when every size of this GPU names one that no
            // size of another GPU shares; else the sizes themselves do.
            let names: Vec<Option<&str>> =
                machines.iter().map(|m| azure_accelerator(m.name)).collect();
            let shared = gpu::machine_types_of(Cloud::Aks).any(|m| {
                !std::ptr::eq(m.gpu, p.gpu)
                    && azure_accelerator(m.name).is_some_and(|a| names.contains(&Some(a)))
            });
            let mut accels: Vec<String> = names.iter().flatten().map(|a| a.to_string()).collect();
            accels.sort();
            accels.dedup();
            if names.iter().all(Option::is_some) && !shared {
                r.push(req("karpenter.azure.com/sku-gpu-name", "In", &accels));
            } else {
                let sizes: Vec<String> = machines
                    .iter()
                    .filter(|m| counts.contains(&m.gpu_count))
                    .map(|m| m.name.to_string())
                    .collect();
                r.push(req("node.kubernetes.io/instance-type", "In", &sizes));
            }
            (
                "karpenter.azure.com/sku-gpu-count",
                r,
                json!({"group": "karpenter.azure.com", "kind": "AKSNodeClass",
                    "name": class_name(class, &p.name)}),
            )
        }
    };
    requirements.push(req(count_key, "In", &count_values));
    requirements.push(req("karpenter.sh/capacity-type", "In", &p.capacity_types));
    requirements.push(req("kubernetes.io/os", "In", &["linux".into()]));

    let taints: Vec<Value> = derived.taints.iter().map(taint_json).collect();
    let mut template_spec = json!({
        "nodeClassRef": class_ref,
        "requirements": requirements,
    });
    if !taints.is_empty() {
        template_spec["taints"] = Value::Array(taints);
    }
    let mut spec = json!({
        "template": {"metadata": {"labels": labels}, "spec": template_spec},
    });
    let mut limits = BTreeMap::new();
    if let Some(gpus) = p.limit_gpus {
        // Karpenter sums the capacity of the pool's nodes. Through the overlays that counts
        // slices. Without them (the gate off, or not known to be on) an instance type offers its
        // GPUs as `nvidia.com/gpu`: a resource of that name is then counted in whole GPUs, and
        // a limit written in slices would let the pool launch that many physical GPUs (ten times
        // the limit at ten slices a GPU). A renamed resource (`nvidia.com/gpu.shared`,
        // `nvidia.com/mig-*`) no instance type offers without the overlays: its pods wait, and
        // its limit stays in slices.
        let counts_whole_gpus = !p.overlays_read && derived.resource_name == GPU_RESOURCE;
        let per_gpu = if counts_whole_gpus {
            1
        } else {
            derived.slices_per_gpu
        };
        limits.insert(derived.resource_name.clone(), gpus.saturating_mul(per_gpu));
        spec["limits"] = quantities(&limits);
    }
    if let Some(d) = &p.disruption {
        let mut dj = json!({
            "consolidationPolicy": d.consolidation_policy,
            "consolidateAfter": d.consolidate_after,
        });
        if !d.budgets.is_empty() {
            dj["budgets"] = Value::Array(
                d.budgets
                    .iter()
                    .map(|b| {
                        let mut v = json!({"nodes": b.nodes});
                        if let Some(s) = &b.schedule {
                            v["schedule"] = json!(s);
                        }
                        if let Some(s) = &b.duration {
                            v["duration"] = json!(s);
                        }
                        v
                    })
                    .collect(),
            );
        }
        spec["disruption"] = dj;
    }
    if let Some(w) = p.weight {
        spec["weight"] = json!(w);
    }
    let node_pool = json!({
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": p.name, "labels": {MANAGED_BY: FIELD_MANAGER}},
        "spec": spec,
    });

    let overlays = capacity
        .iter()
        .map(|(count, resources)| {
            json!({
                "apiVersion": "karpenter.sh/v1alpha1",
                "kind": "NodeOverlay",
                "metadata": {"name": overlay_name(&p.name, *count),
                    "labels": {MANAGED_BY: FIELD_MANAGER, NODEPOOL_LABEL: p.name}},
                "spec": {
                    "requirements": [
                        req(NODEPOOL_LABEL, "In", std::slice::from_ref(&p.name)),
                        req(count_key, "In", &[count.to_string()]),
                    ],
                    "capacity": quantities(resources),
                },
            })
        })
        .collect();

    let node_class = match &p.provisioner {
        Provisioner::Aws(NodeClass::Made(c)) => {
            let mut spec = json!({
                "role": c.role,
                "amiSelectorTerms": [{"alias": format!("{}@{}", c.ami_family.as_str(), c.ami_version)}],
                "subnetSelectorTerms": [{"tags": c.subnet_tags}],
                "securityGroupSelectorTerms": [{"tags": c.security_group_tags}],
            });
            if let Some(u) = &user_data {
                spec["userData"] = json!(u);
            }
            Some(json!({
                "apiVersion": "karpenter.k8s.aws/v1",
                "kind": "EC2NodeClass",
                "metadata": {"name": p.name, "labels": {MANAGED_BY: FIELD_MANAGER}},
                "spec": spec,
            }))
        }
        // `None`: the GPU operator installs the driver, so any GPU size may be chosen
        // (pkg/apis/v1beta1/aksnodeclass.go, GPUModeNone).
        Provisioner::Nap(NodeClass::Made(c)) => Some(json!({
            "apiVersion": "karpenter.azure.com/v1beta1",
            "kind": "AKSNodeClass",
            "metadata": {"name": p.name, "labels": {MANAGED_BY: FIELD_MANAGER}},
            "spec": {"imageFamily": c.image_family, "gpu": {"mode": "None"}},
        })),
        _ => None,
    };
    Ok(Rendered {
        node_pool,
        overlays,
        node_class,
        capacity,
        limits,
        node_selector: BTreeMap::from([(NODEPOOL_LABEL.to_string(), p.name.clone())]),
        user_data,
        derived,
    })
}

fn class_name<T>(class: &NodeClass<T>, pool: &str) -> String {
    match class {
        NodeClass::Existing(n) => n.clone(),
        NodeClass::Made(_) => pool.to_string(),
    }
}

/// The overlay of a pool's nodes with `count` GPUs.
pub fn overlay_name(pool: &str, count: u32) -> String {
    format!("{pool}-gpu{count}")
}

/// Resource amounts as Kubernetes writes quantities: strings.
fn quantities(amounts: &BTreeMap<String, u32>) -> Value {
    Value::Object(
        amounts
            .iter()
            .map(|(k, v)| (k.clone(), Value::String(v.to_string())))
            .collect(),
    )
}

fn taint_json(t: &Taint) -> Value {
    let mut v = json!({"key": t.key, "effect": t.effect.as_str()});
    if !t.value.is_empty() {
        v["value"] = json!(t.value);
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pool(gpu: &str, sharing: SharingMode, provisioner: Provisioner) -> KarpenterPool {
        KarpenterPool {
            name: "slices".into(),
            provisioner,
            gpu: gpu::gpu_model(gpu).unwrap(),
            gpu_counts: vec![1, 4],
            sharing,
            labels: BTreeMap::new(),
            taints: None,
            capacity_types: vec!["on-demand".into()],
            limit_gpus: Some(8),
            disruption: None,
            weight: None,
            overlays_read: true,
            config_name: None,
        }
    }

    fn ts(replicas: u32) -> SharingMode {
        SharingMode::TimeSlicing {
            replicas,
            rename_by_default: false,
            fail_requests_greater_than_one: false,
        }
    }

    fn aws() -> Provisioner {
        Provisioner::Aws(NodeClass::Existing("default".into()))
    }

    fn attributes(problems: &[Problem]) -> Vec<&str> {
        problems
            .iter()
            .map(|p| match p {
                Problem::Argument { attribute, .. } => *attribute,
                Problem::Domain(_) => "domain",
            })
            .collect()
    }

    #[test]
    fn time_slicing_overlays_count_slices_per_gpu_count() {
        let r = render(&pool("T4", ts(10), aws())).unwrap();
        assert_eq!(r.capacity[&1]["nvidia.com/gpu"], 10);
        assert_eq!(r.capacity[&4]["nvidia.com/gpu"], 40);
        assert_eq!(r.overlays.len(), 2);
        assert_eq!(r.overlays[1]["metadata"]["name"], "slices-gpu4");
        assert_eq!(r.overlays[1]["spec"]["capacity"]["nvidia.com/gpu"], "40");
        assert_eq!(r.limits["nvidia.com/gpu"], 80, "8 GPUs of 10 slices");
        // Without the overlays Karpenter counts whole GPUs of nvidia.com/gpu: the limit says 8.
        let mut blind = pool("T4", ts(10), aws());
        blind.overlays_read = false;
        let r0 = render(&blind).unwrap();
        assert_eq!(r0.limits["nvidia.com/gpu"], 8, "8 whole GPUs");
        assert_eq!(r0.node_pool["spec"]["limits"]["nvidia.com/gpu"], "8");
        assert_eq!(
            r0.overlays, r.overlays,
            "the overlays are the same either way"
        );
        let labels = &r.node_pool["spec"]["template"]["metadata"]["labels"];
        assert_eq!(labels["nvidia.com/device-plugin.config"], "fracgpu-slices");
        assert!(labels.get("fracgpu.dev/sharing").is_none());
        // Another number of replicas: the same template labels, so Karpenter sees no drift.
        let eight = render(&pool("T4", ts(8), aws())).unwrap();
        assert_eq!(
            eight.node_pool["spec"]["template"]["metadata"]["labels"],
            *labels
        );
        // A pool made while names said the settings keeps its name while they hold.
        let mut legacy = pool("T4", ts(10), aws());
        legacy.config_name = Some("time-sliced-10".into());
        let kept = render(&legacy).unwrap();
        let labels = &kept.node_pool["spec"]["template"]["metadata"]["labels"];
        assert_eq!(labels["nvidia.com/device-plugin.config"], "time-sliced-10");
        assert!(labels.get("fracgpu.dev/sharing").is_none());
        let reqs = r.node_pool["spec"]["template"]["spec"]["requirements"]
            .as_array()
            .unwrap();
        assert!(
            reqs.contains(&json!({"key": "karpenter.k8s.aws/instance-gpu-name",
            "operator": "In", "values": ["t4"]}))
        );
        assert!(
            reqs.contains(&json!({"key": "karpenter.k8s.aws/instance-gpu-count",
            "operator": "In", "values": ["1", "4"]}))
        );
    }

    #[test]
    fn renamed_resources_zero_the_whole_gpus() {
        let sharing = SharingMode::TimeSlicing {
            replicas: 4,
            rename_by_default: true,
            fail_requests_greater_than_one: false,
        };
        let r = render(&pool("A10G", sharing.clone(), aws())).unwrap();
        assert_eq!(r.capacity[&1]["nvidia.com/gpu.shared"], 4);
        assert_eq!(r.capacity[&1]["nvidia.com/gpu"], 0);
        assert_eq!(
            r.limits.keys().collect::<Vec<_>>(),
            ["nvidia.com/gpu.shared"]
        );
        // No instance type offers the renamed resource without the overlays: its pods wait,
        // and the limit stays in slices.
        let mut blind = pool("A10G", sharing, aws());
        blind.overlays_read = false;
        assert_eq!(render(&blind).unwrap().limits, r.limits);
    }

    #[test]
    fn bad_input_names_the_argument() {
        let mut p = pool("T4", ts(4), aws());
        p.gpu_counts = vec![2];
        p.limit_gpus = Some(1);
        let e = render(&p).unwrap_err();
        assert_eq!(attributes(&e), ["gpu_counts", "limit_gpus"]);

        let mig = SharingMode::Mig {
            profile: "1g.10gb".into(),
            strategy: MigStrategy::Mixed,
            gke_sharing: None,
        };
        let mut p = pool(
            "A100-80GB",
            mig,
            Provisioner::Nap(NodeClass::Existing("gpu".into())),
        );
        p.gpu_counts = vec![1];
        let e = render(&p).unwrap_err();
        assert_eq!(attributes(&e), ["mig"]);

        let mut p = pool("T4", ts(4), aws());
        p.name = "Slices_1".into();
        assert_eq!(attributes(&render(&p).unwrap_err())[0], "name");
    }

    #[test]
    fn nap_pins_the_gpu_by_name_or_by_size() {
        let nap = || {
            Provisioner::Nap(NodeClass::Made(AksClass {
                image_family: "Ubuntu2204".into(),
            }))
        };
        let r = render(&pool("T4", ts(4), nap())).unwrap();
        let reqs = &r.node_pool["spec"]["template"]["spec"]["requirements"];
        assert!(
            reqs.as_array()
                .unwrap()
                .contains(&json!({"key": "karpenter.azure.com/sku-gpu-name",
            "operator": "In", "values": ["T4"]}))
        );
        assert_eq!(r.node_class.unwrap()["spec"]["gpu"]["mode"], "None");
        // The 40 GB A100 size names no accelerator.
        let mut p = pool("A100-40GB", ts(4), nap());
        p.gpu_counts = vec![8];
        let r = render(&p).unwrap();
        let reqs = &r.node_pool["spec"]["template"]["spec"]["requirements"];
        assert!(
            reqs.as_array()
                .unwrap()
                .contains(&json!({"key": "node.kubernetes.io/instance-type",
            "operator": "In", "values": ["Standard_ND96asr_v4"]}))
        );
    }

    #[test]
    fn bottlerocket_gets_its_settings_and_no_labels() {
        let class = |v: &str| {
            Provisioner::Aws(NodeClass::Made(Ec2Class {
                role: "KarpenterNodeRole".into(),
                subnet_tags: BTreeMap::from([("karpenter.sh/discovery".into(), "c".into())]),
                security_group_tags: BTreeMap::from([(
                    "karpenter.sh/discovery".into(),
                    "c".into(),
                )]),
                ami_family: AmiFamily::Bottlerocket,
                ami_version: v.into(),
            }))
        };
        let r = render(&pool("T4", ts(4), class("latest"))).unwrap();
        let u = r.user_data.unwrap();
        assert!(
            u.contains("device-sharing-strategy = \"time-slicing\"") && u.contains("replicas = 4")
        );
        assert!(
            r.node_pool["spec"]["template"]["metadata"]["labels"]
                .get("nvidia.com/device-plugin.config")
                .is_none()
        );
        let e = render(&pool("T4", ts(4), class("v1.24.1"))).unwrap_err();
        assert_eq!(attributes(&e), ["eks.node_class.ami_version"]);
        let mig = SharingMode::Mig {
            profile: "1g.10gb".into(),
            strategy: MigStrategy::Mixed,
            gke_sharing: None,
        };
        let mut p = pool("A100-80GB", mig, class("latest"));
        p.gpu_counts = vec![8];
        assert_eq!(attributes(&render(&p).unwrap_err()), ["mig.strategy"]);
    }
}
