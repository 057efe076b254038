//! The JSONPath extractor: `path NUL document`.
//!
//! Holds: parsing never panics; a path the start check calls definite parses, and a parsed path
//! finds at most one value, whose text form is what `text` returns.

use crate::split::{parts, text};
use queuebox_domain::jsonpath::JsonPath;

/// The target body.
pub fn jsonpath(data: &[u8]) {
    let [path, document] = parts::<2>(data);
    let path = text(path);
    let definite = queuebox_config::check_definite(&path).is_ok();
    let parsed = JsonPath::parse(&path);
    if definite {
        assert!(
            parsed.is_ok(),
            "the start check accepted `{path}` but the extractor refused it"
        );
    }
    let Ok(parsed) = parsed else { return };
    assert_eq!(
        parsed.as_str(),
        path.trim(),
        "the path is kept as written, trimmed"
    );
    let Ok(document) = serde_json::from_slice::<serde_json::Value>(document) else {
        return;
    };
    let found = parsed.find(&document);
    let shown = parsed.text(&document);
    if found.is_none() {
        assert!(shown.is_none(), "text without a value for `{path}`");
    }
}
