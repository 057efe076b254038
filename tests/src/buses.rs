//! Broker sources for tests that run all three at once (the soak): a RabbitMQ queue, a Kafka topic
//! and a JetStream stream of the test's own on the brokers `scripts/services.sh` started, the
//! `sources:` block that makes QueueBox consume them, and publishers that keep the id of every
//! message its broker acknowledged (a publisher confirm, a produce acknowledgement, a JetStream
//! ack): the messages QueueBox must store exactly once.

use async_nats::jetstream::{self, stream};
use lapin::options::{
    BasicPublishOptions, ConfirmSelectOptions, QueueDeclareOptions, QueueDeleteOptions,
};
use lapin::types::FieldTable;
use lapin::{BasicProperties, Confirmation, Connection, ConnectionProperties};
use rdkafka::ClientConfig;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::producer::{FutureProducer, FutureRecord};
use std::time::{Duration, Instant};

/// The source names in the configuration [`Buses::sources_yaml`] writes, one per broker.
pub const SOURCES: [&str; 3] = ["bus-amqp", "bus-kafka", "bus-nats"];

/// Kafka partitions of the test topic, so that several replicas of one group share it.
const PARTITIONS: i32 = 4;

fn env(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| {
        panic!("{name} is not set: start the services first with `eval \"$(bash scripts/services.sh)\"`")
    })
}

/// One message: its id (the idempotency key QueueBox reads at `$.id`) and its body.
fn message(prefix: &str, i: u64) -> (String, String) {
    let id = format!("{prefix}-{i}");
    let body = format!(
        r#"{{"id":"{id}","agg":"{prefix}-agg-{}","type":"bus"}}"#,
        i % 16
    );
    (id, body)
}

/// Counts the failed attempts to publish one message; gives up (fails the test) after a minute
/// of them, since the brokers are not faulted while a test publishes.
fn retry(broker: &str, id: &str, attempts: &mut u32) -> Duration {
    *attempts += 1;
    assert!(
        *attempts < 600,
        "{broker} did not acknowledge message {id} in a minute of attempts"
    );
    Duration::from_millis(100)
}

/// Waits until the `i`-th of `count` messages spread evenly over `over` is due.
async fn pace(begun: Instant, i: u64, count: u64, over: Duration) {
    let due = begun + over.mul_f64(i as f64 / count.max(1) as f64);
    tokio::time::sleep_until(due.into()).await;
}

/// What a test made on the three brokers; [`Buses::remove`] deletes it.
pub struct Buses {
    /// The durable RabbitMQ queue (on the default virtual host).
    pub queue: String,
    /// The Kafka topic.
    pub topic: String,
    /// The consumer group the replicas share.
    pub group: String,
    /// The JetStream stream, over `<stream>.>`.
    pub stream: String,
}

impl Buses {
    /// Declares the queue, creates the topic and the stream, all with names of their own.
    pub async fn create() -> Self {
        let suffix = uuid::Uuid::new_v4().simple().to_string();
        let buses = Self {
            queue: format!("qb-e2e-bus-{suffix}"),
            topic: format!("qb-e2e-bus-{suffix}"),
            group: format!("qb-e2e-bus-{suffix}"),
            stream: format!("qb_e2e_bus_{suffix}"),
        };
        let connection = amqp().await;
        let channel = connection.create_channel().await.expect("AMQP channel");
        channel
            .queue_declare(
                buses.queue.as_str().into(),
                QueueDeclareOptions {
                    durable: true,
                    ..Default::default()
                },
                FieldTable::default(),
            )
            .await
            .expect("declare the queue");
        let _ = connection.close(200, "done".into()).await;
        let created = kafka_admin()
            .create_topics(
                &[NewTopic::new(
                    &buses.topic,
                    PARTITIONS,
                    TopicReplication::Fixed(1),
                )],
                &AdminOptions::new().operation_timeout(Some(Duration::from_secs(30))),
            )
            .await
            .expect("create the topic");
        for result in created {
            result.unwrap_or_else(|(topic, code)| panic!("creating topic {topic}: {code}"));
        }
        jetstream()
            .await
            .create_stream(stream::Config {
                name: buses.stream.clone(),
                subjects: vec![format!("{}.>", buses.stream)],
                ..stream::Config::default()
            })
            .await
            .expect("create the stream");
        buses
    }

    /// The `sources:` entries (without the `sources:` line) for the three brokers: each stores its
    /// messages keyed by `$.id`, with aggregate `$.agg`, under topic `bus.<broker>`. NATS redelivers
    /// after 5 s without an ack, so a killed replica's messages come back within the test.
    pub fn sources_yaml(&self) -> String {
        let common =
            "    idempotencyKeyPath: $.id\n    aggregateIdPath: $.agg\n    eventTypePath: $.type\n";
        format!(
            "  {amqp_name}:\n    type: rabbitmq\n    queueName: {queue}\n    connectionUrl: {amqp}\n\
             \x20   prefetchCount: 100\n    topic: bus.amqp\n{common}\
             \x20 {kafka_name}:\n    type: kafka\n    bootstrapServers: {kafka}\n    topics: [{topic}]\n\
             \x20   groupId: {group}\n    topic: bus.kafka\n{common}\
             \x20 {nats_name}:\n    type: nats\n    servers: {nats}\n    stream: {stream}\n\
             \x20   durable: queuebox-soak\n    ackWaitMs: 5000\n    topic: bus.nats\n{common}",
            amqp_name = SOURCES[0],
            kafka_name = SOURCES[1],
            nats_name = SOURCES[2],
            queue = self.queue,
            amqp = env("QB_TEST_AMQP_URL"),
            kafka = env("QB_TEST_KAFKA_BOOTSTRAP"),
            topic = self.topic,
            group = self.group,
            nats = env("QB_TEST_NATS_URL"),
            stream = self.stream,
        )
    }

    /// Publishes `count` messages to each broker, spread evenly over `over`, and returns the ids
    /// the brokers acknowledged (every one: a publish that was not acknowledged is sent again with
    /// the same id, as an application would).
    pub async fn publish(&self, count: u64, over: Duration) -> Vec<String> {
        let (amqp, kafka, nats) = tokio::join!(
            self.publish_amqp(count, over),
            self.publish_kafka(count, over),
            self.publish_nats(count, over)
        );
        [amqp, kafka, nats].concat()
    }

    async fn publish_amqp(&self, count: u64, over: Duration) -> Vec<String> {
        let connection = amqp().await;
        let channel = connection.create_channel().await.expect("AMQP channel");
        channel
            .confirm_select(ConfirmSelectOptions::default())
            .await
            .expect("publisher confirms");
        let begun = Instant::now();
        let mut acknowledged = Vec::new();
        for i in 0..count {
            let (id, body) = message("amqp", i);
            let mut attempts = 0;
            loop {
                let confirm = channel
                    .basic_publish(
                        "".into(),
                        self.queue.as_str().into(),
                        BasicPublishOptions::default(),
                        body.as_bytes(),
                        BasicProperties::default().with_delivery_mode(2),
                    )
                    .await;
                if let Ok(confirm) = confirm
                    && let Ok(Confirmation::Ack(None)) = confirm.await
                {
                    break;
                }
                tokio::time::sleep(retry("RabbitMQ", &id, &mut attempts)).await;
            }
            acknowledged.push(id);
            pace(begun, i + 1, count, over).await;
        }
        let _ = connection.close(200, "done".into()).await;
        acknowledged
    }

    async fn publish_kafka(&self, count: u64, over: Duration) -> Vec<String> {
        let producer: FutureProducer = ClientConfig::new()
            .set("bootstrap.servers", env("QB_TEST_KAFKA_BOOTSTRAP"))
            .set("enable.idempotence", "true")
            .create()
            .expect("Kafka producer");
        let begun = Instant::now();
        let mut acknowledged = Vec::new();
        for i in 0..count {
            let (id, body) = message("kafka", i);
            let key = format!("kafka-agg-{}", i % 16);
            let mut attempts = 0;
            while producer
                .send(
                    FutureRecord::to(&self.topic).key(&key).payload(&body),
                    Duration::from_secs(10),
                )
                .await
                .is_err()
            {
                tokio::time::sleep(retry("Kafka", &id, &mut attempts)).await;
            }
            acknowledged.push(id);
            pace(begun, i + 1, count, over).await;
        }
        acknowledged
    }

    async fn publish_nats(&self, count: u64, over: Duration) -> Vec<String> {
        let js = jetstream().await;
        let begun = Instant::now();
        let mut acknowledged = Vec::new();
        for i in 0..count {
            let (id, body) = message("nats", i);
            let mut attempts = 0;
            loop {
                let sent = js
                    .publish(format!("{}.events", self.stream), body.clone().into())
                    .await;
                if let Ok(ack) = sent
                    && ack.await.is_ok()
                {
                    break;
                }
                tokio::time::sleep(retry("NATS", &id, &mut attempts)).await;
            }
            acknowledged.push(id);
            pace(begun, i + 1, count, over).await;
        }
        acknowledged
    }

    /// Deletes the queue, the topic and the stream (best effort: the test's verdict is taken).
    pub async fn remove(self) {
        if let Ok(connection) =
            Connection::connect(&env("QB_TEST_AMQP_URL"), ConnectionProperties::default()).await
        {
            if let Ok(channel) = connection.create_channel().await {
                let _ = channel
                    .queue_delete(self.queue.as_str().into(), QueueDeleteOptions::default())
                    .await;
            }
            let _ = connection.close(200, "done".into()).await;
        }
        let _ = kafka_admin()
            .delete_topics(&[&self.topic], &AdminOptions::new())
            .await;
        let _ = jetstream().await.delete_stream(&self.stream).await;
    }
}

async fn amqp() -> Connection {
    Connection::connect(&env("QB_TEST_AMQP_URL"), ConnectionProperties::default())
        .await
        .expect("connect to RabbitMQ")
}

fn kafka_admin() -> AdminClient<DefaultClientContext> {
    ClientConfig::new()
        .set("bootstrap.servers", env("QB_TEST_KAFKA_BOOTSTRAP"))
        .create()
        .expect("Kafka admin client")
}

async fn jetstream() -> jetstream::Context {
    let client = async_nats::connect(env("QB_TEST_NATS_URL"))
        .await
        .expect("connect to NATS");
    jetstream::new(client)
}
