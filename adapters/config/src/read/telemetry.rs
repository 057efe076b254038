//! `telemetry.*`.

use super::{Case, choice, flag, positive, text};
use crate::catalog::Doc;
use crate::model::{OtlpProtocol, TelemetrySettings, TracingSettings};
use crate::reader::{Block, Reader};
use serde_json::Value;

pub(super) fn read(r: &mut Reader, value: Option<&Value>) -> TelemetrySettings {
    let mut b = Block::open(r, value, "telemetry");
    let tracing = read_tracing(r, &mut b);
    b.finish(r);
    TelemetrySettings { tracing }
}

fn read_tracing(r: &mut Reader, parent: &mut Block<'_>) -> TracingSettings {
    let value = parent.get("tracing");
    let mut b = Block::open(r, value, &parent.path_of("tracing"));
    let defaults = TracingSettings::default();
    let settings = TracingSettings {
        enabled: flag(r, &mut b, "enabled", defaults.enabled),
        endpoint: text(r, &mut b, "endpoint").filter(|e| !e.trim().is_empty()),
        protocol: choice(
            r,
            &mut b,
            "protocol",
            &[
                ("http/protobuf", OtlpProtocol::HttpProtobuf),
                ("grpc", OtlpProtocol::Grpc),
            ],
            Case::Any,
            defaults.protocol,
        ),
        service_name: text(r, &mut b, "serviceName").filter(|s| !s.trim().is_empty()),
        sample_ratio: sample_ratio(r, &mut b),
        queue_size: positive(r, &mut b, "queueSize", defaults.queue_size),
    };
    b.finish(r);
    settings
}

/// A fraction from 0 to 1.
fn sample_ratio(r: &mut Reader, b: &mut Block<'_>) -> Option<f64> {
    let path = b.path_of("sampleRatio");
    r.describe(&path, Doc::ty("number").allowed("0 to 1"));
    let raw = text(r, b, "sampleRatio")?;
    match raw.trim().parse::<f64>() {
        Ok(ratio) if (0.0..=1.0).contains(&ratio) => Some(ratio),
        _ => {
            r.problem(path, format!("must be a number from 0 to 1, got `{raw}`"));
            None
        }
    }
}
