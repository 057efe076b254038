//! The correlation id of a received message: the one the sender gave, cleaned, or a new one.

/// The request header that carries the correlation id, read in any letter case.
pub const CORRELATION_ID_HEADER: &str = "X-Correlation-Id";

/// The most characters of a stored correlation id (the width of the `correlation_id` column).
pub const MAX_CORRELATION_ID_CHARS: usize = 128;

/// The correlation id to store and echo: the first of `received` (the places a source reads, best
/// first) that holds more than control characters, without its control characters and cut to
/// [`MAX_CORRELATION_ID_CHARS`] characters; `new_id()` when none does (all absent, empty, or
/// nothing but control characters).
///
/// Control characters go because the id lands in log lines and a response header, where a line
/// break would let a sender forge a log entry or split the header.
pub fn correlation_id<'a>(
    received: impl IntoIterator<Item = &'a str>,
    new_id: impl FnOnce() -> String,
) -> String {
    received
        .into_iter()
        .map(|candidate| -> String {
            candidate
                .chars()
                .filter(|c| !c.is_control())
                .take(MAX_CORRELATION_ID_CHARS)
                .collect()
        })
        .find(|cleaned| !cleaned.is_empty())
        .unwrap_or_else(new_id)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fresh() -> String {
        "generated".to_owned()
    }

    #[test]
    fn a_received_id_is_kept() {
        assert_eq!(correlation_id(Some("req-42"), fresh), "req-42");
    }

    #[test]
    fn absent_or_empty_gets_a_new_id() {
        assert_eq!(correlation_id(None, fresh), "generated");
        assert_eq!(correlation_id(Some(""), fresh), "generated");
        assert_eq!(correlation_id(Some("\r\n\t"), fresh), "generated");
    }

    #[test]
    fn the_first_usable_place_wins() {
        assert_eq!(correlation_id(["hdr", "prop"], fresh), "hdr");
        assert_eq!(correlation_id(["", "prop"], fresh), "prop");
        assert_eq!(correlation_id(["\r\n", "prop"], fresh), "prop");
        assert_eq!(correlation_id(["", "\t"], fresh), "generated");
    }

    #[test]
    fn control_characters_are_removed() {
        assert_eq!(
            correlation_id(Some("a\r\nb\u{0}c\u{7f}d\te"), fresh),
            "abcde"
        );
    }

    #[test]
    fn at_most_128_characters_are_kept() {
        let long = "é".repeat(200);
        let kept = correlation_id(Some(long.as_str()), fresh);
        assert_eq!(kept.chars().count(), 128);
        // Removed control characters do not count towards the limit.
        let with_controls = format!("{}{}", "\n".repeat(50), "x".repeat(128));
        assert_eq!(
            correlation_id(Some(with_controls.as_str()), fresh),
            "x".repeat(128)
        );
    }
}
