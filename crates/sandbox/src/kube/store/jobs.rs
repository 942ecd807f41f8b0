//! The twin's job controller, in a cluster whose controllers run: a Job completes as soon as it
//! is made, with the status the job controller writes on success (`succeeded`, and the
//! `SuccessCriteriaMet` and `Complete` conditions that the API server of v1.33 and later
//! requires together: k8s.io/kubernetes pkg/controller/job/job_controller.go). Nothing runs its
//! pods, so nothing they would do is done: a Helm hook Job (the gpu-operator chart's
//! `upgrade-crd` on every `helm upgrade`) lets helm go on, as on a cluster whose hooks succeed.
//! A bare control plane (`fracgpu-sandbox apiserver`) runs no job controller, as envtest's.

use serde_json::{Value, json};

use super::Cluster;
use crate::kube::kinds;
use crate::kube::meta::meta_str;

impl Cluster {
    /// Completes the Job `ns/name` if it has not ended.
    pub(super) fn complete_job(&mut self, ns: &str, name: &str) {
        if !self.controllers {
            return;
        }
        let Some(mut job) = self.get_ref(kinds::JOBS, ns, name).cloned() else {
            return;
        };
        let ended = job
            .pointer("/status/conditions")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .any(|c| c["type"] == "Complete" || c["type"] == "Failed");
        if ended {
            return;
        }
        let now = crate::dates::now_rfc3339_secs();
        let cond = |t: &str| {
            json!({"type": t, "status": "True", "lastProbeTime": now,
                "lastTransitionTime": now, "reason": "CompletionsReached",
                "message": "Reached expected number of succeeded pods"})
        };
        let completions = job
            .pointer("/spec/completions")
            .and_then(Value::as_u64)
            .unwrap_or(1);
        job["status"] = json!({"startTime": now, "completionTime": now,
            "succeeded": completions, "active": 0, "ready": 0, "terminating": 0,
            "uncountedTerminatedPods": {},
            "conditions": [cond("SuccessCriteriaMet"), cond("Complete")]});
        let ns = meta_str(&job, "namespace").unwrap_or(ns).to_string();
        self.put_internal(kinds::JOBS, &ns, name, job);
    }
}
