//! Least privilege for `fracgpu_device_plugin_config`, on a control plane with RBAC on
//! (`testkit::apiserver`) and NVIDIA's gpu-operator chart v25.10.1 (or, for the
//! `nvidia_device_plugin` delivery, its standalone device plugin chart v0.20.0) installed: a ServiceAccount bound to exactly the Role and
//! ClusterRole of the guide `gpu-operator-deliveries.md` (read from its YAML blocks, so the guide
//! and the test cannot disagree) applies, plans and destroys each delivery through the real
//! terraform with `host`, `token` and `cluster_ca_certificate`. Then one rule at a time is taken
//! away, and the apply must fail with a diagnostic that names the verb, the resource and the
//! namespace the API server refused.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::device_plugin_config_helm::{helm_config, time_sliced};
use crate::common::operator::{Chart, MISSING_KUBECONFIG, OperatorCluster};
use crate::common::terraform::{Output, REQUIRED_PROVIDERS, Workspace};
use crate::common::tools::Tool;

const GUIDE: &str = "templates/guides/gpu-operator-deliveries.md";
/// The operator's namespace, where the guide's Roles live.
const NS: &str = "gpu-operator";
const CM: &str = "time-slicing-config";

/// Every manifest in the YAML blocks of the guide's "Least privilege" section.
fn guide_manifests() -> Vec<Value> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(GUIDE);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{GUIDE}: {e}"));
    let section = text
        .split("\n## ")
        .find(|s| s.starts_with("Least privilege"))
        .unwrap_or_else(|| panic!("{GUIDE} has a section \"## Least privilege\""));
    let mut docs = Vec::new();
    let mut block: Option<Vec<&str>> = None;
    for line in section.lines() {
        match (&mut block, line.trim_end()) {
            (None, "```yaml") => block = Some(Vec::new()),
            (Some(lines), "```") => {
                for doc in lines.split(|l| *l == "---") {
                    let doc: Value = serde_saphyr::from_str(&doc.join("\n"))
                        .unwrap_or_else(|e| panic!("{GUIDE}: a YAML block does not parse: {e}"));
                    docs.push(doc);
                }
                block = None;
            }
            (Some(lines), l) => lines.push(l),
            _ => {}
        }
    }
    docs
}

/// The guide's Role and ClusterRole named `name`.
fn rules_of(name: &str) -> Vec<Value> {
    let docs: Vec<Value> = guide_manifests()
        .into_iter()
        .filter(|d| d["metadata"]["name"] == name)
        .collect();
    let kinds: Vec<&str> = docs.iter().filter_map(|d| d["kind"].as_str()).collect();
    assert_eq!(kinds, ["Role", "ClusterRole"], "{GUIDE}: {name}");
    docs
}

/// The manifests with `verb` taken away from `resource` (and from nothing else).
fn without(docs: &[Value], resource: &str, verb: &str) -> Vec<Value> {
    let mut removed = false;
    let out = docs
        .iter()
        .map(|d| {
            let mut d = d.clone();
            let mut rules = Vec::new();
            for r in d["rules"].as_array().cloned().unwrap_or_default() {
                let has = |k: &str, v: &str| {
                    r[k].as_array()
                        .is_some_and(|a| a.iter().any(|x| x.as_str() == Some(v)))
                };
                if !(has("resources", resource) && has("verbs", verb)) {
                    rules.push(r);
                    continue;
                }
                removed = true;
                let others: Vec<&Value> = r["resources"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter(|x| x.as_str() != Some(resource))
                    .collect();
                if !others.is_empty() {
                    let mut rest = r.clone();
                    rest["resources"] = json!(others);
                    rules.push(rest);
                }
                let verbs: Vec<&Value> = r["verbs"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter(|x| x.as_str() != Some(verb))
                    .collect();
                if !verbs.is_empty() {
                    let mut mine = r.clone();
                    mine["resources"] = json!([resource]);
                    mine["verbs"] = json!(verbs);
                    rules.push(mine);
                }
            }
            d["rules"] = json!(rules);
            d
        })
        .collect();
    assert!(removed, "the guide grants {verb} on {resource}");
    out
}

/// A ServiceAccount in the operator's namespace bound to the Role and ClusterRole `name`.
struct Identity<'a> {
    op: &'a OperatorCluster,
    name: &'static str,
    token: String,
}

impl<'a> Identity<'a> {
    fn new(op: &'a OperatorCluster, name: &'static str) -> Identity<'a> {
        Identity::with_role_in(op, name, NS)
    }

    /// The same, with the Role (and its binding) in `role_ns`.
    fn with_role_in(op: &'a OperatorCluster, name: &'static str, role_ns: &str) -> Identity<'a> {
        let token = op.server.service_account_token(NS, name);
        let subject = json!([{"kind": "ServiceAccount", "name": name, "namespace": NS}]);
        let ref_ = |kind: &str| json!({"apiGroup": "rbac.authorization.k8s.io", "kind": kind, "name": name});
        for binding in [
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
                "metadata": {"name": name, "namespace": role_ns}, "roleRef": ref_("Role"), "subjects": subject}),
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
                "metadata": {"name": name}, "roleRef": ref_("ClusterRole"), "subjects": subject}),
        ] {
            op.server
                .kubectl_stdin(&["apply", "-f", "-"], &binding.to_string());
        }
        Identity { op, name, token }
    }

    /// Makes the Role and ClusterRole `docs`, and waits until the authorizer answers `verb` on
    /// `resource` (kubectl's `TYPE[/NAME]`, in `ns` or cluster-wide) with `allowed`.
    fn grant(&self, docs: &[Value], verb: &str, resource: &str, ns: Option<&str>, allowed: bool) {
        for d in docs {
            self.op
                .server
                .kubectl_stdin(&["apply", "-f", "-"], &d.to_string());
        }
        let who = format!("system:serviceaccount:{NS}:{}", self.name);
        let mut args = vec!["auth", "can-i", verb, resource, "--as", &who];
        if let Some(ns) = ns {
            args.extend(["-n", ns]);
        }
        let start = Instant::now();
        loop {
            let out = self.op.server.kubectl(&args);
            let said = String::from_utf8_lossy(&out.stdout).trim() == "yes";
            if said == allowed {
                return;
            }
            assert!(
                start.elapsed() < Duration::from_secs(20),
                "RBAC never answered {allowed} for {verb} {resource}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// The provider's `kubernetes` block for this identity (the CA in the workspace's ca.pem).
    fn access(&self) -> String {
        format!(
            "    host                   = \"{}\"\n    token                  = \"{}\"\n    cluster_ca_certificate = file(\"ca.pem\")",
            self.op.server.url, self.token
        )
    }
}

/// terraform's output on one line: the diagnostic box's borders gone and its wrapped lines joined.
fn flat(out: &Output) -> String {
    out.text()
        .lines()
        .map(|l| l.trim_start_matches(['│', '╷', '╵', ' ']).trim())
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join(" ")
}

/// The apply fails, and what it prints names the refused verb, resource and scope.
fn assert_refused(out: &Output, sa: &str, verb: &str, resource: &str, ns: Option<&str>) -> String {
    let text = flat(out);
    assert_ne!(out.code, 0, "without {verb} on {resource}:\n{}", out.text());
    let scope = match ns {
        Some(ns) => format!("in the namespace \"{ns}\""),
        None => "at the cluster scope".to_string(),
    };
    for part in [
        format!("User \"system:serviceaccount:{NS}:{sa}\""),
        format!("cannot {verb} resource \"{resource}\""),
        scope,
    ] {
        assert!(
            text.contains(&part),
            "without {verb} on {resource}, the diagnostic names {part:?}:\n{}",
            out.text()
        );
    }
    text
}

fn policy_config(access: &str) -> String {
    format!(
        r#"{REQUIRED_PROVIDERS}
resource "fracgpu_device_plugin_config" "this" {{
  namespace      = "{NS}"
  default_config = "all"
  kubernetes {{
{access}
  }}
  config {{ name = "all" }}
{ts}}}
"#,
        ts = time_sliced("time-sliced-4", 4)
    )
}

#[test]
fn cluster_policy_delivery_needs_exactly_the_guides_rules() {
    let Some(op) = OperatorCluster::start(Tool::Helm4) else {
        return;
    };
    op.install(Chart::Nvidia, &[]);
    let rules = rules_of("fracgpu-cluster-policy");
    let sa = Identity::new(&op, "fracgpu-cluster-policy");
    sa.grant(&rules, "patch", "configmaps", Some(NS), true);
    let ws = Workspace::new(&policy_config(&sa.access())).env("KUBECONFIG", MISSING_KUBECONFIG);
    ws.write("ca.pem", &op.server.ca_pem());
    ws.init();

    // With exactly the guide's rules: apply, an empty plan, destroy.
    ws.apply();
    assert_eq!(
        op.operator_reads(NS),
        (
            json!({"name": CM, "default": "all"}),
            vec!["all".to_string(), "time-sliced-4".to_string()]
        )
    );
    let (code, plan) = ws.plan_exit_code();
    assert_eq!(code, 0, "{}", plan.text());
    ws.ok(&["destroy", "-auto-approve", "-no-color"]);
    assert!(op.configmap(NS, CM).is_none());
    assert!(
        op.cluster_policy()["spec"]["devicePlugin"]
            .get("config")
            .is_none()
    );

    // One rule less each time: (verb, resource as the API server names it, as kubectl
    // names it, namespace).
    let cases = [
        ("patch", "configmaps", "configmaps", Some(NS)),
        (
            "patch",
            "clusterpolicies",
            "clusterpolicies.nvidia.com/cluster-policy",
            None,
        ),
        (
            "patch",
            "daemonsets",
            "daemonsets.apps/nvidia-device-plugin-daemonset",
            Some(NS),
        ),
    ];
    for (verb, resource, kubectl_resource, ns) in cases {
        sa.grant(
            &without(&rules, resource, verb),
            verb,
            kubectl_resource,
            ns,
            false,
        );
        let out = ws.run(&["apply", "-no-color", "-auto-approve", "-input=false"]);
        let text = assert_refused(&out, sa.name, verb, resource, ns);
        eprintln!("without {verb} on {resource}:\n{}", out.text());
        // The provider's own hint lists every rule of the guide's manifests.
        assert!(text.contains("Kubernetes permission denied"), "{text}");
        for rule in rules.iter().flat_map(|d| d["rules"].as_array().unwrap()) {
            for r in rule["resources"].as_array().unwrap() {
                let r = r.as_str().unwrap();
                assert!(text.contains(r), "the hint names {r}: {text}");
            }
        }
        // Whatever was written before the refusal is in state, and destroy with the rules
        // back removes it.
        sa.grant(&rules, verb, kubectl_resource, ns, true);
        ws.ok(&["destroy", "-auto-approve", "-no-color"]);
        assert!(op.configmap(NS, CM).is_none(), "{verb} {resource}");
        assert!(
            op.cluster_policy()["spec"]["devicePlugin"]
                .get("config")
                .is_none(),
            "{verb} {resource}"
        );
    }
}

#[test]
fn helm_delivery_needs_exactly_the_guides_rules() {
    let Some(op) = OperatorCluster::start(Tool::Helm4) else {
        return;
    };
    let chart = Chart::Nvidia;
    op.install(chart, &[]);
    let rules = rules_of("fracgpu-helm");
    let sa = Identity::new(&op, "fracgpu-helm");
    sa.grant(&rules, "list", "secrets", Some(NS), true);
    let chart_path = op.chart(chart);
    let ws = Workspace::new(&helm_config(
        &sa.access(),
        &op.helm,
        &chart_path,
        chart.release(),
        &time_sliced("time-sliced-4", 4),
        "time-sliced-4",
    ))
    .env("KUBECONFIG", MISSING_KUBECONFIG);
    ws.write("ca.pem", &op.server.ca_pem());
    ws.init();

    // With exactly the guide's rules: apply, an empty plan, destroy.
    ws.apply();
    assert_eq!(
        op.operator_reads(NS),
        (
            json!({"name": CM, "default": "time-sliced-4"}),
            vec!["time-sliced-4".to_string()]
        )
    );
    assert_eq!(op.revision(chart), 2);
    let (code, plan) = ws.plan_exit_code();
    assert_eq!(code, 0, "{}", plan.text());
    ws.ok(&["destroy", "-auto-approve", "-no-color"]);
    assert_eq!(op.values(chart), json!({}));
    assert!(op.configmap(NS, CM).is_none());

    // One rule less each time. The provider reads the release itself (Secrets list); the
    // others are refused to helm, whose error the diagnostic quotes.
    let cases = [
        ("list", "secrets", "secrets", Some(NS), true),
        ("create", "configmaps", "configmaps", Some(NS), false),
        (
            "patch",
            "clusterpolicies",
            "clusterpolicies.nvidia.com/cluster-policy",
            None,
            false,
        ),
    ];
    for (verb, resource, kubectl_resource, ns, by_provider) in cases {
        sa.grant(
            &without(&rules, resource, verb),
            verb,
            kubectl_resource,
            ns,
            false,
        );
        let out = ws.run(&["apply", "-no-color", "-auto-approve", "-input=false"]);
        let text = assert_refused(&out, sa.name, verb, resource, ns);
        eprintln!("without {verb} on {resource}:\n{}", out.text());
        let summary = if by_provider {
            "Kubernetes permission denied"
        } else {
            "Helm upgrade failed"
        };
        assert!(text.contains(summary), "{text}");
        sa.grant(&rules, verb, kubectl_resource, ns, true);
        ws.ok(&["destroy", "-auto-approve", "-no-color"]);
        let (code, plan) = ws.plan_exit_code();
        assert_eq!(
            code,
            2,
            "{verb} {resource}: a create is planned\n{}",
            plan.text()
        );
    }

    // Without update on Secrets helm cannot record how its upgrade ended: the revision stays
    // pending-upgrade and the provider refuses to apply until it is rolled back.
    let history: Value =
        serde_json::from_str(&op.helm(NS, &["history", chart.release().0, "-o", "json"])).unwrap();
    let deployed = history
        .as_array()
        .into_iter()
        .flatten()
        .find(|r| r["status"] == "deployed")
        .map(|r| r["revision"].to_string())
        .expect("a deployed revision");
    sa.grant(
        &without(&rules, "secrets", "update"),
        "update",
        "secrets",
        Some(NS),
        false,
    );
    let out = ws.run(&["apply", "-no-color", "-auto-approve", "-input=false"]);
    assert_refused(&out, sa.name, "update", "secrets", Some(NS));
    eprintln!("without update on secrets:\n{}", out.text());
    sa.grant(&rules, "update", "secrets", Some(NS), true);
    let out = ws.run(&["apply", "-no-color", "-auto-approve", "-input=false"]);
    assert_ne!(out.code, 0);
    assert!(flat(&out).contains("pending-upgrade"), "{}", out.text());
    // Back to the revision deployed before (the one before the pending one is a failed
    // upgrade that carries this resource's values).
    let (ok, _, err) = op.helm_try(NS, &["rollback", chart.release().0, &deployed]);
    assert!(ok, "helm rollback of the pending release: {err}");
    ws.apply();
    assert_eq!(
        op.operator_reads(NS).0,
        json!({"name": CM, "default": "time-sliced-4"})
    );
    let (code, plan) = ws.plan_exit_code();
    assert_eq!(code, 0, "{}", plan.text());
    ws.ok(&["destroy", "-auto-approve", "-no-color"]);
    assert_eq!(op.values(chart), json!({}));
}

/// The GitOps deliveries touch one object: the Application (or HelmRelease) that holds the
/// operator's values. With exactly the guide's rules: apply, an empty plan, destroy; without
/// `update` on it the apply names the verb, resource and namespace refused.
#[test]
fn gitops_deliveries_need_exactly_the_guides_rules() {
    let Some(op) = OperatorCluster::start(Tool::Helm4) else {
        return;
    };
    op.server.install_crds(
        &op.fixtures,
        &[
            "argoproj.io_applications.yaml",
            "helm.toolkit.fluxcd.io_helmreleases.yaml",
        ],
    );
    for f in ["00-namespaces.yaml", "application.yaml", "helmrelease.yaml"] {
        let path = op.fixtures.join("samples").join(f);
        op.server
            .kubectl_ok(&["apply", "--server-side", "-f", &path.display().to_string()]);
    }
    for (delivery, role, role_ns, resource, kubectl_resource, block) in [
        (
            "argocd",
            "fracgpu-argocd",
            "argocd",
            "applications",
            "applications.argoproj.io/gpu-operator",
            "  argocd {\n    application = \"gpu-operator\"\n  }\n",
        ),
        (
            "flux",
            "fracgpu-flux",
            "flux-system",
            "helmreleases",
            "helmreleases.helm.toolkit.fluxcd.io/gpu-operator",
            "  flux {\n    helm_release = \"gpu-operator\"\n  }\n",
        ),
    ] {
        let rules = rules_of(role);
        let sa = Identity::with_role_in(&op, role, role_ns);
        sa.grant(&rules, "update", kubectl_resource, Some(role_ns), true);
        let config = format!(
            "{REQUIRED_PROVIDERS}\nresource \"fracgpu_device_plugin_config\" \"this\" {{\n  delivery       = \"{delivery}\"\n  default_config = \"all\"\n  kubernetes {{\n{}\n  }}\n  config {{ name = \"all\" }}\n{}{block}}}\n",
            sa.access(),
            time_sliced("time-sliced-4", 4),
        );
        let ws = Workspace::new(&config).env("KUBECONFIG", MISSING_KUBECONFIG);
        ws.write("ca.pem", &op.server.ca_pem());
        ws.init();
        ws.apply();
        let (code, plan) = ws.plan_exit_code();
        assert_eq!(code, 0, "{delivery}: {}", plan.text());
        ws.ok(&["destroy", "-auto-approve", "-no-color"]);

        sa.grant(
            &without(&rules, resource, "update"),
            "update",
            kubectl_resource,
            Some(role_ns),
            false,
        );
        let out = ws.run(&["apply", "-no-color", "-auto-approve", "-input=false"]);
        let text = assert_refused(&out, sa.name, "update", resource, Some(role_ns));
        assert!(text.contains("Kubernetes permission denied"), "{text}");
        sa.grant(&rules, "update", kubectl_resource, Some(role_ns), true);
    }
}

/// NVIDIA's standalone device plugin chart v0.20.0, installed by helm 4 on a control plane with
/// no GPU operator: with exactly the guide's rules the `nvidia_device_plugin` delivery applies,
/// plans empty and destroys; without a rule the provider needs itself, or one helm needs, the
/// apply names what was refused.
#[test]
fn nvidia_device_plugin_delivery_needs_exactly_the_guides_rules() {
    let Some(op) = OperatorCluster::start(Tool::Helm4) else {
        return;
    };
    let (release, ns) = ("nvdp", "nvidia-device-plugin");
    let chart = op
        .fixtures
        .join("charts/nvidia-device-plugin-0.20.0.tgz")
        .display()
        .to_string();
    op.helm(ns, &["install", release, &chart, "--create-namespace"]);
    op.server.kubectl_ok(&["create", "namespace", NS]);
    let rules = rules_of("fracgpu-nvidia-device-plugin");
    let sa = Identity::with_role_in(&op, "fracgpu-nvidia-device-plugin", ns);
    sa.grant(&rules, "list", "secrets", Some(ns), true);
    let config = format!(
        r#"{REQUIRED_PROVIDERS}
resource "fracgpu_device_plugin_config" "this" {{
  delivery       = "nvidia_device_plugin"
  default_config = "time-sliced-4"
  kubernetes {{
{access}
  }}
{ts}  nvidia_device_plugin {{
    release   = "{release}"
    namespace = "{ns}"
    chart     = "{chart}"
    helm_path = "{helm}"
  }}
}}
"#,
        access = sa.access(),
        ts = time_sliced("time-sliced-4", 4),
        helm = op.helm.display(),
    );
    let ws = Workspace::new(&config).env("KUBECONFIG", MISSING_KUBECONFIG);
    ws.write("ca.pem", &op.server.ca_pem());
    ws.init();

    // With exactly the guide's rules: apply, an empty plan, destroy.
    ws.apply();
    assert!(op.configmap(ns, CM).is_some());
    let (code, plan) = ws.plan_exit_code();
    assert_eq!(code, 0, "{}", plan.text());
    ws.ok(&["destroy", "-auto-approve", "-no-color"]);
    assert!(op.configmap(ns, CM).is_none());

    // One rule less each time: what the provider does itself, and what helm does.
    let cases = [
        ("list", "secrets", "secrets", true),
        ("create", "configmaps", "configmaps", true),
        ("patch", "daemonsets", "daemonsets", false),
    ];
    for (verb, resource, kubectl_resource, by_provider) in cases {
        sa.grant(
            &without(&rules, resource, verb),
            verb,
            kubectl_resource,
            Some(ns),
            false,
        );
        let out = ws.run(&["apply", "-no-color", "-auto-approve", "-input=false"]);
        let text = assert_refused(&out, sa.name, verb, resource, Some(ns));
        let summary = if by_provider {
            "Kubernetes permission denied"
        } else {
            "Helm upgrade failed"
        };
        assert!(text.contains(summary), "{text}");
        sa.grant(&rules, verb, kubectl_resource, Some(ns), true);
        ws.ok(&["destroy", "-auto-approve", "-no-color"]);
    }
}
