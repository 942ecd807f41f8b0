//! Helm's hook Jobs completed as a kubelet and the job controller would complete them, over the
//! API of whichever control plane the test runs on.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

/// Plays the kubelet and the job controller for Helm hook Jobs, and for nothing else: no
/// kubelet runs here, so a hook Job (the gpu-operator chart's pre-upgrade `upgrade-crd` Job, on
/// every `helm upgrade`) would stay active and helm would wait for it until its timeout. This
/// marks every Job annotated `helm.sh/hook` as succeeded through the status subresource, with
/// the conditions the job controller sets on success (`SuccessCriteriaMet`, then `Complete`,
/// which the API server of 1.33 and later requires together). While [`HookJobs::pause`] is on,
/// hooks are left running, to test a hook that never finishes. Stops when dropped.
pub struct HookJobs {
    stop: Arc<AtomicBool>,
    paused: Arc<AtomicBool>,
    completed: Arc<AtomicUsize>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl HookJobs {
    pub(super) fn start(url: String, ca: String, token: String) -> HookJobs {
        let stop = Arc::new(AtomicBool::new(false));
        let paused = Arc::new(AtomicBool::new(false));
        let completed = Arc::new(AtomicUsize::new(0));
        let (s, p, n) = (stop.clone(), paused.clone(), completed.clone());
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("a runtime");
            rt.block_on(complete_hooks(url, ca, token, s, p, n));
        });
        HookJobs {
            stop,
            paused,
            completed,
            thread: Some(thread),
        }
    }

    /// Leaves hook Jobs running (true) or completes them again (false).
    pub fn pause(&self, paused: bool) {
        self.paused.store(paused, Ordering::SeqCst);
    }

    /// How many hook Jobs it has completed.
    pub fn completed(&self) -> usize {
        self.completed.load(Ordering::SeqCst)
    }
}

impl Drop for HookJobs {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

async fn complete_hooks(
    url: String,
    ca: String,
    token: String,
    stop: Arc<AtomicBool>,
    paused: Arc<AtomicBool>,
    completed: Arc<AtomicUsize>,
) {
    let client = reqwest::Client::builder()
        .add_root_certificate(reqwest::Certificate::from_pem(ca.as_bytes()).expect("CA"))
        .timeout(Duration::from_secs(5))
        .build()
        .expect("a client");
    let auth = format!("Bearer {token}");
    while !stop.load(Ordering::SeqCst) {
        tokio::time::sleep(Duration::from_millis(150)).await;
        if paused.load(Ordering::SeqCst) {
            continue;
        }
        // The server may be down for a while (a test kills and restarts it).
        let Ok(resp) = client
            .get(format!("{url}/apis/batch/v1/jobs"))
            .header("Authorization", &auth)
            .send()
            .await
        else {
            continue;
        };
        let Ok(list) = resp.json::<serde_json::Value>().await else {
            continue;
        };
        for job in list["items"].as_array().into_iter().flatten() {
            let meta = &job["metadata"];
            let is_hook = meta["annotations"].get("helm.sh/hook").is_some();
            let done = job["status"]["conditions"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|c| c["type"] == "Complete" || c["type"] == "Failed");
            if !is_hook || done {
                continue;
            }
            // The Job's own creation time serves for every timestamp: the API server checks only
            // that they are set and that completion does not come before the start.
            let now = meta["creationTimestamp"].clone();
            let cond = |t: &str| {
                serde_json::json!({"type": t, "status": "True", "lastProbeTime": now,
                    "lastTransitionTime": now, "reason": "CompletedByTest",
                    "message": "completed by the test harness (no kubelet runs here)"})
            };
            let body = serde_json::json!({"status": {
                "startTime": now, "completionTime": now, "succeeded": 1, "active": 0, "ready": 0,
                "conditions": [cond("SuccessCriteriaMet"), cond("Complete")],
            }});
            let (ns, name) = (
                meta["namespace"].as_str().unwrap_or_default(),
                meta["name"].as_str().unwrap_or_default(),
            );
            let ok = client
                .patch(format!(
                    "{url}/apis/batch/v1/namespaces/{ns}/jobs/{name}/status"
                ))
                .header("Authorization", &auth)
                .header("Content-Type", "application/merge-patch+json")
                .body(body.to_string())
                .send()
                .await
                .is_ok_and(|r| r.status().is_success());
            if ok {
                completed.fetch_add(1, Ordering::SeqCst);
            }
        }
    }
}
