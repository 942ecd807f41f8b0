//! `fracgpu-sandbox demo`: the README's first command. Builds the provider if needed, starts the
//! sandbox, lays the provider out as a local filesystem mirror, and applies `examples/quickstart`
//! through the real terraform binary, printing progress and what a user wants to see: the pools,
//! their nodes and the GPU resources each node offers, and an empty second plan.

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
    let result = quickstart(&work, &cli, &vars, &stack);
    let _ = std::fs::remove_dir_all(&root);
    result?;
    step(
        "done. The sandbox and its pools end with this command; against a sandbox of your own \
            (`fracgpu-sandbox serve`) or real clouds, `terraform destroy` removes the pools",
    );
    Ok(())
}

fn quickstart(
    work: &Path,
    cli: &Path,
    vars: &[String],
    stack: &crate::stack::Stack,
) -> Result<(), DemoError> {
    // Every command that evaluates the configuration gets the sandbox's addresses.
    let run = |args: &[&str]| {
        let mut all: Vec<&str> = args.to_vec();
        for var in vars {
            all.push("-var");
            all.push(var);
        }
        terraform(work, cli, &all)
    };
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
    step("a second plan shows no changes");
    let plan = run(&["plan", "-no-color", "-input=false", "-detailed-exitcode"])?;
    if !plan.contains("No changes") {
        return Err(DemoError(format!("the second plan was not empty:\n{plan}")));
    }
    step("terraform destroy");
    run(&["destroy", "-auto-approve", "-input=false", "-no-color"])?;
    Ok(())
}
