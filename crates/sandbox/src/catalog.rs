//! The sandbox's own small table of machine types, VM sizes and GPUs, copied from the clouds' public
//! documentation of their GPU machine families and NVIDIA's MIG user guide. It is deliberately
//! separate from the provider's `gpu` catalog: the emulator is an oracle, and a shared table would
//! let a catalog bug pass on both sides.

/// One GPU model as the NVIDIA stack reports it on a node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Gpu {
    /// Value of the `nvidia.com/gpu.product` label that GPU feature discovery sets.
    pub(crate) product: &'static str,
    pub(crate) memory_mib: u64,
    /// MIG profiles with the number of instances one GPU holds; empty when MIG is unsupported.
    pub(crate) mig: &'static [(&'static str, u32)],
}

const A100_40_MIG: &[(&str, u32)] = &[
    ("1g.5gb", 7),
    ("1g.10gb", 4),
    ("2g.10gb", 3),
    ("3g.20gb", 2),
    ("4g.20gb", 1),
    ("7g.40gb", 1),
];
const G80_MIG: &[(&str, u32)] = &[
    ("1g.10gb", 7),
    ("1g.20gb", 4),
    ("2g.20gb", 3),
    ("3g.40gb", 2),
    ("4g.40gb", 1),
    ("7g.80gb", 1),
];
const H100_NVL_MIG: &[(&str, u32)] = &[
    ("1g.12gb", 7),
    ("1g.24gb", 4),
    ("2g.24gb", 3),
    ("3g.47gb", 2),
    ("4g.47gb", 1),
    ("7g.94gb", 1),
];
const H200_MIG: &[(&str, u32)] = &[
    ("1g.18gb", 7),
    ("1g.35gb", 4),
    ("2g.35gb", 3),
    ("3g.71gb", 2),
    ("4g.71gb", 1),
    ("7g.141gb", 1),
];
const B200_MIG: &[(&str, u32)] = &[
    ("1g.23gb", 7),
    ("1g.45gb", 4),
    ("2g.45gb", 3),
    ("3g.90gb", 2),
    ("4g.90gb", 1),
    ("7g.180gb", 1),
];

pub(crate) const A100_40_SXM: Gpu = Gpu {
    product: "NVIDIA-A100-SXM4-40GB",
    memory_mib: 40960,
    mig: A100_40_MIG,
};
pub(crate) const A100_80_SXM: Gpu = Gpu {
    product: "NVIDIA-A100-SXM4-80GB",
    memory_mib: 81920,
    mig: G80_MIG,
};
pub(crate) const A100_80_PCIE: Gpu = Gpu {
    product: "NVIDIA-A100-80GB-PCIe",
    memory_mib: 81920,
    mig: G80_MIG,
};
pub(crate) const H100_80: Gpu = Gpu {
    product: "NVIDIA-H100-80GB-HBM3",
    memory_mib: 81559,
    mig: G80_MIG,
};
pub(crate) const H100_NVL: Gpu = Gpu {
    product: "NVIDIA-H100-NVL",
    memory_mib: 95830,
    mig: H100_NVL_MIG,
};
pub(crate) const H200: Gpu = Gpu {
    product: "NVIDIA-H200",
    memory_mib: 143771,
    mig: H200_MIG,
};
pub(crate) const B200: Gpu = Gpu {
    product: "NVIDIA-B200",
    memory_mib: 183359,
    mig: B200_MIG,
};
pub(crate) const T4: Gpu = Gpu {
    product: "Tesla-T4",
    memory_mib: 15360,
    mig: &[],
};
pub(crate) const V100: Gpu = Gpu {
    product: "Tesla-V100-SXM2-16GB",
    memory_mib: 16384,
    mig: &[],
};
pub(crate) const L4: Gpu = Gpu {
    product: "NVIDIA-L4",
    memory_mib: 23034,
    mig: &[],
};
pub(crate) const A10G: Gpu = Gpu {
    product: "NVIDIA-A10G",
    memory_mib: 23028,
    mig: &[],
};
pub(crate) const L40S: Gpu = Gpu {
    product: "NVIDIA-L40S",
    memory_mib: 46068,
    mig: &[],
};

/// A machine type: its name and, for GPU machines, the GPU model and count.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Machine {
    pub(crate) name: &'static str,
    pub(crate) gpu: Option<(Gpu, u32)>,
}

const fn m(name: &'static str, gpu: Gpu, n: u32) -> Machine {
    Machine {
        name,
        gpu: Some((gpu, n)),
    }
}
const fn cpu(name: &'static str) -> Machine {
    Machine { name, gpu: None }
}

pub(crate) const AZURE_VM_SIZES: &[Machine] = &[
    m("Standard_NC24ads_A100_v4", A100_80_PCIE, 1),
    m("Standard_NC48ads_A100_v4", A100_80_PCIE, 2),
    m("Standard_NC96ads_A100_v4", A100_80_PCIE, 4),
    m("Standard_NC40ads_H100_v5", H100_NVL, 1),
    m("Standard_NC80adis_H100_v5", H100_NVL, 2),
    m("Standard_ND96asr_v4", A100_40_SXM, 8),
    m("Standard_ND96amsr_A100_v4", A100_80_SXM, 8),
    m("Standard_ND96isr_H100_v5", H100_80, 8),
    m("Standard_ND96isr_H200_v5", H200, 8),
    m("Standard_NC4as_T4_v3", T4, 1),
    m("Standard_NC8as_T4_v3", T4, 1),
    m("Standard_NC16as_T4_v3", T4, 1),
    m("Standard_NC64as_T4_v3", T4, 4),
    cpu("Standard_D2s_v3"),
    cpu("Standard_D4s_v3"),
    cpu("Standard_D8s_v3"),
    cpu("Standard_D16s_v3"),
    cpu("Standard_D2s_v5"),
    cpu("Standard_D4s_v5"),
    cpu("Standard_D8s_v5"),
    cpu("Standard_D16s_v5"),
    cpu("Standard_D4ds_v5"),
    cpu("Standard_DS2_v2"),
    cpu("Standard_DS3_v2"),
    cpu("Standard_B2s"),
    cpu("Standard_E4s_v5"),
    cpu("Standard_F8s_v2"),
];

pub(crate) const GCP_MACHINE_TYPES: &[Machine] = &[
    m("a2-highgpu-1g", A100_40_SXM, 1),
    m("a2-highgpu-2g", A100_40_SXM, 2),
    m("a2-highgpu-4g", A100_40_SXM, 4),
    m("a2-highgpu-8g", A100_40_SXM, 8),
    m("a2-megagpu-16g", A100_40_SXM, 16),
    m("a2-ultragpu-1g", A100_80_SXM, 1),
    m("a2-ultragpu-2g", A100_80_SXM, 2),
    m("a2-ultragpu-4g", A100_80_SXM, 4),
    m("a2-ultragpu-8g", A100_80_SXM, 8),
    m("a3-highgpu-1g", H100_80, 1),
    m("a3-highgpu-2g", H100_80, 2),
    m("a3-highgpu-4g", H100_80, 4),
    m("a3-highgpu-8g", H100_80, 8),
    m("a3-megagpu-8g", H100_80, 8),
    m("a3-ultragpu-8g", H200, 8),
    m("a4-highgpu-8g", B200, 8),
    m("g2-standard-4", L4, 1),
    m("g2-standard-8", L4, 1),
    m("g2-standard-12", L4, 1),
    m("g2-standard-16", L4, 1),
    m("g2-standard-24", L4, 2),
    m("g2-standard-32", L4, 1),
    m("g2-standard-48", L4, 4),
    m("g2-standard-96", L4, 8),
    cpu("n1-standard-1"),
    cpu("n1-standard-2"),
    cpu("n1-standard-4"),
    cpu("n1-standard-8"),
    cpu("n1-standard-16"),
    cpu("n1-standard-32"),
    cpu("n1-highmem-8"),
    cpu("e2-medium"),
    cpu("e2-standard-2"),
    cpu("e2-standard-4"),
    cpu("e2-standard-8"),
    cpu("e2-standard-16"),
    cpu("n2-standard-2"),
    cpu("n2-standard-4"),
    cpu("n2-standard-8"),
    cpu("n2-standard-16"),
];

/// GKE accelerator types with the machine family they attach to and the `gpuPartitionSize` values
/// GKE accepts for them. GKE's list is narrower than NVIDIA's: the table of partition sizes in GKE's
/// "Running multi-instance GPUs" guide
/// (<https://cloud.google.com/kubernetes-engine/docs/how-to/gpus-multi>) has no 4g profile on any
/// GPU, no 1g.10gb on the 40 GB A100, and the 1g profile with twice the memory (1g.20gb, 1g.35gb) only
/// on H100 and H200. The B200 row is modelled on the H200's (its 4g profile left out too), an
/// inference rather than a quote. A machine with built-in GPUs accepts only its own accelerator with
/// its own count; `n1-` machines take attached T4/V100 GPUs.
pub(crate) struct GkeAccelerator {
    pub(crate) name: &'static str,
    pub(crate) gpu: Gpu,
    pub(crate) machine_prefix: &'static str,
    pub(crate) partitions: &'static [&'static str],
}

const fn acc(
    name: &'static str,
    gpu: Gpu,
    machine_prefix: &'static str,
    partitions: &'static [&'static str],
) -> GkeAccelerator {
    GkeAccelerator {
        name,
        gpu,
        machine_prefix,
        partitions,
    }
}

pub(crate) const GKE_ACCELERATORS: &[GkeAccelerator] = &[
    acc(
        "nvidia-tesla-a100",
        A100_40_SXM,
        "a2-highgpu-",
        &["1g.5gb", "2g.10gb", "3g.20gb", "7g.40gb"],
    ),
    acc(
        "nvidia-tesla-a100",
        A100_40_SXM,
        "a2-megagpu-",
        &["1g.5gb", "2g.10gb", "3g.20gb", "7g.40gb"],
    ),
    acc(
        "nvidia-a100-80gb",
        A100_80_SXM,
        "a2-ultragpu-",
        &["1g.10gb", "2g.20gb", "3g.40gb", "7g.80gb"],
    ),
    acc(
        "nvidia-h100-80gb",
        H100_80,
        "a3-highgpu-",
        &["1g.10gb", "1g.20gb", "2g.20gb", "3g.40gb", "7g.80gb"],
    ),
    acc(
        "nvidia-h100-mega-80gb",
        H100_80,
        "a3-megagpu-",
        &["1g.10gb", "1g.20gb", "2g.20gb", "3g.40gb", "7g.80gb"],
    ),
    acc(
        "nvidia-h200-141gb",
        H200,
        "a3-ultragpu-",
        &["1g.18gb", "1g.35gb", "2g.35gb", "3g.71gb", "7g.141gb"],
    ),
    acc(
        "nvidia-b200",
        B200,
        "a4-highgpu-",
        &["1g.23gb", "1g.45gb", "2g.45gb", "3g.90gb", "7g.180gb"],
    ),
    acc("nvidia-l4", L4, "g2-", &[]),
    acc("nvidia-tesla-t4", T4, "n1-", &[]),
    acc("nvidia-tesla-v100", V100, "n1-", &[]),
];

/// Zones of the sandbox's regions that do not offer an accelerator (every other zone offers every
/// accelerator above). GKE refuses a node pool with 400 `Accelerator type "nvidia-tesla-t4" does not
/// exist in zone us-west4-c.` when one of its zones lacks the GPU: the us-west4 rows are the zones
/// of that very error report (GoogleCloudPlatform/kubernetes-engine-samples#1738), the europe-west4
/// row follows Compute Engine's "GPU regions and zones" table, where the A100 40GB is offered in
/// europe-west4-a and -b only.
const ZONES_WITHOUT: &[(&str, &str)] = &[
    ("europe-west4-c", "nvidia-tesla-a100"),
    ("us-west4-b", "nvidia-l4"),
    ("us-west4-c", "nvidia-tesla-t4"),
];

/// Whether GKE offers an accelerator type in a zone.
pub(crate) fn gke_accelerator_in_zone(accelerator: &str, zone: &str) -> bool {
    !ZONES_WITHOUT.contains(&(zone, accelerator))
}

pub(crate) const AWS_INSTANCE_TYPES: &[Machine] = &[
    m("p4d.24xlarge", A100_40_SXM, 8),
    m("p4de.24xlarge", A100_80_SXM, 8),
    m("p5.48xlarge", H100_80, 8),
    m("p5e.48xlarge", H200, 8),
    m("p5en.48xlarge", H200, 8),
    m("g5.xlarge", A10G, 1),
    m("g5.2xlarge", A10G, 1),
    m("g5.4xlarge", A10G, 1),
    m("g5.8xlarge", A10G, 1),
    m("g5.16xlarge", A10G, 1),
    m("g5.12xlarge", A10G, 4),
    m("g5.24xlarge", A10G, 4),
    m("g5.48xlarge", A10G, 8),
    m("g6.xlarge", L4, 1),
    m("g6.2xlarge", L4, 1),
    m("g6.4xlarge", L4, 1),
    m("g6.8xlarge", L4, 1),
    m("g6.16xlarge", L4, 1),
    m("g6.12xlarge", L4, 4),
    m("g6.24xlarge", L4, 4),
    m("g6.48xlarge", L4, 8),
    m("g6e.xlarge", L40S, 1),
    m("g6e.2xlarge", L40S, 1),
    m("g6e.4xlarge", L40S, 1),
    m("g6e.8xlarge", L40S, 1),
    m("g6e.16xlarge", L40S, 1),
    m("g6e.12xlarge", L40S, 4),
    m("g6e.24xlarge", L40S, 4),
    m("g6e.48xlarge", L40S, 8),
    m("g4dn.xlarge", T4, 1),
    m("g4dn.2xlarge", T4, 1),
    m("g4dn.4xlarge", T4, 1),
    m("g4dn.8xlarge", T4, 1),
    m("g4dn.16xlarge", T4, 1),
    m("g4dn.12xlarge", T4, 4),
    m("g4dn.metal", T4, 8),
    cpu("t3.medium"),
    cpu("t3.large"),
    cpu("t3.xlarge"),
    cpu("m5.large"),
    cpu("m5.xlarge"),
    cpu("m5.2xlarge"),
    cpu("m6i.large"),
    cpu("m6i.xlarge"),
    cpu("m7i.large"),
    cpu("c5.large"),
    cpu("c5.xlarge"),
];

pub(crate) fn azure_vm_size(name: &str) -> Option<&'static Machine> {
    // ARM compares VM size names case-insensitively.
    AZURE_VM_SIZES
        .iter()
        .find(|m| m.name.eq_ignore_ascii_case(name))
}

pub(crate) fn gcp_machine_type(name: &str) -> Option<&'static Machine> {
    GCP_MACHINE_TYPES.iter().find(|m| m.name == name)
}

pub(crate) fn aws_instance_type(name: &str) -> Option<&'static Machine> {
    AWS_INSTANCE_TYPES.iter().find(|m| m.name == name)
}

pub(crate) fn gke_accelerator(name: &str) -> Option<&'static GkeAccelerator> {
    GKE_ACCELERATORS.iter().find(|a| a.name == name)
}

/// The accelerator built into a GCP machine type (a2/a3/a4/g2), if any.
pub(crate) fn gke_builtin_accelerator(machine: &str) -> Option<&'static GkeAccelerator> {
    GKE_ACCELERATORS
        .iter()
        .find(|a| a.machine_prefix != "n1-" && machine.starts_with(a.machine_prefix))
}

/// AKS `gpuInstanceProfile` (MIG1g..MIG7g) to the MIG profile it creates on `gpu`, with the
/// instances per GPU: AKS partitions every GPU uniformly with the smallest profile of that slice size.
pub(crate) fn aks_mig_profile(gpu: &Gpu, instance_profile: &str) -> Option<(&'static str, u32)> {
    let slices = match instance_profile {
        "MIG1g" => "1g.",
        "MIG2g" => "2g.",
        "MIG3g" => "3g.",
        "MIG4g" => "4g.",
        "MIG7g" => "7g.",
        _ => return None,
    };
    gpu.mig.iter().find(|(p, _)| p.starts_with(slices)).copied()
}

/// GKE `gpuPartitionSize` validity for an accelerator, with the instances per GPU.
pub(crate) fn gke_partition(acc: &GkeAccelerator, size: &str) -> Option<(&'static str, u32)> {
    if !acc.partitions.contains(&size) {
        return None;
    }
    acc.gpu.mig.iter().find(|(p, _)| *p == size).copied()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aks_profiles_map_to_smallest_profile_of_the_slice() {
        assert_eq!(aks_mig_profile(&A100_40_SXM, "MIG1g"), Some(("1g.5gb", 7)));
        assert_eq!(
            aks_mig_profile(&A100_80_PCIE, "MIG3g"),
            Some(("3g.40gb", 2))
        );
        assert_eq!(aks_mig_profile(&T4, "MIG1g"), None);
        assert_eq!(aks_mig_profile(&H200, "MIG5g"), None);
    }

    #[test]
    fn lookups_are_exact_except_azure() {
        assert!(azure_vm_size("standard_nc24ads_a100_v4").is_some());
        assert!(gcp_machine_type("A2-highgpu-1g").is_none());
        assert_eq!(
            aws_instance_type("p4d.24xlarge")
                .and_then(|m| m.gpu)
                .map(|g| g.1),
            Some(8)
        );
        let h100 = gke_accelerator("nvidia-h100-80gb").unwrap();
        assert_eq!(gke_partition(h100, "1g.20gb"), Some(("1g.20gb", 4)));
        assert_eq!(gke_partition(h100, "4g.40gb"), None, "no 4g profile on GKE");
        let a100 = gke_accelerator("nvidia-tesla-a100").unwrap();
        assert_eq!(gke_partition(a100, "1g.10gb"), None);
        assert_eq!(gke_partition(a100, "4g.20gb"), None);
        assert_eq!(gke_partition(a100, "1g.5gb"), Some(("1g.5gb", 7)));
        assert_eq!(
            gke_builtin_accelerator("a2-ultragpu-8g").map(|a| a.name),
            Some("nvidia-a100-80gb")
        );
        assert!(gke_builtin_accelerator("n1-standard-4").is_none());
        assert!(!gke_accelerator_in_zone(
            "nvidia-tesla-a100",
            "europe-west4-c"
        ));
        assert!(gke_accelerator_in_zone(
            "nvidia-tesla-a100",
            "europe-west4-a"
        ));
        assert!(gke_accelerator_in_zone("nvidia-l4", "us-central1-c"));
    }
}
