//! The ways `fracgpu_device_plugin_config` reaches a cluster besides a kubeconfig, through the
//! real terraform against the sandbox's HTTPS Kubernetes API: host + token + CA, an exec
//! credential plugin (the way EKS, GKE and AKS hand out tokens), and a rejected token.

use crate::common::sandbox::start_stack;
use crate::common::terraform::{REQUIRED_PROVIDERS, Workspace};

fn config(kubernetes: &str) -> String {
    format!(
        r#"{REQUIRED_PROVIDERS}
resource "fracgpu_device_plugin_config" "this" {{
  kubernetes {{
{kubernetes}
  }}
  config {{ name = "all" }}
  config {{
    name = "time-sliced-4"
    time_slicing {{ replicas = 4 }}
  }}
}}

output "restarted_at" {{ value = fracgpu_device_plugin_config.this.restarted_at }}
"#
    )
}

#[test]
fn token_ca_and_exec_credentials_reach_the_cluster() {
    let st = start_stack(std::time::Duration::ZERO);
    let host = format!("{}/k8s/aks/sandbox-aks", st.stack.kube_url());
    let token = st.stack.kube.token("aks", "sandbox-aks").unwrap();
    let ws = Workspace::new("");
    ws.write("ca.pem", &st.stack.kube.ca_pem());

    // host + token + CA.
    let by_token = format!(
        "    host                   = \"{host}\"\n    token                  = \"{token}\"\n    cluster_ca_certificate = file(\"ca.pem\")"
    );
    ws.write("main.tf", &config(&by_token));
    ws.init();
    let out = ws.apply();
    assert!(!out.stdout.contains(&token), "the token is sensitive");
    // Two configs, no default_config and no "default" key: unlabelled nodes get nothing.
    assert!(
        out.text().contains("Warning: No default config"),
        "{}",
        out.text()
    );
    assert!(
        st.stack
            .kube
            .object(
                "aks",
                "sandbox-aks",
                "configmaps",
                "gpu-operator",
                "time-slicing-config"
            )
            .is_some()
    );
    let restarted = ws.output_json()["restarted_at"]["value"].clone();
    let (code, plan) = ws.plan_exit_code();
    assert_eq!(code, 0, "{}", plan.text());

    // An exec plugin that prints an ExecCredential, like `aws eks get-token`.
    let plugin = ws.dir.join("get-token.sh");
    std::fs::write(
        &plugin,
        "#!/bin/sh\nprintf '{\"apiVersion\":\"client.authentication.k8s.io/v1beta1\",\"kind\":\"ExecCredential\",\"status\":{\"token\":\"%s\"}}' \"$SANDBOX_TOKEN\"\n",
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&plugin, std::fs::Permissions::from_mode(0o755)).unwrap();
    let by_exec = format!(
        "    host                   = \"{host}\"\n    cluster_ca_certificate = file(\"ca.pem\")\n    exec {{\n      api_version = \"client.authentication.k8s.io/v1beta1\"\n      command     = \"{}\"\n      args        = [\"--cluster\", \"sandbox-aks\"]\n      env         = {{ SANDBOX_TOKEN = \"{token}\" }}\n    }}",
        plugin.display()
    );
    ws.write("main.tf", &config(&by_exec));
    ws.apply();
    assert_eq!(
        ws.output_json()["restarted_at"]["value"],
        restarted,
        "new credentials change nothing in the cluster: no restart"
    );
    let (code, plan) = ws.plan_exit_code();
    assert_eq!(code, 0, "{}", plan.text());

    // A token the API server rejects: apply fails and the state keeps the working one.
    let bad = by_token.replace(&token, "sandbox-wrong");
    ws.write("main.tf", &config(&bad));
    let out = ws.run(&["apply", "-no-color", "-auto-approve", "-input=false"]);
    assert_ne!(out.code, 0);
    assert!(
        out.text().contains("Kubernetes permission denied")
            && out.text().contains("kubernetes[0].host"),
        "{}",
        out.text()
    );

    ws.write("main.tf", &config(&by_token));
    ws.ok(&["destroy", "-auto-approve", "-no-color"]);
    assert!(
        st.stack
            .kube
            .object(
                "aks",
                "sandbox-aks",
                "configmaps",
                "gpu-operator",
                "time-slicing-config"
            )
            .is_none()
    );
}
