//! Bad input for `fracgpu_device_plugin_config`, through the real terraform: every case fails
//! and terraform's output names the attribute at fault (the diagnostic's path and its detail).

use crate::common::sandbox::start_stack;
use crate::common::terraform::{REQUIRED_PROVIDERS, Workspace};

struct Case {
    what: &'static str,
    /// The diagnostic's summary.
    summary: &'static str,
    body: &'static str,
    /// Text terraform's output must contain: the attribute path as the detail names it.
    names: &'static str,
}

fn cases() -> Vec<Case> {
    let c = |what, summary, body, names| Case {
        what,
        summary,
        body,
        names,
    };
    vec![
        c(
            "time-slicing replicas 1",
            "Value out of range",
            "config {\n name = \"ts\"\n time_slicing { replicas = 1 }\n}",
            "config[0].time_slicing[0].replicas",
        ),
        c(
            "time-slicing replicas 49",
            "Value out of range",
            "config {\n name = \"ts\"\n time_slicing { replicas = 49 }\n}",
            "config[0].time_slicing[0].replicas",
        ),
        c(
            "MPS replicas 1",
            "Value out of range",
            "config {\n name = \"m\"\n mps { replicas = 1 }\n}",
            "config[0].mps[0].replicas",
        ),
        c(
            "duplicate config names",
            "Duplicate config name",
            "config { name = \"a\" }\nconfig { name = \"a\" }",
            "config[1].name",
        ),
        c(
            "MPS with mig_strategy mixed",
            "MPS with the mixed MIG strategy",
            "mig_strategy = \"mixed\"\nconfig {\n name = \"m\"\n mps { replicas = 4 }\n}",
            "config[0].mps",
        ),
        c(
            "default naming no config",
            "Default config does not exist",
            "default_config = \"missing\"\nconfig { name = \"all\" }",
            "default_config",
        ),
        c(
            "config name with a space (not a ConfigMap key)",
            "Invalid attribute value",
            "config { name = \"time sliced\" }",
            "config[0].name",
        ),
        c(
            "config name starting with '-'",
            "Invalid attribute value",
            "config { name = \"-ts\" }",
            "config[0].name",
        ),
        c(
            "config name with '/'",
            "Invalid attribute value",
            "config { name = \"a/b\" }",
            "config[0].name",
        ),
        c(
            "config name longer than a label value",
            "Invalid attribute value",
            "config { name = \"a234567890123456789012345678901234567890123456789012345678901234\" }",
            "config[0].name",
        ),
        c(
            "yaml the plugin refuses",
            "Invalid device plugin config",
            "config {\n name = \"y\"\n yaml = \"version: v2\\n\"\n}",
            "config[0].yaml",
        ),
        c(
            "yaml with MPS and migStrategy mixed",
            "Invalid device plugin config",
            "config {\n name = \"y\"\n yaml = \"version: v1\\nflags:\\n  migStrategy: mixed\\nsharing:\\n  mps:\\n    resources:\\n    - name: nvidia.com/gpu\\n      replicas: 4\\n\"\n}",
            "config[0].yaml",
        ),
        c(
            "yaml and a sharing block together",
            "Conflicting arguments",
            "config {\n name = \"y\"\n yaml = \"\"\n time_slicing { replicas = 4 }\n}",
            "config[0].yaml",
        ),
        c(
            "two sharing blocks",
            "Conflicting arguments",
            "config {\n name = \"y\"\n time_slicing { replicas = 4 }\n mps { replicas = 4 }\n}",
            "time_slicing and mps cannot be set together",
        ),
        c(
            "no config at all",
            "Missing config",
            "default_config = \"all\"",
            "`config` block",
        ),
        c(
            "unknown mig_strategy",
            "Invalid attribute value",
            "mig_strategy = \"dynamic\"\nconfig { name = \"all\" }",
            "mig_strategy",
        ),
        c(
            "unknown delivery",
            "Invalid attribute value",
            "delivery = \"kubectl\"\nconfig { name = \"all\" }",
            "delivery",
        ),
        c(
            "helm delivery without a helm block",
            "Missing helm block",
            "delivery = \"helm\"\nconfig { name = \"all\" }",
            "delivery",
        ),
        c(
            "helm block with cluster_policy delivery",
            "Unused helm block",
            "config { name = \"all\" }\nhelm {\n release = \"r\"\n namespace = \"n\"\n chart = \"c\"\n}",
            "helm",
        ),
        c(
            "bad helm values_path",
            "Invalid attribute value",
            "delivery = \"helm\"\nconfig { name = \"all\" }\nhelm {\n release = \"r\"\n namespace = \"n\"\n chart = \"c\"\n values_path = \"a..b\"\n}",
            "helm[0].values_path",
        ),
        c(
            "namespace not a DNS label",
            "Invalid attribute value",
            "namespace = \"GPU_Operator\"\nconfig { name = \"all\" }",
            "namespace is \"GPU_Operator\"",
        ),
        c(
            "ConfigMap name not a DNS subdomain",
            "Invalid attribute value",
            "name = \"Bad_Name\"\nconfig { name = \"all\" }",
            "name is \"Bad_Name\"",
        ),
    ]
}

fn main_tf(provider_kube: &str, body: &str) -> String {
    format!(
        "{REQUIRED_PROVIDERS}\nprovider \"fracgpu\" {{\n{provider_kube}\n}}\n\nresource \"fracgpu_device_plugin_config\" \"this\" {{\n{body}\n}}\n"
    )
}

#[test]
fn bad_input_table_names_the_attribute() {
    let st = start_stack(std::time::Duration::ZERO);
    // A cluster without the GPU operator, for the missing-CRD case.
    st.stack.kube.add_cluster_without_operator("aks", "bare");
    let good = st.kubeconfig("aks", "sandbox-aks").display().to_string();
    let bare = st.kubeconfig("aks", "bare").display().to_string();
    let with_kc = |p: &str| format!("  kubernetes {{\n    config_path = \"{p}\"\n  }}");

    let mut table = cases();
    let unreachable = "config { name = \"all\" }\nkubernetes {\n host = \"https://127.0.0.1:9\"\n token = \"t\"\n insecure = true\n}".to_string();
    let missing_kubeconfig =
        "config { name = \"all\" }\nkubernetes { config_path = \"/nonexistent/kubeconfig\" }"
            .to_string();
    assert!(table.len() >= 15);

    let ws = Workspace::new(&main_tf(&with_kc(&good), "config { name = \"all\" }"));
    ws.init();
    let mut failures = Vec::new();
    let mut check = |what: &str, tf: String, summary: &str, names: &str, apply: bool| {
        ws.write("main.tf", &tf);
        let out = if apply {
            ws.run(&["apply", "-no-color", "-auto-approve", "-input=false"])
        } else {
            ws.run(&["plan", "-no-color", "-input=false"])
        };
        let text = out.text();
        if let Ok(dump) = std::env::var("DPC_DUMP") {
            use std::io::Write as _;
            let mut f = std::fs::OpenOptions::new()
                .append(true)
                .create(true)
                .open(dump)
                .unwrap();
            writeln!(f, "=== {what}\n{text}").unwrap();
        }
        let summary_line = format!("Error: {summary}");
        // terraform wraps details at 78 columns.
        let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
        if out.code == 0 || !text.contains(&summary_line) || !flat.contains(names) {
            failures.push(format!(
                "--- {what}: exit {}, expected {summary_line:?} naming {names:?}:\n{text}",
                out.code
            ));
        }
    };
    for case in table.drain(..) {
        check(
            case.what,
            main_tf(&with_kc(&good), case.body),
            case.summary,
            case.names,
            false,
        );
    }
    // Cluster problems show at apply.
    check(
        "unreachable cluster",
        main_tf("", &unreachable),
        "Kubernetes cluster unreachable",
        "Check kubernetes[0].host",
        true,
    );
    check(
        "kubeconfig file missing",
        main_tf("", &missing_kubeconfig),
        "Invalid Kubernetes settings",
        "Check kubernetes[0].config_path",
        true,
    );
    check(
        "missing ClusterPolicy CRD",
        main_tf(&with_kc(&bare), "config { name = \"all\" }"),
        "NVIDIA GPU operator not installed",
        "delivery = \"cluster_policy\" needs the GPU operator",
        true,
    );
    // A ConfigMap that exists already is not silently adopted.
    let made = std::process::Command::new("kubectl")
        .args([
            "--kubeconfig",
            &good,
            "-n",
            "gpu-operator",
            "create",
            "configmap",
            "existing",
        ])
        .output()
        .expect("kubectl runs");
    assert!(
        made.status.success(),
        "{}",
        String::from_utf8_lossy(&made.stderr)
    );
    check(
        "ConfigMap exists already",
        main_tf(
            &with_kc(&good),
            "name = \"existing\"\nconfig { name = \"all\" }",
        ),
        "ConfigMap already exists",
        "terraform import fracgpu_device_plugin_config.<name> gpu-operator/existing",
        true,
    );
    check(
        "create slower than its timeout",
        main_tf(
            &with_kc(&good),
            "config { name = \"all\" }\ntimeouts { create = \"1ms\" }",
        ),
        "Operation timed out",
        "raise timeouts.create",
        true,
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
