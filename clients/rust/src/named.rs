//! Named parameters (`:source`) to PostgreSQL positions (`$1`).
//!
//! The SQL contract in `examples/pull/sql` is written with names so that any driver can bind it;
//! the worker renders its own statements the same way, so both read alike.

/// SQL text with `$n` placeholders, and the parameter names in position order (each name once).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Positional {
    pub sql: String,
    pub names: Vec<String>,
}

/// Replaces every `:name` with `$n`, one position per distinct name. A `::` cast, text inside
/// single quotes, inside double quotes and inside `--` comments is left alone.
pub fn to_positional(sql: &str) -> Positional {
    let chars: Vec<char> = sql.chars().collect();
    let mut out = String::with_capacity(sql.len());
    let mut names: Vec<String> = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        match c {
            '\'' | '"' => {
                // Copy the quoted text whole; a doubled quote inside it reopens it at once.
                out.push(c);
                i += 1;
                while i < chars.len() {
                    out.push(chars[i]);
                    i += 1;
                    if chars[i - 1] == c {
                        break;
                    }
                }
            }
            '-' if chars.get(i + 1) == Some(&'-') => {
                while i < chars.len() && chars[i] != '\n' {
                    out.push(chars[i]);
                    i += 1;
                }
            }
            ':' if chars.get(i + 1) == Some(&':') => {
                out.push_str("::");
                i += 2;
            }
            ':' if chars
                .get(i + 1)
                .is_some_and(|n| n.is_ascii_lowercase() || *n == '_') =>
            {
                let start = i + 1;
                let mut end = start;
                while end < chars.len() && (chars[end].is_ascii_alphanumeric() || chars[end] == '_')
                {
                    end += 1;
                }
                let name: String = chars[start..end].iter().collect();
                let position = match names.iter().position(|n| *n == name) {
                    Some(p) => p + 1,
                    None => {
                        names.push(name);
                        names.len()
                    }
                };
                out.push('$');
                out.push_str(&position.to_string());
                i = end;
            }
            _ => {
                out.push(c);
                i += 1;
            }
        }
    }
    Positional { sql: out, names }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_each_name_once_and_skips_casts_quotes_and_comments() {
        let p = to_positional(
            "-- :not_me\nSELECT x::text, ':nor_me' FROM t WHERE a = :id AND b = :token OR c = :id",
        );
        assert_eq!(p.names, vec!["id", "token"]);
        assert_eq!(
            p.sql,
            "-- :not_me\nSELECT x::text, ':nor_me' FROM t WHERE a = $1 AND b = $2 OR c = $1"
        );
    }
}
