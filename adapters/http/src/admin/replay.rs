//! `POST /admin/replay`: the caller's filter, read field by field, handed to the replay port.

use super::gate::{Gate, Shape};
use super::request::{field, object};
use crate::responses;
use queuebox_ports::replay::{Replay, ReplayError, ReplayFilter};
use salvo::http::StatusCode;
use salvo::prelude::*;
use serde_json::{Map, Value};
use std::sync::Arc;

pub(crate) struct ReplayRoute {
    pub(crate) gate: Arc<Gate>,
    pub(crate) replay: Arc<dyn Replay>,
}

#[salvo::async_trait]
impl Handler for ReplayRoute {
    async fn handle(
        &self,
        req: &mut Request,
        _depot: &mut Depot,
        res: &mut Response,
        _ctrl: &mut FlowCtrl,
    ) {
        let Some(body) = self.gate.admit(req, res, Shape::Plain).await else {
            return;
        };
        let filter = match object(&body).and_then(|fields| filter(&fields)) {
            Ok(filter) => filter,
            Err(reason) => {
                responses::error(
                    res,
                    StatusCode::BAD_REQUEST,
                    &format!("Invalid request: {reason}"),
                );
                return;
            }
        };
        match self.replay.replay(&filter).await {
            Ok(moved) => {
                responses::json(res, StatusCode::OK, &serde_json::json!({ "moved": moved }));
            }
            Err(error @ ReplayError::NoFilter) => {
                responses::error(res, StatusCode::BAD_REQUEST, &error.to_string());
            }
            // The database's words stay in the log: the caller learns what moved and to retry.
            Err(ReplayError::Store { moved, .. }) => responses::json(
                res,
                StatusCode::INTERNAL_SERVER_ERROR,
                &serde_json::json!({ "error": "Storage failed", "moved": moved }),
            ),
        }
    }
}

/// The filter fields of the request; anything else in the object is ignored.
fn filter(fields: &Map<String, Value>) -> Result<ReplayFilter, String> {
    let topic: Option<String> = field(fields, "topic")?;
    let topics: Option<Vec<String>> = field(fields, "topics")?;
    // The topic filters become query values, which PostgreSQL refuses when they hold U+0000 (and
    // no stored topic can hold it): the caller's mistake, named, rather than a failed store.
    if topic.as_deref().is_some_and(holds_nul) {
        return Err(format!("topic: {NUL_REFUSED}"));
    }
    if topics.iter().flatten().any(|topic| holds_nul(topic)) {
        return Err(format!("topics: {NUL_REFUSED}"));
    }
    Ok(ReplayFilter {
        ids: field(fields, "ids")?,
        topic,
        topics,
        destination: field(fields, "destination")?,
        created_after: field(fields, "createdAfter")?,
        created_before: field(fields, "createdBefore")?,
    })
}

/// Why a topic filter holding U+0000 is refused.
const NUL_REFUSED: &str = "must not hold the character U+0000";

fn holds_nul(text: &str) -> bool {
    text.contains('\0')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(text: &str) -> Result<ReplayFilter, String> {
        object(text.as_bytes()).and_then(|fields| filter(&fields))
    }

    #[test]
    fn every_field_is_read_and_unknown_ones_are_ignored() {
        let filter = read(
            r#"{"ids":["3f2b1c1e-8d4a-4c1b-9a53-2d0f6f1e7a10"],"topic":"a","topics":["a","b"],
                "destination":"billing","createdAfter":"2026-09-24T08:00:00Z",
                "createdBefore":"2026-09-24T14:00:00+02:00","dryRun":true}"#,
        )
        .expect("valid");
        assert_eq!(filter.ids.as_ref().map(Vec::len), Some(1));
        assert_eq!(filter.topic.as_deref(), Some("a"));
        assert_eq!(filter.topics.as_ref().map(Vec::len), Some(2));
        assert_eq!(filter.destination.as_deref(), Some("billing"));
        assert_eq!(
            filter.created_after.map(|t| t.to_rfc3339()).as_deref(),
            Some("2026-09-24T08:00:00+00:00")
        );
        assert_eq!(
            filter.created_before.map(|t| t.to_rfc3339()).as_deref(),
            Some("2026-09-24T12:00:00+00:00")
        );
        assert!(read(r#"{"dryRun":true}"#).expect("valid").is_empty());
    }

    #[test]
    fn a_bad_value_names_its_field() {
        for (text, name) in [
            (r#"{"ids":["nope"]}"#, "ids"),
            (r#"{"ids":"3f2b1c1e-8d4a-4c1b-9a53-2d0f6f1e7a10"}"#, "ids"),
            (r#"{"topics":"a"}"#, "topics"),
            (r#"{"createdAfter":"yesterday"}"#, "createdAfter"),
            (r#"{"createdBefore":17}"#, "createdBefore"),
            // No outbox topic can hold U+0000 (PostgreSQL text cannot), and the database refuses
            // it as a query value: a 400, never the 500 of a failed store.
            (r#"{"topic":"a\u0000b"}"#, "topic"),
            (r#"{"topics":["ok","\u0000"]}"#, "topics"),
        ] {
            let error = read(text).expect_err(text);
            assert!(error.starts_with(&format!("{name}: ")), "{text}: {error}");
        }
    }
}
