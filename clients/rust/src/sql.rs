//! The five statements of the pull contract, rendered for a schema.
//!
//! They are the statements of `examples/pull/sql/postgresql` (the five, and the optional release)
//! with the table and column names taken from [`crate::Schema`]; that directory's comments explain
//! the claim. Each statement is rendered once, when the worker is built.

use std::sync::Arc;

use crate::named::to_positional;
use crate::schema::Quoted;

const BUSY: &str = "SELECT 1 FROM {table} b
                     WHERE b.{source} = CAST(:source AS text) AND b.{consumption} = 'pull'
                       AND b.{state} = 'processing' AND b.{aggregate_id} = {agg}
                       AND b.{lease_expires_at} > now()";

const CLAIM: &str = "
WITH RECURSIVE walk (agg, id, due, created, ready, steps, ready_count) AS (
    SELECT h.agg, h.id, h.due, h.created, r.ready, 1, r.ready
      FROM (SELECT i.{aggregate_id} AS agg, i.{id} AS id, i.{scheduled_at} AS due,
                   i.{created_at} AS created
              FROM {table} i
             WHERE i.{source} = CAST(:source AS text) AND i.{consumption} = 'pull'
               AND i.{state} = 'pending' AND i.{aggregate_id} IS NOT NULL
             ORDER BY i.{aggregate_id}, i.{scheduled_at}, i.{created_at}, i.{id}
             LIMIT 1) h
     CROSS JOIN LATERAL (
        SELECT CASE WHEN h.due <= now() AND NOT EXISTS ({busy_h}) THEN 1 ELSE 0 END AS ready) r
  UNION ALL
    SELECT h.agg, h.id, h.due, h.created, r.ready, w.steps + 1, w.ready_count + r.ready
      FROM walk w
     CROSS JOIN LATERAL (
        SELECT i.{aggregate_id} AS agg, i.{id} AS id, i.{scheduled_at} AS due,
               i.{created_at} AS created
          FROM {table} i
         WHERE i.{source} = CAST(:source AS text) AND i.{consumption} = 'pull'
           AND i.{state} = 'pending' AND i.{aggregate_id} > w.agg
         ORDER BY i.{aggregate_id}, i.{scheduled_at}, i.{created_at}, i.{id}
         LIMIT 1) h
     CROSS JOIN LATERAL (
        SELECT CASE WHEN h.due <= now() AND NOT EXISTS ({busy_h}) THEN 1 ELSE 0 END AS ready) r
     WHERE w.ready_count < CAST(:cand_limit AS int) AND w.steps < 4 * CAST(:cand_limit AS int)
),
oldest AS (
    SELECT i.{id} AS id, i.{aggregate_id} AS agg, i.{scheduled_at} AS due, i.{created_at} AS created
      FROM {table} i
     WHERE i.{source} = CAST(:source AS text) AND i.{consumption} = 'pull'
       AND i.{state} = 'pending' AND i.{scheduled_at} <= now()
     ORDER BY i.{scheduled_at}, i.{created_at}, i.{id}
     LIMIT CAST(:cand_limit AS int)
),
expired AS (
    SELECT i.{id} AS id, i.{aggregate_id} AS agg, i.{scheduled_at} AS due, i.{created_at} AS created
      FROM {table} i
     WHERE i.{source} = CAST(:source AS text) AND i.{consumption} = 'pull'
       AND i.{state} = 'processing' AND i.{lease_expires_at} <= now()
     ORDER BY i.{lease_expires_at}, i.{id}
     LIMIT CAST(:cand_limit AS int)
),
-- Each set carries the columns the ranking needs, so that no plan goes back to the table for
-- them: a generic plan cannot see how few candidates there are and would scan the whole table.
-- The short way ranks the window and the expired leases alone; when it finds :batch rows, none
-- after the window's last row, the long way (with the walk) would pick the same rows, so the walk
-- never runs. The proof is in examples/pull/sql/postgresql/claim.sql.
near AS (
    SELECT n.id, n.agg, n.due, n.created,
           row_number() OVER (
               PARTITION BY n.agg, CASE WHEN n.agg IS NULL THEN n.id END
               ORDER BY n.lane, n.due, n.created, n.id) AS place
      FROM (SELECT id, agg, due, created, 1 AS lane FROM oldest
            UNION ALL SELECT id, agg, due, created, 0 FROM expired) n
),
near_picked AS (
    SELECT c.id, c.due, c.created
      FROM near c
     WHERE c.place = 1 AND (c.agg IS NULL OR NOT EXISTS ({busy_c}))
     ORDER BY c.due, c.created, c.id
     LIMIT CAST(:batch AS int)
),
short_way AS (
    SELECT count(*) >= CAST(:batch AS int)
           AND NOT EXISTS (
               SELECT 1
                 FROM near_picked n
                 JOIN (SELECT due, created, id FROM oldest
                        ORDER BY due DESC, created DESC, id DESC LIMIT 1) last
                   ON (n.due, n.created, n.id) > (last.due, last.created, last.id)) AS enough
      FROM near_picked
),
pool AS (
    SELECT id, agg, due, created, 1 AS lane FROM walk WHERE ready = 1
    UNION SELECT id, agg, due, created, 1 FROM oldest
    UNION SELECT id, agg, due, created, 0 FROM expired
),
candidates AS (
    SELECT p.id, p.agg, p.due, p.created,
           row_number() OVER (
               PARTITION BY p.agg, CASE WHEN p.agg IS NULL THEN p.id END
               ORDER BY p.lane, p.due, p.created, p.id) AS place
      FROM pool p
),
picked AS (
    SELECT id FROM near_picked WHERE (SELECT enough FROM short_way)
    UNION ALL
    (SELECT c.id
       FROM candidates c
      WHERE NOT (SELECT enough FROM short_way)
        AND c.place = 1 AND (c.agg IS NULL OR NOT EXISTS ({busy_c}))
      ORDER BY c.due, c.created, c.id
      LIMIT CAST(:batch AS int))
),
locked AS (
    SELECT i.{id} AS id
      FROM {table} i
     WHERE i.{id} IN (SELECT id FROM picked)
       AND i.{source} = CAST(:source AS text) AND i.{consumption} = 'pull'
       AND ((i.{state} = 'pending' AND i.{scheduled_at} <= now())
            OR (i.{state} = 'processing' AND i.{lease_expires_at} <= now()))
     FOR UPDATE SKIP LOCKED
)
UPDATE {table} t
   SET {state} = 'processing',
       {claim_token} = gen_random_uuid(),
       {claimed_at} = now(),
       {lease_expires_at} = now() + CAST(:lease_ms AS bigint) * interval '1 millisecond'
  FROM locked
 WHERE t.{id} = locked.id
RETURNING t.{id} AS id, t.{claim_token} AS claim_token, t.{source} AS source,
          t.{idempotency_key} AS idempotency_key, t.{aggregate_id} AS aggregate_id,
          t.{event_type} AS event_type, t.{payload} AS payload, t.{headers} AS headers,
          t.{attempt} AS attempt, t.{correlation_id} AS correlation_id, t.{created_at} AS created_at";

/// The fence every write after the claim carries: this row, this token, still ours.
///
/// The state is compared as `{state} || ''` so that the id is the only way in. Written plainly,
/// `state = 'processing'` matches an index on the state (and one partial on processing rows),
/// which the planner takes whenever its statistics say that almost no row is processing; that
/// scan then reads the entries of every row processed since the last vacuum, dead ones included,
/// once per write (tests/fence_plan.rs builds that case).
const FENCE: &str = "WHERE {id} = CAST(:id AS uuid) AND {claim_token} = CAST(:token AS uuid)
   AND {state} || '' = 'processing' AND {lease_expires_at} > now()";

const RENEW: &str = "UPDATE {table}
   SET {lease_expires_at} = now() + CAST(:lease_ms AS bigint) * interval '1 millisecond'
 {fence}";

const COMPLETE: &str = "UPDATE {table}
   SET {state} = 'processed', {processed_at} = now(), {claim_token} = NULL, {lease_expires_at} = NULL
 {fence}";

const RETRY: &str = "UPDATE {table}
   SET {state} = 'pending', {attempt} = {attempt} + 1,
       {scheduled_at} = now() + CAST(:delay_ms AS bigint) * interval '1 millisecond',
       {last_error} = CAST(:error AS text), {claim_token} = NULL, {lease_expires_at} = NULL
 {fence}";

/// Not one of the contract's five: the worker hands back a claimed row that no handler started
/// (a stop while it waited), so that it need not wait out its lease.
const RELEASE: &str = "UPDATE {table}
   SET {state} = 'pending', {claim_token} = NULL, {lease_expires_at} = NULL
 {fence}";

const DEAD: &str = "UPDATE {table}
   SET {state} = 'dead', {last_error} = CAST(:error AS text),
       {claim_token} = NULL, {lease_expires_at} = NULL
 {fence}";

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

fn fill(template: &str, q: &Quoted) -> String {
    let text = template
        .replace("{busy_h}", &BUSY.replace("{agg}", "h.agg"))
        .replace("{busy_c}", &BUSY.replace("{agg}", "c.agg"))
        .replace("{fence}", FENCE);
    let pairs: [(&str, &str); 19] = [
        ("{table}", &q.table),
        ("{id}", &q.id),
        ("{source}", &q.source),
        ("{idempotency_key}", &q.idempotency_key),
        ("{aggregate_id}", &q.aggregate_id),
        ("{event_type}", &q.event_type),
        ("{payload}", &q.payload),
        ("{headers}", &q.headers),
        ("{state}", &q.state),
        ("{consumption}", &q.consumption),
        ("{attempt}", &q.attempt),
        ("{last_error}", &q.last_error),
        ("{scheduled_at}", &q.scheduled_at),
        ("{created_at}", &q.created_at),
        ("{processed_at}", &q.processed_at),
        ("{claimed_at}", &q.claimed_at),
        ("{claim_token}", &q.claim_token),
        ("{lease_expires_at}", &q.lease_expires_at),
        ("{correlation_id}", &q.correlation_id),
    ];
    // Names are quoted identifiers (no braces), so one pass cannot create a new placeholder.
    pairs
        .iter()
        .fold(text, |acc, (from, to)| acc.replace(from, to))
}

fn render(template: &str, q: &Quoted) -> Statement {
    let positional = to_positional(&fill(template, q));
    Statement {
        sql: Arc::from(positional.sql),
        names: positional.names,
    }
}

impl Statements {
    pub(crate) fn new(q: &Quoted) -> Self {
        Self {
            claim: render(CLAIM, q),
            renew: render(RENEW, q),
            complete: render(COMPLETE, q),
            retry: render(RETRY, q),
            dead: render(DEAD, q),
            release: render(RELEASE, q),
        }
    }
}

/// The worker's statements for `schema`, by the name of their contract file (`claim`, `renew`,
/// `complete`, `retry`, `dead`, `release`): positional SQL and the parameter names in position
/// order. Public only so that the tests can hold them to the SQL contract and check their plans.
#[doc(hidden)]
pub fn worker_statements(
    schema: &crate::Schema,
) -> Result<Vec<(&'static str, crate::named::Positional)>, crate::Error> {
    let s = Statements::new(&schema.quoted()?);
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
        let s = Statements::new(&q);
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
