//! `fracgpu-sandbox`: serves the local cloud emulators on loopback.
//!
//! `fracgpu-sandbox serve [--port N] [--op-seconds S] [--state FILE] [--latency-ms N
//! [--jitter-ms J]]` prints its endpoints and runs until SIGINT or SIGTERM. `--latency-ms` delays
//! every cloud and Kubernetes API answer by N ms plus up to J ms, as a real cloud's round trip.
//! `--pod-buffer-seconds NEW,GPU` sets how long the twin's cluster-autoscalers wait for more pods
//! (default 2,30, upstream's; `sandbox::PodBuffers`); `--without-autoscalers` turns them off, for a
//! real cluster-autoscaler pointed at the sandbox.
//! `demo` runs the quick start (see `sandbox::demo`). `apiserver` serves one bare cluster's
//! Kubernetes API on its own address, as a test's control plane (see `sandbox::apiserver`). `twin` plays the GPU stack's digital twin
//! against any Kubernetes API server (see `sandbox::kube::remote_twin`), Karpenter included
//! (`sandbox::kube::remote_karpenter`).

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use sandbox::Config;

const USAGE: &str = "usage: fracgpu-sandbox serve [--port N] [--op-seconds S] [--state FILE] \
    [--clusters FILE] [--latency-ms N [--jitter-ms J]] [--without-gpu-operator] \
    [--pod-buffer-seconds NEW,GPU] [--without-autoscalers]\n       fracgpu-sandbox demo [same \
    flags]\n       fracgpu-sandbox twin --server URL --token T [--ca FILE] [--every SECONDS] \
    [--once]\n       fracgpu-sandbox apiserver --port N --dir DIR --token T [--state FILE] \
    [--openapi DIR]\n--clusters FILE: a JSON list of extra clusters, e.g. \
    [{\"cloud\": \"eks\", \"region\": \"eu-west-1\", \"name\": \"prod\"}]\ntwin: plays the GPU \
    operator, its MIG manager, GPU feature discovery and the NVIDIA device plugin on the\n  nodes \
    of the API server at URL that carry GFD's hardware labels (nvidia.com/gpu.product, .count, \
    .memory):\n  writes their labels and their nvidia.com/ extended resources (status \
    subresource); and Karpenter where the server serves its CRDs:\n      launches the Nodes pending pods need from the NodePools and NodeOverlays; every SECONDS     (default 2)\n  until SIGINT or SIGTERM, or once. --ca: the PEM CA \
    that verifies the server (else the system roots).";

/// A command line's flags one at a time, each with its value when written `--flag=value`; the
/// value of `--flag value` is asked for with [`Flags::value`].
struct Flags<'a>(std::slice::Iter<'a, String>);

impl Flags<'_> {
    fn next(&mut self) -> Option<(String, Option<String>)> {
        let arg = self.0.next()?;
        Some(match arg.split_once('=') {
            Some((f, v)) => (f.to_string(), Some(v.to_string())),
            None => (arg.clone(), None),
        })
    }

    /// The flag's value: written after `=`, else the next argument.
    fn value(&mut self, flag: &str, inline: Option<String>) -> Result<String, String> {
        inline
            .or_else(|| self.0.next().cloned())
            .ok_or_else(|| format!("{flag} needs a value"))
    }
}

/// `apiserver`'s flags.
fn parse_apiserver(args: &[String]) -> Result<sandbox::apiserver::Args, String> {
    let mut it = Flags(args.iter());
    let (mut port, mut dir, mut token, mut state, mut openapi) = (None, None, None, None, None);
    while let Some((flag, inline)) = it.next() {
        let flag = flag.as_str();
        let mut value = || it.value(flag, inline.clone());
        match flag {
            "--port" => port = Some(value()?.parse().map_err(|e| format!("--port: {e}"))?),
            "--dir" => dir = Some(PathBuf::from(value()?)),
            "--token" => token = Some(value()?),
            "--state" => state = Some(PathBuf::from(value()?)),
            "--openapi" => openapi = Some(PathBuf::from(value()?)),
            other => return Err(format!("unknown flag {other:?}\n{USAGE}")),
        }
    }
    let need = |what: &str| format!("apiserver needs {what}\n{USAGE}");
    Ok(sandbox::apiserver::Args {
        port: port.ok_or_else(|| need("--port"))?,
        dir: dir.ok_or_else(|| need("--dir"))?,
        token: token
            .filter(|t: &String| !t.is_empty())
            .ok_or_else(|| need("--token"))?,
        state,
        openapi,
    })
}

/// `twin`'s flags.
#[derive(Debug, PartialEq)]
struct TwinArgs {
    server: String,
    token: String,
    ca: Option<PathBuf>,
    every: f64,
    once: bool,
}

fn parse_twin(args: &[String]) -> Result<TwinArgs, String> {
    let mut it = Flags(args.iter());
    let (mut server, mut token, mut ca, mut every, mut once) = (None, None, None, 2.0, false);
    while let Some((flag, inline)) = it.next() {
        let flag = flag.as_str();
        let mut value = || it.value(flag, inline.clone());
        match flag {
            "--server" => server = Some(value()?),
            "--token" => token = Some(value()?),
            "--ca" => ca = Some(PathBuf::from(value()?)),
            "--every" => {
                let v: f64 = value()?.parse().map_err(|e| format!("--every: {e}"))?;
                if !(0.05..=3600.0).contains(&v) {
                    return Err("--every must be between 0.05 and 3600".into());
                }
                every = v;
            }
            "--once" => once = true,
            other => return Err(format!("unknown flag {other:?}\n{USAGE}")),
        }
    }
    Ok(TwinArgs {
        server: server.ok_or_else(|| format!("twin needs --server\n{USAGE}"))?,
        token: token.ok_or_else(|| format!("twin needs --token\n{USAGE}"))?,
        ca,
        every,
        once,
    })
}

async fn twin(args: TwinArgs) -> Result<(), Box<dyn std::error::Error>> {
    let ca = match &args.ca {
        Some(p) => {
            Some(std::fs::read_to_string(p).map_err(|e| format!("--ca {}: {e}", p.display()))?)
        }
        None => None,
    };
    let t = sandbox::kube::remote_twin::RemoteTwin::new(&args.server, ca.as_deref(), &args.token)?;
    if args.once {
        let r = t.sync_once().await?;
        let pods = t.kubelet_once().await?;
        let k = t.karpenter_once().await?;
        println!(
            "gpu nodes: {:?}; written: {:?}; refused: {:?}; pods written: {pods:?}; \
             karpenter launched: {:?}; pending: {:?}",
            r.gpu_nodes,
            r.written,
            r.refused,
            k.launched
                .iter()
                .map(|l| format!("{} ({}, {})", l.node, l.instance_type, l.node_pool))
                .collect::<Vec<_>>(),
            k.pending
        );
        return Ok(());
    }
    eprintln!("twin: syncing {} every {}s", args.server, args.every);
    t.run(Duration::from_secs_f64(args.every), shutdown()).await;
    Ok(())
}

struct Args {
    demo: bool,
    port: u16,
    op_seconds: f64,
    state: Option<PathBuf>,
    clusters: Option<PathBuf>,
    latency_ms: u64,
    jitter_ms: u64,
    /// Clusters start without the GPU operator (for installing its chart with helm).
    without_operator: bool,
    pod_buffers: sandbox::PodBuffers,
    /// The twin's cluster-autoscalers do not run (a real one drives the pools).
    without_autoscalers: bool,
}

/// `NEW,GPU`: the two waits of the twin's cluster-autoscalers, in seconds (0 to 600 each).
fn pod_buffers(v: &str) -> Result<sandbox::PodBuffers, String> {
    let bad = || format!("--pod-buffer-seconds {v:?}: expected NEW,GPU in seconds, e.g. 2,30");
    let (new, gpu) = v.split_once(',').ok_or_else(bad)?;
    let secs = |s: &str| -> Result<Duration, String> {
        let n: f64 = s.trim().parse().map_err(|_| bad())?;
        if !(0.0..=600.0).contains(&n) {
            return Err(format!(
                "--pod-buffer-seconds: {n} is not between 0 and 600"
            ));
        }
        Ok(Duration::from_secs_f64(n))
    };
    Ok(sandbox::PodBuffers {
        new_pods: secs(new)?,
        new_gpu_pods: secs(gpu)?,
    })
}

fn parse(args: &[String]) -> Result<Args, String> {
    let mut it = Flags(args.iter());
    let demo = match it.0.next().map(String::as_str) {
        Some("serve") => false,
        Some("demo") => true,
        Some("-h" | "--help") | None => return Err(USAGE.into()),
        Some(other) => return Err(format!("unknown command {other:?}\n{USAGE}")),
    };
    let mut a = Args {
        demo,
        port: 8787,
        op_seconds: 2.0,
        state: None,
        clusters: None,
        latency_ms: 0,
        jitter_ms: 0,
        without_operator: false,
        pod_buffers: sandbox::PodBuffers::UPSTREAM,
        without_autoscalers: false,
    };
    while let Some((flag, inline)) = it.next() {
        let flag = flag.as_str();
        let mut value = || it.value(flag, inline.clone());
        match flag {
            "--port" => a.port = value()?.parse().map_err(|e| format!("--port: {e}"))?,
            "--op-seconds" => {
                let v: f64 = value()?.parse().map_err(|e| format!("--op-seconds: {e}"))?;
                if !(0.0..=3600.0).contains(&v) {
                    return Err("--op-seconds must be between 0 and 3600".into());
                }
                a.op_seconds = v;
            }
            "--state" => a.state = Some(PathBuf::from(value()?)),
            "--clusters" => a.clusters = Some(PathBuf::from(value()?)),
            "--without-gpu-operator" => a.without_operator = true,
            "--without-autoscalers" => a.without_autoscalers = true,
            "--pod-buffer-seconds" => a.pod_buffers = pod_buffers(&value()?)?,
            "--latency-ms" | "--jitter-ms" => {
                let v: u64 = value()?.parse().map_err(|e| format!("{flag}: {e}"))?;
                if v > 60_000 {
                    return Err(format!("{flag} must be at most 60000"));
                }
                if flag == "--latency-ms" {
                    a.latency_ms = v;
                } else {
                    a.jitter_ms = v;
                }
            }
            other => return Err(format!("unknown flag {other:?}\n{USAGE}")),
        }
    }
    Ok(a)
}

fn main() -> ExitCode {
    let argv: Vec<String> = std::env::args().skip(1).collect();
    // The README's quick start: builds and drives the provider through terraform.
    if argv.first().map(String::as_str) == Some("demo") {
        return match sandbox::demo::run() {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("demo failed: {}", e.0);
                ExitCode::FAILURE
            }
        };
    }
    if argv.first().map(String::as_str) == Some("twin") {
        let args = match parse_twin(&argv[1..]) {
            Ok(a) => a,
            Err(e) => {
                eprintln!("{e}");
                return ExitCode::from(2);
            }
        };
        return match tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| e.into())
            .and_then(|rt| rt.block_on(twin(args)))
        {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("fracgpu-sandbox twin: {e}");
                ExitCode::FAILURE
            }
        };
    }
    if argv.first().map(String::as_str) == Some("apiserver") {
        let args = match parse_apiserver(&argv[1..]) {
            Ok(a) => a,
            Err(e) => {
                eprintln!("{e}");
                return ExitCode::from(2);
            }
        };
        return match tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .map_err(|e| e.into())
            .and_then(|rt| rt.block_on(async { sandbox::apiserver::run(args, shutdown()).await }))
        {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("fracgpu-sandbox apiserver: {e}");
                ExitCode::FAILURE
            }
        };
    }
    let args = match parse(&argv) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    };
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("fracgpu-sandbox: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match rt.block_on(serve(args)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("fracgpu-sandbox: {e}");
            ExitCode::FAILURE
        }
    }
}

async fn serve(args: Args) -> Result<(), Box<dyn std::error::Error>> {
    let stop = shutdown();
    let mut clusters = sandbox::ClusterSpec::defaults();
    if let Some(path) = &args.clusters {
        let text = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
        let extra: Vec<sandbox::ClusterSpec> = serde_json::from_slice(&text)
            .map_err(|e| format!("{}: not a JSON list of clusters: {e}", path.display()))?;
        clusters.extend(extra);
    }
    let config = Config {
        clusters,
        op_time: Duration::from_secs_f64(args.op_seconds),
        state_file: args.state.clone(),
        latency: sandbox::Latency {
            base: Duration::from_millis(args.latency_ms),
            jitter: Duration::from_millis(args.jitter_ms),
        },
        gpu_operator: !args.without_operator,
        pod_buffers: args.pod_buffers,
        autoscalers: !args.without_autoscalers,
        ..Config::default()
    };
    let stack = sandbox::stack::Stack::start(config, args.port).await?;
    let sandbox = &stack.sandbox;
    let base = stack.cloud_url();
    println!(
        "fracgpu-sandbox listening on {base} (operations take {}s, answers {} ms + up to {} ms \
            later; the autoscalers wait {} s for more pods, {} s when they request nvidia.com/gpu)",
        args.op_seconds,
        args.latency_ms,
        args.jitter_ms,
        args.pod_buffers.new_pods.as_secs_f64(),
        args.pod_buffers.new_gpu_pods.as_secs_f64()
    );
    println!(
        "  Azure AD token : POST {base}/<tenant>/oauth2/v2.0/token   (ARM_* authority host {base})"
    );
    println!(
        "  ARM (AKS)      : \
            {base}/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/sandbox-rg/providers/Microsoft.ContainerService/managedClusters/sandbox-aks/agentPools?api-version=2025-10-01"
    );
    println!(
        "  GKE v1         : \
            {base}/v1/projects/sandbox-project/locations/us-central1/clusters/sandbox-gke   (CLOUDSDK_API_ENDPOINT_OVERRIDES_CONTAINER={base}/)"
    );
    println!(
        "  EKS            : \
            {base}/clusters/sandbox-eks/node-groups   (AWS_ENDPOINT_URL_EKS={base}, region \
            us-east-1)"
    );
    println!("  control        : {base}/_sandbox/inventory  {base}/_sandbox/faults");
    println!(
        "  Kubernetes     : {}/k8s/<cloud>/<cluster>  (HTTPS, sandbox CA in each kubeconfig)",
        stack.kube_url()
    );
    let kube_dir = args
        .state
        .as_ref()
        .and_then(|s| s.parent().map(|d| d.join("kubeconfigs")))
        .unwrap_or_else(|| {
            std::env::temp_dir().join(format!("fracgpu-sandbox-{}", stack.cloud_addr.port()))
        });
    for (cloud, cluster, path) in stack.write_kubeconfigs(&kube_dir)? {
        println!(
            "  cluster        : {cloud} {cluster}   kubeconfig {}",
            path.display()
        );
    }
    if let Some(s) = &args.state {
        println!("  state file     : {}", s.display());
    }
    if args.demo {
        println!("{}", serde_json::to_string_pretty(&sandbox.inventory())?);
    }
    stop.await;
    println!("fracgpu-sandbox: stopped");
    Ok(())
}

/// Resolves on SIGINT or SIGTERM. The handlers are installed when this is called, not when the
/// future is first awaited: called before anything is printed, a signal sent as soon as the
/// address appears (a supervisor, a test) still stops the sandbox cleanly instead of killing it.
fn shutdown() -> impl std::future::Future<Output = ()> {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{Signal, SignalKind, signal};
        let interrupt = signal(SignalKind::interrupt()).ok();
        let terminate = signal(SignalKind::terminate()).ok();
        let received = |s: Option<Signal>| async move {
            match s {
                Some(mut s) => {
                    s.recv().await;
                }
                None => std::future::pending::<()>().await,
            }
        };
        async move {
            tokio::select! {
                _ = received(interrupt) => {},
                _ = received(terminate) => {},
            }
        }
    }
    #[cfg(not(unix))]
    async {
        let _ = tokio::signal::ctrl_c().await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(s: &[&str]) -> Vec<String> {
        s.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn apiserver_flags() {
        let a = parse_apiserver(&v(&[
            "--port=6443",
            "--dir",
            "/d",
            "--token",
            "t",
            "--state=/s",
        ]))
        .unwrap();
        assert_eq!((a.port, a.token.as_str(), a.openapi), (6443, "t", None));
        assert_eq!(a.state, Some(PathBuf::from("/s")));
        assert!(
            parse_apiserver(&v(&["--port", "1", "--dir", "/d"])).is_err(),
            "no token"
        );
        assert!(parse_apiserver(&v(&["--port", "1", "--dir", "/d", "--token="])).is_err());
        assert!(
            parse_apiserver(&v(&["--port", "1", "--dir", "/d", "--token", "t", "--x"])).is_err()
        );
    }

    #[test]
    fn flags() {
        let a = parse(&v(&[
            "serve",
            "--port",
            "0",
            "--op-seconds=0.5",
            "--state",
            "/tmp/x",
        ]))
        .unwrap();
        assert_eq!((a.port, a.op_seconds, a.demo), (0, 0.5, false));
        assert_eq!(a.state, Some(PathBuf::from("/tmp/x")));
        assert!(parse(&v(&["serve", "--op-seconds", "-1"])).is_err());
        assert!(parse(&v(&["serve", "--bogus"])).is_err());
        assert!(parse(&v(&["serve", "--port"])).is_err());
        assert!(parse(&v(&["serve", "--latency-ms", "-5"])).is_err());
        let a = parse(&v(&["serve", "--latency-ms=100", "--jitter-ms", "20"])).unwrap();
        assert_eq!((a.latency_ms, a.jitter_ms), (100, 20));
        assert_eq!(a.pod_buffers, sandbox::PodBuffers::UPSTREAM);
        assert!(!a.without_autoscalers);
        assert!(
            parse(&v(&["serve", "--without-autoscalers"]))
                .unwrap()
                .without_autoscalers
        );
        let a = parse(&v(&["serve", "--pod-buffer-seconds", "0.5,3"])).unwrap();
        assert_eq!(
            (a.pod_buffers.new_pods, a.pod_buffers.new_gpu_pods),
            (Duration::from_millis(500), Duration::from_secs(3))
        );
        for bad in ["3", "1,x", "1,-2", "1,601"] {
            let e = parse(&v(&["serve", "--pod-buffer-seconds", bad])).err();
            assert!(
                e.is_some_and(|e| e.contains("--pod-buffer-seconds")),
                "{bad}"
            );
        }
        assert!(parse(&v(&[])).is_err());
    }

    #[test]
    fn twin_flags() {
        let a = parse_twin(&v(&[
            "--server=https://127.0.0.1:6443",
            "--token",
            "t",
            "--ca",
            "/tmp/ca.crt",
            "--once",
        ]))
        .unwrap();
        assert_eq!(
            a,
            TwinArgs {
                server: "https://127.0.0.1:6443".into(),
                token: "t".into(),
                ca: Some(PathBuf::from("/tmp/ca.crt")),
                every: 2.0,
                once: true,
            }
        );
        assert!(parse_twin(&v(&["--token", "t"])).is_err());
        assert!(parse_twin(&v(&["--server", "u"])).is_err());
        assert!(parse_twin(&v(&["--server", "u", "--token", "t", "--every", "0"])).is_err());
    }
}
