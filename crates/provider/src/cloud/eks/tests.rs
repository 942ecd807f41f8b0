//! Unit tests of the EKS mapping and configuration; the client itself is tested against the
//! sandbox and moto in tests/clients/cloud_eks.rs.

use std::collections::BTreeMap;

use super::mapping::pool_id;
use super::*;
use crate::cloud::pool::{EksPoolFields, PoolTaint, Scaling, TargetFields};

fn spec() -> PoolSpec {
    PoolSpec {
        location: Location::Eks {
            region: "us-east-1".into(),
            cluster: "c".into(),
        },
        name: "ng".into(),
        machine_type: "g4dn.xlarge".into(),
        scaling: Scaling::Auto { min: 2, max: 2 },
        spot: false,
        disk_size_gb: Some(20),
        labels: BTreeMap::from([
            ("eks.amazonaws.com/x".into(), "y".into()),
            ("team".into(), "ml".into()),
        ]),
        taints: vec![
            PoolTaint {
                key: "z".into(),
                value: String::new(),
                effect: "NO_EXECUTE".into(),
            },
            PoolTaint {
                key: "a".into(),
                value: "v".into(),
                effect: "NoSchedule".into(),
            },
        ],
        gpu_count: 1,
        node_template: BTreeMap::new(),
        target: TargetFields::Eks(EksPoolFields {
            node_role_arn: "arn:aws:iam::1:role/r".into(),
            subnet_ids: vec!["subnet-b".into(), "subnet-a".into()],
            ami_type: "AL2023_x86_64_NVIDIA".into(),
            bottlerocket_settings: None,
        }),
    }
}

#[test]
fn canonical_folds_what_eks_cannot_hold() {
    let c = canonical_spec(&spec());
    assert_eq!(c.scaling, Scaling::Fixed { nodes: 2 });
    assert_eq!(c.disk_size_gb, None);
    assert_eq!(c.labels.keys().collect::<Vec<_>>(), vec!["team"]);
    assert_eq!(c.taints[0].key, "a");
    assert_eq!(c.taints[1].effect, "NoExecute");
    assert_eq!(c.gpu_count, 0);
    assert_eq!(c.eks().subnet_ids, ["subnet-a", "subnet-b"]);
    assert_eq!(canonical_spec(&c), c);
}

#[test]
fn a_fixed_zero_is_min_zero_max_one_and_reads_back_fixed() {
    assert_eq!(
        mapping::scaling_config(Scaling::Fixed { nodes: 0 }),
        (0, 1, 0)
    );
    assert_eq!(
        mapping::scaling_config(Scaling::Fixed { nodes: 3 }),
        (3, 3, 3)
    );
    assert_eq!(
        mapping::scaling_config(Scaling::Auto { min: 0, max: 4 }),
        (0, 4, 0)
    );
    for s in [
        Scaling::Fixed { nodes: 0 },
        Scaling::Fixed { nodes: 2 },
        Scaling::Auto { min: 0, max: 4 },
    ] {
        assert_eq!(canonical_scaling(s), s);
    }
    // Stored alike, read alike: autoscaling 0..1 at rest, and n..n.
    assert_eq!(
        canonical_scaling(Scaling::Auto { min: 0, max: 1 }),
        Scaling::Fixed { nodes: 0 }
    );
    assert_eq!(
        canonical_scaling(Scaling::Auto { min: 2, max: 2 }),
        Scaling::Fixed { nodes: 2 }
    );
}

#[test]
fn request_token_is_stable_and_follows_the_spec() {
    let s = spec();
    assert_eq!(request_token(&s), request_token(&s.clone()));
    assert_eq!(request_token(&s), request_token(&canonical_spec(&s)));
    assert_eq!(request_token(&s).len(), "fracgpu-".len() + 32);
    let mut other = s.clone();
    other.labels.insert("team".into(), "infra".into());
    assert_ne!(request_token(&s), request_token(&other));
}

#[test]
fn a_pool_id_is_cluster_and_node_group() {
    assert_eq!(pool_id("c", "ng"), "c:ng");
}

#[test]
fn debug_never_shows_secrets() {
    let cfg = EksConfig {
        access_key: Some("AKIAEXAMPLE".into()),
        secret_key: Some("s3cr3t".into()),
        session_token: Some("tok".into()),
        ..EksConfig::default()
    };
    let d = format!("{cfg:?}");
    assert!(!d.contains("s3cr3t") && !d.contains("AKIAEXAMPLE") && !d.contains("tok\""));
}
