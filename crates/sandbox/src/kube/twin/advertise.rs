//! What a node advertises once the GPU stack on it has started: the extended resources of its
//! device plugin (GKE's own, Bottlerocket's host service, or NVIDIA's from the config it loaded) and
//! the labels GPU feature discovery writes, rendered onto the node's labels.

use std::collections::BTreeMap;

use super::bottlerocket;
use super::device_config::{DpConfig, running_config};
use super::labels::MIG_STATE_LABEL;
use super::mig_manager::{MigManager, mig_manager};
use super::node::NodeTwin;

/// Extended resources (capacity = allocatable) and node labels.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Advert {
    pub(crate) resources: BTreeMap<String, u64>,
    pub(crate) labels: BTreeMap<String, String>,
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
/// `config_manager.rs`).
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
