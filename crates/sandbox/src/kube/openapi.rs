//! OpenAPI documents (`/openapi/v3` and its group-version documents, `/openapi/v2`) for every
//! kind the cluster serves.
//!
//! kubectl's and helm's `--validate=strict` look up the PATCH operation of each object's kind in
//! the v3 document of its group version and, when it declares the `fieldValidation` query
//! parameter, leave validation to the server (k8s.io/cli-runtime pkg/resource
//! query_param_verifier_v3.go); a group version missing from v3 sends them to `/openapi/v2`
//! instead, which is why every served group version has a document here.
//!
//! The built-in group versions are served from a real kube-apiserver's own documents where the
//! sandbox is given them (`--openapi DIR`, laid out as `shared/fixtures/kube-api-v1.34.9`:
//! `openapi-v3/<path with _>.json.gz` and `openapi-v2.json.gz`; third-party data, read at run
//! time and never part of the project); otherwise, and for every CRD, the sandbox writes its own:
//! the operations with their parameters and GVK, and a CRD's structural schema as its component,
//! named and shaped as apiextensions-apiserver names them (pkg/controller/openapi/builder: the
//! reversed group, the version and the kind, e.g. `sh.karpenter.v1.NodePool`).
//!
//! `/openapi/v2` is answered in JSON, or in protobuf to a client that asks for it (client-go
//! does; see `openapi_proto.rs`).

use std::collections::BTreeMap;
use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use serde_json::{Map, Value, json};

use super::discovery::groups;
use super::kinds::Kind;

/// The real server's documents, read from their folder when first asked for.
#[derive(Default)]
pub struct OpenApiDocs {
    dir: Option<PathBuf>,
    cache: Mutex<BTreeMap<String, Option<Arc<Value>>>>,
}

impl OpenApiDocs {
    /// Documents read from `dir` (see the module comment for its layout).
    pub fn from_dir(dir: &Path) -> Result<OpenApiDocs, String> {
        if !dir.join("openapi-v3").is_dir() {
            return Err(format!(
                "{}: no openapi-v3 folder (expected a kube-api documents folder such as \
                    shared/fixtures/kube-api-v1.34.9)",
                dir.display()
            ));
        }
        Ok(OpenApiDocs {
            dir: Some(dir.to_path_buf()),
            cache: Mutex::new(BTreeMap::new()),
        })
    }

    /// A real document by its file name (`openapi-v3/apis_apps_v1.json.gz`), if given.
    fn real(&self, file: &str) -> Option<Arc<Value>> {
        let dir = self.dir.as_ref()?;
        let mut cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(v) = cache.get(file) {
            return v.clone();
        }
        let read = || -> Option<Value> {
            let raw = std::fs::read(dir.join(file)).ok()?;
            let mut text = Vec::new();
            flate2::read::GzDecoder::new(raw.as_slice())
                .read_to_end(&mut text)
                .ok()?;
            serde_json::from_slice(&text).ok()
        };
        let v = read().map(Arc::new);
        cache.insert(file.to_string(), v.clone());
        v
    }

    fn real_v3(&self, path: &str) -> Option<Arc<Value>> {
        self.real(&format!("openapi-v3/{}.json.gz", path.replace('/', "_")))
    }
}

/// `io.k8s.apimachinery.pkg.apis.meta.v1.<name>`.
fn meta(name: &str) -> String {
    format!("io.k8s.apimachinery.pkg.apis.meta.v1.{name}")
}

/// The component name of a kind's schema: the group reversed, the version, the kind.
fn schema_name(k: &Kind, suffix: &str) -> String {
    let group: Vec<&str> = if k.group.is_empty() {
        vec!["io", "k8s", "api", "core"]
    } else {
        k.group.split('.').rev().collect()
    };
    format!("{}.{}.{}{suffix}", group.join("."), k.version, k.kind)
}

/// The document path of a group version: `api/v1` or `apis/<group>/<version>`.
pub(super) fn gv_path(group: &str, version: &str) -> String {
    if group.is_empty() {
        format!("api/{version}")
    } else {
        format!("apis/{group}/{version}")
    }
}

fn param(name: &str, kind: &str) -> Value {
    json!({"name": name, "in": "query", "schema": {"type": kind, "uniqueItems": true}})
}

fn operation(k: &Kind, action: &str, params: &[Value]) -> Value {
    let mut id = String::new();
    for part in k.group.split('.').chain([k.version]) {
        let mut c = part.chars();
        if let Some(f) = c.next() {
            id.extend(f.to_uppercase());
            id.extend(c);
        }
    }
    json!({"operationId": format!("{action}{id}{}", k.kind), "parameters": params,
        "responses": {"200": {"description": "OK", "content": {"application/json": {"schema":
            {"$ref": format!("#/components/schemas/{}", schema_name(k, ""))}}}}},
        "x-kubernetes-action": action,
        "x-kubernetes-group-version-kind": {"group": k.group, "version": k.version, "kind": k.kind}})
}

/// The paths of one kind: its collection, its items and their status and scale subresources.
fn kind_paths(k: &Kind, paths: &mut Map<String, Value>) {
    let base = format!(
        "/{}{}/{}",
        gv_path(k.group, k.version),
        if k.namespaced {
            "/namespaces/{namespace}"
        } else {
            ""
        },
        k.plural
    );
    let write = [
        param("dryRun", "string"),
        param("fieldManager", "string"),
        param("fieldValidation", "string"),
    ];
    let mut patch = write.to_vec();
    patch.push(param("force", "boolean"));
    if k.virtual_kind() {
        paths.insert(base, json!({"post": operation(k, "post", &write)}));
        return;
    }
    let list = [
        param("labelSelector", "string"),
        param("fieldSelector", "string"),
    ];
    paths.insert(
        base.clone(),
        json!({"get": operation(k, "list", &list), "post": operation(k, "post", &write),
            "delete": operation(k, "deletecollection", &[])}),
    );
    let item = json!({"get": operation(k, "get", &[param("resourceVersion", "string")]),
        "put": operation(k, "put", &write), "patch": operation(k, "patch", &patch),
        "delete": operation(k, "delete", &[param("dryRun", "string")])});
    paths.insert(format!("{base}/{{name}}"), item.clone());
    for sub in k
        .subresources
        .iter()
        .filter(|s| ["status", "scale"].contains(s))
    {
        paths.insert(format!("{base}/{{name}}/{sub}"), item.clone());
    }
}

/// A kind's schema component: a CRD's structural schema with the GVK, or, for a built-in kind
/// the sandbox has no document for, an object that keeps whatever it is given.
fn kind_schema(k: &Kind, crd_schema: Option<&Value>) -> Value {
    let mut s = crd_schema
        .cloned()
        .unwrap_or_else(|| json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true}));
    if let Some(props) = s.get_mut("properties").and_then(Value::as_object_mut) {
        props.insert(
            "metadata".into(),
            json!({"allOf": [{"$ref": format!("#/components/schemas/{}", meta("ObjectMeta"))}]}),
        );
    }
    s["x-kubernetes-group-version-kind"] =
        json!([{"group": k.group, "kind": k.kind, "version": k.version}]);
    s
}

/// The schemas the generated documents refer to: ObjectMeta and ListMeta from the real
/// documents when given (any group version's copy is the same), else open objects.
fn meta_schemas(docs: &OpenApiDocs) -> Map<String, Value> {
    let real = docs.real_v3("api/v1");
    let mut out = Map::new();
    for name in [
        "ObjectMeta",
        "ListMeta",
        "ManagedFieldsEntry",
        "OwnerReference",
        "FieldsV1",
        "Time",
    ] {
        let key = meta(name);
        let s = real
            .as_ref()
            .and_then(|d| d.pointer(&format!("/components/schemas/{key}")).cloned())
            .unwrap_or_else(|| json!({"type": "object"}));
        out.insert(key, s);
    }
    out
}

/// The v3 document of one group version, generated (see the module comment).
fn generated_v3(
    served: &[Kind],
    group: &str,
    version: &str,
    schema_of: &dyn Fn(&Kind) -> Option<Value>,
    docs: &OpenApiDocs,
) -> Value {
    let mut paths = Map::new();
    let mut schemas = meta_schemas(docs);
    let custom = served.iter().any(|k| k.group == group && k.custom);
    for k in served
        .iter()
        .filter(|k| k.group == group && k.version == version)
    {
        kind_paths(k, &mut paths);
        schemas.insert(schema_name(k, ""), kind_schema(k, schema_of(k).as_ref()));
        schemas.insert(
            schema_name(k, "List"),
            json!({"type": "object", "required": ["items"], "properties": {
                "apiVersion": {"type": "string"}, "kind": {"type": "string"},
                "items": {"type": "array", "items": {"$ref": format!("#/components/schemas/{}", schema_name(k, ""))}},
                "metadata": {"allOf": [{"$ref": format!("#/components/schemas/{}", meta("ListMeta"))}]}},
                "x-kubernetes-group-version-kind": [{"group": k.group, "kind": format!("{}List", k.kind), "version": k.version}]}),
        );
    }
    let title = if custom {
        "Kubernetes CRD Swagger"
    } else {
        "Kubernetes"
    };
    json!({"openapi": "3.0.0", "info": {"title": title, "version": "v1.34.9"}, "paths": paths,
        "components": {"schemas": schemas}})
}

/// The paths `/openapi/v3` lists: every served group version, and `api` and `apis`.
fn v3_paths(served: &[Kind]) -> Vec<(String, String, String)> {
    let mut out = vec![("".to_string(), "v1".to_string(), "api/v1".to_string())];
    for (g, vs) in groups(served) {
        for v in vs {
            out.push((g.to_string(), v.to_string(), gv_path(g, v)));
        }
    }
    out
}

/// The SHA-512 of a document, as the `hash` query of its URL in the index (uppercase hex).
fn hash(doc: &Value) -> String {
    let d = aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA512, doc.to_string().as_bytes());
    d.as_ref().iter().map(|b| format!("{b:02X}")).collect()
}

/// Answers `/openapi/v3` (`rest` empty) and `/openapi/v3/<path>`; None for a path not served.
pub(super) fn v3(
    served: &[Kind],
    rest: &str,
    schema_of: &dyn Fn(&Kind) -> Option<Value>,
    docs: &OpenApiDocs,
) -> Option<Value> {
    let doc_of = |g: &str, v: &str, path: &str| -> Value {
        let builtin = served
            .iter()
            .any(|k| k.group == g && k.version == v && !k.custom);
        match docs.real_v3(path).filter(|_| builtin) {
            Some(real) => (*real).clone(),
            None => generated_v3(served, g, v, schema_of, docs),
        }
    };
    if rest.is_empty() {
        let mut index = Map::new();
        for (g, v, path) in v3_paths(served) {
            let url = format!("/openapi/v3/{path}?hash={}", hash(&doc_of(&g, &v, &path)));
            index.insert(path, json!({"serverRelativeURL": url}));
        }
        return Some(json!({"paths": index}));
    }
    let (g, v, path) = v3_paths(served).into_iter().find(|(_, _, p)| p == rest)?;
    Some(doc_of(&g, &v, &path))
}

/// Answers `/openapi/v2` in JSON: the real document with the CRDs' definitions and paths
/// added, or a generated one of every served kind.
pub(super) fn v2(
    served: &[Kind],
    schema_of: &dyn Fn(&Kind) -> Option<Value>,
    docs: &OpenApiDocs,
) -> Value {
    let mut doc = docs
        .real("openapi-v2.json.gz")
        .map(|d| (*d).clone())
        .unwrap_or_else(|| {
            json!({"swagger": "2.0", "info": {"title": "Kubernetes", "version": "v1.34.9"},
                "paths": {}, "definitions": {}})
        });
    let real_given = docs.dir.is_some();
    if let Some(d) = doc["definitions"].as_object_mut() {
        for (k, v) in meta_schemas(docs) {
            d.entry(k).or_insert(v);
        }
    }
    for k in served.iter().filter(|k| k.custom || !real_given) {
        let mut paths = Map::new();
        kind_paths(k, &mut paths);
        if let Some(p) = doc["paths"].as_object_mut() {
            p.extend(paths);
        }
        let mut s = kind_schema(k, schema_of(k).as_ref());
        if let Some(m) = s.pointer_mut("/properties/metadata") {
            *m = json!({"$ref": format!("#/definitions/{}", meta("ObjectMeta"))});
        }
        if let Some(d) = doc["definitions"].as_object_mut() {
            d.insert(schema_name(k, ""), s);
        }
    }
    doc
}
