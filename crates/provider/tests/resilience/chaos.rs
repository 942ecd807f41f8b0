//! Chaos: 20 `fracgpu_nodepool`s across AKS, GKE and EKS applied and destroyed by the real
//! terraform binary while the sandbox fails requests at random (429s, 503s, connections dropped
//! before or after the cloud acted, operations that end Failed), seeded so a run replays from its
//! seed. Failures of terraform are allowed, as real clouds cause them; disagreement is not: after
//! every step each pool in the cloud is in terraform's state with the same ID, node count and
//! labels, a pool in state but not in the cloud is one whose create or delete failed, and once the
//! faults stop a re-apply converges and a destroy leaves the cloud empty.
//!
//! `FRACGPU_CHAOS_SEEDS` sets the number of seeded runs (default 10), `FRACGPU_CHAOS_SEED` the
//! first seed (default 1), `FRACGPU_CHAOS_RATE` the fault rate (default 0.15),
//! `FRACGPU_CHAOS_WORKERS` how many runs go at once (default 3; each has its own sandbox and
//! workspace).

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::common::pools::{self, Agreement, Decl};
use crate::common::sandbox;
use crate::common::terraform::{Output, Workspace};
use serde_json::{Value, json};

/// Short operations, so that ten runs of four applies stay well under three minutes.
const OP_TIME: Duration = Duration::from_millis(100);
const KINDS: &[&str] = &["429", "503", "drop", "drop_after", "fail_operation"];

fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// 7 AKS, 7 GKE and 6 EKS pools of one to three nodes (GKE's three, one in each zone of the
/// regional cluster), each with a label of its own.
fn fleet() -> Vec<Decl> {
    (0..20)
        .map(|i| {
            let (cloud, cluster) = match i % 3 {
                0 => ("aks", "sandbox-aks"),
                1 => ("gke", "sandbox-gke"),
                _ => ("eks", "sandbox-eks"),
            };
            let nodes = if cloud == "gke" { 3 } else { 1 + i % 3 };
            Decl::new(cloud, cluster, &format!("chaos{cloud}{i}"), nodes)
        })
        .collect()
}

fn run(ws: &Workspace, args: &[&str]) -> Output {
    ws.run(args)
}

fn apply(ws: &Workspace) -> Output {
    run(ws, &["apply", "-no-color", "-auto-approve", "-input=false"])
}

fn destroy(ws: &Workspace) -> Output {
    run(
        ws,
        &["destroy", "-no-color", "-auto-approve", "-input=false"],
    )
}

fn agreement(ws: &Workspace, url: &str) -> (Agreement, Vec<pools::StatePool>) {
    let state = pools::state_pools(ws);
    let inv = sandbox::inventory(url).expect("the sandbox answers");
    (pools::compare(&state, &pools::inventory_pools(&inv)), state)
}

/// Problems of one step, as lines for the final report.
fn check(step: &str, a: &Agreement, ghosts_allowed: bool, out: &mut Vec<String>) {
    if !a.orphans.is_empty() {
        out.push(format!(
            "{step}: pools in the cloud but not in state: {:?}",
            a.orphans
        ));
    }
    if !a.differ.is_empty() {
        out.push(format!(
            "{step}: state and cloud differ (state, cloud): {:?}",
            a.differ
        ));
    }
    if !a.ghosts.is_empty() && !ghosts_allowed {
        out.push(format!(
            "{step}: pools in state but not in the cloud: {:?}",
            a.ghosts
        ));
    }
}

fn injected(report: &Value) -> String {
    let mut parts: Vec<String> = report["injected"]
        .as_object()
        .into_iter()
        .flatten()
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    if parts.is_empty() {
        parts.push("none".into());
    }
    format!(
        "{} of {} requests ({})",
        report["injected"]
            .as_object()
            .map(|o| o.values().filter_map(Value::as_u64).sum::<u64>())
            .unwrap_or(0),
        report["requests"],
        parts.join(" ")
    )
}

/// Adds a chaos report's faults, per kind, to `total`.
fn count_faults(report: &Value, total: &mut BTreeMap<String, u64>) {
    for (k, v) in report["injected"].as_object().into_iter().flatten() {
        *total.entry(k.clone()).or_insert(0) += v.as_u64().unwrap_or(0);
    }
}

/// One seeded run; answers its problems (empty when state and cloud agreed throughout).
fn seeded_run(
    ws: &Workspace,
    fleet: &[Decl],
    seed: u64,
    rate: f64,
    faults: &mut BTreeMap<String, u64>,
) -> Vec<String> {
    let started = Instant::now();
    let sb = sandbox::start(OP_TIME);
    ws.write("main.tf", &pools::config(&sb.url, fleet, ""));
    let mut problems = Vec::new();
    let chaos = json!({"seed": seed, "rate": rate, "kinds": KINDS, "retry_after": 1});

    // 1. Apply under chaos: may fail, must not lose track of a pool.
    sandbox::arm_chaos(&sb.url, chaos.clone());
    let t = Instant::now();
    let out = apply(ws);
    let took = t.elapsed();
    let report = sandbox::disarm_chaos(&sb.url);
    let (a, state) = agreement(ws, &sb.url);
    // A create that failed keeps its pool in state, tainted; when the cloud could not even say
    // whether it has the pool, state keeps it (tainted) all the same, and the next refresh drops
    // it. A clean apply taints nothing.
    check("apply under chaos", &a, true, &mut problems);
    let untainted_ghosts: Vec<_> = state
        .iter()
        .filter(|p| !p.tainted && a.ghosts.contains(&p.record))
        .map(|p| p.record.name.clone())
        .collect();
    if !untainted_ghosts.is_empty() {
        problems.push(format!(
            "apply under chaos: untainted pools in state but not in the cloud: {untainted_ghosts:?}"
        ));
    }
    eprintln!(
        "seed {seed}: apply under chaos: exit {} in {took:.1?}, {} faults; {} pools in state ({} tainted, {} of them not in the cloud), {} in the cloud",
        out.code,
        injected(&report),
        state.len(),
        a.tainted,
        a.ghosts.len(),
        a.in_both + a.orphans.len() + a.differ.len(),
    );
    count_faults(&report, faults);
    if out.code == 0 && (state.len() != fleet.len() || a.tainted > 0) {
        problems.push(format!(
            "apply under chaos succeeded with {} pools in state ({} tainted):\n{}",
            state.len(),
            a.tainted,
            out.text()
        ));
    }

    // 2. Faults off: the next apply converges.
    let t = Instant::now();
    let out = apply(ws);
    let took = t.elapsed();
    if out.code != 0 {
        problems.push(format!("re-apply without faults failed:\n{}", out.text()));
    }
    let (a, state) = agreement(ws, &sb.url);
    check("re-apply", &a, false, &mut problems);
    if a.in_both != fleet.len() || a.tainted != 0 {
        problems.push(format!(
            "re-apply: {} of {} pools agree, {} tainted",
            a.in_both,
            fleet.len(),
            a.tainted
        ));
    }
    let inv = sandbox::inventory(&sb.url).expect("the sandbox answers");
    let remade: Vec<String> = pools::creates(&inv)
        .into_iter()
        .filter(|(_, n)| n.made > 1)
        .map(|((_, _, name), n)| format!("{name}x{}", n.made))
        .collect();
    eprintln!(
        "seed {seed}: re-apply: exit {} in {took:.1?}; {} pools agree; pools made more than once (replaced after a failed create): {}",
        out.code,
        state.len(),
        if remade.is_empty() {
            "none".to_string()
        } else {
            remade.join(" ")
        }
    );

    // 3. Destroy under chaos: may fail, must not drop a pool from state that the cloud keeps.
    sandbox::arm_chaos(&sb.url, chaos);
    let t = Instant::now();
    let out = destroy(ws);
    let took = t.elapsed();
    let report = sandbox::disarm_chaos(&sb.url);
    count_faults(&report, faults);
    let (a, state) = agreement(ws, &sb.url);
    // A delete that failed after the cloud accepted it leaves the pool in state while the cloud
    // finishes deleting it: the next refresh drops it.
    check("destroy under chaos", &a, true, &mut problems);
    eprintln!(
        "seed {seed}: destroy under chaos: exit {} in {took:.1?}, {} faults; {} pools left in state, {} of them gone from the cloud",
        out.code,
        injected(&report),
        state.len(),
        a.ghosts.len()
    );
    if out.code == 0 && !state.is_empty() {
        problems.push("destroy under chaos succeeded but left state".into());
    }

    // 4. Faults off: destroy leaves nothing.
    let out = destroy(ws);
    if out.code != 0 {
        problems.push(format!("destroy without faults failed:\n{}", out.text()));
    }
    let (a, state) = agreement(ws, &sb.url);
    check("destroy", &a, false, &mut problems);
    let inv = sandbox::inventory(&sb.url).expect("the sandbox answers");
    let left = pools::inventory_pools(&inv);
    if !left.is_empty() || !state.is_empty() {
        problems.push(format!(
            "after destroy: {} pools in the cloud, {} in state",
            left.len(),
            state.len()
        ));
    }
    eprintln!("seed {seed}: done in {:.1?}", started.elapsed());
    problems
        .into_iter()
        .map(|p| format!("seed {seed}: {p}"))
        .collect()
}

#[test]
fn state_and_cloud_agree_under_random_faults() {
    let seeds: u64 = env_or("FRACGPU_CHAOS_SEEDS", 10);
    let first: u64 = env_or("FRACGPU_CHAOS_SEED", 1);
    let rate: f64 = env_or("FRACGPU_CHAOS_RATE", 0.15);
    // A run mostly waits (on terraform, operations, backoffs): a few at once use the machine
    // without crowding it.
    let workers: u64 = env_or("FRACGPU_CHAOS_WORKERS", 3).clamp(1, seeds.max(1));
    let fleet = fleet();
    let started = Instant::now();
    let next = AtomicU64::new(first);
    let problems = Mutex::new(Vec::new());
    let faults = Mutex::new(BTreeMap::new());
    std::thread::scope(|s| {
        for _ in 0..workers {
            s.spawn(|| {
                // One workspace per worker for all its runs: each run ends with an empty state,
                // and a new sandbox URL in the configuration needs no new init.
                let ws = Workspace::new(&pools::config("http://127.0.0.1:1", &fleet, ""));
                ws.init();
                loop {
                    let seed = next.fetch_add(1, Ordering::SeqCst);
                    if seed >= first + seeds {
                        break;
                    }
                    let mut mine = BTreeMap::new();
                    let p = seeded_run(&ws, &fleet, seed, rate, &mut mine);
                    problems.lock().unwrap().extend(p);
                    let mut all = faults.lock().unwrap();
                    for (k, n) in mine {
                        *all.entry(k).or_insert(0) += n;
                    }
                }
            });
        }
    });
    let problems = problems.into_inner().unwrap();
    let faults = faults.into_inner().unwrap();
    eprintln!(
        "{seeds} seeded runs of {} pools at fault rate {rate}, {workers} at a time: {:.1?}; faults injected: {faults:?}",
        fleet.len(),
        started.elapsed()
    );
    // The scenario proves something only if every kind of fault was met.
    if seeds > 0 && rate > 0.0 {
        for kind in KINDS {
            assert!(
                faults.get(*kind).is_some_and(|n| *n > 0),
                "no {kind} fault was injected: {faults:?}"
            );
        }
    }
    assert!(
        problems.is_empty(),
        "state and cloud disagreed (rerun one with FRACGPU_CHAOS_SEED=<seed> FRACGPU_CHAOS_SEEDS=1):\n{}",
        problems.join("\n")
    );
}
