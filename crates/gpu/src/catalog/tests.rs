//! Tests of the catalog through its lookups, and of the data itself: it must be consistent (no profile
//! larger than its GPU, no duplicate machine type), since a wrong table entry passes every other check.

use super::machines::MACHINE_TYPES;
use super::models::{A100_40GB, A100_80GB, GPUS, H100_80GB, H100_NVL, H200, T4};
use super::*;
use crate::error::Field;

/// MIG profile name -> the AKS gpuInstanceProfile that creates it on this GPU, if AKS can express it: the
/// inverse of `mig_profile_for_aks`. Validation reads it off the profile (`MigProfile::aks`), so only this
/// test, which checks that the mapping runs both ways, needs it by name.
fn aks_profile_for(gpu: &GpuModel, profile: &str) -> Option<AksGpuInstanceProfile> {
    gpu.mig_profile(profile).and_then(|p| p.aks)
}

#[test]
fn cloud_parses_its_three_names_and_rejects_others() {
    assert_eq!(Cloud::parse("AKS").unwrap(), Cloud::Aks);
    assert_eq!(Cloud::parse("gke").unwrap(), Cloud::Gke);
    assert_eq!(Cloud::parse(" eks ").unwrap(), Cloud::Eks);
    let err = Cloud::parse("azure").unwrap_err();
    assert_eq!(err.summary, "Unknown cloud");
    assert!(err.detail.contains("aks, gke, eks"), "{}", err.detail);
}

#[test]
fn machine_type_lookup_finds_expanded_family_members() {
    let g5 = machine_type(Cloud::Eks, "g5.12xlarge").unwrap();
    assert_eq!((g5.gpu.id, g5.gpu_count), ("A10G", 4));
    let g5 = machine_type(Cloud::Eks, "g5.48xlarge").unwrap();
    assert_eq!(g5.gpu_count, 8);
    let g2 = machine_type(Cloud::Gke, "g2-standard-24").unwrap();
    assert_eq!((g2.gpu.id, g2.gpu_count), ("L4", 2));
    let nc = machine_type(Cloud::Aks, "standard_nc64as_t4_v3").unwrap();
    assert_eq!(
        (nc.name, nc.gpu.id, nc.gpu_count),
        ("Standard_NC64as_T4_v3", "T4", 4)
    );
    let nc = machine_type(Cloud::Aks, "Standard_NC8as_T4_v3").unwrap();
    assert_eq!(nc.gpu_count, 1);
    assert_eq!(machine_type(Cloud::Eks, "g4dn.metal").unwrap().gpu_count, 8);
}

#[test]
fn unknown_machine_type_suggests_close_names_of_that_cloud() {
    let err = machine_type(Cloud::Eks, "g5.xlarg").unwrap_err();
    assert_eq!(err.summary, "Unknown machine type");
    assert_eq!(err.field, Field::MachineType);
    assert!(
        err.detail.contains("Closest known names: g5.xlarge, "),
        "{}",
        err.detail
    );
    let err = machine_type(Cloud::Eks, "p5.24xlarge").unwrap_err();
    assert!(
        err.detail
            .contains("g5.24xlarge, p5.48xlarge, p4d.24xlarge"),
        "{}",
        err.detail
    );
    let err = machine_type(Cloud::Aks, "Standard_NC24ads_A100").unwrap_err();
    assert!(
        err.detail
            .contains("Closest known names: Standard_NC24ads_A100_v4"),
        "{}",
        err.detail
    );
    // Suggestions never cross clouds, but the detail says where the name belongs.
    let err = machine_type(Cloud::Gke, "p4d.24xlarge").unwrap_err();
    assert!(!err.detail.contains("p4d.24xlarge,"), "{}", err.detail);
    assert!(
        err.detail.contains("It is one of EKS's machine types"),
        "{}",
        err.detail
    );
}

#[test]
fn suggestions_are_at_most_five() {
    let err = machine_type(Cloud::Eks, "zzz").unwrap_err();
    let names = err
        .detail
        .split("Closest known names: ")
        .nth(1)
        .unwrap()
        .split('.')
        .next()
        .unwrap();
    assert!(names.split(", ").count() <= 5, "{}", err.detail);
}

#[test]
fn gpu_model_lookup_accepts_ids_and_gke_names() {
    assert_eq!(gpu_model("a100-40gb").unwrap().id, "A100-40GB");
    assert_eq!(gpu_model("nvidia-tesla-a100").unwrap().id, "A100-40GB");
    assert_eq!(gpu_model("NVIDIA-A100-80GB").unwrap().id, "A100-80GB");
    assert_eq!(gpu_model("nvidia-h200-141gb").unwrap().id, "H200-141GB");
    let err = gpu_model("V100").unwrap_err();
    assert_eq!(err.summary, "Unknown GPU model");
    assert!(
        err.detail.contains("Valid values: T4, A10G"),
        "{}",
        err.detail
    );
}

#[test]
fn aks_mapping_goes_both_ways_per_gpu() {
    assert_eq!(
        mig_profile_for_aks(&A100_40GB, AksGpuInstanceProfile::Mig1g)
            .unwrap()
            .name,
        "1g.5gb"
    );
    assert_eq!(
        mig_profile_for_aks(&A100_80GB, AksGpuInstanceProfile::Mig1g)
            .unwrap()
            .name,
        "1g.10gb"
    );
    assert_eq!(
        mig_profile_for_aks(&H100_NVL, AksGpuInstanceProfile::Mig7g)
            .unwrap()
            .name,
        "7g.94gb"
    );
    assert_eq!(
        aks_profile_for(&A100_40GB, "4g.20gb"),
        Some(AksGpuInstanceProfile::Mig4g)
    );
    assert_eq!(
        aks_profile_for(&A100_80GB, "3g.40gb"),
        Some(AksGpuInstanceProfile::Mig3g)
    );
    // What AKS cannot express: the 4-instance 1g profiles and +me.
    assert_eq!(aks_profile_for(&A100_80GB, "1g.20gb"), None);
    assert_eq!(aks_profile_for(&A100_40GB, "1g.10gb"), None);
    assert_eq!(aks_profile_for(&A100_40GB, "1g.5gb+me"), None);
    // A profile of another GPU has no mapping on this one.
    assert_eq!(aks_profile_for(&A100_80GB, "1g.5gb"), None);
    for gpu in [&A100_40GB, &A100_80GB, &H100_80GB, &H100_NVL, &H200] {
        for aks in AksGpuInstanceProfile::ALL {
            let prof = mig_profile_for_aks(gpu, aks).unwrap();
            assert_eq!(aks_profile_for(gpu, prof.name), Some(aks));
        }
    }
    assert_eq!(
        AksGpuInstanceProfile::parse("mig3g"),
        Some(AksGpuInstanceProfile::Mig3g)
    );
    assert_eq!(AksGpuInstanceProfile::parse("MIG5g"), None);
}

// The table of partition sizes in GKE's multi-instance GPU guide
// (https://cloud.google.com/kubernetes-engine/docs/how-to/gpus-multi): no 4g size anywhere.
#[test]
fn gke_partition_sizes_match_gkes_list() {
    assert_eq!(
        A100_40GB.gke_partition_sizes(),
        ["1g.5gb", "2g.10gb", "3g.20gb", "7g.40gb"]
    );
    assert_eq!(
        A100_80GB.gke_partition_sizes(),
        ["1g.10gb", "2g.20gb", "3g.40gb", "7g.80gb"]
    );
    assert_eq!(
        H100_80GB.gke_partition_sizes(),
        ["1g.10gb", "1g.20gb", "2g.20gb", "3g.40gb", "7g.80gb"]
    );
    assert_eq!(
        H200.gke_partition_sizes(),
        ["1g.18gb", "1g.35gb", "2g.35gb", "3g.71gb", "7g.141gb"]
    );
    assert!(H100_NVL.gke_partition_sizes().is_empty());
    assert!(T4.gke_partition_sizes().is_empty());
}

#[test]
fn catalog_is_internally_consistent() {
    for g in GPUS {
        assert_eq!(g.mig_capable(), g.compute_slices > 0, "{}", g.id);
        for prof in g.mig_profiles {
            assert!(
                prof.compute_slices <= g.compute_slices,
                "{} {}",
                g.id,
                prof.name
            );
            assert!(
                prof.memory_mib <= g.memory_mib + 1024,
                "{} {}",
                g.id,
                prof.name
            );
            assert!(
                prof.max_instances * u32::from(prof.compute_slices) <= u32::from(g.compute_slices),
                "{}",
                prof.name
            );
            assert!(!(prof.has_media_extensions() && (prof.gke || prof.aks.is_some())));
        }
    }
    for (i, a) in MACHINE_TYPES.iter().enumerate() {
        assert!(a.gpu_count >= 1 && a.gpu_count <= MAX_GPUS_PER_NODE);
        for b in &MACHINE_TYPES[i + 1..] {
            assert!(!a.name.eq_ignore_ascii_case(b.name), "duplicate {}", a.name);
        }
    }
}

#[test]
fn overrides_and_n1() {
    let hw = resolve_hardware(
        Cloud::Gke,
        "n1-standard-8",
        Some("nvidia-tesla-t4"),
        Some(2),
    )
    .unwrap();
    assert_eq!((hw.gpu.id, hw.gpus_per_node), ("T4", 2));
    let errs = resolve_hardware(Cloud::Gke, "n1-standard-8", None, None).unwrap_err();
    assert!(errs[0].detail.contains("nvidia-tesla-t4"), "{:?}", errs);
    let errs = resolve_hardware(Cloud::Gke, "n1-standard-8", Some("L4"), Some(3)).unwrap_err();
    assert_eq!(errs[0].field, Field::GpuModel);
    // An unknown size passes with both overrides, fails with suggestions without them.
    assert!(resolve_hardware(Cloud::Eks, "g7.xlarge", Some("L4"), Some(1)).is_ok());
    let errs = resolve_hardware(Cloud::Eks, "g7.xlarge", Some("L4"), None).unwrap_err();
    assert_eq!(errs[0].summary, "Unknown machine type");
    // A count override keeps the catalog's GPU; product label follows the machine type.
    let hw = resolve_hardware(Cloud::Aks, "Standard_NC24ads_A100_v4", None, Some(1)).unwrap();
    assert_eq!(hw.gpu_product, "NVIDIA-A100-80GB-PCIe");
    let errs = resolve_hardware(Cloud::Eks, "g5.xlarge", Some("X1"), Some(0)).unwrap_err();
    assert_eq!(errs.len(), 2, "{:?}", errs);
}

#[test]
fn markdown_lists_every_machine_type_and_profile() {
    let md = catalog_markdown();
    for mt in MACHINE_TYPES {
        assert!(
            md.contains(&format!("| {} | {} |", mt.cloud, mt.name)),
            "{}",
            mt.name
        );
    }
    assert!(md.contains("| A100-40GB | 1g.5gb | 7 | 5120 | 1/7 | MIG1g | yes |"));
    assert!(md.contains("| A30-24GB | 2g.12gb | 2 | 12288 | 2/4 | - | no |"));
    assert!(md.contains("| T4 | NVIDIA T4 | 15360 | nvidia-smi | 7.5 | no | nvidia-tesla-t4 |"));
}
