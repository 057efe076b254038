//! Definite JSONPath: the source key paths (`idempotencyKeyPath`, `eventTypePath`,
//! `aggregateIdPath`) and the tiny evaluator that reads one value with them.
//!
//! A definite path names at most one value: `$` followed by `.name`, `['name']` (or `["name"]`) and
//! `[index]` steps. Deep scans, wildcards, filters, slices and unions can match several values, and
//! an idempotency key or event type must be one value, so they are refused when the path is parsed
//! (at start, by the configuration loader), never at receipt.

use serde_json::Value;
use std::fmt;
use thiserror::Error;

/// Why a text is not a definite JSONPath. The message names the offending part and the path.
#[derive(Debug, Clone, Error, PartialEq, Eq)]
#[error("{0}")]
pub struct JsonPathError(String);

/// One step of a definite path.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Step {
    /// `.name` or `['name']`: a member of an object.
    Field(String),
    /// `[n]`: an element of an array.
    Index(usize),
}

/// A parsed definite JSONPath. `Display` prints the path as written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JsonPath {
    text: String,
    steps: Vec<Step>,
}

impl JsonPath {
    /// Parses `path` (surrounding whitespace ignored).
    ///
    /// # Errors
    /// A [`JsonPathError`] saying what makes the path indefinite or malformed.
    pub fn parse(path: &str) -> Result<Self, JsonPathError> {
        let path = path.trim();
        let steps = parse_steps(path).map_err(JsonPathError)?;
        Ok(Self {
            text: path.to_owned(),
            steps,
        })
    }

    /// The path as written.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// The value the path names in `document`, if there is one.
    pub fn find<'a>(&self, document: &'a Value) -> Option<&'a Value> {
        self.steps
            .iter()
            .try_fold(document, |value, step| match (step, value) {
                (Step::Field(name), Value::Object(map)) => map.get(name),
                (Step::Index(index), Value::Array(items)) => items.get(*index),
                _ => None,
            })
    }

    /// The value the path names as text: a string as it is, a number or a boolean as its JSON
    /// text. Null, an object, an array or no value at all find nothing, because none of them is
    /// a usable key, event type or aggregate id.
    pub fn text(&self, document: &Value) -> Option<String> {
        match self.find(document)? {
            Value::String(text) => Some(text.clone()),
            Value::Number(number) => Some(number.to_string()),
            Value::Bool(flag) => Some(flag.to_string()),
            Value::Null | Value::Object(_) | Value::Array(_) => None,
        }
    }
}

impl fmt::Display for JsonPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

/// Checks that `path` is a definite JSONPath (the rule the configuration applies at start).
///
/// # Errors
/// What makes the path indefinite or malformed.
pub fn check_definite(path: &str) -> Result<(), String> {
    // Trimmed as `JsonPath::parse` trims, so a path the start check accepts is one the extractor
    // builds (the fuzzer found `$.` followed by a vertical tab accepted here and refused there).
    parse_steps(path.trim()).map(|_| ())
}

fn parse_steps(path: &str) -> Result<Vec<Step>, String> {
    let Some(mut rest) = path.strip_prefix('$') else {
        return Err(format!("must start with `$`, got `{path}`"));
    };
    let mut steps = Vec::new();
    while !rest.is_empty() {
        if rest.starts_with("..") {
            return Err(format!(
                "`..` (deep scan) can match several values: `{path}`"
            ));
        }
        if let Some(after) = rest.strip_prefix('.') {
            let end = after.find(['.', '[']).unwrap_or(after.len());
            let name = &after[..end];
            if name.is_empty() {
                return Err(format!("has an empty name after `.`: `{path}`"));
            }
            if name == "*" {
                return Err(format!("`*` (wildcard) can match several values: `{path}`"));
            }
            if name.contains(['*', '?', '(', ')', ']', '\'', '"', ' ']) {
                return Err(format!("`{name}` is not a plain field name: `{path}`"));
            }
            steps.push(Step::Field(name.to_owned()));
            rest = &after[end..];
        } else if let Some(after) = rest.strip_prefix('[') {
            let (step, tail) = bracket_step(after, path)?;
            steps.push(step);
            rest = tail;
        } else {
            return Err(format!("expected `.` or `[` at `{rest}` in `{path}`"));
        }
    }
    Ok(steps)
}

/// One `[...]` step; returns it and the text after its `]`.
fn bracket_step<'a>(after: &'a str, path: &str) -> Result<(Step, &'a str), String> {
    if let Some(quote) = after.chars().next().filter(|c| *c == '\'' || *c == '"') {
        let body = &after[1..];
        let close = body
            .find(quote)
            .ok_or_else(|| format!("unclosed quote in `{path}`"))?;
        let tail = &body[close + 1..];
        let Some(rest) = tail.strip_prefix(']') else {
            return Err(format!(
                "several names in one bracket (a union) can match several values: `{path}`"
            ));
        };
        return Ok((Step::Field(body[..close].to_owned()), rest));
    }
    let close = after
        .find(']')
        .ok_or_else(|| format!("unclosed `[` in `{path}`"))?;
    let inner = after[..close].trim();
    if inner.starts_with('?') {
        return Err(format!("a filter can match several values: `{path}`"));
    }
    if inner == "*" {
        return Err(format!(
            "`[*]` (wildcard) can match several values: `{path}`"
        ));
    }
    if inner.contains(':') {
        return Err(format!("a slice can match several values: `{path}`"));
    }
    if inner.contains(',') {
        return Err(format!("a union can match several values: `{path}`"));
    }
    if inner.is_empty() || !inner.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!(
            "`[{inner}]` is not an index or a quoted name: `{path}`"
        ));
    }
    // An index too large for memory names no element of any document.
    let index = inner.parse::<usize>().unwrap_or(usize::MAX);
    Ok((Step::Index(index), &after[close + 1..]))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn path(text: &str) -> JsonPath {
        match JsonPath::parse(text) {
            Ok(path) => path,
            Err(error) => panic!("{text}: {error}"),
        }
    }

    #[test]
    fn definite_paths_pass() {
        for good in [
            "$",
            "$.id",
            "$.data.object.customer",
            "$['id']",
            "$[\"a b\"]",
            "$.items[0].id",
            "$['a'][2]",
        ] {
            assert!(check_definite(good).is_ok(), "{good}");
        }
    }

    #[test]
    fn the_start_check_and_the_extractor_agree_on_surrounding_whitespace() {
        // A fuzz finding: a member name of whitespace only passed the check untrimmed.
        for text in ["$.\u{b}", " $.id ", "$.\t", "\n$"] {
            assert_eq!(
                check_definite(text).is_ok(),
                JsonPath::parse(text).is_ok(),
                "{text:?}"
            );
        }
    }

    #[test]
    fn indefinite_paths_fail() {
        for bad in [
            "$..orderId",
            "$.*",
            "$.items[*]",
            "$.items[?(@.a)]",
            "$.items[0:2]",
            "$.items[0,1]",
            "$['a','b']",
            "id",
            "$.",
            "$.a[",
            "$[-1]",
        ] {
            assert!(check_definite(bad).is_err(), "{bad}");
            assert!(JsonPath::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn finds_members_and_elements() {
        let doc = json!({
            "id": "evt_1",
            "data": {"object": {"customer": "cus_9"}},
            "items": [{"id": 7}, {"id": 8}],
            "a b": "spaced",
        });
        assert_eq!(path("$.id").text(&doc).as_deref(), Some("evt_1"));
        assert_eq!(path("$['id']").text(&doc).as_deref(), Some("evt_1"));
        assert_eq!(
            path("$.data.object.customer").text(&doc).as_deref(),
            Some("cus_9")
        );
        assert_eq!(path("$.items[1].id").text(&doc).as_deref(), Some("8"));
        assert_eq!(path("$[\"a b\"]").text(&doc).as_deref(), Some("spaced"));
        assert_eq!(path(" $.id ").as_str(), "$.id");
    }

    #[test]
    fn numbers_and_booleans_become_their_json_text() {
        let doc = json!({"n": 42, "f": 1.5, "neg": -3, "t": true});
        assert_eq!(path("$.n").text(&doc).as_deref(), Some("42"));
        assert_eq!(path("$.f").text(&doc).as_deref(), Some("1.5"));
        assert_eq!(path("$.neg").text(&doc).as_deref(), Some("-3"));
        assert_eq!(path("$.t").text(&doc).as_deref(), Some("true"));
    }

    #[test]
    fn null_containers_and_absent_values_find_nothing() {
        let doc = json!({"null": null, "obj": {"a": 1}, "arr": [1], "s": "x"});
        for text in [
            "$.null",
            "$.obj",
            "$.arr",
            "$.missing",
            "$.s.deeper",
            "$.arr[5]",
            "$.obj[0]",
            "$.arr.a",
            "$",
        ] {
            assert_eq!(path(text).text(&doc), None, "{text}");
        }
        // The root itself is a value when the document is a scalar.
        assert_eq!(path("$").text(&json!("root")).as_deref(), Some("root"));
    }

    #[test]
    fn huge_indexes_find_nothing() {
        let doc = json!({"arr": [1]});
        assert_eq!(path("$.arr[99999999999999999999999999]").text(&doc), None);
    }
}
