//! The API server's write path: create, replace, the three patch types, server-side apply with its
//! conflicts, and delete, all ending in one `write` that validates, keeps resourceVersion,
//! generation and managedFields, stores, and lets the twin react.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Map, Value, json};

use super::managed::{
    Managed, apply_conflict, managed_entries, set_managed, strip_meta_status, without_volatile,
};
use super::{Cluster, WriteCtx};
use crate::kube::kinds::{self, Kind};
use crate::kube::meta::{meta_mut, meta_str};
use crate::kube::patch::{self, FieldPath, PatchType};
use crate::kube::schema;
use crate::kube::status::{ApiError, FieldError};
use crate::kube::util;
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
                if ptype == PatchType::Strategic {
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

    /// Server-side apply: creates when absent; conflicts when another manager owns a field whose value the
    /// applied configuration changes, unless forced.
    pub(crate) fn apply(
        &mut self,
        kind: Kind,
        ns: &str,
        name: &str,
        applied: Value,
        manager: &str,
        force: bool,
    ) -> Result<Value, ApiError> {
        if !applied.is_object() {
            return Err(ApiError::bad_request("an apply patch must be an object"));
        }
        for f in ["apiVersion", "kind"] {
            if applied
                .get(f)
                .and_then(Value::as_str)
                .is_none_or(str::is_empty)
            {
                return Err(ApiError::bad_request(format!(
                    "invalid object type: {f} must be set in an apply configuration"
                )));
            }
        }
        // The field manager makes a typed value of the configuration before anything else, and
        // refuses an undeclared field or a wrong type whatever the field validation
        // (pkg/util/managedfields/internal/structuredmerge.go, typed/validate.go).
        if let Some(schema) = self.schema_of(kind)
            && let Some(why) = schema::typed_error(&applied, &schema)
        {
            return Err(ApiError::typed_patch(
                meta_str(&applied, "namespace").unwrap_or_default(),
                name,
                &kind.api_version(),
                kind.kind,
                &why,
            ));
        }
        let applied = Self::normalize(kind, ns, Some(name), applied)?;
        let paths = patch::leaf_paths(&applied);
        let ctx = WriteCtx {
            manager,
            apply: Some(paths.clone()),
            validation: super::Validation::Warn,
            patch: true,
            subresource: None,
        };
        let Some(old) = self.get_ref(kind, ns, name).cloned() else {
            self.check_namespace(kind, ns)?;
            let mut fresh = applied.clone();
            meta_mut(&mut fresh).remove("managedFields");
            return self.write(kind, ns, name, None, fresh, &ctx);
        };
        let mut owners = managed_entries(&old);
        // Keyed by the whole entry, as the API server keys managers (manager, operation,
        // apiVersion, time): "helm" that applied and "helm" that updated are two managers.
        let mut conflicts: BTreeMap<String, Vec<FieldPath>> = BTreeMap::new();
        for p in &paths {
            let live = patch::get_path(&old, p);
            if live.is_none() || live == patch::get_path(&applied, p) {
                continue;
            }
            for e in owners
                .iter()
                .filter(|e| !(e.manager == manager && e.operation == "Apply"))
            {
                if e.fields.contains(p) {
                    conflicts
                        .entry(e.describe(&kind.api_version()))
                        .or_default()
                        .push(p.clone());
                }
            }
        }
        if !conflicts.is_empty() && !force {
            return Err(apply_conflict(&conflicts));
        }
        if force {
            for e in owners
                .iter_mut()
                .filter(|e| !(e.manager == manager && e.operation == "Apply"))
            {
                e.fields.retain(|p| {
                    !(paths.contains(p) && patch::get_path(&old, p) != patch::get_path(&applied, p))
                });
            }
        }
        let mut new = old.clone();
        let previous: BTreeSet<FieldPath> = owners
            .iter()
            .find(|e| e.manager == manager && e.operation == "Apply")
            .map(|e| e.fields.clone())
            .unwrap_or_default();
        for p in previous.difference(&paths) {
            let shared = owners
                .iter()
                .any(|e| !(e.manager == manager && e.operation == "Apply") && e.fields.contains(p));
            if !shared {
                patch::remove_path(&mut new, p);
                // A map of a custom resource that another manager holds (as a node, without the
                // members this removal takes) and that the removal empties stays, as null:
                // structured-merge-diff
                // removes the members, not the field another manager owns, and the result is
                // validated as it is, so a non-nullable object there is refused (kube-apiserver
                // v1.34: "spec.mig in body must be of type object: \"null\"").
                if kind.custom && p.len() > 2 {
                    let parent = p[..p.len() - 1].to_vec();
                    let mut node = parent.clone();
                    node.push(patch::SELF.into());
                    let held = owners.iter().any(|e| {
                        !(e.manager == manager && e.operation == "Apply")
                            && (e.fields.contains(&parent) || e.fields.contains(&node))
                    });
                    if held && patch::get_path(&new, &parent).is_none() {
                        patch::set_path(&mut new, &parent, Value::Null);
                    }
                }
            }
        }
        for p in &paths {
            let v = patch::get_path(&applied, p).cloned().unwrap_or(Value::Null);
            if v.as_object().is_some_and(Map::is_empty)
                && patch::get_path(&new, p).is_some_and(Value::is_object)
            {
                continue;
            }
            patch::set_path(&mut new, p, v);
        }
        set_managed(&mut new, &owners, &kind.api_version());
        self.write(kind, ns, name, Some(old), new, &ctx)
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
        if let Some(schema) = self.schema_of(kind) {
            let sent = new.clone();
            let pruned = schema::prune(&mut new, &schema);
            if !pruned.is_empty() {
                let unknown: Vec<String> = pruned
                    .iter()
                    .map(|p| format!("unknown field {p:?}"))
                    .collect();
                match ctx.validation {
                    super::Validation::Ignore => {}
                    super::Validation::Warn => self.warnings.extend(unknown),
                    // The strict decoder's refusal (KEP-2885): a patch names the patched object
                    // as the invalid value of a field "patch"; a body is a bad request.
                    super::Validation::Strict if ctx.patch => {
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
                    super::Validation::Strict => {
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
                schema::default(&mut new, &schema, ctx.apply.is_none());
                let errs = schema::validate(&new, &schema);
                if !errs.is_empty() {
                    return Err(ApiError::invalid(
                        &format!("{}.{}", kind.kind, kind.group),
                        name,
                        &errs,
                    ));
                }
            }
        }
        if kind == kinds::SECRETS {
            fold_string_data(&mut new)?;
        }
        crate::kube::defaults::apply(kind, &mut new);
        validate_object(kind, &new, old.as_ref())?;
        let now = crate::dates::now_rfc3339_secs();
        {
            let m = meta_mut(&mut new);
            for f in ["selfLink", "deletionTimestamp"] {
                m.remove(f);
            }
        }
        match &old {
            Some(o) => {
                let keep = |f: &str| o.get("metadata").and_then(|m| m.get(f)).cloned();
                let (uid, created, generation) =
                    (keep("uid"), keep("creationTimestamp"), keep("generation"));
                if ctx.subresource == Some("status") {
                    // A write to the status subresource changes the status and nothing else
                    // (the registries' PrepareForUpdate of their status strategies keep the
                    // old spec and metadata).
                    let status = new.get("status").cloned();
                    let rv = meta_str(&new, "resourceVersion").map(str::to_string);
                    new = o.clone();
                    match status {
                        Some(st) => new["status"] = st,
                        None => {
                            new.as_object_mut().map(|m| m.remove("status"));
                        }
                    }
                    if let Some(rv) = rv {
                        meta_mut(&mut new).insert("resourceVersion".into(), json!(rv));
                    }
                } else if kind.status_subresource() {
                    match o.get("status") {
                        Some(s) => new["status"] = s.clone(),
                        None => {
                            new.as_object_mut().map(|m| m.remove("status"));
                        }
                    }
                }
                let spec_changed = strip_meta_status(o) != strip_meta_status(&new);
                let m = meta_mut(&mut new);
                m.insert("uid".into(), uid.unwrap_or_else(|| json!(util::uuid4())));
                m.insert(
                    "creationTimestamp".into(),
                    created.unwrap_or_else(|| json!(now.clone())),
                );
                if kind.generation {
                    let g = generation.and_then(|g| g.as_i64()).unwrap_or(1);
                    m.insert(
                        "generation".into(),
                        json!(if spec_changed { g + 1 } else { g }),
                    );
                }
            }
            None => {
                let m = meta_mut(&mut new);
                m.insert("uid".into(), json!(util::uuid4()));
                m.insert("creationTimestamp".into(), json!(now.clone()));
                if kind.generation {
                    m.insert("generation".into(), json!(1));
                }
                if kind == kinds::NAMESPACES {
                    new["spec"] = json!({"finalizers": ["kubernetes"]});
                    new["status"] = json!({"phase": "Active"});
                }
            }
        }
        if kind == kinds::CRDS && new.pointer("/status/conditions").is_none() {
            // The naming and establishing controllers of apiextensions-apiserver accept the names
            // and mark a new CRD Established within moments (pkg/controller/status/naming_controller.go,
            // pkg/controller/establish/establishing_controller.go): `kubectl wait --for
            // condition=established` waits for this.
            let versions: Vec<Value> = new
                .pointer("/spec/versions")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter(|v| v["storage"] == json!(true))
                .map(|v| v["name"].clone())
                .collect();
            let cond = |t: &str, reason: &str, message: &str| json!({"type": t, "status": "True", "lastTransitionTime": now, "reason": reason, "message": message});
            new["status"] = json!({
                "acceptedNames": new.pointer("/spec/names").cloned().unwrap_or(json!({})),
                "storedVersions": versions,
                "conditions": [
                    cond("NamesAccepted", "NoConflicts", "no conflicts found"),
                    cond("Established", "InitialNamesAccepted", "the initial names have been accepted"),
                ],
            });
        }
        if kind == kinds::NAMESPACES {
            let labels = meta_mut(&mut new)
                .entry("labels")
                .or_insert_with(|| json!({}));
            if let Some(l) = labels.as_object_mut() {
                l.insert("kubernetes.io/metadata.name".into(), json!(name));
            }
        }
        // managedFields: an apply owns exactly its configuration; an update owns what it changed.
        let mut owners = match &old {
            Some(_) if ctx.apply.is_some() => managed_entries(&new),
            Some(o) => managed_entries(o),
            None => Vec::new(),
        };
        let data_maps = kind == kinds::CONFIGMAPS || kind == kinds::SECRETS;
        let maps_now = patch::map_paths(&new, kind.custom, data_maps);
        let mut present = patch::leaf_paths(&new);
        present.extend(maps_now.iter().cloned());

        match &ctx.apply {
            Some(paths) => {
                owners.retain(|e| !(e.manager == ctx.manager && e.operation == "Apply"));
                owners.push(Managed {
                    manager: ctx.manager.to_string(),
                    operation: "Apply".into(),
                    fields: paths.clone(),
                    time: now.clone(),
                    subresource: None,
                });
            }
            None => {
                // An update manager is its name, operation and subresource.
                let is_me = |e: &Managed| {
                    e.manager == ctx.manager
                        && e.operation == "Update"
                        && e.subresource.as_deref() == ctx.subresource
                };
                // An update owns what it changed, and the maps it created (structured-merge-diff
                // counts an added map among the added paths, as "." in FieldsV1).
                let changed = match &old {
                    Some(o) => {
                        let before = patch::map_paths(o, kind.custom, data_maps);
                        let mut c = patch::changed_paths(o, &new);
                        c.extend(maps_now.difference(&before).cloned());
                        c
                    }
                    None => present.clone(),
                };
                for e in owners.iter_mut().filter(|e| !is_me(e)) {
                    e.fields.retain(|p| !changed.contains(p));
                }
                match owners.iter_mut().find(|e| is_me(e)) {
                    Some(e) => {
                        e.fields.extend(changed.iter().cloned());
                        if !changed.is_empty() {
                            e.time = now.clone();
                        }
                    }
                    None if !changed.is_empty() => owners.push(Managed {
                        manager: ctx.manager.to_string(),
                        operation: "Update".into(),
                        fields: changed.clone(),
                        time: now.clone(),
                        subresource: ctx.subresource.map(str::to_string),
                    }),
                    None => {}
                }
            }
        }
        // A map's own node is there too while any of its members is: FieldsV1 writes a map
        // node whose members a manager lost as `f:mig: {}` (see `patch::to_fields_v1`).
        let nodes: BTreeSet<FieldPath> = present
            .iter()
            .flat_map(|p| (1..p.len()).map(|n| p[..n].to_vec()))
            .filter(|k| k.last().is_some_and(|s| s != patch::SELF))
            .collect();
        for e in owners.iter_mut() {
            // An apply owns its configuration as given; a map node alone is an update
            // manager's remainder.
            let update = e.operation == "Update";
            e.fields
                .retain(|p| present.contains(p) || (update && nodes.contains(p)));
        }

        owners.retain(|e| !e.fields.is_empty());
        set_managed(&mut new, &owners, &kind.api_version());
        if old
            .as_ref()
            .is_some_and(|o| without_volatile(o) == without_volatile(&new))
        {
            // A no-op write does not bump resourceVersion, as on the real server.
            return Ok(old.unwrap_or(new));
        }
        let new = self.store(&kind.qualified(), ns, name, new);
        if kind == kinds::CRDS {
            self.refresh_kinds();
        }
        if kind == kinds::JOBS && old.is_none() {
            // The job controller acts after the create is answered: the answer has no status.
            self.complete_job(ns, name);
            return Ok(new);
        }
        self.reconcile((kind == kinds::NODES).then_some(name));
        // The twin may have rewritten the object (a node's labels): answer with what is stored.
        Ok(self.get_ref(kind, ns, name).cloned().unwrap_or(new))
    }
}
