//! The sandbox stays honest: the requests the provider, helm and kubectl make go to the sandbox's
//! Kubernetes API and to a real kube-apiserver (testkit, v1.34.9, with NVIDIA's ClusterPolicy CRD
//! from the fixtures), and the answers are compared: status code, `Warning` headers and the body,
//! without what differs between any two servers (uid, resourceVersion, creationTimestamp, the
//! times in managedFields and in conflict messages).
//!
//! Every difference the sandbox keeps on purpose is listed in [`KNOWN`] with its reason. The test
//! fails on a difference that is not listed, and on a listed one that no longer shows (so the list
//! cannot go stale).

use super::*;
use testkit::apiserver::{self, ApiServer};

/// Differences left in on purpose: (request label, JSON pointer prefix into the answer, why).
/// `code` and `warnings` name the status code and the Warning headers.
const KNOWN: &[(&str, &str, &str)] = &[
    // apps/v1 DaemonSet: the real registry defaults the pod template (pkg/apis/core/v1/defaults.go,
    // pkg/apis/apps/v1/defaults.go), keeps `deprecated.daemonset.template.generation`
    // (pkg/registry/apps/daemonset/strategy.go) and tracks containers as a list keyed by name and
    // the selector as atomic. The sandbox models none of this: the provider only merges an
    // annotation into the pod template, and that part (its value, generation, and the
    // provider's own managedFields entry) is compared.
    ("seed daemonset", "/spec/template/spec", DS_DEFAULTS),
    ("seed daemonset", "/spec/revisionHistoryLimit", DS_DEFAULTS),
    (
        "seed daemonset",
        "/spec/updateStrategy/rollingUpdate",
        DS_DEFAULTS,
    ),
    ("seed daemonset", "/metadata/annotations", DS_DEFAULTS),
    ("seed daemonset", "/metadata/managedFields/0", DS_DEFAULTS),
    ("seed daemonset", "/status", DS_CONTROLLER),
    ("daemonset restart", "/spec/template/spec", DS_DEFAULTS),
    (
        "daemonset restart",
        "/spec/revisionHistoryLimit",
        DS_DEFAULTS,
    ),
    (
        "daemonset restart",
        "/spec/updateStrategy/rollingUpdate",
        DS_DEFAULTS,
    ),
    ("daemonset restart", "/metadata/annotations", DS_DEFAULTS),
    (
        "daemonset restart",
        "/metadata/managedFields/0",
        DS_DEFAULTS,
    ),
    ("daemonset restart", "/status", DS_CONTROLLER),
    // Nodes: the real server's admission (TaintNodesByCondition) adds the not-ready taint and
    // the core/v1 defaults fill an empty status. The sandbox's nodes come from the digital
    // twin, which registers them ready; a client never creates a Node.
    ("node create", "/spec", NODE_REGISTRATION),
    ("node create", "/status", NODE_REGISTRATION),
    ("node list by label", "/items/0/spec", NODE_REGISTRATION),
    ("node list by label", "/items/0/status", NODE_REGISTRATION),
    (
        "clusterpolicy strict merge patch unknown field",
        "/message",
        STRICT_PATCH,
    ),
    (
        "clusterpolicy strict merge patch unknown field",
        "/details/causes/0/message",
        STRICT_PATCH,
    ),
];

const DS_DEFAULTS: &str =
    "apps/v1 defaulting, the template generation annotation and list keys are not modelled";
const DS_CONTROLLER: &str = "the sandbox's daemonset controller rolls out at once; the test's real server runs no controller";
const NODE_REGISTRATION: &str =
    "a Node created through the API is not registered by a kubelet on either side";
const STRICT_PATCH: &str = "the message quotes the whole patched object, whose uid, resourceVersion \
    and managedFields are each server's own (the shape and the unknown field are compared by the \
    code, the reason and the field)";

/// One server's answer.
#[derive(Debug, Clone)]
struct Answer {
    code: u16,
    warnings: Vec<String>,
    body: Value,
}

/// Where one API server is and how to reach it.
struct Side {
    addr: String,
    prefix: String,
    token: String,
    tls: Arc<rustls::ClientConfig>,
}

fn tls_trusting(ca_der: Vec<u8>) -> Arc<rustls::ClientConfig> {
    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(rustls::pki_types::CertificateDer::from(ca_der))
        .expect("CA");
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    Arc::new(
        rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .expect("versions")
            .with_root_certificates(roots)
            .with_no_client_auth(),
    )
}

fn pem_to_der(pem: &str) -> Vec<u8> {
    use base64::Engine as _;
    let b64: String = pem
        .lines()
        .skip_while(|l| !l.starts_with("-----BEGIN CERTIFICATE"))
        .skip(1)
        .take_while(|l| !l.starts_with("-----END"))
        .collect();
    base64::engine::general_purpose::STANDARD
        .decode(b64)
        .expect("PEM")
}

impl Side {
    /// One HTTP/1.1 request; the user agent is the same on both sides, since it names the
    /// field manager of a write without `fieldManager`.
    fn send(&self, method: &str, path: &str, ctype: &str, body: &str) -> Answer {
        let tcp = TcpStream::connect(&self.addr).expect("connect");
        let name = rustls::pki_types::ServerName::try_from("127.0.0.1").expect("name");
        let conn = rustls::ClientConnection::new(self.tls.clone(), name).expect("tls");
        let mut s = rustls::StreamOwned::new(conn, tcp);
        let mut req = format!(
            "{method} {}{path} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\nUser-Agent: differential/1.0\r\nAccept: application/json\r\nAuthorization: Bearer {}\r\n",
            self.prefix, self.addr, self.token
        );
        if !ctype.is_empty() {
            req.push_str(&format!("Content-Type: {ctype}\r\n"));
        }
        req.push_str(&format!("Content-Length: {}\r\n\r\n", body.len()));
        s.write_all(req.as_bytes()).expect("write");
        s.write_all(body.as_bytes()).expect("write body");
        let mut out = Vec::new();
        let _ = s.read_to_end(&mut out);
        let text = String::from_utf8_lossy(&out).into_owned();
        let (head, rest) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
        let code: u16 = head
            .split_whitespace()
            .nth(1)
            .and_then(|c| c.parse().ok())
            .unwrap_or_else(|| panic!("no status line in {text:?}"));
        let mut warnings = Vec::new();
        let mut chunked = false;
        for line in head.lines().skip(1) {
            let Some((k, v)) = line.split_once(':') else {
                continue;
            };
            match k.trim().to_ascii_lowercase().as_str() {
                "warning" => warnings.push(v.trim().to_string()),
                "transfer-encoding" => chunked = v.trim().eq_ignore_ascii_case("chunked"),
                _ => {}
            }
        }
        let body = if chunked {
            dechunk(rest)
        } else {
            rest.to_string()
        };
        Answer {
            code,
            warnings,
            body: serde_json::from_str(&body).unwrap_or(Value::String(body)),
        }
    }
}

/// Both servers, and the differences seen so far.
struct Pair {
    sandbox: Side,
    real: Side,
    diffs: Vec<(String, String, String)>,
    requests: usize,
}

impl Pair {
    /// Sends one request to both servers and records how their answers differ.
    fn both(
        &mut self,
        label: &str,
        method: &str,
        path: &str,
        ctype: &str,
        body: &str,
    ) -> (Answer, Answer) {
        let s = self.sandbox.send(method, path, ctype, body);
        let r = self.real.send(method, path, ctype, body);
        self.requests += 1;
        let mut found = Vec::new();
        if s.code != r.code {
            found.push((
                "code".to_string(),
                format!("sandbox {} real {}", s.code, r.code),
            ));
        }
        let (mut sw, mut rw) = (s.warnings.clone(), r.warnings.clone());
        sw.sort();
        rw.sort();
        if sw != rw {
            found.push((
                "warnings".to_string(),
                format!("sandbox {sw:?} real {rw:?}"),
            ));
        }
        let (sb, rb) = (normalized(&s.body), normalized(&r.body));
        diff("", &sb, &rb, &mut found);
        if !found.is_empty() && std::env::var_os("DIFFERENTIAL_VERBOSE").is_some() {
            eprintln!(
                "== {label}: {method} {path}\n-- sandbox {} {:?}\n{}\n-- real {} {:?}\n{}",
                s.code, s.warnings, s.body, r.code, r.warnings, r.body
            );
        }
        for (p, d) in found {
            self.diffs.push((label.to_string(), p, d));
        }
        (s, r)
    }
}

/// The body without what two servers never agree on.
fn normalized(v: &Value) -> Value {
    fn walk(v: &mut Value, parent: &str) {
        match v {
            Value::Object(m) => {
                if parent == "metadata" || parent == "details" {
                    for k in ["uid", "resourceVersion", "creationTimestamp"] {
                        m.remove(k);
                    }
                }
                if parent == "managedFields" {
                    m.remove("time");
                }
                if let Some(Value::Array(entries)) = m.get_mut("managedFields") {
                    // The status that seed_real writes through the status subresource has a
                    // manager of its own there; the sandbox's seeded status has none (its status
                    // subresource is read-only).
                    entries.retain(|e| e["subresource"] != "status");
                    // Entries are ordered by operation, then time (seconds), then manager: two
                    // writes on either side of a second boundary would swap, so the comparison
                    // leaves the time out of the order.
                    entries.sort_by_key(|e| (e["operation"].to_string(), e["manager"].to_string()));
                }
                for (k, c) in m.iter_mut() {
                    walk(c, k);
                }
            }
            Value::Array(a) => {
                for c in a.iter_mut() {
                    walk(c, parent);
                }
            }
            Value::String(s) => *s = without_times(s),
            _ => {}
        }
    }
    let mut v = v.clone();
    walk(&mut v, "");
    v
}

/// RFC 3339 times (`2026-01-02T03:04:05Z`) replaced by `<time>`: a conflict with an update
/// manager names the time of its last write.
fn without_times(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = String::with_capacity(s.len());
    let mut i = 0;
    let is_time = |w: &[u8]| {
        w.len() == 20
            && w.iter().enumerate().all(|(j, c)| match j {
                4 | 7 => *c == b'-',
                10 => *c == b'T',
                13 | 16 => *c == b':',
                19 => *c == b'Z',
                _ => c.is_ascii_digit(),
            })
    };
    while i < b.len() {
        if i + 20 <= b.len() && is_time(&b[i..i + 20]) {
            out.push_str("<time>");
            i += 20;
        } else {
            let c = s[i..].chars().next().unwrap_or(' ');
            out.push(c);
            i += c.len_utf8();
        }
    }
    out
}

fn short(v: &Value) -> String {
    let s = v.to_string();
    if s.chars().count() > 300 {
        format!("{}...", s.chars().take(300).collect::<String>())
    } else {
        s
    }
}

/// Where two bodies differ, as JSON pointers.
fn diff(path: &str, a: &Value, b: &Value, out: &mut Vec<(String, String)>) {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            let keys: BTreeMap<&String, ()> = x.keys().chain(y.keys()).map(|k| (k, ())).collect();
            for k in keys.keys() {
                let p = format!("{path}/{}", k.replace('~', "~0").replace('/', "~1"));
                diff(
                    &p,
                    x.get(*k).unwrap_or(&Value::Null),
                    y.get(*k).unwrap_or(&Value::Null),
                    out,
                );
            }
        }
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => {
            for (i, (c, d)) in x.iter().zip(y).enumerate() {
                diff(&format!("{path}/{i}"), c, d, out);
            }
        }
        _ if a == b => {}
        _ => out.push((
            path.to_string(),
            format!("sandbox {} real {}", short(a), short(b)),
        )),
    }
}

fn is_under(path: &str, prefix: &str) -> bool {
    path == prefix
        || prefix.is_empty()
        || (path.starts_with(prefix) && path.as_bytes().get(prefix.len()) == Some(&b'/'))
}

const CM: &str = "/api/v1/namespaces/gpu-operator/configmaps";
const CP: &str = "/apis/nvidia.com/v1/clusterpolicies";
const DS: &str = "/apis/apps/v1/namespaces/gpu-operator/daemonsets";
const PODS: &str = "/api/v1/namespaces/default/pods";
const APPLY: &str = "application/apply-patch+yaml";
const MERGE: &str = "application/merge-patch+json";
const JSON: &str = "application/json";
const TF: &str = "terraform-provider-fracgpu";

fn apply_cm(data: Value) -> String {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "fracgpu-device-plugin", "namespace": "gpu-operator",
            "labels": {"app.kubernetes.io/managed-by": TF}},
        "data": data})
    .to_string()
}

fn apply_cp(spec: Value) -> String {
    let mut v = json!({"apiVersion": "nvidia.com/v1", "kind": "ClusterPolicy",
        "metadata": {"name": "cluster-policy"}});
    if !spec.is_null() {
        v["spec"] = spec;
    }
    v.to_string()
}

/// Brings the real server to what a fresh sandbox cluster holds: the gpu-operator namespace,
/// NVIDIA's ClusterPolicy CRD, and the sandbox's own seed objects (`cluster-policy`, the device
/// plugin daemonset) created under the managers the sandbox names for them.
fn seed_real(real: &ApiServer, pair: &Pair) {
    let fixtures = apiserver::fixtures().expect("fixtures (ApiServer::start found its tools)");
    let ns = pair.real.send(
        "POST",
        "/api/v1/namespaces",
        JSON,
        &json!({"metadata": {"name": "gpu-operator"}}).to_string(),
    );
    assert_eq!(ns.code, 201, "{}", ns.body);
    real.install_crds(&fixtures, &["nvidia.com_clusterpolicies.yaml"]);
    for (path, manager) in [
        (format!("{CP}/cluster-policy"), "helm"),
        (
            format!("{DS}/nvidia-device-plugin-daemonset"),
            "gpu-operator",
        ),
    ] {
        let seed = pair.sandbox.send("GET", &path, "", "");
        assert_eq!(seed.code, 200, "{}", seed.body);
        let mut obj = seed.body.clone();
        let status = obj.as_object_mut().and_then(|m| m.remove("status"));
        obj["metadata"] =
            json!({"name": obj["metadata"]["name"], "labels": obj["metadata"]["labels"]});
        let collection = path.rsplit_once('/').map(|(c, _)| c).unwrap_or_default();
        let made = pair.real.send(
            "POST",
            &format!("{collection}?fieldManager={manager}"),
            JSON,
            &obj.to_string(),
        );
        assert_eq!(
            made.code, 201,
            "the real server refuses the sandbox's seed {path}: {}",
            made.body
        );
        if let Some(status) = status {
            let st = pair.real.send(
                "PATCH",
                &format!("{path}/status?fieldManager={manager}"),
                MERGE,
                &json!({"status": status}).to_string(),
            );
            assert_eq!(st.code, 200, "{}", st.body);
        }
    }
}

#[test]
fn differential_sandbox_answers_as_kube_apiserver() {
    let Some(real) = ApiServer::start_real() else {
        return;
    };
    let srv = serve();
    srv.api.add_cluster_without_operator("aks", "bare");
    let mut pair = Pair {
        sandbox: Side {
            addr: srv.addr.clone(),
            prefix: srv.prefix("aks", "sandbox-aks"),
            token: srv.token("aks", "sandbox-aks"),
            tls: srv.tls.clone(),
        },
        real: Side {
            addr: real.url.trim_start_matches("https://").to_string(),
            prefix: String::new(),
            token: real.admin_token().to_string(),
            tls: tls_trusting(pem_to_der(&real.ca_pem())),
        },
        diffs: Vec::new(),
        requests: 0,
    };

    // Discovery before the CRD exists: the group is not served (a cluster without the operator).
    let bare = std::mem::replace(&mut pair.sandbox.prefix, srv.prefix("aks", "bare"));
    pair.sandbox.token = srv.token("aks", "bare");
    pair.both(
        "discovery, group not served",
        "GET",
        "/apis/nvidia.com/v1",
        "",
        "",
    );
    pair.both(
        "clusterpolicy get, group not served",
        "GET",
        &format!("{CP}/cluster-policy"),
        "",
        "",
    );
    pair.sandbox.prefix = bare;
    pair.sandbox.token = srv.token("aks", "sandbox-aks");

    seed_real(&real, &pair);

    // Discovery with the CRD.
    pair.both("discovery, group", "GET", "/apis/nvidia.com", "", "");
    pair.both(
        "discovery, group version",
        "GET",
        "/apis/nvidia.com/v1",
        "",
        "",
    );

    // The sandbox's seed as the real server stores it.
    pair.both(
        "seed cluster-policy",
        "GET",
        &format!("{CP}/cluster-policy"),
        "",
        "",
    );
    pair.both(
        "seed daemonset",
        "GET",
        &format!("{DS}/nvidia-device-plugin-daemonset"),
        "",
        "",
    );

    // ConfigMaps: the provider's apply (forced), reads, conflicts, updates and delete.
    pair.both(
        "configmap get missing",
        "GET",
        &format!("{CM}/fracgpu-device-plugin"),
        "",
        "",
    );
    pair.both(
        "configmap apply create",
        "PATCH",
        &format!("{CM}/fracgpu-device-plugin?fieldManager={TF}&force=true"),
        APPLY,
        &apply_cm(json!({"ts-10": "version: v1\n", "ts-4": "version: v1\n"})),
    );
    pair.both(
        "configmap get",
        "GET",
        &format!("{CM}/fracgpu-device-plugin"),
        "",
        "",
    );
    pair.both(
        "configmap apply drops a key",
        "PATCH",
        &format!("{CM}/fracgpu-device-plugin?fieldManager={TF}&force=true"),
        APPLY,
        &apply_cm(json!({"ts-10": "version: v1\nx: 1\n"})),
    );
    pair.both(
        "configmap apply conflict",
        "PATCH",
        &format!("{CM}/fracgpu-device-plugin?fieldManager=other"),
        APPLY,
        &apply_cm(json!({"ts-10": "other"})),
    );
    pair.both(
        "configmap apply forced",
        "PATCH",
        &format!("{CM}/fracgpu-device-plugin?fieldManager=other&force=true"),
        APPLY,
        &apply_cm(json!({"ts-10": "other"})),
    );
    pair.both(
        "configmap merge patch",
        "PATCH",
        &format!("{CM}/fracgpu-device-plugin?fieldManager=kubectl-edit"),
        MERGE,
        &json!({"data": {"ts-10": "edited", "extra": "1"}}).to_string(),
    );
    pair.both(
        "configmap apply conflict with an update manager",
        "PATCH",
        &format!("{CM}/fracgpu-device-plugin?fieldManager={TF}"),
        APPLY,
        &apply_cm(json!({"ts-10": "mine", "extra": "2"})),
    );
    pair.both(
        "configmap list by label",
        "GET",
        &format!("{CM}?labelSelector=app.kubernetes.io%2Fmanaged-by%3D{TF}"),
        "",
        "",
    );
    pair.both(
        "configmap apply invalid key",
        "PATCH",
        &format!("{CM}/bad?fieldManager={TF}&force=true"),
        APPLY,
        &json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "bad"}, "data": {"a/b": "x"}}).to_string(),
    );
    pair.both(
        "configmap apply into a missing namespace",
        "PATCH",
        &format!("/api/v1/namespaces/nope/configmaps/x?fieldManager={TF}&force=true"),
        APPLY,
        &json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}}).to_string(),
    );
    pair.both(
        "configmap apply without fieldManager",
        "PATCH",
        &format!("{CM}/fracgpu-device-plugin"),
        APPLY,
        &apply_cm(json!({})),
    );
    pair.both(
        "configmap strict apply of an unknown field",
        "PATCH",
        &format!("{CM}/strict?fieldManager=kubectl&fieldValidation=Strict"),
        APPLY,
        &json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "strict"}, "bogus": 1}).to_string(),
    );
    pair.both(
        "configmap delete",
        "DELETE",
        &format!("{CM}/fracgpu-device-plugin"),
        "",
        "",
    );
    pair.both(
        "configmap delete missing",
        "DELETE",
        &format!("{CM}/fracgpu-device-plugin"),
        "",
        "",
    );

    // Helm's release Secrets, read by label selector.
    let release = |name: &str, rel: &str, v: u32| {
        json!({"metadata": {"name": name, "labels": {"owner": "helm", "name": rel, "status": "deployed", "version": v.to_string()}},
            "type": "helm.sh/release.v1", "data": {"release": "SDRzSUFBQUFBQUFBLw=="}})
        .to_string()
    };
    for (n, rel, v) in [
        ("sh.helm.release.v1.gpu-operator.v1", "gpu-operator", 1),
        ("sh.helm.release.v1.gpu-operator.v2", "gpu-operator", 2),
        ("sh.helm.release.v1.other.v1", "other", 1),
    ] {
        pair.both(
            "secret create",
            "POST",
            "/api/v1/namespaces/gpu-operator/secrets?fieldManager=helm",
            JSON,
            &release(n, rel, v),
        );
    }
    pair.both(
        "secret list by labels",
        "GET",
        "/api/v1/namespaces/gpu-operator/secrets?labelSelector=owner%3Dhelm%2Cname%3Dgpu-operator",
        "",
        "",
    );

    // Nodes by label selector (created here: the real server has no kubelet).
    for (n, l) in [("gpu-1", Some("ts-10")), ("cpu-1", None)] {
        let mut labels = json!({"kubernetes.io/hostname": n});
        if let Some(l) = l {
            labels["nvidia.com/device-plugin.config"] = json!(l);
        }
        pair.both(
            "node create",
            "POST",
            "/api/v1/nodes",
            JSON,
            &json!({"metadata": {"name": n, "labels": labels}}).to_string(),
        );
    }
    pair.both(
        "node list by label",
        "GET",
        "/api/v1/nodes?labelSelector=nvidia.com%2Fdevice-plugin.config",
        "",
        "",
    );

    // The ClusterPolicy: the provider's forced apply of the pointer, conflicts, give-back,
    // pruning, validation, and the empty apply that gives the fields up.
    let pointer = json!({"devicePlugin": {"config": {"name": "fracgpu-device-plugin", "default": "ts-10"}}, "mig": {"strategy": "mixed"}});
    pair.both(
        "clusterpolicy apply pointer",
        "PATCH",
        &format!("{CP}/cluster-policy?fieldManager={TF}&force=true"),
        APPLY,
        &apply_cp(pointer.clone()),
    );
    pair.both(
        "clusterpolicy apply conflict",
        "PATCH",
        &format!("{CP}/cluster-policy?fieldManager=helm"),
        APPLY,
        &apply_cp(json!({"devicePlugin": {"config": {"name": "helm-config"}}})),
    );
    pair.both(
        "clusterpolicy give back",
        "PATCH",
        &format!("{CP}/cluster-policy?fieldManager=helm"),
        MERGE,
        &json!({"spec": {"mig": {"strategy": "single"}}}).to_string(),
    );
    pair.both(
        "clusterpolicy apply unknown fields",
        "PATCH",
        &format!("{CP}/cluster-policy?fieldManager={TF}&force=true"),
        APPLY,
        // One unknown field: with several, the real server lists them in Go's map order.
        &apply_cp(json!({"devicePlugin": {"config": {"name": "fracgpu-device-plugin", "default": "ts-10"}}, "bogus": 1})),
    );
    pair.both(
        "clusterpolicy strict apply unknown fields",
        "PATCH",
        &format!("{CP}/cluster-policy?fieldManager={TF}&force=true&fieldValidation=Strict"),
        APPLY,
        &apply_cp(
            json!({"devicePlugin": {"config": {"name": "fracgpu-device-plugin"}}, "bogus": 1}),
        ),
    );
    pair.both(
        "clusterpolicy merge patch unknown field",
        "PATCH",
        &format!("{CP}/cluster-policy?fieldManager=kubectl-edit"),
        MERGE,
        &json!({"spec": {"mig": {"bogus": true}}}).to_string(),
    );
    pair.both(
        "clusterpolicy strict merge patch unknown field",
        "PATCH",
        &format!("{CP}/cluster-policy?fieldManager=kubectl-edit&fieldValidation=Strict"),
        MERGE,
        &json!({"spec": {"mig": {"bogus": true}}}).to_string(),
    );
    pair.both(
        "clusterpolicy apply nested unknown field",
        "PATCH",
        &format!("{CP}/cluster-policy?fieldManager={TF}&force=true"),
        APPLY,
        &apply_cp(
            json!({"devicePlugin": {"config": {"name": "fracgpu-device-plugin", "bogus": "x"}}}),
        ),
    );
    pair.both(
        "clusterpolicy merge patch bad type",
        "PATCH",
        &format!("{CP}/cluster-policy?fieldManager=kubectl-edit"),
        MERGE,
        &json!({"spec": {"devicePlugin": {"config": {"default": 5}}}}).to_string(),
    );
    pair.both(
        "clusterpolicy strict create unknown field",
        "POST",
        &format!("{CP}?fieldManager=kubectl-create&fieldValidation=Strict"),
        JSON,
        &json!({"apiVersion": "nvidia.com/v1", "kind": "ClusterPolicy", "metadata": {"name": "strict"}, "spec": {"bogus": 1}}).to_string(),
    );
    pair.both(
        "clusterpolicy apply bad enum",
        "PATCH",
        &format!("{CP}/cluster-policy?fieldManager={TF}&force=true"),
        APPLY,
        &apply_cp(json!({"mig": {"strategy": "bogus"}})),
    );
    pair.both(
        "clusterpolicy apply bad type",
        "PATCH",
        &format!("{CP}/cluster-policy?fieldManager={TF}&force=true"),
        APPLY,
        &apply_cp(json!({"devicePlugin": {"config": {"name": 5}}})),
    );
    pair.both(
        "clusterpolicy put without resourceVersion",
        "PUT",
        &format!("{CP}/cluster-policy"),
        JSON,
        &apply_cp(json!({"mig": {"strategy": "none"}})),
    );
    pair.both(
        "clusterpolicy apply empty",
        "PATCH",
        &format!("{CP}/cluster-policy?fieldManager={TF}&force=true"),
        APPLY,
        &apply_cp(Value::Null),
    );
    // The strategy taken from helm by a forced apply, then given up by an empty apply (a
    // destroy that has no record of helm's value): the real server refuses the result.
    pair.both(
        "clusterpolicy apply takes the strategy",
        "PATCH",
        &format!("{CP}/cluster-policy?fieldManager={TF}&force=true"),
        APPLY,
        &apply_cp(json!({"mig": {"strategy": "none"}})),
    );
    pair.both(
        "clusterpolicy apply empty after taking the strategy",
        "PATCH",
        &format!("{CP}/cluster-policy?fieldManager={TF}&force=true"),
        APPLY,
        &apply_cp(Value::Null),
    );
    pair.both(
        "clusterpolicy get missing",
        "GET",
        &format!("{CP}/nope"),
        "",
        "",
    );
    pair.both(
        "clusterpolicy apply missing",
        "PATCH",
        &format!("{CP}/nope?fieldManager={TF}&force=true"),
        APPLY,
        &json!({"apiVersion": "nvidia.com/v1", "kind": "ClusterPolicy", "metadata": {"name": "nope"},
            "spec": {"devicePlugin": {"config": {"name": "x"}}}}).to_string(),
    );

    // The device plugin restart: a merge patch of the pod template's annotations.
    pair.both(
        "daemonset restart",
        "PATCH",
        &format!("{DS}/nvidia-device-plugin-daemonset?fieldManager={TF}"),
        MERGE,
        &json!({"spec": {"template": {"metadata": {"annotations": {"fracgpu.dev/restartedAt": "2026-01-02T03:04:05Z"}}}}}).to_string(),
    );
    pair.both(
        "daemonset restart missing",
        "PATCH",
        &format!("{DS}/nope?fieldManager={TF}"),
        MERGE,
        &json!({"spec": {"template": {"metadata": {"annotations": {"a": "b"}}}}}).to_string(),
    );

    // Evictions, as a drain asks for them. The pods are made on each side alone (a pod's
    // defaults are the real server's business); only the eviction answers are compared.
    let pod = json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "evictee", "namespace": "default"},
        "spec": {"containers": [{"name": "c", "image": "example.com/c:1"}]}})
    .to_string();
    for side in [&pair.sandbox, &pair.real] {
        let a = side.send("POST", PODS, "application/json", &pod);
        assert_eq!(a.code, 201, "pod created: {:?}", a.body);
    }
    pair.both(
        "pod eviction, name mismatch",
        "POST",
        &format!("{PODS}/evictee/eviction"),
        "application/json",
        &json!({"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "other"}})
            .to_string(),
    );
    pair.both(
        "pod eviction, missing pod",
        "POST",
        &format!("{PODS}/nope/eviction"),
        "application/json",
        &json!({"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "nope"}})
            .to_string(),
    );
    pair.both(
        "pod eviction, as the kube crate sends it (no kind)",
        "POST",
        &format!("{PODS}/evictee/eviction"),
        "application/json",
        &json!({"metadata": {"name": "evictee"}}).to_string(),
    );

    let known = |label: &str, path: &str| {
        KNOWN
            .iter()
            .any(|(l, p, _)| *l == label && is_under(path, p))
    };
    let new: Vec<String> = pair
        .diffs
        .iter()
        .filter(|(l, p, _)| !known(l, p))
        .map(|(l, p, d)| format!("{l}: {p}: {d}"))
        .collect();
    let stale: Vec<String> = KNOWN
        .iter()
        .filter(|(l, p, _)| {
            !pair
                .diffs
                .iter()
                .any(|(dl, dp, _)| dl == l && is_under(dp, p))
        })
        .map(|(l, p, _)| format!("{l}: {p}"))
        .collect();
    eprintln!("differential: {} requests compared", pair.requests);
    assert!(
        new.is_empty() && stale.is_empty(),
        "the sandbox answers differently from kube-apiserver:\n{}\nlisted differences that no longer show:\n{}",
        new.join("\n"),
        stale.join("\n")
    );
}
