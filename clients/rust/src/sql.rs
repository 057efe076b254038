//! The five statements of the pull contract, rendered for a schema.
//!
//! They are the statements of `examples/pull/sql/postgresql` (the five, and the optional release)
//! with the table and column names taken from [`crate::Schema`]; that directory's comments explain
//! the claim. Each statement is rendered once, when the worker is built.

//! The statements of the pull contract, rendered for a schema.
//!
//! They are the files of `examples/pull/sql/postgresql` themselves (the five, and the optional
//! release), compiled in with `include_str!`, so the worker cannot drift from the contract that
//! the Go and TypeScript clients run too; that directory's comments explain the claim. For a
//! mapped schema the table and column names are renamed word by word (every occurrence of a
//! word, aliases that reuse a column name included, which is a consistent renaming), comments are
//! dropped and the `:name` parameters become positions. Each statement is rendered once, when the
//! worker is built.

use std::collections::HashSet;
use std::sync::Arc;

use crate::Error;
use crate::named::to_positional;
use crate::schema::Quoted;

/// The contract files, by the name the worker knows them by.
const CONTRACT: [(&str, &str); 6] = [
    (
        "claim",
        include_str!("../../../examples/pull/sql/postgresql/claim.sql"),
    ),
    (
        "renew",
        include_str!("../../../examples/pull/sql/postgresql/renew.sql"),
    ),
    (
        "complete",
        include_str!("../../../examples/pull/sql/postgresql/complete.sql"),
    ),
    (
        "retry",
        include_str!("../../../examples/pull/sql/postgresql/retry.sql"),
    ),
    (
        "dead",
        include_str!("../../../examples/pull/sql/postgresql/dead.sql"),
    ),
    (
        "release",
        include_str!("../../../examples/pull/sql/postgresql/release.sql"),
    ),
];

/// Walks SQL text and lets `word` replace each bare word. Quoted text is copied untouched, `::`
/// casts and `:name` parameters are kept as they are (for `to_positional`), `--` comments dropped.
fn rename_words(sql: &str, mut word: impl FnMut(&str) -> Option<String>) -> String {
    let bytes = sql.as_bytes();
    let mut out = String::with_capacity(sql.len());
    let is_start = |b: u8| b == b'_' || b.is_ascii_alphabetic();
    let is_part = |b: u8| b == b'_' || b.is_ascii_alphanumeric();
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        if b == b'\'' || b == b'"' {
            let close = sql[i + 1..]
                .find(b as char)
                .map_or(sql.len(), |p| i + 1 + p + 1);
            out.push_str(&sql[i..close]);
            i = close;
        } else if b == b'-' && bytes.get(i + 1) == Some(&b'-') {
            i = sql[i..].find('\n').map_or(sql.len(), |p| i + p);
        } else if b == b':' && bytes.get(i + 1) == Some(&b':') {
            out.push_str("::");
            i += 2;
        } else if b == b':' || b.is_ascii_digit() {
            // A parameter name or a number: copied whole, never renamed.
            let mut end = i + 1;
            while end < bytes.len() && is_part(bytes[end]) {
                end += 1;
            }
            out.push_str(&sql[i..end]);
            i = end;
        } else if is_start(b) {
            let mut end = i;
            while end < bytes.len() && is_part(bytes[end]) {
                end += 1;
            }
            let w = &sql[i..end];
            match word(w) {
                Some(new) => out.push_str(&new),
                None => out.push_str(w),
            }
            i = end;
        } else {
            let c = sql[i..].chars().next().unwrap_or(' ');
            out.push(c);
            i += c.len_utf8();
        }
    }
    out.trim().to_owned()
}

/// The contract's table and column names, each with the quoted name the schema gives it.
fn renames(q: &Quoted) -> [(&'static str, &str); 19] {
    [
        ("inbox", &q.table),
        ("id", &q.id),
        ("source", &q.source),
        ("idempotency_key", &q.idempotency_key),
        ("aggregate_id", &q.aggregate_id),
        ("event_type", &q.event_type),
        ("payload", &q.payload),
        ("headers", &q.headers),
        ("state", &q.state),
        ("consumption", &q.consumption),
        ("attempt", &q.attempt),
        ("last_error", &q.last_error),
        ("scheduled_at", &q.scheduled_at),
        ("created_at", &q.created_at),
        ("processed_at", &q.processed_at),
        ("claimed_at", &q.claimed_at),
        ("claim_token", &q.claim_token),
        ("lease_expires_at", &q.lease_expires_at),
        ("correlation_id", &q.correlation_id),
    ]
}

/// One rendered statement: positional SQL and the parameter names in position order.
#[derive(Debug, Clone)]
pub(crate) struct Statement {
    pub sql: Arc<str>,
    pub names: Vec<String>,
}

#[derive(Debug, Clone)]
pub(crate) struct Statements {
    pub claim: Statement,
    pub renew: Statement,
    pub complete: Statement,
    pub retry: Statement,
    pub dead: Statement,
    pub release: Statement,
}

fn render(sql: &str, pairs: &[(&'static str, &str)]) -> Statement {
    let renamed = rename_words(sql, |w| {
        let lower = w.to_ascii_lowercase();
        pairs
            .iter()
            .find(|(from, _)| *from == lower)
            .map(|(_, to)| (*to).to_owned())
    });
    let positional = to_positional(&renamed);
    Statement {
        sql: Arc::from(positional.sql),
        names: positional.names,
    }
}

impl Statements {
    /// Renders the contract for the checked names. A mapped name equal to another word of the
    /// statements (an alias, a CTE name, a keyword) could capture a reference, so it is refused.
    pub(crate) fn new(q: &Quoted) -> Result<Self, Error> {
        let pairs = renames(q);
        let mut words = HashSet::new();
        for (_, sql) in CONTRACT {
            rename_words(sql, |w| {
                let lower = w.to_ascii_lowercase();
                if !pairs.iter().any(|(from, _)| *from == lower) {
                    words.insert(lower);
                }
                None
            });
        }
        for (from, to) in &pairs {
            // A quoted name, or a namespace-qualified table: compare the last bare part.
            let bare = to.rsplit('.').next().unwrap_or(to).trim_matches('"');
            let lower = bare.to_ascii_lowercase();
            if lower != *from && words.contains(&lower) {
                return Err(Error::Config(format!(
                    "the schema name {bare:?} (for {from}) is a name the SQL statements already use for something else; rename the column or choose another mapping"
                )));
            }
        }
        let get = |name: &str| {
            let sql = CONTRACT
                .iter()
                .find(|(n, _)| *n == name)
                .map_or("", |(_, sql)| sql);
            render(sql, &pairs)
        };
        Ok(Self {
            claim: get("claim"),
            renew: get("renew"),
            complete: get("complete"),
            retry: get("retry"),
            dead: get("dead"),
            release: get("release"),
        })
    }
}

/// The worker's statements for `schema`, by the name of their contract file (`claim`, `renew`,
/// `complete`, `retry`, `dead`, `release`): positional SQL and the parameter names in position
/// order. Public only so that the tests can hold them to the SQL contract and check their plans.
#[doc(hidden)]
pub fn worker_statements(
    schema: &crate::Schema,
) -> Result<Vec<(&'static str, crate::named::Positional)>, crate::Error> {
    let s = Statements::new(&schema.quoted()?)?;
    let all = [
        ("claim", s.claim),
        ("renew", s.renew),
        ("complete", s.complete),
        ("retry", s.retry),
        ("dead", s.dead),
        ("release", s.release),
    ];
    Ok(all
        .into_iter()
        .map(|(name, st)| {
            let positional = crate::named::Positional {
                sql: st.sql.to_string(),
                names: st.names,
            };
            (name, positional)
        })
        .collect())
}

/// The candidate bound of the contract: three claims' worth, at least 50, at most 500.
pub(crate) fn cand_limit(batch: u32) -> i32 {
    let three = i64::from(batch) * 3;
    // Clamped to 50..=500, so the cast cannot truncate.
    three.clamp(50, 500) as i32
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Schema;

    #[test]
    fn renders_every_placeholder_with_quoted_names() {
        let schema = Schema {
            table: "qb_inbox".into(),
            idempotency_key: "dedup_key".into(),
            ..Schema::default()
        };
        let q = schema.quoted().expect("valid schema");
        let s = Statements::new(&q).expect("renders");
        for st in [
            &s.claim,
            &s.renew,
            &s.complete,
            &s.retry,
            &s.dead,
            &s.release,
        ] {
            assert!(!st.sql.contains('{'), "unfilled placeholder in {}", st.sql);
            assert!(st.sql.contains("\"qb_inbox\""));
        }
        assert!(s.claim.sql.contains("\"dedup_key\""));
        assert_eq!(
            s.claim.names,
            vec!["source", "cand_limit", "batch", "lease_ms"]
        );
        assert_eq!(s.renew.names, vec!["lease_ms", "id", "token"]);
        assert_eq!(s.retry.names, vec!["delay_ms", "error", "id", "token"]);
        assert_eq!(s.release.names, vec!["id", "token"]);
    }

    #[test]
    fn cand_limit_follows_the_contract() {
        assert_eq!(cand_limit(1), 50);
        assert_eq!(cand_limit(20), 60);
        assert_eq!(cand_limit(1000), 500);
    }
}

/// A value bound to a named parameter.
#[derive(Debug, Clone)]
pub(crate) enum Param {
    Text(String),
    Int(i32),
    BigInt(i64),
    Uuid(uuid::Uuid),
}

impl Statement {
    /// The query with each value bound at the position of its name.
    ///
    /// A name without a value is a bug of this crate (the statements are fixed), so it binds NULL
    /// and lets the database reject the statement rather than panic in a worker.
    pub(crate) fn query<'q>(
        &self,
        values: &[(&str, Param)],
    ) -> sqlx::query::Query<'q, sqlx::Postgres, sqlx::postgres::PgArguments> {
        let mut query = sqlx::query(sqlx::AssertSqlSafe(self.sql.clone()));
        for name in &self.names {
            let value = values.iter().find(|(n, _)| n == name).map(|(_, v)| v);
            query = match value {
                Some(Param::Text(v)) => query.bind(v.clone()),
                Some(Param::Int(v)) => query.bind(*v),
                Some(Param::BigInt(v)) => query.bind(*v),
                Some(Param::Uuid(v)) => query.bind(*v),
                None => query.bind(Option::<String>::None),
            };
        }
        query
    }
}
