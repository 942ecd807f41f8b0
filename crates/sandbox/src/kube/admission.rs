//! Validating admission webhooks: a write that a ValidatingWebhookConfiguration's rules match is
//! sent as an AdmissionReview (`admission.k8s.io/v1`) to the webhook's `clientConfig.url`, and
//! waits for its answer up to `timeoutSeconds` before it is stored; a webhook that denies it, or
//! fails to answer under `failurePolicy: Fail`, refuses it (k8s.io/apiserver
//! pkg/admission/plugin/webhook: rules/rules.go, predicates/namespace and object,
//! validating/dispatcher.go, errors/statuserror.go). The wait holds no lock: the rest of the API
//! keeps answering while a webhook takes its time.
//!
//! Not modelled: mutating webhooks (none of the project's clients depends on one), webhooks
//! reached through `clientConfig.service` (no Service routes anywhere here: such a call fails,
//! and its failurePolicy decides), `matchConditions` and `matchPolicy: Equivalent` conversions.

use serde_json::{Value, json};

use super::kinds::{self, Kind};
use super::meta::labels_of;
use super::select::Selector;
use super::status::ApiError;
use super::store::Cluster;
use super::util::{any_of, strings};

/// One webhook to call for a write.
#[derive(Debug, Clone)]
pub(crate) struct Hook {
    name: String,
    url: Option<String>,
    ca: Option<Vec<u8>>,
    timeout: u64,
    fail: bool,
    namespace_selector: Value,
    object_selector: Value,
}

/// Whether one of a webhook's rules matches (rules.go): operation, group, version, the resource
/// with its subresource (`*`, `res`, `res/sub`, `*/sub`, `res/*`, `*/*`), and scope.
fn rule_matches(rule: &Value, k: &Kind, op: &str, sub: &str) -> bool {
    let resource = if sub.is_empty() {
        k.plural.to_string()
    } else {
        format!("{}/{sub}", k.plural)
    };
    let resources = strings(&rule["resources"]);
    let resource_ok = resources.iter().any(|r| match r.split_once('/') {
        None => *r == "*" && sub.is_empty() || *r == resource,
        Some((rr, rs)) => (rr == "*" || rr == k.plural) && (rs == "*" || rs == sub),
    });
    let scope = rule["scope"].as_str().unwrap_or("*");
    let scope_ok = match scope {
        "Cluster" => !k.namespaced,
        "Namespaced" => k.namespaced,
        _ => true,
    };
    any_of(&strings(&rule["operations"]), op)
        && any_of(&strings(&rule["apiGroups"]), k.group)
        && any_of(&strings(&rule["apiVersions"]), k.version)
        && resource_ok
        && scope_ok
}

/// A LabelSelector (matchLabels, matchExpressions) as the selector text the store parses; None
/// when it cannot be read.
fn selector_text(sel: &Value) -> Option<String> {
    let mut parts: Vec<String> = sel["matchLabels"]
        .as_object()
        .into_iter()
        .flatten()
        .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or_default()))
        .collect();
    for e in sel["matchExpressions"].as_array().into_iter().flatten() {
        let key = e["key"].as_str()?;
        let values = strings(&e["values"]).join(",");
        parts.push(match e["operator"].as_str()? {
            "In" => format!("{key} in ({values})"),
            "NotIn" => format!("{key} notin ({values})"),
            "Exists" => key.to_string(),
            "DoesNotExist" => format!("!{key}"),
            _ => return None,
        });
    }
    Some(parts.join(","))
}

fn selects(sel: &Value, labels: &std::collections::BTreeMap<String, String>) -> bool {
    if sel.is_null() || sel.as_object().is_some_and(|m| m.is_empty()) {
        return true;
    }
    selector_text(sel)
        .and_then(|t| Selector::parse(&t).ok())
        .is_some_and(|s| s.matches(labels))
}

impl Cluster {
    /// The validating webhooks whose rules match a write of `kind` (`op` is CREATE, UPDATE or
    /// DELETE) before their selectors are asked.
    pub(crate) fn webhooks(&self, kind: Kind, op: &str, sub: &str) -> Vec<Hook> {
        let configs = self
            .objects
            .get(&kinds::VALIDATING_WEBHOOKS.qualified())
            .into_iter()
            .flat_map(|m| m.values());
        let mut out = Vec::new();
        for config in configs {
            for w in config["webhooks"].as_array().into_iter().flatten() {
                let rules = w["rules"].as_array().into_iter().flatten();
                if !rules.clone().any(|r| rule_matches(r, &kind, op, sub)) {
                    continue;
                }
                use base64::Engine as _;
                let cc = &w["clientConfig"];
                out.push(Hook {
                    name: w["name"].as_str().unwrap_or_default().to_string(),
                    url: cc["url"].as_str().map(str::to_string),
                    ca: cc["caBundle"]
                        .as_str()
                        .and_then(|b| base64::engine::general_purpose::STANDARD.decode(b).ok()),
                    timeout: w["timeoutSeconds"].as_u64().unwrap_or(10).clamp(1, 30),
                    fail: w["failurePolicy"].as_str() != Some("Ignore"),
                    namespace_selector: w["namespaceSelector"].clone(),
                    object_selector: w["objectSelector"].clone(),
                });
            }
        }
        out
    }

    /// Whether a webhook's namespace and object selectors choose this object (predicates:
    /// a namespaced object by its namespace's labels, a Namespace by its own).
    pub(crate) fn selected(&self, hook: &Hook, kind: Kind, ns: &str, obj: &Value) -> bool {
        let ns_labels = if kind == kinds::NAMESPACES {
            labels_of(obj)
        } else if kind.namespaced {
            self.get_ref(kinds::NAMESPACES, "", ns)
                .map(labels_of)
                .unwrap_or_default()
        } else {
            return selects(&hook.object_selector, &labels_of(obj));
        };
        selects(&hook.namespace_selector, &ns_labels)
            && selects(&hook.object_selector, &labels_of(obj))
    }
}

/// What the webhooks are asked about one write.
pub(crate) struct Review<'a> {
    pub(crate) kind: Kind,
    pub(crate) sub: &'a str,
    pub(crate) op: &'a str,
    pub(crate) namespace: &'a str,
    pub(crate) name: &'a str,
    pub(crate) object: Option<Value>,
    pub(crate) old: Option<Value>,
    pub(crate) user: Value,
    pub(crate) dry_run: bool,
}

impl Review<'_> {
    fn body(&self) -> Value {
        let k = self.kind;
        let mut req = json!({"uid": super::util::uuid4(),
            "kind": {"group": k.group, "version": k.version, "kind": k.kind},
            "resource": {"group": k.group, "version": k.version, "resource": k.plural},
            "requestKind": {"group": k.group, "version": k.version, "kind": k.kind},
            "requestResource": {"group": k.group, "version": k.version, "resource": k.plural},
            "name": self.name, "operation": self.op, "userInfo": self.user,
            "object": self.object, "oldObject": self.old, "dryRun": self.dry_run});
        if !self.sub.is_empty() {
            req["subResource"] = json!(self.sub);
            req["requestSubResource"] = json!(self.sub);
        }
        if !self.namespace.is_empty() {
            req["namespace"] = json!(self.namespace);
        }
        json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": req})
    }
}

/// The API server's refusal when it could not call a webhook that must answer.
fn call_failed(hook: &Hook, why: &str) -> ApiError {
    ApiError::new(
        500,
        "InternalError",
        format!(
            "Internal error occurred: failed calling webhook {:?}: {why}",
            hook.name
        ),
    )
    .with_details(
        json!({"causes": [{"message": format!("failed calling webhook {:?}: {why}", hook.name)}]}),
    )
}

/// One webhook's verdict on `body`: Ok to go on (allowed, or a failure its policy ignores).
async fn call(hook: &Hook, body: &Value) -> Result<(), ApiError> {
    let Some(url) = &hook.url else {
        let why = "failed to call webhook: no route to a Service from the sandbox";
        return if hook.fail {
            Err(call_failed(hook, why))
        } else {
            Ok(())
        };
    };
    let mut client =
        reqwest::Client::builder().timeout(std::time::Duration::from_secs(hook.timeout));
    if let Some(ca) = hook
        .ca
        .as_ref()
        .and_then(|pem| reqwest::Certificate::from_pem(pem).ok())
    {
        client = client.add_root_certificate(ca);
    }
    let sep = if url.contains('?') { '&' } else { '?' };
    let target = format!("{url}{sep}timeout={}s", hook.timeout);
    let answer = async {
        let client = client.build().map_err(|e| e.to_string())?;
        let resp = client.post(&target).json(body).send().await.map_err(|e| {
            if e.is_timeout() {
                format!("failed to call webhook: Post {target:?}: context deadline exceeded")
            } else {
                format!("failed to call webhook: Post {target:?}: {e}")
            }
        })?;
        resp.json::<Value>()
            .await
            .map_err(|e| format!("received invalid webhook response: {e}"))
    };
    let review = match answer.await {
        Ok(v) => v,
        Err(why) if hook.fail => return Err(call_failed(hook, &why)),
        Err(_) => return Ok(()),
    };
    let r = &review["response"];
    if r["allowed"] == json!(true) {
        return Ok(());
    }
    let status = &r["status"];
    let code = status["code"].as_u64().filter(|c| *c >= 400).unwrap_or(400) as u16;
    let message = status["message"].as_str().unwrap_or_default();
    let reason = status["reason"].as_str().filter(|r| !r.is_empty());
    let text = match message {
        "" => format!(
            "admission webhook {:?} denied the request without explanation",
            hook.name
        ),
        m => format!("admission webhook {:?} denied the request: {m}", hook.name),
    };
    let reason: &'static str = match reason {
        Some("Forbidden") => "Forbidden",
        Some("Invalid") => "Invalid",
        Some("Conflict") => "Conflict",
        _ => "BadRequest",
    };
    Err(ApiError::new(code, reason, text))
}

/// Asks each hook in turn (the real dispatcher asks them side by side; the first refusal wins
/// either way).
pub(crate) async fn admit(hooks: &[Hook], review: &Review<'_>) -> Result<(), ApiError> {
    let body = review.body();
    for h in hooks {
        call(h, &body).await?;
    }
    Ok(())
}
