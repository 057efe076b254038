//! The definite-JSONPath rule of the source key paths.
//!
//! A definite path names at most one value: `$` followed by `.name`, `['name']` (or `["name"]`) and
//! `[index]` steps. Deep scans, wildcards, filters, slices and unions can match several values, and
//! an idempotency key or event type must be one value, so they are refused.

/// Checks that `path` is a definite JSONPath.
///
/// # Errors
/// What makes the path indefinite or malformed.
pub fn check_definite(path: &str) -> Result<(), String> {
    let Some(mut rest) = path.strip_prefix('$') else {
        return Err(format!("must start with `$`, got `{path}`"));
    };
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
            rest = &after[end..];
        } else if let Some(after) = rest.strip_prefix('[') {
            rest = bracket_step(after, path)?;
        } else {
            return Err(format!("expected `.` or `[` at `{rest}` in `{path}`"));
        }
    }
    Ok(())
}

/// One `[...]` step; returns the text after its `]`.
fn bracket_step<'a>(after: &'a str, path: &str) -> Result<&'a str, String> {
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
        return Ok(rest);
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
    Ok(&after[close + 1..])
}

#[cfg(test)]
mod tests {
    use super::*;

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
        }
    }
}
