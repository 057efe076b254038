//! `queuebox_http_publish_responses_total{status_class}` counts every destination answer.

mod support;

use metrics_util::debugging::{DebugValue, DebuggingRecorder};
use queuebox_ports::metrics::HTTP_PUBLISH_RESPONSES_TOTAL;
use queuebox_ports::publish::{OutboundMessage, Publisher};
use queuebox_webhook::{HttpDestination, HttpDestinationOptions};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use support::{Reply, TestServer, closed_port_url};

fn message() -> OutboundMessage {
    OutboundMessage {
        id: "33333333-3333-3333-3333-333333333333".to_owned(),
        topic: "t".to_owned(),
        key: None,
        aggregate_type: None,
        payload: "{}".to_owned(),
        headers: Vec::new(),
        attempt: 0,
        ..OutboundMessage::default()
    }
}

#[test]
fn counts_responses_per_status_class() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    // A current-thread runtime keeps every publish on this thread, where the local recorder lives.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    metrics::with_local_recorder(&recorder, || {
        runtime.block_on(async {
            let statuses = [200u16, 202, 302, 404, 500, 503];
            let next = AtomicUsize::new(0);
            let server = TestServer::start(move |_| {
                Reply::status(statuses[next.fetch_add(1, Ordering::SeqCst) % statuses.len()])
            })
            .await;
            let dest = HttpDestination::new(HttpDestinationOptions::new("m", server.base_url()))
                .await
                .expect("destination");
            for _ in statuses {
                let _ = dest.publish(&message()).await;
            }
            let down =
                HttpDestination::new(HttpDestinationOptions::new("down", closed_port_url().await))
                    .await
                    .expect("destination");
            let _ = down.publish(&message()).await;
        });
    });

    let mut counts = BTreeMap::new();
    for (key, _, _, value) in snapshotter.snapshot().into_vec() {
        if key.key().name() != HTTP_PUBLISH_RESPONSES_TOTAL {
            continue;
        }
        let class = key
            .key()
            .labels()
            .find(|label| label.key() == "status_class")
            .map(|label| label.value().to_owned())
            .expect("status_class label");
        let DebugValue::Counter(count) = value else {
            panic!("not a counter");
        };
        counts.insert(class, count);
    }
    let expected: BTreeMap<String, u64> =
        [("2xx", 2), ("3xx", 1), ("4xx", 1), ("5xx", 2), ("other", 1)]
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v))
            .collect();
    assert_eq!(counts, expected);
}
