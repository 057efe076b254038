//! `telemetry.*`: trace export.

use serde::Serialize;

/// `telemetry`.
#[derive(Debug, Clone, Default, Serialize)]
pub struct TelemetrySettings {
    pub tracing: TracingSettings,
}

/// `telemetry.tracing`: OTLP export of the message path's spans. Keys left unset fall back to the
/// standard `OTEL_*` variables where one exists (the binary reads those).
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TracingSettings {
    pub enabled: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<String>,
    pub protocol: OtlpProtocol,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub service_name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sample_ratio: Option<f64>,
    pub queue_size: u32,
}

impl Default for TracingSettings {
    fn default() -> Self {
        Self {
            enabled: false,
            endpoint: None,
            protocol: OtlpProtocol::HttpProtobuf,
            service_name: None,
            sample_ratio: None,
            queue_size: 2048,
        }
    }
}

/// The OTLP transport.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum OtlpProtocol {
    #[serde(rename = "http/protobuf")]
    HttpProtobuf,
    #[serde(rename = "grpc")]
    Grpc,
}
