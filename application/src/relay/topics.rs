//! The topic template of each source, parsed once at start, and the rendering of one row's topic.

use queuebox_domain::template::Template;
use std::collections::HashMap;

/// Source name -> its `topic` template.
///
/// It holds every configured source, pull sources too: a push row stored before its source turned
/// to `pull` stays a push row, and the relay still forwards it with the source's template.
#[derive(Debug, Clone, Default)]
pub struct SourceTopics {
    templates: HashMap<String, Template>,
}

/// Why a row has no topic.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum NoTopic {
    /// The row names a source the configuration no longer has.
    UnknownSource,
    /// The template rendered empty (or blank) for this row.
    Empty,
    /// The rendered topic is wider than the outbox `topic` column.
    TooLong,
}

impl SourceTopics {
    /// The map over `(source name, parsed template)` pairs.
    pub fn new(templates: impl IntoIterator<Item = (String, Template)>) -> Self {
        Self {
            templates: templates.into_iter().collect(),
        }
    }

    /// The trimmed topic of a row of `source` with `event_type`; `{{ source }}` and
    /// `{{ eventType }}` render, any other name renders empty.
    pub(crate) fn render(&self, source: &str, event_type: Option<&str>) -> Result<String, NoTopic> {
        let template = self.templates.get(source).ok_or(NoTopic::UnknownSource)?;
        let rendered = template.render(|name| match name {
            "source" => Some(source.to_owned()),
            "eventType" => event_type.map(str::to_owned),
            _ => None,
        });
        let topic = rendered.trim();
        if topic.is_empty() {
            return Err(NoTopic::Empty);
        }
        Ok(topic.to_owned())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn topics(source: &str, text: &str) -> SourceTopics {
        SourceTopics::new([(
            source.to_owned(),
            Template::parse(text).unwrap_or_else(|e| panic!("{text}: {e}")),
        )])
    }

    #[test]
    fn renders_source_and_event_type_trimmed() {
        let t = topics("stripe", " {{ source }}.{{eventType}} ");
        assert_eq!(
            t.render("stripe", Some("charge.paid")),
            Ok("stripe.charge.paid".to_owned())
        );
    }

    #[test]
    fn empty_and_unknown() {
        let t = topics("stripe", "{{ eventType }}");
        assert_eq!(t.render("stripe", None), Err(NoTopic::Empty));
        assert_eq!(t.render("stripe", Some("  ")), Err(NoTopic::Empty));
        assert_eq!(t.render("other", Some("x")), Err(NoTopic::UnknownSource));
    }
}
