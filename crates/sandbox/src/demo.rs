//! `fracgpu-sandbox demo`: the README's first command. Builds the provider if needed, starts the
//! sandbox, lays the provider out as a local filesystem mirror, and applies `examples/quickstart`
//! through the real terraform binary, printing progress and what a user wants to see: the pools,
//! their nodes and the GPU resources each node offers, and an empty second plan. Then it applies
//! `examples/scale-from-zero` (a pool per cloud autoscaled from zero, one GPU per node shared ten
//! ways), creates ten pending one-slice pods in each cluster through its Kubernetes API, and shows
//! what the sandbox's twin cluster-autoscalers did: one new node per pool, and why.

use std::path::{Path, PathBuf};
use std::process::Command;

const VERSION: &str = env!("CARGO_PKG_VERSION");

pub struct DemoError(pub String);

fn step(msg: &str) {
    eprintln!("==> {msg}");
}

/// The provider binary next to this one, built with cargo when it is missing or older.
fn provider_binary() -> Result<PathBuf, DemoError> {
    let me =
        std::env::current_exe().map_err(|e| DemoError(format!("cannot locate myself: {e}")))?;
    let dir = me
        .parent()
        .ok_or_else(|| DemoError("executable has no directory".into()))?;
    let provider = dir.join("terraform-provider-fracgpu");
    let stale = match (std::fs::metadata(&provider), std::fs::metadata(&me)) {
        (Ok(p), Ok(m)) => p.modified().ok() < m.modified().ok(),
        _ => true,
    };
    if stale {
        step("building terraform-provider-fracgpu");
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let release = dir.ends_with("release");
        let mut cmd = Command::new(cargo);
        cmd.args(["build", "--bin", "terraform-provider-fracgpu"]);
        if release {
            cmd.arg("--release");
        }
        let status = cmd
            .status()
            .map_err(|e| DemoError(format!("could not run cargo: {e}")))?;
        if !status.success() {
            return Err(DemoError(
                "building the provider failed (see cargo's output above)".into(),
            ));
        }
    }
    Ok(provider)
}

fn terraform(dir: &Path, cli_config: &Path, args: &[&str]) -> Result<String, DemoError> {
    let out = Command::new("terraform")
        .args(args)
        .current_dir(dir)
        .env("TF_CLI_CONFIG_FILE", cli_config)
        .env("CHECKPOINT_DISABLE", "1")
        .env("TF_IN_AUTOMATION", "1")
        .output()
        .map_err(|e| {
            DemoError(format!(
                "could not run terraform ({e}); install Terraform >= 1.8 and put it on the PATH"
            ))
        })?;
    if !out.status.success() {
        return Err(DemoError(format!(
            "terraform {} failed:\n{}{}",
            args.join(" "),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Writes the mirror layout and a CLI config that installs the provider from it, offline.
pub fn local_mirror(root: &Path, provider: &Path) -> Result<PathBuf, DemoError> {
    let io = |e: std::io::Error| DemoError(format!("preparing the provider mirror: {e}"));
    let arch = if cfg!(target_arch = "aarch64") {
        "linux_arm64"
    } else {
        "linux_amd64"
    };
    let pkg = root.join(format!(
        "mirror/registry.terraform.io/fracgpu/fracgpu/{VERSION}/{arch}"
    ));
    std::fs::create_dir_all(&pkg).map_err(io)?;
    let target = pkg.join(format!("terraform-provider-fracgpu_v{VERSION}"));
    let _ = std::fs::remove_file(&target);
    std::fs::copy(provider, &target).map_err(io)?;
    let cli = root.join("terraformrc");
    std::fs::write(
        &cli,
        format!(
            "provider_installation \
                {{\n  filesystem_mirror {{\n    path = {:?}\n    include = [\"registry.terraform.io/fracgpu/fracgpu\"]\n  }}\n  direct {{\n    exclude = [\"registry.terraform.io/fracgpu/fracgpu\"]\n  }}\n}}\n",
            root.join("mirror").display().to_string()
        ),
    )
    .map_err(io)?;
    Ok(cli)
}

pub fn run() -> Result<(), DemoError> {
    let provider = provider_binary()?;
    step(
        "starting the sandbox: AKS, GKE and EKS APIs and one Kubernetes API per cluster, on \
            127.0.0.1",
    );
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| DemoError(format!("could not start the runtime: {e}")))?;
    let config = crate::Config {
        op_time: std::time::Duration::from_millis(500),
        pod_buffers: DEMO_POD_BUFFERS,
        ..Default::default()
    };
    let stack = runtime
        .block_on(crate::stack::Stack::start(config, 0))
        .map_err(|e| DemoError(format!("could not start the sandbox: {e}")))?;
    let sandbox_var = format!("sandbox={}", stack.cloud_url());

    let root = std::env::temp_dir().join(format!("fracgpu-demo-{}", std::process::id()));
    let work = root.join("work");
    std::fs::create_dir_all(&work).map_err(|e| DemoError(e.to_string()))?;
    let cli = local_mirror(&root, &provider)?;
    std::fs::write(
        work.join("main.tf"),
        include_str!("../../../examples/quickstart/main.tf"),
    )
    .map_err(|e| DemoError(e.to_string()))?;
    let kubeconfigs = stack
        .write_kubeconfigs(&root.join("kubeconfigs"))
        .map_err(|e| DemoError(format!("could not write the kubeconfigs: {e}")))?;
    let map: serde_json::Map<String, serde_json::Value> = kubeconfigs
        .into_iter()
        .filter(|(cloud, _, _)| cloud != "gke")
        .map(|(cloud, _, path)| (cloud, serde_json::Value::String(path.display().to_string())))
        .collect();
    let vars = [
        sandbox_var,
        format!("kubeconfigs={}", serde_json::Value::Object(map)),
    ];
    let result = quickstart(&work, &cli, &vars, &stack).and_then(|()| {
        let zero = root.join("zero");
        std::fs::create_dir_all(&zero).map_err(|e| DemoError(e.to_string()))?;
        std::fs::write(
            zero.join("main.tf"),
            include_str!("../../../examples/scale-from-zero/main.tf"),
        )
        .map_err(|e| DemoError(e.to_string()))?;
        scale_from_zero(&zero, &cli, &vars, &stack, &runtime)
    });
    let _ = std::fs::remove_dir_all(&root);
    result?;
    step(
        "done. The sandbox and its pools end with this command; against a sandbox of your own \
            (`fracgpu-sandbox serve`) or real clouds, `terraform destroy` removes the pools",
    );
    Ok(())
}

/// terraform with the sandbox's addresses: for every command that evaluates the configuration.
fn terraform_vars(
    dir: &Path,
    cli: &Path,
    vars: &[String],
    args: &[&str],
) -> Result<String, DemoError> {
    let mut all: Vec<&str> = args.to_vec();
    for var in vars {
        all.push("-var");
        all.push(var);
    }
    terraform(dir, cli, &all)
}

fn quickstart(
    work: &Path,
    cli: &Path,
    vars: &[String],
    stack: &crate::stack::Stack,
) -> Result<(), DemoError> {
    let run = |args: &[&str]| terraform_vars(work, cli, vars, args);
    step("terraform init (offline, from a local provider mirror)");
    terraform(work, cli, &["init", "-input=false", "-no-color"])?;
    step(
        "terraform apply: a time-sliced A100 pool on each of AKS, GKE and EKS, and the device \
            plugin config on the AKS and EKS clusters (examples/quickstart)",
    );
    run(&["apply", "-auto-approve", "-input=false", "-no-color"])?;
    let out = terraform(work, cli, &["output", "-json", "pools"])?;
    let pools: serde_json::Value =
        serde_json::from_str(&out).map_err(|e| DemoError(e.to_string()))?;

    println!(
        "\n{:<5} {:<8} {:<26} {:<38} GPU resources the node offers",
        "cloud", "pool", "workloads request", "node"
    );
    let clusters = [
        ("aks", "sandbox-aks"),
        ("gke", "sandbox-gke"),
        ("eks", "sandbox-eks"),
    ];
    for (cloud, cluster) in clusters {
        let p = &pools[cloud];
        let request = format!(
            "{} ({}/node)",
            p["resource_name"].as_str().unwrap_or("?"),
            p["slices_per_node"]
        );
        for node in stack.kube.pool_node_names(cloud, cluster, "a100ts") {
            let offered = stack
                .kube
                .object(cloud, cluster, "nodes", "", &node)
                .and_then(|n| n["status"]["allocatable"].as_object().cloned())
                .map(|a| {
                    a.iter()
                        .filter(|(k, _)| k.starts_with("nvidia.com/"))
                        .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or("?")))
                        .collect::<Vec<_>>()
                        .join(" ")
                })
                .unwrap_or_default();
            println!(
                "{cloud:<5} {:<8} {request:<26} {node:<38} {offered}",
                "a100ts"
            );
        }
    }
    println!();
    plan_empty_then_destroy(&run, "a second plan shows no changes")
}

/// The pending pods each cluster gets: one slice each, so that ten fit one node of ten slices.
const PENDING_PODS: usize = 10;

/// The autoscalers' wait for more pods in the demo: a tenth of upstream's (2 s, and 30 s for pods
/// that request nvidia.com/gpu), as the demo's operations take 0.5 s where a cloud's take minutes.
const DEMO_POD_BUFFERS: crate::PodBuffers = crate::PodBuffers {
    new_pods: std::time::Duration::from_millis(200),
    new_gpu_pods: std::time::Duration::from_secs(3),
};

/// One pending pod of one slice, placed as the pool's computed attributes say (what a user's
/// Deployment would carry).
fn pending_pod(pool: &serde_json::Value, i: usize) -> serde_json::Value {
    let resource = pool["resource_name"].as_str().unwrap_or("nvidia.com/gpu");
    serde_json::json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": format!("slice-{i}"), "namespace": "default"},
        "spec": {
            "nodeSelector": pool["node_selector"],
            "tolerations": pool["tolerations"],
            "containers": [{
                "name": "model",
                "image": "registry.example/model:1",
                "resources": {"limits": {resource: "1"}}
            }]
        }
    })
}

/// Creates the pods over HTTPS with the cluster's bearer token, as kubectl would; each write lets
/// the twin's cluster-autoscaler look at the cluster before it answers.
fn create_pods(
    stack: &crate::stack::Stack,
    runtime: &tokio::runtime::Runtime,
    cloud: &str,
    cluster: &str,
    pool: &serde_json::Value,
) -> Result<(), DemoError> {
    let err = |e: String| DemoError(format!("{cloud}: creating the pending pods: {e}"));
    let ca = reqwest::Certificate::from_pem(stack.kube.ca_pem().as_bytes())
        .map_err(|e| err(e.to_string()))?;
    let http = reqwest::Client::builder()
        .add_root_certificate(ca)
        .timeout(std::time::Duration::from_secs(20))
        .build()
        .map_err(|e| err(e.to_string()))?;
    let token = stack
        .kube
        .token(cloud, cluster)
        .ok_or_else(|| err("the cluster has no Kubernetes API".into()))?;
    let url = format!(
        "{}/k8s/{cloud}/{cluster}/api/v1/namespaces/default/pods",
        stack.kube_url()
    );
    runtime.block_on(async {
        for i in 0..PENDING_PODS {
            let resp = http
                .post(&url)
                .bearer_auth(&token)
                .json(&pending_pod(pool, i))
                .send()
                .await
                .map_err(|e| err(e.to_string()))?;
            if !resp.status().is_success() {
                let status = resp.status();
                let body = resp.text().await.unwrap_or_default();
                return Err(err(format!("{status}: {body}")));
            }
        }
        Ok(())
    })
}

/// What each node of a pool offers of `resource`, e.g. "10" (or "10,10" for two nodes).
fn slices_offered(
    stack: &crate::stack::Stack,
    cloud: &str,
    cluster: &str,
    pool: &str,
    resource: &str,
) -> String {
    let offered: Vec<String> = stack
        .kube
        .pool_node_names(cloud, cluster, pool)
        .iter()
        .map(|node| {
            stack
                .kube
                .object(cloud, cluster, "nodes", "", node)
                .and_then(|n| {
                    n["status"]["allocatable"][resource]
                        .as_str()
                        .map(String::from)
                })
                .unwrap_or_else(|| "?".into())
        })
        .collect();
    if offered.is_empty() {
        "-".into()
    } else {
        offered.join(",")
    }
}

fn scale_from_zero(
    work: &Path,
    cli: &Path,
    vars: &[String],
    stack: &crate::stack::Stack,
    runtime: &tokio::runtime::Runtime,
) -> Result<(), DemoError> {
    let run = |args: &[&str]| terraform_vars(work, cli, vars, args);
    step(
        "terraform apply: a pool per cloud autoscaled from zero nodes, one GPU per node \
            time-sliced ten ways (examples/scale-from-zero)",
    );
    terraform(work, cli, &["init", "-input=false", "-no-color"])?;
    run(&["apply", "-auto-approve", "-input=false", "-no-color"])?;
    let out = terraform(work, cli, &["output", "-json", "pools"])?;
    let pools: serde_json::Value =
        serde_json::from_str(&out).map_err(|e| DemoError(e.to_string()))?;
    step(&format!(
        "{PENDING_PODS} pending pods of one slice each in every cluster, through its Kubernetes \
            API; the sandbox's cluster-autoscalers answer"
    ));
    let seen = stack
        .sandbox
        .with_world(|w, _| w.autoscaler.decisions.len());
    let mut grown = Vec::new();
    for (cloud, cluster) in [
        ("aks", "sandbox-aks"),
        ("gke", "sandbox-gke"),
        ("eks", "sandbox-eks"),
    ] {
        let pool = &pools[cloud];
        let name = pool["name"].as_str().unwrap_or("?");
        let before = stack.kube.pool_node_names(cloud, cluster, name).len();
        create_pods(stack, runtime, cloud, cluster, pool)?;
        grown.push(Grown {
            cloud,
            cluster,
            pool,
            name,
            before,
            after: before,
        });
    }
    step(&format!(
        "the autoscalers wait for more pods before they scale up, as cluster-autoscaler does: \
            here {} s for pods that request nvidia.com/gpu (upstream 30 s)",
        DEMO_POD_BUFFERS.new_gpu_pods.as_secs_f64()
    ));
    wait_for_nodes(stack, &mut grown);
    // Only what these pods caused: the log also holds the quick start's history.
    let decisions = stack.sandbox.with_world(|w, _| {
        w.autoscaler
            .decisions
            .iter()
            .skip(seen)
            .cloned()
            .collect::<Vec<_>>()
    });
    println!(
        "\n{:<5} {:<8} {:<24} {:<15} {:<11} why (the autoscaler's decision)",
        "cloud", "pool", "pending pods", "nodes", "slices/node"
    );
    for g in &grown {
        report(stack, g, &decisions)?;
    }
    println!();
    plan_empty_then_destroy(
        &run,
        "a second plan shows no changes: the autoscaler's nodes are no drift",
    )
}

/// A pool of the scale-from-zero example, given pending pods: its nodes before and after.
struct Grown<'a> {
    cloud: &'a str,
    cluster: &'a str,
    /// The pool as the example's `pools` output shows it.
    pool: &'a serde_json::Value,
    name: &'a str,
    before: usize,
    after: usize,
}

/// Waits until each pool has grown, at most five times the autoscalers' wait in all.
fn wait_for_nodes(stack: &crate::stack::Stack, grown: &mut [Grown]) {
    let start = std::time::Instant::now();
    let limit = DEMO_POD_BUFFERS.new_gpu_pods * 5;
    for g in grown {
        let count = || stack.kube.pool_node_names(g.cloud, g.cluster, g.name).len();
        while count() == g.before && start.elapsed() < limit {
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        g.after = count();
    }
}

/// Prints a pool's row of the table, and checks the demo's promise for it: one node of the
/// example's slices from zero, by one scale-up.
fn report(
    stack: &crate::stack::Stack,
    g: &Grown,
    decisions: &[crate::autoscaler::log::Decision],
) -> Result<(), DemoError> {
    let (cloud, name, before, after) = (g.cloud, g.name, g.before, g.after);
    let resource = g.pool["resource_name"].as_str().unwrap_or("?");
    let slices = slices_offered(stack, cloud, g.cluster, name, resource);
    // One scale-up per cluster, for the ten pods the wait gathered.
    let mine: Vec<_> = decisions
        .iter()
        .filter(|d| d.cloud == cloud && d.reason == "TriggeredScaleUp")
        .collect();
    let decision = mine
        .iter()
        .find(|d| d.pool.as_deref() == Some(name))
        .ok_or_else(|| {
            DemoError(format!(
                "{cloud}: the autoscaler recorded no decision on {name}"
            ))
        })?;
    println!(
        "{cloud:<5} {name:<8} {:<24} {:<15} {slices:<11} {}: {}",
        format!("{PENDING_PODS} x {resource}: 1"),
        format!("{before} -> {after}"),
        decision.reason,
        decision.message
    );
    // The demo's promise, checked here because CI runs the demo.
    let per_node = g.pool["slices_per_node"].to_string();
    if (before, after) != (0, 1)
        || slices != per_node
        || decision.reason != "TriggeredScaleUp"
        || decision.sizes != Some((0, 1))
        || mine.len() != 1
    {
        return Err(DemoError(format!(
            "{cloud}: {PENDING_PODS} one-slice pods should bring one node of {per_node} \
             slices from zero, with one scale-up; nodes {before} -> {after}, slices {slices}, \
             scale-ups: {:?}",
            mine.iter().map(|d| &d.message).collect::<Vec<_>>()
        )));
    }
    Ok(())
}

/// The end of each part: a plan that must be empty, then the destroy.
fn plan_empty_then_destroy(
    run: &dyn Fn(&[&str]) -> Result<String, DemoError>,
    what: &str,
) -> Result<(), DemoError> {
    step(what);
    let plan = run(&["plan", "-no-color", "-input=false", "-detailed-exitcode"])?;
    if !plan.contains("No changes") {
        return Err(DemoError(format!("the second plan was not empty:\n{plan}")));
    }
    step("terraform destroy");
    run(&["destroy", "-auto-approve", "-input=false", "-no-color"])?;
    Ok(())
}
