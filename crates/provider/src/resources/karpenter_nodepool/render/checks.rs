//! The renderer's checks of a declaration that need no domain rules: the name, whether the
//! provisioner's catalog offers the GPU and its counts, what the provisioner cannot do with the
//! sharing, the limit. Each pushes its problem and goes on, so that all are reported at once.

use gpu::{MachineType, SharingMode};

use super::super::problem::{Problem, problem};
use super::pool::{KarpenterPool, NODEPOOL_LABEL};

/// What the provisioner's catalog offers of the pool's GPU.
pub(super) struct Offer {
    /// The instance types that carry it.
    pub(super) machines: Vec<&'static MachineType>,
    /// Their GPU counts, sorted, each once.
    pub(super) counts: Vec<u32>,
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

pub(super) fn strings<T: ToString>(v: &[T]) -> Vec<String> {
    v.iter().map(ToString::to_string).collect()
}

/// The name, then what the catalog offers of the GPU; None when it offers nothing Karpenter can
/// choose (nothing else can be checked then).
pub(super) fn offer(p: &KarpenterPool, problems: &mut Vec<Problem>) -> Option<Offer> {
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
    let provisioner = p.provisioner.as_ref();
    let cloud = provisioner.cloud();
    let machines: Vec<&MachineType> = gpu::machine_types_of(cloud)
        .filter(|m| std::ptr::eq(m.gpu, p.gpu))
        .collect();
    let mut counts: Vec<u32> = machines.iter().map(|m| m.gpu_count).collect();
    counts.sort_unstable();
    counts.dedup();
    if counts.is_empty() || !provisioner.pins(p.gpu) {
        let mut models: Vec<&str> = gpu::machine_types_of(cloud)
            .filter(|m| provisioner.pins(m.gpu))
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
        return None;
    }
    Some(Offer { machines, counts })
}

/// The pool's GPU counts, sorted, each once; a problem for none, and for each the catalog does
/// not offer.
pub(super) fn counts(p: &KarpenterPool, offer: &Offer, problems: &mut Vec<Problem>) -> Vec<u32> {
    let offered = &offer.counts;
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
                strings(offered).join(", ")
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
                    p.provisioner.cloud().as_str(),
                    p.gpu.id,
                    strings(offered).join(", ")
                ),
            ));
        }
    }
    counts
}

/// What the provisioner cannot do with the sharing, settings of another cloud, and a limit below
/// the smallest node (`counts` as [`counts`] gives them).
pub(super) fn sharing_and_limit(p: &KarpenterPool, counts: &[u32], problems: &mut Vec<Problem>) {
    problems.extend(p.provisioner.sharing_problem(&p.sharing));
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
}

/// The user data the provisioner's node class needs for the sharing, None after a problem.
pub(super) fn user_data(p: &KarpenterPool, problems: &mut Vec<Problem>) -> Option<String> {
    p.provisioner
        .user_data(&p.sharing, p.gpu)
        .unwrap_or_else(|e| {
            problems.push(e);
            None
        })
}
