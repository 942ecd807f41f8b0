//! The hand-written interface between the protocol layer and the provider's own code: what a
//! provider, a data source, a resource and a function must answer. Handlers see only `tf`
//! values and diagnostics, never a protobuf type.

use std::sync::Arc;

use async_trait::async_trait;

use super::diag::Diagnostics;
use super::plan::Planned;
use super::schema::Schema;
use super::types::Type;
use super::value::Value;

#[async_trait]
pub trait Provider: Send + Sync + 'static {
    /// The type in the provider's registry address `<host>/<namespace>/<type>` (resource names
    /// start with it).
    fn type_name(&self) -> &'static str;
    fn schema(&self) -> Schema;
    fn validate_config(&self, _config: &Value, _diags: &mut Diagnostics) {}
    async fn configure(&self, terraform_version: &str, config: &Value, diags: &mut Diagnostics);
    fn data_sources(&self) -> Vec<Arc<dyn DataSource>>;
    fn resources(&self) -> Vec<Arc<dyn Resource>>;
    fn functions(&self) -> Vec<Arc<dyn Function>>;
    /// The list resources `terraform query` reads (protocol 6.10); none by default.
    fn list_resources(&self) -> Vec<Arc<dyn ListResource>> {
        Vec::new()
    }
    /// StopProvider: end waits and polling promptly; handlers still return what exists.
    fn stop(&self) {}
}

#[async_trait]
pub trait DataSource: Send + Sync {
    fn type_name(&self) -> &'static str;
    fn schema(&self) -> Schema;
    /// Checks beyond the schema's own validators (which run first).
    fn validate(&self, _config: &Value, _diags: &mut Diagnostics) {}
    async fn read(&self, config: &Value, diags: &mut Diagnostics) -> Value;
}

/// What a resource's plan hook sees besides the framework's plan.
pub struct PlanRequest<'a> {
    pub prior: &'a Value,
    pub config: &'a Value,
}

#[async_trait]
pub trait Resource: Send + Sync {
    fn type_name(&self) -> &'static str;
    fn schema(&self) -> Schema;
    fn validate(&self, _config: &Value, _diags: &mut Diagnostics) {}
    /// Adjusts the framework's plan: fill values derivable at plan time, add replace paths. Async,
    /// because a default may come from the remote API (read once, at plan time).
    async fn modify_plan(
        &self,
        _req: &PlanRequest<'_>,
        _planned: &mut Planned,
        _diags: &mut Diagnostics,
    ) {
    }
    /// Returns the new state; null when nothing was created. A partial state with an error
    /// diagnostic is kept by terraform as tainted, so nothing is orphaned.
    async fn create(
        &self,
        planned: &Value,
        private: &mut Private,
        diags: &mut Diagnostics,
    ) -> Value;
    /// Returns None when the object no longer exists.
    async fn read(
        &self,
        state: &Value,
        private: &mut Private,
        diags: &mut Diagnostics,
    ) -> Option<Value>;
    async fn update(
        &self,
        prior: &Value,
        planned: &Value,
        private: &mut Private,
        diags: &mut Diagnostics,
    ) -> Value;
    async fn delete(&self, state: &Value, private: &Private, diags: &mut Diagnostics);
    /// A state skeleton for the ID; terraform then calls read to fill it.
    async fn import(&self, id: &str, diags: &mut Diagnostics) -> Option<Value>;
    /// The attributes that name one object of the resource for as long as it lives (terraform
    /// 1.12 and later keep them beside the state, import by them, and list resources return
    /// them); None for a resource without an identity.
    fn identity_schema(&self) -> Option<IdentitySchema> {
        None
    }
    /// The identity of the object a state or plan describes; None while part of it is unknown
    /// (a create plan).
    fn identity(&self, _state: &Value) -> Option<Value> {
        None
    }
    /// A state skeleton for an identity (`import { identity = {...} }`), like [`Resource::import`].
    async fn import_identity(&self, _identity: &Value, diags: &mut Diagnostics) -> Option<Value> {
        diags.push(crate::Diagnostic::error(
            "Import by identity not supported",
            format!("{} is imported by its ID.", self.type_name()),
        ));
        None
    }
}

/// A resource's identity schema: named attributes of plain types, one object.
pub struct IdentitySchema {
    pub version: i64,
    pub attributes: Vec<IdentityAttribute>,
}

pub struct IdentityAttribute {
    pub name: &'static str,
    pub ty: Type,
    pub required_for_import: bool,
    pub optional_for_import: bool,
    pub description: &'static str,
}

impl IdentitySchema {
    /// The object type identities are encoded with.
    pub fn ty(&self) -> Type {
        Type::Object(
            self.attributes
                .iter()
                .map(|a| (a.name.to_string(), a.ty.clone()))
                .collect(),
        )
    }
}

/// One object a list resource found.
pub struct ListItem {
    pub identity: Value,
    /// What a person reads in `terraform query`'s output.
    pub display_name: String,
    /// The whole resource object, as a read after import would give it; only when asked for.
    pub resource: Option<Value>,
}

/// Where a list resource sends what it finds: terraform receives each item as it is sent (the
/// RPC is a stream), and stops wanting more at its limit.
pub struct ListSink {
    tx: tokio::sync::mpsc::Sender<ListItem>,
    remaining: usize,
    include_resource: bool,
}

impl ListSink {
    pub(crate) fn new(
        tx: tokio::sync::mpsc::Sender<ListItem>,
        limit: usize,
        include_resource: bool,
    ) -> ListSink {
        ListSink {
            tx,
            remaining: limit,
            include_resource,
        }
    }

    /// Whether terraform asked for each object's whole state (`include_resource = true`).
    pub fn include_resource(&self) -> bool {
        self.include_resource
    }

    /// Whether terraform still wants items; a list stops looking once it does not.
    pub fn wants_more(&self) -> bool {
        self.remaining > 0 && !self.tx.is_closed()
    }

    /// Sends one item; false once terraform wants no more (its limit is reached or it hung up).
    pub async fn send(&mut self, item: ListItem) -> bool {
        if !self.wants_more() {
            return false;
        }
        if self.tx.send(item).await.is_err() {
            return false;
        }
        self.remaining -= 1;
        self.remaining > 0
    }
}

/// A list resource: finds the objects of the managed resource of the same type name, including
/// those no terraform made, for `terraform query`.
#[async_trait]
pub trait ListResource: Send + Sync {
    fn type_name(&self) -> &'static str;
    /// The schema of the `list` block's `config`.
    fn schema(&self) -> Schema;
    /// Checks beyond the schema's own validators (which run first).
    fn validate(&self, _config: &Value, _diags: &mut Diagnostics) {}
    /// Sends every object the configuration selects to `sink`, each with its identity and, when
    /// the sink asks for it, its state; problems go to `diags` (an error ends the query).
    async fn list(&self, config: &Value, sink: &mut ListSink, diags: &mut Diagnostics);
}

/// What a resource keeps beside its state and never shows: opaque bytes terraform stores with
/// the state and hands back on every later read, plan and apply of the object (the protocol's
/// `private`). Empty when the object was imported or made by an older provider.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Private(pub Vec<u8>);

pub struct Parameter {
    pub name: &'static str,
    pub ty: Type,
    pub description: &'static str,
}

pub struct FunctionSignature {
    pub parameters: Vec<Parameter>,
    pub returns: Type,
    pub summary: &'static str,
    pub description: &'static str,
}

/// A function error as terraform shows it: the text, and the argument it concerns.
#[derive(Debug, PartialEq)]
pub struct FunctionError {
    pub argument: Option<usize>,
    pub text: String,
}

pub trait Function: Send + Sync {
    fn name(&self) -> &'static str;
    fn signature(&self) -> FunctionSignature;
    fn call(&self, args: &[Value]) -> Result<Value, FunctionError>;
}
