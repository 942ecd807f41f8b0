//! Shared by the benchmarks that drive the real terraform: a workspace whose provider comes from
//! an offline mirror, and the configurations of pools and of `terraform_data` they compare.
//! Each benchmark includes it and uses part of it.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Plans per figure; the median is reported.
pub const PLAN_ROUNDS: usize = 5;

/// A workspace whose provider comes from an offline mirror of `provider` (the real binary, or a
/// wrapper around it).
pub struct Workspace {
    _root: tempfile::TempDir,
    pub dir: PathBuf,
    pub cli: PathBuf,
}

impl Workspace {
    pub fn new(provider: &Path, main_tf: &str) -> Workspace {
        let root = tempfile::tempdir().unwrap();
        let cli = ::sandbox::demo::local_mirror(root.path(), provider)
            .map_err(|e| e.0)
            .unwrap();
        let dir = root.path().join("work");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("main.tf"), main_tf).unwrap();
        Workspace {
            _root: root,
            dir,
            cli,
        }
    }

    pub fn tf(&self, args: &[&str]) -> Duration {
        self.tf_with(args, &[])
    }

    /// `tf_with`, and the CPU time terraform and the providers it started spent (user and
    /// system), which is steadier than the wall time on a small shared machine.
    pub fn tf_cpu(&self, args: &[&str], env: &[(&str, &str)]) -> (Duration, Duration) {
        let before = children_cpu();
        let wall = self.tf_with(args, env);
        (wall, children_cpu().saturating_sub(before))
    }

    /// `tf` with extra environment for terraform and the providers it starts.
    pub fn tf_with(&self, args: &[&str], env: &[(&str, &str)]) -> Duration {
        let t = Instant::now();
        let out = Command::new("terraform")
            .args(args)
            .envs(env.iter().copied())
            .arg("-no-color")
            .current_dir(&self.dir)
            .env("TF_CLI_CONFIG_FILE", &self.cli)
            .env("CHECKPOINT_DISABLE", "1")
            .env("TF_IN_AUTOMATION", "1")
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let took = t.elapsed();
        assert!(
            out.status.success(),
            "terraform {args:?} failed:\n{}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        took
    }

    pub fn init(&self) {
        self.tf(&["init", "-input=false"]);
    }

    pub fn apply(&self) -> Duration {
        self.tf(&["apply", "-auto-approve", "-input=false"])
    }

    /// Median of `PLAN_ROUNDS` plans (with refresh).
    pub fn plan_median(&self) -> Duration {
        let mut times: Vec<Duration> = (0..PLAN_ROUNDS)
            .map(|_| self.tf(&["plan", "-input=false", "-refresh=true"]))
            .collect();
        times.sort();
        times[times.len() / 2]
    }
}

pub const REQUIRED: &str =
    "terraform {\n  required_providers {\n    fracgpu = { source = \"fracgpu/fracgpu\" }\n  }\n}\n";

/// `aks`, `gke` and `eks` pools in the sandbox's default clusters, time-sliced, one node each.
pub fn pools_tf(url: &str, aks: usize, gke: usize, eks: usize) -> String {
    pools_tf_on(
        url,
        aks,
        gke,
        eks,
        ("\"sandbox-aks\"", "\"sandbox-gke\"", "\"sandbox-eks\""),
    )
}

/// [`pools_tf`] with the pools' clusters given as expressions, so that larger worlds can spread
/// them over clusters with `count.index` (AKS holds at most 100 pools per cluster, GKE runs 5
/// operations per cluster at a time, and EKS holds 30 managed node groups per cluster unless
/// its quota is raised).
pub fn pools_tf_on(
    url: &str,
    aks: usize,
    gke: usize,
    eks: usize,
    (aks_cluster, gke_cluster, eks_cluster): (&str, &str, &str),
) -> String {
    format!(
        r#"{REQUIRED}
provider "fracgpu" {{
  sandbox = "{url}"
}}

resource "fracgpu_nodepool" "aks" {{
  count        = {aks}
  name         = "aks${{count.index}}"
  machine_type = "Standard_NC24ads_A100_v4"
  node_count   = 1
  aks {{
    resource_group = "sandbox-rg"
    cluster_name   = {aks_cluster}
  }}
  time_slicing {{ replicas = 10 }}
}}

resource "fracgpu_nodepool" "gke" {{
  count        = {gke}
  name         = "gke${{count.index}}"
  machine_type = "g2-standard-4"
  node_count   = 3 # one in each zone of the regional cluster
  gke {{
    location = "us-central1"
    cluster  = {gke_cluster}
  }}
  time_slicing {{ replicas = 10 }}
}}

resource "fracgpu_nodepool" "eks" {{
  count        = {eks}
  name         = "eks${{count.index}}"
  machine_type = "g4dn.xlarge"
  node_count   = 1
  eks {{
    cluster_name  = {eks_cluster}
    node_role_arn = "arn:aws:iam::123456789012:role/gpu-nodes"
    subnet_ids    = ["subnet-0a1", "subnet-0b2"]
  }}
  time_slicing {{ replicas = 4 }}
}}
"#
    )
}

pub fn data_tf(n: usize) -> String {
    format!(
        "resource \"terraform_data\" \"d\" {{\n  count = {n}\n  input = \"pool${{count.index}}\"\n}}\n"
    )
}

pub fn secs(d: Duration) -> f64 {
    d.as_secs_f64()
}

/// CPU time of this process's waited-for children and theirs (fields cutime and cstime of
/// /proc/self/stat, in clock ticks of 1/100 s on Linux).
pub fn children_cpu() -> Duration {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // The command name (field 2) may hold spaces; the fields after its closing parenthesis are
    // numbered from 3.
    let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or_default();
    let fields: Vec<u64> = rest
        .split_whitespace()
        .skip(1)
        .map(|f| f.parse().unwrap_or(0))
        .collect();
    // cutime and cstime are fields 16 and 17: indices 12 and 13 after field 3 (the state).
    let ticks = fields.get(12).copied().unwrap_or(0) + fields.get(13).copied().unwrap_or(0);
    Duration::from_millis(ticks * 10)
}
