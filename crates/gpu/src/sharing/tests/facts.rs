//! What `validate` derives for valid pools on each cloud: resource names, slice counts and memory, node
//! selectors and labels, taints and tolerations. These are the values the cloud layer writes and the
//! workload data source reports, so each is pinned here.

use super::*;

#[test]
fn gke_time_sharing_facts() {
    let d = validate(&pool(Cloud::Gke, "g2-standard-24", ts(10))).unwrap();
    assert_eq!(d.resource_name, "nvidia.com/gpu");
    assert_eq!(
        (d.slices_per_gpu, d.slices_per_node, d.memory_per_slice_mib),
        (10, 20, 2303)
    );
    assert_eq!(d.isolation, Isolation::None);
    let selector: Vec<(&str, &str)> = d
        .node_selector
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    assert_eq!(
        selector,
        [
            ("cloud.google.com/gke-gpu-sharing-strategy", "time-sharing"),
            ("cloud.google.com/gke-max-shared-clients-per-gpu", "10"),
            ("cloud.google.com/gke-nodepool", "gpupool"),
        ]
    );
    assert!(d.node_labels.is_empty());
    assert_eq!(d.device_plugin_config, None);
    assert_eq!(
        d.gke_accelerator,
        Some(GkeAccelerator {
            accelerator_type: "nvidia-l4",
            accelerator_count: 2,
            gpu_partition_size: None,
            sharing: Some(GkeSharing {
                strategy: GkeSharingStrategy::TimeSharing,
                max_clients: 10
            }),
        })
    );
}

#[test]
fn gke_mps_and_partitions_facts() {
    let d = validate(&pool(Cloud::Gke, "g2-standard-4", SharingMode::mps(4))).unwrap();
    assert_eq!(
        d.node_selector["cloud.google.com/gke-gpu-sharing-strategy"],
        "mps"
    );
    let shared = Some(GkeSharing {
        strategy: GkeSharingStrategy::TimeSharing,
        max_clients: 2,
    });
    let d = validate(&pool(
        Cloud::Gke,
        "a2-highgpu-2g",
        mig("1G.5GB", MigStrategy::Mixed, shared),
    ))
    .unwrap();
    assert_eq!(d.resource_name, "nvidia.com/gpu");
    assert_eq!(
        (d.slices_per_gpu, d.slices_per_node, d.memory_per_slice_mib),
        (14, 28, 2560)
    );
    assert_eq!(
        d.node_selector["cloud.google.com/gke-gpu-partition-size"],
        "1g.5gb"
    );
    assert_eq!(
        d.node_selector["cloud.google.com/gke-max-shared-clients-per-gpu"],
        "2"
    );
    assert_eq!(
        d.gke_accelerator.unwrap().gpu_partition_size,
        Some("1g.5gb")
    );
    let bad = Some(GkeSharing {
        strategy: GkeSharingStrategy::TimeSharing,
        max_clients: 49,
    });
    let err = one_error(&pool(
        Cloud::Gke,
        "a2-highgpu-2g",
        mig("1g.5gb", MigStrategy::Mixed, bad),
    ));
    assert_eq!(err.field, Field::MigGkeMaxClients);
}

#[test]
fn aks_and_eks_facts() {
    let renamed = SharingMode::TimeSlicing {
        replicas: 10,
        rename_by_default: true,
        fail_requests_greater_than_one: false,
    };
    let d = validate(&pool(Cloud::Aks, "Standard_NC64as_T4_v3", renamed)).unwrap();
    assert_eq!(d.resource_name, "nvidia.com/gpu.shared");
    assert_eq!((d.slices_per_node, d.memory_per_slice_mib), (40, 1536));
    assert_eq!(d.node_selector["agentpool"], "gpupool");
    // The pool's own config, named after the pool; the settings in a label of their own.
    assert_eq!(
        d.node_selector[DEVICE_PLUGIN_CONFIG_LABEL],
        "fracgpu-gpupool"
    );
    assert_eq!(d.node_labels[DEVICE_PLUGIN_CONFIG_LABEL], "fracgpu-gpupool");
    assert_eq!(d.node_labels[SHARING_LABEL], "time-sliced-10-renamed");
    assert_eq!(
        d.device_plugin_config.as_ref().map(|c| c.name.as_str()),
        Some("fracgpu-gpupool")
    );
    assert_eq!(d.aks_gpu_instance_profile, None);
    assert_eq!(d.gke_accelerator, None);

    let d = validate(&pool(
        Cloud::Eks,
        "p4d.24xlarge",
        mig("1g.5gb", MigStrategy::Mixed, None),
    ))
    .unwrap();
    assert_eq!(d.resource_name, "nvidia.com/mig-1g.5gb");
    assert_eq!(
        (d.slices_per_gpu, d.slices_per_node, d.memory_per_slice_mib),
        (7, 56, 5120)
    );
    assert_eq!(d.node_selector["eks.amazonaws.com/nodegroup"], "gpupool");
    assert_eq!(d.node_labels[MIG_CONFIG_LABEL], "all-1g.5gb");
    assert_eq!(d.node_labels[DEVICE_PLUGIN_CONFIG_LABEL], "mig-mixed");
    assert_eq!(d.isolation, Isolation::Hardware);

    let d = validate(&pool(
        Cloud::Aks,
        "Standard_ND96asr_v4",
        mig("3g.20gb", MigStrategy::Single, None),
    ))
    .unwrap();
    assert_eq!(d.resource_name, "nvidia.com/gpu");
    assert_eq!(d.slices_per_node, 16);
    assert_eq!(
        d.aks_gpu_instance_profile,
        Some(AksGpuInstanceProfile::Mig3g)
    );
    // AKS partitions the GPUs itself; the label keeps the GPU operator's MIG manager from
    // turning MIG off on nodes that name no MIG config.
    assert_eq!(d.node_labels[MIG_CONFIG_LABEL], "all-3g.20gb");
    assert!(!d.node_selector.contains_key(MIG_CONFIG_LABEL));
    assert_eq!(
        d.device_plugin_config.unwrap().config.render().unwrap(),
        "version: v1\nflags:\n  migStrategy: single\n"
    );

    let d = validate(&pool(Cloud::Eks, "g5.xlarge", SharingMode::None)).unwrap();
    assert_eq!((d.slices_per_node, d.memory_per_slice_mib), (1, 23028));
    assert_eq!(d.node_labels[DEVICE_PLUGIN_CONFIG_LABEL], "all");
}

#[test]
fn taints_default_and_tolerations() {
    let d = validate(&pool(Cloud::Eks, "g5.xlarge", ts(4))).unwrap();
    assert_eq!(d.taints, [DEFAULT_GPU_TAINT]);
    assert_eq!(
        d.tolerations,
        [Toleration {
            key: "nvidia.com/gpu".into(),
            operator: TolerationOperator::Exists,
            value: String::new(),
            effect: TaintEffect::NoSchedule,
        }]
    );
    let mut spec = pool(Cloud::Eks, "g5.xlarge", ts(4));
    spec.taints = Some(vec![]);
    assert!(validate(&spec).unwrap().tolerations.is_empty());
    spec.taints = Some(vec![Taint::parse("dedicated:NO_EXECUTE").unwrap()]);
    let t = &validate(&spec).unwrap().tolerations[0];
    assert_eq!(
        (t.operator, t.effect),
        (TolerationOperator::Exists, TaintEffect::NoExecute)
    );
    assert_eq!(
        Taint::parse("a=b:NoSchedule").unwrap().to_string(),
        "a=b:NoSchedule"
    );
    assert_eq!(Taint::parse("a=b").unwrap_err().summary, "Invalid taint");
}

/// GKE taints its GPU nodes nvidia.com/gpu=present:NoSchedule itself: that is the default there, and
/// pods tolerate it even when the pool lists no taint.
#[test]
fn gke_default_taint_is_gkes_own() {
    let gpu_toleration = Toleration {
        key: "nvidia.com/gpu".into(),
        operator: TolerationOperator::Exists,
        value: String::new(),
        effect: TaintEffect::NoSchedule,
    };
    let d = validate(&pool(Cloud::Gke, "g2-standard-4", ts(4))).unwrap();
    assert_eq!(d.taints, [GKE_GPU_TAINT]);
    assert_eq!(d.tolerations, std::slice::from_ref(&gpu_toleration));
    let mut spec = pool(Cloud::Gke, "g2-standard-4", ts(4));
    spec.taints = Some(vec![]);
    let d = validate(&spec).unwrap();
    assert!(d.taints.is_empty());
    assert_eq!(d.tolerations, std::slice::from_ref(&gpu_toleration));
    // Another effect on the key is another taint.
    spec.taints = Some(vec![Taint::parse("nvidia.com/gpu=x:NoExecute").unwrap()]);
    assert_eq!(validate(&spec).unwrap().tolerations.len(), 2);
}

/// What an autoscaler must be told a node offers: the shared resource per node, and no whole GPUs
/// where sharing renames the resource.
#[test]
fn node_resources_count_slices_per_node() {
    let res = |d: &Derived| {
        d.node_resources()
            .into_iter()
            .collect::<Vec<(String, u32)>>()
    };
    // Four T4s, ten replicas each, under the plain resource name.
    let d = validate(&pool(Cloud::Aks, "Standard_NC64as_T4_v3", ts(10))).unwrap();
    assert_eq!(res(&d), [("nvidia.com/gpu".to_string(), 40)]);
    let renamed = SharingMode::TimeSlicing {
        replicas: 10,
        rename_by_default: true,
        fail_requests_greater_than_one: false,
    };
    let d = validate(&pool(Cloud::Aks, "Standard_NC64as_T4_v3", renamed)).unwrap();
    assert_eq!(
        res(&d),
        [
            ("nvidia.com/gpu".to_string(), 0),
            ("nvidia.com/gpu.shared".to_string(), 40)
        ]
    );
    // MIG mixed on eight A100s: seven 1g.5gb instances each, no whole GPU left.
    let d = validate(&pool(
        Cloud::Eks,
        "p4d.24xlarge",
        mig("1g.5gb", MigStrategy::Mixed, None),
    ))
    .unwrap();
    assert_eq!(
        res(&d),
        [
            ("nvidia.com/gpu".to_string(), 0),
            ("nvidia.com/mig-1g.5gb".to_string(), 56)
        ]
    );
    let d = validate(&pool(Cloud::Eks, "g5.xlarge", SharingMode::None)).unwrap();
    assert_eq!(res(&d), [("nvidia.com/gpu".to_string(), 1)]);
}

#[test]
fn a_pools_own_config_keeps_its_name_whatever_the_settings() {
    let ts = |replicas| SharingMode::TimeSlicing {
        replicas,
        rename_by_default: false,
        fail_requests_greater_than_one: false,
    };
    let ten = validate(&pool(Cloud::Eks, "g5.xlarge", ts(10))).unwrap();
    let eight = validate(&pool(Cloud::Eks, "g5.xlarge", ts(8))).unwrap();
    let mps = validate(&pool(Cloud::Eks, "g5.xlarge", SharingMode::mps(4))).unwrap();
    for d in [&ten, &eight, &mps] {
        assert_eq!(d.node_labels[DEVICE_PLUGIN_CONFIG_LABEL], "fracgpu-gpupool");
    }
    assert_eq!(
        [&ten, &eight, &mps].map(|d| d.node_labels[SHARING_LABEL].clone()),
        ["time-sliced-10", "time-sliced-8", "mps-4"]
    );
    // Configs every pool of a mode shares keep theirs, and no sharing label.
    let mig = validate(&pool(
        Cloud::Eks,
        "p4d.24xlarge",
        mig("1g.5gb", MigStrategy::Mixed, None),
    ))
    .unwrap();
    assert_eq!(mig.node_labels[DEVICE_PLUGIN_CONFIG_LABEL], "mig-mixed");
    assert!(!mig.node_labels.contains_key(SHARING_LABEL));
    // Long names stay label values.
    let long = crate::pool_config_name(&"n".repeat(63));
    assert!(
        long.len() <= 63 && long.starts_with("fracgpu-nnn"),
        "{long}"
    );
    assert_ne!(long, crate::pool_config_name(&"n".repeat(62)));
    let ends = crate::pool_config_name("ends-");
    assert!(
        ends.starts_with("fracgpu-ends-") && ends.len() == 21 && !ends.ends_with('-'),
        "{ends}"
    );
}

#[test]
fn a_pool_named_by_its_settings_keeps_that_name_while_they_hold() {
    let ts = |replicas| SharingMode::TimeSlicing {
        replicas,
        rename_by_default: false,
        fail_requests_greater_than_one: false,
    };
    let mut d = validate(&pool(Cloud::Aks, "Standard_NC4as_T4_v3", ts(10))).unwrap();
    assert!(d.keep_config_name("time-sliced-10"));
    assert_eq!(d.node_labels[DEVICE_PLUGIN_CONFIG_LABEL], "time-sliced-10");
    assert_eq!(
        d.node_selector[DEVICE_PLUGIN_CONFIG_LABEL],
        "time-sliced-10"
    );
    assert!(!d.node_labels.contains_key(SHARING_LABEL));
    assert_eq!(d.device_plugin_config.unwrap().name, "time-sliced-10");
    // Other settings: the pool's own name.
    let mut d = validate(&pool(Cloud::Aks, "Standard_NC4as_T4_v3", ts(8))).unwrap();
    assert!(!d.keep_config_name("time-sliced-10"));
    assert_eq!(d.node_labels[DEVICE_PLUGIN_CONFIG_LABEL], "fracgpu-gpupool");
}
