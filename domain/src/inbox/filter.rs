//! The header filter of a source: `require` rules a message must all match and `exclude` rules it
//! must match none of. A message that does not pass is dropped without a row.

use super::header_value;
use crate::glob::TopicPattern;

/// What a rule checks about the value of its header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Condition {
    /// The value equals this text, in the same letter case.
    Equals(String),
    /// The value equals one of these texts, in the same letter case.
    OneOf(Vec<String>),
    /// The value matches this topic glob.
    Matches(TopicPattern),
    /// The header is present, whatever its value.
    Exists,
}

/// One rule: a header name (matched in any letter case) and a condition on its value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeaderRule {
    /// The header name as configured.
    pub header: String,
    /// What the value must satisfy.
    pub condition: Condition,
}

impl HeaderRule {
    /// True when `headers` satisfy the rule. A value condition never holds for a message without
    /// the header: "no value" equals nothing and matches no glob.
    pub fn matches(&self, headers: &[(String, String)]) -> bool {
        let Some(value) = header_value(headers, &self.header) else {
            return false;
        };
        match &self.condition {
            Condition::Equals(expected) => value == expected,
            Condition::OneOf(allowed) => allowed.iter().any(|candidate| candidate == value),
            Condition::Matches(pattern) => pattern.matches(value),
            Condition::Exists => true,
        }
    }
}

/// A source's `filter` block.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HeaderFilter {
    /// A message must match every one of these.
    pub require: Vec<HeaderRule>,
    /// A message must match none of these.
    pub exclude: Vec<HeaderRule>,
}

impl HeaderFilter {
    /// True when the message passes: every `require` rule matches and no `exclude` rule does.
    pub fn passes(&self, headers: &[(String, String)]) -> bool {
        self.require.iter().all(|rule| rule.matches(headers))
            && !self.exclude.iter().any(|rule| rule.matches(headers))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(list: &[(&str, &str)]) -> Vec<(String, String)> {
        list.iter()
            .map(|(n, v)| ((*n).to_owned(), (*v).to_owned()))
            .collect()
    }

    fn rule(header: &str, condition: Condition) -> HeaderRule {
        HeaderRule {
            header: header.to_owned(),
            condition,
        }
    }

    fn glob(text: &str) -> Condition {
        match TopicPattern::compile(text) {
            Ok(pattern) => Condition::Matches(pattern),
            Err(error) => panic!("{text}: {error}"),
        }
    }

    #[test]
    fn equals_needs_the_same_letter_case_but_any_header_case() {
        let r = rule("X-Env", Condition::Equals("prod".into()));
        assert!(r.matches(&headers(&[("x-env", "prod")])));
        assert!(r.matches(&headers(&[("X-ENV", "prod")])));
        assert!(!r.matches(&headers(&[("x-env", "Prod")])));
        assert!(!r.matches(&headers(&[("x-env", "prod2")])));
        assert!(!r.matches(&headers(&[])));
    }

    #[test]
    fn in_matches_one_entry_exactly() {
        let r = rule(
            "x-env",
            Condition::OneOf(vec!["prod".into(), "stage".into()]),
        );
        assert!(r.matches(&headers(&[("x-env", "stage")])));
        assert!(!r.matches(&headers(&[("x-env", "STAGE")])));
        assert!(!r.matches(&headers(&[("x-env", "dev")])));
        assert!(!r.matches(&headers(&[])));
    }

    #[test]
    fn matches_uses_the_topic_glob() {
        let r = rule("x-event", glob("order.*"));
        assert!(r.matches(&headers(&[("x-event", "order.created")])));
        assert!(!r.matches(&headers(&[("x-event", "order.item.added")])));
        assert!(!r.matches(&headers(&[("x-event", "Order.created")])));
        assert!(!r.matches(&headers(&[])));
        let any = rule("x-event", glob("order.**"));
        assert!(any.matches(&headers(&[("x-event", "order.item.added")])));
    }

    #[test]
    fn exists_needs_only_the_name() {
        let r = rule("X-Test", Condition::Exists);
        assert!(r.matches(&headers(&[("x-test", "")])));
        assert!(r.matches(&headers(&[("x-test", "anything")])));
        assert!(!r.matches(&headers(&[("x-other", "1")])));
    }

    #[test]
    fn the_last_value_of_a_repeated_header_decides() {
        let r = rule("x-env", Condition::Equals("prod".into()));
        assert!(r.matches(&headers(&[("x-env", "dev"), ("x-env", "prod")])));
        assert!(!r.matches(&headers(&[("x-env", "prod"), ("x-env", "dev")])));
    }

    #[test]
    fn require_and_exclude_combine() {
        let filter = HeaderFilter {
            require: vec![
                rule("x-env", Condition::Equals("prod".into())),
                rule("x-event", glob("order.*")),
            ],
            exclude: vec![rule("x-test", Condition::Exists)],
        };
        let pass = headers(&[("x-env", "prod"), ("x-event", "order.paid")]);
        assert!(filter.passes(&pass));
        // One require rule fails.
        assert!(!filter.passes(&headers(&[("x-env", "prod"), ("x-event", "user.paid")])));
        assert!(!filter.passes(&headers(&[("x-event", "order.paid")])));
        // Every require rule holds, but an exclude rule matches.
        let mut excluded = pass.clone();
        excluded.push(("X-Test".into(), "1".into()));
        assert!(!filter.passes(&excluded));
    }

    #[test]
    fn an_empty_filter_passes_everything_and_exclude_alone_drops() {
        assert!(HeaderFilter::default().passes(&headers(&[])));
        let filter = HeaderFilter {
            require: Vec::new(),
            exclude: vec![rule("x-env", Condition::OneOf(vec!["dev".into()]))],
        };
        assert!(filter.passes(&headers(&[])));
        assert!(filter.passes(&headers(&[("x-env", "prod")])));
        assert!(!filter.passes(&headers(&[("x-env", "dev")])));
    }
}
