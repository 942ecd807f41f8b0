//! The typed model of `fracgpu_device_plugin_config` and what it resolves to: [`Desired`], the
//! configs as documents, where they go (a ConfigMap of ours or a Helm release's values) and how
//! to reach the cluster. The handlers read configurations, plans and states only through these
//! models: the arguments, what a plan defaults or leaves to the apply, what a state records the
//! cluster was given. Also what the resource keeps in private state to give back on destroy, and
//! the chart values a GitOps object holds.

use std::collections::BTreeMap;

use serde_json::json;

use crate::cluster::helm;
use crate::cluster::{self as k, KubernetesSettings};
use crate::model::{self, KubernetesArgs, Sharing};
use gpu::device_plugin::{self, DevicePluginConfig, SharingKind};
use gpu::{self, SharingMode};
use tfplugin::api::Private;
use tfplugin::object::{DecodeError, FromValue, MaybeUnknown, SingleBlock, merge};
use tfplugin::{AttrPath, Diagnostic, Diagnostics, Value};

use super::schema::{
    DEFAULT_ARGOCD_NAMESPACE, DEFAULT_FLUX_NAMESPACE, DEFAULT_NAME, DEFAULT_NAMESPACE,
    DEFAULT_VALUES_PATH,
};

tfplugin::object! {
    /// One `config` block.
    pub struct ConfigArgs {
        pub name: String,
        pub yaml: Option<String>,
    }
    flatten {
        pub sharing: Sharing,
    }
}

tfplugin::object! {
    /// The `helm` block.
    pub struct HelmArgs {
        pub release: String,
        pub namespace: String,
        pub chart: String,
        pub chart_version: Option<String>,
        pub values_path: Option<String>,
        pub helm_path: Option<String>,
    }
}

tfplugin::object! {
    /// The `argocd` block.
    pub struct ArgoArgs {
        pub application: String,
        pub namespace: Option<String>,
        pub chart: Option<String>,
        pub values_path: Option<String>,
    }
}

tfplugin::object! {
    /// The `flux` block.
    pub struct FluxArgs {
        pub helm_release: String,
        pub namespace: Option<String>,
        pub values_path: Option<String>,
    }
}

tfplugin::object! {
    /// The arguments. `namespace`, `name` and `delivery` have plan-time defaults (the namespace
    /// depends on the helm block), filled before a plan is read; null in a configuration.
    pub struct Args {
        pub namespace: Option<String>,
        pub name: Option<String>,
        pub default_config: Option<String>,
        pub mig_strategy: Option<String>,
        pub delivery: Option<String>,
        pub kubernetes: SingleBlock<KubernetesArgs>,
        pub config: Vec<ConfigArgs>,
        pub helm: SingleBlock<HelmArgs>,
        pub argocd: SingleBlock<ArgoArgs>,
        pub flux: SingleBlock<FluxArgs>,
    }
}

tfplugin::object! {
    /// How the configuration delivers, read alone: the namespace default follows it even while
    /// other arguments (a node pool's config YAML) are not known yet.
    pub struct Delivery {
        pub delivery: Option<String>,
        pub helm: SingleBlock<HelmArgs>,
    }
}

tfplugin::object! {
    /// What the resource computes.
    pub struct Computed {
        pub id: String,
        pub data: BTreeMap<String, String>,
        pub helm_values: String,
    }
}

tfplugin::object! {
    /// When this resource last restarted the device plugin: unknown in a plan that restarts it.
    pub struct Restarted {
        pub restarted_at: MaybeUnknown<Option<String>>,
    }
}

tfplugin::object! {
    /// The arguments a plan fills when the configuration leaves them null, as a configuration or
    /// plan holds them: unknown while they depend on another resource, and a GitOps delivery's
    /// namespace (the destination of the object that holds the values) until the apply reads it.
    pub struct Defaults {
        pub namespace: MaybeUnknown<Option<String>>,
        pub name: MaybeUnknown<Option<String>>,
        pub delivery: MaybeUnknown<Option<String>>,
    }
}

tfplugin::object! {
    /// The resource's ID: `namespace/name` of the ConfigMap, unknown while the namespace is.
    pub struct Identity {
        pub id: MaybeUnknown<String>,
    }
}

tfplugin::object! {
    /// What a state records the cluster was given; null until an apply or a read sets it.
    pub struct Delivered {
        pub data: Option<BTreeMap<String, String>>,
        pub helm_values: Option<String>,
    }
}

tfplugin::object! {
    /// A state, as a refresh and the next plan compare it with the cluster and the configuration.
    pub struct State {}
    flatten {
        pub args: Args,
        pub delivered: Delivered,
        pub restarted: Restarted,
    }
}

tfplugin::object! {
    /// The state `terraform import` starts from, which the read after it fills.
    pub struct Imported {
        pub timeouts: Value,
    }
    flatten {
        pub args: Args,
        pub identity: Identity,
    }
}

tfplugin::object! {
    /// The resource identity (terraform 1.12+): which ConfigMap, by namespace and name.
    pub struct ObjectIdentity {
        pub namespace: Option<String>,
        pub name: Option<String>,
    }
}

/// The last fix for a state that does not read.
pub(super) const REIMPORT: &str =
    "re-import it (`terraform import` with `namespace/name` of the ConfigMap)";

impl Args {
    /// The arguments of a plan; a namespace still unknown (see [`Defaults`]) reads as unset.
    pub(super) fn of_plan(planned: &Value) -> Result<Args, DecodeError> {
        let defaults = Defaults::from_value(planned)?;
        if defaults.namespace.is_known() {
            return Args::from_value(planned);
        }
        let mut known = planned.clone();
        merge(
            &mut known,
            &Defaults {
                namespace: MaybeUnknown::Known(None),
                ..defaults
            },
        );
        Args::from_value(&known)
    }

    pub(super) fn namespace(&self) -> &str {
        self.namespace.as_deref().unwrap_or(DEFAULT_NAMESPACE)
    }

    pub(super) fn name(&self) -> &str {
        self.name.as_deref().unwrap_or(DEFAULT_NAME)
    }

    pub(super) fn by_helm(&self) -> bool {
        self.delivery.as_deref() == Some("helm")
    }

    /// Delivered through an Argo CD Application or a Flux HelmRelease.
    pub(super) fn by_gitops(&self) -> bool {
        matches!(self.delivery.as_deref(), Some("argocd" | "flux"))
    }

    /// The attribute that says how to reach the cluster, as `kubernetes.0.host`; None when the
    /// provider's block or the environment does.
    pub(super) fn access(&self) -> Option<&'static str> {
        self.kubernetes.as_ref().and_then(KubernetesArgs::access)
    }

    /// The resource's own cluster settings (empty: the provider's apply).
    pub(super) fn kubernetes(&self) -> KubernetesSettings {
        self.kubernetes
            .as_ref()
            .map(KubernetesArgs::settings)
            .unwrap_or_default()
    }
}

/// What a known configuration, plan or state asks for.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct Desired {
    pub namespace: String,
    pub name: String,
    pub default: Option<String>,
    pub mig_strategy: Option<String>,
    /// config name -> parsed config
    pub configs: BTreeMap<String, DevicePluginConfig>,
    pub helm: Option<HelmSpec>,
    pub gitops: Option<GitOpsSpec>,
    /// The resource's own `kubernetes` block (empty: the provider's).
    pub kubernetes: KubernetesSettings,
    /// The attribute that says how to reach the cluster, for diagnostics.
    pub access: Option<&'static str>,
}

#[derive(Clone, Debug, PartialEq)]
pub(super) struct HelmSpec {
    pub release: String,
    pub namespace: String,
    pub chart: String,
    pub chart_version: Option<String>,
    pub values_path: String,
    pub helm_path: String,
}

/// An Argo CD Application or Flux HelmRelease that holds the operator's values.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct GitOpsSpec {
    pub holder: k::gitops::Holder,
    pub values_path: String,
    /// The block's name, for diagnostics: `argocd` or `flux`.
    pub block: &'static str,
}

impl GitOpsSpec {
    fn of(args: &Args) -> Option<GitOpsSpec> {
        use k::gitops::{Holder, Kind};
        let path =
            |p: &Option<String>| p.clone().unwrap_or_else(|| DEFAULT_VALUES_PATH.to_string());
        match args.delivery.as_deref() {
            Some("argocd") => args.argocd.as_ref().map(|a| GitOpsSpec {
                holder: Holder {
                    kind: Kind::ArgoCd,
                    namespace: a
                        .namespace
                        .clone()
                        .unwrap_or_else(|| DEFAULT_ARGOCD_NAMESPACE.to_string()),
                    name: a.application.clone(),
                    chart: a.chart.clone(),
                },
                values_path: path(&a.values_path),
                block: "argocd",
            }),
            Some("flux") => args.flux.as_ref().map(|f| GitOpsSpec {
                holder: Holder {
                    kind: Kind::Flux,
                    namespace: f
                        .namespace
                        .clone()
                        .unwrap_or_else(|| DEFAULT_FLUX_NAMESPACE.to_string()),
                    name: f.helm_release.clone(),
                    chart: None,
                },
                values_path: path(&f.values_path),
                block: "flux",
            }),
            _ => None,
        }
    }
}

impl HelmSpec {
    fn of(h: &HelmArgs) -> HelmSpec {
        HelmSpec {
            release: h.release.clone(),
            namespace: h.namespace.clone(),
            chart: h.chart.clone(),
            chart_version: h.chart_version.clone(),
            values_path: h
                .values_path
                .clone()
                .unwrap_or_else(|| DEFAULT_VALUES_PATH.to_string()),
            helm_path: h.helm_path.clone().unwrap_or_else(|| "helm".to_string()),
        }
    }
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
    Some(parsed)
}

fn quoted_keys<V>(m: &BTreeMap<String, V>) -> String {
    m.keys()
        .map(|k| format!("{k:?}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Resolves the arguments; problems become diagnostics on the attribute, `None` means the
/// configs cannot be delivered as written.
pub(super) fn resolve(args: &Args, diags: &mut Diagnostics) -> Option<Desired> {
    let mig = args.mig_strategy.as_deref();
    if args.config.is_empty() {
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
    for (i, c) in args.config.iter().enumerate() {
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
    let default = args.default_config.as_deref();
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
    let helm = match (args.by_helm(), args.helm.as_ref()) {
        (true, Some(h)) => Some(HelmSpec::of(h)),
        (true, None) => {
            diags.push(
                Diagnostic::error(
                    "Missing helm block",
                    "delivery is \"helm\" but there is no `helm` block naming the release; add \
                        `helm { release = ..., namespace = ..., chart = ... }`.",
                )
                .at(AttrPath::attr("delivery")),
            );
            return None;
        }
        (false, Some(_)) => {
            diags.push(unused_block("helm", args));
            return None;
        }
        _ => None,
    };
    let delivery = args.delivery.as_deref().unwrap_or("cluster_policy");
    for (block, set) in [
        ("argocd", args.argocd.is_some()),
        ("flux", args.flux.is_some()),
    ] {
        if set && delivery != block {
            diags.push(unused_block(block, args));
            return None;
        }
        if !set && delivery == block {
            let example = if block == "argocd" {
                "argocd { application = \"gpu-operator\" }"
            } else {
                "flux { helm_release = \"gpu-operator\" }"
            };
            diags.push(
                Diagnostic::error(
                    format!("Missing {block} block"),
                    format!(
                        "delivery is \"{block}\" but there is no `{block}` block naming the \
                        object that holds the operator's values; add `{example}`."
                    ),
                )
                .at(AttrPath::attr("delivery")),
            );
            return None;
        }
    }
    let gitops = GitOpsSpec::of(args);
    if helm.is_some() || gitops.is_some() {
        ok &= names_stay_strings(args, diags);
    }
    if !ok {
        return None;
    }
    Some(Desired {
        namespace: args.namespace().to_string(),
        name: args.name().to_string(),
        default: default.map(str::to_string),
        mig_strategy: mig.map(str::to_string),
        configs,
        helm,
        gitops,
        kubernetes: args.kubernetes(),
        access: args.access(),
    })
}

/// A delivery block that the chosen delivery does not use.
fn unused_block(block: &str, args: &Args) -> Diagnostic {
    let delivery = args.delivery.as_deref().unwrap_or("cluster_policy");
    Diagnostic::error(
        format!("Unused {block} block"),
        format!(
            "A `{block}` block is set but delivery is \"{delivery}\"; set delivery = \
            \"{block}\" or remove the block."
        ),
    )
    .at(AttrPath::attr(block))
}

/// With a chart rendering the ClusterPolicy, `name` and `default_config` pass through a template
/// that does not quote them (see `cluster::chart`): one that YAML reads as anything but a string
/// is refused here, at plan time, rather than by the API server in the middle of `helm upgrade`.
/// Delivered as they are, not quoted for the template: a quote inside the value would become
/// part of the name the day the chart quotes it itself. The ConfigMap's keys are safe (the chart
/// writes them with `toYaml`), so config names need no check.
fn names_stay_strings(args: &Args, diags: &mut Diagnostics) -> bool {
    let mut ok = true;
    let checks = [
        ("name", Some(args.name()), "devicePlugin.config.name"),
        (
            "default_config",
            args.default_config.as_deref(),
            "devicePlugin.config.default",
        ),
    ];
    for (attr, value, key) in checks {
        let Some((v, kind)) = value.and_then(|v| Some((v, k::chart::unquoted_kind(v)?))) else {
            continue;
        };
        let effect = if kind == "null" {
            "so the ClusterPolicy gets no value there at all".to_string()
        } else {
            format!(
                "so the API server refuses the ClusterPolicy (\"{}: in body must be of type \
                    string\") in the middle of the upgrade",
                key.replace("devicePlugin", "spec.devicePlugin")
            )
        };
        diags.push(
            Diagnostic::error(
                "Name the chart would not keep a string",
                format!(
                    "{attr} is {v:?}: the GPU operator chart writes {key} into its \
                    ClusterPolicy without quotes (templates/clusterpolicy.yaml of gpu-operator \
                    v25.10.1), where YAML reads {v} as {kind}, {effect}. Choose a name YAML reads \
                    as a string, e.g. \"ts-{v}\", or use delivery = \"cluster_policy\", which \
                    writes the pointer itself."
                ),
            )
            .at(AttrPath::attr(attr)),
        );
        ok = false;
    }
    ok
}

impl Desired {
    /// The ConfigMap data: every config rendered in our fixed layout.
    pub(super) fn data(&self) -> BTreeMap<String, String> {
        self.configs
            .iter()
            .map(|(k, c)| (k.clone(), c.render().unwrap_or_default()))
            .collect()
    }

    pub(super) fn values_path(&self) -> &str {
        match (&self.helm, &self.gitops) {
            (Some(h), _) => &h.values_path,
            (None, Some(g)) => &g.values_path,
            (None, None) => DEFAULT_VALUES_PATH,
        }
    }

    /// The operator chart's values this resource sets, as (dotted path, value): the whole
    /// `config` under `values_path`, and the MIG strategy beside it when one is set.
    pub(super) fn helm_owned(&self, values_path: &str) -> Vec<(String, serde_json::Value)> {
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
    pub(super) fn helm_values(&self, values_path: &str) -> serde_json::Value {
        let mut root = json!({});
        for (path, v) in self.helm_owned(values_path) {
            helm::set_value_at(&mut root, &path, Some(v));
        }
        root
    }

    /// What the resource computes from what it asks for.
    pub(super) fn computed(&self) -> Computed {
        Computed {
            id: format!("{}/{}", self.namespace, self.name),
            data: self.data(),
            helm_values: helm::to_yaml(&self.helm_values(self.values_path())),
        }
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

/// `mig.strategy` beside the `devicePlugin` values (`x.devicePlugin` -> `x.mig.strategy`).
pub(super) fn mig_strategy_path(values_path: &str) -> String {
    match values_path.rsplit_once('.') {
        Some((parent, _)) => format!("{parent}.mig.strategy"),
        None => "mig.strategy".to_string(),
    }
}

/// What this resource took over from others, kept in its private state and given back on
/// destroy, so a destroy leaves the operator as it was before the resource existed.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub(super) struct Takeover {
    /// Helm delivery: dotted value path -> the release's user value there before the first
    /// write (None: the user had none, so the chart's default comes back).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub helm: BTreeMap<String, Option<serde_json::Value>>,
    /// ClusterPolicy delivery: field path -> the value an update manager had set there.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub cluster_policy: BTreeMap<String, k::TakenField>,
}

impl Takeover {
    /// An unreadable record (from another provider version) reads as empty: destroy then
    /// gives the chart's defaults back, as for an imported config.
    pub(super) fn load(private: &Private) -> Takeover {
        serde_json::from_slice(&private.0).unwrap_or_default()
    }

    pub(super) fn store(&self, private: &mut Private) {
        private.0 = if *self == Takeover::default() {
            Vec::new()
        } else {
            serde_json::to_vec(self).unwrap_or_default()
        };
    }
}

// ---------------------------------------------------------------------------------------------
// Documents read back

/// The device plugin's `config` values of the operator chart (`<values_path>.config`), as the
/// values a GitOps object holds give them. Read as the chart's templates read them: a value of
/// another type (or values that are no map) is as good as unset, and so is an empty name.
#[derive(Debug, Default, PartialEq, serde::Deserialize)]
#[serde(default)]
pub(super) struct ChartConfig {
    #[serde(deserialize_with = "lenient")]
    create: Option<bool>,
    #[serde(deserialize_with = "lenient")]
    name: Option<String>,
    #[serde(deserialize_with = "lenient")]
    default: Option<String>,
    #[serde(deserialize_with = "lenient")]
    data: Option<BTreeMap<String, serde_json::Value>>,
}

/// A value of the type asked for, else none.
fn lenient<'de, D, T>(d: D) -> Result<Option<T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: serde::de::DeserializeOwned,
{
    let v = <serde_json::Value as serde::Deserialize>::deserialize(d)?;
    Ok(serde_json::from_value(v).ok())
}

impl ChartConfig {
    pub(super) fn of(values: &serde_json::Value) -> ChartConfig {
        <ChartConfig as serde::Deserialize>::deserialize(values).unwrap_or_default()
    }

    /// Whether the chart makes the ConfigMap (only then does it point the operator at it).
    pub(super) fn created(&self) -> bool {
        self.create == Some(true)
    }

    pub(super) fn name(&self) -> Option<String> {
        self.name.clone().filter(|s| !s.is_empty())
    }

    pub(super) fn default_config(&self) -> Option<String> {
        self.default.clone().filter(|s| !s.is_empty())
    }

    /// The configs, by name; an entry that is no text is none.
    pub(super) fn data(&self) -> BTreeMap<String, String> {
        self.data
            .iter()
            .flatten()
            .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
            .collect()
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
        sharing,
    };
    data.iter()
        .map(|(name, text)| {
            let Ok(cfg) = device_plugin::parse(text) else {
                return block(name, Some(text), Sharing::default());
            };
            let Some(s) = cfg.sharing.as_ref().filter(|s| {
                cfg.mig_strategy.is_none()
                    && s.resources.len() == 1
                    && s.resources[0].name == device_plugin::GPU_RESOURCE
            }) else {
                let yaml = (!cfg.is_empty()).then_some(text);
                return block(name, yaml, Sharing::default());
            };
            let replicas = s.resources[0].replicas;
            match s.kind {
                // Computed attributes: the state spells the defaults out.
                SharingKind::TimeSlicing => block(
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
                ),
                SharingKind::Mps if s.fail_requests_greater_than_one && !s.rename_by_default => {
                    block(
                        name,
                        None,
                        Sharing {
                            mps: SingleBlock(Some(MpsArgs { replicas })),
                            ..Sharing::default()
                        },
                    )
                }
                SharingKind::Mps => block(name, Some(text), Sharing::default()),
            }
        })
        .collect()
}

/// An unset value of the model, for a state built from nothing (import).
pub(super) fn null_state() -> Value {
    Value::null_object(&super::schema::schema().ty())
}
