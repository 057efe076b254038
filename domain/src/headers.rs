//! The headers of an HTTP delivery, merged from their four layers.
//!
//! 1. The standard headers QueueBox always sends: `Content-Type`, `X-Message-Id`, `X-Topic`,
//!    `X-Attempt` and `X-Message-Key` (the last only for a row with a non-empty key).
//! 2. The static headers of the destination.
//! 3. The header of the destination's `auth` block.
//! 4. The row's own `headers` column.
//!
//! Among layers 2 to 4 a later layer replaces an earlier header of the same name, in any letter
//! case, so a row header wins over a static or auth header. The standard headers are never
//! replaced: a later header with a standard name is sent beside it, as a second value, which is the
//! documented behaviour (the reference tells users not to do this). `Content-Type` is the exception:
//! the body is always the JSON payload, so a `Content-Type` from layers 2 to 4 is dropped rather than
//! sent as a second value. Relayed inbox rows carry the webhook sender's `content-type`, and a
//! request with two `Content-Type` values is one many receivers refuse (for example with 415) or
//! read as the unparseable `application/json, application/json`. Framing and hop-by-hop headers
//! (`Host`, `Content-Length`, `Transfer-Encoding`, `Connection`, `Keep-Alive`, `TE`, `Trailer`,
//! `Upgrade`, `Expect`, `Proxy-*`) are never copied from layers 2 to 4: the HTTP client owns them,
//! and a row that could set them could break the request framing or talk to a proxy.

/// `Content-Type`.
pub const CONTENT_TYPE: &str = "Content-Type";
/// The body type of every HTTP delivery.
pub const APPLICATION_JSON: &str = "application/json";
/// `X-Message-Id`: the row `id`.
pub const X_MESSAGE_ID: &str = "X-Message-Id";
/// `X-Topic`: the row `topic`.
pub const X_TOPIC: &str = "X-Topic";
/// `X-Attempt`: the row `attempt`, 0 on the first delivery.
pub const X_ATTEMPT: &str = "X-Attempt";
/// `X-Message-Key`: the row `key`, absent without one.
pub const X_MESSAGE_KEY: &str = "X-Message-Key";
/// The default header of destination auth.
pub const AUTHORIZATION: &str = "Authorization";

/// Header names the HTTP client owns; never copied from configuration or a row.
const FRAMING_HEADERS: [&str; 9] = [
    "host",
    "content-length",
    "transfer-encoding",
    "connection",
    "keep-alive",
    "te",
    "trailer",
    "upgrade",
    "expect",
];

/// True for a framing or hop-by-hop header name (any letter case), including every `Proxy-*`.
pub fn is_framing_header(name: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    FRAMING_HEADERS.contains(&lower.as_str()) || lower.starts_with("proxy-")
}

/// True for a name of the standard headers, which no other layer replaces.
pub fn is_standard_header(name: &str) -> bool {
    [
        CONTENT_TYPE,
        X_MESSAGE_ID,
        X_TOPIC,
        X_ATTEMPT,
        X_MESSAGE_KEY,
    ]
    .iter()
    .any(|standard| standard.eq_ignore_ascii_case(name))
}

/// Everything one HTTP delivery's headers derive from.
#[derive(Debug, Clone, Copy)]
pub struct HttpDelivery<'a> {
    /// The row `id` (uuid text).
    pub message_id: &'a str,
    /// The row `topic`.
    pub topic: &'a str,
    /// The row `attempt`.
    pub attempt: i32,
    /// The row `key`; `None` or empty sends no `X-Message-Key`.
    pub key: Option<&'a str>,
    /// The destination's static headers, in configuration order.
    pub static_headers: &'a [(String, String)],
    /// The `(name, value)` of the auth block, if any.
    pub auth: Option<(&'a str, &'a str)>,
    /// The row's `headers` column, in stored order.
    pub row_headers: &'a [(String, String)],
}

/// The ordered `(name, value)` list to send: the standard headers first, then the merged static,
/// auth and row headers.
pub fn http_delivery_headers(delivery: &HttpDelivery<'_>) -> Vec<(String, String)> {
    let mut out = vec![
        (CONTENT_TYPE.to_owned(), APPLICATION_JSON.to_owned()),
        (X_MESSAGE_ID.to_owned(), delivery.message_id.to_owned()),
        (X_TOPIC.to_owned(), delivery.topic.to_owned()),
        (X_ATTEMPT.to_owned(), delivery.attempt.to_string()),
    ];
    if let Some(key) = delivery.key.filter(|key| !key.is_empty()) {
        out.push((X_MESSAGE_KEY.to_owned(), key.to_owned()));
    }

    let mut merged: Vec<(String, String)> = Vec::new();
    let auth = delivery
        .auth
        .map(|(name, value)| (name.to_owned(), value.to_owned()));
    let layers = delivery
        .static_headers
        .iter()
        .cloned()
        .chain(auth)
        .chain(delivery.row_headers.iter().cloned());
    for (name, value) in layers {
        if is_framing_header(&name) || name.eq_ignore_ascii_case(CONTENT_TYPE) {
            continue;
        }
        merged.retain(|(existing, _)| !existing.eq_ignore_ascii_case(&name));
        merged.push((name, value));
    }
    out.extend(merged);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(items: &[(&str, &str)]) -> Vec<(String, String)> {
        items
            .iter()
            .map(|(n, v)| ((*n).to_owned(), (*v).to_owned()))
            .collect()
    }

    fn values<'a>(headers: &'a [(String, String)], name: &str) -> Vec<&'a str> {
        headers
            .iter()
            .filter(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
            .collect()
    }

    fn delivery<'a>(
        key: Option<&'a str>,
        static_headers: &'a [(String, String)],
        auth: Option<(&'a str, &'a str)>,
        row_headers: &'a [(String, String)],
    ) -> HttpDelivery<'a> {
        HttpDelivery {
            message_id: "11111111-1111-1111-1111-111111111111",
            topic: "order.created",
            attempt: 2,
            key,
            static_headers,
            auth,
            row_headers,
        }
    }

    #[test]
    fn standard_headers_come_first() {
        let headers = http_delivery_headers(&delivery(Some("cust-42"), &[], None, &[]));
        assert_eq!(
            headers,
            pairs(&[
                ("Content-Type", "application/json"),
                ("X-Message-Id", "11111111-1111-1111-1111-111111111111"),
                ("X-Topic", "order.created"),
                ("X-Attempt", "2"),
                ("X-Message-Key", "cust-42"),
            ])
        );
    }

    #[test]
    fn no_key_or_empty_key_sends_no_key_header() {
        for key in [None, Some("")] {
            let headers = http_delivery_headers(&delivery(key, &[], None, &[]));
            assert!(values(&headers, X_MESSAGE_KEY).is_empty(), "{key:?}");
        }
    }

    #[test]
    fn row_wins_over_auth_which_wins_over_static() {
        let statics = pairs(&[("X-Team", "orders"), ("authorization", "static")]);
        let row = pairs(&[("x-team", "row-team"), ("X-Tenant", "acme")]);
        let headers = http_delivery_headers(&delivery(
            None,
            &statics,
            Some(("Authorization", "Bearer t")),
            &row,
        ));
        assert_eq!(values(&headers, "x-team"), ["row-team"]);
        assert_eq!(values(&headers, "authorization"), ["Bearer t"]);
        assert_eq!(values(&headers, "x-tenant"), ["acme"]);

        let row = pairs(&[("AUTHORIZATION", "Bearer from-row")]);
        let headers = http_delivery_headers(&delivery(
            None,
            &statics,
            Some(("Authorization", "Bearer t")),
            &row,
        ));
        assert_eq!(values(&headers, "authorization"), ["Bearer from-row"]);
    }

    #[test]
    fn framing_headers_never_come_from_a_row_or_config() {
        let row = pairs(&[
            ("Host", "evil.example"),
            ("content-length", "0"),
            ("Transfer-Encoding", "chunked"),
            ("CONNECTION", "close"),
            ("Keep-Alive", "timeout=1"),
            ("te", "trailers"),
            ("Trailer", "x"),
            ("Upgrade", "h2c"),
            ("Expect", "100-continue"),
            ("Proxy-Authorization", "Basic x"),
            ("proxy-connection", "keep-alive"),
            ("X-Kept", "yes"),
        ]);
        let statics = pairs(&[("Host", "static.example")]);
        let headers = http_delivery_headers(&delivery(None, &statics, None, &row));
        let names: Vec<_> = headers
            .iter()
            .map(|(n, _)| n.to_ascii_lowercase())
            .collect();
        assert_eq!(
            names,
            [
                "content-type",
                "x-message-id",
                "x-topic",
                "x-attempt",
                "x-kept"
            ]
        );
    }

    #[test]
    fn a_standard_name_in_a_row_is_sent_beside_the_standard_header() {
        let row = pairs(&[("x-message-id", "forged"), ("X-Topic", "other")]);
        let headers = http_delivery_headers(&delivery(None, &[], None, &row));
        assert_eq!(
            values(&headers, X_MESSAGE_ID),
            ["11111111-1111-1111-1111-111111111111", "forged"]
        );
        assert_eq!(values(&headers, X_TOPIC), ["order.created", "other"]);
        // The standard value stays first, so a receiver reading one value reads QueueBox's.
        assert_eq!(headers[1].1, "11111111-1111-1111-1111-111111111111");
    }

    #[test]
    fn content_type_is_only_ever_application_json() {
        // A relayed webhook row carries the sender's content-type; a static header may name one.
        let statics = pairs(&[("Content-Type", "application/cloudevents+json")]);
        let row = pairs(&[("content-type", "application/json; charset=utf-8")]);
        let headers = http_delivery_headers(&delivery(None, &statics, None, &row));
        assert_eq!(values(&headers, CONTENT_TYPE), ["application/json"]);
    }

    #[test]
    fn duplicate_names_inside_a_row_keep_the_last() {
        let row = pairs(&[("X-A", "1"), ("x-a", "2")]);
        let headers = http_delivery_headers(&delivery(None, &[], None, &row));
        assert_eq!(values(&headers, "x-a"), ["2"]);
    }

    #[test]
    fn classifiers() {
        assert!(is_framing_header("HOST"));
        assert!(is_framing_header("Proxy-Anything"));
        assert!(!is_framing_header("X-Host"));
        assert!(!is_framing_header("Authorization"));
        assert!(is_standard_header("x-attempt"));
        assert!(!is_standard_header("Authorization"));
    }
}
