//! The actions through terraform 1.15 on a real control plane: kube-apiserver with NVIDIA's
//! gpu-operator chart v25.10.1 installed by helm 3 (its ClusterPolicy: the MIG manager on, the
//! `single` strategy), kube-controller-manager's daemonset, replicaset and disruption
//! controllers (real daemonset rollouts, real PodDisruptionBudget status behind the eviction
//! API), and the sandbox's twin through the API (`RemoteTwin`: the scheduler's binding of
//! daemonset pods, the kubelet's Ready and its end of deleted pods, and the GPU stack: the MIG
//! manager's `nvidia.com/mig.config.state`, the device plugin's resources).
//!
//! Three A100 40GB nodes: `gpu-0` and `gpu-1` in pool `a`, `gpu-2` in pool `b`; one inference
//! pod per pool-`a` node (a ReplicaSet per node) under a PodDisruptionBudget.

use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use super::device_plugin_config_real::DAEMONSET;
use crate::common::operator::{Chart, MISSING_KUBECONFIG, OperatorCluster};
use crate::common::terraform::{REQUIRED_PROVIDERS, Workspace, flat};
use crate::common::tools::{self, Tool};
use ::sandbox::kube::remote_twin::RemoteTwin;
use serde_json::Value;

const NS: &str = "gpu-operator";

fn node(name: &str, pool: &str) -> String {
    format!(
        r#"{{"apiVersion": "v1", "kind": "Node", "metadata": {{"name": "{name}", "labels": {{
    "kubernetes.io/hostname": "{name}", "pool": "{pool}", "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-40GB",
    "nvidia.com/gpu.count": "1", "nvidia.com/gpu.memory": "40960", "nvidia.com/mig.capable": "true",
    "nvidia.com/gpu.deploy.device-plugin": "true"}}}}}}"#
    )
}

/// One inference pod using a GPU of `node` (pinned there by hostname, so that the twin's
/// scheduler places it, and not while the node is cordoned), kept by a ReplicaSet.
fn inference(node: &str) -> String {
    format!(
        r#"{{"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {{"name": "inference-{node}", "namespace": "default"}},
  "spec": {{"replicas": 1, "selector": {{"matchLabels": {{"app": "inference", "on": "{node}"}}}},
    "template": {{"metadata": {{"labels": {{"app": "inference", "on": "{node}"}}}},
      "spec": {{"nodeSelector": {{"kubernetes.io/hostname": "{node}"}}, "containers": [{{"name": "model",
        "image": "example.com/model:1", "resources": {{"limits": {{"nvidia.com/gpu": 1}}}}}}]}}}}}}}}"#
    )
}

fn budget(min_available: u32) -> String {
    format!(
        r#"{{"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {{"name": "inference", "namespace": "default"}},
  "spec": {{"minAvailable": {min_available}, "selector": {{"matchLabels": {{"app": "inference"}}}}}}}}"#
    )
}

/// The twin, driven from a thread of its own; `mig_paused` holds the MIG manager (and the rest
/// of the GPU stack) back, the kubelet's and the scheduler's parts go on.
struct TwinThread {
    stop: Arc<AtomicBool>,
    mig_paused: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl TwinThread {
    fn start(op: &OperatorCluster) -> TwinThread {
        let twin = RemoteTwin::new(
            &op.server.url,
            Some(&op.server.ca_pem()),
            op.server.admin_token(),
        )
        .unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let mig_paused = Arc::new(AtomicBool::new(false));
        let (s, p) = (stop.clone(), mig_paused.clone());
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            while !s.load(Ordering::Relaxed) {
                if !p.load(Ordering::Relaxed)
                    && let Err(e) = rt.block_on(twin.sync_once())
                {
                    eprintln!("twin: {e}");
                }
                if let Err(e) = rt.block_on(twin.kubelet_once()) {
                    eprintln!("twin: {e}");
                }
                std::thread::sleep(Duration::from_millis(200));
            }
        });
        TwinThread {
            stop,
            mig_paused,
            thread: Some(thread),
        }
    }
}

impl Drop for TwinThread {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

struct Cluster {
    op: OperatorCluster,
    twin: TwinThread,
    terraform: std::path::PathBuf,
}

impl Cluster {
    fn start() -> Option<Cluster> {
        let terraform = tools::require(Tool::Terraform115)?;
        let mut op = OperatorCluster::start(Tool::Helm3)?;
        op.install(Chart::Nvidia, &[]);
        op.server
            .start_controller_manager("daemonset,replicaset,disruption")?;
        let mut objects = vec![DAEMONSET.to_string()];
        objects.extend([node("gpu-0", "a"), node("gpu-1", "a"), node("gpu-2", "b")]);
        op.server
            .kubectl_stdin(&["apply", "-f", "-"], &objects.join("\n"));
        let twin = TwinThread::start(&op);
        let c = Cluster {
            op,
            twin,
            terraform,
        };
        // The twin's MIG manager gives every MIG-capable node the chart's default config, and
        // the daemonset controller runs a device plugin pod on each.
        c.wait_for(
            "every node at all-disabled with a ready device plugin",
            || {
                ["gpu-0", "gpu-1", "gpu-2"].iter().all(|n| {
                    c.label(n, "nvidia.com/mig.config.state").as_deref() == Some("success")
                }) && c.device_plugin_pods().len() == 3
            },
        );
        Some(c)
    }

    fn kubectl(&self, args: &[&str]) -> String {
        self.op.server.kubectl_ok(args)
    }

    fn json(&self, args: &[&str]) -> Value {
        let mut all = args.to_vec();
        all.extend(["-o", "json"]);
        serde_json::from_str(&self.kubectl(&all)).unwrap()
    }

    fn label(&self, node: &str, key: &str) -> Option<String> {
        let n = self.json(&["get", "node", node]);
        n["metadata"]["labels"][key].as_str().map(str::to_string)
    }

    fn cordoned(&self, node: &str) -> bool {
        self.json(&["get", "node", node])["spec"]["unschedulable"] == Value::Bool(true)
    }

    /// The ready device plugin pods: (node, uid).
    fn device_plugin_pods(&self) -> Vec<(String, String)> {
        let pods = self.json(&[
            "-n",
            NS,
            "get",
            "pods",
            "-l",
            "app=nvidia-device-plugin-daemonset",
        ]);
        let mut v: Vec<(String, String)> = pods["items"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|p| p["metadata"]["deletionTimestamp"].is_null())
            .filter(|p| {
                p["status"]["conditions"].as_array().is_some_and(|c| {
                    c.iter()
                        .any(|c| c["type"] == "Ready" && c["status"] == "True")
                })
            })
            .map(|p| {
                (
                    p["spec"]["nodeName"].as_str().unwrap_or("").to_string(),
                    p["metadata"]["uid"].as_str().unwrap().to_string(),
                )
            })
            .collect();
        v.sort();
        v
    }

    /// The inference pods' uids, by node ("" while a pod waits for one).
    fn inference_pods(&self) -> Vec<(String, String)> {
        let pods = self.json(&["-n", "default", "get", "pods", "-l", "app=inference"]);
        let mut v: Vec<(String, String)> = pods["items"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|p| p["metadata"]["deletionTimestamp"].is_null())
            .map(|p| {
                (
                    p["spec"]["nodeName"].as_str().unwrap_or("").to_string(),
                    p["metadata"]["uid"].as_str().unwrap().to_string(),
                )
            })
            .collect();
        v.sort();
        v
    }

    fn wait_for(&self, what: &str, done: impl Fn() -> bool) {
        let start = Instant::now();
        while !done() {
            if start.elapsed() > Duration::from_secs(90) {
                let pods = self.op.server.kubectl(&["get", "pods", "-A", "-o", "wide"]);
                let nodes = self.op.server.kubectl(&["get", "nodes", "--show-labels"]);
                panic!(
                    "{what}: not after 90 s\n{}\n{}\n{}",
                    String::from_utf8_lossy(&pods.stdout),
                    String::from_utf8_lossy(&nodes.stdout),
                    self.op.server.controller_manager_log_tail()
                );
            }
            std::thread::sleep(Duration::from_millis(250));
        }
    }

    fn workspace(&self, action: &str) -> Workspace {
        let ws = Workspace::new(&format!(
            "{REQUIRED_PROVIDERS}\n{action}\nresource \"terraform_data\" \"anchor\" {{}}\n"
        ))
        .with_terraform(&self.terraform)
        .env("KUBECONFIG", MISSING_KUBECONFIG);
        ws.init();
        ws
    }
}

/// The workspace's configuration becomes this action (and the anchor resource).
fn set(ws: &Workspace, action: &str) {
    ws.write(
        "main.tf",
        &format!("{REQUIRED_PROVIDERS}\n{action}\nresource \"terraform_data\" \"anchor\" {{}}\n"),
    );
}

fn mig_action(kc: &str, selector: &str, config: &str, extra: &str) -> String {
    format!(
        r#"action "fracgpu_mig_reconfigure" "now" {{
  config {{
    node_selector = {{ {selector} }}
    config        = "{config}"
{extra}
    kubernetes {{ config_path = "{kc}" }}
  }}
}}"#
    )
}

const MIG_INVOKE: &str = "-invoke=action.fracgpu_mig_reconfigure.now";

/// Prints how long a test's steps take (shown with `--no-capture` or on failure).
fn step(t0: Instant, what: &str) {
    eprintln!("[{:>6.1}s] {what}", t0.elapsed().as_secs_f64());
}

#[test]
fn mig_reconfigure_drains_node_by_node_and_stops_where_it_must() {
    let Some(c) = Cluster::start() else { return };
    let t0 = Instant::now();
    let kc = c.op.kc();
    c.op.server.kubectl_stdin(
        &["apply", "-f", "-"],
        &[inference("gpu-0"), inference("gpu-1"), budget(1)].join("\n"),
    );
    let placed = || {
        let p = c.inference_pods();
        p.len() == 2 && p.iter().all(|(n, _)| !n.is_empty())
    };
    c.wait_for("an inference pod on each pool-a node", placed);
    let before = c.inference_pods();

    // Relabelled by hand under a running pod, the node's MIG manager fails (its GPU is in use),
    // and will not try that config again: the action says so instead of waiting forever.
    c.kubectl(&[
        "label",
        "node",
        "gpu-0",
        "--overwrite",
        "nvidia.com/mig.config=all-1g.5gb",
    ]);
    c.wait_for("gpu-0's MIG manager failing", || {
        c.label("gpu-0", "nvidia.com/mig.config.state").as_deref() == Some("failed")
    });
    let ws = c.workspace(&mig_action(&kc, "pool = \"a\"", "all-1g.5gb", ""));
    step(t0, "a node whose MIG manager failed that config");
    let out = ws.run(&["apply", MIG_INVOKE, "-auto-approve", "-no-color"]);
    assert_ne!(out.code, 0, "{}", out.text());
    assert!(
        flat(&out.text()).contains("Node already on this MIG config")
            && flat(&out.text()).contains("MIG manager reports failed"),
        "{}",
        out.text()
    );
    assert!(
        !c.cordoned("gpu-0") && !c.cordoned("gpu-1"),
        "nothing touched"
    );
    c.kubectl(&[
        "label",
        "node",
        "gpu-0",
        "--overwrite",
        "nvidia.com/mig.config=all-disabled",
    ]);
    c.wait_for("gpu-0 back at all-disabled", || {
        c.label("gpu-0", "nvidia.com/mig.config.state").as_deref() == Some("success")
    });

    // Refused before any node is touched: no node, a profile the GPU lacks.
    set(&ws, &mig_action(&kc, "pool = \"nope\"", "all-1g.5gb", ""));
    step(t0, "no node matches");
    let out = ws.run(&["apply", MIG_INVOKE, "-auto-approve", "-no-color"]);
    assert_ne!(out.code, 0, "{}", out.text());
    assert!(
        out.text().contains("No node matches node_selector"),
        "{}",
        out.text()
    );
    assert!(out.text().contains("pool=nope"), "{}", out.text());
    assert!(
        out.text().contains("No node matches node_selector yet"),
        "the plan warned:\n{}",
        out.text()
    );

    set(&ws, &mig_action(&kc, "pool = \"a\"", "all-1g.20gb", ""));
    step(t0, "a profile the GPU lacks");
    // Found at plan time already.
    let out = ws.run(&["plan", MIG_INVOKE, "-no-color"]);
    assert_ne!(out.code, 0, "{}", out.text());
    let text = out.text();
    assert!(text.contains("MIG config does not fit the node"), "{text}");
    assert!(
        text.contains("gpu-0") && text.contains("all-1g.5gb"),
        "{text}"
    );
    assert!(!c.cordoned("gpu-0") && !c.cordoned("gpu-1"));
    assert_eq!(
        c.label("gpu-0", "nvidia.com/mig.config").as_deref(),
        Some("all-disabled")
    );

    // A profile that does not exist anywhere is refused at plan time, naming the attribute.
    set(&ws, &mig_action(&kc, "pool = \"a\"", "all-9g.99gb", ""));
    step(t0, "a profile no GPU has");
    let out = ws.run(&["plan", MIG_INVOKE, "-no-color"]);
    assert_ne!(out.code, 0, "{}", out.text());
    assert!(out.text().contains("Invalid MIG config"), "{}", out.text());
    assert!(out.text().contains("config"), "{}", out.text());

    // The whole pool, one node at a time, the budget respected.
    set(
        &ws,
        &mig_action(&kc, "pool = \"a\"", "all-1g.5gb", "    node_timeout = 120"),
    );
    step(t0, "pool a, node by node");
    let out = ws.ok(&["apply", MIG_INVOKE, "-auto-approve", "-no-color"]);
    let text = out.text();
    let at = |needle: &str| {
        text.find(needle)
            .unwrap_or_else(|| panic!("no progress line {needle:?}:\n{text}"))
    };
    assert!(at("gpu-0: cordoned") < at("gpu-0: drained"));
    assert!(at("gpu-0: drained") < at("gpu-0: nvidia.com/mig.config=all-1g.5gb"));
    assert!(at("gpu-0: reconfigured to all-1g.5gb, uncordoned") < at("gpu-1: cordoned"));
    assert!(at("gpu-1: reconfigured to all-1g.5gb, uncordoned") > 0);
    for n in ["gpu-0", "gpu-1"] {
        assert_eq!(
            c.label(n, "nvidia.com/mig.config").as_deref(),
            Some("all-1g.5gb")
        );
        assert_eq!(
            c.label(n, "nvidia.com/mig.config.state").as_deref(),
            Some("success")
        );
        assert!(!c.cordoned(n), "{n} uncordoned");
        // The single strategy: seven 1g.5gb instances of the A100 40GB as nvidia.com/gpu.
        let alloc = c.json(&["get", "node", n])["status"]["allocatable"]["nvidia.com/gpu"].clone();
        assert_eq!(alloc, "7", "{n}");
    }
    assert_eq!(
        c.label("gpu-2", "nvidia.com/mig.config").as_deref(),
        Some("all-disabled")
    );
    c.wait_for(
        "the evicted pods replaced once the nodes were uncordoned",
        placed,
    );
    let after = c.inference_pods();
    assert!(
        before.iter().all(|b| !after.contains(b)),
        "each pod was evicted: {before:?} -> {after:?}"
    );

    // Again: nothing to do, nothing touched.
    step(t0, "again: nothing to do");
    let out = ws.ok(&["apply", MIG_INVOKE, "-auto-approve", "-no-color"]);
    assert!(
        out.text()
            .contains("gpu-0: already at all-1g.5gb, left alone"),
        "{}",
        out.text()
    );
    assert_eq!(c.inference_pods(), after);

    // The MIG manager refuses a config it does not hold: that node stays cordoned, named, and
    // the next is not touched.
    set(
        &ws,
        &mig_action(&kc, "pool = \"a\"", "my-layout", "    node_timeout = 60"),
    );
    step(t0, "a config the MIG manager refuses");
    let out = ws.run(&["apply", MIG_INVOKE, "-auto-approve", "-no-color"]);
    assert_ne!(out.code, 0, "{}", out.text());
    let text = out.text();
    assert!(text.contains("MIG reconfiguration failed"), "{text}");
    assert!(text.contains("gpu-0 stays cordoned"), "{text}");
    assert!(text.contains("Not touched: gpu-1"), "{text}");
    assert!(c.cordoned("gpu-0") && !c.cordoned("gpu-1"));

    // Recovered by the action with a config the MIG manager holds; gpu-0 was cordoned before
    // this run, so it stays cordoned.
    set(
        &ws,
        &mig_action(&kc, "pool = \"a\"", "all-1g.5gb", "    node_timeout = 60"),
    );
    step(t0, "recovery");
    let out = ws.ok(&["apply", MIG_INVOKE, "-auto-approve", "-no-color"]);
    let text = out.text();
    assert!(
        text.contains(
            "gpu-0: reconfigured to all-1g.5gb; left cordoned, as it was before the action"
        ),
        "{text}"
    );
    assert!(
        text.contains("gpu-1: already at all-1g.5gb, left alone"),
        "{text}"
    );
    assert!(c.cordoned("gpu-0"));
    c.kubectl(&["uncordon", "gpu-0"]);
    c.wait_for("gpu-0's inference pod placed again", placed);

    // A budget that allows no disruption: the drain times out, the node is uncordoned as it
    // was, its GPUs untouched, and the pod is named.
    c.op.server.kubectl_stdin(&["apply", "-f", "-"], &budget(2));
    c.wait_for("the PodDisruptionBudget observed", || {
        let b = c.json(&["-n", "default", "get", "pdb", "inference"]);
        b["status"]["observedGeneration"] == b["metadata"]["generation"]
            && b["status"]["disruptionsAllowed"] == 0
    });
    set(
        &ws,
        &mig_action(&kc, "pool = \"a\"", "all-disabled", "    node_timeout = 30"),
    );
    step(t0, "a budget that allows no disruption");
    let out = ws.run(&["apply", MIG_INVOKE, "-auto-approve", "-no-color"]);
    assert_ne!(out.code, 0, "{}", out.text());
    let text = out.text();
    assert!(text.contains("Drain timed out"), "{text}");
    assert!(text.contains("default/inference-gpu-0-"), "{text}");
    assert!(text.contains("disruption budget"), "{text}");
    assert!(text.contains("gpu-0 was uncordoned"), "{text}");
    assert!(!c.cordoned("gpu-0"));
    assert_eq!(
        c.label("gpu-0", "nvidia.com/mig.config").as_deref(),
        Some("all-1g.5gb")
    );

    // A pod no controller owns would be lost: refused unless forced.
    c.kubectl(&["delete", "pdb", "-n", "default", "inference"]);
    c.kubectl(&[
        "run",
        "scratch",
        "-n",
        "default",
        "--image=example.com/scratch:1",
        "--restart=Never",
        "--overrides",
        r#"{"spec": {"nodeName": "gpu-2"}}"#,
    ]);
    set(&ws, &mig_action(&kc, "pool = \"b\"", "all-2g.10gb", ""));
    step(t0, "a pod without a controller");
    let out = ws.run(&["apply", MIG_INVOKE, "-auto-approve", "-no-color"]);
    assert_ne!(out.code, 0, "{}", out.text());
    assert!(
        out.text().contains("Pods without a controller"),
        "{}",
        out.text()
    );
    assert!(out.text().contains("default/scratch"), "{}", out.text());
    assert!(out.text().contains("force = true"), "{}", out.text());
    assert!(!c.cordoned("gpu-2"));
    set(
        &ws,
        &mig_action(&kc, "pool = \"b\"", "all-2g.10gb", "    force = true"),
    );
    step(t0, "the same, forced");
    let out = ws.ok(&["apply", MIG_INVOKE, "-auto-approve", "-no-color"]);
    assert!(
        out.text().contains("gpu-2: evicted default/scratch"),
        "{}",
        out.text()
    );
    assert_eq!(
        c.label("gpu-2", "nvidia.com/mig.config").as_deref(),
        Some("all-2g.10gb")
    );
}

#[test]
fn mig_reconfigure_interrupted_names_the_node_it_leaves_cordoned() {
    let Some(c) = Cluster::start() else { return };
    let kc = c.op.kc();
    let ws = c.workspace(&mig_action(&kc, "pool = \"a\"", "all-3g.20gb", ""));
    // The MIG manager holds its verdict: the action waits on gpu-0's repartitioning.
    c.twin.mig_paused.store(true, Ordering::Relaxed);
    let mut cmd = ws.command(&["apply", MIG_INVOKE, "-auto-approve", "-no-color"]);
    cmd.process_group(0)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("terraform starts");
    let (mut out, mut err) = (child.stdout.take().unwrap(), child.stderr.take().unwrap());
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = std::io::Read::read_to_string(&mut out, &mut s);
        let mut e = String::new();
        let _ = std::io::Read::read_to_string(&mut err, &mut e);
        format!("{s}\n{e}")
    });
    c.wait_for("gpu-0 pending its new config", || {
        c.label("gpu-0", "nvidia.com/mig.config.state").as_deref() == Some("pending")
    });
    std::thread::sleep(Duration::from_millis(500));
    let kill = Command::new("kill")
        .args(["-INT", "--", &format!("-{}", child.id())])
        .status()
        .expect("kill runs");
    assert!(kill.success());
    let start = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "terraform still runs after SIGINT"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    let text = reader.join().unwrap();
    assert!(!status.success(), "{text}");
    assert!(text.contains("MIG reconfiguration interrupted"), "{text}");
    assert!(text.contains("gpu-0 stays cordoned"), "{text}");
    assert!(c.cordoned("gpu-0"), "left cordoned, as said");
    assert!(!c.cordoned("gpu-1"), "never touched");
    assert_eq!(
        c.label("gpu-1", "nvidia.com/mig.config").as_deref(),
        Some("all-disabled")
    );
}

fn rollout_action(kc: &str, extra: &str) -> String {
    format!(
        r#"action "fracgpu_device_plugin_rollout" "now" {{
  config {{
    namespace = "{NS}"
    timeout   = 90
{extra}
    kubernetes {{ config_path = "{kc}" }}
  }}
}}"#
    )
}

#[test]
fn device_plugin_rollout_by_the_real_daemonset_controller() {
    let Some(c) = Cluster::start() else { return };
    let kc = c.op.kc();
    let first = c.device_plugin_pods();

    // One pool: only its node's pod is replaced.
    let ws = c.workspace(&rollout_action(&kc, "    node_selector = { pool = \"b\" }"));
    let out = ws.ok(&[
        "apply",
        "-invoke=action.fracgpu_device_plugin_rollout.now",
        "-auto-approve",
        "-no-color",
    ]);
    let text = out.text();
    assert!(
        text.contains("nvidia-device-plugin-daemonset: restarted on gpu-2"),
        "{text}"
    );
    assert!(text.contains("rolled out on 1 nodes"), "{text}");
    assert!(
        text.contains("gpu-feature-discovery: not present, skipped"),
        "{text}"
    );
    let second = c.device_plugin_pods();
    assert_eq!(second.len(), 3);
    for (n, uid) in &first {
        let now = second.iter().find(|(m, _)| m == n).map(|(_, u)| u);
        if n == "gpu-2" {
            assert_ne!(now, Some(uid), "gpu-2's pod replaced");
        } else {
            assert_eq!(now, Some(uid), "{n}'s pod kept");
        }
    }

    // Every node: the template restart, rolled by the daemonset controller.
    set(&ws, &rollout_action(&kc, ""));
    let out = ws.ok(&[
        "apply",
        "-invoke=action.fracgpu_device_plugin_rollout.now",
        "-auto-approve",
        "-no-color",
    ]);
    assert!(
        out.text()
            .contains("nvidia-device-plugin-daemonset: rolled out (3 of 3 pods updated, 3 ready)"),
        "{}",
        out.text()
    );
    let third = c.device_plugin_pods();
    assert_eq!(third.len(), 3);
    assert!(
        second.iter().all(|p| !third.contains(p)),
        "every pod replaced"
    );

    // Tied to a resource's update by an action_trigger.
    let triggered = |revision: u32| {
        format!(
            "{REQUIRED_PROVIDERS}\n{}\nresource \"terraform_data\" \"revision\" {{\n  input = {revision}\n  lifecycle {{\n    action_trigger {{\n      events  = [after_update]\n      actions = [action.fracgpu_device_plugin_rollout.now]\n    }}\n  }}\n}}\n",
            rollout_action(&kc, "    node_selector = { pool = \"a\" }")
        )
    };
    ws.write("main.tf", &triggered(1));
    ws.ok(&["apply", "-auto-approve", "-no-color"]);
    assert_eq!(c.device_plugin_pods(), third, "a create triggers nothing");
    ws.write("main.tf", &triggered(2));
    let out = ws.ok(&["apply", "-auto-approve", "-no-color"]);
    assert!(
        out.text().contains("rolled out on 2 nodes"),
        "{}",
        out.text()
    );
    let fourth = c.device_plugin_pods();
    for (n, uid) in &third {
        let kept = fourth.iter().any(|(m, u)| m == n && u == uid);
        assert_eq!(kept, n == "gpu-2", "{n}: only pool a's pods replaced");
    }
}
