//! The inbox request path after the HTTP layer: `selector NUL headers NUL body`, where the first
//! byte of the selector picks the source (one per credential kind, a broker source, and one
//! without credentials but with a filter and a transform), its second byte asks for a correct
//! signature or credential to be added, and the headers are `name: value` lines.
//!
//! The pipeline is the one `serve` builds, from a fixed configuration (`SOURCES` below) through
//! the binary's own wiring, over a store in memory (the PostgreSQL store has its own tests; here
//! the input handling is under test).
//!
//! Holds: the pipeline never panics and always answers; a source with credentials never stores a
//! message that carries none; a stored row's idempotency key is at most 255 characters and its
//! stored headers hold no credential header.

use crate::split::{parts, text};
use async_trait::async_trait;
use queuebox_application::ingest::IngestPipeline;
use queuebox_config::LoadRequest;
use queuebox_domain::inbox::auth::CredentialCheck;
use queuebox_domain::inbox::signatures::{Scheme, StandardWebhooksSigner};
use queuebox_domain::secret::Secret;
use queuebox_ports::inbox::{InboxStore, InsertManyError, NewInboxMessage, Stored};
use queuebox_ports::ingest::{Ingest, IngestOutcome, Received};
use queuebox_ports::outbox::StoreError;
use std::sync::{Arc, Mutex, OnceLock};

/// The sources the target exercises. The database block is never connected to.
const SOURCES: &str = r#"
database:
  url: jdbc:postgresql://127.0.0.1:1/fuzz
  username: fuzz
  password: fuzz-db-password
sources:
  open:
    type: http
    path: /open
    idempotencyKeyPath: $.id
    eventTypePath: $.type
    aggregateIdPath: $.customer.id
    filter:
      require:
        - header: x-env
          in: [prod, stage]
      exclude:
        - header: x-test
          matches: "^yes.*"
    transform:
      expression: '$exists(ok) ? {"id": id, "total": $sum(items.price)} : $error("no ok")'
      onError: Fail
  bearer:
    type: http
    path: /bearer
    idempotencyKeyPath: $.id
    topic: bearer
    auth:
      type: bearer
      token: fuzz-bearer-token
  apikey:
    type: http
    path: /apikey
    idempotencyKeyPath: $['id']
    topic: apikey
    auth:
      type: api-key
      key: fuzz-api-key
      headerName: X-Api-Key
  hmac:
    type: http
    path: /hmac
    idempotencyKeyPath: $.id
    topic: hmac
    auth:
      type: hmac
      secret: fuzz-hmac-secret
      headerName: X-Signature
      signaturePrefix: "sha256="
      timestampHeader: X-Timestamp
      signaturePayloadFormat: timestamp-dot-body
  webhooks:
    type: http
    path: /webhooks
    topic: webhooks
    auth:
      type: standardWebhooks
      secrets:
        - whsec_ZnV6ei1zdGFuZGFyZC13ZWJob29rcy1zZWNyZXQtMzJi
  broker:
    type: rabbitmq
    queueName: fuzz
    connectionUrl: amqp://127.0.0.1:1/%2f
    idempotencyKeyPath: $.id
    eventTypeFromHeader: true
    topic: "{{ eventType }}"
"#;

/// The source names, in selector order.
const NAMES: [&str; 6] = ["open", "bearer", "apikey", "hmac", "webhooks", "broker"];
/// The signing secret of the `webhooks` source (Standard Webhooks), as configured above.
const WEBHOOKS_SECRET: &str = "whsec_ZnV6ei1zdGFuZGFyZC13ZWJob29rcy1zZWNyZXQtMzJi";
/// The clock the pipeline reads, in Unix milliseconds (fixed, so the HMAC timestamp guard is
/// deterministic).
const NOW_MS: i64 = 1_700_000_000_000;

/// A store in memory: one row per (source, key).
#[derive(Default)]
struct MemoryInbox {
    rows: Mutex<Vec<NewInboxMessage>>,
}

#[async_trait]
impl InboxStore for MemoryInbox {
    async fn insert(&self, message: &NewInboxMessage) -> Result<Stored, StoreError> {
        let mut rows = self.rows.lock().unwrap_or_else(|e| e.into_inner());
        if rows
            .iter()
            .any(|r| r.source == message.source && r.idempotency_key == message.idempotency_key)
        {
            return Ok(Stored::Duplicate);
        }
        // Keep memory flat over a long run: only the latest rows matter to the checks.
        if rows.len() > 1000 {
            rows.clear();
        }
        rows.push(message.clone());
        Ok(Stored::New(message.id))
    }

    async fn insert_many(
        &self,
        messages: &[NewInboxMessage],
    ) -> Result<Vec<Stored>, InsertManyError> {
        let mut out = Vec::with_capacity(messages.len());
        for message in messages {
            out.push(
                self.insert(message)
                    .await
                    .map_err(InsertManyError::Statement)?,
            );
        }
        Ok(out)
    }
}

struct Harness {
    runtime: tokio::runtime::Runtime,
    pipeline: IngestPipeline,
    store: Arc<MemoryInbox>,
    checks: Vec<Option<CredentialCheck>>,
}

fn harness() -> &'static Harness {
    static HARNESS: OnceLock<Harness> = OnceLock::new();
    HARNESS.get_or_init(|| {
        let file =
            std::env::temp_dir().join(format!("queuebox-fuzz-inbox-{}.yml", std::process::id()));
        std::fs::write(&file, SOURCES).expect("write the fuzz configuration");
        let loaded = queuebox_config::load(&LoadRequest {
            env: Vec::new(),
            config_file: Some(file),
        })
        .unwrap_or_else(|e| panic!("the fuzz configuration does not load: {e}"));
        let transforms = queuebox::transforms::compile(&loaded.settings).expect("transforms");
        let sources = queuebox::ingest::sources(&loaded.settings, &transforms).expect("sources");
        let checks = NAMES
            .iter()
            .map(|name| {
                sources
                    .iter()
                    .find(|s| s.name == *name)
                    .and_then(|s| s.auth.clone())
            })
            .collect();
        let store = Arc::new(MemoryInbox::default());
        let store_port: Arc<dyn InboxStore> = store.clone();
        let pipeline = IngestPipeline::new(store_port, sources, Arc::new(|| NOW_MS));
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        Harness {
            runtime,
            pipeline,
            store,
            checks,
        }
    })
}

/// The credential header a correct request of `check` carries, for `body`.
fn credential(check: &CredentialCheck, body: &[u8]) -> Vec<(String, String)> {
    match check {
        CredentialCheck::Bearer { token } => vec![(
            "Authorization".to_owned(),
            format!("Bearer {}", token.expose()),
        )],
        CredentialCheck::ApiKey { header, key } => {
            vec![(header.clone(), key.expose().to_owned())]
        }
        CredentialCheck::Hmac(hmac) => {
            let timestamp = (NOW_MS / 1000).to_string();
            let with_timestamp = hmac.timestamp.as_ref().map(|_| timestamp.as_str());
            let mut headers = vec![(
                hmac.header.clone(),
                format!(
                    "{}{}",
                    hmac.signature_prefix,
                    hmac.signature(with_timestamp, body)
                ),
            )];
            if let Some(rule) = &hmac.timestamp {
                headers.push((rule.header.clone(), timestamp));
            }
            headers
        }
        // Only the `webhooks` source carries a provider signature: a correct Standard Webhooks
        // set of headers for this body, made with the sender's side of the scheme.
        CredentialCheck::Signature(check) => {
            assert_eq!(check.scheme(), Scheme::StandardWebhooks, "the fuzz sources");
            let signer = StandardWebhooksSigner::new(&[Secret::new(WEBHOOKS_SECRET)])
                .expect("the fuzz secret is valid");
            let id = "msg_fuzz";
            let timestamp = (NOW_MS / 1000).to_string();
            vec![
                ("webhook-id".to_owned(), id.to_owned()),
                (
                    "webhook-signature".to_owned(),
                    signer.signature(id, &timestamp, body),
                ),
                ("webhook-timestamp".to_owned(), timestamp),
            ]
        }
    }
}

/// The target body.
pub fn inbox(data: &[u8]) {
    let [selector, headers, body] = parts::<3>(data);
    let index = usize::from(selector.first().copied().unwrap_or(0)) % NAMES.len();
    let add_credential = selector.get(1).is_some_and(|b| b & 1 == 1);
    let source = NAMES[index];
    let harness = harness();
    let mut received_headers: Vec<(String, String)> = text(headers)
        .lines()
        .filter_map(|line| line.split_once(':'))
        .map(|(name, value)| (name.trim().to_owned(), value.trim().to_owned()))
        .collect();
    let check = harness.checks[index].as_ref();
    if add_credential && let Some(check) = check {
        received_headers.extend(credential(check, body));
    }
    let carried_credential = check.is_some_and(|check| {
        let name = check.credential_header().to_ascii_lowercase();
        received_headers
            .iter()
            .any(|(n, _)| n.to_ascii_lowercase() == name)
    });
    let received = Received::new(received_headers, body.to_vec());
    let ingested = harness
        .runtime
        .block_on(harness.pipeline.ingest(source, received));
    if let IngestOutcome::Stored { id } | IngestOutcome::StoredDead { id, .. } = &ingested.outcome {
        assert!(
            check.is_none() || carried_credential,
            "source {source} stored a message without its credential header"
        );
        let rows = harness.store.rows.lock().unwrap_or_else(|e| e.into_inner());
        let row = rows
            .iter()
            .find(|r| r.id == *id)
            .expect("the stored row is in the store");
        assert!(row.idempotency_key.chars().count() <= 255, "key too long");
        if let Some(check) = check {
            let name = check.credential_header();
            assert!(
                !row.headers
                    .iter()
                    .any(|(n, _)| n.eq_ignore_ascii_case(name)),
                "the credential header {name} was stored"
            );
        }
    }
}
