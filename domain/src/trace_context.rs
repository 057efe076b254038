//! W3C Trace Context: the `traceparent` and `tracestate` headers that carry one trace across the
//! services a message crosses (<https://www.w3.org/TR/trace-context/>).
//!
//! Parsing never fails loudly: a header that breaks the rules is `None`, and the caller starts a new
//! trace, as the recommendation asks. The rules applied:
//! - `traceparent` is `version-traceid-parentid-flags` in lowercase hexadecimal; version `ff` is
//!   invalid; version `00` is exactly 55 characters; a higher version may be longer, and then the
//!   55th character must be `-` and only the four known fields are read;
//! - an all-zero trace id or parent id is invalid;
//! - of the flags only `sampled` (bit 0) is kept: the other bits are reserved and sent as zero;
//! - `tracestate` holds at most 32 comma-separated `key=value` members with distinct keys in the
//!   recommendation's key and value syntax; an invalid `tracestate` is dropped alone (the
//!   `traceparent` still counts), empty members are skipped.

/// The header carrying the trace id, the parent span id and the flags.
pub const TRACEPARENT: &str = "traceparent";
/// The header carrying vendor-specific trace data.
pub const TRACESTATE: &str = "tracestate";

/// The `sampled` flag bit.
pub const FLAG_SAMPLED: u8 = 0x01;

/// The length of a version `00` `traceparent`.
const TRACEPARENT_LEN: usize = 55;
/// The most members a `tracestate` may hold.
const MAX_TRACESTATE_MEMBERS: usize = 32;

/// One parsed `traceparent`, and the `tracestate` that came with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceParent {
    /// The 16-byte trace id (never all zero).
    pub trace_id: [u8; 16],
    /// The 8-byte id of the parent span (never all zero).
    pub parent_id: [u8; 8],
    /// The trace flags, reserved bits cleared.
    pub flags: u8,
}

impl TraceParent {
    /// Parses a `traceparent` value; `None` when it breaks a rule (see the module comment).
    /// Leading and trailing spaces and tabs (HTTP optional white space) are ignored.
    pub fn parse(value: &str) -> Option<Self> {
        let value = value.trim_matches([' ', '\t']);
        let bytes = value.as_bytes();
        if bytes.len() < TRACEPARENT_LEN {
            return None;
        }
        let version = hex_byte(&bytes[0..2])?;
        if version == 0xff || bytes[2] != b'-' || bytes[35] != b'-' || bytes[52] != b'-' {
            return None;
        }
        if version == 0 && bytes.len() != TRACEPARENT_LEN {
            return None;
        }
        if bytes.len() > TRACEPARENT_LEN && bytes[TRACEPARENT_LEN] != b'-' {
            return None;
        }
        let mut trace_id = [0u8; 16];
        for (index, slot) in trace_id.iter_mut().enumerate() {
            *slot = hex_byte(&bytes[3 + 2 * index..5 + 2 * index])?;
        }
        let mut parent_id = [0u8; 8];
        for (index, slot) in parent_id.iter_mut().enumerate() {
            *slot = hex_byte(&bytes[36 + 2 * index..38 + 2 * index])?;
        }
        let flags = hex_byte(&bytes[53..55])?;
        if trace_id == [0; 16] || parent_id == [0; 8] {
            return None;
        }
        Some(Self {
            trace_id,
            parent_id,
            flags: flags & FLAG_SAMPLED,
        })
    }

    /// True when the caller may have recorded this trace.
    pub fn sampled(&self) -> bool {
        self.flags & FLAG_SAMPLED != 0
    }

    /// The trace id as 32 lowercase hexadecimal characters.
    pub fn trace_id_hex(&self) -> String {
        hex_lower(&self.trace_id)
    }

    /// The value to send: always version `00`, whatever version was received.
    pub fn format(&self) -> String {
        format_traceparent(self.trace_id, self.parent_id, self.flags)
    }
}

/// A version `00` `traceparent` of these ids and flags (reserved bits cleared).
pub fn format_traceparent(trace_id: [u8; 16], span_id: [u8; 8], flags: u8) -> String {
    format!(
        "00-{}-{}-{:02x}",
        hex_lower(&trace_id),
        hex_lower(&span_id),
        flags & FLAG_SAMPLED
    )
}

/// Parses a `tracestate` value into its members in order; `None` when it breaks a rule (then the
/// whole header is dropped). An empty or blank value is an empty list.
pub fn parse_tracestate(value: &str) -> Option<Vec<(String, String)>> {
    let mut members: Vec<(String, String)> = Vec::new();
    for member in value.split(',') {
        let member = member.trim_matches([' ', '\t']);
        if member.is_empty() {
            continue;
        }
        let (key, value) = member.split_once('=')?;
        if !valid_key(key) || !valid_value(value) || members.iter().any(|(k, _)| k == key) {
            return None;
        }
        members.push((key.to_owned(), value.to_owned()));
        if members.len() > MAX_TRACESTATE_MEMBERS {
            return None;
        }
    }
    Some(members)
}

/// The `tracestate` value of these members.
pub fn format_tracestate(members: &[(String, String)]) -> String {
    members
        .iter()
        .map(|(key, value)| format!("{key}={value}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// The trace context found among `headers` (names in any letter case): the parsed `traceparent`,
/// and the `tracestate` members when the `tracestate` is valid (empty otherwise). `None` without a
/// valid `traceparent`.
pub fn extract(headers: &[(String, String)]) -> Option<(TraceParent, Vec<(String, String)>)> {
    let find = |wanted: &str| {
        headers
            .iter()
            .find(|(name, _)| name.eq_ignore_ascii_case(wanted))
            .map(|(_, value)| value.as_str())
    };
    let parent = TraceParent::parse(find(TRACEPARENT)?)?;
    let state = find(TRACESTATE)
        .and_then(parse_tracestate)
        .unwrap_or_default();
    Some((parent, state))
}

/// Replaces the `traceparent` and `tracestate` among `headers` (any letter case) with these values,
/// keeping every other header in its place; an empty `tracestate` removes that header.
pub fn inject(headers: &mut Vec<(String, String)>, traceparent: String, tracestate: String) {
    headers.retain(|(name, _)| {
        !name.eq_ignore_ascii_case(TRACEPARENT) && !name.eq_ignore_ascii_case(TRACESTATE)
    });
    headers.push((TRACEPARENT.to_owned(), traceparent));
    if !tracestate.is_empty() {
        headers.push((TRACESTATE.to_owned(), tracestate));
    }
}

/// `simple-key` (`[a-z][a-z0-9_*/-]{0,255}`) or `tenant@system` (`[a-z0-9][a-z0-9_*/-]{0,240}` and
/// `[a-z][a-z0-9_*/-]{0,13}`).
fn valid_key(key: &str) -> bool {
    let rest_ok = |part: &str| {
        part.bytes()
            .skip(1)
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"_-*/".contains(&b))
    };
    match key.split_once('@') {
        None => {
            key.len() <= 256
                && key.as_bytes().first().is_some_and(u8::is_ascii_lowercase)
                && rest_ok(key)
        }
        Some((tenant, system)) => {
            (1..=241).contains(&tenant.len())
                && (1..=14).contains(&system.len())
                && tenant
                    .as_bytes()
                    .first()
                    .is_some_and(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
                && system
                    .as_bytes()
                    .first()
                    .is_some_and(u8::is_ascii_lowercase)
                && rest_ok(tenant)
                && rest_ok(system)
        }
    }
}

/// 1 to 256 printable ASCII characters without `,` and `=`, not ending in a space.
fn valid_value(value: &str) -> bool {
    (1..=256).contains(&value.len())
        && value
            .bytes()
            .all(|b| (0x20..=0x7e).contains(&b) && b != b',' && b != b'=')
        && !value.ends_with(' ')
}

/// Two lowercase hexadecimal digits.
fn hex_byte(pair: &[u8]) -> Option<u8> {
    let digit = |b: u8| match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        _ => None,
    };
    Some(digit(*pair.first()?)? << 4 | digit(*pair.get(1)?)?)
}

fn hex_lower(bytes: &[u8]) -> String {
    use std::fmt::Write as _;
    let mut out = String::with_capacity(bytes.len() * 2);
    for byte in bytes {
        let _ = write!(out, "{byte:02x}");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    // The example of the recommendation's traceparent section.
    const EXAMPLE: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

    #[test]
    fn the_recommendations_example_parses_and_formats_back() {
        let parent = TraceParent::parse(EXAMPLE).expect("valid");
        assert_eq!(parent.trace_id_hex(), "4bf92f3577b34da6a3ce929d0e0e4736");
        assert_eq!(
            parent.parent_id,
            [0x00, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7]
        );
        assert!(parent.sampled());
        assert_eq!(parent.format(), EXAMPLE);
        let unsampled = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00";
        assert!(!TraceParent::parse(unsampled).expect("valid").sampled());
    }

    #[test]
    fn malformed_values_are_refused() {
        for bad in [
            "",
            "garbage",
            // uppercase hex
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00F067AA0BA902B7-01",
            // all-zero trace id and parent id
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            // version ff
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            // version 00 with more after it
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
            // short fields, wrong separators, non-hex
            "00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01",
            "00_4bf92f3577b34da6a3ce929d0e0e4736_00f067aa0ba902b7_01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0g",
            "0x-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            // a future version longer than 55 characters must go on with '-'
            "cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01x",
        ] {
            assert_eq!(TraceParent::parse(bad), None, "{bad:?} should be refused");
        }
    }

    #[test]
    fn a_future_version_is_read_by_its_known_fields_and_sent_as_00() {
        let future =
            "cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-what-the-future-holds";
        let parent = TraceParent::parse(future).expect("valid");
        assert_eq!(parent.format(), EXAMPLE);
        let exact = "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        assert_eq!(TraceParent::parse(exact).expect("valid").format(), EXAMPLE);
    }

    #[test]
    fn reserved_flag_bits_are_cleared_and_white_space_around_is_ignored() {
        let flags = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-ff";
        let parent = TraceParent::parse(flags).expect("valid");
        assert_eq!(parent.flags, FLAG_SAMPLED);
        assert_eq!(parent.format(), EXAMPLE);
        assert!(TraceParent::parse(&format!(" \t{EXAMPLE} ")).is_some());
    }

    #[test]
    fn tracestate_follows_the_member_rules() {
        let members = parse_tracestate("rojo=00f067aa0ba902b7,congo=t61rcWkgMzE").expect("valid");
        assert_eq!(
            members,
            vec![
                ("rojo".to_owned(), "00f067aa0ba902b7".to_owned()),
                ("congo".to_owned(), "t61rcWkgMzE".to_owned()),
            ]
        );
        assert_eq!(
            format_tracestate(&members),
            "rojo=00f067aa0ba902b7,congo=t61rcWkgMzE"
        );
        assert_eq!(
            parse_tracestate(" , fw529a3039@dt=t61, ").map(|m| m.len()),
            Some(1)
        );
        assert_eq!(parse_tracestate(""), Some(vec![]));
        for bad in [
            "Rojo=1",        // uppercase key
            "rojo",          // no value
            "rojo=1,rojo=2", // duplicate key
            "rojo=a,b",      // a member without '='
            "rojo=x=y",      // '=' in the value
            "@dt=1",         // empty tenant
            "t@Dt=1",        // uppercase system
        ] {
            assert_eq!(parse_tracestate(bad), None, "{bad:?} should be refused");
        }
        let many: Vec<String> = (0..33).map(|i| format!("k{i}=v")).collect();
        assert_eq!(parse_tracestate(&many.join(",")), None);
        assert!(parse_tracestate(&many[..32].join(",")).is_some());
    }

    #[test]
    fn extract_and_inject_work_on_header_lists_in_any_case() {
        let headers = vec![
            ("Content-Type".to_owned(), "application/json".to_owned()),
            ("TraceParent".to_owned(), EXAMPLE.to_owned()),
            ("TraceState".to_owned(), "rojo=1,Bad=2".to_owned()),
        ];
        let (parent, state) = extract(&headers).expect("found");
        assert_eq!(parent.format(), EXAMPLE);
        assert!(state.is_empty(), "an invalid tracestate is dropped alone");

        let mut headers = headers;
        inject(&mut headers, "00-x".to_owned(), "rojo=1".to_owned());
        assert_eq!(
            headers,
            vec![
                ("Content-Type".to_owned(), "application/json".to_owned()),
                (TRACEPARENT.to_owned(), "00-x".to_owned()),
                (TRACESTATE.to_owned(), "rojo=1".to_owned()),
            ]
        );
        assert!(extract(&[("traceparent".to_owned(), "junk".to_owned())]).is_none());
    }
}
