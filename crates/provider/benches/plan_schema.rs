//! What in `fracgpu_nodepool`'s schema and answers costs terraform its time in a plan (no
//! assertions; prints a table). Run with `cargo bench --bench plan_schema`.
//!
//! A plan of pools already in state costs terraform far more per pool than a plan of
//! `terraform_data`, and most of that CPU is terraform's own, not the provider's: for every
//! instance terraform derives the object type from the schema over and over, converts the state
//! between JSON and msgpack, and walks every value for marks, diffs and the plan file, so its work
//! grows with the number of attributes and blocks and the size of their values.
//!
//! To measure each part of the schema apart from the provider's own work, this binary is also a
//! probe provider: started by terraform with `FRACGPU_SCHEMA_PROBE=<variant>`, it serves
//! `fracgpu_nodepool` with a variant of the real schema (blocks, attributes or values left out or
//! shaped differently) and answers reads and plans by handing the state back, doing nothing else.
//! The benchmark applies 200 real pools against the sandbox, writes their state once per variant
//! (reshaped to the variant's schema), and times `terraform plan` (refresh included) with each,
//! next to the real provider and 200 `terraform_data`.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use serde_json::Value as Json;
use tfplugin::api::{DataSource, Function, PlanRequest, Private, Provider, Resource};
use tfplugin::plan::Planned;
use tfplugin::schema::{Attribute, Block, Nesting, Schema};
use tfplugin::{Diagnostic, Diagnostics, Value};

use testkit::figures;

#[path = "support/workspace.rs"]
mod workspace;
use workspace::{Workspace, data_tf, pools_tf, secs};

#[allow(dead_code)]
#[path = "../tests/common/sandbox.rs"]
mod serve;

const PROVIDER: &str = env!("CARGO_BIN_EXE_terraform-provider-fracgpu");
const PROBE_ENV: &str = "FRACGPU_SCHEMA_PROBE";

/// One way of shaping the schema (and the state to match it).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Variant {
    /// The schema as it is.
    Current,
    /// Blocks of at most one item (`aks`, `gke`, `eks`, `autoscaling`, `mig`, `time_slicing`,
    /// `mps`, `timeouts`) with nesting mode single instead of a list of at most one.
    SingleBlocks,
    /// Computed-only nested attributes (`gpu`, `tolerations`) as attributes of a plain object
    /// type: terraform derives no optional-attribute object type for them.
    TypedOutputs,
    /// `SingleBlocks` and `TypedOutputs` together: every attribute a user reads kept.
    Reshaped,
    /// Without the device plugin config's YAML string.
    NoYaml,
    /// Without the computed attributes a workload does not need (`node_labels`, `status`, `gpu`,
    /// `slices_per_node`, `memory_per_slice_mb`, `device_plugin_config_name`).
    LeanOutputs,
    /// Without the `timeouts` block.
    NoTimeouts,
    /// The arguments only: no computed-only attribute but `id`.
    ArgumentsOnly,
    /// The schema as it is; every read also returns 200 bytes of private data.
    PrivateData,
    /// The schema as it is; every read also returns a warning.
    Warning,
    /// Only `id` and `name` (and a configuration of only `name`): the floor of any resource
    /// served by a plugin, whose every read and plan is a gRPC call.
    Bare,
}

const VARIANTS: &[Variant] = &[
    Variant::Current,
    Variant::SingleBlocks,
    Variant::TypedOutputs,
    Variant::Reshaped,
    Variant::NoYaml,
    Variant::LeanOutputs,
    Variant::NoTimeouts,
    Variant::ArgumentsOnly,
    Variant::PrivateData,
    Variant::Warning,
    Variant::Bare,
];

const LEAN_DROPPED: &[&str] = &[
    "node_labels",
    "status",
    "gpu",
    "slices_per_node",
    "memory_per_slice_mb",
    "device_plugin_config_name",
];

impl Variant {
    fn name(self) -> &'static str {
        match self {
            Variant::Current => "current",
            Variant::SingleBlocks => "single-blocks",
            Variant::TypedOutputs => "typed-outputs",
            Variant::Reshaped => "reshaped",
            Variant::NoYaml => "no-yaml",
            Variant::LeanOutputs => "lean-outputs",
            Variant::NoTimeouts => "no-timeouts",
            Variant::ArgumentsOnly => "arguments-only",
            Variant::PrivateData => "private-data",
            Variant::Warning => "warning",
            Variant::Bare => "bare",
        }
    }

    fn describe(self) -> &'static str {
        match self {
            Variant::Current => "the schema as it is (probe: reads and plans hand the state back)",
            Variant::SingleBlocks => "blocks of one item with nesting single, not a list of max 1",
            Variant::TypedOutputs => {
                "computed nested attributes (gpu, tolerations) as plain object types"
            }
            Variant::Reshaped => "single-blocks and typed-outputs together, every attribute kept",
            Variant::NoYaml => "without the device_plugin_config YAML string",
            Variant::LeanOutputs => "without 6 computed attributes a workload does not read",
            Variant::NoTimeouts => "without the timeouts block",
            Variant::ArgumentsOnly => "arguments only (no computed-only attribute but id)",
            Variant::PrivateData => "as it is, and 200 bytes of private data per read",
            Variant::Warning => "as it is, and a warning per read",
            Variant::Bare => "id and name only: the floor of a resource behind gRPC",
        }
    }

    fn parse(name: &str) -> Option<Variant> {
        VARIANTS.iter().copied().find(|v| v.name() == name)
    }

    fn schema(self) -> Schema {
        let mut schema = fracgpu::resources::nodepool::schema();
        // The probe measures terraform: the provider's own checks are left out of every variant.
        strip_validators(&mut schema.block);
        let block = &mut schema.block;
        match self {
            Variant::SingleBlocks => single_blocks(block),
            Variant::TypedOutputs => typed_outputs(block),
            Variant::Reshaped => {
                single_blocks(block);
                typed_outputs(block);
            }
            Variant::NoYaml => block
                .attributes
                .retain(|a| a.name != "device_plugin_config"),
            Variant::LeanOutputs => block
                .attributes
                .retain(|a| !LEAN_DROPPED.contains(&a.name.as_str())),
            Variant::NoTimeouts => block.blocks.retain(|b| b.name != "timeouts"),
            Variant::ArgumentsOnly => block
                .attributes
                .retain(|a| !a.computed || a.optional || a.name == "id"),
            Variant::Bare => {
                block
                    .attributes
                    .retain(|a| a.name == "id" || a.name == "name");
                block.blocks.clear();
            }
            Variant::Current | Variant::PrivateData | Variant::Warning => {}
        }
        schema
    }

    /// Reshapes one instance's attributes (terraform's state JSON) to the variant's schema.
    fn reshape(self, attrs: &mut Json, schema: &Block) {
        let Json::Object(map) = attrs else { return };
        if matches!(self, Variant::SingleBlocks | Variant::Reshaped) {
            unwrap_single(map, schema);
        }
        map.retain(|k, _| {
            schema.attributes.iter().any(|a| &a.name == k)
                || schema.blocks.iter().any(|b| &b.name == k)
        });
    }
}

fn strip_validators(block: &mut Block) {
    block.validators.clear();
    for a in &mut block.attributes {
        strip_attribute(a);
    }
    for b in &mut block.blocks {
        strip_validators(&mut b.block);
    }
}

fn strip_attribute(a: &mut Attribute) {
    a.validators.clear();
    if let Some((_, inner)) = &mut a.nested {
        inner.iter_mut().for_each(strip_attribute);
    }
}

fn typed_outputs(block: &mut Block) {
    for a in &mut block.attributes {
        if a.computed && !a.optional {
            a.nested = None;
        }
    }
}

fn single_blocks(block: &mut Block) {
    for b in &mut block.blocks {
        if b.nesting == Nesting::List && b.max_items == 1 {
            b.nesting = Nesting::Single;
            b.max_items = 0;
        }
        single_blocks(&mut b.block);
    }
}

/// A list of at most one block becomes the block or null.
fn unwrap_single(map: &mut serde_json::Map<String, Json>, schema: &Block) {
    for b in &schema.blocks {
        if b.nesting != Nesting::Single {
            continue;
        }
        if let Some(v) = map.get_mut(&b.name) {
            let mut inner = match v.take() {
                Json::Array(mut items) if !items.is_empty() => items.remove(0),
                _ => Json::Null,
            };
            if let Json::Object(m) = &mut inner {
                unwrap_single(m, &b.block);
            }
            *v = inner;
        }
    }
}

// ---- the probe provider ----

struct Probe(Variant);

#[async_trait]
impl Provider for Probe {
    fn type_name(&self) -> &'static str {
        "fracgpu"
    }
    fn schema(&self) -> Schema {
        Schema::new(
            0,
            Block::new("probe").attr(Attribute::string("sandbox").optional()),
        )
    }
    async fn configure(&self, _tf: &str, _config: &Value, _diags: &mut Diagnostics) {}
    fn data_sources(&self) -> Vec<Arc<dyn DataSource>> {
        vec![]
    }
    fn resources(&self) -> Vec<Arc<dyn Resource>> {
        vec![Arc::new(ProbePool(self.0))]
    }
    fn functions(&self) -> Vec<Arc<dyn Function>> {
        vec![]
    }
}

struct ProbePool(Variant);

#[async_trait]
impl Resource for ProbePool {
    fn type_name(&self) -> &'static str {
        "fracgpu_nodepool"
    }
    fn schema(&self) -> Schema {
        self.0.schema()
    }
    async fn modify_plan(&self, _: &PlanRequest<'_>, _: &mut Planned, _: &mut Diagnostics) {}
    async fn create(&self, planned: &Value, _: &mut Private, _: &mut Diagnostics) -> Value {
        planned.unknowns_as_null()
    }
    async fn read(
        &self,
        state: &Value,
        private: &mut Private,
        diags: &mut Diagnostics,
    ) -> Option<Value> {
        match self.0 {
            Variant::PrivateData => private.0 = vec![b'p'; 200],
            Variant::Warning => diags.push(Diagnostic::warning(
                "Probe warning",
                "A warning of the length a real one has, returned by every read of the probe.",
            )),
            _ => {}
        }
        Some(state.clone())
    }
    async fn update(
        &self,
        _: &Value,
        planned: &Value,
        _: &mut Private,
        _: &mut Diagnostics,
    ) -> Value {
        planned.clone()
    }
    async fn delete(&self, _: &Value, _: &Private, _: &mut Diagnostics) {}
    async fn import(&self, _: &str, diags: &mut Diagnostics) -> Option<Value> {
        diags.push(Diagnostic::error("Probe", "The probe imports nothing."));
        None
    }
}

fn serve_probe(name: &str) {
    let Some(variant) = Variant::parse(name) else {
        eprintln!("{PROBE_ENV}={name}: no such variant");
        std::process::exit(2);
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let served = rt.block_on(tfplugin::server::serve(
        Arc::new(Probe(variant)),
        tfplugin::server::Options {
            debug: false,
            address: "registry.terraform.io/fracgpu/fracgpu",
        },
    ));
    rt.shutdown_timeout(Duration::from_millis(100));
    if let Err(e) = served {
        eprintln!("{}", e.0);
        std::process::exit(1);
    }
}

// ---- the benchmark ----

fn main() {
    if let Ok(name) = std::env::var(PROBE_ENV) {
        return serve_probe(&name);
    }
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    println!(
        "fracgpu_nodepool schema variants: terraform plan of 200 pools in state ({} build)",
        if cfg!(debug_assertions) {
            "debug"
        } else {
            "release"
        }
    );
    let (a, g, e) = (67, 67, 66);
    let n = a + g + e;
    let sb = serve::start_with(::sandbox::Config {
        op_time: Duration::ZERO,
        // EKS's node group quota (30 by default, adjustable) raised to fit 66.
        clusters: ::sandbox::ClusterSpec::defaults_with_nodegroup_quota(100),
        ..::sandbox::Config::default()
    });
    let main_tf = pools_tf(&sb.url, a, g, e);

    let real = Workspace::new(Path::new(PROVIDER), &main_tf);
    real.init();
    real.apply();
    let state: Json =
        serde_json::from_slice(&std::fs::read(real.dir.join("terraform.tfstate")).expect("state"))
            .expect("state JSON");

    let data = Workspace::new(Path::new(PROVIDER), &data_tf(n));
    data.init();
    data.apply();

    let me = std::env::current_exe().expect("this benchmark's executable");
    let probe = Workspace::new(&me, &main_tf);
    probe.init();
    let bare = Workspace::new(&me, &bare_tf(&sb.url, a, g, e));
    bare.init();

    // Every subject: its label, workspace, probe variant, state to plan from and description.
    struct Subject<'a> {
        label: &'static str,
        ws: &'a Workspace,
        variant: Option<Variant>,
        state: Option<Vec<u8>>,
        about: &'static str,
    }
    let mut subjects = vec![Subject {
        label: "real provider",
        ws: &real,
        variant: None,
        state: None,
        about: "the provider itself, refreshing against the sandbox",
    }];
    for &v in VARIANTS {
        let schema = v.schema();
        let mut st = state.clone();
        for r in st["resources"].as_array_mut().into_iter().flatten() {
            for i in r["instances"].as_array_mut().into_iter().flatten() {
                v.reshape(&mut i["attributes"], &schema.block);
            }
        }
        subjects.push(Subject {
            label: v.name(),
            ws: if v == Variant::Bare { &bare } else { &probe },
            variant: Some(v),
            state: Some(serde_json::to_vec(&st).unwrap()),
            about: v.describe(),
        });
    }
    subjects.push(Subject {
        label: "terraform_data",
        ws: &data,
        variant: None,
        state: None,
        about: "terraform's floor: a built-in resource, no plugin",
    });

    // The plans of all subjects are interleaved round by round, so a slower minute of the
    // machine does not fall on one of them alone. Medians of wall and CPU time.
    let mut wall: Vec<Vec<Duration>> = vec![vec![]; subjects.len()];
    let mut cpu: Vec<Vec<Duration>> = vec![vec![]; subjects.len()];
    for _ in 0..workspace::PLAN_ROUNDS {
        for (k, s) in subjects.iter().enumerate() {
            if let Some(st) = &s.state {
                std::fs::write(s.ws.dir.join("terraform.tfstate"), st).unwrap();
            }
            let env: Vec<(&str, &str)> = s
                .variant
                .map(|v| (PROBE_ENV, v.name()))
                .into_iter()
                .collect();
            let (w, c) =
                s.ws.tf_cpu(&["plan", "-input=false", "-refresh=true"], &env);
            wall[k].push(w);
            cpu[k].push(c);
        }
    }
    let median = |mut t: Vec<Duration>| {
        t.sort();
        t[t.len() / 2]
    };
    let wall: Vec<Duration> = wall.into_iter().map(median).collect();
    let cpu: Vec<Duration> = cpu.into_iter().map(median).collect();
    let floor = subjects.len() - 1;
    println!();
    println!(
        "{:<16} {:>9} {:>7} {:>9} {:>7} {:>10}  subject",
        "schema", "plan", "x data", "CPU", "x data", "state/pool"
    );
    for (k, s) in subjects.iter().enumerate() {
        let bytes = match &s.state {
            Some(st) => state_bytes(&serde_json::from_slice(st).unwrap()),
            None if s.variant.is_none() && k != floor => state_bytes(&state),
            None => 0,
        };
        let wall_x = secs(wall[k]) / secs(wall[floor]);
        let cpu_x = secs(cpu[k]) / secs(cpu[floor]).max(0.01);
        println!(
            "{:<16} {:>7.3} s {:>6.2}x {:>7.2} s {:>6.2}x {:>8} B  {}",
            s.label,
            secs(wall[k]),
            wall_x,
            secs(cpu[k]),
            cpu_x,
            bytes,
            s.about
        );
        if k != floor {
            let key = s.variant.map_or("real", |v| v.name()).replace('-', "_");
            figures::record(
                &format!("schema_{key}"),
                &format!("  plan {n} pools, {}: CPU / terraform_data", s.label),
                cpu_x,
                "x",
                &format!("wall {:.3} s ({wall_x:.2}x); {}", secs(wall[k]), s.about),
            );
        }
    }
    println!(
        "(CPU: terraform and its provider processes, user + system, median of {})",
        workspace::PLAN_ROUNDS
    );
}

/// The pools' names and nothing else, for [`Variant::Bare`].
fn bare_tf(url: &str, aks: usize, gke: usize, eks: usize) -> String {
    let mut tf = format!(
        "{}\nprovider \"fracgpu\" {{\n  sandbox = \"{url}\"\n}}\n",
        workspace::REQUIRED
    );
    for (cloud, count) in [("aks", aks), ("gke", gke), ("eks", eks)] {
        tf += &format!(
            "\nresource \"fracgpu_nodepool\" \"{cloud}\" {{\n  count = {count}\n  name  = \"{cloud}${{count.index}}\"\n}}\n"
        );
    }
    tf
}

/// Bytes of one instance's attributes in the state, averaged over the instances.
fn state_bytes(state: &Json) -> usize {
    let mut total = 0;
    let mut count = 0;
    for r in state["resources"].as_array().into_iter().flatten() {
        for i in r["instances"].as_array().into_iter().flatten() {
            total += serde_json::to_vec(&i["attributes"])
                .map(|b| b.len())
                .unwrap_or(0);
            count += 1;
        }
    }
    total / count.max(1)
}
