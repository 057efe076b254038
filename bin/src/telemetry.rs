//! The Prometheus recorder behind `GET /metrics`.

use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};
use queuebox_http::MetricsRender;
use queuebox_ports::metrics as names;
use std::sync::Arc;
use std::time::Instant;

/// Summary quantiles of every timer (the documented 50th, 95th and 99th percentiles).
const QUANTILES: [f64; 3] = [0.5, 0.95, 0.99];

/// Installs the global recorder and returns the function that renders a scrape.
///
/// The uptime gauge is set at render time from the process clock: no I/O, so a scrape stays cheap.
pub fn install() -> anyhow::Result<MetricsRender> {
    let recorder = PrometheusBuilder::new()
        .set_quantiles(&QUANTILES)?
        .build_recorder();
    let handle: PrometheusHandle = recorder.handle();
    metrics::set_global_recorder(recorder)
        .map_err(|error| anyhow::anyhow!("cannot install the metrics recorder: {error}"))?;

    metrics::gauge!(names::BUILD_INFO, "version" => env!("CARGO_PKG_VERSION")).set(1.0);
    let started = Instant::now();
    let uptime = metrics::gauge!(names::UPTIME_SECONDS);
    Ok(Arc::new(move || {
        uptime.set(started.elapsed().as_secs_f64());
        handle.run_upkeep();
        handle.render()
    }))
}
