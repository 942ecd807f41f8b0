//! The MIG manager's configs and labels: which config names exist, and whether a node can be
//! taken through one. Pure, so that plan time and the action's run judge nodes the same way.

use super::offered::{Offered, missing};
use crate::cluster::drain::NodeView;

/// The label the MIG manager acts on, and the one it reports in.
pub const MIG_CONFIG_LABEL: &str = gpu::MIG_CONFIG_LABEL;
pub const MIG_STATE_LABEL: &str = "nvidia.com/mig.config.state";

/// The configs of the GPU operator's default MIG manager ConfigMap that name no single profile
/// (NVIDIA/gpu-operator assets/state-mig-manager/0400_configmap.yaml).
const WHOLE_GPU_CONFIGS: [&str; 3] = ["all-disabled", "all-enabled", "all-balanced"];

/// Checks the config name: a label value, and for `all-<profile>` a profile some GPU has.
pub(super) fn check_config(config: &str) -> Result<(), String> {
    let label_value = config.len() <= 63
        && !config.is_empty()
        && config
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
        && config.starts_with(|c: char| c.is_ascii_alphanumeric())
        && config.ends_with(|c: char| c.is_ascii_alphanumeric());
    if !label_value {
        return Err(format!(
            "{config:?} is not a label value (up to 63 letters, digits, '-', '_' or '.', \
            starting and ending with a letter or digit), so it cannot name a MIG manager config."
        ));
    }
    let Some(profile) = profile_of(config) else {
        return Ok(());
    };
    let known = gpu::all_gpu_models()
        .iter()
        .any(|g| g.mig_profile(&profile).is_some());
    if known {
        return Ok(());
    }
    let mut names: Vec<String> = gpu::all_gpu_models()
        .iter()
        .flat_map(|g| g.mig_profiles.iter())
        .map(|p| format!("all-{}", p.name.replace('+', ".")))
        .collect();
    names.sort();
    names.dedup();
    Err(format!(
        "{config:?} names no MIG profile of any GPU. The per-profile configs are: {}; or \
        `all-disabled`.",
        names.join(", ")
    ))
}

/// The profile an `all-<profile>` config splits every GPU into (`+me` restored).
fn profile_of(config: &str) -> Option<String> {
    if WHOLE_GPU_CONFIGS.contains(&config) {
        return None;
    }
    let p = config.strip_prefix("all-")?;
    // A profile is `<n>g.<m>gb`, perhaps with `.me`; anything else is a config of the user's own.
    let looks = p
        .split('.')
        .next()
        .is_some_and(|g| g.ends_with('g') && g[..g.len() - 1].chars().all(|c| c.is_ascii_digit()));
    looks.then(|| match p.strip_suffix(".me") {
        Some(base) => format!("{base}+me"),
        None => p.to_string(),
    })
}

/// The GPU model behind GPU feature discovery's product label, which carries `-SHARED` under
/// time-slicing and `-MIG-<profile>` under the single strategy.
fn model_of(product: &str) -> Option<&'static gpu::GpuModel> {
    let base = product.split("-MIG-").next().unwrap_or(product);
    let base = base.strip_suffix("-SHARED").unwrap_or(base);
    gpu::all_gpu_models().iter().copied().find(|g| {
        g.gpu_product == base
            || gpu::Cloud::ALL
                .into_iter()
                .flat_map(gpu::machine_types_of)
                .any(|m| std::ptr::eq(m.gpu, *g) && m.gpu_product() == base)
    })
}

/// Why a node cannot take the config, before anything is touched.
fn unfit(node: &NodeView, config: &str) -> Option<String> {
    let name = &node.name;
    if node.label("nvidia.com/mig.capable") == Some("false") {
        return Some(format!(
            "node {name} reports nvidia.com/mig.capable=false: its GPUs have no MIG."
        ));
    }
    let profile = profile_of(config)?;
    let Some(product) = node.label("nvidia.com/gpu.product") else {
        return Some(format!(
            "node {name} has no nvidia.com/gpu.product label: GPU feature discovery has not \
            labelled it yet, so neither the action nor the MIG manager knows its GPU."
        ));
    };
    // A GPU the catalog does not know is the MIG manager's to judge.
    let g = model_of(product)?;
    if g.mig_profile(&profile).is_some() {
        return None;
    }
    let offered: Vec<String> = g
        .mig_profiles
        .iter()
        .map(|p| format!("all-{}", p.name.replace('+', ".")))
        .collect();
    Some(if offered.is_empty() {
        format!("node {name} has {product} GPUs, which have no MIG.")
    } else {
        format!(
            "node {name} has {product} GPUs, which have no {profile} profile. Its configs: {}.",
            offered.join(", ")
        )
    })
}

/// Why a node already labelled with the config cannot be taken through it again: the MIG
/// manager acts on a change of the label (and when its pod starts), so writing the same value
/// would wait for a verdict that never comes.
fn stuck(node: &NodeView, config: &str) -> Option<String> {
    if node.label(MIG_CONFIG_LABEL) != Some(config) {
        return None;
    }
    let name = &node.name;
    match node.label(MIG_STATE_LABEL).unwrap_or("") {
        "success" => None,
        "failed" => Some(format!(
            "node {name} carries {MIG_CONFIG_LABEL}={config} already and its MIG manager \
            reports failed. It tries again only when the label changes or its pod restarts: \
            drain the node and delete the nvidia-mig-manager pod on it, or run this action with \
            another config first."
        )),
        state => Some(format!(
            "node {name} is being reconfigured to {config} already ({MIG_STATE_LABEL}={state}); \
            wait for the MIG manager's verdict, then run the action again."
        )),
    }
}

/// Why the action will not take a node through the config, as a diagnostic's summary and
/// detail; `offered`, the configs its MIG manager has where the cluster says.
pub(super) fn refusal(
    node: &NodeView,
    config: &str,
    offered: Option<&Offered>,
) -> Option<(&'static str, String)> {
    if let Some(why) = unfit(node, config) {
        return Some(("MIG config does not fit the node", why));
    }
    if let Some(why) = offered.and_then(|o| missing(node, config, o)) {
        return Some(("MIG config not where the MIG manager looks", why));
    }
    stuck(node, config).map(|why| ("Node already on this MIG config", why))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(labels: &[(&str, &str)]) -> NodeView {
        NodeView {
            name: "n1".into(),
            labels: labels
                .iter()
                .map(|(k, v)| ((*k).to_string(), (*v).to_string()))
                .collect(),
            unschedulable: false,
        }
    }

    #[test]
    fn configs_are_label_values_and_profiles_some_gpu_has() {
        assert!(check_config("all-1g.10gb").is_ok());
        assert!(check_config("all-1g.10gb.me").is_ok());
        assert!(check_config("all-disabled").is_ok());
        assert!(check_config("my-custom-layout").is_ok());
        let e = check_config("all-9g.99gb").unwrap_err();
        assert!(
            e.contains("all-1g.5gb") && e.contains("all-disabled"),
            "{e}"
        );
        assert!(check_config("all 1g").unwrap_err().contains("label value"));
        assert!(check_config("").is_err());
    }

    #[test]
    fn a_node_already_labelled_is_done_or_stuck() {
        let at = |state: &str| node(&[(MIG_CONFIG_LABEL, "all-1g.5gb"), (MIG_STATE_LABEL, state)]);
        assert_eq!(stuck(&at("success"), "all-1g.5gb"), None);
        assert!(
            stuck(&at("failed"), "all-1g.5gb")
                .is_some_and(|e| e.contains("nvidia-mig-manager pod"))
        );
        assert!(stuck(&at("pending"), "all-1g.5gb").is_some_and(|e| e.contains("pending")));
        // Another config is a change the MIG manager acts on.
        assert_eq!(stuck(&at("failed"), "all-2g.10gb"), None);
    }

    #[test]
    fn a_profile_must_fit_the_node_gpu() {
        let a100_40 = node(&[("nvidia.com/gpu.product", "NVIDIA-A100-SXM4-40GB")]);
        assert_eq!(unfit(&a100_40, "all-1g.5gb"), None);
        let e = unfit(&a100_40, "all-1g.20gb").expect("no 1g.20gb on an A100 40GB");
        assert!(e.contains("n1") && e.contains("all-1g.5gb"), "{e}");
        // GFD's renamed product under the single strategy still names the hardware.
        let renamed = node(&[("nvidia.com/gpu.product", "NVIDIA-A100-SXM4-40GB-MIG-1g.5gb")]);
        assert_eq!(unfit(&renamed, "all-2g.10gb"), None);
        let t4 = node(&[("nvidia.com/gpu.product", "Tesla-T4")]);
        assert!(unfit(&t4, "all-1g.5gb").is_some_and(|e| e.contains("no MIG")));
        let no_mig = node(&[("nvidia.com/mig.capable", "false")]);
        assert!(unfit(&no_mig, "all-disabled").is_some());
        assert!(unfit(&node(&[]), "all-1g.5gb").is_some_and(|e| e.contains("gpu.product")));
        // Whole-GPU configs and the user's own are the MIG manager's to judge.
        assert_eq!(unfit(&node(&[]), "all-disabled"), None);
        assert_eq!(unfit(&node(&[]), "my-layout"), None);
    }
}
