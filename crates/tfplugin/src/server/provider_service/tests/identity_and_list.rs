//! Resource identity and list resources, through the service as terraform calls it.

use std::collections::HashMap;
use std::sync::Mutex;

use tokio_stream::StreamExt;

use super::*;
use crate::api::ListItem;
use crate::api::ListSink;
use crate::validators::IntBetween;

/// How many items each list (by its prefix) handed to its sink, to see where a list stopped.
static SENT: Mutex<Option<HashMap<String, usize>>> = Mutex::new(None);

fn sent(prefix: &str) -> usize {
    SENT.lock()
        .unwrap()
        .as_ref()
        .and_then(|m| m.get(prefix).copied())
        .unwrap_or(0)
}

/// Lists `count` echoes named `<prefix>-<i>`; the prefix `fail` fails after one item, `panic`
/// panics, and `warn` adds a warning.
pub(super) struct Echoes;

#[async_trait]
impl ListResource for Echoes {
    fn type_name(&self) -> &'static str {
        "test_echo"
    }
    fn schema(&self) -> Schema {
        Schema::new(
            0,
            Block::new("")
                .attr(Attribute::string("prefix").required())
                .attr(
                    Attribute::number("count")
                        .optional()
                        .validate(IntBetween(0, 100)),
                ),
        )
    }
    fn validate(&self, config: &Value, diags: &mut Diagnostics) {
        if config.get("prefix").as_str() == Some("") {
            diags.push(
                crate::Diagnostic::error("Empty prefix", "Set `prefix`.")
                    .at(AttrPath::attr("prefix")),
            );
        }
    }
    async fn list(&self, config: &Value, sink: &mut ListSink, diags: &mut Diagnostics) {
        let prefix = config
            .get("prefix")
            .as_str()
            .unwrap_or_default()
            .to_string();
        let count = config.get("count").as_i64().unwrap_or(3);
        if prefix == "panic" {
            panic!("list exploded");
        }
        for i in 0..count {
            if !sink.wants_more() {
                return;
            }
            let name = format!("{prefix}-{i}");
            let item = ListItem {
                identity: Value::object([("name", name.as_str().into())]),
                display_name: format!("echo {name}"),
                resource: sink.include_resource().then(|| {
                    Value::object([
                        ("id", Value::string(format!("id-{name}"))),
                        ("name", name.as_str().into()),
                        ("count", Value::Null),
                        ("status", "listed".into()),
                    ])
                }),
            };
            let more = sink.send(item).await;
            *SENT
                .lock()
                .unwrap()
                .get_or_insert_with(HashMap::new)
                .entry(prefix.clone())
                .or_default() += 1;
            if prefix == "fail" {
                diags.push(crate::Diagnostic::error("Cloud refused", "no more"));
                return;
            }
            if !more {
                return;
            }
        }
        if prefix == "warn" {
            diags.push(crate::Diagnostic::warning("Partial", "some were skipped"));
        }
    }
}

fn id_ty() -> Type {
    Type::Object([("name".to_string(), Type::String)].into_iter().collect())
}

fn list_cfg(prefix: &str, count: i64) -> Value {
    Value::object([("prefix", prefix.into()), ("count", Value::int(count))])
}

fn list_ty() -> Type {
    Echoes.schema().ty()
}

async fn list(
    svc: &ProviderService,
    config: &Value,
    include: bool,
    limit: i64,
) -> Vec<pb::list_resource::Event> {
    let stream = svc
        .list_resource(Request::new(pb::list_resource::Request {
            type_name: "test_echo".into(),
            config: dv(config, &list_ty()),
            include_resource_object: include,
            limit,
        }))
        .await
        .unwrap()
        .into_inner();
    stream.map(|e| e.unwrap()).collect().await
}

#[tokio::test]
async fn the_identity_schema_is_declared_and_each_answer_carries_the_identity() {
    let (svc, ty) = service();
    let schemas = svc
        .get_resource_identity_schemas(Request::new(Default::default()))
        .await
        .unwrap()
        .into_inner();
    let echo = &schemas.identity_schemas["test_echo"];
    assert_eq!(echo.identity_attributes.len(), 1);
    assert_eq!(echo.identity_attributes[0].name, "name");
    assert_eq!(echo.identity_attributes[0].r#type, b"\"string\"");
    assert!(echo.identity_attributes[0].required_for_import);

    // A create plan whose name is unknown carries no identity; one whose name is known does.
    let mut unknown = cfg("a", 1);
    *unknown.get_mut("name").unwrap() = Value::UNKNOWN;
    for (config, expected) in [(unknown, None), (cfg("a", 1), Some("a"))] {
        let plan = svc
            .plan_resource_change(Request::new(pb::plan_resource_change::Request {
                type_name: "test_echo".into(),
                prior_state: dv(&Value::Null, &ty),
                proposed_new_state: dv(&config, &ty),
                config: dv(&config, &ty),
                ..Default::default()
            }))
            .await
            .unwrap()
            .into_inner();
        let got = plan
            .planned_identity
            .map(|i| val(&i.identity_data, &id_ty()));
        assert_eq!(
            got.as_ref().map(|v| v.get("name").as_str().unwrap()),
            expected
        );
    }

    let applied = svc
        .apply_resource_change(Request::new(pb::apply_resource_change::Request {
            type_name: "test_echo".into(),
            prior_state: dv(&Value::Null, &ty),
            planned_state: dv(&cfg("a", 1), &ty),
            config: dv(&cfg("a", 1), &ty),
            ..Default::default()
        }))
        .await
        .unwrap()
        .into_inner();
    let identity = val(&applied.new_identity.unwrap().identity_data, &id_ty());
    assert_eq!(identity, Value::object([("name", "a".into())]));

    let state = val(&applied.new_state, &ty);
    let read = svc
        .read_resource(Request::new(pb::read_resource::Request {
            type_name: "test_echo".into(),
            current_state: dv(&state, &ty),
            ..Default::default()
        }))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        val(&read.new_identity.unwrap().identity_data, &id_ty()),
        identity
    );

    // A destroy plan keeps the identity terraform holds.
    let prior_identity = Some(pb::ResourceIdentityData {
        identity_data: dv(&identity, &id_ty()),
    });
    let destroy = svc
        .plan_resource_change(Request::new(pb::plan_resource_change::Request {
            type_name: "test_echo".into(),
            prior_state: dv(&state, &ty),
            proposed_new_state: dv(&Value::Null, &ty),
            config: dv(&Value::Null, &ty),
            prior_identity: prior_identity.clone(),
            ..Default::default()
        }))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(destroy.planned_identity, prior_identity);

    // A vanished object has no identity.
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
    assert!(read.new_identity.is_none());
}

#[tokio::test]
async fn import_by_identity_and_by_id() {
    let (svc, ty) = service();
    let by_identity = svc
        .import_resource_state(Request::new(pb::import_resource_state::Request {
            type_name: "test_echo".into(),
            identity: Some(pb::ResourceIdentityData {
                identity_data: dv(&Value::object([("name", "b".into())]), &id_ty()),
            }),
            ..Default::default()
        }))
        .await
        .unwrap()
        .into_inner();
    assert!(
        by_identity.diagnostics.is_empty(),
        "{:?}",
        by_identity.diagnostics
    );
    let imported = &by_identity.imported_resources[0];
    assert_eq!(val(&imported.state, &ty).get("id").as_str(), Some("id-b"));
    // Terraform refuses an import by identity that returns none.
    let identity = val(&imported.identity.as_ref().unwrap().identity_data, &id_ty());
    assert_eq!(identity.get("name").as_str(), Some("b"));

    let by_id = svc
        .import_resource_state(Request::new(pb::import_resource_state::Request {
            type_name: "test_echo".into(),
            id: "xyz".into(),
            ..Default::default()
        }))
        .await
        .unwrap()
        .into_inner();
    let imported = &by_id.imported_resources[0];
    assert_eq!(val(&imported.state, &ty).get("id").as_str(), Some("xyz"));
    assert_eq!(
        val(&imported.identity.as_ref().unwrap().identity_data, &id_ty())
            .get("name")
            .as_str(),
        Some("imported")
    );
}

#[tokio::test]
async fn stored_identities_are_upgraded_from_json_and_newer_ones_refused() {
    let (svc, _) = service();
    let upgrade = |version: i64| pb::upgrade_resource_identity::Request {
        type_name: "test_echo".into(),
        version,
        raw_identity: Some(pb::RawState {
            json: br#"{"name":"n"}"#.to_vec(),
            flatmap: Default::default(),
        }),
    };
    let r = svc
        .upgrade_resource_identity(Request::new(upgrade(0)))
        .await
        .unwrap()
        .into_inner();
    assert!(r.diagnostics.is_empty());
    assert_eq!(
        val(&r.upgraded_identity.unwrap().identity_data, &id_ty()),
        Value::object([("name", "n".into())])
    );
    let newer = svc
        .upgrade_resource_identity(Request::new(upgrade(3)))
        .await
        .unwrap()
        .into_inner();
    assert!(newer.upgraded_identity.is_none());
    assert!(newer.diagnostics[0].detail.contains("newer"));
}

#[tokio::test]
async fn list_resources_are_declared_with_their_schema() {
    let (svc, _) = service();
    let meta = svc
        .get_metadata(Request::new(Default::default()))
        .await
        .unwrap()
        .into_inner();
    let names: Vec<_> = meta
        .list_resources
        .iter()
        .map(|l| l.type_name.as_str())
        .collect();
    assert_eq!(names, ["test_echo"]);
    let schema = svc
        .get_provider_schema(Request::new(Default::default()))
        .await
        .unwrap()
        .into_inner();
    let block = schema.list_resource_schemas["test_echo"]
        .block
        .as_ref()
        .unwrap();
    let attrs: Vec<_> = block.attributes.iter().map(|a| a.name.as_str()).collect();
    assert_eq!(attrs, ["prefix", "count"]);
}

#[tokio::test]
async fn a_list_streams_its_items_with_identity_and_resource_when_asked() {
    let (svc, ty) = service();
    let events = list(&svc, &list_cfg("plain", 3), false, 100).await;
    assert_eq!(events.len(), 3);
    for (i, e) in events.iter().enumerate() {
        assert_eq!(e.display_name, format!("echo plain-{i}"));
        let identity = val(&e.identity.as_ref().unwrap().identity_data, &id_ty());
        assert_eq!(
            identity.get("name").as_str(),
            Some(format!("plain-{i}").as_str())
        );
        assert!(e.resource_object.is_none(), "not asked for");
        assert!(e.diagnostic.is_empty());
    }
    let events = list(&svc, &list_cfg("full", 2), true, 100).await;
    let state = val(&events[1].resource_object, &ty);
    assert_eq!(state.get("status").as_str(), Some("listed"));
    assert_eq!(state.get("id").as_str(), Some("id-full-1"));
}

#[tokio::test]
async fn a_list_stops_at_the_limit() {
    let (svc, _) = service();
    let events = list(&svc, &list_cfg("limited", 50), false, 4).await;
    assert_eq!(events.len(), 4);
    assert_eq!(
        sent("limited"),
        4,
        "the list resource stops looking once terraform has what it asked for"
    );
    let none = list(&svc, &list_cfg("zero", 5), false, 0).await;
    assert!(none.is_empty());
    assert_eq!(sent("zero"), 0);
}

#[tokio::test]
async fn list_diagnostics_travel_in_a_last_event() {
    let (svc, _) = service();
    let events = list(&svc, &list_cfg("warn", 2), false, 100).await;
    assert_eq!(events.len(), 3);
    let last = events.last().unwrap();
    assert!(last.identity.is_none());
    assert_eq!(last.diagnostic[0].summary, "Partial");
    assert_eq!(
        last.diagnostic[0].severity,
        pb::diagnostic::Severity::Warning as i32
    );

    let events = list(&svc, &list_cfg("fail", 5), false, 100).await;
    assert_eq!(events.len(), 2, "one item, then the error");
    assert_eq!(events[1].diagnostic[0].summary, "Cloud refused");
    assert_eq!(
        events[1].diagnostic[0].severity,
        pb::diagnostic::Severity::Error as i32
    );

    let events = list(&svc, &list_cfg("panic", 5), false, 100).await;
    assert_eq!(events.len(), 1);
    assert_eq!(events[0].diagnostic[0].summary, "Provider internal error");
    assert!(events[0].diagnostic[0].detail.contains("list exploded"));
}

#[tokio::test]
async fn list_configs_are_validated_and_unknown_types_named() {
    let (svc, _) = service();
    let validate = |config: Value, type_name: &str| pb::validate_list_resource_config::Request {
        type_name: type_name.into(),
        config: dv(&config, &list_ty()),
        ..Default::default()
    };
    let ok = svc
        .validate_list_resource_config(Request::new(validate(list_cfg("p", 3), "test_echo")))
        .await
        .unwrap()
        .into_inner();
    assert!(ok.diagnostics.is_empty());
    let bad = svc
        .validate_list_resource_config(Request::new(validate(list_cfg("", 500), "test_echo")))
        .await
        .unwrap()
        .into_inner();
    let paths: Vec<String> = bad
        .diagnostics
        .iter()
        .map(|d| format!("{:?}", d.attribute))
        .collect();
    assert_eq!(bad.diagnostics.len(), 2, "{paths:?}");
    // Under the `config` block terraform wraps the schema in.
    let config_then = |attr: &str| {
        bad.diagnostics.iter().any(|d| {
            d.attribute.as_ref().map(|a| {
                a.steps
                    .iter()
                    .map(|s| format!("{:?}", s.selector))
                    .collect::<Vec<_>>()
            }) == Some(vec![
                format!(
                    "{:?}",
                    Some(pb::attribute_path::step::Selector::AttributeName(
                        "config".into()
                    ))
                ),
                format!(
                    "{:?}",
                    Some(pb::attribute_path::step::Selector::AttributeName(
                        attr.into()
                    ))
                ),
            ])
        })
    };
    assert!(config_then("count"), "{paths:?}");
    assert!(config_then("prefix"), "{paths:?}");

    let unknown = svc
        .validate_list_resource_config(Request::new(validate(list_cfg("p", 1), "test_nope")))
        .await
        .unwrap()
        .into_inner();
    assert!(unknown.diagnostics[0].detail.contains("test_echo"));
    let events = list_named(&svc, "test_nope").await;
    assert_eq!(
        events[0].diagnostic[0].summary,
        "Unknown list resource type"
    );
}

async fn list_named(svc: &ProviderService, type_name: &str) -> Vec<pb::list_resource::Event> {
    let stream = svc
        .list_resource(Request::new(pb::list_resource::Request {
            type_name: type_name.into(),
            config: dv(&list_cfg("p", 1), &list_ty()),
            include_resource_object: false,
            limit: 10,
        }))
        .await
        .unwrap()
        .into_inner();
    stream.map(|e| e.unwrap()).collect().await
}
