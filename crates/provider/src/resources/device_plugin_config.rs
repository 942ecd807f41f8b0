//! `fracgpu_device_plugin_config`: the NVIDIA device plugin's named sharing configs, delivered
//! through the GPU operator (a ConfigMap plus the ClusterPolicy pointer, or the operator's Helm
//! release), with drift detection that compares meaning, not YAML text. In the fixed order:
//! schema, model, plan, create, read, update, delete, import. The Kubernetes work lives in
//! `kube/`, the config documents in `gpu/`.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use async_trait::async_trait;
use serde_json::json;

use crate::cloud::StopSignal;
use crate::kube::helm::{self, ReleaseState};
use crate::kube::{self as k, Cluster, KubeError, KubernetesSettings};
use crate::model;
use crate::provider::ProviderState;
use gpu::device_plugin::{self, DevicePluginConfig, SharingKind};
use gpu::{self, SharingMode};
use tfplugin::api::{PlanRequest, Private, Resource};
use tfplugin::object::FromValue;
use tfplugin::plan::{Planned, Timeouts};
use tfplugin::schema::{Attribute, Block, Nesting, Schema};
use tfplugin::types::Type;
use tfplugin::validators::{Matches, OneOf};
use tfplugin::{AttrPath, Diagnostic, Diagnostics, Value};

pub const TYPE_NAME: &str = "fracgpu_device_plugin_config";
pub const DEFAULT_NAMESPACE: &str = "gpu-operator";
pub const DEFAULT_NAME: &str = "time-slicing-config";
pub const DEFAULT_VALUES_PATH: &str = "devicePlugin";
const DELIVERIES: &[&str] = &["cluster_policy", "helm"];
const MIG_STRATEGIES: &[&str] = &["none", "single", "mixed"];
/// A node selects a config through a label, so a name must be a valid label value (which is
/// also a valid ConfigMap key).
const CONFIG_NAME_RE: &str = r"^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)$";
const DNS_LABEL_RE: &str = r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$";
const DNS_SUBDOMAIN_RE: &str = r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$";

// ---------------------------------------------------------------------------------------------
// Schema

pub fn schema() -> Schema {
    let config = model::sharing_blocks(
        Block::new("One named config of the ConfigMap. Nodes select it with the label `nvidia.com/device-plugin.config=<name>`. Give the sharing as a block, or the YAML itself (a node pool's `device_plugin_config`), or neither for whole GPUs.")
            .attr(Attribute::string("name").required().describe("The config's key in the ConfigMap and the node label value: up to 63 letters, digits, `-`, `_`, `.`, starting and ending alphanumeric.")
                .validate(Matches::new(CONFIG_NAME_RE, "a valid ConfigMap key and label value (up to 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit)")))
            .attr(Attribute::string("yaml").optional().describe("The config document itself, e.g. `fracgpu_nodepool.x.device_plugin_config`. Compared by meaning, so formatting never shows as a change.")),
        false,
    );
    let helm = Block::new("Deliver through the GPU operator's Helm release instead of a ConfigMap of our own. Each apply runs `helm upgrade --reset-values` with the release's complete user values and this resource's device plugin values in them, against the cluster `kubernetes` names (never `KUBECONFIG`'s): a removed config leaves what the chart renders, while configs the chart's own values define stay (a warning lists them). Destroy gives the release back the device plugin values it had before this resource, or the chart's defaults when it had none.")
        .attr(Attribute::string("release").required().describe("Release name, e.g. `gpu-operator`."))
        .attr(Attribute::string("namespace").required().describe("Namespace of the release."))
        .attr(Attribute::string("chart").required().describe("The chart `helm upgrade` is given, e.g. `nvidia/gpu-operator` or an `oci://` reference."))
        .attr(Attribute::string("chart_version").optional().describe("Chart version for the upgrade. Default: the deployed release's, so only values change."))
        .attr(Attribute::string("values_path").optional().describe("Dotted path of the operator's `devicePlugin` values, e.g. `azure-aks-gpu-operator.devicePlugin` for a wrapping chart. Default `devicePlugin`.")
            .validate(Matches::new(r"^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$", "dotted value keys such as devicePlugin or gpu-operator.devicePlugin")))
        .attr(Attribute::string("helm_path").optional().describe("The helm executable, Helm 3 or 4. Default `helm` on the PATH."));
    let block = Block::new("The NVIDIA device plugin's named sharing configs (time-slicing, MPS, MIG strategy), delivered through the GPU operator: a ConfigMap and the ClusterPolicy pointer, or the operator's Helm release. Drift (a hand-edited ConfigMap, a changed pointer, changed Helm values) shows in the plan; re-formatting never does. Every change restarts the device plugin daemonset, which the operator does not do itself.")
        .attr(Attribute::string("id").computed().describe("`namespace/name` of the ConfigMap."))
        .attr(Attribute::string("namespace").optional().computed().requires_replace().describe(&format!("Namespace of the ConfigMap and of the operator's daemonset. Default `{DEFAULT_NAMESPACE}`."))
            .validate(Matches::new(DNS_LABEL_RE, "a DNS-1123 label (lowercase letters, digits, '-', up to 63)")))
        .attr(Attribute::string("name").optional().computed().requires_replace().describe(&format!("Name of the ConfigMap. Default `{DEFAULT_NAME}`."))
            .validate(Matches::new(DNS_SUBDOMAIN_RE, "a DNS-1123 subdomain (lowercase letters, digits, '-', '.')")))
        .attr(Attribute::string("default_config").optional().describe("The config of nodes without the `nvidia.com/device-plugin.config` label; must be one of the `config` names."))
        .attr(Attribute::string("mig_strategy").optional().describe("`none`, `single` or `mixed`, set on the ClusterPolicy (`spec.mig.strategy`; the operator hands it to the plugin, overriding the file's flag), or in the release's values with delivery `helm`. Default: the operator's own value is left alone. With delivery `cluster_policy` the value is refused while a server-side apply manager holds the field (a Helm 4 release of the operator), because taking it would make that release's next `helm upgrade` fail; destroy gives a value it took from Helm 3 back.").validate(OneOf(MIG_STRATEGIES)))
        .attr(Attribute::string("delivery").optional().computed().requires_replace().describe("`cluster_policy` (default: server-side apply of the ConfigMap and the ClusterPolicy pointer) or `helm` (upgrade the operator's release). Changing it replaces the resource, so the old delivery is undone.").validate(OneOf(DELIVERIES)))
        .attr(Attribute::new("data", Type::map(Type::String)).computed().describe("The ConfigMap's data: config name -> rendered YAML."))
        .attr(Attribute::string("helm_values").computed().describe("The same as GPU operator Helm values (under `values_path`), for a `helm_release` of your own."))
        .attr(Attribute::string("restarted_at").computed().describe("When the device plugin daemonset was last restarted by this resource (RFC 3339)."))
        .single_block("kubernetes", model::kubernetes_block("How to reach the cluster. Default: the provider's `kubernetes` block, then `KUBECONFIG` / `~/.kube/config` / in-cluster."))
        .block("config", Nesting::List, config)
        .single_block("helm", helm)
        .single_block("timeouts", TIMEOUTS.block());
    Schema::new(0, block)
}

// ---------------------------------------------------------------------------------------------
// Model

/// What a known configuration, plan or state asks for.
#[derive(Clone, Debug, PartialEq)]
struct Desired {
    namespace: String,
    name: String,
    default: Option<String>,
    mig_strategy: Option<String>,
    /// config name -> parsed config
    configs: BTreeMap<String, DevicePluginConfig>,
    helm: Option<HelmSpec>,
    /// The resource's own `kubernetes` block (empty: the provider's).
    kubernetes: KubernetesSettings,
    /// The attribute that says how to reach the cluster, for diagnostics.
    access: Option<&'static str>,
}

#[derive(Clone, Debug, PartialEq)]
struct HelmSpec {
    release: String,
    namespace: String,
    chart: String,
    chart_version: Option<String>,
    values_path: String,
    helm_path: String,
}

fn config_path(i: usize) -> AttrPath {
    AttrPath::attr("config").with_index(i)
}

fn join(base: &AttrPath, rel: &AttrPath) -> AttrPath {
    let mut p = base.clone();
    p.0.extend(rel.0.iter().cloned());
    p
}

fn str_or<'a>(v: &'a Value, k: &str, default: &'a str) -> &'a str {
    v.get(k).as_str().unwrap_or(default)
}

/// One config block to its document; problems become diagnostics on the attribute.
fn config_of(
    i: usize,
    c: &Value,
    mig_strategy: Option<&str>,
    diags: &mut Diagnostics,
) -> Option<DevicePluginConfig> {
    let base = config_path(i);
    let name = c.get("name").as_str().unwrap_or_default();
    let blocks: Vec<&str> = ["mig", "time_slicing", "mps"]
        .into_iter()
        .filter(|b| !c.get(b).elements().is_empty())
        .collect();
    let yaml = c.get("yaml");
    let parsed = if let Some(text) = yaml.as_str() {
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
        let mode = model::Sharing::from_value(c)?.mode();
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
                format!("{at} (config {name:?}) shares GPUs by MPS, but mig_strategy is \"mixed\": the device plugin runs MPS on full GPUs only and refuses it with the mixed strategy. Set mig_strategy to \"none\" or \"single\", or use time_slicing."),
            )
            .at(at),
        );
        return None;
    }
    Some(parsed)
}

/// Resolves a value whose attributes are known; `None` while any part is unknown or invalid.
fn resolve(v: &Value, diags: &mut Diagnostics) -> Option<Desired> {
    let mig_strategy = v.get("mig_strategy");
    if !mig_strategy.is_known() || !v.get("config").is_fully_known() {
        return None;
    }
    let mig = mig_strategy.as_str();
    let list = v.get("config").elements();
    if list.is_empty() {
        diags.push(
            Diagnostic::error(
                "Missing config",
                "At least one `config` block is needed: the device plugin needs a config to select. Add e.g. `config { name = \"all\" }` for whole GPUs.",
            )
            .at(AttrPath::attr("config")),
        );
        return None;
    }
    let mut configs = BTreeMap::new();
    let mut ok = true;
    for (i, c) in list.iter().enumerate() {
        let name = c.get("name").as_str().unwrap_or_default().to_string();
        if configs.contains_key(&name) {
            let p = config_path(i).with_attr("name");
            diags.push(
                Diagnostic::error(
                    "Duplicate config name",
                    format!("{p} is {name:?}, which an earlier config block already uses; ConfigMap keys are unique. Rename one of them."),
                )
                .at(p),
            );
            ok = false;
            continue;
        }
        match config_of(i, c, mig, diags) {
            Some(cfg) => {
                configs.insert(name, cfg);
            }
            None => ok = false,
        }
    }
    let default = v.get("default_config");
    if !default.is_known() {
        return None;
    }
    if let Some(d) = default.as_str()
        && ok
        && !configs.contains_key(d)
    {
        diags.push(
            Diagnostic::error(
                "Default config does not exist",
                format!(
                    "default_config is {d:?}, which names no config of this resource; nodes without the label would fail to load a config. Valid values: {}.",
                    configs.keys().map(|k| format!("{k:?}")).collect::<Vec<_>>().join(", ")
                ),
            )
            .at(AttrPath::attr("default_config")),
        );
        ok = false;
    }
    if default.is_null() && ok && configs.len() > 1 && !configs.contains_key("default") {
        // The plugin's fallback: config.default, else a key named "default", else the only key.
        diags.push(
            Diagnostic::warning(
                "No default config",
                format!(
                    "default_config is not set and there is no config named \"default\": nodes without the nvidia.com/device-plugin.config label get no config. Set default_config to one of: {}.",
                    configs.keys().map(|k| format!("{k:?}")).collect::<Vec<_>>().join(", ")
                ),
            )
            .at(AttrPath::attr("default_config")),
        );
    }
    let delivery = v.get("delivery").as_str().unwrap_or("cluster_policy");
    let helm_block = v.get("helm").elements().first();
    let helm = match (delivery, helm_block) {
        ("helm", Some(h)) => {
            if !h.is_fully_known() {
                return None;
            }
            Some(HelmSpec {
                release: str_or(h, "release", "").to_string(),
                namespace: str_or(h, "namespace", "").to_string(),
                chart: str_or(h, "chart", "").to_string(),
                chart_version: h.get("chart_version").as_str().map(str::to_string),
                values_path: str_or(h, "values_path", DEFAULT_VALUES_PATH).to_string(),
                helm_path: str_or(h, "helm_path", "helm").to_string(),
            })
        }
        ("helm", None) => {
            diags.push(
                Diagnostic::error(
                    "Missing helm block",
                    "delivery is \"helm\" but there is no `helm` block naming the release; add `helm { release = ..., namespace = ..., chart = ... }`.",
                )
                .at(AttrPath::attr("delivery")),
            );
            return None;
        }
        (_, Some(_)) if v.get("delivery").is_known() => {
            diags.push(
                Diagnostic::error(
                    "Unused helm block",
                    "A `helm` block is set but delivery is \"cluster_policy\"; set delivery = \"helm\" or remove the block.",
                )
                .at(AttrPath::attr("helm")),
            );
            return None;
        }
        _ => None,
    };
    if !ok {
        return None;
    }
    Some(Desired {
        namespace: str_or(v, "namespace", DEFAULT_NAMESPACE).to_string(),
        name: str_or(v, "name", DEFAULT_NAME).to_string(),
        default: default.as_str().map(str::to_string),
        mig_strategy: mig.map(str::to_string),
        configs,
        helm,
        kubernetes: model::kubernetes_settings(v.get("kubernetes")),
        access: access_attr(v),
    })
}

impl Desired {
    /// The ConfigMap data: every config rendered in our fixed layout.
    fn data(&self) -> BTreeMap<String, String> {
        self.configs
            .iter()
            .map(|(k, c)| (k.clone(), c.render().unwrap_or_default()))
            .collect()
    }

    /// The operator chart's values this resource sets, as (dotted path, value): the whole
    /// `config` under `values_path`, and the MIG strategy beside it when one is set.
    fn helm_owned(&self, values_path: &str) -> Vec<(String, serde_json::Value)> {
        let data: serde_json::Map<String, serde_json::Value> = self
            .data()
            .into_iter()
            .map(|(k, v)| (k, v.into()))
            .collect();
        let mut config = json!({"create": true, "name": self.name, "data": data});
        if let Some(d) = &self.default {
            config["default"] = d.clone().into();
        }
        let mut owned = vec![(format!("{values_path}.config"), config)];
        if let Some(m) = &self.mig_strategy {
            owned.push((mig_strategy_path(values_path), json!(m)));
        }
        owned
    }

    /// The same as one values tree, for the `helm_values` attribute.
    fn helm_values(&self, values_path: &str) -> serde_json::Value {
        let mut root = json!({});
        for (path, v) in self.helm_owned(values_path) {
            helm::set_value_at(&mut root, &path, Some(v));
        }
        root
    }
}

/// `mig.strategy` beside the `devicePlugin` values (`x.devicePlugin` -> `x.mig.strategy`).
fn mig_strategy_path(values_path: &str) -> String {
    match values_path.rsplit_once('.') {
        Some((parent, _)) => format!("{parent}.mig.strategy"),
        None => "mig.strategy".to_string(),
    }
}

fn string_map(m: &BTreeMap<String, String>) -> Value {
    model::string_map(m)
}

fn map_of(v: &Value) -> BTreeMap<String, String> {
    v.entries()
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
                .collect()
        })
        .unwrap_or_default()
}

fn set(v: &mut Value, k: &str, new: Value) {
    if let Value::Object(m) = v {
        m.insert(k.to_string(), new);
    }
}

/// Keeps the state's text for every key whose meaning the cluster still has, and the cluster's
/// own text where it differs, so a hand edit shows as drift and re-formatting does not.
fn reconcile(
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
fn config_blocks(data: &BTreeMap<String, String>) -> Value {
    let obj = |name: &str, yaml: Value, ts: Vec<Value>, mps: Vec<Value>| {
        Value::object([
            ("name", Value::string(name)),
            ("yaml", yaml),
            ("mig", Value::List(vec![])),
            ("time_slicing", Value::List(ts)),
            ("mps", Value::List(mps)),
        ])
    };
    let items = data
        .iter()
        .map(|(name, text)| {
            let Ok(cfg) = device_plugin::parse(text) else {
                return obj(name, Value::string(text.clone()), vec![], vec![]);
            };
            let Some(s) = cfg.sharing.as_ref().filter(|s| {
                cfg.mig_strategy.is_none()
                    && s.resources.len() == 1
                    && s.resources[0].name == device_plugin::GPU_RESOURCE
            }) else {
                return if cfg.is_empty() {
                    obj(name, Value::Null, vec![], vec![])
                } else {
                    obj(name, Value::string(text.clone()), vec![], vec![])
                };
            };
            let replicas = Value::int(i64::from(s.resources[0].replicas));
            match s.kind {
                SharingKind::TimeSlicing => obj(
                    name,
                    Value::Null,
                    vec![Value::object([
                        ("replicas", replicas),
                        // Computed attributes: the state spells the defaults out.
                        ("rename_by_default", Value::Bool(s.rename_by_default)),
                        (
                            "fail_requests_greater_than_one",
                            Value::Bool(s.fail_requests_greater_than_one),
                        ),
                    ])],
                    vec![],
                ),
                SharingKind::Mps if s.fail_requests_greater_than_one && !s.rename_by_default => {
                    obj(
                        name,
                        Value::Null,
                        vec![],
                        vec![Value::object([("replicas", replicas)])],
                    )
                }
                SharingKind::Mps => obj(name, Value::string(text.clone()), vec![], vec![]),
            }
        })
        .collect();
    Value::List(items)
}

/// The attribute that says how to reach the cluster, as `kubernetes.0.host`; None when the
/// provider's block or the environment does.
fn access_attr(v: &Value) -> Option<&'static str> {
    let b = v.get("kubernetes").elements().first()?;
    [
        ("host", "kubernetes.0.host"),
        ("config_path", "kubernetes.0.config_path"),
        ("config_context", "kubernetes.0.config_context"),
        ("exec", "kubernetes.0.exec"),
    ]
    .into_iter()
    .find(|(k, _)| match b.get(k) {
        Value::List(l) => !l.is_empty(),
        other => !other.is_null(),
    })
    .map(|(_, path)| path)
}

fn kube_diagnostic(action: &str, access: Option<&str>, e: &KubeError) -> Diagnostic {
    let check = match access {
        Some(a) => format!("Check {}", AttrPath::parse(a)),
        None => {
            "Check the provider's `kubernetes` block (or KUBECONFIG, ~/.kube/config)".to_string()
        }
    };
    let (summary, hint, path) = match e {
        KubeError::Unreachable { .. } => (
            "Kubernetes cluster unreachable",
            format!("{check} and that the API server is up."),
            access.map(AttrPath::parse),
        ),
        KubeError::BadResponse { .. } => (
            "Unreadable Kubernetes API answer",
            "The API server (or a proxy in front of it) answered with something that is not a Kubernetes object of a sane size; check what serves that address.".to_string(),
            access.map(AttrPath::parse),
        ),
        KubeError::Config(_) => (
            "Invalid Kubernetes settings",
            format!("{check}: the kubeconfig path, its context, or host/token/cluster_ca_certificate."),
            access.map(AttrPath::parse),
        ),
        KubeError::MissingCrd | KubeError::MissingClusterPolicy(_) => (
            "NVIDIA GPU operator not installed",
            "delivery = \"cluster_policy\" needs the GPU operator (its ClusterPolicy `cluster-policy`). Install the operator chart first, or use delivery = \"helm\" with its release.".to_string(),
            Some(AttrPath::attr("delivery")),
        ),
        KubeError::Helm(_) => (
            "Helm release problem",
            "Check the helm block.".to_string(),
            Some(AttrPath::attr("helm").with_index(0).with_attr("release")),
        ),
        KubeError::Api { code: 401 | 403, .. } => (
            "Kubernetes permission denied",
            format!("{check}: the credentials need get/patch on configmaps, clusterpolicies.nvidia.com and daemonsets in the operator namespace, and list on nodes."),
            access.map(AttrPath::parse),
        ),
        KubeError::Api { .. } => ("Kubernetes API error", String::new(), None),
    };
    let d = Diagnostic::error(
        summary,
        format!("Could not {action}: {e}. {hint}")
            .trim_end()
            .to_string(),
    );
    match path {
        Some(p) => d.at(p),
        None => d,
    }
}

/// Fills the sharing blocks' optional+computed attributes the configuration leaves null with
/// their documented defaults, so the plan (and the state) says what is delivered.
fn fill_sharing_defaults(st: &mut Value, config: &Value) {
    let Some(Value::List(items)) = st.get_mut("config") else {
        return;
    };
    let defaults: [(&str, &str, Value); 3] = [
        ("time_slicing", "rename_by_default", Value::Bool(false)),
        (
            "time_slicing",
            "fail_requests_greater_than_one",
            Value::Bool(false),
        ),
        ("mig", "strategy", Value::string("mixed")),
    ];
    for (i, item) in items.iter_mut().enumerate() {
        let cfg = config
            .get("config")
            .elements()
            .get(i)
            .cloned()
            .unwrap_or(Value::Null);
        for (block, attr, default) in &defaults {
            let configured = cfg
                .get(block)
                .elements()
                .first()
                .map(|b| b.get(attr).clone());
            if let Some(Value::List(blocks)) = item.get_mut(block)
                && let Some(b) = blocks.first_mut()
                && configured.is_none_or(|c| c.is_null())
                && !b.get(attr).is_known()
            {
                set(b, attr, default.clone());
            }
        }
    }
}

/// What the cluster says about this resource's delivery.
#[derive(Default)]
struct Observed {
    /// The ConfigMap the operator is pointed at.
    pointer_name: Option<String>,
    default: Option<String>,
    mig_strategy: Option<String>,
    /// Whether our field manager owns the strategy (import keeps it then).
    mig_strategy_ours: bool,
    /// The ConfigMap's data; None when it (or the release) is gone.
    data: Option<BTreeMap<String, String>>,
}

/// What this resource took over from others, kept in its private state and given back on
/// destroy, so a destroy leaves the operator as it was before the resource existed.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
struct Takeover {
    /// Helm delivery: dotted value path -> the release's user value there before the first
    /// write (None: the user had none, so the chart's default comes back).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    helm: BTreeMap<String, Option<serde_json::Value>>,
    /// ClusterPolicy delivery: field path -> the value an update manager had set there.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    cluster_policy: BTreeMap<String, k::TakenField>,
}

impl Takeover {
    /// An unreadable record (from another provider version) reads as empty: destroy then
    /// gives the chart's defaults back, as for an imported config.
    fn load(private: &Private) -> Takeover {
        serde_json::from_slice(&private.0).unwrap_or_default()
    }

    fn store(&self, private: &mut Private) {
        private.0 = if *self == Takeover::default() {
            Vec::new()
        } else {
            serde_json::to_vec(self).unwrap_or_default()
        };
    }
}

/// The ClusterPolicy fields this resource sets, with the attribute that sets each.
fn policy_fields(d: &Desired) -> Vec<(&'static str, serde_json::Value, &'static str)> {
    let mut f = vec![("spec.devicePlugin.config.name", json!(d.name), "name")];
    if let Some(default) = &d.default {
        f.push((
            "spec.devicePlugin.config.default",
            json!(default),
            "default_config",
        ));
    }
    if let Some(m) = &d.mig_strategy {
        f.push(("spec.mig.strategy", json!(m), "mig_strategy"));
    }
    f
}

// ---------------------------------------------------------------------------------------------
// The resource

pub struct DevicePluginConfigResource {
    state: Arc<ProviderState>,
}

impl DevicePluginConfigResource {
    pub fn new(state: Arc<ProviderState>) -> Self {
        DevicePluginConfigResource { state }
    }

    async fn connect(&self, v: &Value, diags: &mut Diagnostics) -> Option<Cluster> {
        let access = access_attr(v);
        let settings = self.settings(v);
        match k::connect(&settings).await {
            Ok(c) => Some(c),
            Err(e) => {
                diags.push(kube_diagnostic("connect", access, &e));
                None
            }
        }
    }

    fn settings(&self, v: &Value) -> KubernetesSettings {
        model::kubernetes_settings(v.get("kubernetes")).or(&self.state.settings().kubernetes)
    }

    /// Warns about nodes whose label names no config of this resource.
    async fn warn_unknown_labels(&self, c: &Cluster, d: &Desired, diags: &mut Diagnostics) {
        let Ok(labels) = c.node_config_labels().await else {
            return;
        };
        let mut unknown: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
        for (node, value) in &labels {
            if !d.configs.contains_key(value) {
                unknown.entry(value).or_default().push(node);
            }
        }
        for (value, nodes) in unknown {
            diags.push(
                Diagnostic::warning(
                    "Node label names no config",
                    format!(
                        "{} node(s) ({}) carry nvidia.com/device-plugin.config={value:?}, which is not a config of this resource; the device plugin on them keeps its previous config. Add `config {{ name = {value:?} ... }}` or relabel the nodes.",
                        nodes.len(),
                        nodes.join(", ")
                    ),
                )
                .at(AttrPath::attr("config")),
            );
        }
    }

    /// Writes the desired config to the cluster and restarts the plugin; returns restarted_at.
    /// `first` says whether this is the resource's first write (a create): only then is what
    /// the cluster holds someone else's, to be recorded in `taken` and given back on destroy.
    async fn deliver(
        &self,
        c: &Cluster,
        d: &Desired,
        taken: &mut Takeover,
        first: bool,
        diags: &mut Diagnostics,
    ) -> Option<Option<String>> {
        let access = d.access;
        let operand_ns = match &d.helm {
            None => {
                let pointer = match c.cluster_policy().await {
                    Ok(p) => p,
                    Err(e) => {
                        diags.push(kube_diagnostic("read the ClusterPolicy", access, &e));
                        return None;
                    }
                };
                self.take_policy_fields(c, d, taken, diags).await?;
                let step = async {
                    c.apply_configmap(&d.namespace, &d.name, &d.data()).await?;
                    c.apply_pointer(Some((
                        &d.name,
                        d.default.as_deref(),
                        d.mig_strategy.as_deref(),
                    )))
                    .await
                };
                if let Err(e) = step.await {
                    diags.push(kube_diagnostic(
                        "apply the ConfigMap and ClusterPolicy",
                        access,
                        &e,
                    ));
                    return None;
                }
                pointer
                    .operand_namespace
                    .unwrap_or_else(|| d.namespace.clone())
            }
            Some(h) => {
                self.helm_upgrade(c, d, h, taken, first, diags).await?;
                d.namespace.clone()
            }
        };
        match c
            .restart_device_plugin(&operand_ns, &k::now_rfc3339())
            .await
        {
            Ok(Some(at)) => Some(Some(at)),
            Ok(None) => {
                diags.push(Diagnostic::warning(
                    "Device plugin daemonset not found",
                    format!("No daemonset {operand_ns}/nvidia-device-plugin-daemonset to restart; nodes pick the config up when the operator starts the device plugin."),
                ));
                Some(None)
            }
            Err(e) => {
                diags.push(kube_diagnostic("restart the device plugin", access, &e));
                None
            }
        }
    }

    /// Checks who holds the ClusterPolicy fields this resource sets (see `kube::delivery` for
    /// why): a field another manager holds through server-side apply is refused with a
    /// diagnostic; what update managers hold is recorded in `taken` before it is overwritten.
    async fn take_policy_fields(
        &self,
        c: &Cluster,
        d: &Desired,
        taken: &mut Takeover,
        diags: &mut Diagnostics,
    ) -> Option<()> {
        let wanted = policy_fields(d);
        let paths: Vec<&str> = wanted.iter().map(|(p, _, _)| *p).collect();
        let fields = match c.policy_fields(&paths).await {
            Ok(f) => f,
            Err(e) => {
                diags.push(kube_diagnostic("read the ClusterPolicy", d.access, &e));
                return None;
            }
        };
        let mut refused = false;
        for ((path, want, attr), field) in wanted.iter().zip(&fields) {
            if field.value.as_ref() == Some(want) {
                continue;
            }
            let appliers = field.appliers();
            if !appliers.is_empty() {
                refused = true;
                let now = field
                    .value
                    .as_ref()
                    .map(|v| v.to_string())
                    .unwrap_or_default();
                diags.push(
                    Diagnostic::error(
                        "ClusterPolicy field managed by server-side apply",
                        format!(
                            "{path} of the ClusterPolicy {} is {now}, set by \"{}\" with server-side apply (a Helm 4 release of the GPU operator does that). Setting it to {want} here would make that manager's next apply fail with a conflict, e.g. the next `helm upgrade` of the operator. Set it in the operator release's values instead (delivery = \"helm\" does that for you), or leave `{attr}` unset.",
                            k::CLUSTER_POLICY,
                            appliers.join("\", \""),
                        ),
                    )
                    .at(AttrPath::attr(attr)),
                );
                continue;
            }
            if let (Some(value), Some((manager, _))) = (&field.value, field.owners.first()) {
                taken
                    .cluster_policy
                    .entry(path.to_string())
                    .or_insert_with(|| k::TakenField {
                        value: value.clone(),
                        manager: manager.clone(),
                    });
            }
        }
        (!refused).then_some(())
    }

    async fn helm_upgrade(
        &self,
        c: &Cluster,
        d: &Desired,
        h: &HelmSpec,
        taken: &mut Takeover,
        first: bool,
        diags: &mut Diagnostics,
    ) -> Option<()> {
        let deployed = self.deployed_release(c, h, d.access, diags).await?;
        let owned = d.helm_owned(&h.values_path);
        // The release's user values, complete: helm is handed all of them with
        // --reset-values, so nothing of ours lingers and nothing of the user's is lost.
        let mut values = match &deployed.config {
            serde_json::Value::Object(_) => deployed.config.clone(),
            _ => json!({}),
        };
        // What the user had where this resource writes is recorded before helm runs, so that
        // an upgrade cut short still leaves the record behind for destroy.
        for (path, v) in owned.iter() {
            // On a create, what the user had there is theirs; on an update of a config made
            // before the provider kept this record, the values there are already ours.
            taken.helm.entry(path.clone()).or_insert_with(|| {
                if first {
                    helm::value_at(&deployed.config, path).cloned()
                } else {
                    None
                }
            });
            helm::set_value_at(&mut values, path, Some(v.clone()));
        }
        // Paths this resource set before and sets no more (a MIG strategy now unset) go back
        // to what the user had there.
        let released: Vec<String> = taken
            .helm
            .iter()
            .filter(|(path, _)| !owned.iter().any(|(p, _)| p == *path))
            .map(|(path, prior)| {
                helm::set_value_at(&mut values, path, prior.clone());
                path.clone()
            })
            .collect();
        self.warn_chart_default_configs(&deployed, d, h, diags);
        // helm must reach the very cluster the client above read the release from.
        let settings = d.kubernetes.or(&self.state.settings().kubernetes);
        let run = helm::upgrade(
            &h.helm_path,
            &h.release,
            &h.chart,
            &h.namespace,
            h.chart_version
                .as_deref()
                .or(Some(deployed.chart_version.as_str())),
            &values,
            &settings,
        )
        .await;
        match run {
            Ok(_) => {
                for path in released {
                    taken.helm.remove(&path);
                }
                Some(())
            }
            Err(e) => {
                diags.push(helm_diagnostic(h, &e.to_string()));
                None
            }
        }
    }

    /// The deployed revision of the release; None after a diagnostic (missing, pending).
    async fn deployed_release(
        &self,
        c: &Cluster,
        h: &HelmSpec,
        access: Option<&'static str>,
        diags: &mut Diagnostics,
    ) -> Option<helm::Release> {
        match helm::read_release(c, &h.namespace, &h.release).await {
            Ok(ReleaseState::Deployed(r)) => Some(r),
            Ok(ReleaseState::Pending(r)) => {
                diags.push(helm_diagnostic(h, &format!("revision {} is {}: another helm operation is in progress or was interrupted. Wait for it, or `helm rollback` it, then apply again.", r.revision, r.status)));
                None
            }
            Ok(ReleaseState::Missing) => {
                diags.push(helm_diagnostic(h, "no deployed revision found (no Secret sh.helm.release.v1.<release>.v<N> with status deployed). Check helm.release and helm.namespace."));
                None
            }
            Err(e) => {
                diags.push(kube_diagnostic("read the Helm release", access, &e));
                None
            }
        }
    }

    /// Configs the chart itself defines stay in what it renders: helm coalesces a chart's
    /// defaults under every value that does not override them, and a null that would remove
    /// one is kept as null under a subchart's values by helm 4 (so the ConfigMap is refused).
    fn warn_chart_default_configs(
        &self,
        r: &helm::Release,
        d: &Desired,
        h: &HelmSpec,
        diags: &mut Diagnostics,
    ) {
        let defaults = helm::value_at(&r.chart_values, &format!("{}.config.data", h.values_path));
        let extra: Vec<&String> = defaults
            .and_then(|v| v.as_object())
            .map(|m| m.keys().filter(|k| !d.configs.contains_key(*k)).collect())
            .unwrap_or_default();
        if !extra.is_empty() {
            diags.push(
                Diagnostic::warning(
                    "Chart defines more configs",
                    format!(
                        "The chart {} {} defines {} in its own values ({}.config.data), so the ConfigMap keeps {}: helm renders a chart's defaults unless a value replaces them. Nodes labelled with {} get the chart's version. To manage one, add a `config` block of that name.",
                        r.chart,
                        r.chart_version,
                        quoted(&extra),
                        h.values_path,
                        if extra.len() == 1 { "it" } else { "them" },
                        if extra.len() == 1 { "it" } else { "one of them" },
                    ),
                )
                .at(AttrPath::attr("config")),
            );
        }
    }
}

fn quoted(names: &[&String]) -> String {
    names
        .iter()
        .map(|n| format!("{n:?}"))
        .collect::<Vec<_>>()
        .join(", ")
}

fn helm_diagnostic(h: &HelmSpec, e: &str) -> Diagnostic {
    Diagnostic::error(
        "Helm upgrade failed",
        format!("Release {}/{} (helm.release): {e}", h.namespace, h.release),
    )
    .at(AttrPath::attr("helm").with_index(0).with_attr("release"))
}

/// How long each operation may take when `timeouts` does not say: a helm upgrade of the operator
/// can take minutes, a read is a few GETs.
const TIMEOUTS: Timeouts = Timeouts(&[
    ("create", std::time::Duration::from_secs(600)),
    ("read", std::time::Duration::from_secs(120)),
    ("update", std::time::Duration::from_secs(600)),
    ("delete", std::time::Duration::from_secs(600)),
]);

/// Why an operation ended before its work did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Cut {
    /// Its `timeouts` entry ran out.
    Timeout,
    /// Terraform called StopProvider (Ctrl-C).
    Stop,
}

impl Cut {
    fn diagnostic(self, op: &str, limit: std::time::Duration) -> Diagnostic {
        match self {
            Cut::Timeout => Diagnostic::error(
                "Operation timed out",
                format!("The {op} did not finish within {}s; raise timeouts.{op} or check the cluster. Nothing is lost: the next plan shows what is left to do.", limit.as_secs()),
            )
            .at(AttrPath::attr("timeouts")),
            Cut::Stop => Diagnostic::error(
                "Interrupted",
                format!("The {op} stopped because terraform was interrupted. Nothing is lost: the next plan shows what is left to do."),
            ),
        }
    }

    /// How long a create cut short may look for what it wrote: after a stop terraform waits for
    /// the answer, which must come within 2 s.
    fn look_limit(self) -> std::time::Duration {
        match self {
            Cut::Timeout => std::time::Duration::from_secs(10),
            Cut::Stop => std::time::Duration::from_secs(1),
        }
    }
}

/// Runs `work` until it ends, `limit` passes or terraform asks the provider to stop.
async fn bounded<T>(
    limit: std::time::Duration,
    stop: &StopSignal,
    work: impl std::future::Future<Output = T>,
) -> Result<T, Cut> {
    tokio::select! {
        r = tokio::time::timeout(limit, work) => r.map_err(|_| Cut::Timeout),
        () = stop.stopped() => Err(Cut::Stop),
    }
}

/// A create, update or delete of the config: bounded by its `timeouts` entry and terraform's
/// stop, logged at start and end.
struct Op {
    name: &'static str,
    config_map: String,
    started: std::time::Instant,
    limit: std::time::Duration,
    stop: StopSignal,
}

impl Op {
    fn start(name: &'static str, value: &Value, stop: &StopSignal) -> Op {
        let config_map = format!(
            "{}/{}",
            str_or(value, "namespace", DEFAULT_NAMESPACE),
            str_or(value, "name", DEFAULT_NAME)
        );
        tracing::info!(config_map = %config_map, operation = name, "device plugin config: starting");
        Op {
            name,
            config_map,
            started: std::time::Instant::now(),
            limit: TIMEOUTS.of(value, name),
            stop: stop.clone(),
        }
    }

    async fn run<T>(&self, work: impl std::future::Future<Output = T>) -> Result<T, Cut> {
        bounded(self.limit, &self.stop, work).await
    }

    /// Logs the outcome and hands the work's diagnostics on, plus one when it was cut short.
    fn end(&self, cut: Option<Cut>, inner: Diagnostics, diags: &mut Diagnostics) {
        let elapsed_ms = self.started.elapsed().as_millis() as u64;
        let (config_map, operation) = (&self.config_map, self.name);
        if cut.is_some() || inner.has_errors() {
            tracing::warn!(config_map = %config_map, operation, elapsed_ms, ?cut, "device plugin config: failed");
        } else {
            tracing::info!(config_map = %config_map, operation, elapsed_ms, "device plugin config: done");
        }
        diags.extend(inner);
        if let Some(c) = cut {
            diags.push(c.diagnostic(self.name, self.limit));
        }
    }
}

/// The operations behind the trait, which bounds each by its `timeouts` entry.
impl DevicePluginConfigResource {
    /// What the deployed Helm release says; None after an error diagnostic.
    async fn observe_helm(
        &self,
        c: &Cluster,
        state: &Value,
        diags: &mut Diagnostics,
    ) -> Option<Observed> {
        let access = access_attr(state);
        let h = state
            .get("helm")
            .elements()
            .first()
            .cloned()
            .unwrap_or(Value::Null);
        let (rel, rns) = (str_or(&h, "release", ""), str_or(&h, "namespace", ""));
        let values_path = str_or(&h, "values_path", DEFAULT_VALUES_PATH);
        let release = match helm::read_release(c, rns, rel).await {
            Ok(ReleaseState::Deployed(r)) => r,
            Ok(ReleaseState::Pending(r)) => {
                diags.push(Diagnostic::warning(
                    "Helm release operation pending",
                    format!("Release {rns}/{rel} revision {} is {}; its values are compared, and an apply waits until the operation is finished or rolled back.", r.revision, r.status),
                ));
                r
            }
            Ok(ReleaseState::Missing) => return Some(Observed::default()),
            Err(e) => {
                diags.push(kube_diagnostic("read the Helm release", access, &e));
                return None;
            }
        };
        let values = release.effective_values();
        let cfg = helm::value_at(&values, &format!("{values_path}.config"))
            .cloned()
            .unwrap_or_default();
        let s = |k: &str| {
            cfg.get(k)
                .and_then(|v| v.as_str())
                .filter(|s| !s.is_empty())
                .map(str::to_string)
        };
        let created = cfg.get("create").and_then(|v| v.as_bool()) == Some(true);
        // The configs that are this resource's business: those the release's user values set
        // and those the configuration names. A config only the chart's own defaults define
        // stays whatever this resource does (see `warn_chart_default_configs`).
        let user_set = helm::value_at(&release.config, &format!("{values_path}.config.data"))
            .and_then(|d| d.as_object())
            .map(|m| {
                m.iter()
                    .filter(|(_, v)| !v.is_null())
                    .map(|(k, _)| k.clone())
                    .collect::<Vec<_>>()
            })
            .unwrap_or_default();
        let declared: Vec<String> = state
            .get("config")
            .elements()
            .iter()
            .filter_map(|c| c.get("name").as_str().map(str::to_string))
            .collect();
        let data: BTreeMap<String, String> = cfg
            .get("data")
            .and_then(|d| d.as_object())
            .map(|m| {
                m.iter()
                    .filter(|(k, _)| user_set.contains(k) || declared.contains(k))
                    .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
                    .collect()
            })
            .unwrap_or_default();
        let mig = helm::value_at(&values, &mig_strategy_path(values_path))
            .and_then(|v| v.as_str())
            .map(str::to_string);
        let name_in_values = if created { s("name") } else { None };
        Some(Observed {
            pointer_name: name_in_values,
            default: s("default"),
            mig_strategy: mig,
            mig_strategy_ours: false,
            data: Some(data),
        })
    }

    /// What the ClusterPolicy and the ConfigMap say; None after an error diagnostic.
    async fn observe_cluster_policy(
        &self,
        c: &Cluster,
        state: &Value,
        diags: &mut Diagnostics,
    ) -> Option<Observed> {
        let access = access_attr(state);
        let ns = str_or(state, "namespace", DEFAULT_NAMESPACE);
        let name = str_or(state, "name", DEFAULT_NAME);
        let pointer = match c.cluster_policy().await {
            Ok(p) => p,
            Err(e) => {
                diags.push(kube_diagnostic("read the ClusterPolicy", access, &e));
                return None;
            }
        };
        let data = match c.configmap(ns, name).await {
            Ok(d) => d,
            Err(e) => {
                diags.push(kube_diagnostic("read the ConfigMap", access, &e));
                return None;
            }
        };
        if let Some(other) = pointer.name.as_deref().filter(|n| *n != name) {
            diags.push(Diagnostic::warning(
                    "ClusterPolicy points elsewhere",
                    format!("The ClusterPolicy cluster-policy points the device plugin at the ConfigMap {other:?}, not {ns}/{name}: none of this resource's configs reach the nodes. Apply to point it back."),
                ));
        }
        let ours = pointer.mig_strategy_ours;
        Some(Observed {
            pointer_name: pointer.name,
            default: pointer.default,
            mig_strategy: pointer.mig_strategy,
            mig_strategy_ours: ours,
            data,
        })
    }

    async fn do_read(&self, state: &Value, diags: &mut Diagnostics) -> Option<Value> {
        let c = self.connect(state, diags).await?;
        let name = str_or(state, "name", DEFAULT_NAME).to_string();
        let mut st = state.clone();
        let prior_data = map_of(state.get("data"));
        let seen = if str_or(state, "delivery", "cluster_policy") == "helm" {
            self.observe_helm(&c, state, diags).await?
        } else {
            self.observe_cluster_policy(&c, state, diags).await?
        };
        let Observed {
            pointer_name,
            default: pointer_default,
            mig_strategy: mig,
            mig_strategy_ours: mig_ours,
            data: cluster_data,
        } = seen;
        // A vanished ConfigMap: the resource is gone and will be created again.
        let cluster_data = cluster_data?;
        // The operator reads our data only while the pointer names our ConfigMap.
        let data = if pointer_name.as_deref() == Some(name.as_str()) {
            reconcile(&prior_data, &cluster_data)
        } else {
            BTreeMap::new()
        };
        set(&mut st, "data", string_map(&data));
        if !state.get("default_config").is_null() || state.get("config").elements().is_empty() {
            set(
                &mut st,
                "default_config",
                Value::opt_string(pointer_default),
            );
        }
        if mig_ours || !state.get("mig_strategy").is_null() {
            set(&mut st, "mig_strategy", Value::opt_string(mig));
        }
        if state.get("config").elements().is_empty() {
            // Imported: rebuild the blocks from what the cluster holds.
            set(&mut st, "config", config_blocks(&cluster_data));
        }
        // Keep helm_values consistent with what was read.
        let mut quiet = Diagnostics::new();
        if let Some(d) = resolve(&st, &mut quiet) {
            let vp = d
                .helm
                .as_ref()
                .map(|h| h.values_path.clone())
                .unwrap_or_else(|| DEFAULT_VALUES_PATH.to_string());
            set(
                &mut st,
                "helm_values",
                Value::string(helm::to_yaml(&d.helm_values(&vp))),
            );
            self.warn_unknown_labels(&c, &d, diags).await;
        }
        Some(st)
    }

    /// The state of a create cut short (timeout or stop) while writing: the plan (tainted) when
    /// its ConfigMap was written, or when helm was started (it finishes on its own), so that
    /// the next apply replaces it and destroy gives the release's values back; else nothing.
    async fn written_before_cut(&self, planned: &Value, limit: std::time::Duration) -> Value {
        let mut quiet = Diagnostics::new();
        let Some(d) = resolve(planned, &mut quiet) else {
            return Value::Null;
        };
        let tainted = || {
            let mut st = planned.unknowns_as_null();
            set(&mut st, "restarted_at", Value::Null);
            st
        };
        if d.helm.is_some() {
            return tainted();
        }
        let look = async {
            let c = self.connect(planned, &mut quiet).await?;
            c.configmap(&d.namespace, &d.name).await.ok().flatten()
        };
        match tokio::time::timeout(limit, look).await {
            // The cluster could not say: keep the plan, the next refresh drops it if absent.
            Ok(Some(_)) | Err(_) => tainted(),
            Ok(None) => Value::Null,
        }
    }

    /// Sets `writing` once it starts to change the cluster.
    async fn do_create(
        &self,
        planned: &Value,
        taken: &mut Takeover,
        diags: &mut Diagnostics,
        writing: &AtomicBool,
    ) -> Value {
        let Some(d) = resolve(planned, diags) else {
            if !diags.has_errors() {
                diags.push(Diagnostic::error(
                    "Configuration not known at apply",
                    "Part of the config blocks is still unknown at apply time; this is a bug in the provider's plan.",
                ));
            }
            return Value::Null;
        };
        let Some(c) = self.connect(planned, diags).await else {
            return Value::Null;
        };
        let mut st = planned.clone();
        set(&mut st, "restarted_at", Value::Null);
        if d.helm.is_none() {
            // Adopting a ConfigMap someone else made would silently take its keys over.
            match c.configmap(&d.namespace, &d.name).await {
                Ok(None) => {}
                Ok(Some(_)) => {
                    diags.push(
                        Diagnostic::error(
                            "ConfigMap already exists",
                            format!("The ConfigMap {}/{} exists already. Import it (`terraform import {TYPE_NAME}.<name> {}/{}`) or choose another `name`.", d.namespace, d.name, d.namespace, d.name),
                        )
                        .at(AttrPath::attr("name")),
                    );
                    return Value::Null;
                }
                Err(e) => {
                    diags.push(kube_diagnostic("read the ConfigMap", d.access, &e));
                    return Value::Null;
                }
            }
        }
        writing.store(true, Ordering::Relaxed);
        let Some(restarted) = self.deliver(&c, &d, taken, true, diags).await else {
            // Whatever was written stays in state (tainted), so nothing is orphaned.
            return match (&d.helm, c.configmap(&d.namespace, &d.name).await) {
                (None, Ok(Some(_))) => st,
                _ => Value::Null,
            };
        };
        self.warn_unknown_labels(&c, &d, diags).await;
        set(&mut st, "restarted_at", Value::opt_string(restarted));
        st
    }

    async fn do_update(
        &self,
        prior: &Value,
        planned: &Value,
        taken: &mut Takeover,
        diags: &mut Diagnostics,
    ) -> Value {
        let Some(d) = resolve(planned, diags) else {
            return prior.clone();
        };
        let Some(c) = self.connect(planned, diags).await else {
            return prior.clone();
        };
        let restart_needed = !planned.get("restarted_at").is_known();
        let mut st = planned.clone();
        if restart_needed {
            let Some(restarted) = self.deliver(&c, &d, taken, false, diags).await else {
                return prior.clone();
            };
            set(&mut st, "restarted_at", Value::opt_string(restarted));
        } else if let Err(e) = c.configmap(&d.namespace, &d.name).await {
            // Only the access changed: prove the new credentials work before they are saved.
            diags.push(kube_diagnostic("read the ConfigMap", d.access, &e));
            return prior.clone();
        }
        self.warn_unknown_labels(&c, &d, diags).await;
        st
    }

    async fn do_delete(&self, state: &Value, taken: &Takeover, diags: &mut Diagnostics) {
        let access = access_attr(state);
        let Some(c) = self.connect(state, diags).await else {
            return;
        };
        let ns = str_or(state, "namespace", DEFAULT_NAMESPACE).to_string();
        let name = str_or(state, "name", DEFAULT_NAME).to_string();
        let mut operand_ns = ns.clone();
        if str_or(state, "delivery", "cluster_policy") == "helm" {
            let mut quiet = Diagnostics::new();
            let Some(d) = resolve(state, &mut quiet) else {
                return;
            };
            let Some(h) = &d.helm else { return };
            if !self.give_back_helm_values(&c, &d, h, taken, diags).await {
                return;
            }
        } else {
            match c.cluster_policy().await {
                Ok(p) => {
                    if let Some(o) = p.operand_namespace {
                        operand_ns = o;
                    }
                    // Give the pointer up only while it is still ours to give.
                    if p.name.as_deref() == Some(name.as_str()) {
                        let give_up = async {
                            for (path, t) in &taken.cluster_policy {
                                if c.holds(path).await? {
                                    c.give_back(path, t).await?;
                                }
                            }
                            c.apply_pointer(None).await
                        };
                        if let Err(e) = give_up.await {
                            diags.push(kube_diagnostic(
                                "release the ClusterPolicy pointer",
                                access,
                                &e,
                            ));
                            return;
                        }
                    }
                }
                Err(KubeError::MissingCrd) | Err(KubeError::MissingClusterPolicy(_)) => {}
                Err(e) => {
                    diags.push(kube_diagnostic("read the ClusterPolicy", access, &e));
                    return;
                }
            }
            if let Err(e) = c.delete_configmap(&ns, &name).await {
                diags.push(kube_diagnostic("delete the ConfigMap", access, &e));
                return;
            }
        }
        if let Err(e) = c
            .restart_device_plugin(&operand_ns, &k::now_rfc3339())
            .await
        {
            diags.push(kube_diagnostic("restart the device plugin", access, &e));
        }
    }

    /// Destroy of a Helm delivery: the release gets back the user values it had where this
    /// resource wrote (from `taken`); where it has no record (an imported config), the values
    /// are removed and the chart's defaults come back. False after an error diagnostic.
    async fn give_back_helm_values(
        &self,
        c: &Cluster,
        d: &Desired,
        h: &HelmSpec,
        taken: &Takeover,
        diags: &mut Diagnostics,
    ) -> bool {
        let deployed = match helm::read_release(c, &h.namespace, &h.release).await {
            // Nothing to give back to.
            Ok(ReleaseState::Missing) => return true,
            Ok(_) => match self.deployed_release(c, h, d.access, diags).await {
                Some(r) => r,
                None => return false,
            },
            Err(e) => {
                diags.push(kube_diagnostic("read the Helm release", d.access, &e));
                return false;
            }
        };
        let mut values = match &deployed.config {
            serde_json::Value::Object(_) => deployed.config.clone(),
            _ => json!({}),
        };
        let mut paths: Vec<String> = d
            .helm_owned(&h.values_path)
            .into_iter()
            .map(|(p, _)| p)
            .collect();
        paths.extend(taken.helm.keys().cloned());
        for path in paths {
            let prior = taken.helm.get(&path).cloned().flatten();
            helm::set_value_at(&mut values, &path, prior);
        }
        let settings = d.kubernetes.or(&self.state.settings().kubernetes);
        let run = helm::upgrade(
            &h.helm_path,
            &h.release,
            &h.chart,
            &h.namespace,
            h.chart_version
                .as_deref()
                .or(Some(deployed.chart_version.as_str())),
            &values,
            &settings,
        )
        .await;
        match run {
            Ok(_) => true,
            Err(e) => {
                diags.push(helm_diagnostic(h, &e.to_string()));
                false
            }
        }
    }
}

#[async_trait]
impl Resource for DevicePluginConfigResource {
    fn type_name(&self) -> &'static str {
        TYPE_NAME
    }

    fn schema(&self) -> Schema {
        schema()
    }

    fn validate(&self, config: &Value, diags: &mut Diagnostics) {
        resolve(config, diags);
    }

    fn modify_plan(&self, req: &PlanRequest<'_>, planned: &mut Planned, _diags: &mut Diagnostics) {
        let st = &mut planned.state;
        if st.is_null() {
            return;
        }
        fill_sharing_defaults(st, req.config);
        // With helm delivery the chart creates the ConfigMap in the release's namespace.
        let helm_ns = (req.config.get("delivery").as_str() == Some("helm"))
            .then(|| {
                let h = req.config.get("helm").elements().first()?;
                h.get("namespace").as_str().map(str::to_string)
            })
            .flatten();
        let ns_default = helm_ns.as_deref().unwrap_or(DEFAULT_NAMESPACE);
        for (k, default) in [
            ("namespace", ns_default),
            ("name", DEFAULT_NAME),
            ("delivery", "cluster_policy"),
        ] {
            if req.config.get(k).is_null() {
                set(st, k, Value::string(default));
            }
        }
        let ns = st.get("namespace").as_str().map(str::to_string);
        let name = st.get("name").as_str().map(str::to_string);
        if let (Some(ns), Some(name)) = (ns, name) {
            set(st, "id", Value::string(format!("{ns}/{name}")));
        }
        // Validation already reported problems; here only the derived values.
        let mut quiet = Diagnostics::new();
        let Some(d) = resolve(st, &mut quiet) else {
            return;
        };
        let data = d.data();
        set(st, "data", string_map(&data));
        let values_path = d
            .helm
            .as_ref()
            .map(|h| h.values_path.clone())
            .unwrap_or_else(|| DEFAULT_VALUES_PATH.to_string());
        set(
            st,
            "helm_values",
            Value::string(helm::to_yaml(&d.helm_values(&values_path))),
        );
        // Nothing the cluster sees changes: no restart, keep the prior time.
        let prior = req.prior;
        let unchanged = !prior.is_null()
            && map_of(prior.get("data")) == data
            && prior.get("default_config") == st.get("default_config")
            && prior.get("mig_strategy") == st.get("mig_strategy")
            && prior.get("delivery") == st.get("delivery");
        set(
            st,
            "restarted_at",
            if unchanged {
                prior.get("restarted_at").clone()
            } else {
                Value::UNKNOWN
            },
        );
    }

    async fn create(
        &self,
        planned: &Value,
        private: &mut Private,
        diags: &mut Diagnostics,
    ) -> Value {
        let op = Op::start("create", planned, &self.state.stop);
        let mut inner = Diagnostics::new();
        let writing = AtomicBool::new(false);
        let mut taken = Takeover::default();
        let out = op
            .run(self.do_create(planned, &mut taken, &mut inner, &writing))
            .await;
        op.end(out.as_ref().err().copied(), inner, diags);
        taken.store(private);
        match out {
            Ok(st) => st,
            // Before the write began, whatever the cluster holds under that name is not ours.
            Err(cut) if writing.load(Ordering::Relaxed) => {
                self.written_before_cut(planned, cut.look_limit()).await
            }
            Err(_) => Value::Null,
        }
    }

    async fn read(&self, state: &Value, _: &mut Private, diags: &mut Diagnostics) -> Option<Value> {
        let limit = TIMEOUTS.of(state, "read");
        let read = bounded(limit, &self.state.stop, self.do_read(state, diags)).await;
        read.unwrap_or_else(|cut| {
            diags.push(cut.diagnostic("read", limit));
            None
        })
    }

    async fn update(
        &self,
        prior: &Value,
        planned: &Value,
        private: &mut Private,
        diags: &mut Diagnostics,
    ) -> Value {
        let op = Op::start("update", planned, &self.state.stop);
        let mut inner = Diagnostics::new();
        let mut taken = Takeover::load(private);
        let out = op
            .run(self.do_update(prior, planned, &mut taken, &mut inner))
            .await;
        op.end(out.as_ref().err().copied(), inner, diags);
        taken.store(private);
        out.unwrap_or_else(|_| prior.clone())
    }

    async fn delete(&self, state: &Value, private: &Private, diags: &mut Diagnostics) {
        let op = Op::start("delete", state, &self.state.stop);
        let mut inner = Diagnostics::new();
        let taken = Takeover::load(private);
        let out = op.run(self.do_delete(state, &taken, &mut inner)).await;
        op.end(out.err(), inner, diags);
    }

    async fn import(&self, id: &str, diags: &mut Diagnostics) -> Option<Value> {
        let re = regex_lite::Regex::new(&format!(
            "{}/{}",
            &DNS_LABEL_RE[..DNS_LABEL_RE.len() - 1],
            &DNS_SUBDOMAIN_RE[1..]
        ))
        .ok()?;
        if !re.is_match(id) {
            diags.push(Diagnostic::error(
                "Invalid import ID",
                format!("{id:?} is not `namespace/name` of the ConfigMap, e.g. `gpu-operator/time-slicing-config`."),
            ));
            return None;
        }
        let (ns, name) = id.split_once('/')?;
        let ty = schema().ty();
        let mut st = Value::null_object(&ty);
        set(&mut st, "id", Value::string(id));
        set(&mut st, "namespace", Value::string(ns));
        set(&mut st, "name", Value::string(name));
        set(&mut st, "delivery", Value::string("cluster_policy"));
        for b in ["kubernetes", "config", "helm", "timeouts"] {
            set(&mut st, b, Value::List(vec![]));
        }
        Some(st)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(name: &str, extra: Vec<(&str, Value)>) -> Value {
        let mut m: BTreeMap<String, Value> = [
            ("name", Value::string(name)),
            ("yaml", Value::Null),
            ("mig", Value::List(vec![])),
            ("time_slicing", Value::List(vec![])),
            ("mps", Value::List(vec![])),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
        for (k, v) in extra {
            m.insert(k.to_string(), v);
        }
        Value::Object(m)
    }

    fn resource(configs: Vec<Value>, extra: Vec<(&str, Value)>) -> Value {
        let ty = schema().ty();
        let mut v = Value::null_object(&ty);
        set(&mut v, "config", Value::List(configs));
        for b in ["kubernetes", "helm"] {
            set(&mut v, b, Value::List(vec![]));
        }
        for (k, x) in extra {
            set(&mut v, k, x);
        }
        v
    }

    fn ts(replicas: i64) -> Value {
        Value::List(vec![Value::object([
            ("replicas", Value::int(replicas)),
            ("rename_by_default", Value::Bool(true)),
            ("fail_requests_greater_than_one", Value::Bool(false)),
        ])])
    }

    #[test]
    fn a_node_pools_yaml_plugs_straight_in() {
        let mode = SharingMode::TimeSlicing {
            replicas: 10,
            rename_by_default: false,
            fail_requests_greater_than_one: false,
        };
        let named = gpu::device_plugin_config(&mode).unwrap();
        let yaml = gpu::device_plugin_config_yaml(&mode).unwrap();
        let v = resource(
            vec![cfg(
                &named.name,
                vec![("yaml", Value::string(yaml.clone()))],
            )],
            vec![],
        );
        let mut diags = Diagnostics::new();
        let d = resolve(&v, &mut diags).expect("resolves");
        assert!(diags.is_empty());
        assert_eq!(d.data()[&named.name], yaml, "the pool's text is kept as is");
    }

    #[test]
    fn semantic_reconcile_keeps_our_text_for_the_same_meaning() {
        let ours = BTreeMap::from([(
            "ts".to_string(),
            "version: v1\nsharing:\n  timeSlicing:\n    renameByDefault: false\n    failRequestsGreaterThanOne: false\n    resources:\n    - name: nvidia.com/gpu\n      replicas: 4\n".to_string(),
        )]);
        let same = BTreeMap::from([(
            "ts".to_string(),
            "sharing: {timeSlicing: {resources: [{name: gpu, replicas: 4}]}}\nversion: v1\n"
                .to_string(),
        )]);
        assert_eq!(reconcile(&ours, &same), ours);
        let other = BTreeMap::from([("ts".to_string(), same["ts"].replace('4', "5"))]);
        assert_eq!(reconcile(&ours, &other), other);
        let extra = BTreeMap::from([
            ("ts".to_string(), ours["ts"].clone()),
            ("new".to_string(), String::new()),
        ]);
        assert_eq!(reconcile(&ours, &extra).len(), 2, "unknown keys are drift");
    }

    #[test]
    fn import_rebuilds_blocks_that_read_back_equal() {
        let v = resource(
            vec![
                cfg("all", vec![]),
                cfg(
                    "mps-4",
                    vec![(
                        "mps",
                        Value::List(vec![Value::object([("replicas", Value::int(4))])]),
                    )],
                ),
                cfg("ts", vec![("time_slicing", ts(10))]),
            ],
            vec![],
        );
        let mut diags = Diagnostics::new();
        let d = resolve(&v, &mut diags).unwrap();
        let blocks = config_blocks(&d.data());
        let again = resolve(&resource(blocks.elements().to_vec(), vec![]), &mut diags).unwrap();
        assert_eq!(again.configs, d.configs);
        assert_eq!(blocks, v.get("config").clone());
    }

    #[test]
    fn helm_values_nest_under_values_path_with_the_strategy_beside() {
        let v = resource(
            vec![cfg("ts", vec![("time_slicing", ts(10))])],
            vec![
                ("default_config", Value::string("ts")),
                ("mig_strategy", Value::string("single")),
            ],
        );
        let d = resolve(&v, &mut Diagnostics::new()).unwrap();
        let vals = d.helm_values("op.devicePlugin");
        assert_eq!(vals["op"]["devicePlugin"]["config"]["default"], "ts");
        assert_eq!(vals["op"]["devicePlugin"]["config"]["create"], true);
        assert_eq!(
            vals["op"]["devicePlugin"]["config"]["data"]
                .as_object()
                .map(|m| m.keys().collect::<Vec<_>>()),
            Some(vec![&"ts".to_string()]),
            "only the configured keys, no nulls"
        );
        assert_eq!(vals["op"]["mig"]["strategy"], "single");
        let root = d.helm_values("devicePlugin");
        assert_eq!(root["mig"]["strategy"], "single");
        assert_eq!(
            d.helm_owned("devicePlugin")
                .into_iter()
                .map(|(p, _)| p)
                .collect::<Vec<_>>(),
            ["devicePlugin.config", "mig.strategy"]
        );
    }

    #[test]
    fn unknown_configs_resolve_to_nothing_yet() {
        let v = resource(vec![cfg("x", vec![("yaml", Value::UNKNOWN)])], vec![]);
        let mut diags = Diagnostics::new();
        assert!(resolve(&v, &mut diags).is_none());
        assert!(diags.is_empty());
    }

    #[test]
    fn access_attribute_follows_what_is_set() {
        let kube = |k: &str| {
            resource(
                vec![],
                vec![(
                    "kubernetes",
                    Value::List(vec![Value::object([(k, Value::string("x"))])]),
                )],
            )
        };
        assert_eq!(access_attr(&kube("host")), Some("kubernetes.0.host"));
        assert_eq!(
            access_attr(&kube("config_path")),
            Some("kubernetes.0.config_path")
        );
        assert_eq!(access_attr(&resource(vec![], vec![])), None);
    }
}
