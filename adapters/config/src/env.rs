//! The `QUEUEBOX_` variable naming rule, in both directions.
//!
//! A variable name minus its prefix is a key path: `_` separates two levels, `__` stands for a
//! literal `_`, and every level is lower case (key names match in any letter case later, and map keys
//! set by a variable are lower case). A level made of digits is a list index.

use crate::error::Problem;
use serde_json::{Map, Value};
use std::collections::{BTreeMap, HashSet};

/// The prefix of every configuration variable.
pub const PREFIX: &str = "QUEUEBOX_";
/// The variable that names the YAML file; it is not a configuration key.
pub const CONFIG_FILE_VAR: &str = "QUEUEBOX_CONFIG_FILE";

/// The variable that sets key `path`: `destinations.my_api.baseUrl` gives
/// `QUEUEBOX_DESTINATIONS_MY__API_BASEURL`, `routes[0].topicPattern` gives
/// `QUEUEBOX_ROUTES_0_TOPICPATTERN`.
pub fn env_var_for(path: &str) -> String {
    let levels: Vec<String> = split_path(path)
        .into_iter()
        .map(|level| level.replace('_', "__").to_uppercase())
        .collect();
    format!("{PREFIX}{}", levels.join("_"))
}

/// The levels of a display path: `sources.orders.topics[0]` is `sources`, `orders`, `topics`, `0`.
pub(crate) fn split_path(path: &str) -> Vec<String> {
    let mut levels = Vec::new();
    for part in path.split('.') {
        let mut rest = part;
        // `name[0][1]`: the name, then each bracketed index as a level of its own.
        if let Some(open) = rest.find('[') {
            if open > 0 {
                levels.push(rest[..open].to_owned());
            }
            rest = &rest[open..];
            while let Some(stripped) = rest.strip_prefix('[') {
                match stripped.find(']') {
                    Some(close) => {
                        levels.push(stripped[..close].to_owned());
                        rest = &stripped[close + 1..];
                    }
                    None => {
                        levels.push(stripped.to_owned());
                        rest = "";
                    }
                }
            }
            if !rest.is_empty() {
                levels.push(rest.to_owned());
            }
        } else if !rest.is_empty() {
            levels.push(rest.to_owned());
        }
    }
    levels
}

/// The lower-case levels of a variable name, or `None` when it is not a configuration variable or
/// has an empty level (a leading, trailing or tripled `_`).
pub(crate) fn levels_of_var(name: &str) -> Option<Vec<String>> {
    let rest = name.strip_prefix(PREFIX)?;
    if name == CONFIG_FILE_VAR {
        return None;
    }
    let mut levels = Vec::new();
    let mut current = String::new();
    let mut chars = rest.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '_' {
            if chars.peek() == Some(&'_') {
                chars.next();
                current.push('_');
            } else {
                levels.push(std::mem::take(&mut current));
            }
        } else {
            current.extend(c.to_lowercase());
        }
    }
    levels.push(current);
    if levels.iter().any(String::is_empty) {
        return None;
    }
    Some(levels)
}

/// A key path for messages: levels joined by `.`, list indexes as `[n]`.
pub(crate) fn display_path(levels: &[String]) -> String {
    let mut out = String::new();
    for level in levels {
        if is_index(level) && !out.is_empty() {
            out.push('[');
            out.push_str(level);
            out.push(']');
        } else {
            if !out.is_empty() {
                out.push('.');
            }
            out.push_str(level);
        }
    }
    out
}

fn is_index(level: &str) -> bool {
    !level.is_empty() && level.bytes().all(|b| b.is_ascii_digit())
}

/// The configuration variables turned into one value tree.
pub(crate) struct EnvLayer {
    /// The tree the variables describe (an empty object when none is set).
    pub tree: Value,
    /// The display paths the variables set, lower case, to tell a variable from a file key.
    pub paths: HashSet<String>,
    /// True when at least one configuration variable is set.
    pub any: bool,
    pub problems: Vec<Problem>,
    pub warnings: Vec<String>,
}

enum Node {
    Leaf(String),
    Branch(BTreeMap<String, Node>),
}

/// Builds the tree of every `QUEUEBOX_` variable except `QUEUEBOX_CONFIG_FILE`.
pub(crate) fn env_layer(env: &[(String, String)]) -> EnvLayer {
    let mut vars: Vec<&(String, String)> = env
        .iter()
        .filter(|(name, _)| name.starts_with(PREFIX) && name != CONFIG_FILE_VAR)
        .collect();
    // Sorted, so a clash between two spellings of one key resolves the same way on every run.
    vars.sort_by(|a, b| a.0.cmp(&b.0));
    let mut layer = EnvLayer {
        tree: Value::Object(Map::new()),
        paths: HashSet::new(),
        any: !vars.is_empty(),
        problems: Vec::new(),
        warnings: Vec::new(),
    };
    let mut root: BTreeMap<String, Node> = BTreeMap::new();
    for (name, value) in vars {
        let Some(levels) = levels_of_var(name) else {
            layer.warnings.push(format!(
                "ignored variable {name}: it names no key (check for a leading, trailing or tripled `_`)"
            ));
            continue;
        };
        let path = display_path(&levels);
        if insert(&mut root, &levels, value.clone()).is_err() {
            layer.problems.push(Problem::at(
                path.clone(),
                format!("{name} sets a value where another variable sets keys below it"),
            ));
            continue;
        }
        layer.paths.insert(path.to_lowercase());
    }
    layer.tree = to_value(Node::Branch(root), "", &mut layer.problems);
    layer
}

fn insert(branch: &mut BTreeMap<String, Node>, levels: &[String], value: String) -> Result<(), ()> {
    let Some((first, rest)) = levels.split_first() else {
        return Err(());
    };
    if rest.is_empty() {
        if matches!(branch.get(first), Some(Node::Branch(_))) {
            return Err(());
        }
        branch.insert(first.clone(), Node::Leaf(value));
        return Ok(());
    }
    let child = branch
        .entry(first.clone())
        .or_insert_with(|| Node::Branch(BTreeMap::new()));
    match child {
        Node::Branch(inner) => insert(inner, rest, value),
        Node::Leaf(_) => Err(()),
    }
}

fn to_value(node: Node, path: &str, problems: &mut Vec<Problem>) -> Value {
    match node {
        Node::Leaf(text) => Value::String(text),
        Node::Branch(children) => {
            if !children.is_empty() && children.keys().all(|k| is_index(k)) {
                // A list: order by number, and refuse a gap, which would shift every later element.
                let mut indexed: Vec<(usize, Node)> = Vec::new();
                for (key, child) in children {
                    match key.parse::<usize>() {
                        Ok(index) => indexed.push((index, child)),
                        Err(_) => problems.push(Problem::at(
                            format!("{path}[{key}]"),
                            "list index is too large",
                        )),
                    }
                }
                indexed.sort_by_key(|(index, _)| *index);
                let mut items = Vec::new();
                for (position, (index, child)) in indexed.into_iter().enumerate() {
                    let child_path = format!("{path}[{index}]");
                    if index != position {
                        problems.push(Problem::at(
                            child_path.clone(),
                            format!("list index {index} is set but index {position} is not; number the elements from 0 without a gap"),
                        ));
                    }
                    items.push(to_value(child, &child_path, problems));
                }
                Value::Array(items)
            } else {
                let mut map = Map::new();
                for (key, child) in children {
                    let child_path = if path.is_empty() {
                        key.clone()
                    } else {
                        format!("{path}.{key}")
                    };
                    map.insert(key, to_value(child, &child_path, problems));
                }
                Value::Object(map)
            }
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn var_names_for_paths() {
        assert_eq!(env_var_for("server.httpPort"), "QUEUEBOX_SERVER_HTTPPORT");
        assert_eq!(
            env_var_for("destinations.my_api.baseUrl"),
            "QUEUEBOX_DESTINATIONS_MY__API_BASEURL"
        );
        assert_eq!(
            env_var_for("routes[0].topicPattern"),
            "QUEUEBOX_ROUTES_0_TOPICPATTERN"
        );
        assert_eq!(
            env_var_for("sources.orders.filter.require[0].in[1]"),
            "QUEUEBOX_SOURCES_ORDERS_FILTER_REQUIRE_0_IN_1"
        );
    }

    #[test]
    fn levels_of_a_variable() {
        assert_eq!(
            levels_of_var("QUEUEBOX_DESTINATIONS_MY__API_BASEURL").unwrap(),
            vec!["destinations", "my_api", "baseurl"]
        );
        assert_eq!(levels_of_var("QUEUEBOX_CONFIG_FILE"), None);
        assert_eq!(levels_of_var("QUEUEBOX_OUTBOX_"), None);
        assert_eq!(levels_of_var("OTHER_X"), None);
    }

    #[test]
    fn a_gap_in_a_list_is_a_problem() {
        let layer = env_layer(&[("QUEUEBOX_ROUTES_1_DESTINATION".into(), "x".into())]);
        assert_eq!(layer.problems.len(), 1);
        assert_eq!(layer.problems[0].path.as_deref(), Some("routes[1]"));
    }

    #[test]
    fn a_value_and_keys_below_it_clash() {
        let layer = env_layer(&[
            ("QUEUEBOX_OUTBOX".into(), "x".into()),
            ("QUEUEBOX_OUTBOX_BATCHSIZE".into(), "1".into()),
        ]);
        assert_eq!(layer.problems.len(), 1, "{:?}", layer.problems);
    }
}
