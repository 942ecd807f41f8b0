//! The API server's write path: create, replace, the three patch types and delete (server-side
//! apply, with its conflicts, is in `apply.rs`), all ending in one `write` that admits the object
//! to its schema, validates it, sets the system fields (`system_fields.rs`) and managedFields
//! (`managed.rs`), stores it, and lets the twin react.

use serde_json::{Value, json};

use super::managed::{self, without_volatile};
use super::system_fields;
use super::{Cluster, Validation, WriteCtx};
use crate::kube::kinds::{self, Kind};
use crate::kube::meta::{meta_mut, meta_str};
use crate::kube::patch::{self, PatchType};
use crate::kube::schema;
use crate::kube::status::{ApiError, FieldError};
use crate::kube::validate::{fold_string_data, validate_object};

impl Cluster {
    /// Fills identity fields from the URL and rejects bodies that contradict it.
    pub(super) fn normalize(
        kind: Kind,
        ns: &str,
        name: Option<&str>,
        mut body: Value,
    ) -> Result<Value, ApiError> {
        if !body.is_object() {
            return Err(ApiError::bad_request(format!(
                "{} in version \"{}\" cannot be handled as a {}: the body is not a JSON object",
                kind.kind, kind.version, kind.kind
            )));
        }
        match body.get("kind") {
            None | Some(Value::Null) => {}
            Some(Value::String(k)) if k == kind.kind => {}
            Some(other) => {
                return Err(ApiError::bad_request(format!(
                    "the body of the request is a {other}, but a {} was expected",
                    kind.kind
                )));
            }
        }
        match body.get("apiVersion") {
            None | Some(Value::Null) => {}
            Some(Value::String(v)) if *v == kind.api_version() => {}
            Some(other) => {
                return Err(ApiError::bad_request(format!(
                    "the API version in the data ({other}) does not match the expected API version \
                        ({})",
                    kind.api_version()
                )));
            }
        }
        // The typed decoder of the real server rejects these shapes before anything else looks at them.
        for f in [
            "metadata",
            "spec",
            "status",
            "data",
            "binaryData",
            "stringData",
        ] {
            if body.get(f).is_some_and(|m| !m.is_object() && !m.is_null()) {
                return Err(ApiError::bad_request(format!(
                    "{} in version \"{}\" cannot be handled as a {}: {f} must be an object",
                    kind.kind, kind.version, kind.kind
                )));
            }
        }
        body["kind"] = json!(kind.kind);
        body["apiVersion"] = json!(kind.api_version());
        let m = meta_mut(&mut body);
        if kind.namespaced {
            match m.get("namespace").and_then(Value::as_str) {
                Some(n) if !n.is_empty() && n != ns => {
                    return Err(ApiError::bad_request(
                        "the namespace of the provided object does not match the namespace sent on \
                            the request",
                    ));
                }
                _ => {
                    m.insert("namespace".into(), json!(ns));
                }
            }
        } else {
            m.remove("namespace");
        }
        if let Some(name) = name {
            match m.get("name").and_then(Value::as_str) {
                Some(n) if !n.is_empty() && n != name => {
                    return Err(ApiError::bad_request(format!(
                        "the name of the object ({n}) does not match the name on the URL ({name})"
                    )));
                }
                _ => {
                    m.insert("name".into(), json!(name));
                }
            }
        }
        Ok(body)
    }

    pub(crate) fn create(
        &mut self,
        kind: Kind,
        ns: &str,
        body: Value,
        ctx: &WriteCtx,
    ) -> Result<Value, ApiError> {
        let mut body = Self::normalize(kind, ns, None, body)?;
        let m = meta_mut(&mut body);
        if m.get("name")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .is_empty()
            && let Some(g) = m
                .get("generateName")
                .and_then(Value::as_str)
                .filter(|g| !g.is_empty())
        {
            let suffix: String = (0..5)
                .map(|_| fastrand::alphanumeric().to_ascii_lowercase())
                .collect();
            let n = format!("{g}{suffix}");
            m.insert("name".into(), json!(n));
        }
        let name = meta_str(&body, "name").unwrap_or_default().to_string();
        self.check_namespace(kind, ns)?;
        if self.get_ref(kind, ns, &name).is_some() {
            validate_object(kind, &body, None)?;
            return Err(ApiError::already_exists(&kind.qualified(), &name));
        }
        self.write(kind, ns, &name, None, body, ctx)
    }

    pub(crate) fn replace(
        &mut self,
        kind: Kind,
        ns: &str,
        name: &str,
        body: Value,
        ctx: &WriteCtx,
    ) -> Result<Value, ApiError> {
        let body = Self::normalize(kind, ns, Some(name), body)?;
        let old = self.get(kind, ns, name)?;
        match meta_str(&body, "resourceVersion").filter(|rv| !rv.is_empty()) {
            Some(rv) if Some(rv) != meta_str(&old, "resourceVersion") => {
                return Err(ApiError::modified(&kind.qualified(), name));
            }
            None if !kind.unconditional_update => {
                // The registry's update strategy checks this before decoding the rest; it names
                // the resource, and Go prints the value as the integer it parsed.
                return Err(ApiError::invalid(
                    &kind.qualified(),
                    name,
                    &[FieldError::invalid_rendered(
                        "metadata.resourceVersion",
                        "0".into(),
                        "must be specified for an update",
                    )],
                ));
            }
            _ => {}
        }
        self.write(kind, ns, name, Some(old), body, ctx)
    }

    /// Merge, JSON and strategic-merge patches (the last treated as a merge: none of these kinds has a list
    /// that strategic merge would merge by key in a way that matters here).
    pub(crate) fn patch(
        &mut self,
        kind: Kind,
        ns: &str,
        name: &str,
        ptype: PatchType,
        body: &Value,
        ctx: &WriteCtx,
    ) -> Result<Value, ApiError> {
        let old = self.get(kind, ns, name)?;
        let mut new = old.clone();
        match ptype {
            PatchType::Merge | PatchType::Strategic => {
                if !body.is_object() {
                    return Err(ApiError::bad_request("a merge patch must be a JSON object"));
                }
                if ptype == PatchType::Strategic && !kind.custom {
                    crate::kube::strategic::apply(&mut new, body);
                } else if ptype == PatchType::Strategic {
                    patch::merge_patch(&mut new, &patch::strategic_to_merge(body));
                } else {
                    patch::merge_patch(&mut new, body);
                }
            }
            PatchType::Json => patch::json_patch(&mut new, body).map_err(|e| match e {
                patch::JsonPatchError::Malformed(m) => ApiError::bad_request(m),
                patch::JsonPatchError::Failed(m) => ApiError::new(422, "Invalid", m),
            })?,
        }
        // A resourceVersion in the patch is a precondition.
        if let (Some(want), Some(have)) = (
            meta_str(&new, "resourceVersion"),
            meta_str(&old, "resourceVersion"),
        ) && want != have
            && !want.is_empty()
        {
            return Err(ApiError::modified(&kind.qualified(), name));
        }
        let new = Self::normalize(kind, ns, Some(name), new)?;
        self.write(kind, ns, name, Some(old), new, ctx)
    }

    /// Deletes every object of a collection that the selectors choose (`DELETE` on the
    /// collection): the answer is the list of what was deleted.
    pub(crate) fn delete_collection(
        &mut self,
        kind: Kind,
        ns: Option<&str>,
        labels: &crate::kube::select::Selector,
        fields: &[crate::kube::select::FieldReq],
    ) -> Result<Value, ApiError> {
        let chosen = self.list(kind, ns, labels, fields);
        let mut items = Vec::new();
        for o in chosen["items"].as_array().into_iter().flatten() {
            let (n, s) = (
                meta_str(o, "name").unwrap_or_default(),
                meta_str(o, "namespace").unwrap_or_default(),
            );
            self.delete(kind, s, n, None)?;
            items.push(o.clone());
        }
        Ok(
            json!({"kind": format!("{}List", kind.kind), "apiVersion": kind.api_version(),
            "metadata": {"resourceVersion": self.rv.to_string()}, "items": items}),
        )
    }

    pub(crate) fn delete(
        &mut self,
        kind: Kind,
        ns: &str,
        name: &str,
        precondition_rv: Option<&str>,
    ) -> Result<Value, ApiError> {
        if kind == kinds::NAMESPACES && ["default", "kube-system", "kube-public"].contains(&name) {
            // The namespace lifecycle admission plugin protects these.
            return Err(ApiError::new(
                403,
                "Forbidden",
                format!("namespaces \"{name}\" is forbidden: this namespace may not be deleted"),
            )
            .with_details(json!({"name": name, "kind": "namespaces"})));
        }
        let old = self.get(kind, ns, name)?;
        if let Some(rv) = precondition_rv
            && Some(rv) != meta_str(&old, "resourceVersion")
        {
            return Err(ApiError::conflict(
                &kind.qualified(),
                name,
                &format!(
                    "Precondition failed: ResourceVersion in precondition: {rv}, ResourceVersion \
                        in object meta: {}",
                    meta_str(&old, "resourceVersion").unwrap_or_default()
                ),
            ));
        }
        self.unstore(&kind.qualified(), ns, name);
        if kind == kinds::NAMESPACES {
            let inside: Vec<String> = self
                .served()
                .filter(|k| k.namespaced)
                .map(|k| k.qualified())
                .collect();
            for q in inside {
                self.unstore_where(&q, |o| meta_str(o, "namespace") == Some(name));
            }
        }
        if kind == kinds::CRDS {
            // The CRD's name is its resource's qualified name (<plural>.<group>, which its
            // validation requires): every object of it goes with it.
            self.unstore_where(name, |_| true);
            self.objects.remove(name);
            self.refresh_kinds();
        }
        if kind == kinds::NODES {
            self.twins.remove(name);
        }
        self.reconcile(None);
        let uid = meta_str(&old, "uid").unwrap_or_default();
        let mut details = json!({"name": name, "kind": kind.plural, "uid": uid});
        if !kind.group.is_empty() {
            // StatusDetails.group is omitempty: the core group is left out.
            details["group"] = json!(kind.group);
        }
        Ok(
            json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
            "details": details}),
        )
    }

    /// The one write path: validation, bookkeeping, storage, and the twin's reaction.
    pub(super) fn write(
        &mut self,
        kind: Kind,
        ns: &str,
        name: &str,
        old: Option<Value>,
        mut new: Value,
        ctx: &WriteCtx,
    ) -> Result<Value, ApiError> {
        self.admit_to_schema(kind, name, &mut new, ctx)?;
        if kind == kinds::SECRETS {
            fold_string_data(&mut new)?;
        }
        crate::kube::defaults::apply(kind, &mut new);
        validate_object(kind, &new, old.as_ref())?;
        let now = crate::dates::now_rfc3339_secs();
        system_fields::stamp(kind, old.as_ref(), &mut new, ctx.subresource, &now);
        system_fields::settle(kind, name, &mut new, &now);
        managed::record(kind, old.as_ref(), &mut new, ctx, &now);
        if old
            .as_ref()
            .is_some_and(|o| without_volatile(o) == without_volatile(&new))
        {
            // A no-op write does not bump resourceVersion, as on the real server.
            return Ok(old.unwrap_or(new));
        }
        self.persist(kind, ns, name, old.is_none(), new)
    }

    /// A kind with a schema (a custom resource's, a built-in's OpenAPI one): fields it does not
    /// declare are pruned, with the field validation asked for; a custom resource is then
    /// defaulted and validated against its structural schema.
    fn admit_to_schema(
        &mut self,
        kind: Kind,
        name: &str,
        new: &mut Value,
        ctx: &WriteCtx,
    ) -> Result<(), ApiError> {
        let Some(schema) = self.schema_of(kind) else {
            return Ok(());
        };
        let sent = new.clone();
        let pruned = schema::prune(new, &schema);
        if !pruned.is_empty() {
            let unknown: Vec<String> = pruned
                .iter()
                .map(|p| format!("unknown field {p:?}"))
                .collect();
            match ctx.validation {
                Validation::Ignore => {}
                Validation::Warn => self.warnings.extend(unknown),
                // The strict decoder's refusal (KEP-2885): a patch names the patched object
                // as the invalid value of a field "patch"; a body is a bad request.
                Validation::Strict if ctx.patch => {
                    return Err(ApiError::invalid(
                        "",
                        "",
                        &[FieldError::invalid(
                            "patch",
                            &sent.to_string(),
                            format!("strict decoding error: {}", unknown.join(", ")),
                        )],
                    ));
                }
                Validation::Strict => {
                    return Err(ApiError::bad_request(format!(
                        "{} in version \"{}\" cannot be handled as a {}: strict decoding \
                            error: {}",
                        kind.kind,
                        kind.version,
                        kind.kind,
                        unknown.join(", ")
                    )));
                }
            }
        }
        if kind.custom {
            // The object an apply makes is defaulted as structured-merge-diff left it, then
            // validated (structuredmerge.go defaults the merged object; the pruning of
            // non-nullable nulls belongs to decoding a request body, as for a create or an
            // update): an applied `null` where the schema has a default gets the default
            // (kube-apiserver v1.34 accepts the gpu-operator chart's
            // `migManager.config.name: null`), while a null without a default, applied or
            // left by the merge where another manager holds the map, is refused (as v1.34
            // refuses `devicePlugin.config.default: null`, created or updated).
            schema::default(new, &schema, ctx.apply.is_none());
            let errs = schema::validate(new, &schema);
            if !errs.is_empty() {
                return Err(ApiError::invalid(
                    &format!("{}.{}", kind.kind, kind.group),
                    name,
                    &errs,
                ));
            }
        }
        Ok(())
    }

    /// Stores a write that changed something, and lets the controllers react to it.
    fn persist(
        &mut self,
        kind: Kind,
        ns: &str,
        name: &str,
        created: bool,
        new: Value,
    ) -> Result<Value, ApiError> {
        let new = self.store(&kind.qualified(), ns, name, new);
        if kind == kinds::CRDS {
            self.refresh_kinds();
        }
        if kind == kinds::JOBS && created {
            // The job controller acts after the create is answered: the answer has no status.
            self.complete_job(ns, name);
            return Ok(new);
        }
        self.reconcile((kind == kinds::NODES).then_some(name));
        // The twin may have rewritten the object (a node's labels): answer with what is stored.
        Ok(self.get_ref(kind, ns, name).cloned().unwrap_or(new))
    }
}
