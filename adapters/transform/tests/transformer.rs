//! The JSONata transformer through its port: compile errors, the variables of each stage, the
//! undefined result, the limits, and that a slow evaluation leaves the async worker free.

use queuebox_ports::transform::{
    AdminTestContext, DeliveryContext, SourceContext, TransformContext, TransformErrorKind,
    TransformLimit, TransformLimits, TransformOutput, Transformer,
};
use queuebox_transform::JsonataTransformer;
use serde_json::{Value, json};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use uuid::Uuid;

const CREATED_AT_MILLIS: u64 = 1_788_265_805_042; // 2026-09-01T12:30:05.042Z

fn limits(timeout_ms: u64, max_depth: u32) -> TransformLimits {
    TransformLimits {
        timeout: Duration::from_millis(timeout_ms),
        max_depth,
    }
}

fn delivery() -> TransformContext {
    TransformContext::Delivery(DeliveryContext {
        message_id: Uuid::from_u128(0x6b1f0c1e_9a7d_4f0e_8a1c_2f3d4e5f6a7b),
        topic: "order.created".into(),
        attempt: 3,
        created_at: UNIX_EPOCH + Duration::from_millis(CREATED_AT_MILLIS),
    })
}

fn source() -> TransformContext {
    TransformContext::Source(SourceContext {
        message_id: Uuid::from_u128(7),
        event_type: Some("push".into()),
        received_at: UNIX_EPOCH + Duration::from_millis(CREATED_AT_MILLIS),
        source: "github".into(),
        headers: vec![
            ("x-github-event".into(), "push".into()),
            ("X-Tenant".into(), "first".into()),
            ("X-Tenant".into(), "second".into()),
        ],
        idempotency_key: Some("d-1".into()),
    })
}

async fn run(expression: &str, payload: &str, context: &TransformContext) -> Value {
    let compiled = JsonataTransformer::new()
        .compile(expression, TransformLimits::DEFAULT)
        .expect("compiles");
    match compiled.apply(payload, context).await.expect("evaluates") {
        TransformOutput::Json(text) => serde_json::from_str(&text).expect("JSON out"),
        TransformOutput::Undefined => panic!("undefined result for {expression}"),
    }
}

#[test]
fn a_bad_expression_is_a_compile_error_with_its_position() {
    let err = JsonataTransformer::new()
        .compile("{ \"a\": ", TransformLimits::DEFAULT)
        .expect_err("must not compile");
    assert_eq!(err.kind, TransformErrorKind::Compile);
    assert!(err.message.contains("position"), "{}", err.message);
}

#[tokio::test]
async fn the_envelope_of_page_13_at_a_destination() {
    let out = run(
        r#"{ "id": $messageId, "type": $topic, "data": $ }"#,
        r#"{"orderId":"1001"}"#,
        &delivery(),
    )
    .await;
    assert_eq!(
        out,
        json!({"id": "6b1f0c1e-9a7d-4f0e-8a1c-2f3d4e5f6a7b", "type": "order.created",
               "data": {"orderId": "1001"}})
    );
}

#[tokio::test]
async fn the_delivery_stage_binds_four_variables_and_no_others() {
    let out = run(
        r#"{ "attempt": $attempt, "timestamp": $timestamp,
             "unbound": [$exists($source), $exists($headers), $exists($idempotencyKey),
                         $exists($eventType)] }"#,
        "{}",
        &delivery(),
    )
    .await;
    assert_eq!(
        out,
        json!({"attempt": 3, "timestamp": "2026-09-01T12:30:05.042Z",
               "unbound": [false, false, false, false]})
    );
}

#[tokio::test]
async fn the_source_stage_binds_all_eight_variables() {
    let out = run(
        r#"{ "id": $messageId, "topic": $topic, "attempt": $attempt, "ts": $timestamp,
             "source": $source, "event": $headers."x-github-event", "tenant": $headers."X-Tenant",
             "lower": $exists($headers."x-tenant"), "key": $idempotencyKey, "type": $eventType }"#,
        r#"{"action":"opened"}"#,
        &source(),
    )
    .await;
    assert_eq!(
        out,
        json!({"id": Uuid::from_u128(7).to_string(), "topic": "push", "attempt": 0,
               "ts": "2026-09-01T12:30:05.042Z", "source": "github", "event": "push",
               "tenant": "first", "lower": false, "key": "d-1", "type": "push"})
    );
}

#[tokio::test]
async fn the_source_stage_without_key_or_type_binds_null_and_an_empty_topic() {
    let context = TransformContext::Source(SourceContext {
        message_id: Uuid::from_u128(8),
        event_type: None,
        received_at: SystemTime::now(),
        source: "s".into(),
        headers: Vec::new(),
        idempotency_key: None,
    });
    let out = run(
        r#"[$topic, $idempotencyKey, $eventType, $headers]"#,
        "{}",
        &context,
    )
    .await;
    assert_eq!(out, json!(["", null, null, {}]));
}

#[tokio::test]
async fn the_admin_test_binds_source_only_when_given_and_never_headers() {
    let with =
        TransformContext::AdminTest(AdminTestContext::new("mock.topic", Some("mock".into())));
    let out = run(
        r#"[$topic, $attempt, $source, $exists($headers), $exists($eventType)]"#,
        "{}",
        &with,
    )
    .await;
    assert_eq!(out, json!(["mock.topic", 0, "mock", false, false]));

    let without = TransformContext::AdminTest(AdminTestContext::new("t", None));
    let out = run(r#"$exists($source)"#, "{}", &without).await;
    assert_eq!(out, json!(false));
    // a fresh random id per context
    assert_ne!(
        AdminTestContext::new("t", None).message_id,
        AdminTestContext::new("t", None).message_id
    );
}

#[tokio::test]
async fn an_undefined_result_is_reported_as_such_and_refused_as_a_payload() {
    let compiled = JsonataTransformer::new()
        .compile("missing.field", TransformLimits::DEFAULT)
        .expect("compiles");
    let out = compiled
        .apply(r#"{"a":1}"#, &delivery())
        .await
        .expect("evaluates");
    assert_eq!(out, TransformOutput::Undefined);
    let err = out.into_payload().expect_err("undefined is no payload");
    assert_eq!(err.kind, TransformErrorKind::Undefined);
}

#[tokio::test]
async fn an_evaluation_error_is_not_a_limit() {
    let compiled = JsonataTransformer::new()
        .compile(r#"$error("no way")"#, TransformLimits::DEFAULT)
        .expect("compiles");
    let err = compiled.apply("{}", &delivery()).await.expect_err("fails");
    assert_eq!(err.kind, TransformErrorKind::Evaluation);
    assert!(!err.is_limit());
    assert!(err.message.contains("no way"), "{}", err.message);
}

/// Recursion that never ends, with work in each call so the depth limit is what stops it.
const RUNAWAY_RECURSION: &str = "($f := function($n) { 1 + $f($n + 1) }; $f(0))";
/// A loop long enough to outlast any short timeout without deep recursion.
const RUNAWAY_LOOP: &str = "$count([1..10000000].($string($) & 'x'))";

#[tokio::test]
async fn deep_recursion_is_stopped_by_max_depth() {
    let compiled = JsonataTransformer::new()
        .compile(RUNAWAY_RECURSION, limits(5_000, 20))
        .expect("compiles");
    let err = compiled.apply("{}", &delivery()).await.expect_err("stops");
    assert_eq!(err.kind, TransformErrorKind::Limit(TransformLimit::Depth));
    assert!(err.message.contains("maxDepth 20"), "{}", err.message);
}

#[tokio::test]
async fn a_long_loop_is_stopped_by_the_timeout_after_leaving_the_worker() {
    let compiled = JsonataTransformer::new()
        .compile(RUNAWAY_LOOP, limits(50, 100))
        .expect("compiles");
    let err = compiled.apply("{}", &delivery()).await.expect_err("stops");
    assert_eq!(err.kind, TransformErrorKind::Limit(TransformLimit::Timeout));
    assert!(err.message.contains("50 ms"), "{}", err.message);
}

#[test]
fn a_timeout_within_the_inline_budget_stops_without_a_runtime() {
    let compiled = JsonataTransformer::with_budget(Duration::from_millis(1), 1)
        .compile(RUNAWAY_LOOP, limits(1, 100))
        .expect("compiles");
    let err = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("runtime")
        .block_on(compiled.apply("{}", &delivery()))
        .expect_err("stops");
    assert_eq!(err.kind, TransformErrorKind::Limit(TransformLimit::Timeout));
}

/// On a single-threaded runtime, a runaway evaluation must hand the thread back after its inline
/// budget: a second task that only needs the thread once completes before the evaluation does.
/// Run inline to its 300 ms timeout, the evaluation would finish first.
#[test]
fn a_slow_evaluation_leaves_the_async_thread_to_other_tasks() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("runtime");
    let compiled = JsonataTransformer::new()
        .compile(RUNAWAY_LOOP, limits(300, 100))
        .expect("compiles");
    let order = Arc::new(AtomicUsize::new(0));
    let (evaluation_done_at, other_done_at) = runtime.block_on(async {
        let slow = {
            let order = Arc::clone(&order);
            async move {
                let result = compiled.apply("{}", &delivery()).await;
                assert!(result.is_err(), "the runaway loop must time out");
                order.fetch_add(1, Ordering::SeqCst)
            }
        };
        let other = {
            let order = Arc::clone(&order);
            async move {
                tokio::task::yield_now().await;
                order.fetch_add(1, Ordering::SeqCst)
            }
        };
        tokio::join!(slow, other)
    });
    assert!(
        other_done_at < evaluation_done_at,
        "the other task ran only after the evaluation ({other_done_at} vs {evaluation_done_at})"
    );
}

#[tokio::test]
async fn a_slow_but_finite_evaluation_completes_on_the_blocking_pool() {
    // Takes longer than the 1 ms inline budget on any machine, far less than 10 s.
    let compiled = JsonataTransformer::new()
        .compile(
            "$count([1..300000].($string($) & 'x'))",
            limits(10_000, 100),
        )
        .expect("compiles");
    let out = compiled.apply("{}", &delivery()).await.expect("completes");
    assert_eq!(out, TransformOutput::Json("300000".into()));
}
