//! The rules of a broker source, end to end, written once for every broker: a filter on a header, a
//! transform that refuses some payloads (`onError: Dead`), the relay forwarding the stored row into
//! the outbox, and a second source of the same kind with `consumption: pull`.
//!
//! Each broker's test file implements [`RulesBroker`] for its own client (how it makes a queue,
//! stream or topic, its source keys, how it publishes, how it shows that every message was
//! acknowledged) and calls [`run`].

use crate::service::Service;
use crate::wait_until;
use std::time::Duration;

/// Which of the two sources a message goes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// `relayed`: push, with the filter, the transform and the relay.
    Relayed,
    /// `pulled`: `consumption: pull`, no rules.
    Pulled,
}

/// One message of the scenario, in terms every broker can carry.
#[derive(Debug)]
pub struct Message {
    /// The message's own id: the idempotency key, and the `order` of the transform's output.
    pub id: &'static str,
    /// The `x-env` header the filter requires to be `prod` (none: no header).
    pub env: Option<&'static str>,
    /// Whether the body holds `"ok": true` (the transform refuses a body without it).
    pub ok: bool,
    /// The customer, the aggregate id of the relayed row (and so its outbox key).
    pub customer: Option<&'static str>,
    /// An `X-Correlation-Id` header.
    pub correlation: Option<&'static str>,
}

impl Message {
    /// The JSON body, with the id under `id_field`, and the customer under `customer` when
    /// `with_customer` (a broker that carries it in a header leaves it out).
    pub fn body(&self, id_field: &str, with_customer: bool) -> Vec<u8> {
        let mut body = serde_json::Map::new();
        body.insert(id_field.to_owned(), self.id.into());
        if self.ok {
            body.insert("ok".to_owned(), true.into());
        }
        if let (true, Some(customer)) = (with_customer, self.customer) {
            body.insert("customer".to_owned(), customer.into());
        }
        serde_json::Value::Object(body).to_string().into_bytes()
    }

    /// The headers every broker sends: `x-env` and `X-Correlation-Id` where set.
    pub fn headers(&self) -> Vec<(&'static str, &'static str)> {
        let mut headers = Vec::new();
        if let Some(env) = self.env {
            headers.push(("x-env", env));
        }
        if let Some(correlation) = self.correlation {
            headers.push(("X-Correlation-Id", correlation));
        }
        headers
    }
}

/// What goes to `relayed`: one message passes every rule, one fails the filter, one the transform.
pub const RELAYED: [Message; 3] = [
    Message {
        id: "a",
        env: Some("prod"),
        ok: true,
        customer: Some("c1"),
        correlation: Some("corr-1"),
    },
    Message {
        id: "b",
        env: Some("test"),
        ok: true,
        customer: None,
        correlation: None,
    },
    Message {
        id: "c",
        env: Some("prod"),
        ok: false,
        customer: None,
        correlation: None,
    },
];

/// What goes to `pulled`.
pub const PULLED: Message = Message {
    id: "p",
    env: None,
    ok: false,
    customer: None,
    correlation: None,
};

/// One broker's part of the scenario, implemented by the test's own client of that broker. What
/// a source reads (a queue, a stream, a topic) is called a place here; the scenario names two, unique
/// to the test, has the broker make them, and hands each method the name it is about.
#[allow(async_fn_in_trait, reason = "called from one test's own runtime only")]
pub trait RulesBroker {
    /// Makes place `name` on the broker, empty.
    async fn create(&self, name: &str);

    /// The keys of a source that say what it is and that it reads `place` (type, connection,
    /// group): YAML lines indented by four spaces.
    fn source(&self, place: &str) -> String;

    /// The keys of source `to` that say how it finds the id (and for `relayed` the aggregate id, the
    /// customer, and the topic), indented by four spaces.
    fn attributes(&self, to: Source) -> &'static str {
        match to {
            Source::Relayed => "    idempotencyKeyPath: $.id\n    aggregateIdPath: $.customer\n",
            Source::Pulled => "    idempotencyKeyPath: $.id\n",
        }
    }

    /// The body field the transform reads the id from.
    fn id_field(&self) -> &'static str {
        "id"
    }

    /// The topic the relayed row gets, and why.
    fn relayed_topic(&self) -> (&'static str, &'static str) {
        ("relayed", "a broker source's default topic is its name")
    }

    /// Publishes `message` to `place`, which source `to` reads.
    async fn publish(&self, place: &str, to: Source, message: &Message);

    /// True once the broker holds nothing unacknowledged in `place` (waited for together with the
    /// rows).
    async fn acknowledged(&self, _place: &str) -> bool {
        true
    }

    /// How many messages are still ready in `place`, read once the rows are in (and taken).
    async fn left(&self, _place: &str) -> usize {
        0
    }

    /// Removes `place` (the service is stopped by then).
    async fn delete(&self, name: &str);
}

/// The outbox row the relay wrote for the message that passed every rule.
#[derive(Debug)]
pub struct RelayedRow {
    /// `topic`.
    pub topic: String,
    /// `key`.
    pub key: Option<String>,
    /// `payload`.
    pub payload: serde_json::Value,
    /// `headers`.
    pub headers: serde_json::Value,
}

/// Starts a service with the two sources of `broker`, publishes [`RELAYED`] and [`PULLED`], waits
/// up to `deadline` for every message to be settled, checks every row and the filter's counter,
/// stops the service, cleans the broker up and returns the relayed outbox row for the broker's own
/// checks.
pub async fn run(broker: &impl RulesBroker, deadline: Duration) -> RelayedRow {
    // Valid as a queue, stream (NATS: no dots), topic and key name on every broker.
    let places = ["relayed", "pulled"]
        .map(|prefix| format!("qb_e2e_{prefix}_{}", uuid::Uuid::new_v4().simple()));
    let place = |to: Source| match to {
        Source::Relayed => places[0].as_str(),
        Source::Pulled => places[1].as_str(),
    };
    for name in &places {
        broker.create(name).await;
    }
    let yaml = format!(
        "inbox:\n  relay:\n    enabled: true\n    pollIntervalMs: 50\n\
         sources:\n  relayed:\n{relayed}{relayed_attributes}\
         \x20   filter:\n      require:\n        - header: x-env\n          equals: prod\n\
         \x20   transform:\n      expression: '$exists(ok) ? {{\"order\": {id}, \"v\": 2}} : $error(\"no ok\")'\n      onError: Dead\n\
         \x20 pulled:\n{pulled}{pulled_attributes}\
         \x20   consumption: pull\n",
        relayed = broker.source(place(Source::Relayed)),
        relayed_attributes = broker.attributes(Source::Relayed),
        pulled = broker.source(place(Source::Pulled)),
        pulled_attributes = broker.attributes(Source::Pulled),
        id = broker.id_field(),
    );
    let service = Service::start(&yaml).await;
    for message in &RELAYED {
        broker
            .publish(place(Source::Relayed), Source::Relayed, message)
            .await;
    }
    broker
        .publish(place(Source::Pulled), Source::Pulled, &PULLED)
        .await;
    wait_until("every message settled", deadline, || async {
        let inbox = service.count("SELECT count(*) FROM inbox").await;
        let outbox = service.count("SELECT count(*) FROM outbox").await;
        let mut acknowledged = inbox == 3 && outbox == 1;
        for name in &places {
            acknowledged = acknowledged && broker.acknowledged(name).await;
        }
        acknowledged.then_some(())
    })
    .await;
    // Only now: a broker that reads what is left by taking it would, before the rows were in, take
    // messages from under QueueBox (a test race that failed CI once).
    let mut left = 0;
    for name in &places {
        left += broker.left(name).await;
    }
    assert_eq!(left, 0, "every message was acknowledged");
    let rows: Vec<(String, String, String, Option<String>)> = sqlx::query_as(
        "SELECT idempotency_key, state, consumption, last_error FROM inbox ORDER BY idempotency_key",
    )
    .fetch_all(&service.sql)
    .await
    .expect("rows");
    assert_eq!(
        (rows[0].0.as_str(), rows[0].1.as_str()),
        ("a", "processed"),
        "relayed: {rows:?}"
    );
    assert_eq!(
        (rows[1].0.as_str(), rows[1].1.as_str()),
        ("c", "dead"),
        "the transform refused it: {rows:?}"
    );
    assert!(
        rows[1]
            .3
            .as_deref()
            .is_some_and(|e| e.contains("Transform failed")),
        "{rows:?}"
    );
    assert_eq!(
        (rows[2].0.as_str(), rows[2].1.as_str(), rows[2].2.as_str()),
        ("p", "pending", "pull")
    );
    let (topic, key, payload, headers): (
        String,
        Option<String>,
        serde_json::Value,
        serde_json::Value,
    ) = sqlx::query_as("SELECT topic, key, payload, headers FROM outbox")
        .fetch_one(&service.sql)
        .await
        .expect("the relayed row");
    let (expected_topic, why) = broker.relayed_topic();
    assert_eq!(topic, expected_topic, "{why}");
    assert_eq!(key.as_deref(), Some("c1"), "the customer is the key");
    assert_eq!(payload, serde_json::json!({"order": "a", "v": 2}));
    let metrics = service.metrics().await;
    assert_eq!(
        crate::sample(
            &metrics,
            "queuebox_inbox_filtered_total{source=\"relayed\"}"
        ),
        1.0,
        "{metrics}"
    );
    service.stop().await;
    for name in &places {
        broker.delete(name).await;
    }
    RelayedRow {
        topic,
        key,
        payload,
        headers,
    }
}
