//! Actions through the service as terraform calls them: declared in the schema and metadata,
//! validated with attribute paths, planned, and invoked as a stream of progress that always ends
//! with one Completed event, which carries the action's errors and panics.

use tokio_stream::StreamExt;

use super::*;
use crate::api::{Action, Progress};
use crate::validators::IntBetween;

/// Counts down from `from`, one Progress event per step; `from = 13` fails at 1 naming the step,
/// `from = 99` panics, and planning refuses `from = 0`.
pub(super) struct Countdown;

#[async_trait]
impl Action for Countdown {
    fn type_name(&self) -> &'static str {
        "test_countdown"
    }
    fn schema(&self) -> Schema {
        Schema::new(
            0,
            Block::new("").attr(
                Attribute::number("from")
                    .required()
                    .validate(IntBetween(0, 100)),
            ),
        )
    }
    async fn plan(&self, config: &Value, diags: &mut Diagnostics) {
        if config.get("from").as_i64() == Some(0) {
            diags.push(
                crate::Diagnostic::error("Nothing to count", "from must be at least 1.")
                    .at(AttrPath::attr("from")),
            );
        }
    }
    async fn invoke(&self, config: &Value, progress: &Progress, diags: &mut Diagnostics) {
        let from = config.get("from").as_i64().unwrap_or(0);
        if from == 99 {
            panic!("countdown exploded");
        }
        for i in (1..=from).rev() {
            if from == 13 && i == 1 {
                diags.push(crate::Diagnostic::error("Countdown failed", "step 1 broke"));
                return;
            }
            if !progress.send(format!("{i} left")).await {
                return;
            }
        }
    }
}

fn ty() -> Type {
    Countdown.schema().ty()
}

fn cfg(from: i64) -> Option<pb::DynamicValue> {
    dv(&Value::object([("from", Value::int(from))]), &ty())
}

async fn invoke(svc: &ProviderService, from: i64) -> Vec<pb::invoke_action::event::Type> {
    svc.invoke_action(Request::new(pb::invoke_action::Request {
        action_type: "test_countdown".into(),
        config: cfg(from),
        client_capabilities: None,
    }))
    .await
    .unwrap()
    .into_inner()
    .map(|e| e.unwrap().r#type.unwrap())
    .collect()
    .await
}

#[tokio::test]
async fn actions_are_declared_in_schema_and_metadata() {
    let (svc, _) = service();
    let schema = svc
        .get_provider_schema(Request::new(pb::get_provider_schema::Request {}))
        .await
        .unwrap()
        .into_inner();
    let action = &schema.action_schemas["test_countdown"];
    let block = action.schema.as_ref().unwrap().block.as_ref().unwrap();
    assert_eq!(block.attributes[0].name, "from");
    let meta = svc
        .get_metadata(Request::new(pb::get_metadata::Request {}))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(meta.actions[0].type_name, "test_countdown");
}

#[tokio::test]
async fn configs_are_validated_and_planned_with_paths() {
    let (svc, _) = service();
    let bad = svc
        .validate_action_config(Request::new(pb::validate_action_config::Request {
            action_type: "test_countdown".into(),
            config: cfg(500),
        }))
        .await
        .unwrap()
        .into_inner();
    let d = &bad.diagnostics[0];
    assert_eq!(d.severity, pb::diagnostic::Severity::Error as i32);
    let step = &d.attribute.as_ref().unwrap().steps[0];
    assert_eq!(
        step.selector,
        Some(pb::attribute_path::step::Selector::AttributeName(
            "from".into()
        ))
    );
    let planned = svc
        .plan_action(Request::new(pb::plan_action::Request {
            action_type: "test_countdown".into(),
            config: cfg(0),
            client_capabilities: None,
        }))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(planned.diagnostics[0].summary, "Nothing to count");
    assert!(planned.deferred.is_none());
    let unknown = svc
        .plan_action(Request::new(pb::plan_action::Request {
            action_type: "test_nothing".into(),
            config: cfg(1),
            client_capabilities: None,
        }))
        .await
        .unwrap()
        .into_inner();
    assert!(
        unknown.diagnostics[0].detail.contains("test_countdown"),
        "{:?}",
        unknown.diagnostics
    );
}

#[tokio::test]
async fn an_invoke_streams_progress_then_one_completed() {
    use pb::invoke_action::event::Type;
    let (svc, _) = service();
    let events = invoke(&svc, 3).await;
    let progress: Vec<_> = events
        .iter()
        .filter_map(|e| match e {
            Type::Progress(p) => Some(p.message.as_str()),
            Type::Completed(_) => None,
        })
        .collect();
    assert_eq!(progress, ["3 left", "2 left", "1 left"]);
    match events.last().unwrap() {
        Type::Completed(c) => assert!(c.diagnostics.is_empty()),
        other => panic!("last event {other:?}"),
    }
    assert_eq!(events.len(), 4);
}

#[tokio::test]
async fn errors_and_panics_end_in_the_completed_event() {
    use pb::invoke_action::event::Type;
    let (svc, _) = service();
    let failed = invoke(&svc, 13).await;
    assert_eq!(failed.len(), 13, "12 steps, then Completed");
    let Type::Completed(c) = failed.last().unwrap() else {
        panic!("no Completed")
    };
    assert_eq!(c.diagnostics[0].summary, "Countdown failed");
    let panicked = invoke(&svc, 99).await;
    let [Type::Completed(c)] = panicked.as_slice() else {
        panic!("{panicked:?}")
    };
    assert!(c.diagnostics[0].detail.contains("countdown exploded"));
}
