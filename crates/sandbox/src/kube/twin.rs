//! The digital twin: what a node advertises once the GPU stack on it has started.
//!
//! On GKE the cloud's own device plugin advertises sharing and partitions straight from the node pool. On AKS
//! and EKS the NVIDIA device plugin (deployed by the GPU operator) does, from the config it loaded when its pod
//! last started: that is why every node carries its own [`PluginInputs`] snapshot, refreshed only when the
//! device plugin daemonset is restarted (or the pod starts on a new node), never when the ConfigMap is edited.
//! What each config-manager (the plugin's, GPU feature discovery's, the MPS daemon's) linked and loaded
//! is in [`config_manager`].
//!
//! Bottlerocket's NVIDIA variants are the exception on EKS: their device plugin is a host service the
//! OS configures from its own settings (`settings.kubelet-device-plugins.nvidia.*`: time-slicing, mps,
//! mig.profile; bottlerocket.dev, "kubelet-device-plugins"), not the operator's daemonset. Nothing the
//! operator's ConfigMap, the config label or the MIG manager label says reaches it: it advertises what
//! the settings in the node's user data say (`twin/bottlerocket.rs`), whole GPUs without any.
//!
//! Written from the device plugin's documented config format (api/config/v1), independently of the provider.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;

pub(crate) use config_manager::{PluginInputs, Reader, Readers};

pub(crate) const CONFIG_LABEL: &str = "nvidia.com/device-plugin.config";
/// Where a node shows what each config-manager linked and each process loaded (the sandbox's own
/// annotation, JSON: operand -> {config, replicas, error}).
pub(crate) const READERS_ANNOTATION: &str = "sandbox.fracgpu.dev/config-manager";
pub(crate) const MIG_CONFIG_LABEL: &str = "nvidia.com/mig.config";
pub(crate) const MIG_STATE_LABEL: &str = "nvidia.com/mig.config.state";
/// Where a node notes why its device plugin refused its config (the sandbox's own annotation).
pub(crate) const ERROR_ANNOTATION: &str = "sandbox.fracgpu.dev/device-plugin-error";

/// One node's hardware and the device plugin state on it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct NodeTwin {
    pub(crate) cloud: String,
    pub(crate) pool: String,
    pub(crate) gpu_product: Option<String>,
    pub(crate) gpus: u32,
    pub(crate) gpu_memory_mib: u64,
    pub(crate) mig_profile: Option<String>,
    pub(crate) mig_instances_per_gpu: u32,
    pub(crate) gke_sharing: Option<(String, u32)>,
    /// The labels the pool put on the node, to tell them from labels added through the API.
    pub(crate) pool_labels: BTreeMap<String, String>,
    pub(crate) loaded: PluginInputs,
    /// The node's nvidia.com/mig.config label when the plugin last started (the MIG manager restarts it).
    pub(crate) seen_mig_label: Option<String>,
    /// The device plugin is the OS's own host service (Bottlerocket), deaf to the GPU operator.
    #[serde(default)]
    pub(crate) host_device_plugin: bool,
    /// The user data the node booted with (decoded), where such an OS reads its settings.
    #[serde(default)]
    pub(crate) user_data: Option<String>,
    /// GPU feature discovery's `nvidia.com/mig.capable` label, when the node carries one (it wins over
    /// the product name).
    #[serde(default)]
    pub(crate) mig_capable: Option<bool>,
    /// The `nvidia.com/mig.config` the MIG manager failed to apply (see [`mig_fails`]).
    #[serde(default)]
    pub(crate) mig_refused: Option<String>,
    /// What the config-managers of the node's device plugin, GPU feature discovery and MPS control
    /// daemon pods linked and what their processes loaded (`twin/config_manager.rs`).
    #[serde(default)]
    pub(crate) readers: Readers,
}

/// Whether a node of this OS image runs the NVIDIA device plugin as a host service.
pub(crate) fn host_device_plugin(os_image: Option<&str>) -> bool {
    os_image.is_some_and(|o| o.starts_with("Bottlerocket"))
}

/// Extended resources (capacity = allocatable) and node labels.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Advert {
    pub(crate) resources: BTreeMap<String, u64>,
    pub(crate) labels: BTreeMap<String, String>,
}

/// A parsed device plugin config (only what changes the advertisement).
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct DpConfig {
    pub(crate) mig_strategy: Option<String>,
    pub(crate) sharing: Option<Sharing>,
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Sharing {
    /// "time-slicing" or "mps", as GPU feature discovery labels it.
    pub(crate) strategy: &'static str,
    pub(crate) rename_by_default: bool,
    pub(crate) resources: Vec<(String, u64)>,
}

/// Parses one config of the ConfigMap, rejecting what the plugin rejects (the plugin then keeps running with
/// its previous config, so the node keeps its previous advertisement).
pub(crate) fn parse_config(yaml: &str) -> Result<DpConfig, String> {
    let v: Value = if yaml.trim().is_empty() {
        Value::Object(Default::default())
    } else {
        serde_saphyr::from_str(yaml).map_err(|e| format!("unable to parse config file: {e}"))?
    };
    let v = if v.is_null() {
        Value::Object(Default::default())
    } else {
        v
    };
    let m = v
        .as_object()
        .ok_or("unable to parse config file: not a map")?;
    match m.get("version") {
        None | Some(Value::Null) => {}
        Some(Value::String(s)) if s == "v1" => {}
        Some(other) => return Err(format!("unknown version: {other}")),
    }
    let mig_strategy = match m.get("flags").and_then(|f| f.get("migStrategy")) {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) if ["none", "single", "mixed"].contains(&s.as_str()) => {
            Some(s.clone())
        }
        Some(other) => return Err(format!("invalid migStrategy: {other}")),
    };
    let sharing = match m.get("sharing") {
        None | Some(Value::Null) => None,
        Some(s) => {
            // Each section present must parse; with both, the plugin's active strategy is MPS.
            let ts = match s.get("timeSlicing") {
                None | Some(Value::Null) => None,
                Some(t) => Some(parse_sharing("time-slicing", t)?),
            };
            let mps = match s.get("mps") {
                None | Some(Value::Null) => None,
                Some(m) => Some(parse_sharing("mps", m)?),
            };
            mps.or(ts)
        }
    };
    Ok(DpConfig {
        mig_strategy,
        sharing,
    })
}

fn parse_sharing(strategy: &'static str, v: &Value) -> Result<Sharing, String> {
    let rename_by_default = match v.get("renameByDefault") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => *b,
        Some(other) => return Err(format!("renameByDefault must be a boolean, got {other}")),
    };
    let list = v
        .get("resources")
        .and_then(Value::as_array)
        .filter(|a| !a.is_empty())
        .ok_or("no resources specified")?;
    let mut resources = Vec::new();
    for r in list {
        let raw = r
            .get("name")
            .and_then(Value::as_str)
            .ok_or("resource without a name")?;
        let name = if raw.starts_with("nvidia.com/") {
            raw.to_string()
        } else {
            format!("nvidia.com/{raw}")
        };
        let local = &name["nvidia.com/".len()..];
        let ok_chars = !local.is_empty()
            && local
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.' || b == b'_')
            && local.as_bytes()[0].is_ascii_alphanumeric()
            && local.as_bytes()[local.len() - 1].is_ascii_alphanumeric();
        if name.len() > 63 || !ok_chars {
            return Err(format!("invalid resource name: {raw:?}"));
        }
        if local != "gpu" && !local.starts_with("mig-") {
            return Err(format!("unsupported resource: {raw:?}"));
        }
        if strategy == "mps" && local != "gpu" {
            return Err(format!(
                "MPS sharing is only supported for nvidia.com/gpu, not {raw:?}"
            ));
        }
        match r.get("devices") {
            None | Some(Value::Null) => {}
            Some(Value::String(d)) if d == "all" => {}
            Some(Value::Number(n)) if n.as_u64().is_some_and(|n| n > 0) => {}
            Some(Value::Array(_)) => {}
            Some(other) => return Err(format!("unrecognized type for devices spec: {other}")),
        }
        let replicas = r
            .get("replicas")
            .and_then(Value::as_u64)
            .ok_or_else(|| format!("invalid replicas for {raw:?}"))?;
        if replicas < 2 {
            return Err(format!(
                "number of replicas must be >= 2 (got {replicas} for {raw:?})"
            ));
        }
        if resources.iter().any(|(n, _)| *n == name) {
            return Err(format!("duplicate resource {name:?}"));
        }
        resources.push((name, replicas));
    }
    Ok(Sharing {
        strategy,
        rename_by_default,
        resources,
    })
}

/// Memory of one MIG instance in MiB, from the profile name (`1g.10gb` -> 10 GiB).
fn mig_memory_mib(profile: &str) -> u64 {
    profile
        .split('.')
        .nth(1)
        .and_then(|s| s.trim_end_matches("+me").strip_suffix("gb"))
        .and_then(|s| s.parse::<u64>().ok())
        .map(|g| g * 1024)
        .unwrap_or(0)
}

/// The GPU operator's MIG manager on a cluster, from the ClusterPolicy's `spec.migManager`: whether it
/// runs (absent `enabled` means it does: `MIGManagerSpec.IsEnabled` in NVIDIA/gpu-operator
/// api/nvidia/v1/clusterpolicy_types.go) and the config the operator gives nodes that name none.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct MigManager {
    pub(crate) enabled: bool,
    pub(crate) default_config: String,
}

/// The operator's test for a MIG-capable node when GPU feature discovery has not said (NVIDIA/gpu-operator
/// controllers/state_manager.go `hasMIGCapableGPU`): GPU feature discovery's `nvidia.com/mig.capable`
/// label when present, else the product names an A100, H100 or A30.
pub(crate) fn mig_capable(t: &NodeTwin) -> bool {
    if let Some(c) = t.mig_capable {
        return t.gpus > 0 && c;
    }
    let product = t.gpu_product.as_deref().unwrap_or_default().to_lowercase();
    t.gpus > 0 && ["a100", "h100", "a30"].iter().any(|g| product.contains(g))
}

/// The `nvidia.com/mig.config` label the operator adds to a node (NVIDIA/gpu-operator
/// controllers/nodelabeling_controller.go): a MIG-capable node with no such label gets `all-disabled`
/// while the MIG manager runs with that default (the chart's). Whatever geometry the cloud made, the MIG
/// manager then applies it: that is how a pool partitioned by the cloud (AKS `gpuInstanceProfile`) loses its
/// partitions unless its nodes carry their own label.
pub(crate) fn operator_mig_label(
    t: &NodeTwin,
    labels: &BTreeMap<String, String>,
    mm: &MigManager,
) -> Option<&'static str> {
    (mm.enabled
        && mm.default_config == "all-disabled"
        && mig_capable(t)
        && !labels.contains_key(MIG_CONFIG_LABEL))
    .then_some("all-disabled")
}

/// The MIG geometry a node ends up with, and the state label the MIG manager reports. Where the MIG manager
/// runs, the node's `nvidia.com/mig.config` label decides (`all-disabled`, or `all-<profile>` with `+me`
/// written `.me` as mig-parted names its configs); a node without the label keeps what the cloud made (AKS and
/// GKE partition at the pool; EKS has no such field). Without the MIG manager nothing repartitions.
pub(crate) fn mig_manager(
    t: &NodeTwin,
    labels: &BTreeMap<String, String>,
    mm: &MigManager,
) -> (Option<(String, u32)>, Option<&'static str>) {
    if t.host_device_plugin {
        // The operator's MIG manager does not run there; the OS partitions from its own settings.
        return (None, None);
    }
    let from_pool = || {
        if t.cloud == "eks" {
            return None;
        }
        t.mig_profile.clone().map(|p| {
            let n = if t.mig_instances_per_gpu > 0 {
                t.mig_instances_per_gpu
            } else {
                mig_instances(t.gpu_product.as_deref().unwrap_or(""), t.gpu_memory_mib, &p)
                    .unwrap_or(1)
            };
            (p, n)
        })
    };
    let want = labels.get(MIG_CONFIG_LABEL).filter(|_| mm.enabled);
    let Some(want) = want else {
        return (from_pool(), None);
    };
    if want == "all-disabled" {
        return (None, Some("success"));
    }
    let Some(profile) = want.strip_prefix("all-") else {
        return (None, Some("failed"));
    };
    let same_as_pool = t
        .mig_profile
        .as_deref()
        .is_some_and(|p| p.replace('+', ".") == profile);
    let n = if same_as_pool && t.mig_instances_per_gpu > 0 {
        Some(t.mig_instances_per_gpu)
    } else {
        mig_instances(
            t.gpu_product.as_deref().unwrap_or(""),
            t.gpu_memory_mib,
            profile,
        )
    };
    let profile = match (&t.mig_profile, same_as_pool) {
        (Some(p), true) => p.clone(),
        _ => profile.to_string(),
    };
    match n {
        Some(n) => (Some((profile, n)), Some("success")),
        None => (None, Some("failed")),
    }
}

fn product_label(t: &NodeTwin) -> String {
    t.gpu_product.clone().unwrap_or_default().replace(' ', "-")
}

/// GKE: the cloud's device plugin, from the pool's sharing and the partitions the node has; no
/// restart involved.
fn gke(t: &NodeTwin, mig: Option<(String, u32)>) -> Advert {
    let mut units = t.gpus as u64;
    if let Some((_, k)) = mig {
        units *= k as u64;
    }
    if let Some((_, clients)) = &t.gke_sharing {
        units *= (*clients).max(1) as u64;
    }
    let mut a = Advert::default();
    a.resources.insert("nvidia.com/gpu".into(), units);
    a
}

/// The labels GKE puts on nodes of a GPU pool (the pool's own copies win when present).
pub(crate) fn gke_labels(t: &NodeTwin) -> BTreeMap<String, String> {
    let mut l = BTreeMap::new();
    if t.gpus == 0 {
        return l;
    }
    if let Some(p) = &t.gpu_product {
        l.insert("cloud.google.com/gke-accelerator".into(), p.clone());
    }
    l.insert("cloud.google.com/gke-gpu".into(), "true".into());
    if let Some(p) = &t.mig_profile {
        l.insert("cloud.google.com/gke-gpu-partition-size".into(), p.clone());
    }
    if let Some((s, n)) = &t.gke_sharing {
        let v = if s.eq_ignore_ascii_case("MPS") {
            "mps"
        } else {
            "time-sharing"
        };
        l.insert("cloud.google.com/gke-gpu-sharing-strategy".into(), v.into());
        l.insert(
            "cloud.google.com/gke-max-shared-clients-per-gpu".into(),
            n.to_string(),
        );
    }
    l
}

/// What the node advertises now. `Err` means the device plugin refused its config (or could not find it):
/// it keeps serving what it served before, so the caller keeps the node's previous advertisement.
pub(crate) fn advertise(
    t: &NodeTwin,
    labels: &BTreeMap<String, String>,
    mm: &MigManager,
) -> Result<Advert, String> {
    if t.gpus == 0 || t.gpu_product.is_none() {
        return Ok(Advert::default());
    }
    let (mig, _) = mig_manager(t, labels, mm);
    if t.cloud == "gke" {
        return Ok(gke(t, mig));
    }
    if t.host_device_plugin {
        // What the OS's settings say, whatever the operator's objects and the node's labels say.
        return Ok(Advert {
            resources: bottlerocket::advertise(&bottlerocket::Host {
                gpus: t.gpus,
                product: t.gpu_product.as_deref().unwrap_or_default(),
                memory_mib: t.gpu_memory_mib,
                user_data: t.user_data.as_deref(),
            })?,
            labels: BTreeMap::new(),
        });
    }
    let cfg = running_config(&t.readers.plugin)?;
    advert_of(t, mig, &cfg)
}

/// The config a process runs with, or why it runs none.
fn running_config(r: &Reader) -> Result<DpConfig, String> {
    match (&r.error, &r.loaded) {
        (Some(e), _) => Err(e.clone()),
        (None, None) => Err("not started".into()),
        (None, Some(yaml)) => {
            let key = r.linked.as_deref().unwrap_or_default();
            parse_config(yaml).map_err(|e| format!("unable to load config {key:?}: {e}"))
        }
    }
}

/// GPU feature discovery's labels from the config it loaded; None while it runs none (the labels
/// it wrote before stay).
pub(crate) fn gfd_labels(
    t: &NodeTwin,
    labels: &BTreeMap<String, String>,
    mm: &MigManager,
) -> Option<BTreeMap<String, String>> {
    if t.gpus == 0 || t.gpu_product.is_none() || t.cloud == "gke" || t.host_device_plugin {
        return advertise(t, labels, mm).ok().map(|a| a.labels);
    }
    let (mig, _) = mig_manager(t, labels, mm);
    let cfg = running_config(&t.readers.gfd).ok()?;
    advert_of(t, mig, &cfg).ok().map(|a| a.labels)
}

/// What a device plugin config gives on this node: its resources, and the labels GFD writes.
fn advert_of(t: &NodeTwin, mig: Option<(String, u32)>, cfg: &DpConfig) -> Result<Advert, String> {
    let inp = &t.loaded;
    // The operator passes ClusterPolicy spec.mig.strategy to the plugin as MIG_STRATEGY; flags set that way
    // override the config file's flags.
    let strategy = if !inp.mig_strategy.is_empty() {
        inp.mig_strategy.clone()
    } else {
        cfg.mig_strategy.clone().unwrap_or_else(|| "none".into())
    };
    if !["none", "single", "mixed"].contains(&strategy.as_str()) {
        return Err(format!("invalid MIG strategy {strategy:?}"));
    }
    let base: Vec<(String, u64)> = match (&mig, strategy.as_str()) {
        (Some((_, k)), "single") => vec![("nvidia.com/gpu".into(), t.gpus as u64 * *k as u64)],
        (Some((p, k)), "mixed") => vec![(format!("nvidia.com/mig-{p}"), t.gpus as u64 * *k as u64)],
        _ => vec![("nvidia.com/gpu".into(), t.gpus as u64)],
    };
    let mut a = Advert::default();
    let mut replicas = 1;
    let mut sharing_strategy = "none";
    let mut renamed = false;
    if let Some(s) = &cfg.sharing {
        if s.strategy == "mps" && strategy == "mixed" {
            return Err("MPS sharing is not supported with the mixed MIG strategy".into());
        }
        if s.strategy == "mps" && mig.is_some() && strategy != "none" {
            return Err("MPS sharing is not supported on MIG devices".into());
        }
    }
    for (name, n) in base {
        match cfg.sharing.as_ref().and_then(|s| {
            s.resources
                .iter()
                .find(|(r, _)| *r == name)
                .map(|(_, x)| (s, *x))
        }) {
            Some((s, r)) => {
                replicas = r;
                sharing_strategy = s.strategy;
                renamed = s.rename_by_default;
                let out = if s.rename_by_default {
                    format!("{name}.shared")
                } else {
                    name.clone()
                };
                a.resources.insert(out, n * r);
            }
            None => {
                a.resources.insert(name, n);
            }
        }
    }
    let mut product = product_label(t);
    let mut count = t.gpus as u64;
    let mut memory = t.gpu_memory_mib;
    if let (Some((p, k)), "single") = (&mig, strategy.as_str()) {
        product = format!("{product}-MIG-{p}");
        count = t.gpus as u64 * *k as u64;
        memory = mig_memory_mib(p);
    }
    if let (Some((p, k)), "mixed") = (&mig, strategy.as_str()) {
        a.labels.insert(
            format!("nvidia.com/mig-{p}.count"),
            (t.gpus as u64 * *k as u64).to_string(),
        );
        a.labels
            .insert(format!("nvidia.com/mig-{p}.replicas"), replicas.to_string());
        a.labels.insert(
            format!("nvidia.com/mig-{p}.memory"),
            mig_memory_mib(p).to_string(),
        );
    }
    if sharing_strategy != "none" && !renamed {
        product.push_str("-SHARED");
    }
    a.labels
        .insert("nvidia.com/gpu.present".into(), "true".into());
    a.labels.insert("nvidia.com/gpu.product".into(), product);
    a.labels
        .insert("nvidia.com/gpu.count".into(), count.to_string());
    a.labels
        .insert("nvidia.com/gpu.replicas".into(), replicas.to_string());
    a.labels.insert(
        "nvidia.com/gpu.sharing-strategy".into(),
        sharing_strategy.into(),
    );
    a.labels
        .insert("nvidia.com/gpu.memory".into(), memory.to_string());
    a.labels.insert("nvidia.com/mig.strategy".into(), strategy);
    Ok(a)
}

/// Labels GPU feature discovery owns: cleared before a new advertisement is written. The operator's
/// `nvidia.com/gpu.deploy.<operand>` labels share the prefix but are not GFD's.
pub(crate) fn is_gfd_label(k: &str) -> bool {
    (k.starts_with("nvidia.com/gpu.") && !k.starts_with("nvidia.com/gpu.deploy."))
        || k == "nvidia.com/mig.strategy"
        || (k.starts_with("nvidia.com/mig-") && k.contains('.'))
}

/// A node after the GPU stack's turn: its labels (the MIG manager's state and GPU feature discovery's
/// labels written, from the config GFD loaded) and the extended resources the device plugin
/// advertises, or why the plugin runs with no config (it then serves no GPU: its process exits, see
/// `twin/config_manager.rs`).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Rendered {
    pub(crate) labels: BTreeMap<String, String>,
    pub(crate) resources: Result<BTreeMap<String, u64>, String>,
}

/// What the node's labels and extended resources become, from the node's labels now.
pub(crate) fn render(t: &NodeTwin, labels: &BTreeMap<String, String>, mm: &MigManager) -> Rendered {
    let mut labels = labels.clone();
    match mig_manager(t, &labels, mm).1 {
        Some(s) => {
            labels.insert(MIG_STATE_LABEL.into(), s.into());
        }
        None => {
            labels.remove(MIG_STATE_LABEL);
        }
    }
    let resources = advertise(t, &labels, mm).map(|a| a.resources);
    if let Some(gfd) = gfd_labels(t, &labels, mm) {
        labels.retain(|k, _| !is_gfd_label(k));
        labels.extend(gfd);
    }
    Rendered { labels, resources }
}

/// Whether the MIG manager fails the node's `nvidia.com/mig.config` now, recording a new failure.
/// It cannot repartition GPUs that pods are using: mig-parted's apply fails (a MIG mode change
/// needs a GPU reset, which fails while processes hold the GPU, and a GPU instance in use cannot
/// be destroyed: NVIDIA's MIG user guide), and the MIG manager reports `failed` (NVIDIA/mig-parted
/// pkg/mig/reconfigure/reconfigure.go, `Run`). It acts on a change of the label only, so a config it
/// failed stays failed until the label changes. `gpu_users`: pods other than daemonset pods (the
/// GPU operator's operands, which the MIG manager stops itself) hold the node's GPUs. On failure
/// the node keeps its geometry and advertisement, and its state label reads `failed`.
pub(crate) fn mig_fails(
    t: &mut NodeTwin,
    labels: &BTreeMap<String, String>,
    mm: &MigManager,
    gpu_users: bool,
) -> bool {
    let label = labels.get(MIG_CONFIG_LABEL).filter(|_| mm.enabled);
    let Some(label) = label else {
        t.mig_refused = None;
        return false;
    };
    if t.mig_refused.as_ref() == Some(label) {
        return true;
    }
    let changed = t.seen_mig_label.as_ref() != Some(label);
    if changed && gpu_users {
        t.mig_refused = Some(label.clone());
        return true;
    }
    t.mig_refused = None;
    false
}

/// Which of the operands that read the device plugin config had their pods restarted.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct Restarts {
    pub(crate) plugin: bool,
    pub(crate) gfd: bool,
    pub(crate) mps: bool,
}

impl Restarts {
    pub(crate) const ALL: Restarts = Restarts {
        plugin: true,
        gfd: true,
        mps: true,
    };
}

/// The operator's and the operands' reaction on one node: the operator's MIG label; the pods
/// restarted (their daemonset was, or the MIG manager repartitioned and restarted the device
/// plugin and GFD because the node's `nvidia.com/mig.config` changed) start afresh from the
/// config as it is now; the others' config-manager sidecars see the node's label. The MPS control
/// daemon runs where the device plugin runs an MPS config.
pub(crate) fn restart_step(
    t: &mut NodeTwin,
    labels: &mut BTreeMap<String, String>,
    mm: &MigManager,
    current: &PluginInputs,
    restarted: Restarts,
) {
    if let Some(l) = operator_mig_label(t, labels, mm) {
        labels.insert(MIG_CONFIG_LABEL.into(), l.into());
    }
    let mig_label = labels.get(MIG_CONFIG_LABEL).cloned();
    let repartitioned = mm.enabled && mig_label != t.seen_mig_label;
    let label = labels.get(CONFIG_LABEL).map(String::as_str);
    let r = &mut t.readers;
    if restarted.plugin || repartitioned {
        t.loaded = current.clone();
        t.seen_mig_label = mig_label;
        r.plugin.start(label, current);
    } else {
        r.plugin.label_seen(label, current, true);
    }
    if restarted.gfd || repartitioned {
        r.gfd.start(label, current);
    } else {
        r.gfd.label_seen(label, current, true);
    }
    let mps_config = running_config(&r.plugin)
        .ok()
        .and_then(|c| c.sharing)
        .is_some_and(|s| s.strategy == "mps");
    match (&mut r.mps, mps_config) {
        (None, true) => {
            let mut m = Reader::default();
            m.start(label, current);
            r.mps = Some(m);
        }
        (Some(m), true) if restarted.mps => m.start(label, current),
        // Under the operator its sidecar finds no process to signal (PROCESS_TO_SIGNAL is
        // `/usr/bin/mps-control-daemon`, its argv[0] `mps-control-daemon`).
        (Some(m), true) => m.label_seen(label, current, false),
        (_, false) => r.mps = None,
    }
}

/// What each config-manager linked and each process loaded, for [`READERS_ANNOTATION`].
pub(crate) fn readers_summary(t: &NodeTwin) -> Value {
    let one = |r: &Reader| {
        let replicas = running_config(r).ok().map(|c| {
            c.sharing
                .map(|s| s.resources.iter().map(|(_, n)| *n).max().unwrap_or(1))
                .unwrap_or(1)
        });
        serde_json::json!({"config": r.linked, "replicas": replicas, "error": r.error,
            "sidecarError": r.sidecar_error})
    };
    let mut out = serde_json::json!({
        "nvidia-device-plugin": one(&t.readers.plugin),
        "gpu-feature-discovery": one(&t.readers.gfd),
    });
    if let Some(m) = &t.readers.mps {
        out["mps-control-daemon"] = one(m);
    }
    out
}

/// The device plugin's inputs from the ClusterPolicy and the ConfigMap it names (as read from the API).
/// The operator mounts the config into the device plugin's pods as a ConfigMap volume, and a volume
/// names a ConfigMap of the pod's own namespace, the operator's (NVIDIA/gpu-operator
/// controllers/object_controls.go, createConfigMapVolume for DevicePlugin.Config.Name): the caller reads
/// the ConfigMap `config_name(cp)` of that namespace.
pub(crate) fn plugin_inputs(cp: Option<&Value>, configmap: Option<&Value>) -> PluginInputs {
    let s = |p: &str| {
        cp.and_then(|c| c.pointer(p))
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    let config_name = s("/spec/devicePlugin/config/name");
    let configmap = configmap.filter(|_| !config_name.is_empty()).map(|cm| {
        cm.get("data")
            .and_then(Value::as_object)
            .map(|m| {
                m.iter()
                    .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string()))
                    .collect()
            })
            .unwrap_or_default()
    });
    PluginInputs {
        config_name,
        config_default: s("/spec/devicePlugin/config/default"),
        mig_strategy: s("/spec/mig/strategy"),
        configmap,
    }
}

/// The name of the ConfigMap the ClusterPolicy points the device plugin at (empty: none).
pub(crate) fn config_name(cp: Option<&Value>) -> &str {
    cp.and_then(|c| c.pointer("/spec/devicePlugin/config/name"))
        .and_then(Value::as_str)
        .unwrap_or_default()
}

/// The MIG manager as the ClusterPolicy sets it; none without the operator.
pub(crate) fn mig_manager_policy(cp: Option<&Value>) -> MigManager {
    let Some(cp) = cp else {
        return MigManager::default();
    };
    MigManager {
        enabled: cp
            .pointer("/spec/migManager/enabled")
            .and_then(Value::as_bool)
            .unwrap_or(true),
        default_config: cp
            .pointer("/spec/migManager/config/default")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string(),
    }
}

/// A pod template as a restart marker: any change of it rolls the pods (a restart bumps an annotation of
/// it, `kubectl.kubernetes.io/restartedAt`).
pub(crate) fn restart_marker(daemonset: &Value) -> String {
    daemonset
        .pointer("/spec/template")
        .cloned()
        .unwrap_or(Value::Null)
        .to_string()
}

// The hardware labels of GPU feature discovery, the names NVIDIA/k8s-device-plugin writes
// (README.md "Catalog of Labels", internal/lm/resource.go): the product as NVML names it with spaces as
// dashes, the number of GPUs, the memory of one in MiB, and whether it can be partitioned.
pub(crate) const GFD_PRODUCT: &str = "nvidia.com/gpu.product";
pub(crate) const GFD_COUNT: &str = "nvidia.com/gpu.count";
pub(crate) const GFD_MEMORY: &str = "nvidia.com/gpu.memory";
pub(crate) const GFD_MIG_CAPABLE: &str = "nvidia.com/mig.capable";

/// A node's hardware learnt from GPU feature discovery's labels (set by hand on a node no kubelet runs
/// on, or by a real GFD): None when the node names no GPU product and count. `cloud` is the cluster's
/// (`gke` takes GKE's own sharing and partition labels, as GKE's device plugin does).
pub(crate) fn twin_from_labels(
    cloud: &str,
    labels: &BTreeMap<String, String>,
    os_image: Option<&str>,
) -> Option<NodeTwin> {
    let product = labels.get(GFD_PRODUCT).filter(|p| !p.is_empty())?;
    let gpus: u32 = labels.get(GFD_COUNT)?.parse().ok()?;
    let gke = cloud == "gke";
    // GKE's node labels (cloud.google.com/docs "About GPU sharing strategies", "Running multi-instance
    // GPUs"): the sharing strategy and clients per GPU, and the partition size.
    let gke_sharing = labels
        .get("cloud.google.com/gke-gpu-sharing-strategy")
        .filter(|_| gke)
        .map(|s| {
            let clients = labels
                .get("cloud.google.com/gke-max-shared-clients-per-gpu")
                .and_then(|n| n.parse().ok())
                .unwrap_or(1);
            let s = if s == "mps" { "MPS" } else { "TIME_SHARING" };
            (s.to_string(), clients)
        });
    let mig_profile = labels
        .get("cloud.google.com/gke-gpu-partition-size")
        .filter(|_| gke)
        .cloned();
    Some(NodeTwin {
        cloud: cloud.to_string(),
        pool: String::new(),
        gpu_product: Some(product.clone()),
        gpus,
        gpu_memory_mib: labels
            .get(GFD_MEMORY)
            .and_then(|m| m.parse().ok())
            .unwrap_or(0),
        mig_profile,
        mig_instances_per_gpu: 0,
        gke_sharing,
        pool_labels: BTreeMap::new(),
        loaded: PluginInputs::default(),
        seen_mig_label: None,
        mig_refused: None,
        host_device_plugin: host_device_plugin(os_image),
        user_data: None,
        mig_capable: labels.get(GFD_MIG_CAPABLE).map(|v| v == "true"),
        readers: Readers::default(),
    })
}

mod bottlerocket;
mod config_manager;
mod mig_geometry;
use mig_geometry::mig_instances;
#[cfg(test)]
mod tests;
