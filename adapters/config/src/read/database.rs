//! `database.*`: the URL and credentials, the pool, and the table and column names.

use super::{Case, Floor, choice, flag, millis, positive, secret, text};
use crate::catalog::Doc;
use crate::model::DatabaseSettings;
use crate::reader::{Block, Reader};
use crate::secrets::SecretUrl;
use crate::url::parse_database_url;
use queuebox_domain::mapping::{INBOX_COLUMNS, OUTBOX_COLUMNS, SchemaNames};
use queuebox_domain::secret::Secret;
use queuebox_ports::database::{DatabaseKind, DatabaseTarget};
use serde_json::Value;

pub(super) fn read(r: &mut Reader, value: Option<&Value>) -> DatabaseSettings {
    let mut b = Block::open(r, value, "database");
    let kind = choice(
        r,
        &mut b,
        "type",
        &[
            ("postgresql", DatabaseKind::Postgresql),
            ("sqlserver", DatabaseKind::Sqlserver),
        ],
        Case::Any,
        DatabaseKind::Postgresql,
    );
    // `database.url` is not a credential field: a `file:` value stays literal and fails the parse,
    // which tells the operator to pass the URL through a variable instead.
    let url_path = b.path_of("url");
    r.describe(&url_path, Doc::default().default_text("required"));
    r.describe(
        &b.path_of("username"),
        Doc::default().default_text("the user of `database.url`"),
    );
    r.describe(
        &b.path_of("password"),
        Doc::default().default_text("the password of `database.url`"),
    );
    let url = text(r, &mut b, "url");
    let username_key = text(r, &mut b, "username");
    let password_key = secret(r, &mut b, "password");

    let mut target = DatabaseTarget {
        kind,
        hosts: Vec::new(),
        database: String::new(),
        username: String::new(),
        password: Secret::default(),
        params: Vec::new(),
    };
    let mut url_has_password = false;
    match url.as_deref() {
        None if !b.has("url") => r.problem(url_path.clone(), "is required"),
        None => {}
        Some(url) => match parse_database_url(url.trim()) {
            Err(message) => r.problem(url_path.clone(), message),
            Ok(parsed) => {
                if parsed.kind != kind {
                    r.problem(
                        url_path.clone(),
                        format!(
                            "is a {} URL, but database.type is {}",
                            parsed.kind.as_str(),
                            kind.as_str()
                        ),
                    );
                }
                url_has_password = parsed.password.is_some();
                target.hosts = parsed.hosts;
                target.database = parsed.database;
                target.params = parsed.params;
                target.username = parsed.username.unwrap_or_default();
                if let Some(password) = parsed.password {
                    target.password = password;
                }
            }
        },
    }
    // The keys win over the URL, so a URL from a shared variable can take a deployment-specific
    // account.
    if let Some(username) = &username_key {
        target.username.clone_from(username);
    }
    if target.username.trim().is_empty() && (username_key.is_some() || !b.has("username")) {
        r.problem(
            b.path_of("username"),
            "is required (set it here or as the user of database.url)",
        );
    }
    match password_key {
        Some(password) => target.password = password,
        // A key that holds something unreadable was reported already.
        None if !url_has_password && !b.has("password") => r.problem(
            b.path_of("password"),
            "is required (set it here or in database.url)",
        ),
        None => {}
    }

    let pool_size = positive(r, &mut b, "poolSize", 10);
    let connection_timeout = millis(r, &mut b, "connectionTimeoutMs", 30_000, Floor::Zero);
    let startup_timeout = millis(r, &mut b, "startupTimeoutMs", 60_000, Floor::Zero);
    let migrate = flag(r, &mut b, "migrate", true);
    let schema = read_schema(r, &mut b);
    b.finish(r);
    DatabaseSettings {
        kind,
        url: SecretUrl::new(url.unwrap_or_default()),
        username: target.username.clone(),
        password: target.password.clone(),
        target,
        pool_size,
        connection_timeout,
        startup_timeout,
        migrate,
        schema,
    }
}

/// The rule of table and column names, as the reference states it.
pub(super) const IDENTIFIER: &str = "a SQL identifier";

fn read_schema(r: &mut Reader, b: &mut Block<'_>) -> SchemaNames {
    let mut schema = SchemaNames::default();
    for (key, default) in [
        ("outboxTableName", &schema.outbox_table),
        ("inboxTableName", &schema.inbox_table),
    ] {
        r.describe(
            &b.path_of(key),
            Doc::default().default_value(default).allowed(IDENTIFIER),
        );
    }
    if let Some(name) = text(r, b, "outboxTableName") {
        schema.outbox_table = name;
    }
    if let Some(name) = text(r, b, "inboxTableName") {
        schema.inbox_table = name;
    }
    let mapping_value = b.get("columnMapping");
    let mut mapping = Block::open(r, mapping_value, &b.path_of("columnMapping"));
    let outbox_value = mapping.get("outbox");
    let mut outbox = Block::open(r, outbox_value, &mapping.path_of("outbox"));
    for (key, column) in OUTBOX_COLUMNS {
        r.describe(
            &outbox.path_of(key),
            Doc::default().default_value(column).allowed(IDENTIFIER),
        );
        if let Some(column) = text(r, &mut outbox, key) {
            schema.outbox.set(key, column);
        }
    }
    outbox.finish(r);
    let inbox_value = mapping.get("inbox");
    let mut inbox = Block::open(r, inbox_value, &mapping.path_of("inbox"));
    for (key, column) in INBOX_COLUMNS {
        r.describe(
            &inbox.path_of(key),
            Doc::default().default_value(column).allowed(IDENTIFIER),
        );
        if let Some(column) = text(r, &mut inbox, key) {
            schema.inbox.set(key, column);
        }
    }
    inbox.finish(r);
    mapping.finish(r);
    for (setting, error) in schema.validate() {
        r.problem(setting, error.to_string());
    }
    schema
}
