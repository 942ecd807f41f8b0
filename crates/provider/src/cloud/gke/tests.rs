//! Unit tests of the GKE mapping, error classification and configuration; the client itself is
//! tested against the sandbox in tests/clients/cloud_gke.rs.

use std::collections::BTreeMap;

use google_cloud_container_v1::model::NodeTaint;

use super::calls::is_busy_message;
use super::config::StaticToken;
use super::mapping::{compute_url, node_pool_of, spec_of};
use super::*;
use crate::cloud::pool::{GkePoolFields, GkeSharing, PoolTaint, TargetFields};

fn loc() -> Location {
    Location::Gke {
        project: "p".into(),
        location: "us-central1".into(),
        cluster: "c".into(),
    }
}

fn spec() -> PoolSpec {
    PoolSpec {
        location: loc(),
        name: "ts".into(),
        machine_type: "g2-standard-4".into(),
        scaling: Scaling::Auto { min: 0, max: 3 },
        spot: true,
        disk_size_gb: None,
        labels: BTreeMap::from([("team".into(), "ml".into())]),
        taints: vec![PoolTaint {
            key: "nvidia.com/gpu".into(),
            value: "Present".into(),
            effect: "NoSchedule".into(),
        }],
        gpu_count: 1,
        node_template: BTreeMap::new(),
        target: TargetFields::Gke(GkePoolFields {
            accelerator_type: Some("nvidia-l4".into()),
            partition_size: None,
            sharing: Some(GkeSharing::TimeSharing { max_clients: 10 }),
            node_locations: vec!["us-central1-b".into(), "us-central1-a".into()],
        }),
    }
}

#[test]
fn a_node_pool_maps_back_to_its_spec_with_gke_defaults_filled_in() {
    let s = spec();
    let mut np = node_pool_of(&s).unwrap();
    // What GKE adds by itself.
    let c = np.config.as_mut().unwrap();
    c.disk_size_gb = 100;
    c.labels
        .insert("cloud.google.com/gke-nodepool".into(), "ts".into());
    let mut t = NodeTaint::default();
    t.key = "nvidia.com/gpu".into();
    t.value = "present".into();
    t.effect = m::node_taint::Effect::NoSchedule;
    c.taints.push(t);
    c.accelerators[0].gpu_driver_installation_config = None;
    assert_eq!(spec_of(&loc(), &np), canonical_spec(&s));
    assert_eq!(
        canonical_spec(&s).gke().node_locations,
        ["us-central1-a", "us-central1-b"]
    );
}

/// GKE counts per zone; the spec's counts are totals.
#[test]
fn totals_split_over_the_zones_and_come_back() {
    let mut s = spec();
    let np = node_pool_of(&s).unwrap();
    let a = np.autoscaling.as_ref().unwrap();
    assert_eq!(
        (
            a.total_min_node_count,
            a.total_max_node_count,
            a.min_node_count,
            a.max_node_count
        ),
        (0, 3, 0, 0)
    );
    assert_eq!(np.locations, ["us-central1-a", "us-central1-b"]);
    s.scaling = Scaling::Fixed { nodes: 4 };
    let np = node_pool_of(&s).unwrap();
    assert_eq!(np.initial_node_count, 2, "per zone");
    assert_eq!(spec_of(&loc(), &np).scaling, Scaling::Fixed { nodes: 4 });
    s.scaling = Scaling::Fixed { nodes: 3 };
    let e = node_pool_of(&s).unwrap_err().to_string();
    assert!(
        e.contains("3 nodes cannot be split evenly over its 2 zones"),
        "{e}"
    );
    // A pool with per-zone autoscaling limits (made by gcloud --min-nodes, say) reads as totals.
    let mut np = node_pool_of(&spec()).unwrap();
    let a = np.autoscaling.as_mut().unwrap();
    (a.total_min_node_count, a.total_max_node_count) = (0, 0);
    (a.min_node_count, a.max_node_count) = (1, 4);
    assert_eq!(
        spec_of(&loc(), &np).scaling,
        Scaling::Auto { min: 2, max: 8 }
    );
    // The initial size of an autoscaled pool stays within the total limits.
    s.scaling = Scaling::Auto { min: 3, max: 3 };
    assert_eq!(node_pool_of(&s).unwrap().initial_node_count, 1);
    s.scaling = Scaling::Auto { min: 1, max: 5 };
    assert_eq!(node_pool_of(&s).unwrap().initial_node_count, 1);
}

#[test]
fn canonical_spec_folds_the_default_disk_size() {
    let mut s = spec();
    s.disk_size_gb = Some(100);
    assert_eq!(canonical_spec(&s).disk_size_gb, None);
    s.disk_size_gb = Some(200);
    assert_eq!(canonical_spec(&s).disk_size_gb, Some(200));
}

#[test]
fn a_pool_id_is_its_api_name() {
    assert_eq!(
        pool_id(&loc(), "ts").unwrap(),
        "projects/p/locations/us-central1/clusters/c/nodePools/ts"
    );
}

#[test]
fn instance_group_reads_go_only_to_google_or_the_sandbox() {
    let igm = "https://www.googleapis.com/compute/v1/projects/p/zones/z-a/instanceGroupManagers/g";
    assert_eq!(compute_url(None, igm).as_deref(), Some(igm));
    assert_eq!(
        compute_url(Some("http://127.0.0.1:9"), igm).as_deref(),
        Some("http://127.0.0.1:9/compute/v1/projects/p/zones/z-a/instanceGroupManagers/g")
    );
    assert_eq!(compute_url(None, "https://evil.example/compute/v1/x"), None);
    assert_eq!(
        compute_url(None, "https://googleapis.com.evil.example/x"),
        None
    );
    assert_eq!(
        compute_url(None, "http://www.googleapis.com/compute/v1/x"),
        None
    );
}

#[test]
fn busy_messages_are_recognised() {
    assert!(is_busy_message(
        "Cluster is running incompatible operation operation-123."
    ));
    assert!(is_busy_message("Another operation in progress"));
    assert!(is_busy_message(
        "Operation operation-1 is currently creating node pool a. Please wait and try again once it is done."
    ));
    assert!(!is_busy_message(
        "Autoscaling is enabled; disable it before setting the size."
    ));
    assert!(!is_busy_message("Node pool must have initialNodeCount"));
}

#[test]
fn config_debug_hides_secrets() {
    let c = GkeConfig {
        credentials: Some("{\"private_key\": \"SECRET\"}".into()),
        access_token: Some("ya29.SECRET".into()),
        ..GkeConfig::default()
    };
    let d = format!("{c:?}");
    assert!(!d.contains("SECRET"), "{d}");
    assert!(!format!("{:?}", StaticToken::new("ya29.SECRET").unwrap()).contains("SECRET"));
}
