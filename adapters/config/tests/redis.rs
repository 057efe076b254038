//! Redis Streams destinations and sources (an addition to the contract): the keys select the kind,
//! every key reads with its default, and each bad value is refused naming the key, never showing
//! the URL's password.
#![allow(clippy::unwrap_used)]

mod common;
use common::{ok, problems};
use queuebox_config::{DestinationKind, SourceKind};
use std::time::Duration;

#[test]
fn the_keys_select_redis_and_read_with_their_defaults() {
    let s = ok("destinations:\n  d:\n    url: redis://:pw@r:6379/1\n    stream: \"orders:{{ topic }}\"\nsources:\n  s:\n    url: redis://r\n    stream: in\n    group: g\n").settings;
    let DestinationKind::Redis(d) = &s.destinations["d"].kind else {
        panic!("not a redis destination");
    };
    assert_eq!(d.stream, "orders:{{ topic }}");
    assert_eq!(d.max_len, None);
    assert!(d.max_len_approximate);
    assert_eq!(d.timeout, Duration::from_secs(30));
    let SourceKind::Redis(r) = &s.sources["s"].kind else {
        panic!("not a redis source");
    };
    assert_eq!((r.group.as_str(), r.consumer.as_deref()), ("g", None));
    assert_eq!(r.dead_letter_stream, "in:dead");
    assert_eq!((r.batch_size, r.max_deliveries), (100, 5));
    assert_eq!(r.block, Duration::from_secs(2));
    assert_eq!(r.claim_idle, Duration::from_secs(30));
    let shown = queuebox_config::render_effective(&s);
    assert!(!shown.contains(":pw@"), "{shown}");
}

#[test]
fn bad_values_are_refused_naming_the_key() {
    let cases = [
        (
            "destinations:\n  d:\n    url: rediss://:pw@r\n    stream: s\n",
            "destinations.d.url",
            "rediss:// (TLS) is not supported in this version",
        ),
        (
            "destinations:\n  d:\n    url: http://:pw@r\n    stream: s\n",
            "destinations.d.url",
            "must be a redis:// URL",
        ),
        (
            "destinations:\n  d:\n    url: redis://:pw@r/zero\n    stream: s\n",
            "destinations.d.url",
            "the database after the host must be a number",
        ),
        (
            "destinations:\n  d:\n    url: redis://r\n    stream: s\n    maxLen: 0\n",
            "destinations.d.maxLen",
            "must be above 0",
        ),
        (
            "destinations:\n  d:\n    url: redis://r\n    stream: \"{{ nope }}\"\n",
            "destinations.d.stream",
            "nope",
        ),
        (
            "destinations:\n  d:\n    url: redis://r\n    stream: s\n    streamFrom: payload\n",
            "destinations.d.streamFrom",
            "must be one of aggregate_type, topic, key",
        ),
        (
            "sources:\n  s:\n    url: redis://r\n    stream: s\n",
            "sources.s.group",
            "is required by a source of type redis",
        ),
        // `url` alone is shared with RabbitMQ: both kinds' missing keys are named.
        (
            "destinations:\n  d:\n    url: redis://r\n",
            "destinations.d.stream",
            "is required by a destination of type redis",
        ),
        (
            "destinations:\n  d:\n    url: redis://r\n",
            "destinations.d.exchange",
            "is required by a destination of type rabbitmq",
        ),
        (
            "sources:\n  s:\n    url: redis://r\n    stream: s\n    group: g\n    deadLetterStream: s\n",
            "sources.s.deadLetterStream",
            "must differ from stream",
        ),
        (
            "sources:\n  s:\n    url: redis://r\n    stream: s\n    group: g\n    consumer: \" \"\n",
            "sources.s.consumer",
            "must not be blank",
        ),
        (
            "sources:\n  s:\n    url: redis://r\n    stream: s\n    group: g\n    claimIdleMs: 0\n",
            "sources.s.claimIdleMs",
            "",
        ),
        (
            "sources:\n  s:\n    url: redis://r\n    stream: s\n    group: g\n    maxDeliveries: -1\n",
            "sources.s.maxDeliveries",
            "must not be negative",
        ),
    ];
    for (yaml, key, says) in cases {
        let found = problems(yaml);
        assert!(
            found.iter().any(|p| p.contains(key) && p.contains(says)),
            "{key} ({says}) not among {found:?}"
        );
        assert!(found.iter().all(|p| !p.contains(":pw@")), "{found:?}");
    }
}
