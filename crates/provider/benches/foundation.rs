//! Prints the foundation's figures (no assertions): provider start to handshake line, and to the
//! answer of a first RPC over a fresh AutoMTLS connection, peak RSS of the provider during a
//! `terraform plan` of the machine-type example, and msgpack codec throughput. Run with
//! `cargo bench --bench foundation`.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use tfplugin::{Type, Value, msgpack};

use testkit::figures;

/// The protocol tests' plugin client: start the binary as terraform does, connect with a client
/// certificate like terraform's.
#[allow(dead_code)]
#[path = "../tests/common/plugin.rs"]
mod plugin;

const PROVIDER: &str = env!("CARGO_BIN_EXE_terraform-provider-fracgpu");

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

fn handshake_latency() {
    let cert = plugin::client_cert();
    let mut times = Vec::new();
    for _ in 0..50 {
        let start = Instant::now();
        let p = plugin::start(&cert, &[]);
        times.push(start.elapsed());
        drop(p);
    }
    times.sort();
    let (median, p95) = (percentile(&times, 0.5), percentile(&times, 0.95));
    figures::record(
        "handshake_median",
        "provider start -> handshake line, median",
        median.as_secs_f64() * 1e3,
        "ms",
        "50 starts, certificate generation included",
    );
    figures::record(
        "handshake_p95",
        "provider start -> handshake line, p95",
        p95.as_secs_f64() * 1e3,
        "ms",
        "50 starts",
    );
    println!(
        "provider start -> handshake line   median {:>7.2} ms   p95 {:>7.2} ms   (50 starts, TLS certificate generation included)",
        percentile(&times, 0.5).as_secs_f64() * 1e3,
        percentile(&times, 0.95).as_secs_f64() * 1e3
    );
}

/// What terraform waits for before it can use a provider process: start, handshake line, AutoMTLS
/// connection, and the answer to GetMetadata (its first call when it has the schemas cached).
fn first_answer_latency() {
    use tfplugin::server::proto::tfplugin6 as pb;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let cert = plugin::client_cert();
    let mut times = Vec::new();
    for _ in 0..50 {
        let start = Instant::now();
        let p = plugin::start(&cert, &[]);
        rt.block_on(async {
            let ch = plugin::connect(&p.handshake, plugin::Auth::Cert(&cert))
                .await
                .expect("connected");
            pb::provider_client::ProviderClient::new(ch)
                .get_metadata(pb::get_metadata::Request {})
                .await
                .expect("GetMetadata answered");
        });
        times.push(start.elapsed());
    }
    times.sort();
    let median = percentile(&times, 0.5);
    figures::record(
        "first_answer_median",
        "provider start -> first GetMetadata answered, median",
        median.as_secs_f64() * 1e3,
        "ms",
        "50 starts, AutoMTLS connection included",
    );
    println!(
        "provider start -> GetMetadata answer   median {:>7.2} ms   (50 starts, AutoMTLS connection included)",
        median.as_secs_f64() * 1e3
    );
}

/// The provider in the mirror is a wrapper that runs the real binary and records its peak RSS
/// (getrusage of the child), so every process terraform starts during the plan is measured.
fn plan_rss() {
    let root = tempfile::tempdir().unwrap();
    let rss_log = root.path().join("rss.log");
    let wrapper = root.path().join("wrapper.py");
    std::fs::write(
        &wrapper,
        format!(
            "#!/usr/bin/env python3\nimport resource, subprocess, sys\np = subprocess.run([{PROVIDER:?}] + sys.argv[1:])\nwith open({:?}, 'a') as f:\n    f.write(str(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss) + '\\n')\nsys.exit(p.returncode)\n",
            rss_log.display().to_string()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&wrapper, std::fs::Permissions::from_mode(0o755)).unwrap();
    let cli = sandbox::demo::local_mirror(root.path(), &wrapper)
        .map_err(|e| e.0)
        .unwrap();
    let work = root.path().join("work");
    std::fs::create_dir_all(&work).unwrap();
    std::fs::copy(
        Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
            .join("examples/data-sources/fracgpu_machine_type/data-source.tf"),
        work.join("main.tf"),
    )
    .unwrap();
    let tf = |args: &[&str]| {
        let st = Command::new("terraform")
            .args(args)
            .current_dir(&work)
            .env("TF_CLI_CONFIG_FILE", &cli)
            .env("CHECKPOINT_DISABLE", "1")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .unwrap();
        assert!(st.success(), "terraform {args:?}");
    };
    tf(&["init", "-input=false"]);
    let _ = std::fs::remove_file(&rss_log);
    let mut times = Vec::new();
    for _ in 0..5 {
        let t = Instant::now();
        tf(&["plan", "-input=false", "-refresh=true"]);
        times.push(t.elapsed());
    }
    times.sort();
    let rss: Vec<u64> = std::fs::read_to_string(&rss_log)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .collect();
    println!(
        "terraform plan (3 data sources)    median {:>7.0} ms   provider processes started: {} per plan   peak provider RSS {:.1} MiB",
        percentile(&times, 0.5).as_secs_f64() * 1e3,
        rss.len() / 5,
        rss.iter().copied().max().unwrap_or(0) as f64 / 1024.0
    );
}

fn codec_throughput() {
    // 200 objects shaped like node pool states.
    let pool = Type::object([
        ("id", Type::String),
        ("name", Type::String),
        ("node_count", Type::Number),
        ("labels", Type::map(Type::String)),
        (
            "taints",
            Type::list(Type::object([
                ("key", Type::String),
                ("value", Type::String),
                ("effect", Type::String),
            ])),
        ),
        ("memory_per_slice_mb", Type::Number),
        ("spot", Type::Bool),
    ]);
    let ty = Type::list(pool);
    let one = |i: i64| {
        Value::object([
            (
                "id",
                Value::string(format!(
                    "/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/rg/providers/Microsoft.ContainerService/managedClusters/c/agentPools/p{i}"
                )),
            ),
            ("name", Value::string(format!("p{i}"))),
            ("node_count", Value::int(i % 20)),
            (
                "labels",
                Value::Map(
                    [
                        ("team".to_string(), Value::string("ml")),
                        ("tier".to_string(), Value::string("gpu")),
                    ]
                    .into(),
                ),
            ),
            (
                "taints",
                Value::List(vec![Value::object([
                    ("key", "nvidia.com/gpu".into()),
                    ("value", "Present".into()),
                    ("effect", "NoSchedule".into()),
                ])]),
            ),
            ("memory_per_slice_mb", Value::int(8192)),
            ("spot", Value::Bool(i % 2 == 0)),
        ])
    };
    let v = Value::List((0..200).map(one).collect());
    let bytes = msgpack::encode(&v, &ty).unwrap();
    let rounds = 200;
    let t = Instant::now();
    for _ in 0..rounds {
        std::hint::black_box(msgpack::encode(std::hint::black_box(&v), &ty).unwrap());
    }
    let enc = t.elapsed();
    let t = Instant::now();
    for _ in 0..rounds {
        std::hint::black_box(msgpack::decode(std::hint::black_box(&bytes), &ty).unwrap());
    }
    let dec = t.elapsed();
    let mb = (bytes.len() * rounds) as f64 / 1e6;
    figures::record(
        "msgpack_encode",
        "value codec: msgpack encode",
        mb / enc.as_secs_f64(),
        "MB/s",
        &format!(
            "{:.2} M objects/s, 200 pool states of {} bytes",
            (200 * rounds) as f64 / enc.as_secs_f64() / 1e6,
            bytes.len()
        ),
    );
    figures::record(
        "msgpack_decode",
        "value codec: msgpack decode",
        mb / dec.as_secs_f64(),
        "MB/s",
        &format!(
            "{:.2} M objects/s",
            (200 * rounds) as f64 / dec.as_secs_f64() / 1e6
        ),
    );
    println!(
        "msgpack encode                     {:>7.1} MB/s   {:>9.0} objects/s   ({} bytes per 200 pools)",
        mb / enc.as_secs_f64(),
        (200 * rounds) as f64 / enc.as_secs_f64(),
        bytes.len()
    );
    println!(
        "msgpack decode                     {:>7.1} MB/s   {:>9.0} objects/s",
        mb / dec.as_secs_f64(),
        (200 * rounds) as f64 / dec.as_secs_f64()
    );
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    println!(
        "terraform-provider-fracgpu foundation benchmarks ({} build)",
        if cfg!(debug_assertions) {
            "debug"
        } else {
            "release"
        }
    );
    handshake_latency();
    first_answer_latency();
    plan_rss();
    codec_throughput();
}
