//! The replication session: one logical-replication connection that takes the owner lock, runs
//! the checks, creates the slot when needed, and then streams `pgoutput` from the slot.

use super::pgoutput::{self, Change};
use super::sql;
use async_trait::async_trait;
use pgwire_replication::{
    PgWireError, ReplicationClient, ReplicationConfig, ReplicationEvent, SslMode, TlsConfig,
};
use queuebox_domain::capture::Lsn;
use queuebox_ports::capture::{
    CaptureConnector, CaptureError, CaptureSession, ChangeEvent, ChangeStream, SlotPosition,
};
use sha2::{Digest, Sha256};
use std::path::PathBuf;
use std::time::{Duration, SystemTime};

/// How often the handled position goes to the server (standby status update).
const STATUS_INTERVAL: Duration = Duration::from_secs(1);
/// How long the session waits for the stream to end at shutdown.
const CLOSE_BOUND: Duration = Duration::from_secs(2);
/// The most events buffered between the connection and the runner; capture reads them at once.
const BUFFERED_EVENTS: usize = 1024;

/// Where capture connects and what it reads.
#[derive(Debug, Clone)]
pub struct CaptureConnection {
    /// The capture host.
    pub host: String,
    /// The capture port.
    pub port: u16,
    /// The database.
    pub database: String,
    /// The capture account.
    pub username: String,
    /// Its password.
    pub password: queuebox_domain::secret::Secret,
    /// The URL's query parameters (`sslmode`, `sslrootcert`, ...).
    pub params: Vec<(String, String)>,
    /// The capture identity (names the owner lock).
    pub identity: String,
    /// The schema of the outbox table.
    pub schema: String,
    /// The outbox table.
    pub table: String,
    /// The publication.
    pub publication: String,
    /// The replication slot.
    pub slot: String,
}

/// Opens replication sessions for one capture connection.
pub struct PgCaptureConnector {
    connection: CaptureConnection,
}

impl PgCaptureConnector {
    /// A connector for `connection`.
    ///
    /// # Errors
    /// A [`CaptureError::Setup`] when an `sslmode` value is not one PostgreSQL knows.
    pub fn new(connection: CaptureConnection) -> Result<Self, CaptureError> {
        tls(&connection.params, &connection.host)?;
        Ok(Self { connection })
    }

    fn config(&self, resume_after: Option<Lsn>) -> Result<ReplicationConfig, CaptureError> {
        let c = &self.connection;
        let start = pgwire_replication::Lsn::from_u64(resume_after.map_or(0, |p| p.0));
        Ok(ReplicationConfig::new(
            c.host.clone(),
            c.username.clone(),
            c.password.expose().to_owned(),
            c.database.clone(),
            c.slot.clone(),
            c.publication.clone(),
        )
        .with_port(c.port)
        .with_start_lsn(start)
        .with_tls(tls(&c.params, &c.host)?)
        .with_status_interval(STATUS_INTERVAL)
        .with_buffer_size(BUFFERED_EVENTS)
        .with_application_name("queuebox-capture"))
    }
}

/// The TLS settings of the URL, read as the pool reads them: without `sslmode`, `prefer` (TLS when
/// the server offers it, unverified, as libpq and the JDBC driver default to).
fn tls(params: &[(String, String)], host: &str) -> Result<TlsConfig, CaptureError> {
    let value = |name: &str| {
        params
            .iter()
            .rev()
            .find(|(key, _)| key.eq_ignore_ascii_case(name))
            .map(|(_, value)| value.as_str())
    };
    let root = value("sslrootcert").map(PathBuf::from);
    let config = match value("sslmode") {
        Some("disable") => TlsConfig::disabled(),
        None | Some("allow" | "prefer") => TlsConfig {
            mode: SslMode::Prefer,
            ..TlsConfig::disabled()
        },
        Some("require") => TlsConfig::require(),
        Some("verify-ca") => TlsConfig::verify_ca(root),
        Some("verify-full") => TlsConfig::verify_full(root).with_sni_hostname(host),
        Some(other) => {
            return Err(CaptureError::Setup(format!(
                "sslmode `{other}` is not one of disable, allow, prefer, require, verify-ca, verify-full"
            )));
        }
    };
    Ok(match (value("sslcert"), value("sslkey")) {
        (Some(cert), Some(key)) => config.with_client_cert(cert, key),
        _ => config,
    })
}

/// The owner lock key of `identity`: 64 bits of a digest, so identities do not collide with each
/// other or, in practice, with an application's own advisory locks.
fn owner_lock_key(identity: &str) -> i64 {
    let digest = Sha256::digest(format!("queuebox-capture:{identity}").as_bytes());
    let mut bytes = [0_u8; 8];
    bytes.copy_from_slice(&digest[..8]);
    i64::from_be_bytes(bytes)
}

/// A capture error from the replication client, with the advice for the failures an operator
/// fixes in the database.
fn client_error(error: PgWireError, connection: &CaptureConnection) -> CaptureError {
    let text = error.to_string();
    let user = &connection.username;
    if text.contains("must be superuser or replication role")
        || text.contains("permission denied to start WAL sender")
        || text.contains("REPLICATION attribute")
    {
        return CaptureError::Setup(format!(
            "the capture account {user} may not start logical replication; give it the REPLICATION attribute (ALTER ROLE {user} REPLICATION) or set outbox.capture.connection.username to an account that has it"
        ));
    }
    match error {
        PgWireError::Auth(_) => CaptureError::Connection(format!(
            "the server refused the login of capture account {user} on {}:{} ({text})",
            connection.host, connection.port
        )),
        PgWireError::Server(_) => CaptureError::Setup(format!(
            "the server refused a capture step on {}:{}/{}: {text}",
            connection.host, connection.port, connection.database
        )),
        _ => CaptureError::Connection(format!(
            "{}:{}/{}: {text}",
            connection.host, connection.port, connection.database
        )),
    }
}

#[async_trait]
impl CaptureConnector for PgCaptureConnector {
    async fn open(
        &self,
        resume_after: Option<Lsn>,
    ) -> Result<Box<dyn CaptureSession>, CaptureError> {
        let client = ReplicationClient::connect_gated(self.config(resume_after)?)
            .await
            .map_err(|e| client_error(e, &self.connection))?;
        Ok(Box::new(PgCaptureSession {
            client,
            connection: self.connection.clone(),
        }))
    }
}

struct PgCaptureSession {
    client: ReplicationClient,
    connection: CaptureConnection,
}

impl PgCaptureSession {
    /// Runs `sql` and returns its rows as text (`None` for SQL null).
    async fn query(&mut self, sql: &str) -> Result<Vec<Vec<Option<String>>>, CaptureError> {
        let rows = self
            .client
            .simple_query(sql)
            .await
            .map_err(|e| client_error(e, &self.connection))?;
        Ok(rows
            .into_iter()
            .map(|row| {
                row.into_iter()
                    .map(|value| value.map(|bytes| String::from_utf8_lossy(&bytes).into_owned()))
                    .collect()
            })
            .collect())
    }

    /// The first column of the first row.
    async fn scalar(&mut self, sql: &str) -> Result<Option<String>, CaptureError> {
        Ok(self
            .query(sql)
            .await?
            .into_iter()
            .next()
            .and_then(|row| row.into_iter().next().flatten()))
    }
}

#[async_trait]
impl CaptureSession for PgCaptureSession {
    async fn claim_ownership(&mut self) -> Result<bool, CaptureError> {
        let key = owner_lock_key(&self.connection.identity);
        Ok(self.scalar(&sql::try_owner_lock(key)).await?.as_deref() == Some("t"))
    }

    async fn check_ready(&mut self) -> Result<(), CaptureError> {
        let c = self.connection.clone();
        let level = self.scalar(sql::WAL_LEVEL).await?.unwrap_or_default();
        if level != "logical" {
            return Err(CaptureError::Setup(format!(
                "wal_level is {level} on {}:{}; capture needs wal_level = logical (set it in postgresql.conf and restart the server)",
                c.host, c.port
            )));
        }
        let (publication, schema, table) = (&c.publication, &c.schema, &c.table);
        match self.scalar(&sql::publication(publication)).await? {
            None => {
                return Err(CaptureError::Setup(format!(
                    "the publication {publication} does not exist in database {}; create it (QueueBox never does): CREATE PUBLICATION {publication} FOR TABLE {schema}.{table} WITH (publish = 'insert')",
                    c.database
                )));
            }
            Some(inserts) if inserts != "t" => {
                return Err(CaptureError::Setup(format!(
                    "the publication {publication} does not publish inserts; capture wakes on inserts only: ALTER PUBLICATION {publication} SET (publish = 'insert')"
                )));
            }
            Some(_) => {}
        }
        if self
            .query(&sql::publication_covers(publication, schema, table))
            .await?
            .is_empty()
        {
            return Err(CaptureError::Setup(format!(
                "the publication {publication} does not cover the outbox table {schema}.{table}: ALTER PUBLICATION {publication} ADD TABLE {schema}.{table}"
            )));
        }
        Ok(())
    }

    async fn slot(&mut self) -> Result<Option<SlotPosition>, CaptureError> {
        let name = self.connection.slot.clone();
        let Some(row) = self.query(&sql::slot(&name)).await?.into_iter().next() else {
            return Ok(None);
        };
        let field = |i: usize| row.get(i).cloned().flatten().unwrap_or_default();
        let (plugin, kind, database) = (field(0), field(1), field(2));
        if kind != "logical" || plugin != "pgoutput" {
            return Err(CaptureError::Setup(format!(
                "the replication slot {name} exists but is a {kind} slot of plugin `{plugin}`; capture needs a logical slot of pgoutput: choose another outbox.capture.slot, or drop that slot if nothing else uses it"
            )));
        }
        if database != self.connection.database {
            return Err(CaptureError::Setup(format!(
                "the replication slot {name} belongs to database {database}, not {}; choose another outbox.capture.slot",
                self.connection.database
            )));
        }
        let confirmed = row
            .get(3)
            .cloned()
            .flatten()
            .and_then(|text| text.parse::<Lsn>().ok());
        Ok(Some(SlotPosition { confirmed }))
    }

    async fn create_slot(&mut self) -> Result<Lsn, CaptureError> {
        let name = self.connection.slot.clone();
        let rows = self.query(&sql::create_slot(&name)).await?;
        let start = rows
            .into_iter()
            .next()
            .and_then(|row| row.get(1).cloned().flatten())
            .ok_or_else(|| {
                CaptureError::Setup(format!(
                    "creating the replication slot {name} returned no start position"
                ))
            })?;
        let start = start
            .parse::<Lsn>()
            .map_err(|e| CaptureError::Setup(format!("creating the slot {name}: {e}")))?;
        tracing::info!(slot = %name, start = %start, "replication slot created");
        Ok(start)
    }

    async fn skip_to_log_end(&mut self) -> Result<Lsn, CaptureError> {
        let name = self.connection.slot.clone();
        let end = self
            .scalar(&sql::skip_to_log_end(&name))
            .await?
            .ok_or_else(|| {
                CaptureError::Setup(format!("moving the slot {name} returned no position"))
            })?;
        end.parse::<Lsn>()
            .map_err(|e| CaptureError::Setup(format!("moving the slot {name}: {e}")))
    }

    async fn stream(mut self: Box<Self>) -> Result<Box<dyn ChangeStream>, CaptureError> {
        let connection = self.connection.clone();
        self.client
            .start()
            .await
            .map_err(|e| client_error(e, &connection))?;
        self.client
            .wait_started()
            .await
            .map_err(|e| client_error(e, &connection))?;
        Ok(Box::new(PgChangeStream {
            client: self.client,
            connection,
            outbox_relation: None,
            in_transaction: false,
            inserts: 0,
            ignored: 0,
        }))
    }
}

struct PgChangeStream {
    client: ReplicationClient,
    connection: CaptureConnection,
    /// The relation id of the outbox table, once a relation message named it.
    outbox_relation: Option<u32>,
    in_transaction: bool,
    inserts: u64,
    ignored: u64,
}

impl PgChangeStream {
    fn is_outbox(&self, id: u32) -> bool {
        self.outbox_relation == Some(id)
    }

    fn read(&mut self, data: &[u8]) {
        match pgoutput::parse(data) {
            Some(Change::Relation { id, schema, name }) => {
                if schema == self.connection.schema && name == self.connection.table {
                    self.outbox_relation = Some(id);
                } else if self.outbox_relation == Some(id) {
                    // The table was renamed or moved: its id no longer means the outbox.
                    self.outbox_relation = None;
                }
            }
            Some(Change::Insert { id }) if self.is_outbox(id) => self.inserts += 1,
            Some(Change::Other { id }) if self.is_outbox(id) => self.ignored += 1,
            Some(Change::Truncate { ids }) if ids.iter().any(|id| self.is_outbox(*id)) => {
                self.ignored += 1;
            }
            Some(_) => {}
            None => tracing::debug!(len = data.len(), "skipped a short pgoutput message"),
        }
    }
}

#[async_trait]
impl ChangeStream for PgChangeStream {
    async fn next(&mut self) -> Result<ChangeEvent, CaptureError> {
        loop {
            let event = self
                .client
                .recv()
                .await
                .map_err(|e| client_error(e, &self.connection))?
                .ok_or_else(|| {
                    CaptureError::Connection("the server ended the replication stream".into())
                })?;
            match event {
                ReplicationEvent::Begin { .. } => {
                    self.in_transaction = true;
                    self.inserts = 0;
                    self.ignored = 0;
                }
                ReplicationEvent::XLogData { data, .. } => self.read(&data),
                ReplicationEvent::Commit {
                    end_lsn,
                    commit_time_micros,
                    ..
                } => {
                    self.in_transaction = false;
                    return Ok(ChangeEvent::Committed {
                        inserts: std::mem::take(&mut self.inserts),
                        ignored: std::mem::take(&mut self.ignored),
                        end: Lsn(end_lsn.as_u64()),
                        committed_at: server_time(commit_time_micros),
                    });
                }
                ReplicationEvent::KeepAlive { wal_end, .. } if !self.in_transaction => {
                    return Ok(ChangeEvent::Idle {
                        end: Lsn(wal_end.as_u64()),
                    });
                }
                _ => {}
            }
        }
    }

    fn confirm(&mut self, position: Lsn) {
        self.client
            .update_applied_lsn(pgwire_replication::Lsn::from_u64(position.0));
    }

    async fn close(mut self: Box<Self>) {
        if tokio::time::timeout(CLOSE_BOUND, self.client.shutdown())
            .await
            .is_err()
        {
            self.client.abort();
        }
    }
}

/// Seconds from the Unix epoch to PostgreSQL's (2000-01-01 UTC).
const POSTGRES_EPOCH_SECONDS: u64 = 946_684_800;

/// A server timestamp (microseconds since 2000-01-01 UTC) as a system time.
fn server_time(micros: i64) -> Option<SystemTime> {
    let micros = u64::try_from(micros).ok()?;
    SystemTime::UNIX_EPOCH
        .checked_add(Duration::from_secs(POSTGRES_EPOCH_SECONDS) + Duration::from_micros(micros))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_times_count_from_2000() {
        assert_eq!(
            server_time(0),
            Some(SystemTime::UNIX_EPOCH + Duration::from_secs(946_684_800))
        );
        assert_eq!(
            server_time(1_500_000),
            Some(SystemTime::UNIX_EPOCH + Duration::from_millis(946_684_801_500))
        );
        assert_eq!(server_time(-1), None);
    }

    fn params(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn the_url_sslmode_picks_the_tls_mode() {
        assert_eq!(tls(&[], "db").expect("none").mode, SslMode::Prefer);
        assert_eq!(
            tls(&params(&[("sslmode", "disable")]), "db")
                .expect("disable")
                .mode,
            SslMode::Disable
        );
        assert_eq!(
            tls(&params(&[("sslmode", "require")]), "db")
                .expect("require")
                .mode,
            SslMode::Require
        );
        assert_eq!(
            tls(&params(&[("sslmode", "verify-full")]), "db")
                .expect("full")
                .mode,
            SslMode::VerifyFull
        );
        let error = tls(&params(&[("sslmode", "maybe")]), "db").expect_err("bad");
        assert!(error.to_string().contains("sslmode `maybe`"), "{error}");
    }

    #[test]
    fn owner_lock_keys_differ_per_identity_and_stay_fixed() {
        assert_eq!(owner_lock_key("queuebox"), owner_lock_key("queuebox"));
        assert_ne!(owner_lock_key("queuebox"), owner_lock_key("other"));
    }
}
