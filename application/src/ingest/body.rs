//! Reading a received body as one JSON document, with a refusal that says why when it is not one
//! QueueBox can read: a syntax error, nesting deeper than the parser goes, or a number beyond a
//! 64-bit float. A sender can fix the last two, and must be able to tell them from a typo.

use queuebox_ports::ingest::Rejection;
use serde_json::Value;

/// The deepest nesting of arrays and objects read: serde_json's own recursion limit (its budget of
/// 128 runs out on entering the 128th level), which keeps a hostile document from exhausting the
/// stack.
pub(super) const MAX_DEPTH: usize = 127;

/// The body as a JSON document.
///
/// # Errors
/// [`Rejection::InvalidJson`], [`Rejection::TooDeep`] or [`Rejection::NumberOutOfRange`].
pub(super) fn parse(body: &[u8]) -> Result<Value, Rejection> {
    serde_json::from_slice::<Value>(body).map_err(|error| {
        if nests_deeper_than(body, MAX_DEPTH) {
            Rejection::TooDeep { limit: MAX_DEPTH }
        } else if error.is_syntax() && error.to_string().starts_with("number out of range") {
            Rejection::NumberOutOfRange
        } else {
            Rejection::InvalidJson
        }
    })
}

/// Whether the brackets of `body` outside strings open more than `limit` levels at some point.
/// Run only on a body that failed to parse, to name the reason.
fn nests_deeper_than(body: &[u8], limit: usize) -> bool {
    let mut depth = 0usize;
    let mut in_string = false;
    let mut escaped = false;
    for &byte in body {
        if in_string {
            match (escaped, byte) {
                (true, _) => escaped = false,
                (false, b'\\') => escaped = true,
                (false, b'"') => in_string = false,
                _ => {}
            }
            continue;
        }
        match byte {
            b'"' => in_string = true,
            b'[' | b'{' => {
                depth += 1;
                if depth > limit {
                    return true;
                }
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_document_parses() {
        assert_eq!(
            parse(br#"{"a":[1,2]}"#),
            Ok(serde_json::json!({"a": [1, 2]}))
        );
    }

    #[test]
    fn a_syntax_error_is_invalid_json() {
        assert_eq!(parse(b"{\"a\":"), Err(Rejection::InvalidJson));
        assert_eq!(parse(b""), Err(Rejection::InvalidJson));
        assert_eq!(parse(b"not json"), Err(Rejection::InvalidJson));
    }

    #[test]
    fn nesting_at_the_limit_parses_and_one_deeper_says_so() {
        let at_limit = format!("{}{}", "[".repeat(MAX_DEPTH), "]".repeat(MAX_DEPTH));
        assert!(parse(at_limit.as_bytes()).is_ok());
        let deeper = format!("{}{}", "[".repeat(MAX_DEPTH + 1), "]".repeat(MAX_DEPTH + 1));
        assert_eq!(
            parse(deeper.as_bytes()),
            Err(Rejection::TooDeep { limit: MAX_DEPTH })
        );
        let objects = format!("{}1{}", "{\"a\":".repeat(1000), "}".repeat(1000));
        assert_eq!(
            parse(objects.as_bytes()),
            Err(Rejection::TooDeep { limit: MAX_DEPTH })
        );
        assert_eq!(
            Rejection::TooDeep { limit: MAX_DEPTH }.to_string(),
            "Invalid JSON: nested deeper than 127 levels"
        );
    }

    #[test]
    fn brackets_inside_strings_do_not_count() {
        let text = format!("{{\"a\":\"{}\\\"{}\"", "[".repeat(500), "{".repeat(500));
        // Not closed, so it fails, but not for its depth.
        assert_eq!(parse(text.as_bytes()), Err(Rejection::InvalidJson));
    }

    #[test]
    fn a_number_beyond_a_float_says_so() {
        assert_eq!(parse(b"[1e400]"), Err(Rejection::NumberOutOfRange));
        assert_eq!(parse(b"-1e999"), Err(Rejection::NumberOutOfRange));
        // A large integer within a float's range reads as a float.
        assert!(parse(b"123456789012345678901234567890").is_ok());
    }
}
