//! Bad requests to GKE.

use super::*;

/// GKE: node pool names, machines, accelerators and partitions, sharing, autoscaling, methods.
pub(super) fn cases() -> Vec<Case> {
    let np = |p: Value| json!({ "nodePool": p });
    let nps = format!("{GKE_CLUSTER}/nodePools");
    let a100 = |extra: Value| {
        let mut a = json!({"acceleratorCount": "1", "acceleratorType": "nvidia-tesla-a100"});
        for (k, v) in extra.as_object().unwrap() {
            a[k] = v.clone();
        }
        np(
            json!({"name": "p", "initialNodeCount": 1, "config": {"machineType": "a2-highgpu-1g", "accelerators": [a]}}),
        )
    };
    use Method as M;
    vec![
        // ---- GKE
        case(
            "gke",
            M::POST,
            &nps,
            json!({"parent": "x"}),
            400,
            "INVALID_ARGUMENT",
        ),
        case(
            "gke",
            M::POST,
            &nps,
            np(json!({"name": "Bad", "initialNodeCount": 1})),
            400,
            "INVALID_ARGUMENT",
        ),
        case(
            "gke",
            M::POST,
            &nps,
            np(json!({"name": "a".repeat(41), "initialNodeCount": 1})),
            400,
            "INVALID_ARGUMENT",
        ),
        case(
            "gke",
            M::POST,
            &nps,
            np(json!({"name": "p", "initialNodeCount": 1, "config": {"machineType": "z9-mega-1"}})),
            400,
            "INVALID_ARGUMENT",
        ),
        case(
            "gke",
            M::POST,
            &nps,
            np(
                json!({"name": "p", "initialNodeCount": 1, "config": {"machineType": "n1-standard-4", "accelerators": [{"acceleratorCount": 1, "acceleratorType": "nvidia-tesla-k9000"}]}}),
            ),
            400,
            "INVALID_ARGUMENT",
        ),
        case(
            "gke",
            M::POST,
            &nps,
            a100(json!({"gpuPartitionSize": "1g.10gb"})),
            400,
            "INVALID_ARGUMENT",
        ),
        // NVIDIA's 4g.20gb exists on the A100, but GKE's partition table has no 4g size.
        case(
            "gke",
            M::POST,
            &nps,
            a100(json!({"gpuPartitionSize": "4g.20gb"})),
            400,
            "INVALID_ARGUMENT",
        ),
        case(
            "gke",
            M::POST,
            &nps,
            np(
                json!({"name": "p", "initialNodeCount": 1, "config": {"machineType": "g2-standard-8", "accelerators": [{"acceleratorCount": 1, "acceleratorType": "nvidia-l4", "gpuPartitionSize": "1g.5gb"}]}}),
            ),
            400,
            "INVALID_ARGUMENT",
        ),
        case(
            "gke",
            M::POST,
            &nps,
            a100(
                json!({"gpuSharingConfig": {"gpuSharingStrategy": "TIME_SHARING", "maxSharedClientsPerGpu": "49"}}),
            ),
            400,
            "INVALID_ARGUMENT",
        ),
        case(
            "gke",
            M::POST,
            &nps,
            a100(
                json!({"gpuSharingConfig": {"gpuSharingStrategy": 7, "maxSharedClientsPerGpu": 2}}),
            ),
            400,
            "INVALID_ARGUMENT",
        ),
        case(
            "gke",
            M::POST,
            &nps,
            a100(
                json!({"gpuPartitionSize": "1g.5gb", "gpuSharingConfig": {"gpuSharingStrategy": "MPS", "maxSharedClientsPerGpu": 2}}),
            ),
            400,
            "INVALID_ARGUMENT",
        ),
        case(
            "gke",
            M::POST,
            &nps,
            a100(json!({"acceleratorCount": "2"})),
            400,
            "INVALID_ARGUMENT",
        ),
        case(
            "gke",
            M::POST,
            &nps,
            np(
                json!({"name": "p", "initialNodeCount": 1, "config": {"machineType": "g2-standard-8", "accelerators": [{"acceleratorCount": 1, "acceleratorType": "nvidia-tesla-t4"}]}}),
            ),
            400,
            "INVALID_ARGUMENT",
        ),
        case(
            "gke",
            M::POST,
            &nps,
            np(
                json!({"name": "p", "initialNodeCount": 1, "autoscaling": {"enabled": true, "minNodeCount": 5, "maxNodeCount": 2}}),
            ),
            400,
            "INVALID_ARGUMENT",
        ),
        case(
            "gke",
            M::POST,
            &nps,
            np(
                json!({"name": "p", "initialNodeCount": 1, "autoscaling": {"enabled": true, "minNodeCount": 1, "totalMaxNodeCount": 2}}),
            ),
            400,
            "INVALID_ARGUMENT",
        ),
        case(
            "gke",
            M::POST,
            &nps,
            np(
                json!({"name": "p", "initialNodeCount": 1, "config": {"taints": [{"key": "a", "value": "b"}]}}),
            ),
            400,
            "INVALID_ARGUMENT",
        ),
        case(
            "gke",
            M::POST,
            &nps,
            np(json!({"name": "p", "initialNodeCount": -1})),
            400,
            "INVALID_ARGUMENT",
        ),
        case(
            "gke",
            M::POST,
            &nps,
            np(json!({"name": "p", "initialNodeCount": "abc"})),
            400,
            "INVALID_ARGUMENT",
        ),
        case(
            "gke",
            M::POST,
            &nps,
            np(json!({"name": "dup", "initialNodeCount": 1})),
            409,
            "ALREADY_EXISTS",
        ),
        case(
            "gke",
            M::POST,
            "/v1/projects/sandbox-project/locations/us-central1/clusters/nope/nodePools",
            np(json!({"name": "p", "initialNodeCount": 1})),
            404,
            "NOT_FOUND",
        ),
        case(
            "gke",
            M::POST,
            format!("{nps}/dup:setSize"),
            json!({"nodeCount": -1}),
            400,
            "INVALID_ARGUMENT",
        ),
        case(
            "gke",
            M::GET,
            "/v1/projects/sandbox-project/locations/us-central1/operations/operation-nope",
            Value::Null,
            404,
            "NOT_FOUND",
        ),
        case(
            "gke",
            M::POST,
            format!("{nps}/dup:frobnicate"),
            json!({}),
            405,
            "UNIMPLEMENTED",
        ),
    ]
}
