//! `sources.<name>.filter`: header rules.

use super::{required, text};
use crate::catalog::Doc;
use crate::model::{FilterCondition, FilterRule, HeaderFilter};
use crate::reader::{Block, Reader};

/// The `filter` block under `parent`, if set.
pub(crate) fn read(r: &mut Reader, parent: &mut Block<'_>) -> Option<HeaderFilter> {
    // An optional block: declared here, because an absent one is never opened.
    r.describe(&parent.path_of("filter"), Doc::ty("block"));
    let value = parent.get("filter")?;
    let mut b = Block::open(r, Some(value), &parent.path_of("filter"));
    let require_value = b.get("require");
    let require = read_rules(r, require_value, &b.path_of("require"));
    let exclude_value = b.get("exclude");
    let exclude = read_rules(r, exclude_value, &b.path_of("exclude"));
    b.finish(r);
    Some(HeaderFilter { require, exclude })
}

fn read_rules(r: &mut Reader, value: Option<&serde_json::Value>, path: &str) -> Vec<FilterRule> {
    let mut rules = Vec::new();
    for (rule_path, value) in r.list(value, path) {
        let mut b = Block::open(r, Some(value), &rule_path);
        let header = required(r, &mut b, "header");
        let mut conditions = Vec::new();
        if let Some(equals) = text(r, &mut b, "equals") {
            conditions.push(FilterCondition::Equals(equals));
        }
        let in_path = b.path_of("in");
        let in_value = b.get("in");
        if let Some(values) = r.text_list(in_value, &in_path) {
            if values.is_empty() {
                r.problem(in_path.clone(), "must list at least one value");
            }
            conditions.push(FilterCondition::In(values));
        }
        if let Some(glob) = text(r, &mut b, "matches") {
            conditions.push(FilterCondition::Matches(glob));
        }
        let exists_path = b.path_of("exists");
        r.describe(&exists_path, Doc::ty("boolean").allowed("`true`"));
        let exists_value = b.get("exists");
        if let Some(exists) = r.boolean(exists_value, &exists_path) {
            if !exists {
                // A rule that requires absence is easy to misread; the spec refuses it outright.
                r.problem(
                    exists_path,
                    "exists: false is not supported; put an exists: true rule under exclude instead",
                );
            }
            conditions.push(FilterCondition::Exists(exists));
        }
        match conditions.len() {
            1 => {}
            0 => r.problem(
                rule_path.clone(),
                "a rule must set one of equals, in, matches or exists",
            ),
            _ => r.problem(
                rule_path.clone(),
                "a rule must set exactly one of equals, in, matches or exists",
            ),
        }
        b.finish(r);
        if let Some(condition) = conditions.into_iter().next() {
            rules.push(FilterRule { header, condition });
        }
    }
    rules
}
