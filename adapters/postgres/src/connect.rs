//! Turning [`DatabaseOptions`] into sqlx connection options, and the start-up wait.
//!
//! sqlx connects to one host, so a multi-host URL is handled here: the start tries the hosts in
//! order on every round and builds the pool on the first one that answers (and, with several
//! hosts, accepts writes); after the start, [`crate::failover`] moves the pool between them.

use std::time::{Duration, Instant};

use queuebox_ports::database::{DatabaseHost, DatabaseKind, DatabaseOptions, DatabaseTarget};
use sqlx::postgres::{PgConnectOptions, PgSslMode};
use sqlx::{ConnectOptions, Connection};

use crate::error::{PostgresError, fails_fast_at_start, is_certificate_refusal, redact};
use crate::failover::is_read_only;

/// The `application_name` a session reports unless the URL sets one.
pub const DEFAULT_APPLICATION_NAME: &str = "queuebox";

/// The PostgreSQL port when the URL names none.
const DEFAULT_PORT: u16 = 5432;

/// The first pause between two rounds of attempts, doubled up to [`MAX_BACKOFF`].
const FIRST_BACKOFF: Duration = Duration::from_millis(100);
const MAX_BACKOFF: Duration = Duration::from_secs(2);

/// Connection options for each host of `target`, in the URL's order.
///
/// Recognised URL parameters: `sslmode`, `sslrootcert`, `sslcert`, `sslkey`, `application_name`
/// (also JDBC's `ApplicationName`), `options`, and JDBC's `currentSchema` (sent as `search_path`).
/// Others are ignored with a warning, as the JDBC driver ignores unknown ones.
///
/// # Errors
/// [`PostgresError::WrongKind`], [`PostgresError::NoHost`], or [`PostgresError::Refused`] for a
/// parameter value sqlx rejects.
pub(crate) fn connect_options(
    target: &DatabaseTarget,
) -> Result<Vec<PgConnectOptions>, PostgresError> {
    if target.kind != DatabaseKind::Postgresql {
        return Err(PostgresError::WrongKind(target.kind.as_str()));
    }
    if target.hosts.is_empty() {
        return Err(PostgresError::NoHost);
    }
    // Start from a blank slate: every value below is set explicitly, PG* variables aside.
    let mut base = PgConnectOptions::new_without_pgpass()
        .username(&target.username)
        .password(target.password.expose())
        .database(&target.database)
        .application_name(DEFAULT_APPLICATION_NAME);
    for (key, value) in &target.params {
        base = match key.as_str() {
            "sslmode" => base.ssl_mode(value.parse::<PgSslMode>().map_err(|_| PostgresError::Refused {
                url: target.display_url(),
                cause: format!("sslmode `{value}` is not one of disable, allow, prefer, require, verify-ca, verify-full"),
            })?),
            "sslrootcert" => base.ssl_root_cert(value),
            "sslcert" => base.ssl_client_cert(value),
            "sslkey" => base.ssl_client_key(value),
            "application_name" | "ApplicationName" => base.application_name(value),
            "options" => base.options(parse_options(value)),
            "currentSchema" => base.options([("search_path", value.as_str())]),
            "targetServerType" => {
                check_target_server_type(target, value)?;
                base
            }
            _ => {
                tracing::warn!(parameter = %key, "ignoring a database URL parameter the PostgreSQL adapter does not use");
                base
            }
        };
    }
    Ok(target
        .hosts
        .iter()
        .map(|host| for_host(&base, host))
        .collect())
}

/// JDBC's `targetServerType`. QueueBox writes on every path, so it always looks for a writable
/// host: `primary` (and its old name `master`), `preferPrimary` and `any` all mean that here, while
/// `secondary` and `preferSecondary`, which point at a standby, are refused.
fn check_target_server_type(target: &DatabaseTarget, value: &str) -> Result<(), PostgresError> {
    match value {
        "any" | "primary" | "master" | "preferPrimary" => Ok(()),
        "secondary" | "preferSecondary" | "slave" | "preferSlave" => Err(PostgresError::Refused {
            url: target.display_url(),
            cause: format!(
                "targetServerType={value} points QueueBox at a standby, which accepts no writes; \
                 remove it or use targetServerType=primary"
            ),
        }),
        _ => Err(PostgresError::Refused {
            url: target.display_url(),
            cause: format!("targetServerType `{value}` is not one of any, primary, preferPrimary"),
        }),
    }
}

fn for_host(base: &PgConnectOptions, host: &DatabaseHost) -> PgConnectOptions {
    base.clone()
        .host(&host.host)
        .port(host.port.unwrap_or(DEFAULT_PORT))
}

/// `-c name=value` pairs of a libpq `options` value.
fn parse_options(value: &str) -> Vec<(String, String)> {
    value
        .split_whitespace()
        .filter(|part| *part != "-c")
        .filter_map(|part| part.trim_start_matches("-c").split_once('='))
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect()
}

/// Waits until one host accepts a session, trying the hosts in order each round, for at most
/// `startup_timeout`. Returns the index of the host that answered. With more than one host, a
/// host whose sessions are read-only (a standby) is passed over: QueueBox writes.
///
/// # Errors
/// [`PostgresError::Unreachable`] when the time runs out, naming the masked URL and the last
/// cause; [`PostgresError::Refused`] at once for a wrong password or role, a TLS requirement this
/// build cannot meet, or a bad parameter.
pub(crate) async fn wait_for_database(
    options: &DatabaseOptions,
    hosts: &[PgConnectOptions],
) -> Result<usize, PostgresError> {
    let started = Instant::now();
    let deadline = started + options.startup_timeout;
    let password = options.target.password.expose();
    let mut backoff = FIRST_BACKOFF;
    let mut last_cause = String::from("no attempt finished before the timeout");
    loop {
        for (index, host) in hosts.iter().enumerate() {
            let remaining = deadline.saturating_duration_since(Instant::now());
            if remaining.is_zero() {
                break;
            }
            // A host that swallows packets must not use up the whole wait before the next host
            // gets its turn: one attempt gets at most `connectionTimeoutMs`.
            let attempt = remaining.min(options.connection_timeout);
            match tokio::time::timeout(attempt, host.connect()).await {
                Ok(Ok(mut connection)) => {
                    let read_only = if hosts.len() > 1 {
                        is_read_only(&mut connection)
                            .await
                            .map_err(|e| e.to_string())
                    } else {
                        Ok(false)
                    };
                    // The probe only proves the host answers; the pool opens its own sessions.
                    let _ = connection.close().await;
                    match read_only {
                        Ok(false) => return Ok(index),
                        Ok(true) => {
                            last_cause = format!(
                                "{}:{}: accepts no writes (transaction_read_only is on)",
                                host.get_host(),
                                host.get_port()
                            );
                            tracing::warn!(url = %options.target.display_url(), cause = %last_cause, "skipping a read-only database host");
                        }
                        Err(cause) => {
                            last_cause =
                                format!("{}:{}: {cause}", host.get_host(), host.get_port());
                        }
                    }
                }
                Ok(Err(error)) => {
                    let hint = if is_certificate_refusal(&error) {
                        " (the server's TLS certificate was not accepted: check sslrootcert and that the certificate names the host of database.url)"
                    } else {
                        ""
                    };
                    let cause = format!(
                        "{}:{}: {}{hint}",
                        host.get_host(),
                        host.get_port(),
                        redact(error.to_string(), password)
                    );
                    if fails_fast_at_start(&error) {
                        return Err(PostgresError::Refused {
                            url: options.target.display_url(),
                            cause,
                        });
                    }
                    tracing::warn!(url = %options.target.display_url(), %cause, "database not reachable yet; retrying");
                    last_cause = cause;
                }
                Err(_) => {
                    last_cause = format!(
                        "{}:{}: no answer within {} ms",
                        host.get_host(),
                        host.get_port(),
                        attempt.as_millis()
                    );
                }
            }
        }
        let remaining = deadline.saturating_duration_since(Instant::now());
        if remaining.is_zero() {
            return Err(PostgresError::Unreachable {
                url: options.target.display_url(),
                waited: started.elapsed(),
                cause: last_cause,
            });
        }
        tokio::time::sleep(backoff.min(remaining)).await;
        backoff = (backoff * 2).min(MAX_BACKOFF);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use queuebox_domain::secret::Secret;

    fn target(params: Vec<(String, String)>) -> DatabaseTarget {
        DatabaseTarget {
            kind: DatabaseKind::Postgresql,
            hosts: vec![
                DatabaseHost {
                    host: "db1".into(),
                    port: None,
                },
                DatabaseHost {
                    host: "db2".into(),
                    port: Some(6543),
                },
            ],
            database: "queuebox".into(),
            username: "app".into(),
            password: Secret::new("hunter2"),
            params,
        }
    }

    #[test]
    fn one_option_set_per_host_in_order_with_defaults() {
        let options = connect_options(&target(vec![])).expect("options");
        assert_eq!(options.len(), 2);
        assert_eq!(
            (options[0].get_host(), options[0].get_port()),
            ("db1", 5432)
        );
        assert_eq!(
            (options[1].get_host(), options[1].get_port()),
            ("db2", 6543)
        );
        assert_eq!(options[0].get_application_name(), Some("queuebox"));
        assert_eq!(options[0].get_database(), Some("queuebox"));
        assert_eq!(options[0].get_username(), "app");
    }

    #[test]
    fn url_parameters_reach_the_session() {
        let params = vec![
            ("sslmode".to_owned(), "disable".to_owned()),
            ("ApplicationName".to_owned(), "billing".to_owned()),
            ("currentSchema".to_owned(), "queue".to_owned()),
        ];
        let options = connect_options(&target(params)).expect("options");
        assert!(matches!(options[0].get_ssl_mode(), PgSslMode::Disable));
        assert_eq!(options[0].get_application_name(), Some("billing"));
        assert!(
            options[0]
                .get_options()
                .is_some_and(|o| o.contains("search_path=queue"))
        );
    }

    #[test]
    fn a_bad_sslmode_is_refused_without_the_password() {
        let error = connect_options(&target(vec![("sslmode".into(), "maybe".into())]))
            .expect_err("bad sslmode");
        let text = error.to_string();
        assert!(text.contains("sslmode `maybe`"), "{text}");
        assert!(!text.contains("hunter2"), "{text}");
    }

    #[test]
    fn target_server_type_accepts_writable_targets_and_refuses_standbys() {
        for value in ["any", "primary", "master", "preferPrimary"] {
            let params = vec![("targetServerType".to_owned(), value.to_owned())];
            assert!(connect_options(&target(params)).is_ok(), "{value}");
        }
        for value in ["secondary", "preferSecondary"] {
            let params = vec![("targetServerType".to_owned(), value.to_owned())];
            let text = connect_options(&target(params))
                .expect_err(value)
                .to_string();
            assert!(text.contains("accepts no writes"), "{text}");
        }
        let params = vec![("targetServerType".to_owned(), "leader".to_owned())];
        assert!(connect_options(&target(params)).is_err());
    }

    #[test]
    fn libpq_options_become_pairs() {
        assert_eq!(
            parse_options("-c search_path=queue -cstatement_timeout=5s"),
            [
                ("search_path".to_owned(), "queue".to_owned()),
                ("statement_timeout".to_owned(), "5s".to_owned())
            ]
        );
    }

    #[test]
    fn sqlserver_is_not_ours() {
        let mut target = target(vec![]);
        target.kind = DatabaseKind::Sqlserver;
        assert!(matches!(
            connect_options(&target),
            Err(PostgresError::WrongKind("sqlserver"))
        ));
    }
}
