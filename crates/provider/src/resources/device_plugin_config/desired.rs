//! What a configuration asks for, whichever way it is delivered: the `config` blocks (their
//! schema and model) resolved to the device plugin's documents, with the names the operator finds
//! them by ([`Desired`]); the checks of the blocks, which become diagnostics on their attribute;
//! and the way back, from what the cluster holds to blocks (import) and to the text a state keeps
//! (drift by meaning).

use std::collections::BTreeMap;

use serde_json::json;

use crate::cluster::KubernetesSettings;
use crate::model::{self, Sharing};
use gpu::device_plugin::{self, AllocationPolicy, DevicePluginConfig, SharingKind};
use gpu::{self, SharingMode};
use tfplugin::object::SingleBlock;
use tfplugin::schema::{Attribute, Block};
use tfplugin::validators::{Matches, OneOf};
use tfplugin::{AttrPath, Diagnostic, Diagnostics};

tfplugin::object! {
    /// One `config` block.
    pub struct ConfigArgs {
        pub name: String,
        pub yaml: Option<String>,
        pub shared_devices_allocation_policy: Option<String>,
    }
    flatten {
        pub sharing: Sharing,
    }
}

/// A node selects a config through a label, so a name must be a valid label value (which is
/// also a valid ConfigMap key).
const CONFIG_NAME_RE: &str = r"^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)$";

/// The schema of one `config` block.
pub(super) fn config_block() -> Block {
    model::sharing_blocks(
        Block::new(
            "One named config of the ConfigMap. Nodes select it with the label \
            `nvidia.com/device-plugin.config=<name>`. Give the sharing as a block, or the YAML \
            itself (a node pool's `device_plugin_config`), or neither for whole GPUs.",
        )
        .attr(
            Attribute::string("name")
                .required()
                .describe(
                    "The config's key in the ConfigMap and the node label value: up to 63 letters, \
                digits, `-`, `_`, `.`, starting and ending alphanumeric.",
                )
                .validate(Matches::new(
                    CONFIG_NAME_RE,
                    "a valid ConfigMap key and label value (up \
                    to 63 letters, digits, '-', '_' or '.', starting and ending with a letter or \
                    digit)",
                )),
        )
        .attr(Attribute::string("yaml").optional().describe(
            "The config document itself, e.g. `fracgpu_nodepool.x.device_plugin_config`. \
                Compared by meaning, so formatting never shows as a change.",
        ))
        .attr(
            Attribute::string("shared_devices_allocation_policy")
                .optional()
                .describe(
                    "Which GPU's replicas the device plugin offers a pod that asks for shared \
                    devices (`flags.plugin.sharedDevicesAllocationPolicy`, device plugin v0.20.0 \
                    and later; older plugins do not read it): `distributed` (the plugin's \
                    default) spreads pods over the GPUs, `packed` fills one GPU's replicas \
                    before the next, leaving whole GPUs free. With `time_slicing`, `mps` or a \
                    `yaml` that shares; a `yaml` that sets it already must agree.",
                )
                .validate(OneOf(&["distributed", "packed"])),
        ),
        false,
    )
}

/// What a known configuration, plan or state asks for, delivery aside.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct Desired {
    pub namespace: String,
    pub name: String,
    pub default: Option<String>,
    pub mig_strategy: Option<String>,
    /// config name -> parsed config
    pub configs: BTreeMap<String, DevicePluginConfig>,
    /// The resource's own `kubernetes` block (empty: the provider's).
    pub kubernetes: KubernetesSettings,
    /// The attribute that says how to reach the cluster, for diagnostics.
    pub access: Option<&'static str>,
}

fn config_path(i: usize) -> AttrPath {
    AttrPath::attr("config").with_index(i)
}

fn join(base: &AttrPath, rel: &AttrPath) -> AttrPath {
    let mut p = base.clone();
    p.0.extend(rel.0.iter().cloned());
    p
}

/// One config block to its document; problems become diagnostics on the attribute.
fn config_of(
    i: usize,
    c: &ConfigArgs,
    mig_strategy: Option<&str>,
    diags: &mut Diagnostics,
) -> Option<DevicePluginConfig> {
    let base = config_path(i);
    let name = &c.name;
    let blocks: Vec<&str> = [
        ("mig", c.sharing.mig.is_some()),
        ("time_slicing", c.sharing.time_slicing.is_some()),
        ("mps", c.sharing.mps.is_some()),
    ]
    .into_iter()
    .filter(|(_, set)| *set)
    .map(|(b, _)| b)
    .collect();
    let parsed = if let Some(text) = &c.yaml {
        if let Some(b) = blocks.first() {
            diags.push(
                Diagnostic::error(
                    "Conflicting arguments",
                    format!(
                        "{} sets both `yaml` and a `{b}` block; give the config one way.",
                        base.with_attr("yaml")
                    ),
                )
                .at(base.with_attr("yaml")),
            );
            return None;
        }
        match device_plugin::parse(text) {
            Ok(cfg) => cfg,
            Err(e) => {
                diags.push(
                    Diagnostic::error(
                        "Invalid device plugin config",
                        format!("{} (config {name:?}): {}", base.with_attr("yaml"), e.detail),
                    )
                    .at(base.with_attr("yaml")),
                );
                return None;
            }
        }
    } else {
        let mode = c.sharing.mode();
        match gpu::device_plugin_config(&mode) {
            Ok(named) => {
                // The config's own flag leaves the strategy to the ClusterPolicy (which overrides
                // it anyway) unless this is a MIG config.
                let mut cfg = named.config;
                if !matches!(mode, SharingMode::Mig { .. }) && cfg.sharing.is_some() {
                    cfg.mig_strategy = None;
                }
                cfg
            }
            // The schema's range validators already report these.
            Err(e)
                if matches!(
                    e.field,
                    gpu::Field::TimeSlicingReplicas | gpu::Field::MpsReplicas
                ) =>
            {
                return None;
            }
            Err(e) => {
                let d = model::domain_diagnostic(&e, &[]);
                let path = join(&base, &d.path.clone().unwrap_or_default());
                diags.push(
                    Diagnostic::error(d.summary.clone(), format!("{path}: {}", d.detail)).at(path),
                );
                return None;
            }
        }
    };
    if let Some(s) = &parsed.sharing
        && s.kind == SharingKind::Mps
        && mig_strategy == Some("mixed")
    {
        let at = if blocks.contains(&"mps") {
            base.with_attr("mps")
        } else {
            base.with_attr("yaml")
        };
        diags.push(
            Diagnostic::error(
                "MPS with the mixed MIG strategy",
                format!(
                    "{at} (config {name:?}) shares GPUs by MPS, but mig_strategy is \"mixed\": \
                    the device plugin runs MPS on full GPUs only and refuses it with the mixed \
                    strategy. Set mig_strategy to \"none\" or \"single\", or use time_slicing."
                ),
            )
            .at(at),
        );
        return None;
    }
    with_policy(parsed, c, &base, diags)
}

/// The config with the block's `shared_devices_allocation_policy`, which only acts on shared
/// devices and must agree with what a `yaml` says.
fn with_policy(
    mut cfg: DevicePluginConfig,
    c: &ConfigArgs,
    base: &AttrPath,
    diags: &mut Diagnostics,
) -> Option<DevicePluginConfig> {
    let Some(wanted) = c.shared_devices_allocation_policy.as_deref() else {
        return Some(cfg);
    };
    let at = base.with_attr("shared_devices_allocation_policy");
    // The schema's validator reports any other value.
    let policy = AllocationPolicy::parse(wanted)?;
    let problem = if cfg.sharing.is_none() {
        Some(format!(
            "{at} (config {:?}) is {wanted:?}, but the config shares no GPU: the policy only \
            picks among shared devices' replicas. Add `time_slicing` or `mps`, or remove it.",
            c.name
        ))
    } else {
        match cfg.allocation_policy {
            Some(p) if p != policy => Some(format!(
                "{at} (config {:?}) is {wanted:?}, but its `yaml` sets \
                flags.plugin.sharedDevicesAllocationPolicy to {:?}; set it in one place.",
                c.name,
                p.as_str()
            )),
            _ => None,
        }
    };
    if let Some(detail) = problem {
        diags.push(Diagnostic::error("Allocation policy without a use", detail).at(at));
        return None;
    }
    cfg.allocation_policy = Some(policy);
    Some(cfg)
}

fn quoted_keys<V>(m: &BTreeMap<String, V>) -> String {
    m.keys()
        .map(|k| format!("{k:?}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The `config` blocks resolved, with `default_config` checked against them; problems become
/// diagnostics on the attribute. None without any block; otherwise the configs that resolve and
/// whether all of them (and the default) did.
pub(super) fn resolve_configs(
    blocks: &[ConfigArgs],
    default: Option<&str>,
    mig: Option<&str>,
    diags: &mut Diagnostics,
) -> Option<(BTreeMap<String, DevicePluginConfig>, bool)> {
    if blocks.is_empty() {
        diags.push(
            Diagnostic::error(
                "Missing config",
                "At least one `config` block is needed: the device plugin needs a config to \
                    select. Add e.g. `config { name = \"all\" }` for whole GPUs.",
            )
            .at(AttrPath::attr("config")),
        );
        return None;
    }
    let mut configs = BTreeMap::new();
    let mut ok = true;
    for (i, c) in blocks.iter().enumerate() {
        if configs.contains_key(&c.name) {
            let p = config_path(i).with_attr("name");
            diags.push(
                Diagnostic::error(
                    "Duplicate config name",
                    format!(
                        "{p} is {:?}, which an earlier config block already uses; ConfigMap \
                        keys are unique. Rename one of them.",
                        c.name
                    ),
                )
                .at(p),
            );
            ok = false;
            continue;
        }
        match config_of(i, c, mig, diags) {
            Some(cfg) => {
                configs.insert(c.name.clone(), cfg);
            }
            None => ok = false,
        }
    }
    if let Some(d) = default
        && ok
        && !configs.contains_key(d)
    {
        diags.push(
            Diagnostic::error(
                "Default config does not exist",
                format!(
                    "default_config is {d:?}, which names no config of this resource; nodes \
                        without the label would fail to load a config. Valid values: {}.",
                    quoted_keys(&configs)
                ),
            )
            .at(AttrPath::attr("default_config")),
        );
        ok = false;
    }
    if default.is_none() && ok && configs.len() > 1 && !configs.contains_key("default") {
        // The plugin's fallback: config.default, else a key named "default", else the only key.
        diags.push(
            Diagnostic::warning(
                "No default config",
                format!(
                    "default_config is not set and there is no config named \"default\": nodes \
                        without the nvidia.com/device-plugin.config label get no config. Set \
                        default_config to one of: {}.",
                    quoted_keys(&configs)
                ),
            )
            .at(AttrPath::attr("default_config")),
        );
    }
    Some((configs, ok))
}

impl Desired {
    /// The ConfigMap data: every config rendered in our fixed layout.
    pub(super) fn data(&self) -> BTreeMap<String, String> {
        self.configs
            .iter()
            .map(|(k, c)| (k.clone(), c.render().unwrap_or_default()))
            .collect()
    }

    /// The ClusterPolicy fields this resource sets, with the attribute that sets each.
    pub(super) fn policy_fields(&self) -> Vec<(&'static str, serde_json::Value, &'static str)> {
        let mut f = vec![("spec.devicePlugin.config.name", json!(self.name), "name")];
        if let Some(default) = &self.default {
            f.push((
                "spec.devicePlugin.config.default",
                json!(default),
                "default_config",
            ));
        }
        if let Some(m) = &self.mig_strategy {
            f.push(("spec.mig.strategy", json!(m), "mig_strategy"));
        }
        f
    }
}

/// Keeps the state's text for every key whose meaning the cluster still has, and the cluster's
/// own text where it differs, so a hand edit shows as drift and re-formatting does not.
pub(super) fn reconcile(
    state: &BTreeMap<String, String>,
    cluster: &BTreeMap<String, String>,
) -> BTreeMap<String, String> {
    cluster
        .iter()
        .map(|(k, theirs)| {
            let same = state.get(k).is_some_and(|ours| {
                matches!((device_plugin::parse(ours), device_plugin::parse(theirs)), (Ok(a), Ok(b)) if a == b)
            });
            let text = if same { state[k].clone() } else { theirs.clone() };
            (k.clone(), text)
        })
        .collect()
}

/// Config blocks that read back to the same documents (for import): a document we render for
/// a time_slicing or mps block becomes that block, anything else a `yaml` attribute.
pub(super) fn config_blocks(data: &BTreeMap<String, String>) -> Vec<ConfigArgs> {
    use crate::model::{MpsArgs, TimeSlicingArgs};
    let block = |name: &str, yaml: Option<&String>, sharing: Sharing| ConfigArgs {
        name: name.to_string(),
        yaml: yaml.cloned(),
        shared_devices_allocation_policy: None,
        sharing,
    };
    data.iter()
        .map(|(name, text)| {
            let Ok(mut cfg) = device_plugin::parse(text) else {
                return block(name, Some(text), Sharing::default());
            };
            // A block spells the policy as its attribute; a `yaml` keeps it in the text.
            let policy = cfg.allocation_policy.take().map(|p| p.as_str().to_string());
            let spelled = |mut b: ConfigArgs| {
                if b.yaml.is_none() {
                    b.shared_devices_allocation_policy = policy.clone();
                }
                b
            };
            let Some(s) = cfg.sharing.as_ref().filter(|s| {
                cfg.mig_strategy.is_none()
                    && s.resources.len() == 1
                    && s.resources[0].name == device_plugin::GPU_RESOURCE
            }) else {
                let yaml = (!cfg.is_empty() || policy.is_some()).then_some(text);
                return block(name, yaml, Sharing::default());
            };
            let replicas = s.resources[0].replicas;
            match s.kind {
                // Computed attributes: the state spells the defaults out.
                SharingKind::TimeSlicing => spelled(block(
                    name,
                    None,
                    Sharing {
                        time_slicing: SingleBlock(Some(TimeSlicingArgs {
                            replicas,
                            rename_by_default: Some(s.rename_by_default),
                            fail_requests_greater_than_one: Some(s.fail_requests_greater_than_one),
                        })),
                        ..Sharing::default()
                    },
                )),
                SharingKind::Mps if !s.rename_by_default => spelled(block(
                    name,
                    None,
                    Sharing {
                        mps: SingleBlock(Some(MpsArgs {
                            replicas,
                            fail_requests_greater_than_one: Some(s.fail_requests_greater_than_one),
                        })),
                        ..Sharing::default()
                    },
                )),
                SharingKind::Mps => block(name, Some(text), Sharing::default()),
            }
        })
        .collect()
}
