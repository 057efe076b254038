//! Typed reading of the merged value tree, key by key.
//!
//! Every read names its key, so the reader knows which keys of each block are known: whatever is
//! left over at the end of a block is an unknown key, reported as a warning with the nearest known
//! name. Every read also resolves `${...}` placeholders, so a placeholder inside an unknown key
//! costs nothing and a missing variable is reported against the canonical key path.

use crate::catalog::{Doc, Recorder};
use crate::env::env_var_for;
use crate::error::Problem;
use crate::placeholders::resolve;
use crate::secrets::{FILE_PREFIX, read_secret_file};
use crate::suggest::nearest;
use queuebox_domain::secret::Secret;
use serde_json::Value;
use std::collections::{HashMap, HashSet};

/// Loader state shared by every section reader: the environment for placeholders, the problems and
/// the unknown keys found so far.
pub(crate) struct Reader {
    env: HashMap<String, String>,
    env_paths: HashSet<String>,
    file_label: Option<String>,
    problems: Vec<Problem>,
    unknown: Vec<Unknown>,
    used_vars: HashSet<String>,
    /// Set only while [`crate::catalog`] lists the keys.
    catalog: Option<Recorder>,
}

struct Unknown {
    path: String,
    suggestion: Option<String>,
}

impl Reader {
    pub fn new(
        env: HashMap<String, String>,
        env_paths: HashSet<String>,
        file_label: Option<String>,
    ) -> Self {
        Self {
            env,
            env_paths,
            file_label,
            problems: Vec::new(),
            unknown: Vec::new(),
            used_vars: HashSet::new(),
            catalog: None,
        }
    }

    /// Makes the reader record every key asked for, with what the helpers declare about it.
    pub fn start_catalog(&mut self) {
        self.catalog = Some(Recorder::default());
    }

    pub fn take_catalog(&mut self) -> Option<Recorder> {
        self.catalog.take()
    }

    /// Declares the type, default or limits of key `path` for the catalog; a no-op otherwise.
    pub fn describe(&mut self, path: &str, doc: Doc) {
        if let Some(catalog) = &mut self.catalog {
            catalog.describe(path, doc);
        }
    }

    /// Records the kind a `type` (or the required keys) selected for the block at `path`.
    pub fn record_kind(&mut self, path: &str, name: &'static str) {
        if let Some(catalog) = &mut self.catalog {
            catalog.kind(path, name);
        }
    }

    /// Records a problem of key `path`.
    pub fn problem(&mut self, path: impl Into<String>, message: impl Into<String>) {
        self.problems.push(Problem::at(path, message));
    }

    /// The problems found, each key reported once (its first, most basic problem: a missing key
    /// would otherwise also fail every rule about its value).
    pub fn into_problems(self) -> Vec<Problem> {
        let mut seen = HashSet::new();
        self.problems
            .into_iter()
            .filter(|p| p.path.as_ref().is_none_or(|path| seen.insert(path.clone())))
            .collect()
    }

    /// Warnings for unknown keys. A variable that a `${...}` placeholder read is not reported: it
    /// was meant as a value, not as a key (`QUEUEBOX_DB_PASSWORD` in the example file).
    pub fn warnings(&self) -> Vec<String> {
        self.unknown
            .iter()
            .filter_map(|unknown| {
                let from_env = self.env_paths.contains(&unknown.path.to_lowercase());
                let var = env_var_for(&unknown.path);
                if from_env && self.used_vars.contains(&var) {
                    return None;
                }
                let origin = if from_env {
                    format!(" (from {var})")
                } else {
                    match &self.file_label {
                        Some(label) => format!(" (in {label})"),
                        None => String::new(),
                    }
                };
                let hint = unknown
                    .suggestion
                    .as_ref()
                    .map(|s| format!("; did you mean {s}?"))
                    .unwrap_or_default();
                Some(format!("unknown key {}{origin}{hint}", unknown.path))
            })
            .collect()
    }

    /// Text of a scalar, placeholders filled. Numbers and booleans become their text.
    pub fn text(&mut self, value: Option<&Value>, path: &str) -> Option<String> {
        match value? {
            Value::String(text) => match resolve(text, &self.env) {
                Ok(resolved) => {
                    self.used_vars.extend(resolved.used);
                    Some(resolved.text)
                }
                Err(error) => {
                    self.problem(path, error.to_string());
                    None
                }
            },
            Value::Number(n) => Some(n.to_string()),
            Value::Bool(b) => Some(b.to_string()),
            Value::Null => None,
            Value::Array(_) | Value::Object(_) => {
                self.problem(path, "must be a single value, not a list or a block");
                None
            }
        }
    }

    /// A whole number; the caller checks its range, so the message can state the rule.
    pub fn int(&mut self, value: Option<&Value>, path: &str) -> Option<i64> {
        let text = self.text(value, path)?;
        match text.trim().parse::<i64>() {
            Ok(n) => Some(n),
            Err(_) => {
                self.problem(path, format!("must be a whole number, got `{text}`"));
                None
            }
        }
    }

    pub fn boolean(&mut self, value: Option<&Value>, path: &str) -> Option<bool> {
        let text = self.text(value, path)?;
        match text.trim().to_ascii_lowercase().as_str() {
            "true" => Some(true),
            "false" => Some(false),
            _ => {
                self.problem(path, format!("must be true or false, got `{text}`"));
                None
            }
        }
    }

    /// A credential: the text itself, or the content of the file a `file:` reference names.
    pub fn secret(&mut self, value: Option<&Value>, path: &str) -> Option<Secret> {
        let text = self.text(value, path)?;
        match text.strip_prefix(FILE_PREFIX) {
            Some(file) => match read_secret_file(file.trim()) {
                Ok(content) => Some(Secret::new(content)),
                Err(message) => {
                    self.problem(path, message);
                    None
                }
            },
            None => Some(Secret::new(text)),
        }
    }

    /// A list of scalars.
    pub fn text_list(&mut self, value: Option<&Value>, path: &str) -> Option<Vec<String>> {
        self.describe(path, Doc::ty("list of strings"));
        match value? {
            Value::Null => None,
            Value::Array(items) => Some(
                items
                    .iter()
                    .enumerate()
                    .map(|(i, item)| {
                        self.text(Some(item), &format!("{path}[{i}]"))
                            .unwrap_or_default()
                    })
                    .collect(),
            ),
            _ => {
                self.problem(path, "must be a list");
                None
            }
        }
    }

    /// A map of user-chosen names to scalars (`headers`, `extraParams`), in file order.
    pub fn text_map(
        &mut self,
        value: Option<&Value>,
        path: &str,
    ) -> indexmap::IndexMap<String, String> {
        self.describe(path, Doc::ty("map of strings"));
        let mut map = indexmap::IndexMap::new();
        match value {
            None | Some(Value::Null) => {}
            Some(Value::Object(entries)) => {
                for (key, item) in entries {
                    if let Some(text) = self.text(Some(item), &format!("{path}.{key}")) {
                        map.insert(key.clone(), text);
                    }
                }
            }
            Some(_) => self.problem(path, "must be a block of name: value pairs"),
        }
        map
    }

    /// The entries of a list of blocks (`routes`, `filter.require`).
    pub fn list<'v>(&mut self, value: Option<&'v Value>, path: &str) -> Vec<(String, &'v Value)> {
        self.describe(path, Doc::ty("list of blocks"));
        match value {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(items)) => items
                .iter()
                .enumerate()
                .map(|(i, item)| (format!("{path}[{i}]"), item))
                .collect(),
            Some(_) => {
                self.problem(path, "must be a list");
                Vec::new()
            }
        }
    }

    /// The entries of a map of named blocks (`destinations`, `sources`), in file order.
    pub fn named<'v>(&mut self, value: Option<&'v Value>, path: &str) -> Vec<(String, &'v Value)> {
        self.describe(path, Doc::ty("map of blocks"));
        match value {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Object(entries)) => entries
                .iter()
                .map(|(name, item)| (name.clone(), item))
                .collect(),
            Some(_) => {
                self.problem(path, "must be a block of named entries");
                Vec::new()
            }
        }
    }
}

/// One block of the tree being read. Lookups ignore letter case; keys never asked for are unknown.
pub(crate) struct Block<'v> {
    path: String,
    entries: Vec<(&'v str, &'v Value, bool)>,
    known: Vec<&'static str>,
    /// Keys written more than once in different letter case; which one wins would be a guess.
    duplicates: Vec<&'static str>,
}

impl<'v> Block<'v> {
    /// Opens the block at `path`; a missing block reads as empty, a scalar is a problem.
    pub fn open(reader: &mut Reader, value: Option<&'v Value>, path: &str) -> Self {
        // List entries and map entries are blocks too, but not keys; the catalog keeps only keys.
        reader.describe(path, Doc::ty("block"));
        let entries = match value {
            Some(Value::Object(map)) => map.iter().map(|(k, v)| (k.as_str(), v, false)).collect(),
            None | Some(Value::Null) => Vec::new(),
            Some(_) => {
                reader.problem(path, "must be a block of keys");
                Vec::new()
            }
        };
        Self {
            path: path.to_owned(),
            entries,
            known: Vec::new(),
            duplicates: Vec::new(),
        }
    }

    /// The path of key `key` of this block.
    pub fn path_of(&self, key: &str) -> String {
        if self.path.is_empty() {
            key.to_owned()
        } else {
            format!("{}.{key}", self.path)
        }
    }

    pub fn path(&self) -> &str {
        &self.path
    }

    /// The value of `key`, matched in any letter case. A key with no value (`key:`) reads as absent.
    pub fn get(&mut self, key: &'static str) -> Option<&'v Value> {
        if !self.known.contains(&key) {
            self.known.push(key);
        }
        let mut found = None;
        let mut count = 0;
        for entry in &mut self.entries {
            if entry.0.eq_ignore_ascii_case(key) {
                entry.2 = true;
                count += 1;
                if found.is_none() {
                    found = Some(entry.1);
                }
            }
        }
        if count > 1 && !self.duplicates.contains(&key) {
            self.duplicates.push(key);
        }
        found.filter(|v| !v.is_null())
    }

    /// True when `key` holds a value; does not count as a read.
    pub fn has(&self, key: &str) -> bool {
        self.entries
            .iter()
            .any(|(k, v, _)| k.eq_ignore_ascii_case(key) && !v.is_null())
    }

    /// Reports every key that no read asked for, with the nearest known key as a hint.
    pub fn finish(self, reader: &mut Reader) {
        if let Some(catalog) = &mut reader.catalog {
            catalog.block(&self.path, &self.known);
        }
        for key in &self.duplicates {
            reader.problem(
                self.path_of(key),
                "is set more than once in different letter case; keep one",
            );
        }
        for (key, value, used) in &self.entries {
            if *used {
                continue;
            }
            let mut leaves = Vec::new();
            leaf_paths(&self.path_of(key), value, &mut leaves);
            for leaf in leaves {
                let relative = leaf[self.path_of("").len()..].to_owned();
                let suggestion = nearest(&relative, &self.known).map(|known| self.path_of(known));
                reader.unknown.push(Unknown {
                    path: leaf,
                    suggestion,
                });
            }
        }
    }
}

fn leaf_paths(path: &str, value: &Value, out: &mut Vec<String>) {
    match value {
        Value::Object(map) if !map.is_empty() => {
            for (key, child) in map {
                leaf_paths(&format!("{path}.{key}"), child, out);
            }
        }
        Value::Array(items) if !items.is_empty() => {
            for (i, child) in items.iter().enumerate() {
                leaf_paths(&format!("{path}[{i}]"), child, out);
            }
        }
        _ => out.push(path.to_owned()),
    }
}
