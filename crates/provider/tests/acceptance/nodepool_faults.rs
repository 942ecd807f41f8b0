//! `fracgpu_nodepool` under faults, through the real terraform binary against the sandbox: 429
//! bursts, 503s on operation polls, a dropped connection, an operation that ends Failed, a
//! timeout, and a sandbox restart mid-apply. Every scenario ends with the same invariant: the
//! sandbox's inventory equals terraform's state, so a fault never leaves an orphaned pool (in the
//! cloud, unknown to terraform) or a ghost (in state, gone from the cloud).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::common::pools::{self, StatePool};
use crate::common::sandbox;
use crate::common::terraform::{Output, REQUIRED_PROVIDERS, Workspace};
use serde_json::json;

// ------------------------------------------------------------------------------------------ config

fn aks(name: &str, extra: &str) -> String {
    format!(
        "resource \"fracgpu_nodepool\" \"{name}\" {{\n  name         = \"{name}\"\n  machine_type = \"Standard_NC24ads_A100_v4\"\n  node_count   = 1\n  aks {{\n    resource_group = \"sandbox-rg\"\n    cluster_name   = \"sandbox-aks\"\n  }}\n  time_slicing {{ replicas = 4 }}\n{extra}}}\n"
    )
}

fn gke(name: &str, extra: &str) -> String {
    format!(
        "resource \"fracgpu_nodepool\" \"{name}\" {{\n  name         = \"{name}\"\n  machine_type = \"g2-standard-4\"\n  node_count   = 3\n  gke {{\n    location = \"us-central1\"\n    cluster  = \"sandbox-gke\"\n  }}\n  time_slicing {{ replicas = 4 }}\n{extra}}}\n"
    )
}

fn eks(name: &str, extra: &str) -> String {
    format!(
        "resource \"fracgpu_nodepool\" \"{name}\" {{\n  name         = \"{name}\"\n  machine_type = \"g4dn.xlarge\"\n  node_count   = 1\n  eks {{\n    cluster_name  = \"sandbox-eks\"\n    node_role_arn = \"arn:aws:iam::123456789012:role/gpu-nodes\"\n    subnet_ids    = [\"subnet-0a1\", \"subnet-0b2\"]\n  }}\n  time_slicing {{ replicas = 4 }}\n{extra}}}\n"
    )
}

fn config(url: &str, resources: &[String]) -> String {
    format!(
        "{REQUIRED_PROVIDERS}\nprovider \"fracgpu\" {{\n  sandbox = \"{url}\"\n}}\n\n{}",
        resources.concat()
    )
}

fn timeouts(create: &str) -> String {
    format!("  timeouts {{\n    create = \"{create}\"\n  }}\n")
}

fn apply(ws: &Workspace) -> Output {
    ws.run(&["apply", "-no-color", "-auto-approve", "-input=false"])
}

// --------------------------------------------------------------------------------------- invariant

/// The invariant of every scenario: terraform's state and the sandbox's inventory hold the same
/// pools with the same ID, node count and labels; no orphan (in the cloud, unknown to terraform)
/// and no ghost (in state, gone from the cloud).
fn assert_inventory_equals_state(ws: &Workspace, url: &str) -> Vec<StatePool> {
    let state = pools::state_pools(ws);
    let inv = sandbox::inventory(url).expect("the sandbox answers");
    let a = pools::compare(&state, &pools::inventory_pools(&inv));
    assert!(
        a.orphans.is_empty() && a.ghosts.is_empty() && a.differ.is_empty(),
        "terraform's state and the sandbox's inventory differ: {a:?}"
    );
    state
}

fn assert_no_faults_left(url: &str) {
    let left = sandbox::armed(url);
    assert!(
        left.is_empty(),
        "every injected fault is met by a request: {left:?}"
    );
}

// --------------------------------------------------------------------------------------- scenarios

#[test]
fn throttling_bursts_on_create_and_read_are_ridden_out() {
    let sb = sandbox::start(Duration::ZERO);
    let ws = Workspace::new(&config(&sb.url, &[aks("thraks", ""), eks("threks", "")]));
    ws.init();
    sb.inject(json!({"match": {"method": "PUT", "path_contains": "agentPools/thraks"}, "count": 3, "kind": "429", "retry_after": 1}));
    sb.inject(json!({"match": {"method": "POST", "path_contains": "sandbox-eks/node-groups"}, "count": 2, "kind": "429", "retry_after": 1}));
    let t = Instant::now();
    let out = apply(&ws);
    let took = t.elapsed();
    assert_eq!(out.code, 0, "apply rides over the 429s:\n{}", out.text());
    assert_no_faults_left(&sb.url);
    assert!(
        took >= Duration::from_secs(3),
        "three Retry-After: 1 answers are waited out, not hammered: {took:?}"
    );
    let state = assert_inventory_equals_state(&ws, &sb.url);
    assert_eq!(state.len(), 2);
    assert!(state.iter().all(|p| !p.tainted));

    // Reads are throttled too: the refresh of the next plan waits and sees no drift. (A refresh
    // reads an AKS pool through the cluster's document, whose agentPoolProfiles hold its pools.)
    sb.inject(json!({"match": {"method": "GET", "path_ends_with": "managedClusters/sandbox-aks"}, "count": 3, "kind": "429", "retry_after": 1}));
    sb.inject(json!({"match": {"method": "GET", "path_contains": "node-groups/threks"}, "count": 3, "kind": "429", "retry_after": 1}));
    let (code, plan) = ws.plan_exit_code();
    assert_eq!(
        code,
        0,
        "refresh under throttling finds no changes:\n{}",
        plan.text()
    );
    assert_no_faults_left(&sb.url);

    ws.ok(&["destroy", "-auto-approve", "-no-color"]);
    assert!(assert_inventory_equals_state(&ws, &sb.url).is_empty());
}

#[test]
fn unavailable_operation_polls_are_retried() {
    // Operations take a second, so the provider has operations to poll.
    let sb = sandbox::start(Duration::from_secs(1));
    let ws = Workspace::new(&config(&sb.url, &[gke("pollgke", ""), aks("pollaks", "")]));
    ws.init();
    let gke_ops = json!({"match": {"method": "GET", "path_contains": "locations/us-central1/operations/"}, "count": 3, "kind": "503"});
    let arm_ops = json!({"match": {"method": "GET", "path_contains": "Microsoft.ContainerService/locations/eastus/operations"}, "count": 3, "kind": "503", "retry_after": 1});
    sb.inject(gke_ops.clone());
    sb.inject(arm_ops.clone());
    // And a 500 on the reads of the GKE pool that follow its operation.
    sb.inject(json!({"match": {"method": "GET", "path_contains": "nodePools/pollgke"}, "count": 2, "kind": "500"}));
    let out = apply(&ws);
    assert_eq!(
        out.code,
        0,
        "apply rides over 503s on the polls:\n{}",
        out.text()
    );
    assert_no_faults_left(&sb.url);
    let state = assert_inventory_equals_state(&ws, &sb.url);
    assert_eq!(state.len(), 2);
    assert_eq!(sb.pool("pollgke")["status"], "RUNNING");
    assert_eq!(
        sb.pool("pollaks")["properties"]["provisioningState"],
        "Succeeded"
    );
    assert_eq!(ws.plan_exit_code().0, 0);

    // Deletes poll the same operations.
    sb.inject(gke_ops);
    sb.inject(arm_ops);
    ws.ok(&["destroy", "-auto-approve", "-no-color"]);
    assert_no_faults_left(&sb.url);
    assert!(assert_inventory_equals_state(&ws, &sb.url).is_empty());
}

#[test]
fn a_dropped_create_request_leaves_exactly_one_pool() {
    let sb = sandbox::start(Duration::ZERO);
    let ws = Workspace::new(&config(
        &sb.url,
        &[gke("dropgke", ""), eks("dropeks", ""), aks("dropaks", "")],
    ));
    ws.init();
    sb.inject(json!({"match": {"method": "POST", "path_contains": "clusters/sandbox-gke/nodePools"}, "count": 1, "kind": "drop"}));
    sb.inject(json!({"match": {"method": "POST", "path_contains": "clusters/sandbox-eks/node-groups"}, "count": 1, "kind": "drop"}));
    sb.inject(json!({"match": {"method": "PUT", "path_contains": "agentPools/dropaks"}, "count": 1, "kind": "drop"}));
    let out = apply(&ws);
    assert_eq!(
        out.code,
        0,
        "apply retries a dropped create:\n{}",
        out.text()
    );
    assert_no_faults_left(&sb.url);
    let state = assert_inventory_equals_state(&ws, &sb.url);
    let names: Vec<&str> = state.iter().map(|p| p.record.name.as_str()).collect();
    assert_eq!(names, ["dropaks", "dropeks", "dropgke"]);
    assert_eq!(ws.plan_exit_code().0, 0);
}

/// A TCP proxy in front of the sandbox that cuts the connection right after the sandbox has
/// answered the first request whose request line starts with `method` and contains `path` (one such
/// cut per marker): the cloud acted, the client never hears of it. Answers the proxy's URL and the
/// markers' "cut" flags.
fn lost_answer_proxy(upstream: &str, markers: &[(&str, &str)]) -> (String, Arc<Vec<AtomicBool>>) {
    let upstream = upstream.trim_start_matches("http://").to_string();
    let markers: Vec<(String, String)> = markers
        .iter()
        .map(|(m, p)| (format!("{m} "), p.to_string()))
        .collect();
    let cut: Arc<Vec<AtomicBool>> =
        Arc::new(markers.iter().map(|_| AtomicBool::new(false)).collect());
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let flags = cut.clone();
    std::thread::spawn(move || {
        for client in listener.incoming() {
            let Ok(client) = client else { continue };
            let Ok(server) = TcpStream::connect(&upstream) else {
                continue;
            };
            let (markers, flags) = (markers.clone(), flags.clone());
            // Set before the marked request is forwarded, so its answer cannot slip through.
            let cut_this = Arc::new(AtomicBool::new(false));
            let (mut c_in, mut s_out) = (client.try_clone().unwrap(), server.try_clone().unwrap());
            let cut_req = cut_this.clone();
            std::thread::spawn(move || {
                let mut buf = [0u8; 64 * 1024];
                loop {
                    let n = match c_in.read(&mut buf) {
                        Ok(0) | Err(_) => break,
                        Ok(n) => n,
                    };
                    let chunk = String::from_utf8_lossy(&buf[..n]);
                    let line = chunk.lines().next().unwrap_or_default();
                    for (i, (method, path)) in markers.iter().enumerate() {
                        if line.starts_with(method.as_str())
                            && line.contains(path.as_str())
                            && !flags[i].swap(true, Ordering::SeqCst)
                        {
                            cut_req.store(true, Ordering::SeqCst);
                        }
                    }
                    if s_out.write_all(&buf[..n]).is_err() {
                        break;
                    }
                }
                let _ = s_out.shutdown(Shutdown::Write);
            });
            let (mut s_in, mut c_out) = (server, client);
            std::thread::spawn(move || {
                let mut buf = [0u8; 64 * 1024];
                loop {
                    let n = match s_in.read(&mut buf) {
                        Ok(0) | Err(_) => break,
                        Ok(n) => n,
                    };
                    if cut_this.load(Ordering::SeqCst) {
                        break;
                    }
                    if c_out.write_all(&buf[..n]).is_err() {
                        break;
                    }
                }
                let _ = c_out.shutdown(Shutdown::Both);
                let _ = s_in.shutdown(Shutdown::Both);
            });
        }
    });
    (url, cut)
}

#[test]
fn a_create_whose_answer_is_lost_adopts_the_pool_it_made() {
    let sb = sandbox::start(Duration::ZERO);
    let (proxy, cut) = lost_answer_proxy(
        &sb.url,
        &[
            ("POST", "/clusters/sandbox-gke/nodePools"),
            ("POST", "/clusters/sandbox-eks/node-groups"),
            ("PUT", "/agentPools/lostaks?"),
        ],
    );
    let ws = Workspace::new(&config(
        &proxy,
        &[gke("lostgke", ""), eks("losteks", ""), aks("lostaks", "")],
    ));
    ws.init();
    let out = apply(&ws);
    assert!(
        cut.iter().all(|c| c.load(Ordering::SeqCst)),
        "every create's answer was cut:\n{}",
        out.text()
    );
    assert_eq!(
        out.code,
        0,
        "a retried create finds and adopts its own pool:\n{}",
        out.text()
    );
    let state = assert_inventory_equals_state(&ws, &sb.url);
    let names: Vec<&str> = state.iter().map(|p| p.record.name.as_str()).collect();
    assert_eq!(names, ["lostaks", "losteks", "lostgke"]);
    assert!(state.iter().all(|p| !p.tainted));
    assert_eq!(ws.plan_exit_code().0, 0);
}

#[test]
fn a_failed_operation_taints_the_pool_and_the_next_apply_replaces_it() {
    let sb = sandbox::start(Duration::ZERO);
    let ws = Workspace::new(&config(
        &sb.url,
        &[
            aks("failopaks", ""),
            gke("failopgke", ""),
            eks("failopeks", ""),
        ],
    ));
    ws.init();
    sb.inject(json!({"match": {"method": "PUT", "path_contains": "agentPools/failopaks"}, "count": 1, "kind": "fail_operation"}));
    sb.inject(json!({"match": {"method": "POST", "path_contains": "clusters/sandbox-gke/nodePools"}, "count": 1, "kind": "fail_operation"}));
    sb.inject(json!({"match": {"method": "POST", "path_contains": "clusters/sandbox-eks/node-groups"}, "count": 1, "kind": "fail_operation"}));
    let out = apply(&ws);
    assert_ne!(out.code, 0, "apply fails:\n{}", out.text());
    assert_no_faults_left(&sb.url);
    let text = out.text();
    assert!(
        text.matches("Cloud operation failed").count() >= 3,
        "one diagnostic per pool:\n{text}"
    );
    // The clouds' own codes are quoted: ARM's operation error, GKE's operation error, the EKS
    // node group's health issue.
    for needle in [
        "AllocationFailed",
        "RESOURCE_EXHAUSTED",
        "AsgInstanceLaunchFailures",
    ] {
        assert!(
            text.contains(needle),
            "the diagnostic quotes {needle:?}:\n{text}"
        );
    }
    assert!(text.contains("tainted"), "{text}");
    assert!(
        !text.contains("injection).."),
        "one full stop after the cloud's message:\n{text}"
    );

    // What exists is in state, tainted: nothing is orphaned.
    let state = assert_inventory_equals_state(&ws, &sb.url);
    assert_eq!(state.len(), 3);
    for p in &state {
        assert!(p.tainted, "{} is tainted", p.record.name);
    }
    let (code, plan) = ws.plan_exit_code();
    assert_eq!(code, 2, "{}", plan.text());
    assert!(
        plan.stdout.contains("is tainted, so must be replaced"),
        "{}",
        plan.stdout
    );
    assert!(
        plan.stdout.contains("3 to add, 0 to change, 3 to destroy"),
        "{}",
        plan.stdout
    );

    // The next apply replaces them and succeeds.
    ws.apply();
    let state = assert_inventory_equals_state(&ws, &sb.url);
    assert_eq!(state.len(), 3);
    assert!(state.iter().all(|p| !p.tainted));
    assert_eq!(
        sb.pool("failopaks")["properties"]["provisioningState"],
        "Succeeded"
    );
    assert_eq!(sb.pool("failopgke")["status"], "RUNNING");
    assert_eq!(sb.pool("failopeks")["status"], "ACTIVE");
    assert_eq!(ws.plan_exit_code().0, 0);
}

#[test]
fn a_timeout_keeps_the_pool_in_state_and_the_next_apply_repairs() {
    // Operations take 4 s; the create timeout is 1 s.
    let sb = sandbox::start(Duration::from_secs(4));
    let short = timeouts("1s");
    let ws = Workspace::new(&config(
        &sb.url,
        &[eks("sloweks", &short), aks("slowaks", &short)],
    ));
    ws.init();
    let t = Instant::now();
    let out = apply(&ws);
    let took = t.elapsed();
    assert_ne!(out.code, 0, "apply times out:\n{}", out.text());
    let text = out.text();
    assert!(
        text.matches("Timed out").count() >= 2,
        "a Timed out diagnostic per pool:\n{text}"
    );
    assert!(text.contains("timeouts block"), "{text}");
    assert!(
        took < Duration::from_secs(4),
        "the timeout ends the wait before the operation does: {took:?}"
    );
    // The pools exist (still being created) and are in state, tainted: nothing is orphaned.
    let state = assert_inventory_equals_state(&ws, &sb.url);
    assert_eq!(state.len(), 2);
    assert!(state.iter().all(|p| p.tainted));

    // A longer limit: the next apply replaces the half-made pools and succeeds.
    let long = timeouts("2m");
    ws.write(
        "main.tf",
        &config(&sb.url, &[eks("sloweks", &long), aks("slowaks", &long)]),
    );
    let out = apply(&ws);
    assert_eq!(out.code, 0, "the repairing apply succeeds:\n{}", out.text());
    let state = assert_inventory_equals_state(&ws, &sb.url);
    assert_eq!(state.len(), 2);
    assert!(state.iter().all(|p| !p.tainted));
    assert_eq!(sb.pool("sloweks")["status"], "ACTIVE");
    assert_eq!(ws.plan_exit_code().0, 0);
}

// ------------------------------------------------------------------------- sandbox restart mid-apply

/// `fracgpu-sandbox serve` as a child process; answers it with its base URL once it listens.
fn serve(port: u16, op_seconds: &str, state: &Path) -> (Child, String) {
    let mut child = Command::new(crate::common::sandbox::binary())
        .args([
            "serve",
            "--port",
            &port.to_string(),
            "--op-seconds",
            op_seconds,
        ])
        .arg("--state")
        .arg(state)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("fracgpu-sandbox starts");
    let mut out = BufReader::new(child.stdout.take().expect("stdout"));
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    let base = line
        .strip_prefix("fracgpu-sandbox listening on ")
        .and_then(|r| r.split_whitespace().next())
        .unwrap_or_else(|| panic!("no address in {line:?}"))
        .to_string();
    // Keep draining stdout so the child never blocks on a full pipe.
    std::thread::spawn(move || for _ in out.lines() {});
    (child, base)
}

/// Kills the sandbox without warning (SIGKILL), as a crash would.
fn crash(child: &mut Child) {
    child.kill().expect("kill the sandbox");
    child.wait().expect("reap the sandbox");
}

struct Reap(Child);
impl Drop for Reap {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn a_sandbox_restart_mid_apply_is_ridden_over() {
    let dir = tempfile::tempdir().unwrap();
    let state_file = dir.path().join("world.json");
    let (child, url) = serve(0, "3", &state_file);
    let mut sandbox_proc = Reap(child);
    let port: u16 = url.rsplit(':').next().unwrap().parse().unwrap();

    let ws = Workspace::new(&config(
        &url,
        &[
            aks("rsaks", &timeouts("2m")),
            gke("rsgke", &timeouts("2m")),
            eks("rseks", &timeouts("2m")),
        ],
    ));
    ws.init();
    let started = Instant::now();
    let out = std::thread::scope(|s| {
        let apply = s.spawn(|| apply(&ws));
        // Wait until all three creates were accepted and their operations are running.
        loop {
            let inv = sandbox::inventory(&url).expect("the sandbox answers");
            let pools = inv["pools"].as_array().cloned().unwrap_or_default();
            if pools.len() == 3 {
                let states: Vec<&str> = pools.iter().filter_map(|p| p["state"].as_str()).collect();
                assert!(
                    states
                        .iter()
                        .all(|s| matches!(*s, "Creating" | "PROVISIONING" | "CREATING")),
                    "killed while the creates are in flight: {states:?}"
                );
                break;
            }
            if apply.is_finished() || started.elapsed() > Duration::from_secs(20) {
                let out = apply.join().expect("apply thread");
                panic!(
                    "the creates never all reached the sandbox: {inv}\n{}",
                    out.text()
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        crash(&mut sandbox_proc.0);
        // Down long enough for several polls and retries to fail with refused connections.
        std::thread::sleep(Duration::from_millis(1500));
        let (child, again) = serve(port, "3", &state_file);
        assert_eq!(again, url, "restarted on the same port");
        sandbox_proc = Reap(child);
        apply.join().expect("apply thread")
    });
    assert_eq!(out.code, 0, "apply rides over the restart:\n{}", out.text());
    let state = assert_inventory_equals_state(&ws, &url);
    assert_eq!(state.len(), 3);
    assert!(state.iter().all(|p| !p.tainted));
    let inv = sandbox::inventory(&url).unwrap();
    for p in inv["pools"].as_array().unwrap() {
        assert!(
            matches!(
                p["state"].as_str(),
                Some("Succeeded" | "RUNNING" | "ACTIVE")
            ),
            "the restored operations finished: {p}"
        );
    }
    let (code, plan) = ws.plan_exit_code();
    assert_eq!(code, 0, "converged:\n{}", plan.text());
    ws.ok(&["destroy", "-auto-approve", "-no-color"]);
    assert!(assert_inventory_equals_state(&ws, &url).is_empty());
    drop(sandbox_proc);
}

/// A pool of the same name that someone else made (here another team's terraform, with other
/// settings) is refused, never taken into state: a failed create's pool goes to state tainted,
/// and the next apply would destroy it. On every cloud, across two applies.
#[test]
fn someone_elses_pool_of_the_same_name_is_never_taken_into_state() {
    let sb = sandbox::start(Duration::ZERO);
    // One resource per cloud, each pool named "samename".
    let theirs: Vec<String> = [
        ("aks", aks("samename", "")),
        ("gke", gke("samename", "")),
        ("eks", eks("samename", "")),
    ]
    .into_iter()
    .map(|(cloud, p)| p.replacen("\"samename\"", &format!("\"{cloud}\""), 1))
    .collect();
    let their_ws = Workspace::new(&config(&sb.url, &theirs));
    their_ws.init();
    their_ws.apply();
    let before = pools::inventory_pools(&sandbox::inventory(&sb.url).unwrap());
    assert_eq!(before.len(), 3);

    let ours: Vec<String> = theirs
        .iter()
        .map(|p| p.replace("replicas = 4", "replicas = 2"))
        .collect();
    let ws = Workspace::new(&config(&sb.url, &ours));
    ws.init();
    for attempt in 1..=2 {
        let out = apply(&ws);
        let text = out.text();
        assert_eq!(out.code, 1, "attempt {attempt}:\n{text}");
        assert_eq!(
            text.matches("Error: Pool conflict").count(),
            3,
            "attempt {attempt}: each cloud refuses the name:\n{text}"
        );
        let listed = ws.ok(&["state", "list"]).stdout;
        assert!(
            listed.trim().is_empty(),
            "attempt {attempt}: nothing of theirs in our state: {listed}"
        );
        let now = pools::inventory_pools(&sandbox::inventory(&sb.url).unwrap());
        assert_eq!(now, before, "attempt {attempt}: their pools are untouched");
    }
    // Theirs still plans clean.
    assert_eq!(their_ws.plan_exit_code().0, 0);
}
