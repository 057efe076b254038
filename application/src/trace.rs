//! The spans of a message's path (receive, relay, claim, publish, capture wake-up) and the W3C
//! trace context they read from and write into message headers.
//!
//! Every span here has the target [`TARGET`]. The log output never enables that target, so with
//! export off no subscriber is interested in these spans: each is disabled at its call site, its
//! fields are never evaluated, and every function below returns at once on a disabled span (no
//! header is parsed or written). With export on, the OpenTelemetry layer the binary installs turns
//! them into OpenTelemetry spans, named and attributed after the messaging semantic conventions
//! (`otel.name`, `otel.kind`, `messaging.*`).
//!
//! Sampling is decided at the head, before a span exists ([`Traced`], [`HeadSampling`]): a span
//! costs its fields, its OpenTelemetry builder and its attributes whether or not the trace is
//! sampled, so a message of a trace left out gets no span at all. Its next hop still receives the
//! trace (the message's own, or a new one) with a new span id and the sampled flag clear, as an
//! unsampled OpenTelemetry span would send it.

use opentelemetry::trace::{
    SpanContext, SpanId, TraceContextExt as _, TraceFlags, TraceId, TraceState,
};
use queuebox_domain::trace_context::{self, TraceParent};
use std::sync::Arc;
use tracing::Span;
use tracing_opentelemetry::OpenTelemetrySpanExt as _;

/// The `tracing` target of every span of the message path.
pub const TARGET: &str = "queuebox::trace";

/// Decides whether a trace is sampled before any span of it is made here.
pub trait HeadSampler: Send + Sync + 'static {
    /// `parent` is the context the message carries (`None`: the span would start a trace);
    /// `trace_id` is the trace the span would belong to.
    fn sample(&self, parent: Option<&SpanContext>, trace_id: TraceId) -> bool;
}

/// A `tracing` layer that records nothing and carries the [`HeadSampler`]: the binary installs it
/// with the OpenTelemetry layer (behind a filter that lets nothing through, so it never changes
/// which call sites are enabled), and [`Traced`] finds it on the current dispatcher. Without it
/// (export off, or a subscriber of a test) every span is made and the SDK's sampler decides.
pub struct HeadSampling {
    sampler: Arc<dyn HeadSampler>,
}

impl HeadSampling {
    pub fn new(sampler: impl HeadSampler) -> Self {
        Self {
            sampler: Arc::new(sampler),
        }
    }
}

impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for HeadSampling {}

/// The head sampler of the current dispatcher, if it has one.
fn head_sampler() -> Option<Arc<dyn HeadSampler>> {
    tracing::dispatcher::get_default(|dispatch| {
        dispatch
            .downcast_ref::<HeadSampling>()
            .map(|head| Arc::clone(&head.sampler))
    })
}

/// What the head sampler decided for a span whose parent is `parent`: `Ok` to make it, or the
/// context its next hop receives instead (the parent's trace, or a new one, not sampled).
fn decide(sampler: &dyn HeadSampler, parent: Option<&SpanContext>) -> Result<(), SpanContext> {
    let trace_id = parent.map_or_else(new_trace_id, SpanContext::trace_id);
    if sampler.sample(parent, trace_id) {
        return Ok(());
    }
    let state = parent.map(|p| p.trace_state().clone()).unwrap_or_default();
    Err(SpanContext::new(
        trace_id,
        new_span_id(),
        TraceFlags::default(),
        false,
        state,
    ))
}

fn new_trace_id() -> TraceId {
    loop {
        let id = TraceId::from_bytes(rand::random::<u128>().to_be_bytes());
        if id != TraceId::INVALID {
            return id;
        }
    }
}

fn new_span_id() -> SpanId {
    loop {
        let id = SpanId::from_bytes(rand::random::<u64>().to_be_bytes());
        if id != SpanId::INVALID {
            return id;
        }
    }
}

/// A span of the message path, or, when the head sampler left its trace out, no span and the
/// context the next hop receives instead.
#[derive(Debug)]
pub struct Traced {
    span: Span,
    skipped: Option<SpanContext>,
}

impl Traced {
    fn made(span: Span) -> Self {
        Self {
            span,
            skipped: None,
        }
    }

    fn skipped(context: SpanContext) -> Self {
        Self {
            span: Span::none(),
            skipped: Some(context),
        }
    }

    /// The span `make` builds, as a child of the context `headers` carry (a new trace without a
    /// valid one); `make` is not called when the head sampler leaves the trace out.
    pub fn continuing(headers: &[(String, String)], make: impl FnOnce() -> Span) -> Self {
        let Some(sampler) = head_sampler() else {
            let span = make();
            continue_from(&span, headers);
            return Self::made(span);
        };
        let parent = remote_context(headers);
        match decide(&*sampler, parent.as_ref()) {
            Ok(()) => {
                let span = make();
                if let Some(parent) = parent {
                    let _ = span
                        .set_parent(opentelemetry::Context::new().with_remote_span_context(parent));
                }
                Self::made(span)
            }
            Err(skipped) => Self::skipped(skipped),
        }
    }

    /// The span `make` builds for one batch serving the rows of `contexts`: a child of their trace
    /// when they all belong to one, otherwise a root linked to each row's context. A
    /// batch of one trace is sampled as that trace; a batch of many, or of none, as a new trace.
    pub fn of_batch<'a>(
        contexts: impl Iterator<Item = &'a [(String, String)]>,
        make: impl FnOnce() -> Span,
    ) -> Self {
        let Some(sampler) = head_sampler() else {
            let span = make();
            batch_of(&span, contexts);
            return Self::made(span);
        };
        let remotes: Vec<SpanContext> = contexts.filter_map(remote_context).collect();
        let one_trace = remotes
            .first()
            .filter(|first| remotes.iter().all(|c| c.trace_id() == first.trace_id()));
        match decide(&*sampler, one_trace) {
            Ok(()) => {
                let span = make();
                link_batch(&span, remotes);
                Self::made(span)
            }
            Err(skipped) => Self::skipped(skipped),
        }
    }

    /// The span `make` builds, starting a trace of its own.
    pub fn root(make: impl FnOnce() -> Span) -> Self {
        let Some(sampler) = head_sampler() else {
            return Self::made(make());
        };
        match decide(&*sampler, None) {
            Ok(()) => Self::made(make()),
            Err(skipped) => Self::skipped(skipped),
        }
    }

    /// The span (disabled when export is off, `Span::none()` when the trace was left out).
    pub fn span(&self) -> &Span {
        &self.span
    }

    /// Writes the context the next hop continues into `headers` (see [`inject`]); for a trace left
    /// out, that trace with a new span id and the sampled flag clear.
    pub fn inject(&self, headers: &mut Vec<(String, String)>) {
        match &self.skipped {
            Some(context) => write_context(context, headers),
            None => inject(&self.span, headers),
        }
    }
}

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
fn continue_from(span: &Span, headers: &[(String, String)]) {
    if span.is_disabled() {
        return;
    }
    if let Some(remote) = remote_context(headers) {
        let _ = span.set_parent(opentelemetry::Context::new().with_remote_span_context(remote));
    }
}

/// A span of one batch that serves the rows of `contexts`: a child of their trace when they all
/// belong to one trace, otherwise a root linked to each row's context (links, not parents, where
/// one batch serves many traces).
fn batch_of<'a>(span: &Span, contexts: impl Iterator<Item = &'a [(String, String)]>) {
    if span.is_disabled() {
        return;
    }
    link_batch(span, contexts.filter_map(remote_context).collect());
}

/// Makes `span` a child of `remotes`' trace when they all belong to one, else links it to each.
fn link_batch(span: &Span, remotes: Vec<SpanContext>) {
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
    write_context(span_ref.span_context(), headers);
}

/// Writes `context` into `headers` as `traceparent` and `tracestate` (nothing when it is invalid).
fn write_context(context: &SpanContext, headers: &mut Vec<(String, String)>) {
    if !context.is_valid() {
        return;
    }
    let traceparent = trace_context::format_traceparent(
        context.trace_id().to_bytes(),
        context.span_id().to_bytes(),
        context.trace_flags().to_u8(),
    );
    trace_context::inject(headers, traceparent, context.trace_state().header());
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
        exported_under(None, body)
    }

    /// A head sampler that answers from the parent and trace it is asked about.
    struct Answer(fn(Option<&SpanContext>, TraceId) -> bool);

    impl HeadSampler for Answer {
        fn sample(&self, parent: Option<&SpanContext>, trace_id: TraceId) -> bool {
            (self.0)(parent, trace_id)
        }
    }

    /// As [`exported`], with `head` installed the way the binary installs it.
    fn exported_with_head(head: Answer, body: impl FnOnce()) -> Vec<SpanData> {
        exported_under(Some(head), body)
    }

    fn exported_under(head: Option<Answer>, body: impl FnOnce()) -> Vec<SpanData> {
        let kept = Kept::default();
        let provider = SdkTracerProvider::builder()
            .with_span_processor(kept.clone())
            .build();
        let layer = tracing_opentelemetry::layer()
            .with_tracer(provider.tracer("test"))
            .with_context_activation(head.is_none())
            .with_filter(tracing_subscriber::filter::filter_fn(|meta| {
                meta.target() == TARGET
            }));
        let head = head.map(|head| {
            HeadSampling::new(head).with_filter(tracing_subscriber::filter::filter_fn(|_| false))
        });
        let subscriber = tracing_subscriber::registry().with(layer).with(head);
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
    fn a_trace_the_head_leaves_out_gets_no_span_and_hands_on_an_unsampled_context() {
        let mut sent = headers(EXAMPLE);
        let mut made = false;
        let spans = exported_with_head(Answer(|_, _| false), || {
            let traced = Traced::continuing(&sent.clone(), || {
                made = true;
                tracing::info_span!(target: TARGET, "publish")
            });
            assert!(traced.span().is_none());
            traced.inject(&mut sent);
        });
        assert!(!made, "no span is built for a trace left out");
        assert!(spans.is_empty());
        let ours = traceparent(&sent);
        assert_eq!(ours.trace_id_hex(), "4bf92f3577b34da6a3ce929d0e0e4736");
        assert_ne!(ours.format(), EXAMPLE, "a span id of its own");
        assert!(!ours.sampled(), "the next hop does not sample it either");
        assert_eq!(
            trace_context::extract(&sent).expect("valid").1,
            vec![("rojo".to_owned(), "00f067aa0ba902b7".to_owned())],
        );
        assert_eq!(sent.len(), 3, "replaced, not added");
    }

    #[test]
    fn a_new_trace_the_head_leaves_out_still_hands_on_a_trace_id() {
        let mut sent = vec![("content-type".to_owned(), "application/json".to_owned())];
        let spans = exported_with_head(Answer(|parent, _| parent.is_some()), || {
            Traced::continuing(&sent.clone(), || tracing::info_span!(target: TARGET, "x"))
                .inject(&mut sent);
            let _ = Traced::root(|| tracing::info_span!(target: TARGET, "wake"));
        });
        assert!(spans.is_empty());
        let ours = traceparent(&sent);
        assert!(!ours.sampled());
        assert_ne!(ours.trace_id, [0; 16]);
    }

    #[test]
    fn a_trace_the_head_samples_gets_its_span_as_before() {
        let mut sent = headers(EXAMPLE);
        let asked = std::sync::Mutex::new(Vec::new());
        let spans = exported_with_head(
            Answer(|parent, trace| parent.is_some_and(|p| p.trace_id() == trace)),
            || {
                let traced = Traced::continuing(
                    &sent.clone(),
                    || tracing::info_span!(target: TARGET, "publish"),
                );
                traced.inject(&mut sent);
                asked.lock().expect("lock").push(traced.span().is_none());
            },
        );
        assert_eq!(*asked.lock().expect("lock"), vec![false]);
        assert_eq!(spans.len(), 1);
        assert_eq!(spans[0].parent_span_id.to_string(), "00f067aa0ba902b7");
        let ours = traceparent(&sent);
        assert!(ours.sampled());
        assert_eq!(spans[0].span_context.span_id().to_bytes(), ours.parent_id);
    }

    #[test]
    fn a_batch_is_sampled_as_its_one_trace_or_as_a_new_one() {
        let one = [headers(EXAMPLE), headers(EXAMPLE)];
        let many = [headers(EXAMPLE), headers(OTHER)];
        // Samples the example's trace only: a batch of it is kept, a batch of many traces (a
        // new trace, no parent) is left out.
        let spans = exported_with_head(
            Answer(|parent, _| {
                parent
                    .is_some_and(|p| p.trace_id().to_string() == "4bf92f3577b34da6a3ce929d0e0e4736")
            }),
            || {
                let _one = Traced::of_batch(
                    one.iter().map(Vec::as_slice),
                    || tracing::info_span!(target: TARGET, "one"),
                );
                let _many = Traced::of_batch(
                    many.iter().map(Vec::as_slice),
                    || tracing::info_span!(target: TARGET, "many"),
                );
            },
        );
        let names: Vec<_> = spans.iter().map(|s| s.name.to_string()).collect();
        assert_eq!(names, vec!["one".to_owned()]);
        assert_eq!(
            spans[0].span_context.trace_id().to_string(),
            "4bf92f3577b34da6a3ce929d0e0e4736"
        );
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
