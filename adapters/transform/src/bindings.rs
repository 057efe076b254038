//! The `$` variables of each stage, as engine bindings. Each stage binds exactly the variables its
//! row of the variable table lists; an unbound variable reads as undefined in the expression.

use queuebox_domain::timestamp::iso_utc_millis;
use queuebox_jsonata::Bindings;
use queuebox_ports::transform::{
    AdminTestContext, DeliveryContext, SourceContext, TransformContext,
};
use serde_json::Value;

/// The bindings of `context`'s stage.
pub(crate) fn of(context: &TransformContext) -> Bindings {
    match context {
        TransformContext::Source(c) => source(c),
        TransformContext::Delivery(c) => delivery(c),
        TransformContext::AdminTest(c) => admin_test(c),
    }
}

fn source(c: &SourceContext) -> Bindings {
    let mut b = common(
        &c.message_id,
        c.event_type.as_deref().unwrap_or(""),
        0,
        c.received_at,
    );
    b.insert("source".into(), Value::String(c.source.clone()));
    let mut headers = serde_json::Map::with_capacity(c.headers.len());
    for (name, value) in &c.headers {
        // One value per name: the first one received wins.
        if !headers.contains_key(name) {
            headers.insert(name.clone(), Value::String(value.clone()));
        }
    }
    b.insert("headers".into(), Value::Object(headers));
    b.insert("idempotencyKey".into(), text_or_null(&c.idempotency_key));
    b.insert("eventType".into(), text_or_null(&c.event_type));
    b
}

fn delivery(c: &DeliveryContext) -> Bindings {
    common(&c.message_id, &c.topic, c.attempt, c.created_at)
}

fn admin_test(c: &AdminTestContext) -> Bindings {
    let mut b = common(&c.message_id, &c.topic, 0, c.timestamp);
    if let Some(source) = &c.source {
        b.insert("source".into(), Value::String(source.clone()));
    }
    b
}

fn common(
    message_id: &uuid::Uuid,
    topic: &str,
    attempt: i32,
    timestamp: std::time::SystemTime,
) -> Bindings {
    let mut b = Bindings::new();
    b.insert("messageId".into(), Value::String(message_id.to_string()));
    b.insert("topic".into(), Value::String(topic.to_owned()));
    b.insert("attempt".into(), Value::from(attempt));
    b.insert("timestamp".into(), Value::String(iso_utc_millis(timestamp)));
    b
}

fn text_or_null(value: &Option<String>) -> Value {
    value.clone().map_or(Value::Null, Value::String)
}
