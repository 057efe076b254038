//! `POST /admin/transform/test`: compiles the caller's expression, evaluates it once against the
//! caller's sample payload with the admin-test variables, and shows the result and the variables.
//! It sends nothing and writes nothing.

use super::gate::{Gate, Shape};
use super::request::{field, object};
use crate::responses;
use queuebox_domain::timestamp::iso_utc_millis;
use queuebox_ports::transform::{
    AdminTestContext, TransformContext, TransformErrorKind, TransformLimits, TransformOutput,
    Transformer,
};
use salvo::http::StatusCode;
use salvo::prelude::*;
use serde_json::{Map, Value, json};
use std::sync::Arc;
use std::time::Duration;

/// `$topic` when the caller sends no `mockTopic`.
const DEFAULT_MOCK_TOPIC: &str = "test.topic";
/// The evaluation timeout when the caller sends no `timeoutMs`.
const DEFAULT_TIMEOUT_MS: u64 = 100;

pub(crate) struct TransformTestRoute {
    pub(crate) gate: Arc<Gate>,
    pub(crate) transformer: Arc<dyn Transformer>,
    pub(crate) max_timeout: Duration,
}

/// One valid request.
#[derive(Debug, PartialEq)]
struct TestRequest {
    expression: String,
    /// The payload as JSON text, in the order the caller wrote its keys.
    payload: String,
    topic: String,
    source: Option<String>,
    timeout: Duration,
}

#[salvo::async_trait]
impl Handler for TransformTestRoute {
    async fn handle(
        &self,
        req: &mut Request,
        _depot: &mut Depot,
        res: &mut Response,
        _ctrl: &mut FlowCtrl,
    ) {
        let Some(body) = self.gate.admit(req, res, Shape::Flagged).await else {
            return;
        };
        let request = match object(&body).and_then(|fields| read(&fields, self.max_timeout)) {
            Ok(request) => request,
            Err(reason) => {
                let message = format!("Invalid request: {reason}");
                Shape::Flagged.fail(res, StatusCode::BAD_REQUEST, &message);
                return;
            }
        };
        let limits = TransformLimits {
            timeout: request.timeout,
            ..TransformLimits::DEFAULT
        };
        let compiled = match self.transformer.compile(&request.expression, limits) {
            Ok(compiled) => compiled,
            Err(error) => {
                let message = format!("Invalid expression: {error}");
                Shape::Flagged.fail(res, StatusCode::BAD_REQUEST, &message);
                return;
            }
        };
        let context = AdminTestContext::new(request.topic, request.source);
        let shown = json!({
            "messageId": context.message_id.to_string(),
            "topic": context.topic,
            "attempt": 0,
            "timestamp": iso_utc_millis(context.timestamp),
        });
        let applied = compiled
            .apply(&request.payload, &TransformContext::AdminTest(context))
            .await;
        match applied {
            Ok(output) => match result_value(output) {
                Ok(result) => {
                    let mut answer = Map::new();
                    answer.insert("success".into(), Value::Bool(true));
                    // JSONata's undefined has no JSON form: the answer then has no `result`,
                    // as JSON.stringify leaves such a key out.
                    if let Some(result) = result {
                        answer.insert("result".into(), result);
                    }
                    answer.insert("context".into(), shown);
                    responses::json(res, StatusCode::OK, &answer);
                }
                Err(message) => Shape::Flagged.fail(res, StatusCode::BAD_REQUEST, &message),
            },
            Err(error) => {
                let message = match error.kind {
                    // The adapter reports a compile problem only from compile; keep the prefix if
                    // one ever arrives here.
                    TransformErrorKind::Compile => format!("Invalid expression: {error}"),
                    _ => error.to_string(),
                };
                Shape::Flagged.fail(res, StatusCode::BAD_REQUEST, &message);
            }
        }
    }
}

/// The result as a JSON value, `None` for undefined.
fn result_value(output: TransformOutput) -> Result<Option<Value>, String> {
    match output {
        TransformOutput::Undefined => Ok(None),
        TransformOutput::Json(text) => serde_json::from_str(&text)
            .map(Some)
            .map_err(|error| format!("the result is not JSON: {error}")),
    }
}

/// The request fields; anything else in the object is ignored.
fn read(fields: &Map<String, Value>, max_timeout: Duration) -> Result<TestRequest, String> {
    let expression: String =
        field(fields, "expression")?.ok_or_else(|| "expression is required".to_owned())?;
    // `null` is a payload like any other JSON value; only a missing field is refused.
    let payload = fields
        .get("payload")
        .ok_or_else(|| "payload is required".to_owned())?;
    let timeout_ms: u64 = field(fields, "timeoutMs")?.unwrap_or(DEFAULT_TIMEOUT_MS);
    if timeout_ms == 0 {
        return Err("timeoutMs: must be above 0".to_owned());
    }
    Ok(TestRequest {
        expression,
        payload: payload.to_string(),
        topic: field(fields, "mockTopic")?.unwrap_or_else(|| DEFAULT_MOCK_TOPIC.to_owned()),
        source: field(fields, "mockSource")?,
        timeout: Duration::from_millis(timeout_ms).min(max_timeout),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAX: Duration = Duration::from_millis(1000);

    fn parse(text: &str) -> Result<TestRequest, String> {
        object(text.as_bytes()).and_then(|fields| read(&fields, MAX))
    }

    #[test]
    fn defaults_apply_and_unknown_fields_are_ignored() {
        let request =
            parse(r#"{"expression":"$","payload":{"b":1,"a":2},"extra":true}"#).expect("valid");
        assert_eq!(
            request,
            TestRequest {
                expression: "$".into(),
                payload: r#"{"b":1,"a":2}"#.into(),
                topic: "test.topic".into(),
                source: None,
                timeout: Duration::from_millis(100),
            }
        );
    }

    #[test]
    fn the_timeout_is_clamped_to_the_configured_bound() {
        let request = parse(r#"{"expression":"$","payload":1,"timeoutMs":60000}"#).expect("valid");
        assert_eq!(request.timeout, MAX);
        let request = parse(r#"{"expression":"$","payload":1,"timeoutMs":250}"#).expect("valid");
        assert_eq!(request.timeout, Duration::from_millis(250));
    }

    #[test]
    fn a_null_payload_is_a_payload() {
        let request = parse(r#"{"expression":"$","payload":null}"#).expect("valid");
        assert_eq!(request.payload, "null");
    }

    #[test]
    fn missing_and_wrong_fields_are_named() {
        for (text, start) in [
            (r#"{"payload":1}"#, "expression is required"),
            (r#"{"expression":"$"}"#, "payload is required"),
            (r#"{"expression":5,"payload":1}"#, "expression: "),
            (
                r#"{"expression":"$","payload":1,"mockTopic":[]}"#,
                "mockTopic: ",
            ),
            (
                r#"{"expression":"$","payload":1,"mockSource":1}"#,
                "mockSource: ",
            ),
            (
                r#"{"expression":"$","payload":1,"timeoutMs":-5}"#,
                "timeoutMs: ",
            ),
            (
                r#"{"expression":"$","payload":1,"timeoutMs":"fast"}"#,
                "timeoutMs: ",
            ),
            (
                r#"{"expression":"$","payload":1,"timeoutMs":0}"#,
                "timeoutMs: must be above 0",
            ),
        ] {
            let error = parse(text).expect_err(text);
            assert!(error.starts_with(start), "{text}: {error}");
        }
    }
}
