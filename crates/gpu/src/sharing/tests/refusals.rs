//! What `validate` refuses, and how it says so: each test checks the field an error points at and that the
//! detail names the fix, since that text is what a user reads in a failed plan.

use super::*;

#[test]
fn time_slicing_replicas_48_is_accepted_and_49_refused() {
    let ok = validate(&pool(Cloud::Eks, "g4dn.xlarge", ts(48))).unwrap();
    assert_eq!(ok.slices_per_node, 48);
    for bad in [49, 1, 0] {
        let err = one_error(&pool(Cloud::Eks, "g4dn.xlarge", ts(bad)));
        assert_eq!(err.summary, "Invalid replica count");
        assert_eq!(err.field, Field::TimeSlicingReplicas);
        assert!(
            err.detail.contains(&format!("is {bad}; use 2 to 48")),
            "{}",
            err.detail
        );
    }
}

#[test]
fn a_profile_of_another_gpu_is_refused_with_the_valid_ones() {
    let spec = pool(
        Cloud::Aks,
        "Standard_ND96amsr_A100_v4",
        mig("1g.5gb", MigStrategy::Mixed, None),
    );
    let err = one_error(&spec);
    assert_eq!(err.summary, "Invalid MIG profile");
    assert_eq!(err.field, Field::MigProfile);
    assert!(
        err.detail.contains("It is a profile of the A100-40GB"),
        "{}",
        err.detail
    );
    assert!(
        err.detail
            .contains("Valid values: 1g.10gb (MIG1g), 2g.20gb (MIG2g), 3g.40gb (MIG3g)"),
        "{}",
        err.detail
    );
    // And the same profile is fine on the 40 GB part.
    assert!(
        validate(&pool(
            Cloud::Aks,
            "Standard_ND96asr_v4",
            mig("1g.5gb", MigStrategy::Mixed, None)
        ))
        .is_ok()
    );
}

#[test]
fn mig_on_a_machine_without_mig_is_refused() {
    let err = one_error(&pool(
        Cloud::Eks,
        "g5.xlarge",
        mig("1g.5gb", MigStrategy::Mixed, None),
    ));
    assert_eq!(err.summary, "MIG not supported");
    assert!(
        err.detail
            .contains("g5.xlarge carries A10G GPUs, which have no MIG"),
        "{}",
        err.detail
    );
    assert!(err.detail.contains("p4d.24xlarge"), "{}", err.detail);
}

#[test]
fn mps_with_mig_mixed_is_refused_off_gke() {
    let sharing = Some(GkeSharing {
        strategy: GkeSharingStrategy::Mps,
        max_clients: 4,
    });
    let err = one_error(&pool(
        Cloud::Eks,
        "p4d.24xlarge",
        mig("1g.5gb", MigStrategy::Mixed, sharing),
    ));
    assert_eq!(err.summary, "Invalid GPU sharing");
    assert_eq!(err.field, Field::MigGkeSharing);
    assert!(
        err.detail
            .contains("MPS cannot be combined with MIG strategy mixed"),
        "{}",
        err.detail
    );
    let err = one_error(&pool(
        Cloud::Aks,
        "Standard_ND96asr_v4",
        mig("1g.5gb", MigStrategy::Single, sharing),
    ));
    assert!(
        err.detail.contains("MPS does not run on MIG devices"),
        "{}",
        err.detail
    );
    // The config function refuses the same.
    assert!(device_plugin_config(&mig("1g.5gb", MigStrategy::Mixed, sharing)).is_err());
    // GKE refuses MPS on partitions too; time-sharing of partitions it supports.
    let err = one_error(&pool(
        Cloud::Gke,
        "a2-highgpu-1g",
        mig("1g.5gb", MigStrategy::Mixed, sharing),
    ));
    assert_eq!(err.field, Field::MigGkeSharing);
    assert!(err.detail.contains("time-sharing"), "{}", err.detail);
    let shared = GkeSharing {
        strategy: GkeSharingStrategy::TimeSharing,
        max_clients: 4,
    };
    let d = validate(&pool(
        Cloud::Gke,
        "a2-highgpu-1g",
        mig("1g.5gb", MigStrategy::Mixed, Some(shared)),
    ))
    .unwrap();
    assert_eq!(d.slices_per_gpu, 28);
}

static V100: GpuModel = GpuModel {
    id: "V100",
    marketing_name: "test part below compute capability 7.5",
    memory_mib: 16384,
    memory_source: MemorySource::Nominal,
    compute_capability: (7, 0),
    compute_slices: 0,
    gke_accelerator: Some("nvidia-tesla-v100"),
    gpu_product: "Tesla-V100-SXM2-16GB",
    mig_profiles: &[],
};

#[test]
fn mps_clients_are_capped_at_16_below_compute_capability_7_5() {
    // The T4 is 7.5 itself, so it gets the full 48.
    let t4 = validate(&pool(Cloud::Eks, "g4dn.xlarge", SharingMode::mps(17))).unwrap();
    assert_eq!(
        (t4.slices_per_gpu, t4.memory_per_slice_mib),
        (17, 15360 / 17)
    );
    let mut old = pool(Cloud::Eks, "g4dn.xlarge", SharingMode::mps(17));
    old.hardware.gpu = &V100;
    let err = one_error(&old);
    assert_eq!(err.field, Field::MpsReplicas);
    assert!(err.detail.contains("at most 16 clients"), "{}", err.detail);
    old.sharing = SharingMode::mps(16);
    assert!(validate(&old).is_ok());
    assert!(
        one_error(&pool(Cloud::Eks, "g4dn.xlarge", SharingMode::mps(49)))
            .detail
            .contains("2 to 48")
    );
}

#[test]
fn each_cloud_accepts_only_the_profiles_it_can_create() {
    let err = one_error(&pool(
        Cloud::Aks,
        "Standard_ND96amsr_A100_v4",
        mig("1g.20gb", MigStrategy::Mixed, None),
    ));
    assert!(err.detail.contains("AKS can create only"), "{}", err.detail);
    let err = one_error(&pool(
        Cloud::Aks,
        "Standard_ND96asr_v4",
        mig("1g.5gb+me", MigStrategy::Mixed, None),
    ));
    assert!(err.detail.contains("never a +me profile"), "{}", err.detail);
    let err = one_error(&pool(
        Cloud::Gke,
        "a2-highgpu-1g",
        mig("1g.10gb", MigStrategy::Mixed, None),
    ));
    assert!(
        err.detail
            .contains("Valid values on GKE for the A100-40GB: 1g.5gb, 2g.10gb, 3g.20gb, 7g.40gb"),
        "{}",
        err.detail
    );
    assert!(
        one_error(&pool(
            Cloud::Gke,
            "a2-highgpu-1g",
            mig("1g.5gb+me", MigStrategy::Mixed, None)
        ))
        .detail
        .contains("no +me profile")
    );
    // EKS partitions through the MIG manager, which can create any profile.
    let d = validate(&pool(
        Cloud::Eks,
        "p4de.24xlarge",
        mig("1g.20gb", MigStrategy::Mixed, None),
    ))
    .unwrap();
    assert_eq!(
        (d.slices_per_node, d.resource_name.as_str()),
        (32, "nvidia.com/mig-1g.20gb")
    );
    let d = validate(&pool(
        Cloud::Eks,
        "p4d.24xlarge",
        mig("1g.5gb+me", MigStrategy::Mixed, None),
    ))
    .unwrap();
    assert_eq!(d.resource_name, "nvidia.com/mig-1g.5gb.me");
}

#[test]
fn all_problems_are_reported_together() {
    let mut spec = pool(Cloud::Aks, "Standard_NC4as_T4_v3", ts(100));
    spec.pool_name = "Bad-Name".into();
    spec.taints = Some(vec![Taint {
        key: Cow::Borrowed(""),
        value: Cow::Borrowed("x"),
        effect: TaintEffect::NoSchedule,
    }]);
    let errors = validate(&spec).unwrap_err();
    let fields: Vec<Field> = errors.iter().map(|e| e.field).collect();
    assert_eq!(
        fields,
        [Field::PoolName, Field::Taints, Field::TimeSlicingReplicas],
        "{errors:?}"
    );
}

#[test]
fn a_bad_name_and_a_label_conflict_are_reported_together() {
    let mut spec = pool(Cloud::Eks, "g5.xlarge", ts(4));
    spec.pool_name = "-bad".into();
    spec.labels
        .insert(DEVICE_PLUGIN_CONFIG_LABEL.into(), "other".into());
    let fields: Vec<Field> = validate(&spec)
        .unwrap_err()
        .iter()
        .map(|e| e.field)
        .collect();
    assert_eq!(fields, [Field::PoolName, Field::Labels]);
}

#[test]
fn user_labels_must_not_contradict_the_provider() {
    let mut spec = pool(Cloud::Eks, "g5.xlarge", ts(4));
    spec.labels
        .insert(DEVICE_PLUGIN_CONFIG_LABEL.into(), "time-sliced-8".into());
    spec.labels.insert("team".into(), "ml".into());
    let err = one_error(&spec);
    assert_eq!(
        (err.field, err.summary),
        (Field::Labels, "Conflicting node label")
    );
    assert!(err.detail.contains("fracgpu-gpupool"), "{}", err.detail);
    spec.labels
        .insert(DEVICE_PLUGIN_CONFIG_LABEL.into(), "fracgpu-gpupool".into());
    assert!(validate(&spec).is_ok());
}

#[test]
fn gke_refuses_rename_and_gpus_it_does_not_offer() {
    let renamed = SharingMode::TimeSlicing {
        replicas: 4,
        rename_by_default: true,
        fail_requests_greater_than_one: false,
    };
    let err = one_error(&pool(Cloud::Gke, "g2-standard-4", renamed));
    assert_eq!(err.field, Field::TimeSlicingRenameByDefault);
    let mut spec = pool(Cloud::Gke, "g2-standard-4", ts(4));
    spec.hardware = resolve_hardware(Cloud::Gke, "g2-standard-4", Some("A10G"), None).unwrap();
    assert!(one_error(&spec).detail.contains("GKE offers no A10G"));
}

#[test]
fn time_sharing_on_partitions_is_gke_only() {
    let sharing = Some(GkeSharing {
        strategy: GkeSharingStrategy::TimeSharing,
        max_clients: 4,
    });
    let err = one_error(&pool(
        Cloud::Aks,
        "Standard_ND96asr_v4",
        mig("1g.5gb", MigStrategy::Mixed, sharing),
    ));
    assert!(err.detail.contains("GKE's feature"), "{}", err.detail);
}

/// The Kubernetes API server refuses a node whose taints repeat a key and effect; on GKE, GKE's own
/// GPU taint is one of the node's taints whatever the pool says.
#[test]
fn taints_that_repeat_a_key_and_effect() {
    let mut spec = pool(Cloud::Gke, "g2-standard-4", ts(4));
    spec.taints = Some(vec![DEFAULT_GPU_TAINT]);
    let e = one_error(&spec);
    assert_eq!((e.field, e.summary), (Field::Taints, "Conflicting taint"));
    assert!(
        e.detail
            .contains("GKE puts nvidia.com/gpu=present:NoSchedule on every GPU node itself")
            && e.detail.contains("unique by key and effect"),
        "{}",
        e.detail
    );
    // GKE's own taint, listed exactly, is fine.
    spec.taints = Some(vec![GKE_GPU_TAINT]);
    assert!(validate(&spec).is_ok());
    // On every cloud: two of the pool's own taints with one key and effect.
    let mut spec = pool(Cloud::Eks, "g5.xlarge", ts(4));
    spec.taints = Some(vec![
        Taint::parse("team=a:NoSchedule").unwrap(),
        Taint::parse("team=b:NoSchedule").unwrap(),
    ]);
    let e = one_error(&spec);
    assert!(
        e.detail
            .contains("\"team=a:NoSchedule\" and \"team=b:NoSchedule\""),
        "{}",
        e.detail
    );
    // Our default beside GKE's spelling repeats the key and effect, on any cloud.
    spec.taints = Some(vec![DEFAULT_GPU_TAINT, GKE_GPU_TAINT]);
    assert_eq!(one_error(&spec).summary, "Conflicting taint");
}

/// MPS that lets a container take several clients: NVIDIA's device plugin (v0.20.0) on AKS and
/// EKS; GKE's own plugin and Bottlerocket's host service have no such setting.
#[test]
fn relaxed_mps_is_the_nvidia_plugins_alone() {
    let relaxed = SharingMode::Mps {
        replicas: 4,
        fail_requests_greater_than_one: false,
    };
    let eks = validate(&pool(Cloud::Eks, "g4dn.xlarge", relaxed.clone())).unwrap();
    let named = eks.device_plugin_config.unwrap();
    assert_eq!(named.name, "fracgpu-gpupool");
    assert_eq!(
        device_plugin_config(&relaxed).unwrap().name,
        "mps-4-relaxed"
    );
    let text = named.config.render().unwrap();
    assert!(
        text.contains(
            "  mps:\n    renameByDefault: false\n    failRequestsGreaterThanOne: false\n"
        ),
        "{text}"
    );
    let gke = one_error(&pool(Cloud::Gke, "g2-standard-4", relaxed.clone()));
    assert_eq!(gke.field, Field::MpsFailRequestsGreaterThanOne);
    assert!(gke.detail.contains("Remove it on GKE"), "{}", gke.detail);
    assert!(validate(&pool(Cloud::Gke, "g2-standard-4", SharingMode::mps(4))).is_ok());
    let err = check_eks_ami_type(&relaxed, "BOTTLEROCKET_x86_64_NVIDIA").unwrap_err();
    assert_eq!(err.field, Field::MpsFailRequestsGreaterThanOne);
    assert!(err.detail.contains("mps.replicas"), "{}", err.detail);
    assert_eq!(crate::bottlerocket::check_sharing(&relaxed), Err(err));
    assert!(check_eks_ami_type(&relaxed, "AL2023_x86_64_NVIDIA").is_ok());
}
