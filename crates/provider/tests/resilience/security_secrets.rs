//! Credentials never leave the provider except towards the API they are for: random canary
//! secrets (an Azure client secret, a Google access token, an AWS secret key, a cluster's bearer
//! token in a kubeconfig, and the access tokens the sandbox's token endpoint issues for the Azure
//! secret) are searched for in everything a full lifecycle with `TF_LOG=trace` leaves behind:
//! terraform's stdout and stderr, the log file, the state and its backup, the saved plan (its
//! zip entries unpacked, and `terraform show -json` of it) and every other file terraform wrote.
//!
//! The secrets come from files (`file()`), the environment and a kubeconfig, the ways that keep
//! them out of the configuration: a literal in a `.tf` file or a variable's value is stored in a
//! saved plan by terraform itself, whatever the provider does.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::common::sandbox::start_stack;
use crate::common::terraform::{Output, REQUIRED_PROVIDERS, Workspace};

fn canary(what: &str) -> String {
    format!(
        "canary{what}{:016x}{:016x}",
        fastrand::u64(..),
        fastrand::u64(..)
    )
}

/// Every file under `dir`, recursively (symlinks are not followed: the provider binary in the
/// mirror is ours, not terraform's output).
fn files_under(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let Ok(t) = e.file_type() else { continue };
        if t.is_dir() {
            files_under(&e.path(), out);
        } else if t.is_file() {
            out.push(e.path());
        }
    }
}

/// The entries of a zip archive (terraform's saved plan), inflated. Written for the archives Go's
/// archive/zip makes: sizes come from the central directory, entries are stored or deflated.
fn unzip(bytes: &[u8]) -> Vec<(String, Vec<u8>)> {
    let u16_at = |i: usize| u16::from_le_bytes([bytes[i], bytes[i + 1]]) as usize;
    let u32_at = |i: usize| {
        u32::from_le_bytes([bytes[i], bytes[i + 1], bytes[i + 2], bytes[i + 3]]) as usize
    };
    let eocd = (0..=bytes.len() - 22)
        .rev()
        .find(|&i| bytes[i..i + 4] == [0x50, 0x4b, 0x05, 0x06])
        .expect("end of central directory");
    let (count, mut at) = (u16_at(eocd + 10), u32_at(eocd + 16));
    let mut out = Vec::new();
    for _ in 0..count {
        assert_eq!(bytes[at..at + 4], [0x50, 0x4b, 0x01, 0x02], "central entry");
        let method = u16_at(at + 10);
        let size = u32_at(at + 20);
        let (name_len, extra_len, comment_len) =
            (u16_at(at + 28), u16_at(at + 30), u16_at(at + 32));
        let local = u32_at(at + 42);
        let name = String::from_utf8_lossy(&bytes[at + 46..at + 46 + name_len]).into_owned();
        let data_at = local + 30 + u16_at(local + 26) + u16_at(local + 28);
        let raw = &bytes[data_at..data_at + size];
        let data = match method {
            0 => raw.to_vec(),
            8 => {
                let mut v = Vec::new();
                flate2::read::DeflateDecoder::new(raw)
                    .read_to_end(&mut v)
                    .expect("deflate entry");
                v
            }
            m => panic!("zip entry {name}: compression method {m}"),
        };
        out.push((name, data));
        at += 46 + name_len + extra_len + comment_len;
    }
    out
}

struct Scan {
    canaries: Vec<(String, String)>,
    /// (where, which canary) for every hit.
    hits: Vec<(String, String)>,
    searched: usize,
}

impl Scan {
    fn new(canaries: Vec<(String, String)>) -> Scan {
        Scan {
            canaries,
            hits: Vec::new(),
            searched: 0,
        }
    }

    fn check(&mut self, place: &str, bytes: &[u8]) {
        use base64::Engine;
        self.searched += 1;
        for (what, c) in &self.canaries {
            // As is, and base64-encoded (headers and JSON byte fields carry secrets that way).
            let b64 = base64::engine::general_purpose::STANDARD.encode(c);
            let forms = [c.as_bytes(), b64.trim_end_matches('=').as_bytes()];
            if forms
                .iter()
                .any(|f| bytes.windows(f.len()).any(|w| w == *f))
            {
                self.hits.push((place.to_string(), what.clone()));
            }
        }
    }

    fn output(&mut self, step: &str, out: &Output) {
        self.check(&format!("{step}: stdout"), out.stdout.as_bytes());
        self.check(&format!("{step}: stderr"), out.stderr.as_bytes());
    }
}

#[test]
fn canary_secrets_appear_in_nothing_terraform_leaves_behind() {
    let st = start_stack(Duration::ZERO);
    let kubeconfig = st.kubeconfig("aks", "sandbox-aks");
    let kube_token = st.stack.kube.token("aks", "sandbox-aks").unwrap();
    assert!(
        kube_token.len() >= 32,
        "the cluster token is random enough to be a canary"
    );
    let (azure, google, aws) = (canary("azure"), canary("google"), canary("aws"));

    // The secrets' own files live outside the workspace; everything under the workspace's root
    // (including HOME and the log) is terraform's.
    let inputs = tempfile::tempdir().unwrap();
    let secret_file = |name: &str, v: &str| {
        let p = inputs.path().join(name);
        std::fs::write(&p, v).unwrap();
        p.display().to_string()
    };
    let (az_file, g_file) = (
        secret_file("azure.secret", &azure),
        secret_file("google.token", &google),
    );
    let main_tf = format!(
        r#"{REQUIRED_PROVIDERS}
provider "fracgpu" {{
  sandbox = "{url}"
  azure {{
    tenant_id     = "00000000-0000-0000-0000-000000000000"
    client_id     = "fracgpu-canary"
    client_secret = trimspace(file("{az_file}"))
  }}
  google {{
    access_token = trimspace(file("{g_file}"))
  }}
  kubernetes {{
    config_path = "{kubeconfig}"
  }}
}}

resource "fracgpu_nodepool" "aks" {{
  aks {{
    resource_group = "sandbox-rg"
    cluster_name   = "sandbox-aks"
  }}
  name         = "canaryaks"
  machine_type = "Standard_NC24ads_A100_v4"
  node_count   = 1
  time_slicing {{ replicas = 4 }}
}}

resource "fracgpu_nodepool" "gke" {{
  gke {{
    location = "us-central1"
    cluster  = "sandbox-gke"
  }}
  name         = "canarygke"
  machine_type = "g2-standard-4"
  node_count   = 3
  time_slicing {{ replicas = 2 }}
}}

resource "fracgpu_nodepool" "eks" {{
  eks {{
    cluster_name  = "sandbox-eks"
    node_role_arn = "arn:aws:iam::123456789012:role/gpu-nodes"
    subnet_ids    = ["subnet-0a1"]
  }}
  name         = "canaryeks"
  machine_type = "g4dn.xlarge"
  node_count   = 1
  time_slicing {{ replicas = 2 }}
}}

resource "fracgpu_device_plugin_config" "this" {{
  default_config = "ts"
  config {{
    name = "ts"
    time_slicing {{ replicas = 4 }}
  }}
}}
"#,
        url = st.url,
        kubeconfig = kubeconfig.display()
    );
    let ws = Workspace::new(&main_tf);
    let root = ws.dir.parent().unwrap().to_path_buf();
    let home = root.join("home");
    std::fs::create_dir_all(&home).unwrap();
    let log = root.join("terraform-trace.log");
    let ws = ws
        .env("TF_LOG", "trace")
        .env("TF_LOG_PATH", log.to_str().unwrap())
        .env("HOME", home.to_str().unwrap())
        // The AWS secret reaches the provider through the default chain's variables.
        .env("AWS_ACCESS_KEY_ID", "AKIDCANARYEXAMPLE")
        .env("AWS_SECRET_ACCESS_KEY", &aws)
        .env("AWS_EC2_METADATA_DISABLED", "true");

    let mut outputs: Vec<(String, Output)> = Vec::new();
    let mut step = |name: &str, args: &[&str]| {
        let out = ws.ok(args);
        outputs.push((name.to_string(), out));
    };
    step("init", &["init", "-no-color", "-input=false"]);
    step(
        "plan -out",
        &["plan", "-no-color", "-input=false", "-out=tfplan"],
    );
    let plan_zip = std::fs::read(ws.dir.join("tfplan")).unwrap();
    let plan_json = ws.ok(&["show", "-json", "-no-color", "tfplan"]);
    step(
        "apply tfplan",
        &["apply", "-no-color", "-input=false", "tfplan"],
    );
    step(
        "refresh",
        &[
            "apply",
            "-refresh-only",
            "-auto-approve",
            "-no-color",
            "-input=false",
        ],
    );
    // An error path: the token endpoint fails, and the diagnostic says so without the secret.
    crate::common::sandbox::inject(
        &st.url,
        serde_json::json!({"match": {"path_contains": "oauth2"}, "count": 100, "kind": "500"}),
    );
    let failed = ws.run(&[
        "apply",
        "-refresh-only",
        "-auto-approve",
        "-no-color",
        "-input=false",
    ]);
    crate::common::sandbox::control("DELETE", &format!("{}/_sandbox/faults", st.url), None);
    assert_ne!(failed.code, 0, "{}", failed.text());
    assert!(
        failed.text().contains("Azure access token"),
        "{}",
        failed.text()
    );
    outputs.push(("refresh with a failing token endpoint".into(), failed));
    let mut step = |name: &str, args: &[&str]| {
        let out = ws.ok(args);
        outputs.push((name.to_string(), out));
    };
    step("state rm", &["state", "rm", "fracgpu_nodepool.aks"]);
    step(
        "import",
        &[
            "import",
            "-no-color",
            "-input=false",
            "fracgpu_nodepool.aks",
            "/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/sandbox-rg/providers/Microsoft.ContainerService/managedClusters/sandbox-aks/agentPools/canaryaks",
        ],
    );
    step(
        "plan",
        &["plan", "-no-color", "-input=false", "-detailed-exitcode"],
    );
    step(
        "destroy",
        &["destroy", "-auto-approve", "-no-color", "-input=false"],
    );

    // The lifecycle really used the credentials: the pools were made through the clouds'
    // authenticated APIs and the ConfigMap through the cluster's, and the sandbox issued access
    // tokens for the Azure client secret.
    let issued: Vec<String> = st
        .stack
        .sandbox
        .with_world(|w, _| w.aks.tokens.iter().cloned().collect());
    assert!(
        !issued.is_empty(),
        "the provider fetched Azure access tokens"
    );
    let json: serde_json::Value = serde_json::from_str(&plan_json.stdout).unwrap();
    let planned = json["resource_changes"].as_array().map_or(0, Vec::len);
    assert_eq!(planned, 4, "the saved plan holds the four resources");

    let mut canaries = vec![
        ("Azure client secret".to_string(), azure.clone()),
        ("Google access token".to_string(), google.clone()),
        ("AWS secret key".to_string(), aws.clone()),
        ("Kubernetes bearer token".to_string(), kube_token.clone()),
    ];
    for (i, t) in issued.iter().enumerate() {
        canaries.push((format!("issued Azure access token {i}"), t.clone()));
    }
    let mut scan = Scan::new(canaries);
    // The scanner finds what it looks for: the inputs hold the canaries.
    scan.check("(control) kubeconfig", &std::fs::read(&kubeconfig).unwrap());
    scan.check("(control) azure secret file", azure.as_bytes());
    assert_eq!(scan.hits.len(), 2, "control hits: {:?}", scan.hits);
    scan.hits.clear();
    scan.searched = 0;

    for (name, out) in &outputs {
        scan.output(name, out);
    }
    scan.output("show -json tfplan", &plan_json);
    for (name, data) in unzip(&plan_zip) {
        scan.check(&format!("tfplan entry {name}"), &data);
    }
    let mut files = Vec::new();
    files_under(&root, &mut files);
    let log_bytes = std::fs::read(&log).expect("TF_LOG_PATH was written");
    assert!(
        String::from_utf8_lossy(&log_bytes).contains("[TRACE]"),
        "the log is at trace level"
    );
    for f in &files {
        let bytes = std::fs::read(f).unwrap();
        scan.check(
            &f.strip_prefix(&root).unwrap().display().to_string(),
            &bytes,
        );
    }
    println!(
        "searched {} outputs and files ({} files, TF_LOG {} KiB, plan {} KiB) for {} canaries",
        scan.searched,
        files.len(),
        log_bytes.len() / 1024,
        plan_zip.len() / 1024,
        scan.canaries.len()
    );
    assert!(scan.hits.is_empty(), "secrets leaked: {:#?}", scan.hits);
    assert!(
        files.iter().any(|f| f.ends_with("terraform.tfstate")),
        "the state file was searched"
    );
}

/// The schema marks every credential attribute sensitive, so terraform redacts them in plans
/// and its UI.
#[test]
fn credential_attributes_are_sensitive_in_the_schema() {
    let ws = Workspace::new(REQUIRED_PROVIDERS);
    ws.init();
    let out = ws.ok(&["providers", "schema", "-json"]);
    let v: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    let p = &v["provider_schemas"]["registry.terraform.io/fracgpu/fracgpu"];
    let attr = |block: &serde_json::Value, path: &[&str], name: &str| {
        let mut b = block;
        for seg in path {
            b = &b["block_types"][*seg]["block"];
        }
        b["attributes"][name].clone()
    };
    let provider = &p["provider"]["block"];
    let dpc = &p["resource_schemas"]["fracgpu_device_plugin_config"]["block"];
    let cases: Vec<(&serde_json::Value, Vec<&str>, &str)> = vec![
        (provider, vec!["azure"], "client_secret"),
        (provider, vec!["azure"], "oidc_token"),
        (provider, vec!["google"], "credentials"),
        (provider, vec!["google"], "access_token"),
        (provider, vec!["aws"], "access_key"),
        (provider, vec!["aws"], "secret_key"),
        (provider, vec!["kubernetes"], "token"),
        (dpc, vec!["kubernetes"], "token"),
    ];
    for (block, path, name) in cases {
        let a = attr(block, &path, name);
        assert!(a.is_object(), "{path:?}.{name} exists: {a}");
        assert_eq!(a["sensitive"], true, "{path:?}.{name} is sensitive");
    }
}
