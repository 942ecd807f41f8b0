//! Workload fit, for the `fracgpu_workload` data source: given a pool's derived facts and what a workload
//! needs, which resource and how many units it must request, and what memory it must stay under.
//!
//! The arithmetic is this provider's packing convention: a workload that needs more memory than one slice
//! asks for several slices (ceil(need / memory per slice)) and must keep under that many slices' memory,
//! which keeps its neighbours to the rest. It only holds within one GPU, so a need above one GPU's memory
//! never fits a shared pool. Memory is in MiB throughout; "MB" in attribute names means MiB.

use super::catalog::Cloud;
use super::error::{DomainError, Field, summary};
use super::sharing::{Derived, GkeSharingStrategy, SharingMode};

/// What a workload needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WorkloadNeed {
    /// GPU memory in MiB.
    GpuMemoryMib(u64),
    /// One MIG instance of this profile.
    MigProfile(String),
}

/// The answer for one workload on one pool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkloadFit {
    pub fits: bool,
    /// Why not, naming the fix, when `fits` is false.
    pub reason: Option<String>,
    /// The extended resource to request.
    pub resource_name: String,
    /// How many units to request (what it would take, also when it does not fit).
    pub quantity: u32,
    /// The memory the workload must stay under: quantity x memory per unit.
    pub memory_limit_mib: u64,
    /// Set when nothing enforces that limit (time-slicing) or the request has caveats.
    pub warning: Option<String>,
}

/// How many slices of `gpu_total_memory_mb / replicas` (floor) hold `gpu_memory_mb`: the ceiling of the
/// quotient. The count may exceed `replicas`; callers compare. Errors for zero inputs and for slices of
/// less than one MiB.
pub fn slices_for(
    gpu_memory_mb: u64,
    gpu_total_memory_mb: u64,
    replicas: u32,
) -> Result<u32, DomainError> {
    if gpu_memory_mb == 0 {
        return Err(zero_need());
    }
    if replicas == 0 || gpu_total_memory_mb == 0 {
        return Err(DomainError::new(
            Field::TimeSlicingReplicas,
            summary::INVALID_REPLICAS,
            format!(
                "Cannot cut {gpu_total_memory_mb} MiB into {replicas} slices: both must be at \
                    least 1."
            ),
        ));
    }
    let per_slice = gpu_total_memory_mb / u64::from(replicas);
    if per_slice == 0 {
        return Err(DomainError::new(
            Field::TimeSlicingReplicas,
            summary::INVALID_REPLICAS,
            format!(
                "{replicas} slices of {gpu_total_memory_mb} MiB leave less than 1 MiB each; use \
                    fewer replicas."
            ),
        ));
    }
    u32::try_from(gpu_memory_mb.div_ceil(per_slice)).map_err(|_| {
        bad_need(format!(
            "gpu_memory_mb {gpu_memory_mb} is more than any GPU holds."
        ))
    })
}

/// Answers whether a workload fits a pool and what it must request.
pub fn workload_fit(pool: &Derived, need: &WorkloadNeed) -> Result<WorkloadFit, DomainError> {
    if *need == WorkloadNeed::GpuMemoryMib(0) {
        return Err(zero_need());
    }
    let per_slice = u64::from(pool.memory_per_slice_mib);
    let mut fit = WorkloadFit {
        fits: true,
        reason: None,
        resource_name: pool.resource_name.clone(),
        quantity: 1,
        memory_limit_mib: per_slice,
        warning: None,
    };

    if let (SharingMode::Mig { profile, .. }, WorkloadNeed::MigProfile(wanted)) =
        (&pool.sharing, need)
    {
        return Ok(profile_fit(pool, profile, wanted, fit));
    }

    let WorkloadNeed::GpuMemoryMib(need_mib) = need else {
        fit.fits = false;
        fit.reason = Some(
            "The pool is not partitioned with MIG, so it has no MIG instances to request. Ask for \
             gpu_memory_mb instead, or use a MIG pool."
                .to_string(),
        );
        return Ok(fit);
    };
    let need_mib = *need_mib;
    fit.quantity = slices_for(need_mib, per_slice.max(1), 1)?;
    fit.memory_limit_mib = u64::from(fit.quantity) * per_slice;
    let quantity = fit.quantity;

    let refusal = memory_refusal(pool, need_mib, quantity).or_else(|| {
        (quantity > pool.slices_per_node).then(|| {
            let total = pool.slices_per_node;
            format!("It needs {quantity} units and a node has {total}. Use a larger machine type.")
        })
    });
    if let Some(reason) = refusal {
        fit.fits = false;
        fit.reason = Some(reason);
        return Ok(fit);
    }
    fit.warning = shared_warning(pool, fit.memory_limit_mib);
    if fit.quantity > 1 && matches!(pool.sharing, SharingMode::TimeSlicing { .. }) {
        let extra = " NVIDIA does not guarantee proportional compute to a request of several time-sliced \
                     replicas: the slices only reserve memory by convention.";
        fit.warning = Some(fit.warning.unwrap_or_default() + extra);
    }
    Ok(fit)
}

/// A MIG instance asked for by profile on a MIG pool: exactly one instance of the pool's profile.
fn profile_fit(pool: &Derived, profile: &str, wanted: &str, mut fit: WorkloadFit) -> WorkloadFit {
    let per_slice = u64::from(pool.memory_per_slice_mib);
    if !wanted.trim().eq_ignore_ascii_case(profile) {
        fit.fits = false;
        fit.reason = Some(format!(
            "The pool is partitioned into {profile} instances and a workload gets exactly one \
             instance, so it cannot have a {}. Use a pool with mig profile {}.",
            wanted.trim(),
            wanted.trim()
        ));
        return fit;
    }
    if pool.slices_per_gpu > mig_instances(pool) {
        // GKE sharing on top of the partition: one client's share, not the instance.
        fit.warning = shared_warning(pool, per_slice);
    }
    fit
}

/// Why `quantity` slices holding `need_mib` cannot be had on the pool's sharing mode, if they
/// cannot: each mode has its own rule for a request of more than one slice.
fn memory_refusal(pool: &Derived, need_mib: u64, quantity: u32) -> Option<String> {
    let per_slice = u64::from(pool.memory_per_slice_mib);
    let gke_shared = pool.cloud == Cloud::Gke
        && matches!(
            pool.sharing,
            SharingMode::TimeSlicing { .. }
                | SharingMode::Mps { .. }
                | SharingMode::Mig {
                    gke_sharing: Some(_),
                    ..
                }
        );
    match &pool.sharing {
        SharingMode::None => (quantity > pool.slices_per_node).then(|| {
            format!(
                "It needs {need_mib} MiB, {} whole GPUs of {} MiB, and a node has {}. Use a machine type \
                 with more or larger GPUs.",
                quantity, per_slice, pool.slices_per_node
            )
        }),
        SharingMode::Mig { profile, .. } => (quantity > 1).then(|| {
            let what = if pool.slices_per_gpu > mig_instances(pool) {
                format!("one client's share of a {profile} instance ({per_slice} MiB)")
            } else {
                format!("one {profile} instance ({per_slice} MiB)")
            };
            format!(
                "It needs {need_mib} MiB and a workload gets exactly {what}; instances do not add up. \
                 Use a pool with a larger MIG profile{}.",
                if gke_shared {
                    " or fewer clients per instance"
                } else {
                    ""
                }
            )
        }),
        SharingMode::TimeSlicing {
            fail_requests_greater_than_one,
            ..
        } => {
            if gke_shared && quantity > 1 {
                Some(gke_one_gpu_reason(need_mib, per_slice, quantity))
            } else if quantity > pool.slices_per_gpu {
                Some(more_than_a_gpu(pool, need_mib))
            } else if quantity > 1 && *fail_requests_greater_than_one {
                Some(format!(
                    "It needs {need_mib} MiB, {} slices of {per_slice} MiB, and the pool refuses requests for \
                     more than one slice (fail_requests_greater_than_one). Use a pool with fewer replicas \
                     or without fail_requests_greater_than_one.",
                    quantity
                ))
            } else {
                None
            }
        }
        SharingMode::Mps {
            fail_requests_greater_than_one,
            ..
        } => {
            if gke_shared && quantity > 1 {
                Some(gke_one_gpu_reason(need_mib, per_slice, quantity))
            } else if quantity > pool.slices_per_gpu {
                Some(more_than_a_gpu(pool, need_mib))
            } else if quantity > 1 && *fail_requests_greater_than_one {
                Some(format!(
                    "It needs {need_mib} MiB, more than one MPS client's {per_slice} MiB, and the device \
                     plugin refuses MPS requests for more than one replica. Use a pool with fewer MPS \
                     replicas."
                ))
            } else if quantity > 1 {
                // NVIDIA's MPS control daemon caps each client process at its share of a GPU
                // (`set_default_device_pinned_mem_limit`, per GPU): a container holding several
                // replicas still gets one share per GPU it uses.
                Some(format!(
                    "It needs {need_mib} MiB, more than one MPS client's {per_slice} MiB. The pool lets a \
                     container take {quantity} slices (fail_requests_greater_than_one = false), but MPS \
                     caps each client process at {per_slice} MiB of any one GPU however many slices it \
                     holds. Use a pool with fewer MPS replicas."
                ))
            } else {
                None
            }
        }
    }
}

fn mig_instances(pool: &Derived) -> u32 {
    pool.mig_profile.map_or(1, |p| p.max_instances)
}

/// The warning for pools whose memory limit nothing enforces.
fn shared_warning(pool: &Derived, limit_mib: u64) -> Option<String> {
    let unenforced = match &pool.sharing {
        SharingMode::TimeSlicing { .. } => true,
        SharingMode::Mig { gke_sharing, .. } => {
            gke_sharing.is_some_and(|s| s.strategy == GkeSharingStrategy::TimeSharing)
        }
        _ => false,
    };
    unenforced.then(|| {
        format!(
            "Time-slicing isolates neither memory nor faults: the workload must keep its GPU memory under \
             {limit_mib} MiB by itself (e.g. cap the framework's memory fraction), or it can crash its \
             neighbours."
        )
    })
}

fn gke_one_gpu_reason(need_mib: u64, per_slice: u64, quantity: u32) -> String {
    format!(
        "It needs {need_mib} MiB, {quantity} shares of {per_slice} MiB, but GKE refuses more than 1 nvidia.com/gpu \
         per container on shared GPUs. Use a pool with fewer clients per GPU, so one share holds {need_mib} MiB."
    )
}

fn more_than_a_gpu(pool: &Derived, need_mib: u64) -> String {
    format!(
        "It needs {need_mib} MiB and one {} has {} MiB; shares of a GPU do not span GPUs. Use a machine type with \
         a larger GPU.",
        pool.gpu.id, pool.gpu.memory_mib
    )
}

/// The one refusal of a zero need, whether it comes through `workload_fit` or `slices_for`.
fn zero_need() -> DomainError {
    bad_need("gpu_memory_mb is 0; give the GPU memory the workload needs, in MiB.")
}

fn bad_need(detail: impl Into<String>) -> DomainError {
    DomainError::new(Field::WorkloadMemory, summary::INVALID_WORKLOAD, detail)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::resolve_hardware;
    use crate::sharing::{GkeSharing, MigStrategy, PoolSpec, validate};
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    fn derived(cloud: Cloud, machine: &str, sharing: SharingMode) -> Derived {
        validate(&PoolSpec {
            cloud,
            pool_name: "gpupool".into(),
            hardware: resolve_hardware(cloud, machine, None, None).unwrap(),
            sharing,
            taints: None,
            labels: BTreeMap::new(),
        })
        .unwrap()
    }

    fn ts(replicas: u32, fail_requests_greater_than_one: bool) -> SharingMode {
        SharingMode::TimeSlicing {
            replicas,
            rename_by_default: false,
            fail_requests_greater_than_one,
        }
    }

    fn mem(mib: u64) -> WorkloadNeed {
        WorkloadNeed::GpuMemoryMib(mib)
    }

    #[test]
    fn four_gb_on_a_t4_cut_in_ten_takes_three_slices() {
        // A T4 shows 15360 MiB: slices of 1536 MiB, so 4000 MiB needs 3 and must stay under 4608 MiB.
        assert_eq!(slices_for(4000, 15360, 10).unwrap(), 3);
        let pool = derived(Cloud::Eks, "g4dn.xlarge", ts(10, false));
        let fit = workload_fit(&pool, &mem(4000)).unwrap();
        assert!(fit.fits, "{fit:?}");
        assert_eq!(
            (
                fit.resource_name.as_str(),
                fit.quantity,
                fit.memory_limit_mib
            ),
            ("nvidia.com/gpu", 3, 4608)
        );
        let warning = fit.warning.unwrap();
        assert!(warning.contains("under 4608 MiB"), "{warning}");
        assert!(warning.contains("proportional"), "{warning}");
    }

    #[test]
    fn exact_fit_and_one_mib_over() {
        let pool = derived(Cloud::Eks, "g4dn.xlarge", ts(10, false));
        let exact = workload_fit(&pool, &mem(1536)).unwrap();
        assert_eq!(
            (exact.fits, exact.quantity, exact.memory_limit_mib),
            (true, 1, 1536)
        );
        assert!(!exact.warning.as_deref().unwrap().contains("proportional"));
        let over = workload_fit(&pool, &mem(1537)).unwrap();
        assert_eq!(
            (over.fits, over.quantity, over.memory_limit_mib),
            (true, 2, 3072)
        );
        // Whole GPU exactly, then one MiB more than the GPU.
        assert!(workload_fit(&pool, &mem(15360)).unwrap().fits);
        let too_big = workload_fit(&pool, &mem(15361)).unwrap();
        assert!(!too_big.fits);
        assert!(too_big.reason.unwrap().contains("do not span GPUs"));
    }

    #[test]
    fn gke_time_sharing_refuses_more_than_one_share() {
        let pool = derived(Cloud::Gke, "g2-standard-4", ts(10, false));
        // An L4 shows 23034 MiB: shares of 2303 MiB.
        let fits = workload_fit(&pool, &mem(2303)).unwrap();
        assert!(fits.fits);
        assert!(fits.warning.is_some());
        let no = workload_fit(&pool, &mem(2304)).unwrap();
        assert!(!no.fits);
        assert_eq!(no.quantity, 2);
        let reason = no.reason.unwrap();
        assert!(
            reason.contains("GKE refuses more than 1 nvidia.com/gpu"),
            "{reason}"
        );
        assert!(reason.contains("fewer clients per GPU"), "{reason}");
    }

    #[test]
    fn strict_pools_and_mps_refuse_several_replicas() {
        let strict = derived(Cloud::Eks, "g4dn.xlarge", ts(10, true));
        let no = workload_fit(&strict, &mem(2000)).unwrap();
        assert!(!no.fits);
        assert!(
            no.reason
                .unwrap()
                .contains("fail_requests_greater_than_one")
        );
        let mps = derived(Cloud::Eks, "g4dn.xlarge", SharingMode::mps(4));
        let one = workload_fit(&mps, &mem(3840)).unwrap();
        assert_eq!((one.fits, one.warning), (true, None));
        let two = workload_fit(&mps, &mem(3841)).unwrap();
        assert!(!two.fits);
        assert!(two.reason.unwrap().contains("refuses MPS requests"));
        // Relaxed, a container may take two slices, yet its memory is still one client's.
        let relaxed = SharingMode::Mps {
            replicas: 4,
            fail_requests_greater_than_one: false,
        };
        let relaxed = derived(Cloud::Eks, "g4dn.xlarge", relaxed);
        let two = workload_fit(&relaxed, &mem(3841)).unwrap();
        assert!(!two.fits);
        let reason = two.reason.unwrap();
        assert!(
            reason.contains("caps each client process at 3840 MiB") && !reason.contains("refuses"),
            "{reason}"
        );
    }

    #[test]
    fn mig_workloads_get_exactly_one_instance() {
        let pool = derived(
            Cloud::Eks,
            "p4d.24xlarge",
            SharingMode::Mig {
                profile: "1g.5gb".into(),
                strategy: MigStrategy::Mixed,
                gke_sharing: None,
            },
        );
        let same = workload_fit(&pool, &WorkloadNeed::MigProfile("1g.5gb".into())).unwrap();
        assert_eq!(
            (same.fits, same.resource_name.as_str(), same.quantity),
            (true, "nvidia.com/mig-1g.5gb", 1)
        );
        let other = workload_fit(&pool, &WorkloadNeed::MigProfile("2g.10gb".into())).unwrap();
        assert!(!other.fits);
        assert!(other.reason.unwrap().contains("exactly one instance"));
        let exact = workload_fit(&pool, &mem(5120)).unwrap();
        assert_eq!(
            (exact.fits, exact.memory_limit_mib, exact.warning),
            (true, 5120, None)
        );
        let over = workload_fit(&pool, &mem(5121)).unwrap();
        assert!(!over.fits);
        assert!(over.reason.unwrap().contains("larger MIG profile"));
    }

    #[test]
    fn gke_shared_partitions() {
        let pool = derived(
            Cloud::Gke,
            "a2-highgpu-1g",
            SharingMode::Mig {
                profile: "1g.5gb".into(),
                strategy: MigStrategy::Mixed,
                gke_sharing: Some(GkeSharing {
                    strategy: GkeSharingStrategy::TimeSharing,
                    max_clients: 2,
                }),
            },
        );
        let fit = workload_fit(&pool, &mem(2560)).unwrap();
        assert!(fit.fits);
        assert!(fit.warning.is_some());
        let no = workload_fit(&pool, &mem(2561)).unwrap();
        assert!(!no.fits);
        assert!(no.reason.unwrap().contains("fewer clients per instance"));
    }

    #[test]
    fn whole_gpus_add_up_to_the_node() {
        let pool = derived(Cloud::Eks, "g5.12xlarge", SharingMode::None);
        let two = workload_fit(&pool, &mem(30000)).unwrap();
        assert_eq!(
            (two.fits, two.quantity, two.memory_limit_mib),
            (true, 2, 46056)
        );
        let five = workload_fit(&pool, &mem(4 * 23028 + 1)).unwrap();
        assert!(!five.fits);
        assert!(five.reason.unwrap().contains("a node has 4"));
        let not_mig = workload_fit(&pool, &WorkloadNeed::MigProfile("1g.5gb".into())).unwrap();
        assert!(!not_mig.fits);
    }

    #[test]
    fn invalid_needs_are_errors() {
        let pool = derived(Cloud::Eks, "g4dn.xlarge", ts(10, false));
        let err = workload_fit(&pool, &mem(0)).unwrap_err();
        assert_eq!(
            (err.field, err.summary),
            (Field::WorkloadMemory, "Invalid workload need")
        );
        assert!(slices_for(1, 100, 0).is_err());
        assert!(slices_for(1, 0, 2).is_err());
        assert!(slices_for(1, 10, 11).is_err());
        assert!(slices_for(0, 10, 2).is_err());
    }

    fn any_mode() -> impl Strategy<Value = SharingMode> {
        let profile = prop::sample::select(vec![
            "1g.5gb",
            "1g.10gb",
            "2g.20gb",
            "3g.40gb",
            "1g.20gb",
            "7g.80gb",
            "1g.5gb+me",
            "1g.18gb",
            "bogus",
        ]);
        let gke =
            prop::option::of(
                (any::<bool>(), 0u32..60).prop_map(|(mps, max_clients)| GkeSharing {
                    strategy: if mps {
                        GkeSharingStrategy::Mps
                    } else {
                        GkeSharingStrategy::TimeSharing
                    },
                    max_clients,
                }),
            );
        prop_oneof![
            Just(SharingMode::None),
            (0u32..60, any::<bool>(), any::<bool>()).prop_map(
                |(replicas, rename_by_default, fail)| {
                    SharingMode::TimeSlicing {
                        replicas,
                        rename_by_default,
                        fail_requests_greater_than_one: fail,
                    }
                }
            ),
            (0u32..60).prop_map(SharingMode::mps),
            (profile, any::<bool>(), gke).prop_map(|(profile, single, gke_sharing)| {
                SharingMode::Mig {
                    profile: profile.to_string(),
                    strategy: if single {
                        MigStrategy::Single
                    } else {
                        MigStrategy::Mixed
                    },
                    gke_sharing,
                }
            }),
        ]
    }

    proptest! {
        // Any pool of the catalog with any mode and any need: no panic, and a fit keeps its promises.
        #[test]
        fn fits_keep_their_promises(
            machine in prop::sample::select(
                crate::catalog::all_machine_types().iter().collect::<Vec<_>>()
            ),
            mode in any_mode(),
            need in prop_oneof![
                (0u64..400_000).prop_map(WorkloadNeed::GpuMemoryMib),
                Just(WorkloadNeed::MigProfile("1g.10gb".into())),
            ],
        ) {
            let spec = PoolSpec {
                cloud: machine.cloud,
                pool_name: "gpupool".into(),
                hardware: resolve_hardware(machine.cloud, machine.name, None, None).unwrap(),
                sharing: mode,
                taints: None,
                labels: BTreeMap::new(),
            };
            let Ok(pool) = validate(&spec) else { return Ok(()) };
            prop_assert!(pool.slices_per_node >= pool.slices_per_gpu && pool.slices_per_gpu >= 1);
            prop_assert!(u64::from(pool.memory_per_slice_mib) * u64::from(pool.slices_per_gpu)
                <= u64::from(pool.gpu.memory_mib) + 1024 * 7);
            if let Some(named) = &pool.device_plugin_config {
                let text = named.config.render().unwrap();
                prop_assert_eq!(&crate::device_plugin::parse(&text).unwrap(), &named.config);
            }
            if let Ok(fit) = workload_fit(&pool, &need) {
                prop_assert_eq!(fit.fits, fit.reason.is_none());
                if fit.fits {
                    prop_assert!(fit.quantity >= 1 && fit.quantity <= pool.slices_per_node);
                    if let WorkloadNeed::GpuMemoryMib(mib) = need {
                        prop_assert!(fit.memory_limit_mib >= mib);
                        prop_assert!(fit.memory_limit_mib <= u64::from(pool.gpu.memory_mib) * u64::from(pool.gpus_per_node));
                    }
                }
            }
        }

        #[test]
        fn slices_for_is_the_smallest_count_that_holds_the_need(
            total in 1024u64..200_000, replicas in 1u32..=48, need_frac in 1u64..=1000
        ) {
            let need = (total * need_frac / 1000).max(1);
            let per = total / u64::from(replicas);
            let n = u64::from(slices_for(need, total, replicas).unwrap());
            prop_assert!(n * per >= need);
            prop_assert!((n - 1) * per < need);
        }
    }
}
