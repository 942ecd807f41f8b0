//! The typed model of `fracgpu_nodepool` and the way from a configuration, plan or state to the
//! cloud-neutral pool spec the clients take ([`resolve`]); the way back, from a pool as the cloud
//! reports it to state, is in `state`. What the domain derives (resource name, slices, selector,
//! tolerations) is one model, [`Derived`], written alike into plans and states.

use std::collections::BTreeMap;

use crate::cloud::registry::{self, TargetBlock};
use crate::cloud::{self, Location, PoolTaint, Scaling, Target};
use crate::model::{Sharing, TaintArgs, TolerationOut, domain_diagnostic};
use crate::state::Settings;
use gpu;
use tfplugin::object::{FromValue, Known, SingleBlock};
use tfplugin::{AttrPath, Diagnostic, Diagnostics, Value};

/// The last fix for a state that does not read.
pub(super) const REIMPORT: &str = "re-import the pool (`terraform import` with its cloud ID)";

tfplugin::object! {
    /// The `autoscaling` block.
    pub struct AutoscalingArgs {
        pub min_nodes: u32,
        pub max_nodes: u32,
    }
}

tfplugin::object! {
    /// The arguments: what a user writes, as a configuration, plan or state holds it. It reads
    /// only while everything the pool depends on is known; what the cloud fills in (`os_sku`,
    /// `disk_size_gb`) and what the plan defaults (`node_count`, `spot`) may still be unknown.
    pub struct Args {
        pub name: String,
        pub machine_type: String,
        pub gpu_model: Option<String>,
        pub gpu_count: Option<u32>,
        pub node_count: Known<u32>,
        pub spot: Known<bool>,
        pub disk_size_gb: Known<u32>,
        pub labels: Option<BTreeMap<String, String>>,
        pub taints: Option<Vec<TaintArgs>>,
        pub autoscaling: SingleBlock<AutoscalingArgs>,
        /// The config name the pool's nodes carry now (computed; a plan's or a state's): a pool
        /// made while names said the settings keeps its name while they hold
        /// (`gpu::Derived::keep_config_name`).
        pub device_plugin_config_name: Known<String>,
    }
    flatten {
        pub sharing: Sharing,
        /// The `aks`, `gke` or `eks` block, which its target's descriptor reads.
        pub target: TargetBlock,
    }
}

tfplugin::object! {
    /// The `gpu` attribute.
    pub struct GpuOut {
        pub model: String,
        pub count: u32,
        pub memory_mb: u32,
    }
}

tfplugin::object! {
    /// What the domain derives from the arguments: known at plan time, and again from what the
    /// cloud reports.
    pub struct Derived {
        pub gpu: GpuOut,
        pub device_plugin_config_name: Option<String>,
        pub device_plugin_config: Option<String>,
        pub resource_name: String,
        pub slices_per_node: u32,
        pub memory_per_slice_mb: u32,
        pub node_selector: BTreeMap<String, String>,
        pub tolerations: Vec<TolerationOut>,
    }
}

impl Derived {
    pub(super) fn of(d: &gpu::Derived) -> Derived {
        let config = d.device_plugin_config.as_ref();
        Derived {
            gpu: GpuOut {
                model: d.gpu.id.to_string(),
                count: d.gpus_per_node,
                memory_mb: d.gpu.memory_mib,
            },
            device_plugin_config_name: config.map(|c| c.name.clone()),
            device_plugin_config: config.and_then(|c| c.config.render().ok()),
            resource_name: d.resource_name.clone(),
            slices_per_node: d.slices_per_node,
            memory_per_slice_mb: d.memory_per_slice_mib,
            node_selector: d.node_selector.clone(),
            tolerations: TolerationOut::all(&d.tolerations),
        }
    }
}

tfplugin::object! {
    /// What the provider sets on the pool's nodes, and tells its autoscaler of them.
    pub struct NodeSetup {
        /// Every label the nodes carry: the user's and the ones sharing needs.
        pub node_labels: BTreeMap<String, String>,
        /// The tags cluster-autoscaler reads to build a node before one exists.
        pub autoscaler_node_template: BTreeMap<String, String>,
    }
}

tfplugin::object! {
    /// The pool the cloud answers for.
    pub struct Identity {
        pub id: String,
        pub status: String,
    }
}

tfplugin::object! {
    /// A pool as the cloud reports it, with what only the configuration knows (the spelling
    /// the user chose, GPU overrides, timeouts) carried over.
    pub struct Reported {
        pub timeouts: Value,
    }
    flatten {
        pub identity: Identity,
        pub labels: NodeSetup,
        pub args: Args,
    }
}

/// Everything a pool value means: where it lives, what the domain derives from it, and the spec
/// to hand to the cloud.
pub(super) struct Resolved {
    pub derived: gpu::Derived,
    pub spec: cloud::PoolSpec,
}

impl Args {
    /// The cloud and location named by the target block (`aks`, `gke`, `eks`), with provider
    /// defaults applied; a missing subscription, project or region is a diagnostic on the
    /// attribute.
    pub(super) fn location(
        &self,
        settings: &Settings,
        diags: &mut Diagnostics,
    ) -> Option<Location> {
        let (target, block) = self.target.0.as_ref()?;
        let located = registry::locate_block(*target, block, &settings.cloud);
        registry::or_report(located, &AttrPath::root(), false, diags)
    }

    /// The pool's zones, where its target's pools have zones and they are known.
    pub(super) fn zones(&self) -> Option<Vec<String>> {
        let (t, block) = self.target.0.as_ref()?;
        Vec::<String>::from_value(block.get(t.zones_attr()?)).ok()
    }

    /// The pool's size, a total on every cloud. Without `node_count`, one node, or on GKE one in
    /// each of the pool's zones. A fixed GKE total must split evenly over the zones.
    fn scaling(&self, diags: &mut Diagnostics) -> Option<Scaling> {
        let Some(a) = &*self.autoscaling else {
            let zones = self.zones().filter(|z| !z.is_empty());
            let nodes = self
                .node_count
                .or(zones.as_ref().map(|z| z.len() as u32))
                .unwrap_or(1);
            if let (Some(zones), Some(t)) = (&zones, self.target.target())
                && !nodes.is_multiple_of(zones.len() as u32)
            {
                diags.push(t.uneven_split(nodes, zones));
                return None;
            }
            return Some(Scaling::Fixed { nodes });
        };
        if a.min_nodes > a.max_nodes {
            diags.push(
                Diagnostic::error(
                    "Invalid autoscaling bounds",
                    format!(
                        "autoscaling.min_nodes ({}) is above max_nodes ({}); make min_nodes at \
                        most max_nodes.",
                        a.min_nodes, a.max_nodes
                    ),
                )
                .at(AttrPath::attr("autoscaling")
                    .with_index(0)
                    .with_attr("min_nodes")),
            );
            return None;
        }
        Some(Scaling::Auto {
            min: a.min_nodes,
            max: a.max_nodes,
        })
    }
}

/// Resolves the arguments against the catalog and the sharing rules. Problems become
/// diagnostics on the attribute the user wrote; `None` means the pool cannot be resolved.
pub(super) fn resolve(
    args: &Args,
    settings: &Settings,
    diags: &mut Diagnostics,
) -> Option<Resolved> {
    let loc = args.location(settings, diags)?;
    let cloud = loc.cloud();
    let hardware = match gpu::resolve_hardware(
        cloud,
        &args.machine_type,
        args.gpu_model.as_deref(),
        args.gpu_count,
    ) {
        Ok(h) => h,
        Err(errors) => {
            for e in &errors {
                diags.push(domain_diagnostic(e, &[]));
            }
            return None;
        }
    };
    let (target, block) = args.target.0.as_ref()?;
    let sharing = args.sharing.mode();
    let labels = args.labels.clone().unwrap_or_default();
    let target_errors = target.check_sharing(block, &sharing);
    let machine_type = hardware.machine_type.clone();
    let mut derived = match gpu::validate(&gpu::PoolSpec {
        cloud,
        pool_name: args.name.clone(),
        hardware,
        sharing,
        taints: crate::model::taints(&args.taints),
        labels: labels.clone(),
    }) {
        Ok(d) => d,
        Err(errors) => {
            diags.0.extend(target_errors);
            for e in &errors {
                diags.push(domain_diagnostic(e, &[]));
            }
            return None;
        }
    };
    if !target_errors.is_empty() {
        diags.0.extend(target_errors);
        return None;
    }
    let block_errors = target.check_block(block);
    if !block_errors.is_empty() {
        diags.0.extend(block_errors);
        return None;
    }
    let scaling = args.scaling(diags)?;
    if let Known(Some(name)) = &args.device_plugin_config_name {
        derived.keep_config_name(name);
    }
    let mut node_labels = labels;
    node_labels.extend(derived.node_labels.clone());
    let mut spec = cloud::PoolSpec {
        location: loc,
        name: args.name.clone(),
        machine_type,
        scaling,
        spot: args.spot.unwrap_or(false),
        disk_size_gb: args.disk_size_gb.0,
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
        gpu_count: derived.gpus_per_node,
        node_template: BTreeMap::new(),
        target: target.fields(block, &derived),
    };
    // Only an autoscaler sizes a pool before its nodes exist.
    if let Scaling::Auto { .. } = spec.scaling {
        match node_template(*target, &spec, &derived) {
            Ok(tags) => spec.node_template = tags,
            Err(d) => {
                diags.push(d);
                return None;
            }
        }
    }
    Some(Resolved { derived, spec })
}

/// The tags an autoscaler reads to build a node of the pool before one exists, as `target`
/// writes them.
fn node_template(
    target: &dyn Target,
    spec: &cloud::PoolSpec,
    derived: &gpu::Derived,
) -> Result<BTreeMap<String, String>, Diagnostic> {
    let resources = derived.node_resources();
    // The labels a workload selects the pool by (`node_selector`) belong in the template too:
    // the ones the cloud sets itself (`eks.amazonaws.com/nodegroup`, `agentpool`) are not
    // among the pool's labels, and a template without them matches no such workload.
    let mut labels = spec.labels.clone();
    labels.extend(derived.node_selector.clone());
    target.node_template(&cloud::NodeTemplate {
        resources: &resources,
        labels: &labels,
        taints: &spec.taints,
    })
}

#[cfg(test)]
mod tests {
    use super::super::schema::schema;
    use super::*;

    /// Types and flags, nested and target blocks included: the arguments as a plan holds them,
    /// and a state as the pool the cloud reports and what the domain derives.
    #[test]
    fn the_models_read_what_the_schema_declares() {
        use tfplugin::shape::{Reads, Shaped, check, object};
        let block = schema().block;
        let at = "fracgpu_nodepool";
        assert_eq!(
            check(at, &block, &Args::shape(), Reads::Plan),
            Vec::<String>::new()
        );
        let state = object(Vec::new(), vec![Reported::shape(), Derived::shape()]);
        assert_eq!(
            check(at, &block, &state, Reads::State),
            Vec::<String>::new()
        );
    }

    #[test]
    fn the_models_name_what_the_schema_declares() {
        let mut names: Vec<&str> = Reported::attribute_names();
        names.extend(Derived::attribute_names());
        names.sort_unstable();
        // `device_plugin_config_name` is read as an argument (the name the nodes carry) and
        // written as a derived fact: one attribute.
        names.dedup();
        assert_eq!(names, schema().block.names());
    }
}
