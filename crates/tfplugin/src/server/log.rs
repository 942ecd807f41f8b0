//! Logs in the line format terraform reads from a plugin's stderr: one JSON object per line with
//! `@level`, `@message`, `@module` and `@timestamp` (microseconds, UTC), the other keys being the
//! event's fields. go-plugin re-logs each such line at its level under the provider's name, so
//! `TF_LOG=debug` shows our lines as `[DEBUG] provider.terraform-provider-<type>...` and
//! `TF_LOG_PROVIDER` selects them alone.
//!
//! The level is read here too, as terraform passes its environment to the plugin:
//! `TF_LOG_PROVIDER`, else `TF_LOG` (`trace`, `debug`, `info`, `warn`, `error`, `off`; `json` and
//! unknown words mean trace, as in terraform). Events of this crate are logged at that level.
//! Events of the libraries underneath (HTTP, TLS, SDKs) pass at warn and error only: some of them
//! trace request headers and signing material, and nothing that carries a credential may reach a
//! log.
//!
//! tracing-subscriber's own JSON formatter names its keys differently (`level`, `fields.message`)
//! and terraform would show such lines as unparsed debug text, hence this small layer on its
//! registry.

use std::fmt::Write as _;
use std::io::Write as _;

use tracing::field::{Field, Visit};
use tracing::{Event, Level, Metadata, Subscriber};
use tracing_subscriber::Layer;
use tracing_subscriber::layer::{Context, SubscriberExt};

/// The most verbose level of this crate's events; `None` is off.
fn level_from_env(provider: Option<&str>, tf_log: Option<&str>) -> Option<Level> {
    let word = [provider, tf_log]
        .into_iter()
        .flatten()
        .map(str::trim)
        .find(|w| !w.is_empty())?;
    match word.to_ascii_lowercase().as_str() {
        "off" => None,
        "error" => Some(Level::ERROR),
        "warn" => Some(Level::WARN),
        "info" => Some(Level::INFO),
        "debug" => Some(Level::DEBUG),
        _ => Some(Level::TRACE),
    }
}

/// Writes hclog-format JSON lines to a sink (stderr in the plugin).
struct HclogLayer<W> {
    own: Option<Level>,
    /// Target prefixes (crate names) of the provider's own code, logged at `own`; everything
    /// else (the crates underneath) at warn and above only, since some of them trace headers
    /// and signing material.
    own_targets: &'static [&'static str],
    sink: W,
}

/// Where lines go; each line is written whole under the sink's lock.
trait LineSink: Send + Sync + 'static {
    fn line(&self, line: &str);
}

struct Stderr;

impl LineSink for Stderr {
    fn line(&self, line: &str) {
        let _ = std::io::stderr().lock().write_all(line.as_bytes());
    }
}

impl<W: LineSink> HclogLayer<W> {
    fn new(own: Option<Level>, own_targets: &'static [&'static str], sink: W) -> HclogLayer<W> {
        HclogLayer {
            own,
            own_targets,
            sink,
        }
    }

    fn wants(&self, meta: &Metadata<'_>) -> bool {
        let target = meta.target();
        let ours = self.own_targets.iter().any(|t| {
            target
                .strip_prefix(t)
                .is_some_and(|rest| rest.is_empty() || rest.starts_with("::"))
        });
        // A level is "enabled" when it is at most as verbose as the limit (ERROR < WARN < ... in
        // verbosity, and tracing orders ERROR as the smallest).
        let limit = if ours {
            self.own
        } else {
            self.own.map(|l| l.min(Level::WARN))
        };
        limit.is_some_and(|l| *meta.level() <= l)
    }
}

/// The event's fields as JSON members, with `message` set apart.
#[derive(Default)]
struct Fields {
    message: String,
    members: serde_json::Map<String, serde_json::Value>,
}

impl Visit for Fields {
    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "message" {
            self.message = value.to_string();
        } else {
            self.members.insert(field.name().into(), value.into());
        }
    }
    fn record_i64(&mut self, field: &Field, value: i64) {
        self.members.insert(field.name().into(), value.into());
    }
    fn record_u64(&mut self, field: &Field, value: u64) {
        self.members.insert(field.name().into(), value.into());
    }
    fn record_f64(&mut self, field: &Field, value: f64) {
        self.members.insert(field.name().into(), value.into());
    }
    fn record_bool(&mut self, field: &Field, value: bool) {
        self.members.insert(field.name().into(), value.into());
    }
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            self.message = format!("{value:?}");
        } else {
            self.members
                .insert(field.name().into(), format!("{value:?}").into());
        }
    }
}

/// hclog's timestamp layout: `2006-01-02T15:04:05.000000Z07:00`, always UTC here. go-plugin
/// drops a line whose timestamp does not parse in exactly this layout back to raw debug text.
fn timestamp(t: time::OffsetDateTime) -> String {
    let t = t.to_offset(time::UtcOffset::UTC);
    let mut s = String::with_capacity(27);
    let _ = write!(
        s,
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:06}Z",
        t.year(),
        u8::from(t.month()),
        t.day(),
        t.hour(),
        t.minute(),
        t.second(),
        t.microsecond()
    );
    s
}

fn level_word(level: &Level) -> &'static str {
    match *level {
        Level::ERROR => "error",
        Level::WARN => "warn",
        Level::INFO => "info",
        Level::DEBUG => "debug",
        Level::TRACE => "trace",
    }
}

/// One log line (with its newline) for an event.
fn render(
    meta: &Metadata<'_>,
    message: &str,
    members: &serde_json::Map<String, serde_json::Value>,
    now: time::OffsetDateTime,
) -> String {
    let mut obj = serde_json::Map::with_capacity(members.len() + 4);
    obj.insert("@level".into(), level_word(meta.level()).into());
    obj.insert("@message".into(), message.into());
    obj.insert("@module".into(), meta.target().replace("::", ".").into());
    obj.insert("@timestamp".into(), timestamp(now).into());
    for (k, v) in members {
        // A field may not shadow the line's own keys.
        if !k.starts_with('@') {
            obj.insert(k.clone(), v.clone());
        }
    }
    let mut line = serde_json::Value::Object(obj).to_string();
    line.push('\n');
    line
}

impl<S: Subscriber, W: LineSink> Layer<S> for HclogLayer<W> {
    fn enabled(&self, meta: &Metadata<'_>, _ctx: Context<'_, S>) -> bool {
        self.wants(meta)
    }

    fn on_event(&self, event: &Event<'_>, _ctx: Context<'_, S>) {
        let meta = event.metadata();
        if !self.wants(meta) {
            return;
        }
        let mut fields = Fields::default();
        event.record(&mut fields);
        self.sink.line(&render(
            meta,
            &fields.message,
            &fields.members,
            time::OffsetDateTime::now_utc(),
        ));
    }
}

/// Installs the stderr logger for the whole plugin process, its level from the environment;
/// `own_targets` are the crates whose lines follow TF_LOG_PROVIDER / TF_LOG, e.g. the provider's
/// crates and "tfplugin".
pub fn init(own_targets: &'static [&'static str]) {
    let level = level_from_env(
        std::env::var("TF_LOG_PROVIDER").ok().as_deref(),
        std::env::var("TF_LOG").ok().as_deref(),
    )
    // Warnings and errors always go out: terraform shows them only when its own log is on.
    .or(Some(Level::WARN));
    let subscriber =
        tracing_subscriber::registry().with(HclogLayer::new(level, own_targets, Stderr));
    let _ = tracing::subscriber::set_global_default(subscriber);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn level_prefers_the_provider_variable_and_follows_terraform_words() {
        assert_eq!(
            level_from_env(Some("info"), Some("trace")),
            Some(Level::INFO)
        );
        assert_eq!(level_from_env(None, Some("DEBUG")), Some(Level::DEBUG));
        assert_eq!(level_from_env(Some(""), Some("warn")), Some(Level::WARN));
        assert_eq!(level_from_env(None, Some("json")), Some(Level::TRACE));
        assert_eq!(level_from_env(Some("off"), Some("trace")), None);
        assert_eq!(level_from_env(None, None), None);
    }

    #[test]
    fn timestamps_have_six_fraction_digits_and_z() {
        let t = time::OffsetDateTime::from_unix_timestamp_nanos(1_795_000_000_123_456_789).unwrap();
        assert_eq!(timestamp(t), "2026-11-18T11:06:40.123456Z");
    }
}
