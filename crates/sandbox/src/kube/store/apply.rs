//! Server-side apply: the configuration's checks, the conflicts it meets where another manager
//! owns a field whose value it changes, and the merge of the configuration into the live object,
//! before the write path (`write.rs`) stores it like any other write.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Map, Value};

use super::managed::{Managed, apply_conflict, managed_entries, set_managed};
use super::{Cluster, Validation, WriteCtx};
use crate::kube::kinds::Kind;
use crate::kube::meta::{meta_mut, meta_str};
use crate::kube::patch::{self, FieldPath};
use crate::kube::schema;
use crate::kube::status::ApiError;

impl Cluster {
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
        self.check_configuration(kind, name, &applied)?;
        let applied = Self::normalize(kind, ns, Some(name), applied)?;
        let paths = patch::leaf_paths(&applied);
        let ctx = WriteCtx {
            manager,
            apply: Some(paths.clone()),
            validation: Validation::Warn,
            patch: true,
            subresource: None,
        };
        let Some(old) = self.get_ref(kind, ns, name).cloned() else {
            self.check_namespace(kind, ns)?;
            let mut fresh = applied.clone();
            meta_mut(&mut fresh).remove("managedFields");
            return self.write(kind, ns, name, None, fresh, &ctx);
        };
        let merge = Merge {
            kind,
            manager,
            paths: &paths,
            old: &old,
            applied: &applied,
        };
        let mut owners = managed_entries(&old);
        let conflicts = merge.conflicts(&owners);
        if !conflicts.is_empty() && !force {
            return Err(apply_conflict(&conflicts));
        }
        if force {
            merge.take_over(&mut owners);
        }
        let mut new = merge.merged(&owners);
        set_managed(&mut new, &owners, &kind.api_version());
        self.write(kind, ns, name, Some(old), new, &ctx)
    }

    /// What the API server refuses in an apply configuration before it merges anything.
    fn check_configuration(&self, kind: Kind, name: &str, applied: &Value) -> Result<(), ApiError> {
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
            && let Some(why) = schema::typed_error(applied, &schema)
        {
            return Err(ApiError::typed_patch(
                meta_str(applied, "namespace").unwrap_or_default(),
                name,
                &kind.api_version(),
                kind.kind,
                &why,
            ));
        }
        Ok(())
    }
}

/// One manager's applied configuration against the live object it merges into.
struct Merge<'a> {
    kind: Kind,
    manager: &'a str,
    /// The configuration's fields.
    paths: &'a BTreeSet<FieldPath>,
    old: &'a Value,
    applied: &'a Value,
}

impl Merge<'_> {
    /// Whether an entry is another manager than this apply's own.
    fn other(&self, e: &Managed) -> bool {
        !(e.manager == self.manager && e.operation == "Apply")
    }

    /// The configuration's fields whose live value it changes, by the other manager that owns
    /// each. Keyed by the whole entry, as the API server keys managers (manager, operation,
    /// apiVersion, time): "helm" that applied and "helm" that updated are two managers.
    fn conflicts(&self, owners: &[Managed]) -> BTreeMap<String, Vec<FieldPath>> {
        let mut conflicts: BTreeMap<String, Vec<FieldPath>> = BTreeMap::new();
        for p in self.paths {
            let live = patch::get_path(self.old, p);
            if live.is_none() || live == patch::get_path(self.applied, p) {
                continue;
            }
            for e in owners.iter().filter(|e| self.other(e)) {
                if e.fields.contains(p) {
                    conflicts
                        .entry(e.describe(&self.kind.api_version()))
                        .or_default()
                        .push(p.clone());
                }
            }
        }
        conflicts
    }

    /// A forced apply takes the fields it changes from the managers that owned them.
    fn take_over(&self, owners: &mut [Managed]) {
        let (old, applied) = (self.old, self.applied);
        for e in owners.iter_mut().filter(|e| self.other(e)) {
            e.fields.retain(|p| {
                !(self.paths.contains(p) && patch::get_path(old, p) != patch::get_path(applied, p))
            });
        }
    }

    /// The live object with the fields this manager applied before and no longer applies removed
    /// (where no other manager holds them), and the configuration set.
    fn merged(&self, owners: &[Managed]) -> Value {
        let mut new = self.old.clone();
        let previous: BTreeSet<FieldPath> = owners
            .iter()
            .find(|e| !self.other(e))
            .map(|e| e.fields.clone())
            .unwrap_or_default();
        for p in previous.difference(self.paths) {
            let shared = owners.iter().any(|e| self.other(e) && e.fields.contains(p));
            if !shared {
                patch::remove_path(&mut new, p);
                // A map of a custom resource that another manager holds (as a node, without the
                // members this removal takes) and that the removal empties stays, as null:
                // structured-merge-diff
                // removes the members, not the field another manager owns, and the result is
                // validated as it is, so a non-nullable object there is refused (kube-apiserver
                // v1.34: "spec.mig in body must be of type object: \"null\"").
                if self.kind.custom && p.len() > 2 {
                    let parent = p[..p.len() - 1].to_vec();
                    let mut node = parent.clone();
                    node.push(patch::SELF.into());
                    let held = owners.iter().any(|e| {
                        self.other(e) && (e.fields.contains(&parent) || e.fields.contains(&node))
                    });
                    if held && patch::get_path(&new, &parent).is_none() {
                        patch::set_path(&mut new, &parent, Value::Null);
                    }
                }
            }
        }
        for p in self.paths {
            let v = patch::get_path(self.applied, p)
                .cloned()
                .unwrap_or(Value::Null);
            if v.as_object().is_some_and(Map::is_empty)
                && patch::get_path(&new, p).is_some_and(Value::is_object)
            {
                continue;
            }
            patch::set_path(&mut new, p, v);
        }
        new
    }
}
