//! `routes[i].*`. That each route names a known destination is checked in `cross`.

use super::templates::check_syntax;
use super::{required, text, text_or, transform};
use crate::model::Route;
use crate::reader::{Block, Reader};
use serde_json::Value;

pub(super) fn read(r: &mut Reader, value: Option<&Value>) -> Vec<Route> {
    let mut routes = Vec::new();
    for (path, value) in r.list(value, "routes") {
        let mut b = Block::open(r, Some(value), &path);
        let topic_pattern = required(r, &mut b, "topicPattern");
        if topic_pattern.contains("***") {
            r.problem(
                b.path_of("topicPattern"),
                format!("`***` has no meaning in a topic pattern (use `*` for one segment or `**` for any text), got `{topic_pattern}`"),
            );
        }
        let destination = required(r, &mut b, "destination");
        let routing_key_template = text(r, &mut b, "routingKeyTemplate");
        if let Some(template) = &routing_key_template {
            check_syntax(r, &b.path_of("routingKeyTemplate"), template);
        }
        let routing_key_missing_field_default =
            text_or(r, &mut b, "routingKeyMissingFieldDefault", "");
        let transform = transform::read(r, &mut b);
        b.finish(r);
        routes.push(Route {
            topic_pattern,
            destination,
            routing_key_template,
            routing_key_missing_field_default,
            transform,
        });
    }
    routes
}
