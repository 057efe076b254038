//! Checks of the `{{ ... }}` templates that the configuration holds.

use crate::catalog::Doc;
use crate::reader::Reader;
use queuebox_domain::template::Template;
use queuebox_domain::template::address::{Address, AddressField};

/// Checks an address template of destination `destination` the way the publisher will build it;
/// an unknown placeholder would render the same broken address on every row, so it stops the start.
pub(crate) fn check_address(
    r: &mut Reader,
    path: &str,
    field: AddressField,
    destination: &str,
    text: &str,
) {
    r.describe(path, Doc::ty("template"));
    if let Err(error) = Address::new(destination, field, text, None) {
        r.problem(path, error.to_string());
    }
}

/// Checks only the structure of a template whose unknown names render a default (routing keys,
/// the Kafka record key).
pub(crate) fn check_syntax(r: &mut Reader, path: &str, text: &str) {
    r.describe(path, Doc::ty("template"));
    if let Err(error) = Template::parse(text) {
        r.problem(path, format!("is not a valid template: {error}"));
    }
}

/// Checks a source `topic` template; returns whether it reads `{{ eventType }}`.
pub(crate) fn check_source_topic(r: &mut Reader, path: &str, text: &str) -> bool {
    r.describe(path, Doc::ty("template"));
    match Template::parse(text) {
        Err(error) => {
            r.problem(path, format!("is not a valid template: {error}"));
            false
        }
        Ok(template) => {
            for name in template.placeholders() {
                if !matches!(name, "source" | "eventType") {
                    r.problem(
                        path,
                        format!(
                            "placeholder {{{{ {name} }}}} is not allowed in a source topic; use source or eventType"
                        ),
                    );
                }
            }
            template.uses("eventType")
        }
    }
}
