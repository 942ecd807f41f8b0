//! The tfplugin6.Provider service. Every handler follows one template: look up the type,
//! decode the values against its schema, call the handler, encode the answer with diagnostics.
//! Handlers run in their own task so that a panic becomes an error diagnostic instead of a dead
//! plugin.

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, OnceLock};
use std::time::Instant;

use tonic::{Request, Response, Status};

use super::convert::{self, codec_diag, decode, diagnostics, encode};
use super::proto::tfplugin6 as pb;
use crate::api::{DataSource, Function, PlanRequest, Private, Provider, Resource};
use crate::schema::{Schema, validate_config};
use crate::{AttrPath, Diagnostic, Diagnostics, Value, plan};

pub struct Registry {
    provider: Arc<dyn Provider>,
    provider_schema: Schema,
    data_sources: HashMap<String, (Arc<dyn DataSource>, Schema)>,
    resources: HashMap<String, (Arc<dyn Resource>, Schema)>,
    functions: HashMap<String, Arc<dyn Function>>,
    schema_response: pb::get_provider_schema::Response,
}

impl Registry {
    pub fn new(provider: Arc<dyn Provider>) -> Registry {
        let provider_schema = provider.schema();
        let data_sources: HashMap<_, _> = provider
            .data_sources()
            .into_iter()
            .map(|d| (d.type_name().to_string(), (d.clone(), d.schema())))
            .collect();
        let resources: HashMap<_, _> = provider
            .resources()
            .into_iter()
            .map(|r| (r.type_name().to_string(), (r.clone(), r.schema())))
            .collect();
        let functions: HashMap<_, _> = provider
            .functions()
            .into_iter()
            .map(|f| (f.name().to_string(), f))
            .collect();
        let fn_defs: HashMap<String, pb::Function> = functions
            .iter()
            .map(|(n, f)| (n.clone(), convert::function(&f.signature())))
            .collect();
        let schema_response = pb::get_provider_schema::Response {
            provider: Some(convert::schema(&provider_schema)),
            resource_schemas: resources
                .iter()
                .map(|(n, (_, s))| (n.clone(), convert::schema(s)))
                .collect(),
            data_source_schemas: data_sources
                .iter()
                .map(|(n, (_, s))| (n.clone(), convert::schema(s)))
                .collect(),
            functions: fn_defs,
            server_capabilities: Some(pb::ServerCapabilities {
                plan_destroy: false,
                get_provider_schema_optional: true,
                move_resource_state: false,
            }),
            ..Default::default()
        };
        Registry {
            provider,
            provider_schema,
            data_sources,
            resources,
            functions,
            schema_response,
        }
    }

    fn resource(&self, name: &str) -> Result<(&Arc<dyn Resource>, &Schema), Diagnostics> {
        self.resources
            .get(name)
            .map(|(r, s)| (r, s))
            .ok_or_else(|| unknown_type("resource", name, self.resources.keys()))
    }

    fn data_source(&self, name: &str) -> Result<(&Arc<dyn DataSource>, &Schema), Diagnostics> {
        self.data_sources
            .get(name)
            .map(|(d, s)| (d, s))
            .ok_or_else(|| unknown_type("data source", name, self.data_sources.keys()))
    }
}

fn unknown_type<'a>(
    kind: &str,
    name: &str,
    known: impl Iterator<Item = &'a String>,
) -> Diagnostics {
    let mut known: Vec<&str> = known.map(String::as_str).collect();
    known.sort_unstable();
    Diagnostic::error(
        format!("Unknown {kind} type"),
        format!(
            "This provider has no {kind} {name:?}. Known: {}.",
            known.join(", ")
        ),
    )
    .into()
}

/// Responses that can carry diagnostics, so the shared template can fill them.
pub trait WithDiagnostics: Default {
    fn set_diagnostics(&mut self, d: Vec<pb::Diagnostic>);
    fn from_diagnostics(d: &Diagnostics) -> Self {
        let mut r = Self::default();
        r.set_diagnostics(diagnostics(d));
        r
    }
}

macro_rules! with_diagnostics {
    ($($t:ty),* $(,)?) => {$(
        impl WithDiagnostics for $t {
            fn set_diagnostics(&mut self, d: Vec<pb::Diagnostic>) { self.diagnostics = d; }
        }
    )*};
}

with_diagnostics!(
    pb::get_metadata::Response,
    pb::get_provider_schema::Response,
    pb::validate_provider_config::Response,
    pb::validate_resource_config::Response,
    pb::validate_data_resource_config::Response,
    pb::upgrade_resource_state::Response,
    pb::get_resource_identity_schemas::Response,
    pb::upgrade_resource_identity::Response,
    pb::configure_provider::Response,
    pb::read_resource::Response,
    pb::plan_resource_change::Response,
    pb::apply_resource_change::Response,
    pb::import_resource_state::Response,
    pb::move_resource_state::Response,
    pb::read_data_source::Response,
    pb::validate_ephemeral_resource_config::Response,
    pb::open_ephemeral_resource::Response,
    pb::renew_ephemeral_resource::Response,
    pb::close_ephemeral_resource::Response,
    pb::get_functions::Response,
);

/// Runs a handler in its own task: a panic becomes an error diagnostic on the response.
async fn guarded<T, F>(rpc: &'static str, fut: F) -> Result<Response<T>, Status>
where
    T: WithDiagnostics + Send + 'static,
    F: Future<Output = T> + Send + 'static,
{
    match tokio::spawn(fut).await {
        Ok(r) => Ok(Response::new(r)),
        Err(e) => Ok(Response::new(T::from_diagnostics(&panic_diagnostic(
            rpc, e,
        )))),
    }
}

fn panic_diagnostic(rpc: &str, e: tokio::task::JoinError) -> Diagnostics {
    let cause = match e.try_into_panic() {
        Ok(p) => p
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| p.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "unknown panic".into()),
        Err(e) => e.to_string(),
    };
    Diagnostic::error(
        "Provider internal error",
        format!("The provider failed while handling {rpc}: {cause}. This is a bug in terraform-provider-fracgpu; please report it with the configuration that triggered it."),
    )
    .into()
}

/// Shorthand for "decode or answer with a diagnostic".
macro_rules! try_diag {
    ($e:expr, $resp:ty) => {
        match $e {
            Ok(v) => v,
            Err(d) => return <$resp>::from_diagnostics(&d),
        }
    };
}

pub struct ProviderService {
    pub registry: Arc<Registry>,
    /// When terraform first called StopProvider, so that an apply ending afterwards can say how
    /// long it took to stop (terraform waits for it before it exits).
    stopped_at: Arc<OnceLock<Instant>>,
}

impl ProviderService {
    pub fn new(registry: Arc<Registry>) -> ProviderService {
        ProviderService {
            registry,
            stopped_at: Arc::default(),
        }
    }
}

#[tonic::async_trait]
impl pb::provider_server::Provider for ProviderService {
    async fn get_metadata(
        &self,
        _: Request<pb::get_metadata::Request>,
    ) -> Result<Response<pb::get_metadata::Response>, Status> {
        let r = &self.registry;
        let sorted = |it: Vec<&String>| {
            let mut v: Vec<String> = it.into_iter().cloned().collect();
            v.sort();
            v
        };
        Ok(Response::new(pb::get_metadata::Response {
            server_capabilities: r.schema_response.server_capabilities,
            data_sources: sorted(r.data_sources.keys().collect())
                .into_iter()
                .map(|type_name| pb::get_metadata::DataSourceMetadata { type_name })
                .collect(),
            resources: sorted(r.resources.keys().collect())
                .into_iter()
                .map(|type_name| pb::get_metadata::ResourceMetadata { type_name })
                .collect(),
            functions: sorted(r.functions.keys().collect())
                .into_iter()
                .map(|name| pb::get_metadata::FunctionMetadata { name })
                .collect(),
            ..Default::default()
        }))
    }

    async fn get_provider_schema(
        &self,
        _: Request<pb::get_provider_schema::Request>,
    ) -> Result<Response<pb::get_provider_schema::Response>, Status> {
        Ok(Response::new(self.registry.schema_response.clone()))
    }

    async fn validate_provider_config(
        &self,
        req: Request<pb::validate_provider_config::Request>,
    ) -> Result<Response<pb::validate_provider_config::Response>, Status> {
        type R = pb::validate_provider_config::Response;
        let reg = self.registry.clone();
        guarded("ValidateProviderConfig", async move {
            let req = req.into_inner();
            let schema = &reg.provider_schema;
            let config = try_diag!(
                decode(req.config.as_ref(), &schema.ty())
                    .map_err(|e| codec_diag("provider configuration", &e)),
                R
            );
            let mut diags = Diagnostics::new();
            validate_config(&schema.block, &config, &AttrPath::root(), &mut diags);
            reg.provider.validate_config(&config, &mut diags);
            R::from_diagnostics(&diags)
        })
        .await
    }

    async fn validate_resource_config(
        &self,
        req: Request<pb::validate_resource_config::Request>,
    ) -> Result<Response<pb::validate_resource_config::Response>, Status> {
        type R = pb::validate_resource_config::Response;
        let reg = self.registry.clone();
        guarded("ValidateResourceConfig", async move {
            let req = req.into_inner();
            let (res, schema) = try_diag!(reg.resource(&req.type_name), R);
            let config = try_diag!(
                decode(req.config.as_ref(), &schema.ty())
                    .map_err(|e| codec_diag("configuration", &e)),
                R
            );
            let mut diags = Diagnostics::new();
            validate_config(&schema.block, &config, &AttrPath::root(), &mut diags);
            res.validate(&config, &mut diags);
            R::from_diagnostics(&diags)
        })
        .await
    }

    async fn validate_data_resource_config(
        &self,
        req: Request<pb::validate_data_resource_config::Request>,
    ) -> Result<Response<pb::validate_data_resource_config::Response>, Status> {
        type R = pb::validate_data_resource_config::Response;
        let reg = self.registry.clone();
        guarded("ValidateDataResourceConfig", async move {
            let req = req.into_inner();
            let (ds, schema) = try_diag!(reg.data_source(&req.type_name), R);
            let config = try_diag!(
                decode(req.config.as_ref(), &schema.ty())
                    .map_err(|e| codec_diag("configuration", &e)),
                R
            );
            let mut diags = Diagnostics::new();
            validate_config(&schema.block, &config, &AttrPath::root(), &mut diags);
            ds.validate(&config, &mut diags);
            R::from_diagnostics(&diags)
        })
        .await
    }

    async fn upgrade_resource_state(
        &self,
        req: Request<pb::upgrade_resource_state::Request>,
    ) -> Result<Response<pb::upgrade_resource_state::Response>, Status> {
        type R = pb::upgrade_resource_state::Response;
        let reg = self.registry.clone();
        guarded("UpgradeResourceState", async move {
            let req = req.into_inner();
            let (_, schema) = try_diag!(reg.resource(&req.type_name), R);
            if req.version > schema.version {
                return R::from_diagnostics(&Diagnostic::error(
                    "State written by a newer provider",
                    format!(
                        "The state of this {} has schema version {}, newer than this provider's {}. Upgrade terraform-provider-fracgpu.",
                        req.type_name, req.version, schema.version
                    ),
                ).into());
            }
            // Every schema version so far has the same shape, so older states decode as they are.
            let raw = req.raw_state.map(|r| r.json).unwrap_or_default();
            let ty = schema.ty();
            let state = try_diag!(crate::json::decode(&raw, &ty).map_err(|e| codec_diag("stored state", &e)), R);
            let upgraded = try_diag!(encode(&state, &ty).map_err(|e| codec_diag("upgraded state", &e)), R);
            R { upgraded_state: Some(upgraded), diagnostics: Vec::new() }
        })
        .await
    }

    async fn get_resource_identity_schemas(
        &self,
        _: Request<pb::get_resource_identity_schemas::Request>,
    ) -> Result<Response<pb::get_resource_identity_schemas::Response>, Status> {
        Ok(Response::new(
            pb::get_resource_identity_schemas::Response::default(),
        ))
    }

    async fn upgrade_resource_identity(
        &self,
        req: Request<pb::upgrade_resource_identity::Request>,
    ) -> Result<Response<pb::upgrade_resource_identity::Response>, Status> {
        Ok(Response::new(
            pb::upgrade_resource_identity::Response::from_diagnostics(&not_supported(
                "Resource identity",
                &req.into_inner().type_name,
            )),
        ))
    }

    async fn configure_provider(
        &self,
        req: Request<pb::configure_provider::Request>,
    ) -> Result<Response<pb::configure_provider::Response>, Status> {
        type R = pb::configure_provider::Response;
        let reg = self.registry.clone();
        guarded("ConfigureProvider", async move {
            let req = req.into_inner();
            let config = try_diag!(
                decode(req.config.as_ref(), &reg.provider_schema.ty())
                    .map_err(|e| codec_diag("provider configuration", &e)),
                R
            );
            let mut diags = Diagnostics::new();
            reg.provider
                .configure(&req.terraform_version, &config, &mut diags)
                .await;
            R::from_diagnostics(&diags)
        })
        .await
    }

    async fn read_resource(
        &self,
        req: Request<pb::read_resource::Request>,
    ) -> Result<Response<pb::read_resource::Response>, Status> {
        type R = pb::read_resource::Response;
        let reg = self.registry.clone();
        guarded("ReadResource", async move {
            let req = req.into_inner();
            let (res, schema) = try_diag!(reg.resource(&req.type_name), R);
            let ty = schema.ty();
            let state = try_diag!(
                decode(req.current_state.as_ref(), &ty)
                    .map_err(|e| codec_diag("current state", &e)),
                R
            );
            let mut diags = Diagnostics::new();
            let mut private = Private(req.private);
            let new_state = if state.is_null() {
                None
            } else {
                res.read(&state, &mut private, &mut diags).await
            };
            let new_state = match new_state {
                Some(v) => try_diag!(
                    encode(&v, &ty).map_err(|e| codec_diag("refreshed state", &e)),
                    R
                ),
                // The object is gone: an empty value tells terraform to plan its creation.
                None if !diags.has_errors() => pb::DynamicValue::default(),
                // A failed read keeps the prior state.
                None => req.current_state.unwrap_or_default(),
            };
            R {
                new_state: Some(new_state),
                diagnostics: diagnostics(&diags),
                private: private.0,
                ..Default::default()
            }
        })
        .await
    }

    async fn plan_resource_change(
        &self,
        req: Request<pb::plan_resource_change::Request>,
    ) -> Result<Response<pb::plan_resource_change::Response>, Status> {
        type R = pb::plan_resource_change::Response;
        let reg = self.registry.clone();
        guarded("PlanResourceChange", async move {
            let req = req.into_inner();
            let (res, schema) = try_diag!(reg.resource(&req.type_name), R);
            let ty = schema.ty();
            let prior = try_diag!(
                decode(req.prior_state.as_ref(), &ty).map_err(|e| codec_diag("prior state", &e)),
                R
            );
            let proposed = try_diag!(
                decode(req.proposed_new_state.as_ref(), &ty)
                    .map_err(|e| codec_diag("proposed state", &e)),
                R
            );
            let config = try_diag!(
                decode(req.config.as_ref(), &ty).map_err(|e| codec_diag("configuration", &e)),
                R
            );
            if proposed.is_null() {
                // Destroy: nothing to plan.
                return R {
                    planned_state: req.proposed_new_state,
                    planned_private: req.prior_private,
                    ..Default::default()
                };
            }
            let mut planned = plan::plan(&schema.block, &prior, &proposed, &config);
            let mut diags = Diagnostics::new();
            res.modify_plan(
                &PlanRequest {
                    prior: &prior,
                    config: &config,
                },
                &mut planned,
                &mut diags,
            );
            let replace = plan::replace_paths(&schema.block, &prior, &planned.state);
            planned.requires_replace.extend(replace);
            let state = try_diag!(
                encode(&planned.state, &ty).map_err(|e| codec_diag("planned state", &e)),
                R
            );
            R {
                planned_state: Some(state),
                requires_replace: planned.requires_replace.iter().map(convert::path).collect(),
                planned_private: req.prior_private,
                diagnostics: diagnostics(&diags),
                ..Default::default()
            }
        })
        .await
    }

    async fn apply_resource_change(
        &self,
        req: Request<pb::apply_resource_change::Request>,
    ) -> Result<Response<pb::apply_resource_change::Response>, Status> {
        type R = pb::apply_resource_change::Response;
        let reg = self.registry.clone();
        let stopped_at = self.stopped_at.clone();
        let type_name = req.get_ref().type_name.clone();
        let r = guarded("ApplyResourceChange", async move {
            let req = req.into_inner();
            let (res, schema) = try_diag!(reg.resource(&req.type_name), R);
            let ty = schema.ty();
            let prior = try_diag!(
                decode(req.prior_state.as_ref(), &ty).map_err(|e| codec_diag("prior state", &e)),
                R
            );
            let planned = try_diag!(
                decode(req.planned_state.as_ref(), &ty)
                    .map_err(|e| codec_diag("planned state", &e)),
                R
            );
            let mut diags = Diagnostics::new();
            let mut private = Private(req.planned_private);
            let new_state = if planned.is_null() {
                res.delete(&prior, &private, &mut diags).await;
                // A failed delete keeps the object in state.
                if diags.has_errors() {
                    prior
                } else {
                    Value::Null
                }
            } else if prior.is_null() {
                res.create(&planned, &mut private, &mut diags).await
            } else {
                res.update(&prior, &planned, &mut private, &mut diags).await
            };
            let new_state = try_diag!(
                encode(&new_state, &ty).map_err(|e| codec_diag("new state", &e)),
                R
            );
            R {
                new_state: Some(new_state),
                private: private.0,
                diagnostics: diagnostics(&diags),
                ..Default::default()
            }
        })
        .await;
        if let Some(at) = stopped_at.get() {
            tracing::info!(
                tf_resource_type = %type_name,
                ms_after_stop = at.elapsed().as_millis() as u64,
                "ApplyResourceChange returned after StopProvider"
            );
        }
        r
    }

    async fn import_resource_state(
        &self,
        req: Request<pb::import_resource_state::Request>,
    ) -> Result<Response<pb::import_resource_state::Response>, Status> {
        type R = pb::import_resource_state::Response;
        let reg = self.registry.clone();
        guarded("ImportResourceState", async move {
            let req = req.into_inner();
            let (res, schema) = try_diag!(reg.resource(&req.type_name), R);
            let mut diags = Diagnostics::new();
            let Some(state) = res.import(&req.id, &mut diags).await else {
                return R::from_diagnostics(&diags);
            };
            let state = try_diag!(
                encode(&state, &schema.ty()).map_err(|e| codec_diag("imported state", &e)),
                R
            );
            R {
                imported_resources: vec![pb::import_resource_state::ImportedResource {
                    type_name: req.type_name,
                    state: Some(state),
                    ..Default::default()
                }],
                diagnostics: diagnostics(&diags),
                ..Default::default()
            }
        })
        .await
    }

    async fn move_resource_state(
        &self,
        req: Request<pb::move_resource_state::Request>,
    ) -> Result<Response<pb::move_resource_state::Response>, Status> {
        Ok(Response::new(
            pb::move_resource_state::Response::from_diagnostics(&not_supported(
                "Moving state between resource types",
                &req.into_inner().target_type_name,
            )),
        ))
    }

    async fn read_data_source(
        &self,
        req: Request<pb::read_data_source::Request>,
    ) -> Result<Response<pb::read_data_source::Response>, Status> {
        type R = pb::read_data_source::Response;
        let reg = self.registry.clone();
        guarded("ReadDataSource", async move {
            let req = req.into_inner();
            let (ds, schema) = try_diag!(reg.data_source(&req.type_name), R);
            let ty = schema.ty();
            let config = try_diag!(
                decode(req.config.as_ref(), &ty).map_err(|e| codec_diag("configuration", &e)),
                R
            );
            let mut diags = Diagnostics::new();
            let state = ds.read(&config, &mut diags).await;
            if diags.has_errors() {
                return R::from_diagnostics(&diags);
            }
            let state = try_diag!(
                encode(&state, &ty).map_err(|e| codec_diag("data source result", &e)),
                R
            );
            R {
                state: Some(state),
                diagnostics: diagnostics(&diags),
                ..Default::default()
            }
        })
        .await
    }

    async fn validate_ephemeral_resource_config(
        &self,
        req: Request<pb::validate_ephemeral_resource_config::Request>,
    ) -> Result<Response<pb::validate_ephemeral_resource_config::Response>, Status> {
        Ok(Response::new(WithDiagnostics::from_diagnostics(
            &not_supported("Ephemeral resources", &req.into_inner().type_name),
        )))
    }

    async fn open_ephemeral_resource(
        &self,
        req: Request<pb::open_ephemeral_resource::Request>,
    ) -> Result<Response<pb::open_ephemeral_resource::Response>, Status> {
        Ok(Response::new(WithDiagnostics::from_diagnostics(
            &not_supported("Ephemeral resources", &req.into_inner().type_name),
        )))
    }

    async fn renew_ephemeral_resource(
        &self,
        req: Request<pb::renew_ephemeral_resource::Request>,
    ) -> Result<Response<pb::renew_ephemeral_resource::Response>, Status> {
        Ok(Response::new(WithDiagnostics::from_diagnostics(
            &not_supported("Ephemeral resources", &req.into_inner().type_name),
        )))
    }

    async fn close_ephemeral_resource(
        &self,
        req: Request<pb::close_ephemeral_resource::Request>,
    ) -> Result<Response<pb::close_ephemeral_resource::Response>, Status> {
        Ok(Response::new(WithDiagnostics::from_diagnostics(
            &not_supported("Ephemeral resources", &req.into_inner().type_name),
        )))
    }

    async fn get_functions(
        &self,
        _: Request<pb::get_functions::Request>,
    ) -> Result<Response<pb::get_functions::Response>, Status> {
        Ok(Response::new(pb::get_functions::Response {
            functions: self.registry.schema_response.functions.clone(),
            diagnostics: Vec::new(),
        }))
    }

    async fn call_function(
        &self,
        req: Request<pb::call_function::Request>,
    ) -> Result<Response<pb::call_function::Response>, Status> {
        let reg = self.registry.clone();
        let handle = tokio::spawn(async move {
            let req = req.into_inner();
            // Terraform ends the sentence itself ("Invalid value for \"x\" parameter: <text>.").
            let fail = |argument: Option<usize>, text: String| pb::call_function::Response {
                result: None,
                error: Some(pb::FunctionError {
                    text: text.trim_end_matches('.').to_string(),
                    function_argument: argument.map(|a| a as i64),
                }),
            };
            let Some(f) = reg.functions.get(&req.name) else {
                return fail(
                    None,
                    format!("this provider has no function {:?}", req.name),
                );
            };
            let sig = f.signature();
            if req.arguments.len() != sig.parameters.len() {
                return fail(
                    None,
                    format!(
                        "expected {} arguments, got {}",
                        sig.parameters.len(),
                        req.arguments.len()
                    ),
                );
            }
            let mut args = Vec::with_capacity(sig.parameters.len());
            for (i, (dv, p)) in req.arguments.iter().zip(&sig.parameters).enumerate() {
                match decode(Some(dv), &p.ty) {
                    Ok(v) => args.push(v),
                    Err(e) => return fail(Some(i), format!("argument {:?}: {e}", p.name)),
                }
            }
            match f.call(&args).and_then(|v| {
                encode(&v, &sig.returns).map_err(|e| crate::api::FunctionError {
                    argument: None,
                    text: e.0,
                })
            }) {
                Ok(result) => pb::call_function::Response {
                    result: Some(result),
                    error: None,
                },
                Err(e) => fail(e.argument, e.text),
            }
        });
        Ok(Response::new(handle.await.unwrap_or_else(|e| {
            pb::call_function::Response {
                result: None,
                error: Some(pb::FunctionError {
                    text: panic_diagnostic("CallFunction", e).0.remove(0).detail,
                    function_argument: None,
                }),
            }
        })))
    }

    async fn stop_provider(
        &self,
        _: Request<pb::stop_provider::Request>,
    ) -> Result<Response<pb::stop_provider::Response>, Status> {
        let _ = self.stopped_at.set(Instant::now());
        self.registry.provider.stop();
        tracing::info!("StopProvider: every running operation stops waiting");
        Ok(Response::new(pb::stop_provider::Response::default()))
    }
}

fn not_supported(what: &str, type_name: &str) -> Diagnostics {
    Diagnostic::error(
        "Not supported",
        format!(
            "{what} are not supported by terraform-provider-fracgpu (requested for {type_name:?})."
        ),
    )
    .into()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::{Function, FunctionError, FunctionSignature, Parameter};
    use crate::schema::{Attribute, Block};
    use crate::{Type, msgpack};
    use async_trait::async_trait;
    use pb::provider_server::Provider as _;

    struct Echo;

    #[async_trait]
    impl Resource for Echo {
        fn type_name(&self) -> &'static str {
            "test_echo"
        }
        fn schema(&self) -> Schema {
            Schema::new(
                1,
                Block::new("")
                    .attr(Attribute::string("id").computed().use_state_for_unknown())
                    .attr(Attribute::string("name").required().requires_replace())
                    .attr(Attribute::number("count").optional())
                    .attr(Attribute::string("status").computed()),
            )
        }
        async fn create(
            &self,
            planned: &Value,
            private: &mut Private,
            _: &mut Diagnostics,
        ) -> Value {
            private.0 = b"made".to_vec();
            let mut v = planned.clone();
            *v.get_mut("id").unwrap() =
                Value::string(format!("id-{}", planned.get("name").as_str().unwrap()));
            *v.get_mut("status").unwrap() = "created".into();
            v
        }
        async fn read(&self, state: &Value, _: &mut Private, _: &mut Diagnostics) -> Option<Value> {
            (state.get("name").as_str() != Some("gone")).then(|| state.clone())
        }
        async fn update(
            &self,
            _: &Value,
            planned: &Value,
            _: &mut Private,
            _: &mut Diagnostics,
        ) -> Value {
            let mut v = planned.clone();
            *v.get_mut("status").unwrap() = "updated".into();
            v
        }
        async fn delete(&self, _: &Value, _: &Private, _: &mut Diagnostics) {}
        async fn import(&self, id: &str, _: &mut Diagnostics) -> Option<Value> {
            Some(Value::object([
                ("id", Value::string(id)),
                ("name", "imported".into()),
            ]))
        }
    }

    struct Boom;

    #[async_trait]
    impl DataSource for Boom {
        fn type_name(&self) -> &'static str {
            "test_boom"
        }
        fn schema(&self) -> Schema {
            Schema::new(0, Block::new("").attr(Attribute::string("x").optional()))
        }
        async fn read(&self, _: &Value, _: &mut Diagnostics) -> Value {
            panic!("kaboom")
        }
    }

    struct Twice;

    impl Function for Twice {
        fn name(&self) -> &'static str {
            "twice"
        }
        fn signature(&self) -> FunctionSignature {
            FunctionSignature {
                parameters: vec![Parameter {
                    name: "n",
                    ty: Type::Number,
                    description: "",
                }],
                returns: Type::Number,
                summary: "",
                description: "",
            }
        }
        fn call(&self, args: &[Value]) -> Result<Value, FunctionError> {
            match args[0].as_i64() {
                Some(n) if n >= 0 => Ok(Value::int(n * 2)),
                _ => Err(FunctionError {
                    argument: Some(0),
                    text: "n must be a non-negative integer".into(),
                }),
            }
        }
    }

    struct TestProvider;

    #[async_trait]
    impl Provider for TestProvider {
        fn type_name(&self) -> &'static str {
            "test"
        }
        fn schema(&self) -> Schema {
            Schema::new(0, Block::new(""))
        }
        async fn configure(&self, _: &str, _: &Value, _: &mut Diagnostics) {}
        fn data_sources(&self) -> Vec<Arc<dyn DataSource>> {
            vec![Arc::new(Boom)]
        }
        fn resources(&self) -> Vec<Arc<dyn Resource>> {
            vec![Arc::new(Echo)]
        }
        fn functions(&self) -> Vec<Arc<dyn Function>> {
            vec![Arc::new(Twice)]
        }
    }

    fn service() -> (ProviderService, Type) {
        let reg = Arc::new(Registry::new(Arc::new(TestProvider)));
        let ty = Echo.schema().ty();
        (ProviderService::new(reg), ty)
    }

    fn dv(v: &Value, ty: &Type) -> Option<pb::DynamicValue> {
        Some(encode(v, ty).unwrap())
    }

    fn val(d: &Option<pb::DynamicValue>, ty: &Type) -> Value {
        msgpack::decode(&d.as_ref().unwrap().msgpack, ty).unwrap_or(Value::Null)
    }

    fn cfg(name: &str, count: i64) -> Value {
        Value::object([
            ("id", Value::Null),
            ("name", name.into()),
            ("count", Value::int(count)),
            ("status", Value::Null),
        ])
    }

    #[tokio::test]
    async fn create_plan_apply_read_update_import() {
        let (svc, ty) = service();
        let config = cfg("a", 1);
        let plan = svc
            .plan_resource_change(Request::new(pb::plan_resource_change::Request {
                type_name: "test_echo".into(),
                prior_state: dv(&Value::Null, &ty),
                proposed_new_state: dv(&config, &ty),
                config: dv(&config, &ty),
                prior_private: b"private".to_vec(),
                ..Default::default()
            }))
            .await
            .unwrap()
            .into_inner();
        let planned = val(&plan.planned_state, &ty);
        assert_eq!(planned.get("id"), &Value::UNKNOWN);
        assert_eq!(planned.get("status"), &Value::UNKNOWN);
        assert_eq!(
            plan.planned_private, b"private",
            "planned_private passes through"
        );

        let applied = svc
            .apply_resource_change(Request::new(pb::apply_resource_change::Request {
                type_name: "test_echo".into(),
                prior_state: dv(&Value::Null, &ty),
                planned_state: plan.planned_state.clone(),
                config: dv(&config, &ty),
                planned_private: plan.planned_private.clone(),
                ..Default::default()
            }))
            .await
            .unwrap()
            .into_inner();
        let state = val(&applied.new_state, &ty);
        assert_eq!(state.get("id").as_str(), Some("id-a"));
        assert_eq!(
            applied.private, b"made",
            "the resource's private data goes back to terraform"
        );

        // Unchanged: the plan equals the state, nothing unknown.
        let plan = svc
            .plan_resource_change(Request::new(pb::plan_resource_change::Request {
                type_name: "test_echo".into(),
                prior_state: dv(&state, &ty),
                proposed_new_state: dv(&state, &ty),
                config: dv(&config, &ty),
                ..Default::default()
            }))
            .await
            .unwrap()
            .into_inner();
        assert_eq!(val(&plan.planned_state, &ty), state);
        assert!(plan.requires_replace.is_empty());

        // A new name forces replacement; the path names the attribute.
        let mut proposed = state.clone();
        *proposed.get_mut("name").unwrap() = "b".into();
        let plan = svc
            .plan_resource_change(Request::new(pb::plan_resource_change::Request {
                type_name: "test_echo".into(),
                prior_state: dv(&state, &ty),
                proposed_new_state: dv(&proposed, &ty),
                config: dv(&cfg("b", 1), &ty),
                ..Default::default()
            }))
            .await
            .unwrap()
            .into_inner();
        assert_eq!(
            plan.requires_replace,
            vec![convert::path(&AttrPath::attr("name"))]
        );
        let planned = val(&plan.planned_state, &ty);
        assert_eq!(
            planned.get("id").as_str(),
            Some("id-a"),
            "use_state_for_unknown keeps the id"
        );
        assert_eq!(planned.get("status"), &Value::UNKNOWN);

        // A vanished object reads as null.
        let mut gone = state.clone();
        *gone.get_mut("name").unwrap() = "gone".into();
        let read = svc
            .read_resource(Request::new(pb::read_resource::Request {
                type_name: "test_echo".into(),
                current_state: dv(&gone, &ty),
                ..Default::default()
            }))
            .await
            .unwrap()
            .into_inner();
        assert!(read.new_state.unwrap().msgpack.is_empty());

        let imported = svc
            .import_resource_state(Request::new(pb::import_resource_state::Request {
                type_name: "test_echo".into(),
                id: "xyz".into(),
                ..Default::default()
            }))
            .await
            .unwrap()
            .into_inner();
        assert_eq!(
            val(&imported.imported_resources[0].state, &ty)
                .get("id")
                .as_str(),
            Some("xyz")
        );
    }

    #[tokio::test]
    async fn state_from_json_is_upgraded_to_msgpack() {
        let (svc, ty) = service();
        let r = svc
            .upgrade_resource_state(Request::new(pb::upgrade_resource_state::Request {
                type_name: "test_echo".into(),
                version: 0,
                raw_state: Some(pb::RawState {
                    json: br#"{"id":"i","name":"n","count":12345678901234567890,"status":"ok"}"#
                        .to_vec(),
                    flatmap: Default::default(),
                }),
            }))
            .await
            .unwrap()
            .into_inner();
        let v = val(&r.upgraded_state, &ty);
        assert_eq!(
            v.get("count").as_number().unwrap().to_decimal(),
            "12345678901234567890"
        );
        let newer = svc
            .upgrade_resource_state(Request::new(pb::upgrade_resource_state::Request {
                type_name: "test_echo".into(),
                version: 9,
                raw_state: None,
            }))
            .await
            .unwrap()
            .into_inner();
        assert!(newer.diagnostics[0].detail.contains("newer"));
    }

    #[tokio::test]
    async fn a_panicking_handler_becomes_an_error_diagnostic() {
        let (svc, _) = service();
        let ty = Boom.schema().ty();
        let r = svc
            .read_data_source(Request::new(pb::read_data_source::Request {
                type_name: "test_boom".into(),
                config: dv(&Value::object([("x", Value::Null)]), &ty),
                ..Default::default()
            }))
            .await
            .unwrap()
            .into_inner();
        assert_eq!(r.diagnostics.len(), 1);
        assert_eq!(r.diagnostics[0].summary, "Provider internal error");
        assert!(r.diagnostics[0].detail.contains("kaboom"));
        // The service keeps working afterwards.
        assert!(
            svc.get_metadata(Request::new(pb::get_metadata::Request {}))
                .await
                .is_ok()
        );
    }

    #[tokio::test]
    async fn function_errors_name_the_argument() {
        let (svc, _) = service();
        let call = |n: i64| pb::call_function::Request {
            name: "twice".into(),
            arguments: vec![encode(&Value::int(n), &Type::Number).unwrap()],
        };
        let ok = svc
            .call_function(Request::new(call(21)))
            .await
            .unwrap()
            .into_inner();
        assert_eq!(
            msgpack::decode(&ok.result.unwrap().msgpack, &Type::Number).unwrap(),
            Value::int(42)
        );
        let bad = svc
            .call_function(Request::new(call(-1)))
            .await
            .unwrap()
            .into_inner();
        assert_eq!(bad.error.unwrap().function_argument, Some(0));
    }
}
