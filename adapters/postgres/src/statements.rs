//! The SQL that touches the (possibly renamed) outbox and inbox tables, rendered once at start.
//!
//! Each statement lives in `queries/<name>.sql` with placeholders for names: `{outbox}` and
//! `{inbox}` for the tables, `{outbox.<key>}` and `{inbox.<key>}` for a column by its
//! configuration key (for example `{outbox.maxAttempts}`). Rendering replaces each placeholder with
//! the configured name, checked against the identifier rule and double-quoted, so no configured text
//! reaches SQL unchecked and values always travel as bind parameters. Comment lines of the
//! templates are dropped from the rendered text.
//!
//! Capture's statements touch no renamed name (catalogs, the fixed `queuebox_capture_state`, and
//! replication commands); they live in `capture/sql.rs`.

use queuebox_domain::mapping::{Columns, SchemaNames};
use sqlx::{AssertSqlSafe, SqlStr};

use crate::error::PostgresError;

/// (name, template) of every statement; the name is the file stem under `queries/`.
const TEMPLATES: [(&str, &str); 25] = [
    ("ping", include_str!("../queries/ping.sql")),
    (
        "table_columns",
        include_str!("../queries/table_columns.sql"),
    ),
    (
        "insert_outbox",
        include_str!("../queries/insert_outbox.sql"),
    ),
    ("insert_inbox", include_str!("../queries/insert_inbox.sql")),
    (
        "insert_inbox_many",
        include_str!("../queries/insert_inbox_many.sql"),
    ),
    (
        "outbox_claim_keyed",
        include_str!("../queries/outbox_claim_keyed.sql"),
    ),
    (
        "outbox_claim_unkeyed",
        include_str!("../queries/outbox_claim_unkeyed.sql"),
    ),
    (
        "outbox_claim_released",
        include_str!("../queries/outbox_claim_released.sql"),
    ),
    ("outbox_renew", include_str!("../queries/outbox_renew.sql")),
    (
        "outbox_finish",
        include_str!("../queries/outbox_finish.sql"),
    ),
    (
        "outbox_reclaim",
        include_str!("../queries/outbox_reclaim.sql"),
    ),
    (
        "outbox_pending_stats",
        include_str!("../queries/outbox_pending_stats.sql"),
    ),
    (
        "outbox_next_deadline",
        include_str!("../queries/outbox_next_deadline.sql"),
    ),
    ("relay_lock", include_str!("../queries/relay_lock.sql")),
    (
        "relay_claim_keyed",
        include_str!("../queries/relay_claim_keyed.sql"),
    ),
    (
        "relay_claim_unkeyed",
        include_str!("../queries/relay_claim_unkeyed.sql"),
    ),
    (
        "relay_forward",
        include_str!("../queries/relay_forward.sql"),
    ),
    ("relay_dead", include_str!("../queries/relay_dead.sql")),
    (
        "relay_reclaim",
        include_str!("../queries/relay_reclaim.sql"),
    ),
    (
        "relay_oldest_pending",
        include_str!("../queries/relay_oldest_pending.sql"),
    ),
    (
        "retention_outbox_age",
        include_str!("../queries/retention_outbox_age.sql"),
    ),
    (
        "retention_outbox_count",
        include_str!("../queries/retention_outbox_count.sql"),
    ),
    (
        "retention_inbox_age",
        include_str!("../queries/retention_inbox_age.sql"),
    ),
    (
        "replay_candidates",
        include_str!("../queries/replay_candidates.sql"),
    ),
    ("replay_move", include_str!("../queries/replay_move.sql")),
];

/// The rendered statements. Cloning a [`SqlStr`] is cheap (shared text).
#[derive(Debug, Clone)]
pub struct Statements {
    /// `SELECT 1`: health check and probe.
    pub ping: SqlStr,
    /// Whether table `$1` (quoted name) resolves, and its columns: `(table_found bool, columns text[])`.
    pub table_columns: SqlStr,
    /// Insert one outbox row; returns `(id, sequence)`. Parameters are listed in the template.
    pub insert_outbox: SqlStr,
    /// Insert one inbox row, no row back on a duplicate; returns `(id)`.
    pub insert_inbox: SqlStr,
    /// Insert a group of inbox rows from arrays, no row back for a duplicate; returns `(id)` per new row.
    pub insert_inbox_many: SqlStr,
    /// Claim the heads of ready keys, walking keys from a cursor (see the template for why).
    pub outbox_claim_keyed: SqlStr,
    /// Claim due rows that have no key.
    pub outbox_claim_unkeyed: SqlStr,
    /// Claim the next head of keys this replica just released (see the template for why).
    pub outbox_claim_released: SqlStr,
    /// Renew the leases of held rows, fenced.
    pub outbox_renew: SqlStr,
    /// Finish many claims at once, each fenced on its own token.
    pub outbox_finish: SqlStr,
    /// Return expired claims to pending.
    pub outbox_reclaim: SqlStr,
    /// Pending rows per topic and the oldest pending age.
    pub outbox_pending_stats: SqlStr,
    /// Seconds until the earliest pending row falls due by itself.
    pub outbox_next_deadline: SqlStr,
    /// Take the relay claim lock for the rest of the transaction; `$1` is the inbox table name.
    pub relay_lock: SqlStr,
    /// Claim the oldest pending push row of ready aggregates, walking aggregates from a cursor.
    pub relay_claim_keyed: SqlStr,
    /// Claim pending push rows without an aggregate, oldest first.
    pub relay_claim_unkeyed: SqlStr,
    /// Forward claimed inbox rows into the outbox, fenced, in one statement.
    pub relay_forward: SqlStr,
    /// Move one claimed inbox row to dead, fenced.
    pub relay_dead: SqlStr,
    /// Return expired relay claims to pending.
    pub relay_reclaim: SqlStr,
    /// The age of the oldest pending inbox row.
    pub relay_oldest_pending: SqlStr,
    /// Retention: delete one batch of old sent or dead outbox rows.
    pub retention_outbox_age: SqlStr,
    /// Retention: delete one batch of sent or dead outbox rows beyond the newest kept ones.
    pub retention_outbox_count: SqlStr,
    /// Retention: delete one batch of old processed or dead inbox rows.
    pub retention_inbox_age: SqlStr,
    /// One page of sent and dead outbox rows a replay filter selects, from a cursor, in id order.
    pub replay_candidates: SqlStr,
    /// Move a page of replayed rows back to pending.
    pub replay_move: SqlStr,
}

impl Statements {
    /// Renders every template for `names`.
    ///
    /// # Errors
    /// [`PostgresError::InvalidNames`] when a name breaks the identifier rule;
    /// [`PostgresError::UnknownPlaceholder`] when a template names an unknown key (a bug).
    pub fn render(names: &SchemaNames) -> Result<Self, PostgresError> {
        let invalid = names.validate();
        if !invalid.is_empty() {
            return Err(PostgresError::InvalidNames(invalid));
        }
        let [
            ping,
            table_columns,
            insert_outbox,
            insert_inbox,
            insert_inbox_many,
            outbox_claim_keyed,
            outbox_claim_unkeyed,
            outbox_claim_released,
            outbox_renew,
            outbox_finish,
            outbox_reclaim,
            outbox_pending_stats,
            outbox_next_deadline,
            relay_lock,
            relay_claim_keyed,
            relay_claim_unkeyed,
            relay_forward,
            relay_dead,
            relay_reclaim,
            relay_oldest_pending,
            retention_outbox_age,
            retention_outbox_count,
            retention_inbox_age,
            replay_candidates,
            replay_move,
        ] = TEMPLATES.map(|(name, template)| render_template(name, template, names));
        Ok(Self {
            ping: ping?,
            table_columns: table_columns?,
            insert_outbox: insert_outbox?,
            insert_inbox: insert_inbox?,
            insert_inbox_many: insert_inbox_many?,
            outbox_claim_keyed: outbox_claim_keyed?,
            outbox_claim_unkeyed: outbox_claim_unkeyed?,
            outbox_claim_released: outbox_claim_released?,
            outbox_renew: outbox_renew?,
            outbox_finish: outbox_finish?,
            outbox_reclaim: outbox_reclaim?,
            outbox_pending_stats: outbox_pending_stats?,
            outbox_next_deadline: outbox_next_deadline?,
            relay_lock: relay_lock?,
            relay_claim_keyed: relay_claim_keyed?,
            relay_claim_unkeyed: relay_claim_unkeyed?,
            relay_forward: relay_forward?,
            relay_dead: relay_dead?,
            relay_reclaim: relay_reclaim?,
            relay_oldest_pending: relay_oldest_pending?,
            retention_outbox_age: retention_outbox_age?,
            retention_outbox_count: retention_outbox_count?,
            retention_inbox_age: retention_inbox_age?,
            replay_candidates: replay_candidates?,
            replay_move: replay_move?,
        })
    }

    /// Every statement as (name, text), in template order; for logs and the golden test.
    pub fn iter(&self) -> impl Iterator<Item = (&'static str, &str)> {
        [
            &self.ping,
            &self.table_columns,
            &self.insert_outbox,
            &self.insert_inbox,
            &self.insert_inbox_many,
            &self.outbox_claim_keyed,
            &self.outbox_claim_unkeyed,
            &self.outbox_claim_released,
            &self.outbox_renew,
            &self.outbox_finish,
            &self.outbox_reclaim,
            &self.outbox_pending_stats,
            &self.outbox_next_deadline,
            &self.relay_lock,
            &self.relay_claim_keyed,
            &self.relay_claim_unkeyed,
            &self.relay_forward,
            &self.relay_dead,
            &self.relay_reclaim,
            &self.relay_oldest_pending,
            &self.retention_outbox_age,
            &self.retention_outbox_count,
            &self.retention_inbox_age,
            &self.replay_candidates,
            &self.replay_move,
        ]
        .into_iter()
        .zip(TEMPLATES)
        .map(|(sql, (name, _))| (name, sql.as_str()))
    }
}

/// A validated identifier in double quotes. The identifier rule admits no `"`, so no escaping.
pub(crate) fn quote(name: &str) -> String {
    format!("\"{name}\"")
}

pub(crate) fn render_template(
    template_name: &'static str,
    template: &str,
    names: &SchemaNames,
) -> Result<SqlStr, PostgresError> {
    let mut out = String::with_capacity(template.len());
    for line in template
        .lines()
        .filter(|line| !line.trim_start().starts_with("--"))
    {
        let mut rest = line;
        while let Some(start) = rest.find('{') {
            out.push_str(&rest[..start]);
            let after = &rest[start + 1..];
            match after.find('}') {
                Some(end) if is_placeholder(&after[..end]) => {
                    let key = &after[..end];
                    let name =
                        resolve(key, names).ok_or_else(|| PostgresError::UnknownPlaceholder {
                            template: template_name,
                            placeholder: key.to_owned(),
                        })?;
                    out.push_str(&quote(name));
                    rest = &after[end + 1..];
                }
                // Not a placeholder (for example a JSON literal '{}'): keep the brace.
                _ => {
                    out.push('{');
                    rest = after;
                }
            }
        }
        out.push_str(rest);
        out.push('\n');
    }
    Ok(assert_safe(out.trim_end().to_owned()))
}

/// Placeholder text: a letter first, then letters, digits, `_` and `.`.
fn is_placeholder(text: &str) -> bool {
    text.starts_with(|c: char| c.is_ascii_alphabetic())
        && text
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.')
}

fn resolve<'a>(key: &str, names: &'a SchemaNames) -> Option<&'a str> {
    let column = |columns: &'a Columns, key: &str| columns.get(key);
    match key.split_once('.') {
        None if key == "outbox" => Some(&names.outbox_table),
        None if key == "inbox" => Some(&names.inbox_table),
        Some(("outbox", column_key)) => column(&names.outbox, column_key),
        Some(("inbox", column_key)) => column(&names.inbox, column_key),
        _ => None,
    }
}

/// The rendered text holds only template text and validated, quoted identifiers.
fn assert_safe(text: String) -> SqlStr {
    sqlx::SqlSafeStr::into_sql_str(AssertSqlSafe(text))
}

/// True when `sql` still holds a `{name}` placeholder; used by tests.
pub fn has_placeholder(sql: &str) -> bool {
    sql.match_indices('{').any(|(start, _)| {
        sql[start + 1..]
            .find('}')
            .is_some_and(|end| is_placeholder(&sql[start + 1..start + 1 + end]))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn renamed() -> SchemaNames {
        let mut names = SchemaNames {
            outbox_table: "qb_outbox".into(),
            inbox_table: "qb_inbox".into(),
            ..SchemaNames::default()
        };
        assert!(names.outbox.set("payload", "body"));
        assert!(names.inbox.set("idempotencyKey", "dedup_key"));
        names
    }

    #[test]
    fn no_placeholder_survives_for_default_and_renamed_names() {
        for names in [SchemaNames::default(), renamed()] {
            let statements = Statements::render(&names).expect("render");
            for (name, sql) in statements.iter() {
                assert!(!has_placeholder(sql), "{name} kept a placeholder: {sql}");
                assert!(!sql.contains("--"), "{name} kept a comment: {sql}");
            }
        }
    }

    #[test]
    fn names_are_quoted_and_renames_applied() {
        let statements = Statements::render(&renamed()).expect("render");
        let insert = statements.insert_outbox.as_str();
        assert!(
            insert.starts_with("INSERT INTO \"qb_outbox\" ("),
            "{insert}"
        );
        assert!(insert.contains("\"body\""), "{insert}");
        assert!(!insert.contains("\"payload\""), "{insert}");
        assert!(statements.insert_inbox.as_str().contains("\"dedup_key\""),);
        let many = statements.insert_inbox_many.as_str();
        assert!(many.starts_with("INSERT INTO \"qb_inbox\" ("), "{many}");
        assert!(many.contains("\"dedup_key\""), "{many}");
    }

    #[test]
    fn json_braces_are_not_placeholders() {
        assert!(!has_placeholder("DEFAULT '{}'"));
        assert!(has_placeholder("INSERT INTO {outbox}"));
        let names = SchemaNames::default();
        let sql = render_template("t", "SELECT '{}'::jsonb FROM {outbox}", &names).expect("ok");
        assert_eq!(sql.as_str(), "SELECT '{}'::jsonb FROM \"outbox\"");
    }

    #[test]
    fn an_unknown_key_is_reported() {
        let error = render_template("t", "SELECT {outbox.nope}", &SchemaNames::default())
            .expect_err("unknown key");
        assert!(error.to_string().contains("{outbox.nope}"), "{error}");
    }

    #[test]
    fn an_invalid_name_is_refused_before_rendering() {
        let names = SchemaNames {
            outbox_table: "x; DROP TABLE y".into(),
            ..SchemaNames::default()
        };
        let error = Statements::render(&names).expect_err("invalid");
        assert!(
            error.to_string().contains("database.outboxTableName"),
            "{error}"
        );
    }
}
