//! Every error of the PostgreSQL adapter, and the one place that reads a SQLSTATE.
//!
//! Database errors reach the rest of the crate only through [`PostgresError::from`] (and
//! [`fails_fast_at_start`] for the start-up wait), so the codes below are named once and nowhere
//! else does a string like `"23505"` appear.

use std::time::Duration;
use thiserror::Error;

use queuebox_domain::mapping::InvalidIdentifier;

use crate::guard::SchemaProblem;

/// The SQLSTATE codes the adapter reacts to.
pub mod sqlstate {
    /// `unique_violation`: an insert hit a unique constraint (the inbox deduplication).
    pub const UNIQUE_VIOLATION: &str = "23505";
    /// `check_violation`: for example a `consumption` other than push or pull.
    pub const CHECK_VIOLATION: &str = "23514";
    /// `not_null_violation`: for example an explicit NULL in `headers`.
    pub const NOT_NULL_VIOLATION: &str = "23502";
    /// `undefined_table`: a configured table does not exist.
    pub const UNDEFINED_TABLE: &str = "42P01";
    /// `undefined_column`: a mapped column does not exist (a migration was not applied).
    pub const UNDEFINED_COLUMN: &str = "42703";
    /// `insufficient_privilege`: the account may not run the statement (often: no DDL rights).
    pub const INSUFFICIENT_PRIVILEGE: &str = "42501";
    /// `invalid_password`.
    pub const INVALID_PASSWORD: &str = "28P01";
    /// `invalid_authorization_specification`: unknown role, or `pg_hba.conf` refuses it.
    pub const INVALID_AUTHORIZATION: &str = "28000";
    /// `too_many_connections`: the server is full; may clear up.
    pub const TOO_MANY_CONNECTIONS: &str = "53300";
    /// `admin_shutdown`: the server is stopping, or the session was terminated.
    pub const ADMIN_SHUTDOWN: &str = "57P01";
    /// `cannot_connect_now`: the server is still starting.
    pub const CANNOT_CONNECT_NOW: &str = "57P03";
    /// The class of `data_exception` codes (`22xxx`): the server refused a value as data (a
    /// string too long for its column, U+0000 in text or JSONB, a number beyond `numeric`). The
    /// same value is refused again, so it is the sender's fault, not the database's.
    pub const DATA_EXCEPTION_CLASS: &str = "22";
}

/// What can go wrong in the PostgreSQL adapter.
#[derive(Debug, Error)]
pub enum PostgresError {
    /// The options name another database product.
    #[error("the PostgreSQL adapter cannot open a `{0}` database")]
    WrongKind(&'static str),

    /// The URL names no host.
    #[error("database.url names no host")]
    NoHost,

    /// A table or column name breaks the identifier rule.
    #[error("invalid table or column names: {}", describe_invalid(.0))]
    InvalidNames(Vec<(String, InvalidIdentifier)>),

    /// `database.migrate` is true although the configuration renames tables or columns.
    #[error(
        "database.migrate is true, but these settings rename a table or a column: {}. \
         The bundled migrations create the default names only: set database.migrate to false and \
         create the renamed schema yourself",
        .settings.join(", ")
    )]
    MigrateWithRenamedSchema {
        /// Each renamed setting, for example `database.columnMapping.outbox.payload`.
        settings: Vec<String>,
    },

    /// No host answered before `database.startupTimeoutMs` ran out.
    #[error("the database at {url} did not answer within {} ms; last error: {cause}", .waited.as_millis())]
    Unreachable {
        /// The URL with the password masked.
        url: String,
        /// How long the start waited.
        waited: Duration,
        /// The last connection error.
        cause: String,
    },

    /// The database answered but refused the connection for a reason that waiting will not fix
    /// (wrong password, unknown role, TLS requested but unavailable, bad parameter).
    #[error("the database at {url} refused the connection: {cause}")]
    Refused {
        /// The URL with the password masked.
        url: String,
        /// The reason the server or the driver gave.
        cause: String,
    },

    /// An applied migration differs from the file of this release.
    #[error(
        "migration V{version} ({script}) was applied with checksum {recorded}, but this release \
         ships it with checksum {expected}: the file changed after it was applied; restore the \
         schema history or the file before starting"
    )]
    ChecksumMismatch {
        /// The version.
        version: i32,
        /// The file name.
        script: &'static str,
        /// The checksum in the history table.
        recorded: String,
        /// The checksum of the embedded file.
        expected: String,
    },

    /// A migration failed; its transaction was rolled back.
    #[error("migration V{version} ({script}) failed: {source}")]
    Migration {
        /// The version.
        version: i32,
        /// The file name.
        script: &'static str,
        /// The database error.
        #[source]
        source: Box<PostgresError>,
    },

    /// The start-up schema check found a required table or column missing.
    #[error("{}", describe_problems(.0))]
    SchemaGuard(Vec<SchemaProblem>),

    /// A statement template names a placeholder the mapping does not know (a bug of this crate).
    #[error("statement template `{template}` has an unknown placeholder `{{{placeholder}}}`")]
    UnknownPlaceholder {
        /// The template file.
        template: &'static str,
        /// The placeholder text without braces.
        placeholder: String,
    },

    /// An insert hit a unique constraint.
    #[error("unique constraint {} violated", .constraint.as_deref().unwrap_or("(unnamed)"))]
    UniqueViolation {
        /// The constraint name when the server reported it.
        constraint: Option<String>,
    },

    /// A table named in a statement does not exist.
    #[error("undefined table: {0}")]
    UndefinedTable(String),

    /// A column named in a statement does not exist.
    #[error("undefined column: {0}")]
    UndefinedColumn(String),

    /// The account lacks a privilege for the statement.
    #[error("permission denied: {0}")]
    PermissionDenied(String),

    /// No pooled connection became free within `database.connectionTimeoutMs`.
    #[error("no database connection became free within the connection timeout")]
    PoolTimedOut,

    /// The pool was closed.
    #[error("the database pool is closed")]
    PoolClosed,

    /// The connection to the server failed or broke.
    #[error("database connection failed: {0}")]
    Connection(String),

    /// The server refused a value as data (SQLSTATE class 22).
    #[error("{message} (SQLSTATE {code})")]
    DataRefused {
        /// The SQLSTATE.
        code: String,
        /// The server's message.
        message: String,
    },

    /// Any other error reported by the server.
    #[error("database error {code}: {message}")]
    Database {
        /// The SQLSTATE.
        code: String,
        /// The server's message.
        message: String,
    },

    /// Any other driver error.
    #[error("database driver error: {0}")]
    Driver(String),
}

fn describe_invalid(errors: &[(String, InvalidIdentifier)]) -> String {
    errors
        .iter()
        .map(|(setting, error)| format!("{setting}: {error}"))
        .collect::<Vec<_>>()
        .join("; ")
}

fn describe_problems(problems: &[SchemaProblem]) -> String {
    problems
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("\n")
}

impl From<sqlx::Error> for PostgresError {
    fn from(error: sqlx::Error) -> Self {
        match error {
            sqlx::Error::Database(db) => {
                let code = db.code().map(|c| c.into_owned()).unwrap_or_default();
                let message = db.message().to_owned();
                match code.as_str() {
                    sqlstate::UNIQUE_VIOLATION => PostgresError::UniqueViolation {
                        constraint: db.constraint().map(str::to_owned),
                    },
                    sqlstate::UNDEFINED_TABLE => PostgresError::UndefinedTable(message),
                    sqlstate::UNDEFINED_COLUMN => PostgresError::UndefinedColumn(message),
                    sqlstate::INSUFFICIENT_PRIVILEGE => PostgresError::PermissionDenied(message),
                    sqlstate::ADMIN_SHUTDOWN
                    | sqlstate::CANNOT_CONNECT_NOW
                    | sqlstate::TOO_MANY_CONNECTIONS => PostgresError::Connection(message),
                    _ if code.starts_with(sqlstate::DATA_EXCEPTION_CLASS) => {
                        PostgresError::DataRefused { code, message }
                    }
                    _ => PostgresError::Database { code, message },
                }
            }
            sqlx::Error::PoolTimedOut => PostgresError::PoolTimedOut,
            sqlx::Error::PoolClosed => PostgresError::PoolClosed,
            sqlx::Error::Io(io) => PostgresError::Connection(io.to_string()),
            other => PostgresError::Driver(other.to_string()),
        }
    }
}

/// True when a failed start-up connection will not succeed by waiting: a wrong password or role,
/// a TLS requirement the build cannot meet, or an invalid parameter. Everything else (refused or
/// reset sockets, a server that is starting, a database that is not created yet) is retried
/// until `database.startupTimeoutMs`.
pub(crate) fn fails_fast_at_start(error: &sqlx::Error) -> bool {
    match error {
        sqlx::Error::Database(db) => matches!(
            db.code().as_deref(),
            Some(sqlstate::INVALID_PASSWORD | sqlstate::INVALID_AUTHORIZATION)
        ),
        sqlx::Error::Tls(_) | sqlx::Error::Configuration(_) => true,
        sqlx::Error::Io(_) => is_certificate_refusal(error),
        _ => false,
    }
}

/// Whether the server's TLS certificate was refused (unknown issuer, wrong name, expired): a
/// setting to fix (`sslrootcert`, the host of `database.url`), not something waiting cures. The
/// driver reports it as an I/O error that carries the rustls error.
pub(crate) fn is_certificate_refusal(error: &sqlx::Error) -> bool {
    let sqlx::Error::Io(io) = error else {
        return false;
    };
    io.get_ref()
        .and_then(|inner| inner.downcast_ref::<rustls::Error>())
        .is_some_and(|tls| matches!(tls, rustls::Error::InvalidCertificate(_)))
}

/// Removes `secret` from an error text; the driver never prints a password, but a health report
/// or a log line must not depend on that.
pub(crate) fn redact(text: String, secret: &str) -> String {
    if secret.is_empty() || !text.contains(secret) {
        text
    } else {
        text.replace(secret, "***")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redact_hides_the_secret() {
        assert_eq!(redact("user:hunter2@x".into(), "hunter2"), "user:***@x");
        assert_eq!(redact("nothing".into(), ""), "nothing");
    }

    #[test]
    fn pool_errors_map_to_their_own_variants() {
        assert!(matches!(
            PostgresError::from(sqlx::Error::PoolTimedOut),
            PostgresError::PoolTimedOut
        ));
        assert!(matches!(
            PostgresError::from(sqlx::Error::PoolClosed),
            PostgresError::PoolClosed
        ));
    }
}
