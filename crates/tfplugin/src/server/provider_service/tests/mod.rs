mod actions;
mod identity_and_list;

use super::*;
use crate::api::{
    DataSource, Function, FunctionError, FunctionSignature, IdentityAttribute, IdentitySchema,
    ListResource, Parameter, Private, Provider, Resource,
};
use crate::schema::{Attribute, Block, Schema};
use crate::server::convert::{self, encode};
use crate::{AttrPath, Diagnostics, Type, Value, msgpack};
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
    async fn create(&self, planned: &Value, private: &mut Private, _: &mut Diagnostics) -> Value {
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
    fn identity_schema(&self) -> Option<IdentitySchema> {
        Some(IdentitySchema {
            version: 0,
            attributes: vec![IdentityAttribute {
                name: "name",
                ty: Type::String,
                required_for_import: true,
                optional_for_import: false,
                description: "The name.",
            }],
        })
    }
    fn identity(&self, state: &Value) -> Option<Value> {
        Some(Value::object([("name", state.get("name").clone())]))
    }
    async fn import_identity(&self, identity: &Value, _: &mut Diagnostics) -> Option<Value> {
        let name = identity.get("name").as_str()?;
        Some(Value::object([
            ("id", Value::string(format!("id-{name}"))),
            ("name", name.into()),
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
    fn list_resources(&self) -> Vec<Arc<dyn ListResource>> {
        vec![Arc::new(identity_and_list::Echoes)]
    }
    fn actions(&self) -> Vec<Arc<dyn crate::api::Action>> {
        vec![Arc::new(actions::Countdown)]
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
