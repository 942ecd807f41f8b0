//! Prints the node pool resource's figures (no assertions): wall time to apply 30 pools with a 2 s
//! operation time at terraform's default parallelism against the ideal of 3 waves, the cloud API
//! requests per pool during that apply, 10 GKE pools on one cluster against the ideal of two
//! operation times (GKE's 5 operations per cluster), `terraform plan` of 200 pools against 200
//! `terraform_data` resources, and the peak RSS of the provider processes during that plan.
//! Run with `cargo bench --bench nodepool`.
//!
//! The sandbox runs in this process behind a counting layer, so requests are counted from outside
//! the provider and the sandbox alike.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ::sandbox::{ClusterSpec, Config, Sandbox};
use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::Response;

use testkit::figures;

#[path = "support/workspace.rs"]
mod workspace;
use workspace::{PLAN_ROUNDS, Workspace, data_tf, pools_tf, secs};

const PROVIDER: &str = env!("CARGO_BIN_EXE_terraform-provider-fracgpu");

/// One request: arrival, cloud, method, path, status.
type Logged = (Instant, &'static str, String, String, u16);

/// Requests seen by the sandbox, keyed by (cloud, method, route kind, status).
#[derive(Default)]
struct Counter {
    hits: Mutex<BTreeMap<(String, String, String, u16), u64>>,
    /// Server-side handling time per cloud (sum, in microseconds), to tell waiting from serving.
    busy_us: Mutex<BTreeMap<String, u64>>,
    /// When each create request arrived, to show the waves terraform's parallelism makes.
    creates: Mutex<Vec<Instant>>,
    /// When the last response of any kind left.
    last: Mutex<Option<Instant>>,
    /// Every request (arrival, cloud, method, path, status), printed with FRACGPU_BENCH_VERBOSE.
    log: Mutex<Vec<Logged>>,
}

impl Counter {
    fn reset(&self) {
        self.hits.lock().unwrap().clear();
        self.busy_us.lock().unwrap().clear();
        self.creates.lock().unwrap().clear();
        *self.last.lock().unwrap() = None;
        self.log.lock().unwrap().clear();
    }

    fn snapshot(&self) -> BTreeMap<(String, String, String, u16), u64> {
        self.hits.lock().unwrap().clone()
    }

    fn per_cloud(&self) -> BTreeMap<String, u64> {
        let mut out = BTreeMap::new();
        for ((cloud, ..), n) in self.snapshot() {
            *out.entry(cloud).or_default() += n;
        }
        out
    }
}

/// The cloud a sandbox path belongs to and a coarse route kind (names and ids left out).
fn classify(path: &str) -> (&'static str, String) {
    let segs: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    if path.contains("/oauth2/") {
        return ("aks", "token".into());
    }
    if path.starts_with("/subscriptions/") {
        // .../agentPools/NAME, .../operations/ID, .../operationresults/ID
        let kind = segs
            .iter()
            .rev()
            .nth(1)
            .map(|s| s.to_string())
            .unwrap_or_default();
        let kind = match segs.last() {
            Some(&"agentPools") => "agentPools (list)".to_string(),
            _ => kind,
        };
        return ("aks", kind);
    }
    if path.starts_with("/v1/") || path.starts_with("/compute/") {
        let kind = if path.contains("/operations/") {
            "operations".into()
        } else if path.starts_with("/compute/") {
            "instanceGroupManagers".into()
        } else if path.ends_with("/nodePools") {
            "nodePools (list)".into()
        } else if path.contains("/nodePools/") {
            "nodePools".into()
        } else {
            segs.iter()
                .rev()
                .nth(1)
                .map(|s| s.to_string())
                .unwrap_or_default()
        };
        return ("gke", kind);
    }
    if path.starts_with("/clusters") {
        let kind = if path.contains("/updates") {
            "updates"
        } else if path.ends_with("/node-groups") {
            "node-groups (list)"
        } else if path.contains("/node-groups/") {
            "node-groups"
        } else {
            "clusters"
        };
        return ("eks", kind.into());
    }
    ("other", path.to_string())
}

async fn count(State(c): State<Arc<Counter>>, req: Request, next: Next) -> Response {
    let path = req.uri().path().to_string();
    let (cloud, kind) = classify(&path);
    let method = req.method().to_string();
    let start = Instant::now();
    let create = matches!(
        (cloud, method.as_str(), kind.as_str()),
        ("aks", "PUT", "agentPools")
            | ("gke", "POST", "nodePools (list)")
            | ("eks", "POST", "node-groups (list)")
    );
    if create {
        c.creates.lock().unwrap().push(start);
    }
    let resp = next.run(req).await;
    let us = start.elapsed().as_micros() as u64;
    *c.hits
        .lock()
        .unwrap()
        .entry((cloud.into(), method.clone(), kind, resp.status().as_u16()))
        .or_default() += 1;
    *c.busy_us.lock().unwrap().entry(cloud.into()).or_default() += us;
    *c.last.lock().unwrap() = Some(Instant::now());
    c.log
        .lock()
        .unwrap()
        .push((start, cloud, method, path, resp.status().as_u16()));
    resp
}

struct Running {
    url: String,
    counter: Arc<Counter>,
    sandbox: Sandbox,
}

fn start_sandbox(op_time: Duration) -> Running {
    // EKS's node group quota (30 by default, adjustable) raised to fit the 200-pool plan's 66.
    let clusters = ClusterSpec::defaults_with_nodegroup_quota(100);
    let sandbox = Sandbox::open(Config {
        op_time,
        clusters,
        ..Config::default()
    })
    .expect("sandbox opens");
    let counter = Arc::new(Counter::default());
    let router = sandbox
        .router()
        .layer(axum::middleware::from_fn_with_state(counter.clone(), count));
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            tx.send(listener.local_addr().unwrap()).unwrap();
            if std::env::var_os("FRACGPU_BENCH_NODELAY").is_some() {
                use axum::serve::ListenerExt;
                let listener = listener.tap_io(|tcp| {
                    let _ = tcp.set_nodelay(true);
                });
                axum::serve(listener, router).await.unwrap();
            } else {
                axum::serve(listener, router).await.unwrap();
            }
        });
    });
    let addr = rx.recv().expect("sandbox listening");
    Running {
        url: format!("http://{addr}"),
        counter,
        sandbox,
    }
}

/// A python wrapper that runs the provider and appends the peak RSS (KiB) of its child to `log`.
fn rss_wrapper(dir: &Path, log: &Path) -> PathBuf {
    let wrapper = dir.join("wrapper.py");
    std::fs::write(
        &wrapper,
        format!(
            "#!/usr/bin/env python3\nimport resource, subprocess, sys\np = subprocess.run([{PROVIDER:?}] + sys.argv[1:])\nwith open({:?}, 'a') as f:\n    r = resource.getrusage(resource.RUSAGE_CHILDREN)\n    f.write('%d %.3f\\n' % (r.ru_maxrss, r.ru_utime + r.ru_stime))\nsys.exit(p.returncode)\n",
            log.display().to_string()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&wrapper, std::fs::Permissions::from_mode(0o755)).unwrap();
    wrapper
}

fn breakdown(title: &str, c: &Counter) {
    println!("  {title}");
    for ((cloud, method, kind, status), n) in c.snapshot() {
        println!("    {cloud:<4} {method:<6} {kind:<24} {status}  x{n}");
    }
    for (cloud, us) in c.busy_us.lock().unwrap().iter() {
        println!(
            "    {cloud:<4} time inside the sandbox: {:.3} s in all",
            *us as f64 / 1e6
        );
    }
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let verbose = std::env::var_os("FRACGPU_BENCH_VERBOSE").is_some();
    println!(
        "terraform-provider-fracgpu node pool benchmarks ({} build, terraform default parallelism 10)",
        if cfg!(debug_assertions) {
            "debug"
        } else {
            "release"
        }
    );

    // 1. 30 pools, 2 s operations.
    let per_cloud = 10;
    let sb = start_sandbox(Duration::from_secs(2));
    let ws = Workspace::new(
        Path::new(PROVIDER),
        &pools_tf(&sb.url, per_cloud, per_cloud, per_cloud),
    );
    ws.init();
    sb.counter.reset();
    let t0 = Instant::now();
    let apply30 = ws.apply();
    let creates: Vec<f64> = sb
        .counter
        .creates
        .lock()
        .unwrap()
        .iter()
        .map(|t| secs(t.duration_since(t0)))
        .collect();
    let last_api = sb
        .counter
        .last
        .lock()
        .unwrap()
        .map(|t| secs(t.duration_since(t0)))
        .unwrap_or(0.0);
    let op = sb.sandbox.op_time();
    let ideal = op * 3;
    let reqs = sb.counter.per_cloud();
    let snapshot30 = sb.counter.snapshot();
    let throttled: u64 = snapshot30
        .iter()
        .filter(|((.., s), _)| *s == 429)
        .map(|(_, n)| n)
        .sum();
    let apply_breakdown = {
        let mut s = String::new();
        for ((cloud, method, kind, status), n) in &snapshot30 {
            s += &format!("    {cloud:<4} {method:<6} {kind:<24} {status}  x{n}\n");
        }
        s
    };
    let apply_busy = sb.counter.busy_us.lock().unwrap().clone();
    let apply_log = sb.counter.log.lock().unwrap().clone();
    // Destroy is not measured; it only keeps the sandbox tidy.
    ws.tf(&["destroy", "-auto-approve", "-input=false"]);

    // 1b. 10 GKE pools on one cluster, 2 s operations: GKE runs 5 operations per cluster at once,
    // so the ideal is two operation times.
    let sb_gke = start_sandbox(Duration::from_secs(2));
    let ws_gke = Workspace::new(Path::new(PROVIDER), &pools_tf(&sb_gke.url, 0, 10, 0));
    ws_gke.init();
    sb_gke.counter.reset();
    let apply_gke10 = ws_gke.apply();
    let gke10_requests = sb_gke.counter.per_cloud().get("gke").copied().unwrap_or(0);
    let gke10_refused: u64 = sb_gke
        .counter
        .snapshot()
        .iter()
        .filter(|((.., s), _)| *s == 429 || *s == 400)
        .map(|(_, n)| n)
        .sum();
    let gke10_ideal = sb_gke.sandbox.op_time() * 2;
    ws_gke.tf(&["destroy", "-auto-approve", "-input=false"]);

    // 2. 200 pools already in state (created with instant operations) vs 200 terraform_data.
    let (a, g, e) = (67, 67, 66);
    let n = a + g + e;
    let sb0 = start_sandbox(Duration::ZERO);
    let main_tf = pools_tf(&sb0.url, a, g, e);
    let pools = Workspace::new(Path::new(PROVIDER), &main_tf);
    pools.init();
    pools.apply();
    sb0.counter.reset();
    let plan_pools = pools.plan_median();
    let plan_pools_norefresh = {
        let mut t: Vec<Duration> = (0..PLAN_ROUNDS)
            .map(|_| pools.tf(&["plan", "-input=false", "-refresh=false"]))
            .collect();
        t.sort();
        t[t.len() / 2]
    };
    let plan_reqs = sb0.counter.per_cloud();
    if verbose {
        breakdown("requests during the 200-pool plans", &sb0.counter);
    }

    let data = Workspace::new(Path::new(PROVIDER), &data_tf(n));
    data.init();
    data.apply();
    let plan_data = data.plan_median();

    // 3. Peak RSS of every provider process of one 200-pool plan: same config and state, provider
    // behind the wrapper (kept out of the timed plans: the python start would be counted).
    let rss_root = tempfile::tempdir().unwrap();
    let rss_log = rss_root.path().join("rss.log");
    let wrapper = rss_wrapper(rss_root.path(), &rss_log);
    let measured = Workspace::new(&wrapper, &main_tf);
    std::fs::copy(
        pools.dir.join("terraform.tfstate"),
        measured.dir.join("terraform.tfstate"),
    )
    .unwrap();
    measured.init();
    let _ = std::fs::remove_file(&rss_log);
    // The terraform side's CPU too: terraform runs under python, whose children's rusage covers
    // terraform and every provider process terraform reaped.
    let out = Command::new("python3")
        .args([
            "-c",
            "import resource, subprocess, sys\np = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL)\nr = resource.getrusage(resource.RUSAGE_CHILDREN)\nprint('%.3f' % (r.ru_utime + r.ru_stime))\nsys.exit(p.returncode)",
            "terraform",
            "plan",
            "-input=false",
            "-refresh=true",
            "-no-color",
        ])
        .current_dir(&measured.dir)
        .env("TF_CLI_CONFIG_FILE", &measured.cli)
        .env("CHECKPOINT_DISABLE", "1")
        .env("TF_IN_AUTOMATION", "1")
        .output()
        .unwrap();
    assert!(out.status.success(), "measured plan failed");
    let total_cpu: f64 = String::from_utf8_lossy(&out.stdout)
        .trim()
        .parse()
        .unwrap_or(f64::NAN);
    let lines: Vec<(u64, f64)> = std::fs::read_to_string(&rss_log)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| {
            let mut it = l.split_whitespace();
            Some((it.next()?.parse().ok()?, it.next()?.parse().ok()?))
        })
        .collect();
    let rss: Vec<u64> = lines.iter().map(|(k, _)| *k).collect();
    let provider_cpu: f64 = lines.iter().map(|(_, c)| c).sum();

    let per_pool = |cloud: &str, map: &BTreeMap<String, u64>, pools: usize| {
        map.get(cloud).copied().unwrap_or(0) as f64 / pools as f64
    };
    let total30: u64 = reqs.values().sum();
    let peak_rss = rss.iter().copied().max().unwrap_or(0) as f64 / 1024.0;
    figures::record(
        "plan200_pools",
        &format!("terraform plan, {n} fracgpu_nodepool (refresh against the sandbox)"),
        secs(plan_pools),
        "s",
        &format!("median of {PLAN_ROUNDS}"),
    );
    figures::record(
        "plan200_data",
        &format!("terraform plan, {n} terraform_data"),
        secs(plan_data),
        "s",
        &format!("median of {PLAN_ROUNDS}: terraform's own floor"),
    );
    figures::record(
        "plan200_ratio",
        "  provider overhead: nodepool plan / terraform_data plan",
        secs(plan_pools) / secs(plan_data),
        "x",
        "",
    );
    figures::record(
        "apply30",
        &format!(
            "apply 30 pools, {:.0} s operations, parallelism 10",
            secs(op)
        ),
        secs(apply30),
        "s",
        &format!(
            "ideal 3 waves x {:.0} s = {:.0} s: {:.2}x ideal",
            secs(op),
            secs(ideal),
            secs(apply30) / secs(ideal)
        ),
    );
    figures::record(
        "apply_gke10",
        "apply 10 GKE pools on one cluster, 2 s operations",
        secs(apply_gke10),
        "s",
        &format!(
            "ideal 2 x {:.0} s under GKE's 5 operations per cluster: {:.2}x ideal; {:.1} requests per pool, {gke10_refused} refused",
            secs(op),
            secs(apply_gke10) / secs(gke10_ideal),
            gke10_requests as f64 / 10.0
        ),
    );
    for cloud in ["aks", "gke", "eks"] {
        figures::record(
            &format!("requests_{cloud}"),
            &format!(
                "  API requests per pool during that apply, {}",
                cloud.to_uppercase()
            ),
            per_pool(cloud, &reqs, per_cloud),
            "",
            &format!("{throttled} of all {total30} requests answered 429"),
        );
    }
    figures::record(
        "rss_plan200",
        &format!("peak provider RSS during the {n}-pool plan"),
        peak_rss,
        "MiB",
        &format!("{} provider processes", rss.len()),
    );
    println!();
    println!("{:<58} {:>12}   reference", "figure", "measured");
    println!(
        "{:<58} {:>10.2} s   ideal 3 waves x {:.0} s = {:.0} s (+ terraform overhead); {:.2}x ideal",
        format!(
            "apply 30 pools ({per_cloud} AKS, {per_cloud} GKE, {per_cloud} EKS), op time {:.0} s",
            secs(op)
        ),
        secs(apply30),
        secs(op),
        secs(ideal),
        secs(apply30) / secs(ideal)
    );
    for cloud in ["aks", "gke", "eks"] {
        println!(
            "{:<58} {:>12.1}   {} requests in all",
            format!(
                "  API requests per pool during apply, {}",
                cloud.to_uppercase()
            ),
            per_pool(cloud, &reqs, per_cloud),
            reqs.get(cloud).copied().unwrap_or(0)
        );
    }
    println!(
        "{:<58} {:>12.1}   {} requests, {} answered 429",
        "  API requests per pool during apply, all clouds",
        total30 as f64 / 30.0,
        total30,
        throttled
    );
    println!(
        "{:<58} {:>10.3} s   median of {PLAN_ROUNDS}",
        format!("plan (refresh) {n} fracgpu_nodepool in state ({a}/{g}/{e})"),
        secs(plan_pools)
    );
    println!(
        "{:<58} {:>10.3} s   median of {PLAN_ROUNDS}",
        format!("plan (refresh) {n} terraform_data in state"),
        secs(plan_data)
    );
    println!(
        "{:<58} {:>11.2}x",
        "  ratio nodepool / terraform_data",
        secs(plan_pools) / secs(plan_data)
    );
    println!(
        "{:<58} {:>10.3} s   median of {PLAN_ROUNDS}; no ReadResource, no API call",
        format!("plan -refresh=false {n} fracgpu_nodepool"),
        secs(plan_pools_norefresh)
    );
    let plan_total: u64 = plan_reqs.values().sum();
    println!(
        "{:<58} {:>12.2}   {} requests over {PLAN_ROUNDS} plans",
        "  API requests per pool per plan",
        plan_total as f64 / (n * PLAN_ROUNDS) as f64,
        plan_total
    );
    println!(
        "{:<58} {:>8.1} MiB   {} provider processes in one plan, each {} MiB",
        format!("peak provider RSS during the {n}-pool plan"),
        rss.iter().copied().max().unwrap_or(0) as f64 / 1024.0,
        rss.len(),
        rss.iter()
            .map(|k| format!("{:.1}", *k as f64 / 1024.0))
            .collect::<Vec<_>>()
            .join("/")
    );
    println!(
        "{:<58} {:>10.2} s   terraform + providers {:.2} s CPU (python wrappers included)",
        "  CPU of the provider processes in that plan", provider_cpu, total_cpu
    );
    println!();
    let at = |i: usize| creates.get(i).copied().unwrap_or(f64::NAN);
    println!(
        "30-pool apply timeline (s after `terraform apply` started): creates #1 {:.2}, #11 {:.2}, #21 {:.2}, #30 {:.2}; last API response {:.2}; terraform exited {:.2}",
        at(0),
        at(10),
        at(20),
        at(29),
        last_api,
        secs(apply30)
    );
    if verbose {
        println!(
            "every request of the 30-pool apply (s after start, cloud, method, path, status):"
        );
        for (t, cloud, method, path, status) in &apply_log {
            let short = path.rsplit('/').take(2).collect::<Vec<_>>();
            println!(
                "    {:>6.2} {cloud} {method:<5} .../{}/{} {status}",
                secs(t.duration_since(t0)),
                short.get(1).unwrap_or(&""),
                short.first().unwrap_or(&"")
            );
        }
    }
    println!("requests during the 30-pool apply (cloud, method, route, status):");
    print!("{apply_breakdown}");
    for (cloud, us) in apply_busy {
        println!(
            "    {cloud:<4} time inside the sandbox: {:.3} s in all",
            us as f64 / 1e6
        );
    }
    pools.tf(&["destroy", "-auto-approve", "-input=false"]);
}
