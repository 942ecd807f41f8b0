//! The hand-written interface between the protocol layer and the provider's own code: what a
//! provider, a data source, a resource, a list, an action and a function must answer. Handlers see only `tf`
//! values and diagnostics, never a protobuf type.

use std::sync::Arc;

use async_trait::async_trait;

use super::diag::Diagnostics;
use super::plan::Planned;
use super::schema::Schema;
use super::types::Type;
use super::value::Value;

/// The provider as a whole: its own configuration block and the registry of what it offers.
#[async_trait]
pub trait Provider: Send + Sync + 'static {
    /// The type in the provider's registry address `<host>/<namespace>/<type>` (resource names
    /// start with it).
    fn type_name(&self) -> &'static str;
    /// The schema of the `provider` block.
    fn schema(&self) -> Schema;
    /// Checks of the `provider` block beyond its schema's validators.
    fn validate_config(&self, _config: &Value, _diags: &mut Diagnostics) {}
    /// Takes the `provider` block (values may still be unknown at plan time) before any
    /// resource or data source is used.
    async fn configure(&self, terraform_version: &str, config: &Value, diags: &mut Diagnostics);
    /// Every data source, each answering for its type name.
    fn data_sources(&self) -> Vec<Arc<dyn DataSource>>;
    /// Every managed resource, each answering for its type name.
    fn resources(&self) -> Vec<Arc<dyn Resource>>;
    /// Every provider-defined function.
    fn functions(&self) -> Vec<Arc<dyn Function>>;
    /// The list resources `terraform query` reads (protocol 6.10); none by default.
    fn list_resources(&self) -> Vec<Arc<dyn ListResource>> {
        Vec::new()
    }
    /// The actions `terraform apply -invoke` and `action_trigger` run (protocol 6.10); none by
    /// default.
    fn actions(&self) -> Vec<Arc<dyn Action>> {
        Vec::new()
    }
    /// StopProvider: end waits and polling promptly; handlers still return what exists.
    fn stop(&self) {}
}

/// A data source: reads something that exists, from its configuration alone.
#[async_trait]
pub trait DataSource: Send + Sync {
    /// The name configurations use, e.g. `fracgpu_machine_type`.
    fn type_name(&self) -> &'static str;
    /// The data source's schema.
    fn schema(&self) -> Schema;
    /// Checks beyond the schema's own validators (which run first).
    fn validate(&self, _config: &Value, _diags: &mut Diagnostics) {}
    /// The whole object: the configuration with the computed attributes filled; null after an
    /// error diagnostic.
    async fn read(&self, config: &Value, diags: &mut Diagnostics) -> Value;
}

/// What a resource's plan hook sees besides the framework's plan.
pub struct PlanRequest<'a> {
    /// The state before the plan; null on create.
    pub prior: &'a Value,
    /// The configuration as written, null where the user set nothing.
    pub config: &'a Value,
}

/// A managed resource: planned from its configuration, then created, read, updated, deleted and
/// imported.
#[async_trait]
pub trait Resource: Send + Sync {
    /// The name configurations use, e.g. `fracgpu_nodepool`.
    fn type_name(&self) -> &'static str;
    /// The resource's schema.
    fn schema(&self) -> Schema;
    /// Checks beyond the schema's own validators (which run first); values may be unknown.
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
    /// Changes the object in place to the plan; returns the new state (the prior one when
    /// nothing changed).
    async fn update(
        &self,
        prior: &Value,
        planned: &Value,
        private: &mut Private,
        diags: &mut Diagnostics,
    ) -> Value;
    /// Deletes the object; an error diagnostic keeps it in state.
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
    /// Raised when the attributes change, as a schema's version is.
    pub version: i64,
    /// The attributes, in the order terraform shows them.
    pub attributes: Vec<IdentityAttribute>,
}

/// One attribute of an identity.
pub struct IdentityAttribute {
    /// The attribute's name.
    pub name: &'static str,
    /// Its type: a plain one (string, number, bool, or a list of them).
    pub ty: Type,
    /// An `import { identity = ... }` block must give it.
    pub required_for_import: bool,
    /// An `import { identity = ... }` block may give it; the provider's defaults fill it else.
    pub optional_for_import: bool,
    /// What it names, for the docs.
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
    /// The object's identity, shaped as the resource's identity schema.
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
    /// The managed resource's type name, which the `list` block names.
    fn type_name(&self) -> &'static str;
    /// The schema of the `list` block's `config`.
    fn schema(&self) -> Schema;
    /// Checks beyond the schema's own validators (which run first).
    fn validate(&self, _config: &Value, _diags: &mut Diagnostics) {}
    /// Sends every object the configuration selects to `sink`, each with its identity and, when
    /// the sink asks for it, its state; problems go to `diags` (an error ends the query).
    async fn list(&self, config: &Value, sink: &mut ListSink, diags: &mut Diagnostics);
}

/// Where a running action tells terraform how far it got: terraform prints each message as it
/// arrives (`Action action.T.N: <message>`, internal/command/views/hook_ui.go ProgressAction).
pub struct Progress {
    tx: tokio::sync::mpsc::Sender<String>,
}

impl Progress {
    pub(crate) fn new(tx: tokio::sync::mpsc::Sender<String>) -> Progress {
        Progress { tx }
    }

    /// Sends one message; false once terraform has hung up (the stream was cancelled), which
    /// an action takes as a request to stop after its current step.
    pub async fn send(&self, message: impl Into<String>) -> bool {
        self.tx.send(message.into()).await.is_ok()
    }

    /// Whether terraform has hung up.
    pub fn is_closed(&self) -> bool {
        self.tx.is_closed()
    }

    /// Resolves when terraform hangs up, for an action to race its waits against.
    pub async fn closed(&self) {
        self.tx.closed().await
    }
}

/// An action: an operation terraform runs on request (`terraform apply -invoke=action.T.N`) or
/// after a resource's create or update (`action_trigger`), that keeps no state. Its problems end
/// as diagnostics; terraform folds the diagnostics of a run into one ("Error when invoking
/// action", internal/terraform/node_action_trigger_instance_apply.go), so a run's diagnostics
/// name what failed in their own text, and only validation's carry attribute paths terraform
/// points at.
#[async_trait]
pub trait Action: Send + Sync {
    /// The name configurations use, e.g. `fracgpu_device_plugin_rollout`.
    fn type_name(&self) -> &'static str;
    /// The schema of the action's `config` block.
    fn schema(&self) -> Schema;
    /// Checks beyond the schema's own validators (which run first); values may be unknown.
    fn validate(&self, _config: &Value, _diags: &mut Diagnostics) {}
    /// Checks at plan time, against what exists (a triggered action's config may still hold
    /// unknowns; an invoked one's is known).
    async fn plan(&self, _config: &Value, _diags: &mut Diagnostics) {}
    /// Runs the action with its known configuration, reporting progress as it goes.
    async fn invoke(&self, config: &Value, progress: &Progress, diags: &mut Diagnostics);
}

/// What a resource keeps beside its state and never shows: opaque bytes terraform stores with
/// the state and hands back on every later read, plan and apply of the object (the protocol's
/// `private`). Empty when the object was imported or made by an older provider.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Private(pub Vec<u8>);

/// One parameter of a function.
pub struct Parameter {
    /// Its name, as error messages and the docs give it.
    pub name: &'static str,
    /// The type terraform converts the argument to before the call.
    pub ty: Type,
    /// What the argument means, for the docs.
    pub description: &'static str,
}

/// What a function takes and returns, as terraform checks a call against it.
pub struct FunctionSignature {
    /// The parameters, in call order.
    pub parameters: Vec<Parameter>,
    /// The type of the result.
    pub returns: Type,
    /// One line, for the docs' index.
    pub summary: &'static str,
    /// The whole description, for the function's page.
    pub description: &'static str,
}

/// A function error as terraform shows it: the text, and the argument it concerns.
#[derive(Debug, PartialEq)]
pub struct FunctionError {
    /// The index of the argument at fault; None when the call as a whole is.
    pub argument: Option<usize>,
    /// What is wrong and how to fix it.
    pub text: String,
}

/// A provider-defined function (`provider::fracgpu::<name>(...)`): pure, from its arguments alone.
pub trait Function: Send + Sync {
    /// The name a call uses after `provider::<provider>::`.
    fn name(&self) -> &'static str;
    /// What the function takes and returns.
    fn signature(&self) -> FunctionSignature;
    /// The result of a call whose arguments have the signature's types.
    fn call(&self, args: &[Value]) -> Result<Value, FunctionError>;
}
