//! The publisher suite: every MUST of [`Publisher::publish`], checked against real destinations a
//! [`PublisherFixture`] sets up (an accepting, a refusing, an unreachable and a silent one).
//!
//! "Received" always means "the destination took responsibility for it": an HTTP receiver that
//! answered 2xx, a broker queue that holds the message. A request an HTTP receiver refused, or a
//! message a broker nacked, is not received.

use async_trait::async_trait;
use queuebox_ports::publish::{OutboundMessage, PublishError, PublishErrorKind, Publisher};
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

/// How long the suite waits for anything a destination does before it fails.
pub const WAIT: Duration = Duration::from_secs(10);

/// The destinations of one kind, as the suite needs them. Each constructor sets up a destination
/// of its own (its own receiver, exchange, queue) and a publisher configured for it with the
/// fixture's [`secret`](PublisherFixture::secret) among its credentials and its
/// [`reason_limit`](PublisherFixture::reason_limit) as the configured reason limit.
#[async_trait]
pub trait PublisherFixture: Sized + Send + Sync + 'static {
    /// Whether the destination kind can be tested here (a broker URL is set, say). When false,
    /// each test prints why and passes without running; the constructors are not called.
    fn available() -> bool {
        true
    }

    /// A destination that takes every message.
    async fn accepting() -> (Self, Arc<dyn Publisher>);

    /// A destination that answers every message with a refusal (an HTTP 5xx, a broker nack). Where
    /// the protocol lets it, the refusal echoes the publisher's credential and more text than the
    /// reason limit allows, so the suite sees the redaction and the cut.
    async fn refusing() -> (Self, Arc<dyn Publisher>);

    /// A destination where nothing listens (a closed port).
    async fn unreachable() -> (Self, Arc<dyn Publisher>);

    /// A destination that takes messages but holds its answers until [`release`] (a receiver that
    /// does not answer, a proxy holding the broker's replies). Its publisher's timeout is
    /// [`timeout`](PublisherFixture::timeout).
    ///
    /// [`release`]: PublisherFixture::release
    async fn silent() -> (Self, Arc<dyn Publisher>);

    /// The credential the publishers are configured with; it MUST NOT appear in a reason.
    fn secret(&self) -> &str;

    /// The most bytes a failure reason of these publishers may hold: the configured limit, plus
    /// any fixed text the adapter documents around the part it cuts.
    fn reason_limit(&self) -> usize;

    /// The publish timeout of the silent destination's publisher.
    fn timeout(&self) -> Duration;

    /// The ids of the messages the destination has taken responsibility for so far.
    async fn received(&self) -> Vec<String>;

    /// Returns once a publish has reached the silent destination (which is holding its answer).
    async fn wait_until_reached(&self);

    /// The silent destination answers from now on, accepting what arrives.
    async fn release(&self);

    /// Removes what the fixture set up. Called at the end of every test that passes.
    async fn done(self) {}
}

/// A message with a fresh id.
pub fn message(topic: &str) -> OutboundMessage {
    OutboundMessage {
        id: uuid::Uuid::new_v4().to_string(),
        topic: topic.to_owned(),
        key: Some("cust-42".to_owned()),
        aggregate_type: Some("order".to_owned()),
        payload: r#"{"orderId":"o-1","amount":99.5}"#.to_owned(),
        headers: vec![("x-tenant".to_owned(), "acme".to_owned())],
        attempt: 0,
        ..OutboundMessage::default()
    }
}

fn skipped<F: PublisherFixture>() -> bool {
    if F::available() {
        return false;
    }
    eprintln!(
        "skipped: {} is not available here (see its fixture)",
        std::any::type_name::<F>()
    );
    true
}

/// Waits until every id of `ids` is received, or fails at [`WAIT`].
async fn wait_received<F: PublisherFixture>(fx: &F, ids: &[&str]) -> Vec<String> {
    let deadline = Instant::now() + WAIT;
    loop {
        let received = fx.received().await;
        if ids.iter().all(|id| received.iter().any(|r| r == id)) {
            return received;
        }
        assert!(
            Instant::now() < deadline,
            "not received within {WAIT:?}: {ids:?}; received {received:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Publishes `message`, failing the test if the call outlives `limit`.
async fn publish_within(
    publisher: &dyn Publisher,
    message: &OutboundMessage,
    limit: Duration,
) -> Result<(), PublishError> {
    tokio::time::timeout(limit, publisher.publish(message))
        .await
        .unwrap_or_else(|_| panic!("the publish did not return within {limit:?}"))
}

/// The checks every failure reason must pass: not empty, no secret, within the limit.
fn check_reason<F: PublisherFixture>(fx: &F, error: &PublishError) {
    assert!(
        !error.reason.trim().is_empty(),
        "an empty reason: {error:?}"
    );
    assert!(
        !error.reason.contains(fx.secret()),
        "the reason holds the secret: {}",
        error.reason
    );
    assert!(
        error.reason.len() <= fx.reason_limit(),
        "the reason holds {} bytes, the limit is {}: {}",
        error.reason.len(),
        fx.reason_limit(),
        error.reason
    );
}

/// A publish the destination took returns `Ok`, and only then: the message is there.
pub async fn publish_succeeds_only_once_the_destination_took_the_message<F: PublisherFixture>() {
    if skipped::<F>() {
        return;
    }
    let (fx, publisher) = F::accepting().await;
    let sent = message("conformance.created");
    publish_within(publisher.as_ref(), &sent, WAIT)
        .await
        .unwrap_or_else(|e| panic!("an accepting destination failed the publish: {e:?}"));
    let received = wait_received(&fx, &[&sent.id]).await;
    assert_eq!(
        received.iter().filter(|id| **id == sent.id).count(),
        1,
        "{received:?}"
    );
    fx.done().await;
}

/// A refusal is an `Err` of kind `Rejected`, never a success; nothing was taken.
pub async fn publish_a_refusal_is_rejected_and_not_delivered<F: PublisherFixture>() {
    if skipped::<F>() {
        return;
    }
    let (fx, publisher) = F::refusing().await;
    for _ in 0..2 {
        let sent = message("conformance.refused");
        let error = publish_within(publisher.as_ref(), &sent, WAIT)
            .await
            .expect_err("a refused publish reported success");
        assert_eq!(error.kind, PublishErrorKind::Rejected, "{error:?}");
        check_reason(&fx, &error);
        assert!(
            !fx.received().await.contains(&sent.id),
            "a refused message counts as received"
        );
    }
    fx.done().await;
}

/// No connection is an `Err` of kind `Unreachable`, returned well within the wait.
pub async fn publish_an_unreachable_destination_is_unreachable<F: PublisherFixture>() {
    if skipped::<F>() {
        return;
    }
    let (fx, publisher) = F::unreachable().await;
    for _ in 0..2 {
        let error = publish_within(publisher.as_ref(), &message("conformance.down"), WAIT)
            .await
            .expect_err("a publish to a closed port reported success");
        assert_eq!(error.kind, PublishErrorKind::Unreachable, "{error:?}");
        check_reason(&fx, &error);
    }
    fx.done().await;
}

/// No answer within the publisher's timeout is an `Err` of kind `Timeout`, returned at about the
/// timeout, not after the destination finally answers.
pub async fn publish_no_answer_in_time_is_a_timeout<F: PublisherFixture>() {
    if skipped::<F>() {
        return;
    }
    let (fx, publisher) = F::silent().await;
    let timeout = fx.timeout();
    let started = Instant::now();
    let error = publish_within(
        publisher.as_ref(),
        &message("conformance.slow"),
        timeout + WAIT,
    )
    .await
    .expect_err("a publish without an answer reported success");
    let elapsed = started.elapsed();
    assert_eq!(error.kind, PublishErrorKind::Timeout, "{error:?}");
    check_reason(&fx, &error);
    assert!(
        elapsed >= timeout / 2,
        "gave up after {elapsed:?}, the timeout is {timeout:?}"
    );
    fx.release().await;
    fx.done().await;
}

/// Every failure reason, whatever the cause, is redacted (the configured secret never appears,
/// also when the destination echoes it) and stays within the configured limit.
pub async fn publish_failure_reasons_are_redacted_and_cut_to_the_limit<F: PublisherFixture>() {
    if skipped::<F>() {
        return;
    }
    let mut errors = Vec::new();
    let (fx, publisher) = F::refusing().await;
    let error = publish_within(publisher.as_ref(), &message("conformance.r"), WAIT)
        .await
        .expect_err("refused");
    check_reason(&fx, &error);
    errors.push(error);
    fx.done().await;

    let (fx, publisher) = F::unreachable().await;
    let error = publish_within(publisher.as_ref(), &message("conformance.u"), WAIT)
        .await
        .expect_err("unreachable");
    check_reason(&fx, &error);
    errors.push(error);
    fx.done().await;

    let (fx, publisher) = F::silent().await;
    let error = publish_within(
        publisher.as_ref(),
        &message("conformance.s"),
        fx.timeout() + WAIT,
    )
    .await
    .expect_err("silent");
    check_reason(&fx, &error);
    errors.push(error);
    fx.release().await;
    fx.done().await;

    // The Display of the error is the reason, so a log line holds nothing more.
    for error in &errors {
        assert_eq!(error.to_string(), error.reason);
    }
}

/// Concurrent publishes on one publisher each return `Ok` once their own message was taken.
pub async fn publish_concurrent_calls_are_each_confirmed<F: PublisherFixture>() {
    if skipped::<F>() {
        return;
    }
    let (fx, publisher) = F::accepting().await;
    let messages: Vec<OutboundMessage> = (0..32).map(|_| message("conformance.many")).collect();
    let results = futures::future::join_all(
        messages
            .iter()
            .map(|m| publish_within(publisher.as_ref(), m, WAIT)),
    )
    .await;
    for (m, result) in messages.iter().zip(&results) {
        assert!(result.is_ok(), "{}: {result:?}", m.id);
    }
    let ids: Vec<&str> = messages.iter().map(|m| m.id.as_str()).collect();
    wait_received(&fx, &ids).await;
    fx.done().await;
}

/// The dispatcher may drop a publish future while it waits for the destination (claim lost,
/// shutdown). The publisher stays usable: the next publish is confirmed.
pub async fn publish_a_future_dropped_mid_call_leaves_the_publisher_usable<F: PublisherFixture>() {
    if skipped::<F>() {
        return;
    }
    let (fx, publisher) = F::silent().await;
    let abandoned = message("conformance.dropped");
    {
        let call = publisher.publish(&abandoned);
        tokio::pin!(call);
        tokio::select! {
            outcome = &mut call => panic!(
                "the silent destination answered before the test could drop the call: {outcome:?}"
            ),
            () = fx.wait_until_reached() => {}
        }
        // `call` is dropped here, mid-call.
    }
    fx.release().await;
    let next = message("conformance.after");
    publish_within(publisher.as_ref(), &next, WAIT)
        .await
        .unwrap_or_else(|e| panic!("the publisher is unusable after a dropped call: {e:?}"));
    wait_received(&fx, &[&next.id]).await;
    fx.done().await;
}
