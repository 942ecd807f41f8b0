//! Delivery `nvidia_device_plugin`: for clusters that run NVIDIA's standalone device plugin
//! chart (`nvidia-device-plugin`) and no GPU operator. The resource applies its ConfigMap in the
//! release's namespace itself and upgrades the release with the chart's `config` values pointing
//! at it (`config.name`, `config.default`, and `config.map` emptied: the chart refuses both), so
//! the chart's device plugin, GPU feature discovery and MPS daemonsets mount it and their
//! config-managers read it (see `cluster::device_plugin_chart` for what the chart's templates do
//! with each value). Drift is what the plugin reads: the ConfigMap and the device plugin
//! daemonset's `DEFAULT_CONFIG` and mounted ConfigMap. The release work is `release`'s.

use async_trait::async_trait;
use serde_json::json;
use tfplugin::object::DecodeError;
use tfplugin::schema::Block;
use tfplugin::{AttrPath, Diagnostic, Diagnostics, Value};

use super::super::desired::Desired;
use super::super::diagnostics::kube_diagnostic;
use super::found::Found;
use super::life::{About, At, BlockAbout, ClusterView, Lifecycle, Placement, Reload, Writing};
use super::release::{ReleaseBlock, helm_path_attribute, release_attributes, release_placement};
use super::takeover::Takeover;
use super::values::{self, ValuesTaken};
use crate::cluster::device_plugin_chart::{self as chart, CHART_NAME};
use crate::cluster::helm::{self, ReleaseState};
use crate::cluster::{Cluster, KubeError};

const NAME: &str = "nvidia_device_plugin";

tfplugin::object! {
    /// The `nvidia_device_plugin` block.
    pub struct NvidiaDevicePluginArgs {
        pub release: String,
        pub namespace: String,
        pub chart: String,
        pub chart_version: Option<String>,
        pub helm_path: Option<String>,
    }
}

fn block() -> Block {
    Block::new(
        "Deliver to NVIDIA's standalone device plugin chart (`nvidia-device-plugin`), on clusters \
        that run it without the GPU operator. Each apply applies the ConfigMap in the release's \
        namespace and runs `helm upgrade --reset-values` with the release's complete user values \
        and `config.name` (the ConfigMap), `config.default` and an empty `config.map` in them, \
        against the cluster `kubernetes` names. Destroy gives the release back the `config` \
        values it had before this resource, then deletes the ConfigMap.",
    )
    .attrs(release_attributes(
        "Release name, e.g. `nvdp`.",
        "Namespace of the release, e.g. `nvidia-device-plugin`.",
        "The chart `helm upgrade` is given, e.g. `nvdp/nvidia-device-plugin` or a path.",
    ))
    .attr(helm_path_attribute())
}

impl NvidiaDevicePluginArgs {
    fn release(&self) -> ReleaseBlock<'_> {
        ReleaseBlock {
            block: NAME,
            helm: self.helm_path.as_deref().unwrap_or("helm"),
            release: &self.release,
            namespace: &self.namespace,
            chart: &self.chart,
            chart_version: self.chart_version.as_deref(),
        }
    }
}

/// The chart's values this resource sets: its ConfigMap by name, the default, and no map of the
/// chart's own (the chart refuses `name` beside `map`).
fn owned(d: &Desired) -> Vec<(String, serde_json::Value)> {
    vec![
        ("config.name".to_string(), json!(d.name)),
        (
            "config.default".to_string(),
            json!(d.default.clone().unwrap_or_default()),
        ),
        ("config.map".to_string(), json!({})),
    ]
}

#[async_trait]
impl Lifecycle for NvidiaDevicePluginArgs {
    fn about() -> About {
        About {
            name: NAME,
            summary: "`nvidia_device_plugin` (upgrade the release of NVIDIA's standalone device \
                plugin chart)",
            block: Some(BlockAbout {
                schema: block,
                names: "the release",
                example: "nvidia_device_plugin { release = ..., namespace = ..., chart = ... }",
                import_id: "<namespace>/<release>/<configmap>",
            }),
        }
    }

    /// The ConfigMap each release of the chart mounts for its plugin, where it is one of its
    /// own (`config.name`); the chart's rendered `config.map` (`<fullname>-configs`) is the
    /// release's, not a config this delivery could have written.
    async fn discover(c: &Cluster) -> Result<Vec<Found>, KubeError> {
        let mut out = Vec::new();
        for ds in c.daemonsets().await? {
            let Some((rns, release)) = chart::standalone_release(&ds) else {
                continue;
            };
            let ds_name = ds["metadata"]["name"].as_str().unwrap_or_default();
            let Some(name) =
                chart::mounted_configmap(&ds).filter(|n| *n != format!("{ds_name}-configs"))
            else {
                continue;
            };
            out.push(Found {
                import_id: format!("{NAME}:{rns}/{release}/{name}"),
                namespace: ds["metadata"]["namespace"]
                    .as_str()
                    .unwrap_or(&rns)
                    .to_string(),
                name,
                delivery: NAME,
                through: format!("the device plugin of the Helm release {rns}/{release}"),
                certain: true,
            });
        }
        Ok(out)
    }

    fn imported(namespace: &str, release: &str) -> Self {
        Self {
            release: release.to_string(),
            namespace: namespace.to_string(),
            ..Self::default()
        }
    }

    fn import_object(&self) -> Option<(String, String)> {
        Some((self.namespace.clone(), self.release.clone()))
    }

    /// The chart's daemonsets mount a ConfigMap of the release's namespace.
    fn placement(config: &Value) -> Result<Placement, DecodeError> {
        release_placement(config, NAME, |b: NvidiaDevicePluginArgs| b.namespace)
    }

    fn check(&self, desired: &Desired, diags: &mut Diagnostics) -> bool {
        names_stay_strings(desired, diags)
    }

    /// For a `helm_release` of one's own of this chart: the configs as the chart's own map.
    fn chart_values(&self, desired: &Desired) -> serde_json::Value {
        chart::config_values(
            &desired.data(),
            desired.default.as_deref().unwrap_or_default(),
        )
    }

    fn own_configmap(&self) -> bool {
        true
    }

    /// The standalone chart's plugin reads its daemonsets' ConfigMap, operator or not.
    fn through_operator(&self) -> bool {
        false
    }

    async fn write(
        &self,
        at: &At<'_>,
        taken: &mut Takeover,
        w: &mut Writing,
        diags: &mut Diagnostics,
    ) -> Option<Reload> {
        let r = self.release();
        let deployed = r.deployed(at, diags).await?;
        self.check_chart(&deployed, diags)?;
        let d = at.desired;
        if let Err(e) = at
            .cluster
            .apply_configmap(&self.namespace, &d.name, &d.data())
            .await
        {
            diags.push(kube_diagnostic("apply the ConfigMap", d.access, &e));
            return None;
        }
        w.wrote = true;
        let mut user = ReleaseBlock::user_values(&deployed);
        let mut taken = taken.open::<ValuesTaken>();
        let changes = taken.changes(&owned(d), &deployed.config, w.first);
        values::apply(&mut user, &changes.set);
        r.upgrade(at, &deployed, &user, None, w, diags).await?;
        taken.forget(&changes.released);
        self.check_plugin_reads(at, &deployed, diags).await?;
        Some(Reload::Restart(self.namespace.clone()))
    }

    /// The image the release's device plugin daemonset runs (its tag defaults to the chart's
    /// appVersion, `_helpers.tpl` `nvidia-device-plugin.fullimage`).
    async fn plugin_version(&self, at: &At<'_>) -> Option<(String, String)> {
        let (rel, rns) = (self.release.as_str(), self.namespace.as_str());
        let release = match helm::read_release(at.cluster, rns, rel).await.ok()? {
            ReleaseState::Deployed(r) | ReleaseState::Pending(r) => r,
            ReleaseState::Missing => return None,
        };
        let ds_name = chart::plugin_daemonset(rel, &release.effective_values());
        let ds = at.cluster.daemonset(rns, &ds_name).await.ok()??;
        let image = chart::plugin_image(&ds)?;
        Some((image, format!("the image of the daemonset {rns}/{ds_name}")))
    }

    async fn read_back(
        &self,
        at: &At<'_>,
        _: &[String],
        diags: &mut Diagnostics,
    ) -> Option<ClusterView> {
        let (rel, rns) = (self.release.as_str(), self.namespace.as_str());
        let release = match helm::read_release(at.cluster, rns, rel).await {
            Ok(ReleaseState::Deployed(r) | ReleaseState::Pending(r)) => r,
            Ok(ReleaseState::Missing) => return Some(ClusterView::default()),
            Err(e) => {
                diags.push(kube_diagnostic(
                    "read the Helm release",
                    at.desired.access,
                    &e,
                ));
                return None;
            }
        };
        let reads = self.plugin_reads(at, &release, diags).await?;
        Some(ClusterView {
            pointer_name: reads.configmap,
            default: reads.default,
            data: reads.data,
            ..ClusterView::default()
        })
    }

    async fn restore(
        &self,
        at: &At<'_>,
        taken: &Takeover,
        w: &mut Writing,
        diags: &mut Diagnostics,
    ) -> Option<Reload> {
        let d = at.desired;
        self.release()
            .give_back(at, &taken.get::<ValuesTaken>(), owned(d), w, diags)
            .await?;
        if let Err(e) = at.cluster.delete_configmap(&self.namespace, &d.name).await {
            diags.push(kube_diagnostic("delete the ConfigMap", d.access, &e));
            return None;
        }
        Some(Reload::Restart(self.namespace.clone()))
    }
}

/// What the chart's device plugin reads: the ConfigMap its daemonset mounts, that ConfigMap's
/// data, and its config-manager's `DEFAULT_CONFIG`.
struct PluginReads {
    configmap: Option<String>,
    data: Option<std::collections::BTreeMap<String, String>>,
    default: Option<String>,
}

impl NvidiaDevicePluginArgs {
    /// A release of another chart (the GPU operator's, whose values are elsewhere) is refused
    /// before anything is written.
    fn check_chart(&self, deployed: &helm::Release, diags: &mut Diagnostics) -> Option<()> {
        if deployed.chart == CHART_NAME {
            return Some(());
        }
        let hint = if deployed.chart == "gpu-operator" {
            " It is the GPU operator's: use delivery = \"helm\"."
        } else {
            ""
        };
        diags.push(
            Diagnostic::error(
                "Release of another chart",
                format!(
                    "Release {}/{} runs the chart {} {}, not {CHART_NAME}: its values are not \
                    the standalone device plugin's. Nothing was changed.{hint}",
                    self.namespace, self.release, deployed.chart, deployed.chart_version
                ),
            )
            .at(AttrPath::attr(NAME).with_index(0).with_attr("release")),
        );
        None
    }

    async fn plugin_reads(
        &self,
        at: &At<'_>,
        release: &helm::Release,
        diags: &mut Diagnostics,
    ) -> Option<PluginReads> {
        let values = release.effective_values();
        let ds_name = chart::plugin_daemonset(&self.release, &values);
        let c = at.cluster;
        let ds = match c.daemonset(&self.namespace, &ds_name).await {
            Ok(ds) => ds,
            Err(e) => {
                diags.push(kube_diagnostic(
                    "read the device plugin daemonset",
                    at.desired.access,
                    &e,
                ));
                return None;
            }
        };
        let configmap = ds.as_ref().and_then(chart::mounted_configmap);
        let data = match &configmap {
            Some(name) => match c.configmap(&self.namespace, name).await {
                Ok(d) => d,
                Err(e) => {
                    diags.push(kube_diagnostic("read the ConfigMap", at.desired.access, &e));
                    return None;
                }
            },
            None => None,
        };
        Some(PluginReads {
            configmap,
            data,
            default: ds.as_ref().and_then(chart::plugin_default),
        })
    }

    /// After the upgrade, the device plugin must mount this resource's ConfigMap and default to
    /// its default. None after an error diagnostic that says what it reads instead.
    async fn check_plugin_reads(
        &self,
        at: &At<'_>,
        deployed: &helm::Release,
        diags: &mut Diagnostics,
    ) -> Option<()> {
        let reads = self.plugin_reads(at, deployed, diags).await?;
        let d = at.desired;
        let want_default = d.default.clone().unwrap_or_default();
        let found = match (&reads.configmap, &reads.default) {
            (None, _) => Some(format!(
                "the daemonset {} mounts no config",
                chart::plugin_daemonset(&self.release, &deployed.effective_values())
            )),
            (Some(n), _) if *n != d.name => Some(format!("it mounts the ConfigMap {n:?}")),
            (_, Some(x)) if *x != want_default => Some(format!("its default is {x:?}")),
            _ => None,
        };
        let Some(problem) = found else {
            return Some(());
        };
        diags.push(Diagnostic::error(
            "Device plugin does not read these configs",
            format!(
                "The release {}/{} was upgraded, but {problem}, not {:?} with the default {:?}. \
                Check that the chart renders the device plugin daemonset of this release (its \
                `fullnameOverride`, or a chart of another shape).",
                self.namespace, self.release, d.name, want_default
            ),
        ));
        None
    }
}

/// The chart writes `config.default` into the config-managers' env and `config.name` into the
/// daemonsets' volume without quotes (templates/daemonset-device-plugin.yml of
/// nvidia-device-plugin v0.20.0): one YAML reads as anything but a string breaks the render, so
/// it is refused at plan. The ConfigMap, with the config names as keys, is this resource's own.
fn names_stay_strings(d: &Desired, diags: &mut Diagnostics) -> bool {
    let mut ok = true;
    for (attr, value) in [
        ("name", Some(d.name.as_str())),
        ("default_config", d.default.as_deref()),
    ] {
        let Some((v, kind)) =
            value.and_then(|v| Some((v, crate::cluster::chart::unquoted_kind(v)?)))
        else {
            continue;
        };
        diags.push(
            Diagnostic::error(
                "Name the chart would not keep a string",
                format!(
                    "{attr} is {v:?}: NVIDIA's device plugin chart writes it into its daemonsets \
                    without quotes (templates/daemonset-device-plugin.yml of nvidia-device-plugin \
                    v0.20.0), where YAML reads {v} as {kind}, and the API server refuses the \
                    daemonset in the middle of the upgrade. Choose a name YAML reads as a string, \
                    e.g. \"ts-{v}\"."
                ),
            )
            .at(AttrPath::attr(attr)),
        );
        ok = false;
    }
    ok
}
