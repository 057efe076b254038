//! The pipeline over an in-memory inbox store.
#![allow(clippy::unwrap_used)]

use super::*;
use queuebox_domain::glob::TopicPattern;
use queuebox_domain::inbox::auth::CredentialCheck;
use queuebox_domain::inbox::filter::{Condition, HeaderRule};
use queuebox_domain::secret::Secret;
use queuebox_ports::inbox::InsertManyError;
use queuebox_ports::outbox::StoreError;
use std::sync::Mutex;
use std::time::Duration;
use uuid::Uuid;

#[derive(Default)]
struct MemoryInbox {
    rows: Mutex<Vec<NewInboxMessage>>,
    fail: bool,
    /// Refuses, as a database refuses a value it cannot hold, a pending row whose payload holds
    /// this text.
    refuse_payload_with: Option<&'static str>,
}

#[async_trait]
impl InboxStore for MemoryInbox {
    async fn insert(&self, message: &NewInboxMessage) -> Result<Stored, StoreError> {
        if self.fail {
            return Err(StoreError {
                operation: "insert",
                reason: "connection refused".into(),
            });
        }
        if let Some(text) = self.refuse_payload_with
            && message.dead_reason.is_none()
            && message.payload.contains(text)
        {
            return Ok(Stored::Refused {
                reason: "value overflows numeric format (SQLSTATE 22003)".into(),
            });
        }
        let mut rows = self.rows.lock().unwrap();
        if rows.iter().any(|row| {
            row.source == message.source && row.idempotency_key == message.idempotency_key
        }) {
            return Ok(Stored::Duplicate);
        }
        rows.push(message.clone());
        Ok(Stored::New(message.id))
    }

    async fn insert_many(
        &self,
        messages: &[NewInboxMessage],
    ) -> Result<Vec<Stored>, InsertManyError> {
        let mut outcomes = Vec::with_capacity(messages.len());
        for message in messages {
            outcomes.push(
                self.insert(message)
                    .await
                    .map_err(InsertManyError::Statement)?,
            );
        }
        Ok(outcomes)
    }
}

fn path(text: &str) -> JsonPath {
    JsonPath::parse(text).unwrap()
}

fn source(name: &str) -> IngestSource {
    IngestSource {
        name: name.into(),
        idempotency_key_path: path("$.id"),
        event_type_path: Some(path("$.type")),
        aggregate_id_path: Some(path("$.customer.id")),
        consumption: Consumption::Push,
        auth: None,
        filter: None,
        requests_per_minute: None,
        kind: IngestKind::Http,
        transform: None,
    }
}

fn pipeline(store: Arc<MemoryInbox>, sources: Vec<IngestSource>) -> IngestPipeline {
    IngestPipeline::new(store, sources, Arc::new(|| 1_000_000))
}

fn received(headers: &[(&str, &str)], body: &str) -> Received {
    Received::new(
        headers
            .iter()
            .map(|(n, v)| ((*n).to_owned(), (*v).to_owned()))
            .collect(),
        body.as_bytes().to_vec(),
    )
}

#[tokio::test]
async fn a_new_message_is_stored_with_its_extracted_attributes() {
    let store = Arc::new(MemoryInbox::default());
    let mut spec = source("orders");
    spec.consumption = Consumption::Pull;
    let p = pipeline(Arc::clone(&store), vec![spec]);
    let body = r#"{"id":"o-1","type":"order.created","customer":{"id":42}}"#;
    let result = p
        .ingest(
            "orders",
            received(
                &[("x-correlation-id", "corr-1"), ("x-tenant", "acme")],
                body,
            ),
        )
        .await;
    assert!(matches!(result.outcome, IngestOutcome::Stored { .. }));
    assert_eq!(result.correlation_id.as_deref(), Some("corr-1"));
    let rows = store.rows.lock().unwrap();
    let row = &rows[0];
    assert_eq!(row.source, "orders");
    assert_eq!(row.idempotency_key, "o-1");
    assert_eq!(row.event_type.as_deref(), Some("order.created"));
    assert_eq!(row.aggregate_id.as_deref(), Some("42"));
    assert_eq!(row.payload, body);
    assert_eq!(row.correlation_id.as_deref(), Some("corr-1"));
    assert_eq!(row.consumption, Consumption::Pull);
    assert_eq!(row.dead_reason, None);
    assert!(row.headers.contains(&("x-tenant".into(), "acme".into())));
}

#[tokio::test]
async fn a_repeat_is_a_duplicate_in_its_source_only() {
    let store = Arc::new(MemoryInbox::default());
    let p = pipeline(Arc::clone(&store), vec![source("a"), source("b")]);
    let body = r#"{"id":"same","type":"t"}"#;
    let first = p.ingest("a", received(&[], body)).await;
    let repeat = p.ingest("a", received(&[], body)).await;
    let other = p.ingest("b", received(&[], body)).await;
    assert!(matches!(first.outcome, IngestOutcome::Stored { .. }));
    assert_eq!(repeat.outcome, IngestOutcome::Duplicate);
    assert!(matches!(other.outcome, IngestOutcome::Stored { .. }));
    assert_eq!(store.rows.lock().unwrap().len(), 2);
}

#[tokio::test]
async fn event_type_and_aggregate_id_are_optional() {
    let store = Arc::new(MemoryInbox::default());
    let p = pipeline(Arc::clone(&store), vec![source("s")]);
    let result = p
        .ingest("s", received(&[], r#"{"id":7,"customer":{"id":null}}"#))
        .await;
    assert!(matches!(result.outcome, IngestOutcome::Stored { .. }));
    let rows = store.rows.lock().unwrap();
    assert_eq!(rows[0].idempotency_key, "7");
    assert_eq!(rows[0].event_type, None);
    assert_eq!(rows[0].aggregate_id, None);
}

#[tokio::test]
async fn invalid_json_and_a_missing_key_are_rejected_after_the_correlation_id() {
    let store = Arc::new(MemoryInbox::default());
    let p = pipeline(Arc::clone(&store), vec![source("s")]);
    let bad = p.ingest("s", received(&[], "{not json")).await;
    assert_eq!(bad.outcome, IngestOutcome::Rejected(Rejection::InvalidJson));
    assert!(bad.correlation_id.is_some());
    let keyless = p.ingest("s", received(&[], r#"{"type":"t"}"#)).await;
    assert_eq!(
        keyless.outcome,
        IngestOutcome::Rejected(Rejection::KeyNotFound {
            path: "$.id".into()
        })
    );
    for container in [r#"{"id":{"a":1}}"#, r#"{"id":[1]}"#, r#"{"id":null}"#] {
        let result = p.ingest("s", received(&[], container)).await;
        assert!(
            matches!(
                result.outcome,
                IngestOutcome::Rejected(Rejection::KeyNotFound { .. })
            ),
            "{container}"
        );
    }
    assert!(store.rows.lock().unwrap().is_empty());
}

#[tokio::test]
async fn a_failed_insert_is_a_storage_failure() {
    let store = Arc::new(MemoryInbox {
        fail: true,
        ..MemoryInbox::default()
    });
    let p = pipeline(store, vec![source("s")]);
    let result = p.ingest("s", received(&[], r#"{"id":"1"}"#)).await;
    assert_eq!(
        result.outcome,
        IngestOutcome::Rejected(Rejection::StorageFailed)
    );
}

#[tokio::test]
async fn wrong_credentials_stop_before_the_filter_and_store_nothing() {
    let store = Arc::new(MemoryInbox::default());
    let mut spec = source("s");
    spec.auth = Some(CredentialCheck::Bearer {
        token: Secret::new("tok"),
    });
    // The filter would drop this message; the 401 must come first.
    spec.filter = Some(HeaderFilter {
        require: vec![HeaderRule {
            header: "x-env".into(),
            condition: Condition::Exists,
        }],
        exclude: Vec::new(),
    });
    let p = pipeline(Arc::clone(&store), vec![spec]);
    let result = p
        .ingest(
            "s",
            received(&[("Authorization", "Bearer nope")], r#"{"id":"1"}"#),
        )
        .await;
    assert_eq!(
        result.outcome,
        IngestOutcome::Unauthorized {
            reason: "Invalid bearer token".into()
        }
    );
    assert_eq!(result.correlation_id, None);
    let filtered = p
        .ingest(
            "s",
            received(&[("Authorization", "Bearer tok")], r#"{"id":"1"}"#),
        )
        .await;
    assert_eq!(filtered.outcome, IngestOutcome::Filtered);
    assert_eq!(filtered.correlation_id, None);
    assert!(store.rows.lock().unwrap().is_empty());
}

#[tokio::test]
async fn the_filter_runs_before_the_body_is_parsed() {
    let store = Arc::new(MemoryInbox::default());
    let mut spec = source("s");
    spec.filter = Some(HeaderFilter {
        require: vec![HeaderRule {
            header: "X-Event".into(),
            condition: Condition::Matches(TopicPattern::compile("order.*").unwrap()),
        }],
        exclude: Vec::new(),
    });
    let p = pipeline(Arc::clone(&store), vec![spec]);
    let dropped = p
        .ingest("s", received(&[("x-event", "user.created")], "not json"))
        .await;
    assert_eq!(dropped.outcome, IngestOutcome::Filtered);
    let kept = p
        .ingest(
            "s",
            received(&[("x-event", "order.created")], r#"{"id":"1"}"#),
        )
        .await;
    assert!(matches!(kept.outcome, IngestOutcome::Stored { .. }));
}

#[tokio::test]
async fn the_credential_header_is_never_stored() {
    let store = Arc::new(MemoryInbox::default());
    let mut spec = source("s");
    spec.auth = Some(CredentialCheck::ApiKey {
        header: "X-Partner-Key".into(),
        key: Secret::new("k"),
    });
    let p = pipeline(Arc::clone(&store), vec![spec]);
    let result = p
        .ingest(
            "s",
            received(
                &[
                    ("x-partner-key", "k"),
                    ("authorization", "Basic abc"),
                    ("cookie", "c=1"),
                    ("proxy-authorization", "p"),
                    ("x-keep", "yes"),
                ],
                r#"{"id":"1"}"#,
            ),
        )
        .await;
    assert!(matches!(result.outcome, IngestOutcome::Stored { .. }));
    let rows = store.rows.lock().unwrap();
    assert_eq!(rows[0].headers, vec![("x-keep".into(), "yes".into())]);
}

#[tokio::test]
async fn a_missing_correlation_id_is_generated_as_a_uuid() {
    let store = Arc::new(MemoryInbox::default());
    let p = pipeline(Arc::clone(&store), vec![source("s")]);
    let result = p
        .ingest("s", received(&[("X-Correlation-Id", "")], r#"{"id":"1"}"#))
        .await;
    let id = result.correlation_id.unwrap();
    assert!(Uuid::parse_str(&id).is_ok(), "{id}");
    assert_eq!(
        store.rows.lock().unwrap()[0].correlation_id.as_deref(),
        Some(id.as_str())
    );
}

#[tokio::test]
async fn the_brokers_own_correlation_id_comes_after_the_header_and_before_a_new_one() {
    let store = Arc::new(MemoryInbox::default());
    let p = pipeline(Arc::clone(&store), vec![source("s")]);
    let cases = [
        (
            &[("X-Correlation-Id", "from-header")][..],
            "1",
            "from-header",
        ),
        (&[("X-Correlation-Id", "\r\n")][..], "2", "from-property"),
        (&[][..], "3", "from-property"),
    ];
    for (headers, id, expected) in cases {
        let mut message = received(headers, &format!(r#"{{"id":"{id}"}}"#));
        message.correlation_id = Some("from-property".into());
        let result = p.ingest("s", message).await;
        assert_eq!(result.correlation_id.as_deref(), Some(expected), "{id}");
    }
    let rows = store.rows.lock().unwrap();
    let stored: Vec<_> = rows.iter().map(|r| r.correlation_id.as_deref()).collect();
    assert_eq!(
        stored,
        [
            Some("from-header"),
            Some("from-property"),
            Some("from-property")
        ]
    );
}

#[tokio::test]
async fn the_rate_limit_refuses_with_a_wait() {
    let store = Arc::new(MemoryInbox::default());
    let mut spec = source("s");
    spec.requests_per_minute = Some(2);
    let p = pipeline(Arc::clone(&store), vec![spec, source("free")]);
    for n in 0..2 {
        let result = p
            .ingest("s", received(&[], &format!(r#"{{"id":"{n}"}}"#)))
            .await;
        assert!(matches!(result.outcome, IngestOutcome::Stored { .. }));
    }
    let limited = p.ingest("s", received(&[], r#"{"id":"3"}"#)).await;
    let IngestOutcome::RateLimited { retry_after } = limited.outcome else {
        panic!("{limited:?}");
    };
    assert!(retry_after > Duration::from_secs(25), "{retry_after:?}");
    assert_eq!(limited.correlation_id, None);
    // Another source has its own budget.
    let other = p.ingest("free", received(&[], r#"{"id":"3"}"#)).await;
    assert!(matches!(other.outcome, IngestOutcome::Stored { .. }));
}

#[tokio::test]
async fn an_unknown_source_is_reported() {
    let p = pipeline(Arc::new(MemoryInbox::default()), vec![source("s")]);
    let result = p.ingest("other", received(&[], r#"{"id":"1"}"#)).await;
    assert_eq!(result.outcome, IngestOutcome::UnknownSource);
}

// ------------------------------------------------------------------------------------------------
// The source transform
// ------------------------------------------------------------------------------------------------

mod source_transform {
    use super::*;
    use crate::transform::mock::stage;
    use queuebox_ports::transform::{
        ErrorStrategy, TransformContext, TransformError, TransformErrorKind, TransformLimit,
        TransformOutput,
    };

    const BODY: &str = r#"{"id":"o-1","type":"order.created","customer":{"id":42}}"#;

    fn failing(strategy: ErrorStrategy) -> crate::transform::StageTransform {
        stage(strategy, "sources.s.transform", |_, _| {
            Err(TransformError::new(
                TransformErrorKind::Limit(TransformLimit::Timeout),
                "evaluation ran longer than timeoutMs (100 ms)",
            ))
        })
    }

    fn with(
        kind: IngestKind,
        transform: crate::transform::StageTransform,
    ) -> (Arc<MemoryInbox>, IngestPipeline) {
        let store = Arc::new(MemoryInbox::default());
        let mut spec = source("s");
        spec.kind = kind;
        spec.transform = Some(transform);
        let p = pipeline(Arc::clone(&store), vec![spec]);
        (store, p)
    }

    #[tokio::test]
    async fn the_transformed_payload_is_stored_and_the_key_comes_from_the_original_body() {
        let seen = Arc::new(Mutex::new(None));
        let record = Arc::clone(&seen);
        let transform = stage(ErrorStrategy::Fail, "sources.s.transform", move |p, c| {
            *record.lock().unwrap() = Some((p.to_owned(), c.clone()));
            Ok(TransformOutput::Json(r#"{"reshaped":true}"#.into()))
        });
        let (store, p) = with(IngestKind::Http, transform);
        let mut request = received(&[("x-tenant", "acme"), ("x-correlation-id", "c-1")], BODY);
        request.headers.push(("X-Tenant".into(), "second".into()));
        let result = p.ingest("s", request).await;
        let IngestOutcome::Stored { id } = result.outcome else {
            panic!("expected a stored row, got {:?}", result.outcome);
        };
        let rows = store.rows.lock().unwrap();
        assert_eq!(rows[0].payload, r#"{"reshaped":true}"#);
        assert_eq!(rows[0].idempotency_key, "o-1");
        assert_eq!(rows[0].event_type.as_deref(), Some("order.created"));
        assert_eq!(rows[0].dead_reason, None);

        let (input, context) = seen.lock().unwrap().clone().expect("the transform ran");
        assert_eq!(input, BODY);
        let TransformContext::Source(source) = context else {
            panic!("the source stage must bind the source variables: {context:?}");
        };
        assert_eq!(source.message_id, id, "$messageId is the id of the new row");
        assert_eq!(source.source, "s");
        assert_eq!(source.idempotency_key.as_deref(), Some("o-1"));
        assert_eq!(source.event_type.as_deref(), Some("order.created"));
        assert_eq!(
            source.headers, rows[0].headers,
            "$headers shows the stored headers"
        );
    }

    #[tokio::test]
    async fn fail_and_dead_at_an_http_source_store_nothing_and_reject() {
        for strategy in [ErrorStrategy::Fail, ErrorStrategy::Dead] {
            let (store, p) = with(IngestKind::Http, failing(strategy));
            let result = p.ingest("s", received(&[], BODY)).await;
            assert_eq!(
                result.outcome,
                IngestOutcome::Rejected(Rejection::TransformFailed {
                    reason: "evaluation ran longer than timeoutMs (100 ms)".into()
                }),
                "{strategy}"
            );
            assert!(result.correlation_id.is_some());
            assert!(store.rows.lock().unwrap().is_empty(), "{strategy}");
        }
    }

    #[tokio::test]
    async fn skip_stores_the_original_body_at_every_source_kind() {
        for kind in [
            IngestKind::Http,
            IngestKind::Broker(AttributeHeaders::default()),
        ] {
            let (store, p) = with(kind.clone(), failing(ErrorStrategy::Skip));
            let result = p.ingest("s", received(&[], BODY)).await;
            assert!(
                matches!(result.outcome, IngestOutcome::Stored { .. }),
                "{kind:?}: {:?}",
                result.outcome
            );
            let rows = store.rows.lock().unwrap();
            assert_eq!(rows[0].payload, BODY);
            assert_eq!(rows[0].dead_reason, None);
        }
    }

    #[tokio::test]
    async fn fail_and_dead_at_a_broker_source_store_the_original_payload_dead() {
        for strategy in [ErrorStrategy::Fail, ErrorStrategy::Dead] {
            let (store, p) = with(
                IngestKind::Broker(AttributeHeaders::default()),
                failing(strategy),
            );
            let result = p.ingest("s", received(&[], BODY)).await;
            let IngestOutcome::StoredDead { id: _, reason } = result.outcome else {
                panic!("{strategy}: expected a dead row, got {:?}", result.outcome);
            };
            assert_eq!(
                reason,
                "Transform failed: evaluation ran longer than timeoutMs (100 ms)"
            );
            let rows = store.rows.lock().unwrap();
            assert_eq!(rows.len(), 1);
            assert_eq!(rows[0].payload, BODY, "{strategy}: the original payload");
            assert_eq!(rows[0].dead_reason.as_deref(), Some(reason.as_str()));
        }
    }

    #[tokio::test]
    async fn an_undefined_result_is_a_failure_like_any_other() {
        let transform = stage(ErrorStrategy::Fail, "sources.s.transform", |_, _| {
            Ok(TransformOutput::Undefined)
        });
        let (store, p) = with(IngestKind::Http, transform);
        let result = p.ingest("s", received(&[], BODY)).await;
        assert!(
            matches!(
                result.outcome,
                IngestOutcome::Rejected(Rejection::TransformFailed { .. })
            ),
            "{:?}",
            result.outcome
        );
        assert!(store.rows.lock().unwrap().is_empty());
    }
}

mod unstorable {
    //! Values the inbox table cannot hold: a clear refusal at an HTTP source, a dead row that keeps
    //! the message at a broker source, and never a storage failure.

    use super::*;

    fn at(kind: IngestKind, store: MemoryInbox) -> (Arc<MemoryInbox>, IngestPipeline) {
        let store = Arc::new(store);
        let mut spec = source("s");
        spec.kind = kind;
        let p = pipeline(Arc::clone(&store), vec![spec]);
        (store, p)
    }

    fn unstorable(reason: &str) -> IngestOutcome {
        IngestOutcome::Rejected(Rejection::Unstorable {
            reason: reason.into(),
        })
    }

    #[tokio::test]
    async fn fields_longer_than_their_column_are_refused_naming_field_and_limit() {
        let (store, p) = at(IngestKind::Http, MemoryInbox::default());
        let long = "k".repeat(256);
        let cases = [
            (
                format!(r#"{{"id":"{long}"}}"#),
                "the idempotency key is 256 characters long; the inbox stores at most 255",
            ),
            (
                format!(r#"{{"id":"a","type":"{long}"}}"#),
                "the event type is 256 characters long; the inbox stores at most 255",
            ),
            (
                format!(r#"{{"id":"b","customer":{{"id":"{long}"}}}}"#),
                "the aggregate id is 256 characters long; the inbox stores at most 255",
            ),
        ];
        for (body, reason) in cases {
            let result = p.ingest("s", received(&[], &body)).await;
            assert_eq!(result.outcome, unstorable(reason));
        }
        // 255 characters fit.
        let fits = format!(r#"{{"id":"{}"}}"#, "k".repeat(255));
        let result = p.ingest("s", received(&[], &fits)).await;
        assert!(matches!(result.outcome, IngestOutcome::Stored { .. }));
        assert_eq!(store.rows.lock().unwrap().len(), 1);
    }

    #[tokio::test]
    async fn a_nul_in_the_payload_or_a_key_is_refused_with_its_place() {
        let (store, p) = at(IngestKind::Http, MemoryInbox::default());
        let result = p
            .ingest("s", received(&[], r#"{"id":"a","note":["x","\u0000"]}"#))
            .await;
        assert_eq!(
            result.outcome,
            unstorable(
                "the payload holds the character U+0000 (\\u0000) at $['note'][1], which the inbox cannot store"
            )
        );
        // An escaped backslash before `u0000` is not a NUL.
        let result = p
            .ingest("s", received(&[], r#"{"id":"b","note":"\\u0000"}"#))
            .await;
        assert!(matches!(result.outcome, IngestOutcome::Stored { .. }));
        assert_eq!(store.rows.lock().unwrap().len(), 1);
    }

    #[tokio::test]
    async fn deep_nesting_and_huge_numbers_say_why_they_are_not_read() {
        let (_, p) = at(IngestKind::Http, MemoryInbox::default());
        let deep = format!("{}{}", "[".repeat(200), "]".repeat(200));
        let result = p.ingest("s", received(&[], &deep)).await;
        assert_eq!(
            result.outcome,
            IngestOutcome::Rejected(Rejection::TooDeep { limit: 127 })
        );
        let result = p
            .ingest("s", received(&[], r#"{"id":"a","n":1e400}"#))
            .await;
        assert_eq!(
            result.outcome,
            IngestOutcome::Rejected(Rejection::NumberOutOfRange)
        );
    }

    #[tokio::test]
    async fn a_value_the_database_refuses_is_the_senders_error_not_a_storage_failure() {
        let store = MemoryInbox {
            refuse_payload_with: Some("1e-20000"),
            ..MemoryInbox::default()
        };
        let (store, p) = at(IngestKind::Http, store);
        let result = p
            .ingest("s", received(&[], r#"{"id":"a","n":1e-20000}"#))
            .await;
        assert_eq!(
            result.outcome,
            unstorable(
                "the database cannot store this message: value overflows numeric format (SQLSTATE 22003)"
            )
        );
        assert!(store.rows.lock().unwrap().is_empty());
    }

    #[tokio::test]
    async fn at_a_broker_source_each_refusal_is_a_dead_row_that_a_redelivery_finds_again() {
        let store = MemoryInbox {
            refuse_payload_with: Some("1e-20000"),
            ..MemoryInbox::default()
        };
        let (store, p) = at(IngestKind::Broker(AttributeHeaders::default()), store);
        let long_key = format!(r#"{{"id":"{}"}}"#, "k".repeat(300));
        let bodies: [&[u8]; 6] = [
            b"<not json/>",
            b"\xff\xfe binary",
            br#"{"id":"n","note":"\u0000"}"#,
            long_key.as_bytes(),
            br#"{"id":"r","n":1e-20000}"#,
            br#"[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]"#,
        ];
        for body in bodies {
            let message = Received::new(vec![("x-trace".into(), "t".into())], body.to_vec());
            let first = p.ingest("s", message.clone()).await;
            assert!(
                matches!(first.outcome, IngestOutcome::StoredDead { .. }),
                "{:?}: {:?}",
                String::from_utf8_lossy(body),
                first.outcome
            );
            // A redelivery of the same bytes is the same row.
            let again = p.ingest("s", message).await;
            assert_eq!(again.outcome, IngestOutcome::Duplicate);
        }
        let rows = store.rows.lock().unwrap();
        assert_eq!(rows.len(), 6);
        for row in rows.iter() {
            let reason = row.dead_reason.as_deref().unwrap();
            assert!(!reason.is_empty());
            assert!(row.idempotency_key.chars().count() <= 255);
            assert!(!row.payload.contains('\0'));
            assert!(serde_json::from_str::<serde_json::Value>(&row.payload).is_ok());
        }
        assert_eq!(
            rows[0].dead_reason.as_deref(),
            Some(r#"Invalid JSON (payload kept as the received text in {"raw": ...})"#)
        );
        assert_eq!(rows[0].payload, r#"{"raw":"<not json/>"}"#);
        assert!(
            rows[1].payload.starts_with(r#"{"base64":"#),
            "{}",
            rows[1].payload
        );
        assert!(
            rows[4]
                .dead_reason
                .as_deref()
                .unwrap()
                .contains("value overflows numeric format")
        );
        assert!(
            rows[5]
                .dead_reason
                .as_deref()
                .unwrap()
                .starts_with("Invalid JSON: nested deeper than 127 levels")
        );
    }

    #[tokio::test]
    async fn a_header_with_a_nul_makes_a_broker_message_dead_without_that_header() {
        let (store, p) = at(
            IngestKind::Broker(AttributeHeaders::default()),
            MemoryInbox::default(),
        );
        let message = Received::new(
            vec![
                ("x-trace".into(), "t\0".into()),
                ("x-tenant".into(), "acme".into()),
            ],
            br#"{"id":"a"}"#.to_vec(),
        );
        let result = p.ingest("s", message).await;
        assert!(
            matches!(result.outcome, IngestOutcome::StoredDead { .. }),
            "{:?}",
            result.outcome
        );
        let rows = store.rows.lock().unwrap();
        assert_eq!(
            rows[0].dead_reason.as_deref(),
            Some("a header holds the character U+0000, which the inbox cannot store")
        );
        assert_eq!(
            rows[0].headers,
            vec![("x-tenant".to_owned(), "acme".to_owned())]
        );
    }
}
