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
