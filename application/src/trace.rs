//! The spans of a message's path (receive, relay, claim, publish, capture wake-up) and the W3C
//! trace context they read from and write into message headers.
//!
//! Every span here has the target [`TARGET`]. The log output never enables that target, so with
//! export off no subscriber is interested in these spans: each is disabled at its call site, its
//! fields are never evaluated, and every function below returns at once on a disabled span (no
//! header is parsed or written). With export on, the OpenTelemetry layer the binary installs turns
//! them into OpenTelemetry spans, named and attributed after the messaging semantic conventions
//! (`otel.name`, `otel.kind`, `messaging.*`).

use opentelemetry::trace::{
    SpanContext, SpanId, TraceContextExt as _, TraceFlags, TraceId, TraceState,
};
use queuebox_domain::trace_context::{self, TraceParent};
use tracing::Span;
use tracing_opentelemetry::OpenTelemetrySpanExt as _;

/// The `tracing` target of every span of the message path.
pub const TARGET: &str = "queuebox::trace";

/// The remote span context `headers` carry, when their `traceparent` is valid (W3C rules; see
/// `queuebox_domain::trace_context`). An invalid `tracestate` is dropped, the `traceparent` kept.
pub fn remote_context(headers: &[(String, String)]) -> Option<SpanContext> {
    let (parent, members) = trace_context::extract(headers)?;
    Some(span_context(&parent, members))
}

fn span_context(parent: &TraceParent, members: Vec<(String, String)>) -> SpanContext {
    let state = TraceState::from_key_value(members).unwrap_or_default();
    SpanContext::new(
        TraceId::from_bytes(parent.trace_id),
        SpanId::from_bytes(parent.parent_id),
        TraceFlags::new(parent.flags),
        true,
        state,
    )
}

/// Makes `span` a child of the context `headers` carry; without a valid one the span starts a new
/// trace. Must run before the span is first entered.
pub fn continue_from(span: &Span, headers: &[(String, String)]) {
    if span.is_disabled() {
        return;
    }
    if let Some(remote) = remote_context(headers) {
        let _ = span.set_parent(opentelemetry::Context::new().with_remote_span_context(remote));
    }
}

/// Links `span` to the context `headers` carry (nothing without a valid one).
pub fn link_to(span: &Span, headers: &[(String, String)]) {
    if span.is_disabled() {
        return;
    }
    if let Some(remote) = remote_context(headers) {
        span.add_link(remote);
    }
}

/// A span of one batch that serves the rows of `contexts`: a child of their trace when they all
/// belong to one trace, otherwise a root linked to each row's context (links, not parents, where
/// one batch serves many traces).
pub fn batch_of<'a>(span: &Span, contexts: impl Iterator<Item = &'a [(String, String)]>) {
    if span.is_disabled() {
        return;
    }
    let remotes: Vec<SpanContext> = contexts.filter_map(remote_context).collect();
    let Some(first) = remotes.first() else {
        return;
    };
    if remotes.iter().all(|c| c.trace_id() == first.trace_id()) {
        let _ =
            span.set_parent(opentelemetry::Context::new().with_remote_span_context(first.clone()));
    } else {
        for remote in remotes {
            span.add_link(remote);
        }
    }
}

/// Writes the context of `span`, one of this module's spans, into `headers` as `traceparent` and `tracestate`, replacing the
/// ones there (so the next hop's parent is this span). Leaves `headers` alone when the span is
/// disabled (export off) or has no valid context.
pub fn inject(span: &Span, headers: &mut Vec<(String, String)>) {
    if span.metadata().is_none_or(|meta| meta.target() != TARGET) {
        return;
    }
    let context = span.context();
    let span_ref = context.span();
    let ours = span_ref.span_context();
    if !ours.is_valid() {
        return;
    }
    let traceparent = trace_context::format_traceparent(
        ours.trace_id().to_bytes(),
        ours.span_id().to_bytes(),
        ours.trace_flags().to_u8(),
    );
    trace_context::inject(headers, traceparent, ours.trace_state().header());
}

/// The text of `trace_id` and `span_id` of the span current on this thread, for log lines;
/// `None` when no span with a valid context is current (export off, or outside any span).
pub fn current_ids() -> Option<(String, String)> {
    let current = Span::current();
    if current.is_disabled() {
        return None;
    }
    let context = current.context();
    let span_ref = context.span();
    let ours = span_ref.span_context();
    ours.is_valid()
        .then(|| (ours.trace_id().to_string(), ours.span_id().to_string()))
}

/// Records the end of a span: `error.type` and an error status for a failure.
pub fn record_failure(span: &Span, error_type: &str) {
    if span.is_disabled() {
        return;
    }
    span.record("error.type", error_type);
    span.record("otel.status_code", "ERROR");
}

#[cfg(test)]
mod tests {
    use super::*;
    use opentelemetry::trace::TracerProvider as _;
    use opentelemetry_sdk::error::OTelSdkResult;
    use opentelemetry_sdk::trace::{SdkTracerProvider, SpanData, SpanProcessor};
    use std::sync::{Arc, Mutex};
    use tracing_subscriber::Layer as _;
    use tracing_subscriber::layer::SubscriberExt as _;

    const EXAMPLE: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    const OTHER: &str = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";

    /// Keeps every ended span.
    #[derive(Debug, Clone, Default)]
    struct Kept(Arc<Mutex<Vec<SpanData>>>);

    impl SpanProcessor for Kept {
        fn on_start(&self, _: &mut opentelemetry_sdk::trace::Span, _: &opentelemetry::Context) {}
        fn on_end(&self, span: SpanData) {
            self.0.lock().expect("lock").push(span);
        }
        fn force_flush(&self) -> OTelSdkResult {
            Ok(())
        }
        fn shutdown_with_timeout(&self, _: std::time::Duration) -> OTelSdkResult {
            Ok(())
        }
    }

    /// Runs `body` under a subscriber that exports this module's spans to the returned list.
    fn exported(body: impl FnOnce()) -> Vec<SpanData> {
        let kept = Kept::default();
        let provider = SdkTracerProvider::builder()
            .with_span_processor(kept.clone())
            .build();
        let layer = tracing_opentelemetry::layer()
            .with_tracer(provider.tracer("test"))
            .with_filter(tracing_subscriber::filter::filter_fn(|meta| {
                meta.target() == TARGET
            }));
        let subscriber = tracing_subscriber::registry().with(layer);
        tracing::subscriber::with_default(subscriber, body);
        kept.0.lock().map(|spans| spans.clone()).unwrap_or_default()
    }

    fn headers(traceparent: &str) -> Vec<(String, String)> {
        vec![
            ("content-type".to_owned(), "application/json".to_owned()),
            ("Traceparent".to_owned(), traceparent.to_owned()),
            ("tracestate".to_owned(), "rojo=00f067aa0ba902b7".to_owned()),
        ]
    }

    fn traceparent(headers: &[(String, String)]) -> TraceParent {
        let (parent, _) = trace_context::extract(headers).expect("a valid traceparent");
        parent
    }

    #[test]
    fn a_span_continues_the_received_trace_and_hands_on_its_own_context() {
        let mut sent = headers(EXAMPLE);
        let spans = exported(|| {
            let span = tracing::info_span!(target: TARGET, "receive");
            continue_from(&span, &sent.clone());
            inject(&span, &mut sent);
        });
        let ours = traceparent(&sent);
        assert_eq!(ours.trace_id_hex(), "4bf92f3577b34da6a3ce929d0e0e4736");
        assert_ne!(ours.format(), EXAMPLE, "the next hop's parent is our span");
        assert!(ours.sampled());
        assert_eq!(
            trace_context::extract(&sent).expect("valid").1,
            vec![("rojo".to_owned(), "00f067aa0ba902b7".to_owned())],
            "the tracestate travels on"
        );
        assert_eq!(sent.len(), 3, "replaced, not added");
        assert_eq!(spans.len(), 1);
        assert_eq!(spans[0].parent_span_id.to_string(), "00f067aa0ba902b7");
        assert_eq!(spans[0].span_context.span_id().to_bytes(), ours.parent_id);
    }

    #[test]
    fn a_malformed_traceparent_starts_a_new_trace() {
        let bad = "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01";
        let mut sent = headers(bad);
        exported(|| {
            let span = tracing::info_span!(target: TARGET, "receive");
            continue_from(&span, &sent.clone());
            inject(&span, &mut sent);
        });
        let ours = traceparent(&sent);
        assert_ne!(ours.trace_id_hex(), "4bf92f3577b34da6a3ce929d0e0e4736");
    }

    #[test]
    fn a_batch_of_one_trace_is_its_child_and_of_many_traces_links_them() {
        let one = [headers(EXAMPLE), headers(EXAMPLE)];
        let many = [headers(EXAMPLE), headers(OTHER), headers("junk")];
        let spans = exported(|| {
            let span = tracing::info_span!(target: TARGET, "one");
            batch_of(&span, one.iter().map(Vec::as_slice));
            drop(span);
            let span = tracing::info_span!(target: TARGET, "many");
            batch_of(&span, many.iter().map(Vec::as_slice));
        });
        let one = spans.iter().find(|s| s.name == "one").expect("one");
        assert_eq!(
            one.span_context.trace_id().to_string(),
            "4bf92f3577b34da6a3ce929d0e0e4736"
        );
        assert!(one.links.is_empty());
        let many = spans.iter().find(|s| s.name == "many").expect("many");
        assert_eq!(many.parent_span_id, SpanId::INVALID);
        assert_eq!(many.links.len(), 2, "the invalid context is not linked");
    }

    #[test]
    fn without_export_headers_are_left_alone() {
        let mut sent = headers(EXAMPLE);
        let before = sent.clone();
        // No subscriber at all, then one without the OpenTelemetry layer.
        let span = tracing::info_span!(target: TARGET, "receive");
        continue_from(&span, &before);
        inject(&span, &mut sent);
        tracing::subscriber::with_default(tracing_subscriber::registry(), || {
            let span = tracing::info_span!(target: TARGET, "receive");
            continue_from(&span, &before);
            inject(&span, &mut sent);
            assert!(current_ids().is_none());
        });
        assert_eq!(sent, before);
    }
}
