//! The router: which destination a topic goes to.
//!
//! Routes are tried in configuration order and the first whose pattern covers the topic wins. Two
//! routes never copy a row; a topic no route covers has no destination, and the dispatcher sends
//! the row to `dead` (see [`crate::outbox::no_route_reason`]). Every pattern compiles and every
//! destination name resolves when the router is built, so a bad configuration stops the start
//! instead of killing rows later.

use crate::glob::{GlobError, TopicPattern};
use std::collections::BTreeSet;
use thiserror::Error;

/// One configured route, as the configuration gives it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RouteSpec {
    /// `topicPattern`.
    pub topic_pattern: String,
    /// `destination`: the name of a configured destination.
    pub destination: String,
}

/// Why the routes cannot be used.
#[derive(Debug, Clone, Error, PartialEq, Eq)]
pub enum RouterError {
    /// A `topicPattern` does not compile.
    #[error("routes[{index}].topicPattern: {source}")]
    Pattern {
        /// Position of the route in the list.
        index: usize,
        /// What is wrong with the pattern.
        source: GlobError,
    },
    /// A route names a destination that is not configured.
    #[error("routes[{index}].destination: unknown destination `{destination}`")]
    UnknownDestination {
        /// Position of the route in the list.
        index: usize,
        /// The name the route gives.
        destination: String,
    },
}

/// A compiled route.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Route {
    pattern: TopicPattern,
    destination: String,
}

impl Route {
    /// The compiled pattern.
    pub fn pattern(&self) -> &TopicPattern {
        &self.pattern
    }

    /// The destination name.
    pub fn destination(&self) -> &str {
        &self.destination
    }
}

/// The route a topic took.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RouteMatch<'a> {
    /// Position of the route in the configured list (to find its transform or routing key).
    pub index: usize,
    /// The destination name.
    pub destination: &'a str,
}

/// The compiled, ordered routes.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Router {
    routes: Vec<Route>,
}

impl Router {
    /// Compiles `routes` in order and checks each destination against `destinations`.
    ///
    /// # Errors
    /// The first route whose pattern does not compile or whose destination is not in
    /// `destinations`.
    pub fn new<D, N>(routes: &[RouteSpec], destinations: D) -> Result<Self, RouterError>
    where
        D: IntoIterator<Item = N>,
        N: AsRef<str>,
    {
        let known: BTreeSet<String> = destinations
            .into_iter()
            .map(|name| name.as_ref().to_owned())
            .collect();
        let routes = routes
            .iter()
            .enumerate()
            .map(|(index, spec)| {
                let pattern = TopicPattern::compile(&spec.topic_pattern)
                    .map_err(|source| RouterError::Pattern { index, source })?;
                if !known.contains(&spec.destination) {
                    return Err(RouterError::UnknownDestination {
                        index,
                        destination: spec.destination.clone(),
                    });
                }
                Ok(Route {
                    pattern,
                    destination: spec.destination.clone(),
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Self { routes })
    }

    /// The first route whose pattern covers `topic`, or `None` when no route does.
    pub fn route(&self, topic: &str) -> Option<RouteMatch<'_>> {
        self.routes
            .iter()
            .enumerate()
            .find(|(_, route)| route.pattern.matches(topic))
            .map(|(index, route)| RouteMatch {
                index,
                destination: &route.destination,
            })
    }

    /// The compiled routes, in order.
    pub fn routes(&self) -> &[Route] {
        &self.routes
    }

    /// True when no route is configured.
    pub fn is_empty(&self) -> bool {
        self.routes.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(pattern: &str, destination: &str) -> RouteSpec {
        RouteSpec {
            topic_pattern: pattern.to_owned(),
            destination: destination.to_owned(),
        }
    }

    fn router(specs: &[RouteSpec]) -> Router {
        match Router::new(specs, ["billing", "archive", "analytics", "audit"]) {
            Ok(r) => r,
            Err(e) => panic!("{e}"),
        }
    }

    #[test]
    fn first_match_wins_in_list_order() {
        let r = router(&[spec("invoice.*", "billing"), spec("**", "archive")]);
        let hit = r.route("invoice.paid");
        assert_eq!(
            hit,
            Some(RouteMatch {
                index: 0,
                destination: "billing"
            })
        );
        assert_eq!(r.route("invoice.line.added").map(|m| m.index), Some(1));
        assert_eq!(
            r.route("order.created").map(|m| m.destination),
            Some("archive")
        );

        // The catch-all first swallows everything.
        let r = router(&[spec("**", "archive"), spec("invoice.*", "billing")]);
        assert_eq!(
            r.route("invoice.paid").map(|m| m.destination),
            Some("archive")
        );
    }

    #[test]
    fn fan_out_by_prefix() {
        let r = router(&[spec("analytics.**", "analytics"), spec("audit.**", "audit")]);
        assert_eq!(
            r.route("analytics.payment.succeeded")
                .map(|m| m.destination),
            Some("analytics")
        );
        assert_eq!(
            r.route("audit.payment.succeeded").map(|m| m.destination),
            Some("audit")
        );
        assert_eq!(r.route("payment.succeeded"), None);
        assert_eq!(r.route("analytics"), None);
    }

    #[test]
    fn no_routes_route_nothing() {
        let r = router(&[]);
        assert!(r.is_empty());
        assert_eq!(r.route("anything"), None);
    }

    #[test]
    fn unknown_destination_is_a_construction_error() {
        let err = Router::new(
            &[spec("a.*", "billing"), spec("b.*", "nowhere")],
            ["billing"],
        );
        assert_eq!(
            err,
            Err(RouterError::UnknownDestination {
                index: 1,
                destination: "nowhere".to_owned()
            })
        );
        let text = err
            .map(|_| ())
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(
            text.contains("nowhere") && text.contains("routes[1]"),
            "{text}"
        );
    }

    #[test]
    fn bad_pattern_is_a_construction_error() {
        let err = Router::new(&[spec("a.***", "billing")], vec!["billing".to_owned()]);
        assert!(matches!(err, Err(RouterError::Pattern { index: 0, .. })));
    }

    #[test]
    fn routes_are_exposed_in_order() {
        let r = router(&[spec("invoice.*", "billing"), spec("**", "archive")]);
        let names: Vec<_> = r.routes().iter().map(Route::destination).collect();
        assert_eq!(names, ["billing", "archive"]);
        assert_eq!(r.routes()[0].pattern().as_str(), "invoice.*");
    }
}
