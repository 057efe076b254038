//! The operator console: `/console` on the management port, served only when
//! `admin.console.enabled` (and `admin.enabled`).
//!
//! Server-rendered HTML: every value from a row or a request passes [`html::esc`] before it is
//! written, and a strict Content-Security-Policy allows only the two embedded assets, so a stored
//! `<script>` stays text. Reading needs the admin credentials, as request headers or typed once into
//! the sign-in form (which sets an `HttpOnly`, `SameSite=Strict` session cookie); every POST also
//! needs the session's CSRF token and must come from the console's own origin.

mod html;
mod metrics_text;
mod session;
mod views;

use crate::request_parts::declared_length;
use html::{page, write_html};
use queuebox_domain::inbox::auth::CredentialCheck;
use queuebox_domain::router::Router as TopicRouter;
use queuebox_ports::console::ConsoleStore;
use queuebox_ports::health::Readiness;
use queuebox_ports::replay::Replay;
use salvo::http::header::{CONTENT_TYPE, HeaderValue, LOCATION, SET_COOKIE};
use salvo::http::{Method, StatusCode};
use salvo::prelude::*;
use session::Sessions;
use std::sync::Arc;

use crate::metrics::MetricsRender;

/// The embedded stylesheet.
const CSS: &str = include_str!("assets/console.css");
/// The embedded script: the overview's refresh and the select-all box.
const JS: &str = include_str!("assets/console.js");
/// The largest form body the console reads.
const MAX_FORM_BYTES: usize = 1024 * 1024;

/// What the console needs besides the admin routes' credentials.
pub struct ConsoleRoutes {
    /// The console's reads.
    pub store: Arc<dyn ConsoleStore>,
    /// The configured routes, to name the destination of a topic.
    pub router: Arc<TopicRouter>,
    /// The configured destination names, for the filter.
    pub destinations: Vec<String>,
}

/// The console with everything wired.
pub(crate) struct Console {
    pub(crate) routes: ConsoleRoutes,
    pub(crate) auth: Option<CredentialCheck>,
    pub(crate) replay: Arc<dyn Replay>,
    pub(crate) readiness: Arc<dyn Readiness>,
    pub(crate) metrics: MetricsRender,
    pub(crate) sessions: Sessions,
    pub(crate) failures: metrics_text::FailureHistory,
}

/// The router of `/console` and everything under it.
pub(crate) fn router(console: Console) -> Router {
    let handler = ConsoleHandler {
        console: Arc::new(console),
    };
    Router::with_path("console")
        .goal(handler.clone())
        .push(Router::with_path("{**rest}").goal(handler))
}

#[derive(Clone)]
struct ConsoleHandler {
    console: Arc<Console>,
}

/// Who is asking.
pub(crate) enum Caller {
    /// A signed-in browser, with its CSRF token.
    Session { csrf: String },
    /// A script with the admin credentials in its headers (or `admin.insecure`): may read.
    Headers,
}

#[salvo::async_trait]
impl Handler for ConsoleHandler {
    async fn handle(
        &self,
        req: &mut Request,
        _depot: &mut Depot,
        res: &mut Response,
        _ctrl: &mut FlowCtrl,
    ) {
        let console = &self.console;
        let path = req.uri().path().trim_end_matches('/').to_owned();
        let rest = path.strip_prefix("/console").unwrap_or("").to_owned();
        let method = req.method().clone();

        // The assets hold no data: served to anyone, so the sign-in page is styled too.
        match (method.clone(), rest.as_str()) {
            (Method::GET, "/assets/console.css") => {
                return asset(res, CSS, "text/css; charset=utf-8");
            }
            (Method::GET, "/assets/console.js") => {
                return asset(res, JS, "text/javascript; charset=utf-8");
            }
            _ => {}
        }

        if method == Method::POST {
            if let Some(reason) = session::cross_origin(req) {
                return refuse(res, StatusCode::FORBIDDEN, reason);
            }
            let body = match read_form(req).await {
                Ok(body) => body,
                Err(reason) => return refuse(res, StatusCode::PAYLOAD_TOO_LARGE, &reason),
            };
            let form = html::parse_pairs(&body);
            if rest == "/login" {
                return login(console, &form, res);
            }
            let Some(session) = console.sessions.find(req) else {
                return sign_in_page(res, StatusCode::UNAUTHORIZED, None);
            };
            let token = html::first(&form, "csrf").unwrap_or_default();
            if !session::same_token(&token, &session.csrf) {
                return refuse(
                    res,
                    StatusCode::FORBIDDEN,
                    "the form carries no valid CSRF token; reload the page and try again",
                );
            }
            return match rest.as_str() {
                "/logout" => {
                    console.sessions.close(req);
                    res.headers_mut().insert(
                        SET_COOKIE,
                        HeaderValue::from_str(&session::clear_cookie())
                            .unwrap_or_else(|_| HeaderValue::from_static("")),
                    );
                    redirect(res, "/console")
                }
                "/dead/outbox/replay" => {
                    views::replay(console, views::Kind::Outbox, &form, &session.csrf, res).await;
                }
                "/dead/inbox/replay" => {
                    views::replay(console, views::Kind::Inbox, &form, &session.csrf, res).await;
                }
                _ => refuse(res, StatusCode::NOT_FOUND, "no such console action"),
            };
        }
        if method != Method::GET && method != Method::HEAD {
            return refuse(
                res,
                StatusCode::METHOD_NOT_ALLOWED,
                "the console answers GET and POST",
            );
        }

        let caller = match console.sessions.find(req) {
            Some(session) => Caller::Session { csrf: session.csrf },
            None => match &console.auth {
                None => {
                    // admin.insecure: no credentials to check, but a session still carries the
                    // CSRF token of the forms.
                    let (id, csrf) = console.sessions.open();
                    set_session_cookie(res, &id);
                    Caller::Session { csrf }
                }
                Some(check) if session::headers_pass(check, req) => Caller::Headers,
                Some(_) => return sign_in_page(res, StatusCode::UNAUTHORIZED, None),
            },
        };
        let query = html::parse_pairs(req.uri().query().unwrap_or(""));
        views::get(console, &rest, &query, &caller, res).await;
    }
}

async fn read_form(req: &mut Request) -> Result<String, String> {
    let too_large = || format!("the form is larger than {MAX_FORM_BYTES} bytes");
    if declared_length(req).is_some_and(|length| length > MAX_FORM_BYTES as u64) {
        return Err(too_large());
    }
    match req.payload_with_max_size(MAX_FORM_BYTES).await {
        Ok(bytes) if bytes.len() <= MAX_FORM_BYTES => {
            Ok(String::from_utf8_lossy(bytes).into_owned())
        }
        _ => Err(too_large()),
    }
}

fn asset(res: &mut Response, body: &'static str, content_type: &'static str) {
    html::security_headers(res);
    res.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    let _ = res.write_body(body);
}

fn set_session_cookie(res: &mut Response, id: &str) {
    if let Ok(value) = HeaderValue::from_str(&session::set_cookie(id)) {
        res.headers_mut().insert(SET_COOKIE, value);
    }
}

pub(crate) fn redirect(res: &mut Response, to: &str) {
    res.status_code(StatusCode::SEE_OTHER);
    html::security_headers(res);
    if let Ok(value) = HeaderValue::from_str(to) {
        res.headers_mut().insert(LOCATION, value);
    }
}

/// An error page with `status` and `reason`.
pub(crate) fn refuse(res: &mut Response, status: StatusCode, reason: &str) {
    let content = format!(
        "<p class=\"error\">{}</p><p><a href=\"/console\">Back to the overview</a></p>",
        html::esc(reason)
    );
    write_html(
        res,
        status,
        page(
            status.canonical_reason().unwrap_or("Error"),
            &content,
            false,
        ),
    );
}

fn sign_in_page(res: &mut Response, status: StatusCode, problem: Option<&str>) {
    let problem = problem
        .map(|p| format!("<p class=\"error\">{}</p>", html::esc(p)))
        .unwrap_or_default();
    let content = format!(
        "<p>The console needs the admin credential of <code>admin.auth</code>: the bearer token, \
         the API key, or the HMAC secret.</p>{problem}\
         <form method=\"post\" action=\"/console/login\" class=\"login\">\
         <label>Admin credential <input type=\"password\" name=\"credential\" autocomplete=\"off\" \
         required autofocus></label> <button type=\"submit\">Sign in</button></form>"
    );
    write_html(res, status, page("Sign in", &content, false));
}

fn login(console: &Console, form: &[(String, String)], res: &mut Response) {
    let typed = form
        .iter()
        .find(|(name, _)| name == "credential")
        .map(|(_, value)| value.as_str())
        .unwrap_or("");
    let passes = match &console.auth {
        None => true,
        Some(check) => !typed.is_empty() && session::typed_credential_passes(check, typed),
    };
    if !passes {
        tracing::warn!("console sign-in refused");
        return sign_in_page(
            res,
            StatusCode::UNAUTHORIZED,
            Some("That credential is not the admin credential."),
        );
    }
    let (id, _csrf) = console.sessions.open();
    set_session_cookie(res, &id);
    redirect(res, "/console");
}
