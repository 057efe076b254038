//! Reads the merged tree into [`Settings`], one module per section, checking each value as it goes.
//!
//! A section reader never stops at the first problem: it records it, falls back to the default and
//! goes on, so one load reports every problem at once. Rules that span sections live in
//! [`crate::cross`].

mod admin;
mod auth;
mod database;
mod destinations;
mod filter;
mod inbox;
mod kind;
mod outbox;
mod retention;
mod routes;
mod server;
mod signatures;
mod sources;
mod telemetry;
mod templates;
mod transform;

use crate::catalog::Doc;
use crate::model::{HttpSettings, Settings};
use crate::reader::{Block, Reader};
use queuebox_domain::secret::Secret;
use serde_json::Value;
use std::time::Duration;

/// Reads every section of `tree`.
pub(crate) fn read_settings(r: &mut Reader, tree: &Value) -> Settings {
    let mut root = Block::open(r, Some(tree), "");
    let server = server::read(r, root.get("server"));
    let database = database::read(r, root.get("database"));
    let outbox = outbox::read(r, root.get("outbox"));
    let inbox = inbox::read(r, root.get("inbox"), outbox.max_attempts);
    let http = read_http(r, root.get("http"));
    let admin = admin::read(r, root.get("admin"));
    let destinations = destinations::read(r, root.get("destinations"));
    let routes = routes::read(r, root.get("routes"));
    let sources = sources::read(r, root.get("sources"));
    let retention = retention::read(r, root.get("retention"));
    let telemetry = telemetry::read(r, root.get("telemetry"));
    root.finish(r);
    Settings {
        server,
        database,
        outbox,
        inbox,
        http,
        admin,
        destinations,
        routes,
        sources,
        retention,
        telemetry,
    }
}

fn read_http(r: &mut Reader, value: Option<&Value>) -> HttpSettings {
    let mut b = Block::open(r, value, "http");
    let settings = HttpSettings {
        max_error_body_bytes: usize::try_from(non_negative(r, &mut b, "maxErrorBodyBytes", 2048))
            .unwrap_or(usize::MAX),
        block_private_addresses: flag(r, &mut b, "blockPrivateAddresses", false),
    };
    b.finish(r);
    settings
}

/// An optional text key; placeholders filled.
pub(crate) fn text(r: &mut Reader, b: &mut Block<'_>, key: &'static str) -> Option<String> {
    let value = b.get(key);
    let path = b.path_of(key);
    r.describe(&path, Doc::fallback_ty("string"));
    r.text(value, &path)
}

/// A text key with a default.
pub(crate) fn text_or(
    r: &mut Reader,
    b: &mut Block<'_>,
    key: &'static str,
    default: &str,
) -> String {
    r.describe(&b.path_of(key), Doc::default().default_value(default));
    text(r, b, key).unwrap_or_else(|| default.to_owned())
}

/// A credential: the text itself, or with `file:` the content of the file it names.
pub(crate) fn secret(r: &mut Reader, b: &mut Block<'_>, key: &'static str) -> Option<Secret> {
    let path = b.path_of(key);
    r.describe(&path, Doc::ty("secret"));
    let value = b.get(key);
    r.secret(value, &path)
}

/// A required text key: missing and blank are both problems.
pub(crate) fn required(r: &mut Reader, b: &mut Block<'_>, key: &'static str) -> String {
    let path = b.path_of(key);
    r.describe(&path, Doc::default().default_text("required"));
    match text(r, b, key) {
        Some(value) if !value.trim().is_empty() => value,
        Some(_) => {
            r.problem(path, "must not be blank");
            String::new()
        }
        None => {
            // A key that holds something unreadable was reported by `text` already.
            if !b.has(key) {
                r.problem(path, "is required");
            }
            String::new()
        }
    }
}

pub(crate) fn flag(r: &mut Reader, b: &mut Block<'_>, key: &'static str, default: bool) -> bool {
    r.describe(
        &b.path_of(key),
        Doc::ty("boolean")
            .default_value(default)
            .allowed("`true`, `false`"),
    );
    let value = b.get(key);
    r.boolean(value, &b.path_of(key)).unwrap_or(default)
}

/// An optional whole number above 0 that fits `u32`.
pub(crate) fn opt_positive(r: &mut Reader, b: &mut Block<'_>, key: &'static str) -> Option<u32> {
    let path = b.path_of(key);
    r.describe(
        &path,
        Doc::ty("integer").allowed(format!("1 to {}", u32::MAX)),
    );
    let value = b.get(key);
    let n = r.int(value, &path)?;
    if n <= 0 {
        r.problem(path, format!("must be above 0, got {n}"));
        return None;
    }
    match u32::try_from(n) {
        Ok(n) => Some(n),
        Err(_) => {
            r.problem(path, format!("must be at most {}, got {n}", u32::MAX));
            None
        }
    }
}

/// A whole number above 0 with a default.
pub(crate) fn positive(r: &mut Reader, b: &mut Block<'_>, key: &'static str, default: u32) -> u32 {
    r.describe(&b.path_of(key), Doc::default().default_value(default));
    opt_positive(r, b, key).unwrap_or(default)
}

/// A whole number of 0 or more with a default.
pub(crate) fn non_negative(
    r: &mut Reader,
    b: &mut Block<'_>,
    key: &'static str,
    default: u64,
) -> u64 {
    let path = b.path_of(key);
    r.describe(
        &path,
        Doc::ty("integer").default_value(default).allowed("≥ 0"),
    );
    let value = b.get(key);
    match r.int(value, &path) {
        Some(n) if n < 0 => {
            r.problem(path, format!("must not be negative, got {n}"));
            default
        }
        Some(n) => u64::try_from(n).unwrap_or(default),
        None => default,
    }
}

/// How low a millisecond value may go.
#[derive(Clone, Copy)]
pub(crate) enum Floor {
    /// 0 or more.
    Zero,
    /// Above 0.
    AboveZero,
    /// At least this many milliseconds.
    AtLeast(i64),
}

/// A `...Ms` key as a [`Duration`].
pub(crate) fn millis(
    r: &mut Reader,
    b: &mut Block<'_>,
    key: &'static str,
    default_ms: u64,
    floor: Floor,
) -> Duration {
    let path = b.path_of(key);
    let allowed = match floor {
        Floor::Zero => "≥ 0".to_owned(),
        Floor::AboveZero => "≥ 1".to_owned(),
        Floor::AtLeast(min) => format!("≥ {min}"),
    };
    r.describe(
        &path,
        Doc::ty("milliseconds")
            .default_value(default_ms)
            .allowed(allowed),
    );
    let value = b.get(key);
    let Some(n) = r.int(value, &path) else {
        return Duration::from_millis(default_ms);
    };
    let failed = match floor {
        Floor::Zero if n < 0 => Some(format!("must not be negative, got {n}")),
        Floor::AboveZero if n <= 0 => Some(format!("must be above 0, got {n}")),
        Floor::AtLeast(min) if n < min => Some(format!("must be at least {min}, got {n}")),
        _ => None,
    };
    match failed {
        Some(message) => {
            r.problem(path, message);
            Duration::from_millis(default_ms)
        }
        None => Duration::from_millis(u64::try_from(n).unwrap_or(default_ms)),
    }
}

/// A port number from 1 to 65535.
pub(crate) fn port(r: &mut Reader, b: &mut Block<'_>, key: &'static str) -> Option<u16> {
    let path = b.path_of(key);
    r.describe(&path, Doc::ty("integer").allowed("1 to 65535"));
    let value = b.get(key);
    let n = r.int(value, &path)?;
    match u16::try_from(n) {
        Ok(port) if port > 0 => Some(port),
        _ => {
            r.problem(path, format!("must be from 1 to 65535, got {n}"));
            None
        }
    }
}

/// Whether an enumeration matches in any letter case or only in the documented one.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Case {
    Exact,
    Any,
}

/// An enumeration key: one of `options` (spelling, value), or the default when absent.
pub(crate) fn choice<T: Copy + PartialEq>(
    r: &mut Reader,
    b: &mut Block<'_>,
    key: &'static str,
    options: &[(&str, T)],
    case: Case,
    default: T,
) -> T {
    let path = b.path_of(key);
    let spellings: Vec<String> = options.iter().map(|(s, _)| format!("`{s}`")).collect();
    let letter_case = match case {
        Case::Exact => " (this letter case)",
        Case::Any => " (any letter case)",
    };
    let mut doc = Doc::ty("string").allowed(format!("{}{letter_case}", spellings.join(", ")));
    if let Some((spelling, _)) = options.iter().find(|(_, value)| *value == default) {
        doc = doc.default_value(spelling);
    }
    r.describe(&path, doc);
    let Some(raw) = text(r, b, key) else {
        return default;
    };
    let found = options.iter().find(|(spelling, _)| match case {
        Case::Exact => *spelling == raw,
        Case::Any => spelling.eq_ignore_ascii_case(raw.trim()),
    });
    match found {
        Some((_, value)) => *value,
        None => {
            let names: Vec<&str> = options.iter().map(|(s, _)| *s).collect();
            let letter_case = if case == Case::Exact {
                " (in this letter case)"
            } else {
                ""
            };
            r.problem(
                path,
                format!(
                    "must be one of {}{letter_case}, got `{raw}`",
                    names.join(", ")
                ),
            );
            default
        }
    }
}
