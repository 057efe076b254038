//! The answer to an error no route wrote a body for (a path no route serves, a method a route
//! does not take, a status raised inside the HTTP layer): `{"error": ...}` as JSON like every
//! other answer of the API, instead of the HTTP framework's HTML page, which would also name the
//! framework to anyone who asks.

use crate::responses;
use salvo::catcher::Catcher;
use salvo::http::StatusCode;
use salvo::prelude::*;

/// The catcher both ports use.
pub(crate) fn json_catcher() -> Catcher {
    Catcher::new(JsonError)
}

struct JsonError;

#[salvo::async_trait]
impl Handler for JsonError {
    async fn handle(
        &self,
        _req: &mut Request,
        _depot: &mut Depot,
        res: &mut Response,
        _ctrl: &mut FlowCtrl,
    ) {
        let status = res.status_code.unwrap_or(StatusCode::NOT_FOUND);
        responses::error(res, status, message(status));
    }
}

/// The text of an error answer by its status.
fn message(status: StatusCode) -> &'static str {
    match status {
        StatusCode::NOT_FOUND => responses::NOT_FOUND,
        StatusCode::METHOD_NOT_ALLOWED => "Method not allowed",
        other => other.canonical_reason().unwrap_or("Error"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_error_status_has_a_text() {
        assert_eq!(message(StatusCode::NOT_FOUND), "Not found");
        assert_eq!(
            message(StatusCode::METHOD_NOT_ALLOWED),
            "Method not allowed"
        );
        assert_eq!(
            message(StatusCode::UNSUPPORTED_MEDIA_TYPE),
            "Unsupported Media Type"
        );
        assert_eq!(
            message(StatusCode::INTERNAL_SERVER_ERROR),
            "Internal Server Error"
        );
    }
}
