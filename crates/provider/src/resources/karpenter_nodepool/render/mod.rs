//! The Karpenter objects of a shared GPU pool, rendered from what a user declares: a `NodePool`
//! (karpenter.sh/v1) whose template carries the sharing, one `NodeOverlay` (karpenter.sh/v1alpha1)
//! per GPU count the pool allows, so that Karpenter sizes and consolidates nodes by slices, and,
//! when the pool makes its own, the node class of its provisioner (`super::provisioner`).
//!
//! Pure: no I/O and no Terraform types. Every problem is a [`Problem`] naming the argument, and
//! all of them are reported at once, as the node pool's checks do. The objects are checked
//! against the real CRDs on a real kube-apiserver by the acceptance test `karpenter_objects`;
//! `crate::cluster::karpenter_api` writes and reads them.
//!
//! - `pool`: the pool as declared and what rendering gives.
//! - `checks`: the checks that need no domain rules.
//! - `objects`: the JSON of each object.
//!
//! Facts followed, with their sources (each provisioner's file has its own):
//! - An overlay's capacity replaces the instance type's value for each resource it names
//!   (kubernetes-sigs/karpenter pkg/cloudprovider/types.go, `lo.Assign`), and a requirement on
//!   `karpenter.sh/nodepool` scopes it to one NodePool (designs/node-overlay.md).

mod checks;
mod objects;
mod pool;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;

use gpu::Cloud;

use super::provisioner::node_class::GpuChoice;
use checks::Offer;
use objects::Template;

pub use super::problem::Problem;
pub use pool::{Budget, Disruption, KarpenterPool, NODEPOOL_LABEL, Rendered, overlay_name};

/// The rules the sharing is checked by. Every provisioner's nodes get their device plugin
/// config by label and their MIG layout from the GPU operator's MIG manager, as an EKS node
/// group's do; only the node selector differs (Karpenter's label).
const OPERATOR_RULES: Cloud = Cloud::Eks;

/// The domain's facts for the smallest GPU count, and what a node of each count offers; None
/// after a problem.
fn derive(
    p: &KarpenterPool,
    offer: &Offer,
    counts: &[u32],
    problems: &mut Vec<Problem>,
) -> (Option<gpu::Derived>, BTreeMap<u32, BTreeMap<String, u32>>) {
    let mut derived: Option<gpu::Derived> = None;
    let mut capacity = BTreeMap::new();
    for &c in counts.iter().filter(|c| offer.counts.contains(c)) {
        let Some(machine) = offer.machines.iter().find(|m| m.gpu_count == c) else {
            continue;
        };
        let spec = gpu::PoolSpec {
            cloud: OPERATOR_RULES,
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
    (derived, capacity)
}

/// Checks a pool and renders its objects; every problem found is returned.
pub fn render(p: &KarpenterPool) -> Result<Rendered, Vec<Problem>> {
    let mut problems = Vec::new();
    let Some(offer) = checks::offer(p, &mut problems) else {
        return Err(problems);
    };
    let counts = checks::counts(p, &offer, &mut problems);
    checks::sharing_and_limit(p, &counts, &mut problems);
    let user_data = checks::user_data(p, &mut problems);
    let (derived, capacity) = derive(p, &offer, &counts, &mut problems);
    if !problems.is_empty() {
        // A name the domain checks with the operator's (EKS's) rules may be reported twice; keep
        // one of each.
        problems.dedup();
        return Err(problems);
    }
    let Some(derived) = derived else {
        return Err(problems);
    };
    let labels = objects::template_labels(p, &derived);
    let limits = objects::limits(p, &derived);
    let node_pool = objects::node_pool(
        p,
        &Template {
            labels: &labels,
            choice: GpuChoice {
                gpu: p.gpu,
                machines: &offer.machines,
                counts: &counts,
            },
            derived: &derived,
            limits: &limits,
        },
    );
    Ok(Rendered {
        node_pool,
        overlays: objects::overlays(p, &capacity),
        node_class: objects::node_class(p, user_data.as_deref()),
        capacity,
        limits,
        node_selector: BTreeMap::from([(NODEPOOL_LABEL.to_string(), p.name.clone())]),
        user_data,
        derived,
    })
}
