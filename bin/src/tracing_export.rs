//! OTLP export of the message path's spans (`telemetry.tracing`, off by default).
//!
//! Spans leave the delivery path through a bounded queue: a span that finds the queue full is
//! counted (`queuebox_tracing_spans_dropped_total{reason="queue_full"}`) and dropped, so a slow or
//! absent collector never holds a delivery back. One thread of its own drains the queue in batches
//! and sends them over OTLP (HTTP/protobuf or gRPC); a batch the collector does not take is counted
//! (`reason="export_failed"`) and dropped, with one warning when export starts failing and one
//! line when it works again.

use opentelemetry::KeyValue;
use opentelemetry::trace::{SpanContext, SpanKind, TraceContextExt as _, TraceId};
use opentelemetry_otlp::WithExportConfig as _;
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::trace::{
    Sampler, SamplingDecision, SdkTracer, SdkTracerProvider, ShouldSample, SpanData,
    SpanExporter as _, SpanProcessor,
};
use queuebox_application::trace::{HeadSampler, HeadSampling};
use queuebox_config::{OtlpProtocol, TracingSettings};
use queuebox_ports::metrics as names;
use std::sync::Mutex;
use std::sync::mpsc::{Receiver, RecvTimeoutError, SyncSender, TrySendError, sync_channel};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The most spans sent in one export request.
const MAX_BATCH: usize = 512;
/// The longest a span waits in the queue before its batch is sent.
const MAX_DELAY: Duration = Duration::from_secs(1);
/// How long one export request may take.
const EXPORT_TIMEOUT: Duration = Duration::from_secs(5);
/// The service name when neither the configuration nor `OTEL_SERVICE_NAME` gives one.
const DEFAULT_SERVICE_NAME: &str = "queuebox";

/// The running export; [`Export::shutdown`] sends what is queued and stops the thread.
pub struct Export {
    provider: SdkTracerProvider,
}

impl Export {
    /// Sends the queued spans (bounded by the export timeout) and stops.
    pub fn shutdown(self) {
        if let Err(error) = self.provider.shutdown() {
            tracing::warn!(%error, "trace export did not shut down cleanly");
        }
    }
}

/// Starts export when `settings.enabled`, returning the tracer the `tracing` layer writes to.
/// `env` is the process environment, read for `OTEL_SERVICE_NAME` (the OTLP endpoint, sampler and
/// resource variables are read by the OpenTelemetry SDK itself).
pub fn start(
    settings: &TracingSettings,
    env: &[(String, String)],
) -> anyhow::Result<Option<(Export, Tracing)>> {
    // Both series are in the scrape from the start (at 0 while export is off or has dropped
    // nothing), so a dashboard or alert on them never reads an absent series.
    metrics::counter!(names::TRACING_SPANS_DROPPED_TOTAL, "reason" => "queue_full").absolute(0);
    metrics::counter!(names::TRACING_SPANS_DROPPED_TOTAL, "reason" => "export_failed").absolute(0);
    if !settings.enabled {
        return Ok(None);
    }
    let var = |name: &str| {
        env.iter()
            .find(|(key, value)| key == name && !value.is_empty())
            .map(|(_, value)| value.clone())
    };
    let mut resource = Resource::builder();
    if let Some(name) = &settings.service_name {
        resource = resource.with_service_name(name.clone());
    } else if var("OTEL_SERVICE_NAME").is_none()
        && !var("OTEL_RESOURCE_ATTRIBUTES").is_some_and(|attrs| attrs.contains("service.name="))
    {
        resource = resource.with_service_name(DEFAULT_SERVICE_NAME);
    }
    let resource = resource
        .with_attribute(KeyValue::new("service.version", env!("CARGO_PKG_VERSION")))
        .build();

    // The configured sampler decides at the head, before a span is made (HeadSampling): a span
    // costs its builder and attributes whether sampled or not, and most are not. The SDK then
    // records every span it is given; ParentBased keeps a span under an unsampled parent out.
    let sampler: Box<dyn ShouldSample> = match settings.sample_ratio {
        Some(ratio) => Box::new(Sampler::ParentBased(Box::new(Sampler::TraceIdRatioBased(
            ratio,
        )))),
        // OTEL_TRACES_SAMPLER and OTEL_TRACES_SAMPLER_ARG, read by the SDK's default.
        None => opentelemetry_sdk::trace::Config::default().sampler,
    };
    let processor = QueueProcessor::start(settings, resource.clone())?;
    let provider = SdkTracerProvider::builder()
        .with_span_processor(processor)
        .with_resource(resource)
        .with_sampler(Sampler::ParentBased(Box::new(Sampler::AlwaysOn)))
        .build();
    use opentelemetry::trace::TracerProvider as _;
    let tracer = provider.tracer("queuebox");
    let head = HeadSampling::new(ConfiguredSampler(sampler));
    Ok(Some((Export { provider }, Tracing { tracer, head })))
}

/// What the log setup installs when export is on: the tracer of the OpenTelemetry layer and the
/// head sampler of the message path.
pub struct Tracing {
    pub tracer: SdkTracer,
    pub head: HeadSampling,
}

/// The configured OpenTelemetry sampler, asked at the head.
#[derive(Debug)]
struct ConfiguredSampler(Box<dyn ShouldSample>);

impl HeadSampler for ConfiguredSampler {
    fn sample(&self, parent: Option<&SpanContext>, trace_id: TraceId) -> bool {
        let parent = parent
            .map(|remote| opentelemetry::Context::new().with_remote_span_context(remote.clone()));
        let result =
            self.0
                .should_sample(parent.as_ref(), trace_id, "", &SpanKind::Internal, &[], &[]);
        result.decision == SamplingDecision::RecordAndSample
    }
}

/// A span processor with a bounded queue in front of one export thread.
#[derive(Debug)]
struct QueueProcessor {
    queue: SyncSender<Message>,
    worker: Mutex<Option<JoinHandle<()>>>,
    queue_full: metrics::Counter,
}

enum Message {
    Span(Box<SpanData>),
    Shutdown,
}

impl QueueProcessor {
    fn start(settings: &TracingSettings, resource: Resource) -> anyhow::Result<Self> {
        let capacity = usize::try_from(settings.queue_size).unwrap_or(usize::MAX);
        let (queue, receiver) = sync_channel(capacity);
        let endpoint = settings.endpoint.clone();
        let protocol = settings.protocol;
        // The exporter is built on its own thread: the HTTP one blocks, and the gRPC one needs the
        // runtime that thread owns. A configuration the exporter refuses stops the start.
        let (built, built_answer) = sync_channel(1);
        let worker = std::thread::Builder::new()
            .name("queuebox-trace-export".into())
            .spawn(move || {
                let exporter = match Exporter::build(protocol, endpoint.as_deref(), resource) {
                    Ok(exporter) => {
                        let _ = built.send(Ok(()));
                        exporter
                    }
                    Err(error) => {
                        let _ = built.send(Err(error));
                        return;
                    }
                };
                drain(&receiver, &exporter);
            })?;
        match built_answer.recv() {
            Ok(Ok(())) => {}
            Ok(Err(error)) => return Err(error),
            Err(_) => anyhow::bail!("the trace export thread ended before it started"),
        }
        Ok(Self {
            queue,
            worker: Mutex::new(Some(worker)),
            queue_full: metrics::counter!(names::TRACING_SPANS_DROPPED_TOTAL, "reason" => "queue_full"),
        })
    }
}

impl SpanProcessor for QueueProcessor {
    fn on_start(&self, _span: &mut opentelemetry_sdk::trace::Span, _cx: &opentelemetry::Context) {}

    fn on_end(&self, span: SpanData) {
        if !span.span_context.is_sampled() {
            return;
        }
        match self.queue.try_send(Message::Span(Box::new(span))) {
            Ok(()) => {}
            Err(TrySendError::Full(_)) => self.queue_full.increment(1),
            Err(TrySendError::Disconnected(_)) => {}
        }
    }

    fn force_flush(&self) -> OTelSdkResult {
        Ok(())
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        // The shutdown message waits for room like any span, but no longer than `timeout`.
        let deadline = Instant::now() + timeout;
        let mut message = Message::Shutdown;
        loop {
            match self.queue.try_send(message) {
                Ok(()) | Err(TrySendError::Disconnected(_)) => break,
                Err(TrySendError::Full(back)) if Instant::now() < deadline => {
                    message = back;
                    std::thread::sleep(Duration::from_millis(10));
                }
                Err(TrySendError::Full(_)) => break,
            }
        }
        if let Ok(mut worker) = self.worker.lock()
            && let Some(handle) = worker.take()
        {
            let _ = handle.join();
        }
        Ok(())
    }
}

/// The OTLP exporter of the chosen protocol, with what runs its requests.
enum Exporter {
    Http(opentelemetry_otlp::SpanExporter),
    Grpc(opentelemetry_otlp::SpanExporter, tokio::runtime::Runtime),
}

impl Exporter {
    fn build(
        protocol: OtlpProtocol,
        endpoint: Option<&str>,
        resource: Resource,
    ) -> anyhow::Result<Self> {
        let mut exporter = match protocol {
            OtlpProtocol::HttpProtobuf => {
                // reqwest is built without a crypto provider of its own (see the webhook
                // adapter's tls.rs): the process's default must be there before the client.
                if rustls::crypto::CryptoProvider::get_default().is_none() {
                    let _ = rustls::crypto::ring::default_provider().install_default();
                }
                let mut builder = opentelemetry_otlp::SpanExporter::builder()
                    .with_http()
                    .with_protocol(opentelemetry_otlp::Protocol::HttpBinary)
                    .with_timeout(EXPORT_TIMEOUT);
                if let Some(endpoint) = endpoint {
                    // The configured endpoint is the collector's base address, as in
                    // OTEL_EXPORTER_OTLP_ENDPOINT: the traces path is added to it.
                    builder = builder
                        .with_endpoint(format!("{}/v1/traces", endpoint.trim_end_matches('/')));
                }
                Self::Http(builder.build()?)
            }
            OtlpProtocol::Grpc => {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()?;
                let exporter = {
                    let _entered = runtime.enter();
                    let mut builder = opentelemetry_otlp::SpanExporter::builder()
                        .with_tonic()
                        .with_timeout(EXPORT_TIMEOUT);
                    if let Some(endpoint) = endpoint {
                        builder = builder.with_endpoint(endpoint.to_owned());
                    }
                    builder.build()?
                };
                Self::Grpc(exporter, runtime)
            }
        };
        match &mut exporter {
            Self::Http(inner) | Self::Grpc(inner, _) => inner.set_resource(&resource),
        }
        Ok(exporter)
    }

    fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
        match self {
            Self::Http(inner) => futures::executor::block_on(inner.export(batch)),
            Self::Grpc(inner, runtime) => runtime.block_on(inner.export(batch)),
        }
    }
}

/// Sends the queued spans in batches until the shutdown message or the last sender is gone.
fn drain(receiver: &Receiver<Message>, exporter: &Exporter) {
    let failed = metrics::counter!(names::TRACING_SPANS_DROPPED_TOTAL, "reason" => "export_failed");
    let mut failing = false;
    let mut batch: Vec<SpanData> = Vec::with_capacity(MAX_BATCH);
    let mut oldest: Option<Instant> = None;
    let mut stopping = false;
    while !stopping {
        let wait = oldest.map_or(MAX_DELAY, |at| MAX_DELAY.saturating_sub(at.elapsed()));
        match receiver.recv_timeout(wait) {
            Ok(Message::Span(span)) => {
                oldest.get_or_insert_with(Instant::now);
                batch.push(*span);
                if batch.len() < MAX_BATCH {
                    continue;
                }
            }
            Ok(Message::Shutdown) | Err(RecvTimeoutError::Disconnected) => stopping = true,
            Err(RecvTimeoutError::Timeout) => {}
        }
        if batch.is_empty() {
            continue;
        }
        let count = batch.len() as u64;
        let sent = std::mem::replace(&mut batch, Vec::with_capacity(MAX_BATCH));
        oldest = None;
        match exporter.export(sent) {
            Ok(()) => {
                if failing {
                    failing = false;
                    tracing::info!("trace export works again");
                }
            }
            Err(error) => {
                failed.increment(count);
                if !failing {
                    failing = true;
                    tracing::warn!(
                        %error,
                        "trace export failed; spans are dropped (and counted in queuebox_tracing_spans_dropped_total) until the collector answers again"
                    );
                }
            }
        }
    }
}
