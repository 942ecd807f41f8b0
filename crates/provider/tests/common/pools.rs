//! Many `fracgpu_nodepool`s at once, for the reliability scenarios (chaos, interrupts,
//! concurrency): configuration builders, and terraform's state and the sandbox's inventory read
//! into one comparable shape, so a scenario can say "state and cloud agree" in one call.

use std::collections::BTreeMap;

use serde_json::Value;

use super::terraform::{REQUIRED_PROVIDERS, Workspace};

/// One pool of a configuration: its cloud ("aks", "gke", "eks"), cluster, name, size (in all; a
/// GKE pool on the regional sandbox cluster needs a multiple of its three zones) and labels.
#[derive(Clone, Debug)]
pub struct Decl {
    pub cloud: &'static str,
    pub cluster: String,
    pub name: String,
    pub nodes: u32,
    pub labels: Vec<(String, String)>,
}

impl Decl {
    pub fn new(cloud: &'static str, cluster: &str, name: &str, nodes: u32) -> Decl {
        Decl {
            cloud,
            cluster: cluster.into(),
            name: name.into(),
            nodes,
            labels: vec![("pool".into(), name.into())],
        }
    }

    /// The resource block; `extra` goes inside it (e.g. a timeouts block).
    pub fn hcl(&self, extra: &str) -> String {
        let (machine, place) = match self.cloud {
            "aks" => (
                "Standard_NC24ads_A100_v4",
                format!(
                    "  aks {{\n    resource_group = \"sandbox-rg\"\n    cluster_name   = \"{}\"\n  }}\n",
                    self.cluster
                ),
            ),
            "gke" => (
                "g2-standard-4",
                format!(
                    "  gke {{\n    location = \"us-central1\"\n    cluster  = \"{}\"\n  }}\n",
                    self.cluster
                ),
            ),
            _ => (
                "g4dn.xlarge",
                format!(
                    "  eks {{\n    cluster_name  = \"{}\"\n    node_role_arn = \"arn:aws:iam::123456789012:role/gpu-nodes\"\n    subnet_ids    = [\"subnet-0a1\", \"subnet-0b2\"]\n  }}\n",
                    self.cluster
                ),
            ),
        };
        let labels: Vec<String> = self
            .labels
            .iter()
            .map(|(k, v)| format!("{k:?} = {v:?}"))
            .collect();
        format!(
            "resource \"fracgpu_nodepool\" \"{name}\" {{\n  name         = \"{name}\"\n  machine_type = \"{machine}\"\n  node_count   = {nodes}\n{place}  time_slicing {{ replicas = 4 }}\n  labels = {{ {labels} }}\n{extra}}}\n",
            name = self.name,
            nodes = self.nodes,
            labels = labels.join(", "),
        )
    }
}

/// A whole configuration: the provider pointed at the sandbox at `url`, and the pools.
pub fn config(url: &str, pools: &[Decl], extra: &str) -> String {
    let body: Vec<String> = pools.iter().map(|p| p.hcl(extra)).collect();
    format!(
        "{REQUIRED_PROVIDERS}\nprovider \"fracgpu\" {{\n  sandbox = \"{url}\"\n}}\n\n{}",
        body.concat()
    )
}

/// A pool as terraform's state or the sandbox's inventory knows it. `nodes` and `labels` are what
/// the pool's nodes get: the fixed node count and every node label.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Record {
    pub cloud: String,
    pub cluster: String,
    pub name: String,
    /// The cloud's ID in the form the provider documents for import (ARM IDs lower-cased: ARM
    /// compares them case-insensitively).
    pub id: String,
    pub nodes: Option<u64>,
    pub labels: BTreeMap<String, String>,
}

impl Record {
    /// Cloud, cluster and name: what identifies a pool.
    pub fn key(&self) -> (String, String, String) {
        (self.cloud.clone(), self.cluster.clone(), self.name.clone())
    }
}

pub struct StatePool {
    pub record: Record,
    pub tainted: bool,
}

fn block<'a>(values: &'a Value, name: &str) -> Option<&'a Value> {
    let b = &values[name];
    let b = if b.is_array() { &b[0] } else { b };
    (!b.is_null()).then_some(b)
}

fn s(x: &Value) -> String {
    x.as_str().unwrap_or_default().to_string()
}

fn string_map(v: &Value) -> BTreeMap<String, String> {
    v.as_object()
        .map(|o| o.iter().map(|(k, v)| (k.clone(), s(v))).collect())
        .unwrap_or_default()
}

fn normalize_id(cloud: &str, id: &str) -> String {
    if cloud == "aks" {
        id.to_lowercase()
    } else {
        id.to_string()
    }
}

/// The node pools in terraform's state, sorted.
pub fn state_pools(ws: &Workspace) -> Vec<StatePool> {
    let show = ws.show_json();
    let mut out: Vec<StatePool> = show["values"]["root_module"]["resources"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|r| r["type"] == "fracgpu_nodepool")
        .map(|r| {
            let v = &r["values"];
            let (cloud, cluster) = if let Some(b) = block(v, "aks") {
                ("aks", s(&b["cluster_name"]))
            } else if let Some(b) = block(v, "gke") {
                ("gke", s(&b["cluster"]))
            } else if let Some(b) = block(v, "eks") {
                ("eks", s(&b["cluster_name"]))
            } else {
                panic!("no cloud block in {r}")
            };
            StatePool {
                record: Record {
                    cloud: cloud.into(),
                    cluster,
                    name: s(&v["name"]),
                    id: normalize_id(cloud, &s(&v["id"])),
                    nodes: v["node_count"].as_u64(),
                    labels: string_map(&v["node_labels"]),
                },
                tainted: r["tainted"] == true,
            }
        })
        .collect();
    out.sort_by(|a, b| a.record.cmp(&b.record));
    out
}

/// The pools of the sandbox's inventory, sorted, each read from the document the cloud's API
/// answers for it.
pub fn inventory_pools(inv: &Value) -> Vec<Record> {
    let mut out: Vec<Record> = inv["pools"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|p| {
            let (cloud, cluster, name) = (s(&p["cloud"]), s(&p["cluster"]), s(&p["name"]));
            let r = &p["resource"];
            let (id, nodes, labels) = match cloud.as_str() {
                "aks" => (
                    s(&r["id"]),
                    r["properties"]["count"].as_u64(),
                    string_map(&r["properties"]["nodeLabels"]),
                ),
                "gke" => (
                    s(&r["selfLink"])
                        .split_once("/v1/")
                        .map(|(_, path)| path.to_string())
                        .unwrap_or_default(),
                    // GKE counts per zone; the inventory sums the pool's instance groups.
                    p["nodes"].as_u64(),
                    string_map(&r["config"]["labels"]),
                ),
                _ => (
                    format!("{}:{}", s(&r["clusterName"]), s(&r["nodegroupName"])),
                    r["scalingConfig"]["desiredSize"].as_u64(),
                    string_map(&r["labels"]),
                ),
            };
            Record {
                id: normalize_id(&cloud, &id),
                cloud,
                cluster,
                name,
                nodes,
                labels,
            }
        })
        .collect();
    out.sort();
    out
}

/// Per (cloud, cluster, name), from the inventory's `creates`: the creates that made a pool, and
/// the create requests that reached the cluster.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Creates {
    pub made: u64,
    pub requests: u64,
}

pub fn creates(inv: &Value) -> BTreeMap<(String, String, String), Creates> {
    inv["creates"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| {
            (
                (s(&c["cloud"]), s(&c["cluster"]), s(&c["name"])),
                Creates {
                    made: c["count"].as_u64().unwrap_or(0),
                    requests: c["requests"].as_u64().unwrap_or(0),
                },
            )
        })
        .collect()
}

/// How terraform's state and the cloud compare.
#[derive(Debug, Default)]
pub struct Agreement {
    /// In the cloud, unknown to terraform: always a bug.
    pub orphans: Vec<Record>,
    /// In state (tainted or not), gone from the cloud.
    pub ghosts: Vec<Record>,
    /// In both, but the ID, node count or labels differ: (state, cloud).
    pub differ: Vec<(Record, Record)>,
    pub in_both: usize,
    pub tainted: usize,
}

/// Compares terraform's state with the inventory, pool by pool (cloud, cluster, name), then ID,
/// node count and labels.
pub fn compare(state: &[StatePool], inventory: &[Record]) -> Agreement {
    let mut a = Agreement::default();
    let cloud: BTreeMap<_, _> = inventory.iter().map(|r| (r.key(), r)).collect();
    let known: BTreeMap<_, _> = state.iter().map(|p| (p.record.key(), p)).collect();
    for p in state {
        a.tainted += usize::from(p.tainted);
        match cloud.get(&p.record.key()) {
            None => a.ghosts.push(p.record.clone()),
            Some(c) if **c != p.record => a.differ.push((p.record.clone(), (*c).clone())),
            Some(_) => a.in_both += 1,
        }
    }
    for r in inventory {
        if !known.contains_key(&r.key()) {
            a.orphans.push(r.clone());
        }
    }
    a
}
