//! The list of every key the reader accepts, taken from the reader itself.
//!
//! The configuration reference (`docs/reference/configuration.md`) must name exactly the keys the
//! reader reads, with their types and defaults. Keeping a second hand-written list would drift, so
//! the list comes from the reader: a `Reader` in catalog mode records every key a block asks for
//! (a block asks for each of its keys whether the file sets it or not) and the type, default and
//! limits the reading helpers of `crate::read` declare for it.
//!
//! Reading one file reaches one kind of each destination, source and `auth` block, so the catalog
//! reads a few small files, `VARIANTS`, each selecting other kinds. They set only what selects
//! a branch (the required keys of a kind, an optional block such as `transform`, one list entry),
//! never a list of keys: a key added to a reader appears here without touching this file.

use crate::env::env_var_for;
use crate::layering::merge;
use crate::reader::Reader;
use indexmap::IndexMap;
use serde_json::Value;
use std::collections::{HashMap, HashSet};

/// What the catalog knows of one key; every field is table text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyRow {
    /// The key path; `<name>` stands for a map entry's name, `[<n>]` for a list index.
    pub key: String,
    pub ty: String,
    pub default: String,
    pub allowed: String,
    pub variable: String,
}

impl KeyRow {
    /// The row's cells as the reference writes them (every cell but the description).
    pub fn cells(&self) -> [String; 5] {
        [
            format!("`{}`", self.key),
            self.ty.clone(),
            self.default.clone(),
            self.allowed.clone(),
            format!("`{}`", self.variable),
        ]
    }
}

/// The keys of one block, such as `server` or `destinations.<name> (kafka)`.
#[derive(Debug, Clone)]
pub struct Section {
    /// The block's path, with the kind a `type` selects in brackets.
    pub id: String,
    pub rows: Vec<KeyRow>,
}

/// The section id of the top-level keys.
pub const TOP: &str = "top level";

/// What a reading helper declares about a key.
#[derive(Debug, Clone, Default)]
pub(crate) struct Doc {
    ty: Option<String>,
    /// The type is only a fallback: `text` reads every scalar, so it must not override what a
    /// more specific helper declared (a retention `duration` is read as text).
    ty_fallback: bool,
    default: Option<String>,
    allowed: Option<String>,
}

impl Doc {
    pub fn ty(ty: &str) -> Self {
        Self {
            ty: Some(ty.to_owned()),
            ..Self::default()
        }
    }

    /// A type that applies only when no other helper declares one.
    pub fn fallback_ty(ty: &str) -> Self {
        Self {
            ty_fallback: true,
            ..Self::ty(ty)
        }
    }

    /// A default as it is written in the file, shown as code.
    pub fn default_value(mut self, value: impl std::fmt::Display) -> Self {
        let value = value.to_string();
        self.default = Some(if value.is_empty() {
            "empty".to_owned()
        } else {
            format!("`{value}`")
        });
        self
    }

    /// A default described in words (`required`, `outbox.maxAttempts`).
    pub fn default_text(mut self, text: &str) -> Self {
        self.default = Some(text.to_owned());
        self
    }

    pub fn allowed(mut self, allowed: impl Into<String>) -> Self {
        self.allowed = Some(allowed.into());
        self
    }
}

/// What a reader in catalog mode collects.
#[derive(Default)]
pub(crate) struct Recorder {
    docs: HashMap<String, Doc>,
    /// Each block's path and the keys it asked for, in reading order.
    blocks: IndexMap<String, Vec<&'static str>>,
    /// The kind `select` chose for a block.
    kinds: HashMap<String, &'static str>,
}

impl Recorder {
    /// Later declarations refine earlier ones: `text_or` adds a default to what `text` declared.
    pub fn describe(&mut self, path: &str, doc: Doc) {
        let entry = self.docs.entry(path.to_owned()).or_default();
        if doc.ty.is_some() && !(doc.ty_fallback && entry.ty.is_some()) {
            entry.ty = doc.ty;
        }
        if doc.default.is_some() {
            entry.default = doc.default;
        }
        if doc.allowed.is_some() {
            entry.allowed = doc.allowed;
        }
    }

    pub fn block(&mut self, path: &str, keys: &[&'static str]) {
        let known = self.blocks.entry(path.to_owned()).or_default();
        for key in keys {
            if !known.contains(key) {
                known.push(key);
            }
        }
    }

    pub fn kind(&mut self, path: &str, name: &'static str) {
        self.kinds.insert(path.to_owned(), name);
    }
}

/// The files the catalog reads: [`BASE`] with each variant laid over it. Entry names are
/// `<name>` so that paths read as the reference writes them.
const BASE: &str = r#"
database: {url: "jdbc:postgresql://db/queuebox", username: u, password: p}
admin: {}
routes: [{topicPattern: a, destination: "<name>", transform: {expression: "$"}}]
destinations: {"<name>": {transform: {expression: "$"}}}
sources:
  "<name>":
    transform: {expression: "$"}
    filter: {require: [{header: h, exists: true}], exclude: [{header: h, exists: true}]}
    rateLimit: {requestsPerMinute: 1}
"#;

/// Each selects a destination kind, a source kind and an inbound and outbound `auth` kind.
const VARIANTS: &[&str] = &[
    r#"{admin: {auth: {token: t}},
        destinations: {"<name>": {baseUrl: "http://d", auth: {clientId: a, clientSecret: b, tokenUrl: "http://t"}}},
        sources: {"<name>": {path: /a, idempotencyKeyPath: $.id, auth: {token: t}}}}"#,
    r#"{admin: {auth: {key: k}},
        destinations: {"<name>": {baseUrl: "http://d", auth: {username: u, password: p}}},
        sources: {"<name>": {path: /a, idempotencyKeyPath: $.id, auth: {key: k}}}}"#,
    r#"{admin: {auth: {secret: s}},
        destinations: {"<name>": {baseUrl: "http://d", auth: {headerValue: v}}},
        sources: {"<name>": {path: /a, idempotencyKeyPath: $.id, auth: {secret: s}}}}"#,
    r#"{destinations: {"<name>": {url: "amqp://r", exchange: e}},
        sources: {"<name>": {queueName: q, connectionUrl: "amqp://r"}}}"#,
    r#"{destinations: {"<name>": {bootstrapServers: k, topic: t}},
        sources: {"<name>": {bootstrapServers: k, topics: [t], groupId: g}}}"#,
    r#"{destinations: {"<name>": {servers: "nats://n", subject: s}},
        sources: {"<name>": {servers: "nats://n", stream: s, durable: d}}}"#,
    r#"{destinations: {"<name>": {url: "redis://r", stream: s}},
        sources: {"<name>": {url: "redis://r", stream: s, group: g}}}"#,
    // The provider signature kinds share their keys, so `type` selects them.
    r#"{destinations: {"<name>": {baseUrl: "http://d", signing: {secrets: [s]}}},
        sources: {"<name>": {path: /a, auth: {type: standardWebhooks, secrets: [s]}}}}"#,
    r#"{destinations: {"<name>": {baseUrl: "http://d"}},
        sources: {"<name>": {path: /a, auth: {type: stripe, secrets: [s]}}}}"#,
    r#"{destinations: {"<name>": {baseUrl: "http://d"}},
        sources: {"<name>": {path: /a, auth: {type: github, secrets: [s]}}}}"#,
    r#"{destinations: {"<name>": {baseUrl: "http://d"}},
        sources: {"<name>": {path: /a, auth: {type: shopify, secrets: [s]}}}}"#,
    r#"{destinations: {"<name>": {baseUrl: "http://d"}},
        sources: {"<name>": {path: /a, auth: {type: slack, secrets: [s]}}}}"#,
];

/// A catalog that cannot be built or that contradicts itself; the drift tests report it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the configuration catalog is inconsistent:\n{}", .0.join("\n"))]
pub struct CatalogError(pub Vec<String>);

/// Every key the reader accepts, block by block, in reading order.
///
/// # Errors
/// [`CatalogError`] when a key has no declared type (its reader bypasses the helpers that declare
/// one), or when two variants declare one key differently.
pub fn sections() -> Result<Vec<Section>, CatalogError> {
    let mut problems = Vec::new();
    let mut sections: IndexMap<String, IndexMap<String, KeyRow>> = IndexMap::new();
    for variant in VARIANTS {
        let recorder = read_variant(variant).map_err(|e| CatalogError(vec![e]))?;
        for (block, keys) in &recorder.blocks {
            let id = match recorder.kinds.get(block) {
                Some(kind) => format!("{} ({kind})", general(block)),
                None => general(block),
            };
            let section = sections.entry(id.clone()).or_default();
            for key in keys {
                let path = if block.is_empty() {
                    (*key).to_owned()
                } else {
                    format!("{block}.{key}")
                };
                let row = row(&path, recorder.docs.get(&path));
                match section.get(&row.key) {
                    Some(seen) if *seen != row => problems.push(format!(
                        "{id}: {} is declared as {:?} and as {:?}",
                        row.key,
                        seen.cells(),
                        row.cells()
                    )),
                    Some(_) => {}
                    None => {
                        if row.ty.is_empty() {
                            problems.push(format!("{id}: {} declares no type", row.key));
                        }
                        section.insert(row.key.clone(), row);
                    }
                }
            }
        }
    }
    problems.extend(unexplored_blocks(&sections));
    if !problems.is_empty() {
        return Err(CatalogError(problems));
    }
    Ok(sections
        .into_iter()
        .map(|(id, rows)| Section {
            id: if id.is_empty() { TOP.to_owned() } else { id },
            rows: rows.into_values().collect(),
        })
        .collect())
}

/// Blocks whose keys no variant reached: an optional block that [`BASE`] and [`VARIANTS`] never
/// set is read only when present, so its keys would be missing from the catalog without this.
fn unexplored_blocks(sections: &IndexMap<String, IndexMap<String, KeyRow>>) -> Vec<String> {
    let blocks: Vec<&str> = sections
        .keys()
        .map(|id| id.split_once(" (").map_or(id.as_str(), |(path, _)| path))
        .collect();
    sections
        .values()
        .flat_map(IndexMap::values)
        .filter_map(|row| {
            let inner = match row.ty.as_str() {
                "block" => row.key.clone(),
                "list of blocks" => format!("{}[<n>]", row.key),
                "map of blocks" => format!("{}.<name>", row.key),
                _ => return None,
            };
            (!blocks.contains(&inner.as_str())).then(|| {
                format!(
                    "{} is a block that no catalog file sets: add it to BASE or VARIANTS",
                    row.key
                )
            })
        })
        // A key shared by several kinds is reported once.
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect()
}

fn read_variant(variant: &str) -> Result<Recorder, String> {
    let parse = |text: &str| {
        serde_yaml::from_str::<Value>(text).map_err(|e| format!("a catalog file is not YAML: {e}"))
    };
    let mut tree = parse(BASE)?;
    merge(&mut tree, parse(variant)?);
    let mut reader = Reader::new(HashMap::new(), HashSet::new(), None);
    reader.start_catalog();
    // The values of the variants are not meant to pass every rule; only the keys asked for count.
    crate::read::read_settings(&mut reader, &tree);
    reader
        .take_catalog()
        .ok_or_else(|| "the reader lost its catalog".to_owned())
}

/// A path as the reference writes it: list index 0 becomes `[<n>]`.
fn general(path: &str) -> String {
    path.replace("[0]", "[<n>]")
}

fn row(path: &str, doc: Option<&Doc>) -> KeyRow {
    let key = general(path);
    let doc = doc.cloned().unwrap_or_default();
    let ty = doc.ty.unwrap_or_default();
    let variable = env_var_for(&key);
    // A key that holds more keys is set by one variable per key below it, never by its own name.
    let (variable, allowed) = match ty.as_str() {
        "block" | "map of blocks" => (format!("{variable}_..."), "the keys below"),
        "list of blocks" => (format!("{variable}_<N>_..."), "the keys below"),
        "list of strings" => (format!("{variable}_<N>"), "any"),
        "map of strings" => (format!("{variable}_<KEY>"), "any"),
        _ => (variable, "any"),
    };
    KeyRow {
        variable,
        key,
        ty,
        default: doc.default.unwrap_or_else(|| "none".to_owned()),
        allowed: doc.allowed.unwrap_or_else(|| allowed.to_owned()),
    }
}

/// The table of `section` as the reference writes it, with an empty description column: what an
/// author pastes when a key is added.
pub fn markdown_table(section: &Section) -> String {
    let mut out = String::from(
        "| Key | Type | Default | Allowed | Variable | Description |\n|---|---|---|---|---|---|\n",
    );
    for row in &section.rows {
        out.push_str(&format!("| {} |  |\n", row.cells().join(" | ")));
    }
    out
}
