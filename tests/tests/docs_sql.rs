//! Every ```sql block of the documentation runs against a freshly migrated schema.
//!
//! The pages promise their readers SQL they can paste into psql; this test keeps that promise. It
//! reads `README.md` and every `docs/**/*.md` file, takes each fenced block whose info string is
//! `sql` (a block marked `sql,ignore`, or any other language, is skipped), migrates one fresh
//! database with the real binary (`queuebox migrate`, default table names), and runs each block on
//! its own in a transaction that is then rolled back, so no block sees what another one did.
//!
//! Conventions for authors of a block:
//!
//! - A block is self-contained PostgreSQL: psql meta-commands (`\x`, `\gset`) do not run.
//! - Placeholders: the database holds a few seeded rows (below), and these placeholders are
//!   replaced before a block runs:
//!   - `:outbox_id` -> the id of a seeded `dead` outbox row (topic `order.created`, with a
//!     `last_error`), as a quoted uuid literal;
//!   - `:inbox_id` -> the id of a seeded `dead` push inbox row of source `orders`, likewise;
//!   - `:source` -> `'orders'`, the seeded inbox rows' source.
//!
//!   A placeholder is a colon, the name and a character that cannot continue a name, and never
//!   follows a second colon (so `x::text` is left alone). Anything else that cannot run as is
//!   (`<id>`, DDL for custom tables) belongs in a `sql,ignore` or `text` block.
//! - Transaction control inside a block is allowed: a line holding only `BEGIN`, `START
//!   TRANSACTION`, `COMMIT`, `END` or `ROLLBACK` (with or without `;`) becomes a savepoint, its
//!   release or a rollback to it, so the block still ends in the test's rolled-back transaction.
//! - Statements that cannot run inside a transaction (`CREATE INDEX CONCURRENTLY`, `VACUUM`) must be
//!   marked `sql,ignore`.
//! - Each block runs with `statement_timeout` and `lock_timeout` of 10 s.
//!
//! A failure names the file, the line of the block (and of the failing statement when the
//! database reports a position) and the database's error, for every failing block at once.

use queuebox_tests::database::TestDatabase;
use queuebox_tests::docs;
use queuebox_tests::process::Launch;
use sqlx::{AssertSqlSafe, Connection, PgConnection};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The seeded outbox row that `:outbox_id` names.
const OUTBOX_ID: &str = "4d1a6b2e-6f61-4c1b-9d3e-0b7c5a9e1f01";
/// The seeded inbox row that `:inbox_id` names.
const INBOX_ID: &str = "7e2c9f40-3b85-4d6a-a1f2-5c8d0e6b3a02";

/// Rows the placeholders point at, and a little of every state, so queries that read real rows
/// return some.
const SEED: &str = "
INSERT INTO outbox (id, topic, key, payload, state, attempt, last_error, aggregate_type)
VALUES ('4d1a6b2e-6f61-4c1b-9d3e-0b7c5a9e1f01', 'order.created', 'cust-42', '{\"orderId\": 1}',
        'dead', 5, 'HTTP 503 from https://orders.example.com/events: {\"error\":\"busy\"}', 'order');
INSERT INTO outbox (topic, key, payload) VALUES ('order.created', 'cust-43', '{\"orderId\": 2}');
INSERT INTO outbox (topic, key, payload, state) VALUES ('order.paid', 'cust-42', '{\"orderId\": 1}', 'sent');
INSERT INTO inbox (id, source, idempotency_key, event_type, payload, state, attempt, last_error)
VALUES ('7e2c9f40-3b85-4d6a-a1f2-5c8d0e6b3a02', 'orders', 'evt-1', 'created', '{\"id\": \"evt-1\"}',
        'dead', 5, 'no route matches topic order.created');
INSERT INTO inbox (source, idempotency_key, event_type, payload, consumption)
VALUES ('orders', 'evt-2', 'created', '{\"id\": \"evt-2\"}', 'pull');
";

/// One fenced `sql` block of a page.
struct Block {
    file: PathBuf,
    /// 1-based line of the first line of SQL (the line after the opening fence).
    line: usize,
    sql: String,
}

/// The ```sql blocks of one page that run (not marked `ignore`).
fn sql_blocks(file: &Path, text: &str) -> Vec<Block> {
    docs::code_blocks(text)
        .into_iter()
        .filter(|block| block.language() == "sql" && !block.has_flag("ignore"))
        .map(|block| Block {
            file: file.to_path_buf(),
            line: block.line + 1,
            sql: block.body,
        })
        .collect()
}

/// Replaces the documented placeholders and turns transaction control into savepoints.
fn prepare(sql: &str) -> String {
    let mut out = String::with_capacity(sql.len() + 64);
    for line in sql.lines() {
        let statement = line
            .trim()
            .trim_end_matches(';')
            .trim()
            .to_ascii_uppercase();
        let replaced = match statement.as_str() {
            "BEGIN" | "START TRANSACTION" | "BEGIN TRANSACTION" => "SAVEPOINT docs_block;",
            "COMMIT" | "END" | "COMMIT TRANSACTION" => "RELEASE SAVEPOINT docs_block;",
            "ROLLBACK" | "ROLLBACK TRANSACTION" => "ROLLBACK TO SAVEPOINT docs_block;",
            _ => {
                out.push_str(&placeholders(line));
                out.push('\n');
                continue;
            }
        };
        out.push_str(replaced);
        out.push('\n');
    }
    out
}

fn placeholders(line: &str) -> String {
    let values = [
        ("outbox_id", format!("'{OUTBOX_ID}'")),
        ("inbox_id", format!("'{INBOX_ID}'")),
        ("source", "'orders'".to_owned()),
    ];
    let chars: Vec<char> = line.chars().collect();
    let mut out = String::with_capacity(line.len());
    let mut i = 0;
    'outer: while i < chars.len() {
        if chars[i] == ':' && (i == 0 || chars[i - 1] != ':') {
            for (name, value) in &values {
                let end = i + 1 + name.chars().count();
                let matches = chars
                    .get(i + 1..end)
                    .is_some_and(|s| s.iter().copied().eq(name.chars()));
                let bounded = chars
                    .get(end)
                    .is_none_or(|c| !(c.is_ascii_alphanumeric() || *c == '_'));
                if matches && bounded {
                    out.push_str(value);
                    i = end;
                    continue 'outer;
                }
            }
        }
        out.push(chars[i]);
        i += 1;
    }
    out
}

/// Runs one block in a transaction that is rolled back; the error names the failing line.
async fn run_block(connection: &mut PgConnection, block: &Block) -> Result<(), String> {
    let sql = prepare(&block.sql);
    let mut transaction = connection
        .begin()
        .await
        .map_err(|e| format!("cannot begin a transaction: {e}"))?;
    sqlx::raw_sql("SET LOCAL statement_timeout = '10s'; SET LOCAL lock_timeout = '10s'")
        .execute(&mut *transaction)
        .await
        .map_err(|e| format!("cannot set the timeouts: {e}"))?;
    let outcome = sqlx::raw_sql(AssertSqlSafe(sql.clone()))
        .execute(&mut *transaction)
        .await;
    let _ = transaction.rollback().await;
    outcome.map(|_| ()).map_err(|error| {
        let Some(database) = error
            .as_database_error()
            .and_then(|e| e.try_downcast_ref::<sqlx::postgres::PgDatabaseError>())
        else {
            return error.to_string();
        };
        let mut text = format!("{} (SQLSTATE {})", database.message(), database.code());
        if let Some(detail) = database.detail() {
            text.push_str(&format!("; detail: {detail}"));
        }
        if let Some(hint) = database.hint() {
            text.push_str(&format!("; hint: {hint}"));
        }
        // The position counts characters of the text sent, whose lines are the block's lines.
        if let Some(sqlx::postgres::PgErrorPosition::Original(position)) = database.position() {
            let before: String = sql.chars().take(position.saturating_sub(1)).collect();
            text = format!("line {}: {text}", block.line + before.matches('\n').count());
        }
        text
    })
}

#[tokio::test]
async fn every_sql_block_of_the_documentation_runs_against_a_migrated_schema() {
    let mut blocks = Vec::new();
    for page in docs::markdown_files() {
        blocks.extend(sql_blocks(&page, &docs::read(&page)));
    }
    assert!(
        !blocks.is_empty(),
        "no ```sql block found in docs/ or README.md"
    );

    let db = TestDatabase::create().await;
    let launch = Launch::with_config(&format!(
        "database:\n  url: {url}\n  username: {user}\n  password: {password}\n  startupTimeoutMs: 10000\n",
        url = db.jdbc_url(),
        user = db.user,
        password = db.password,
    ));
    let (status, _stdout, stderr) = launch.run(&["migrate"], Duration::from_secs(60)).await;
    assert!(status.success(), "queuebox migrate failed:\n{stderr}");
    db.execute(SEED).await;

    let mut connection = db.connect().await;
    let mut failures = Vec::new();
    for block in &blocks {
        if let Err(error) = run_block(&mut connection, block).await {
            failures.push(format!(
                "{}:{} (block starting there): {error}",
                docs::shown(&block.file),
                block.line
            ));
        }
    }
    let _ = connection.close().await;
    db.drop_database().await;
    assert!(
        failures.is_empty(),
        "{} of {} ```sql blocks failed (mark a block that cannot run as ```sql,ignore):\n{}",
        failures.len(),
        blocks.len(),
        failures.join("\n")
    );
    eprintln!("{} ```sql blocks ran", blocks.len());
}

#[test]
fn placeholders_and_transaction_control_are_rewritten() {
    let sql =
        "BEGIN;\nSELECT * FROM outbox WHERE id = :outbox_id AND x::text = :source;\nCOMMIT;\n";
    let prepared = prepare(sql);
    assert_eq!(
        prepared,
        format!(
            "SAVEPOINT docs_block;\nSELECT * FROM outbox WHERE id = '{OUTBOX_ID}' AND x::text = 'orders';\nRELEASE SAVEPOINT docs_block;\n"
        )
    );
    assert_eq!(
        placeholders(":sourcex :inbox_id"),
        format!(":sourcex '{INBOX_ID}'")
    );
}
