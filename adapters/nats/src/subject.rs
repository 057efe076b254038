//! What NATS accepts as a subject to publish to: dot-separated tokens, none empty, no whitespace,
//! and no wildcard token (`*`, `>`), which only subscriptions may use.

/// Why `subject` cannot be published to, if it cannot.
pub(crate) fn publish_subject_problem(subject: &str) -> Option<&'static str> {
    if subject.is_empty() {
        return Some("it is empty");
    }
    if subject.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Some("it holds whitespace or a control character");
    }
    for token in subject.split('.') {
        if token.is_empty() {
            return Some("it has an empty token (a leading, trailing or double dot)");
        }
        if token == "*" || token == ">" {
            return Some("it has a wildcard token, which only a subscription may use");
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subjects_follow_the_nats_rules() {
        for good in ["orders", "orders.created", "a.b-c.d_e", "événements.créés"] {
            assert_eq!(publish_subject_problem(good), None, "{good}");
        }
        for bad in ["", "a b", "a..b", ".a", "a.", "a.*", "a.>", "tab\t"] {
            assert!(publish_subject_problem(bad).is_some(), "{bad:?}");
        }
    }
}
