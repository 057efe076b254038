//! Who may use the console: the admin credentials (sent as headers, or typed once into the sign-in
//! form, which then sets a session cookie), a CSRF token per session, and the same-origin rule for
//! every POST.

use queuebox_domain::inbox::auth::{AUTHORIZATION, CredentialCheck, HmacCheck};
use queuebox_domain::secret::Secret;
use salvo::prelude::Request;
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use subtle::ConstantTimeEq;
use uuid::Uuid;

/// The session cookie.
pub(crate) const COOKIE: &str = "qb_console";
/// How long a session lasts after its sign-in.
pub(crate) const SESSION_TTL: Duration = Duration::from_secs(8 * 3600);
/// At most this many sessions are kept; the oldest goes first.
const MAX_SESSIONS: usize = 1024;

/// One signed-in browser.
#[derive(Clone)]
pub(crate) struct Session {
    pub(crate) csrf: String,
    expires: Instant,
}

/// The sessions of this process (a restart signs everyone out).
#[derive(Default)]
pub(crate) struct Sessions {
    by_id: Mutex<HashMap<String, Session>>,
}

/// A random token of 244 bits, from the operating system's generator (two v4 UUIDs).
fn token() -> String {
    format!("{}{}", Uuid::new_v4().simple(), Uuid::new_v4().simple())
}

impl Sessions {
    /// A new session; returns (session id, its CSRF token).
    pub(crate) fn open(&self) -> (String, String) {
        let id = token();
        let csrf = token();
        let now = Instant::now();
        if let Ok(mut map) = self.by_id.lock() {
            map.retain(|_, session| session.expires > now);
            if map.len() >= MAX_SESSIONS
                && let Some(oldest) = map
                    .iter()
                    .min_by_key(|(_, session)| session.expires)
                    .map(|(id, _)| id.clone())
            {
                map.remove(&oldest);
            }
            map.insert(
                id.clone(),
                Session {
                    csrf: csrf.clone(),
                    expires: now + SESSION_TTL,
                },
            );
        }
        (id, csrf)
    }

    /// The live session of the request's cookie.
    pub(crate) fn find(&self, req: &Request) -> Option<Session> {
        let id = cookie(req, COOKIE)?;
        let map = self.by_id.lock().ok()?;
        map.get(&id)
            .filter(|session| session.expires > Instant::now())
            .cloned()
    }

    /// Ends the session of the request's cookie.
    pub(crate) fn close(&self, req: &Request) {
        if let Some(id) = cookie(req, COOKIE)
            && let Ok(mut map) = self.by_id.lock()
        {
            map.remove(&id);
        }
    }
}

/// The value of cookie `name` of the request.
fn cookie(req: &Request, name: &str) -> Option<String> {
    req.headers()
        .get_all("cookie")
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|line| line.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(n, _)| *n == name)
        .map(|(_, v)| v.to_owned())
}

/// The `Set-Cookie` value of a new session: not readable by script, sent only to the console's
/// own pages and never along with a request started by another site.
pub(crate) fn set_cookie(id: &str) -> String {
    format!(
        "{COOKIE}={id}; Path=/console; HttpOnly; SameSite=Strict; Max-Age={}",
        SESSION_TTL.as_secs()
    )
}

/// The `Set-Cookie` value that removes the session cookie.
pub(crate) fn clear_cookie() -> String {
    format!("{COOKIE}=; Path=/console; HttpOnly; SameSite=Strict; Max-Age=0")
}

/// True when the two tokens are equal, compared in constant time.
pub(crate) fn same_token(a: &str, b: &str) -> bool {
    a.len() == b.len() && bool::from(a.as_bytes().ct_eq(b.as_bytes()))
}

/// Why a POST is refused before it is read: it did not come from a console page.
pub(crate) fn cross_origin(req: &Request) -> Option<&'static str> {
    let header = |name: &str| {
        req.headers()
            .get(name)
            .and_then(|value| value.to_str().ok())
            .map(str::to_owned)
    };
    if let Some(site) = header("sec-fetch-site")
        && site != "same-origin"
    {
        return Some("the request came from another site (Sec-Fetch-Site)");
    }
    let Some(host) = header("host") else {
        return Some("the request has no Host header");
    };
    let same =
        |origin: &str| origin == format!("http://{host}") || origin == format!("https://{host}");
    match (header("origin"), header("referer")) {
        (Some(origin), _) if same(&origin) => None,
        (Some(_), _) => Some("the Origin header names another site"),
        (None, Some(referer)) => {
            let origin: String = referer.splitn(4, '/').take(3).collect::<Vec<_>>().join("/");
            if same(&origin) {
                None
            } else {
                Some("the Referer header names another site")
            }
        }
        (None, None) => Some("the request carries neither an Origin nor a Referer header"),
    }
}

/// The request's headers as (name, value) pairs, for the credential check.
pub(crate) fn header_pairs(req: &Request) -> Vec<(String, String)> {
    req.headers()
        .iter()
        .filter_map(|(name, value)| {
            value
                .to_str()
                .ok()
                .map(|v| (name.as_str().to_owned(), v.to_owned()))
        })
        .collect()
}

fn now_unix_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|elapsed| i64::try_from(elapsed.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

/// True when the request's own headers pass `check` (a script calling with the admin credentials;
/// an HMAC signature then covers the empty body).
pub(crate) fn headers_pass(check: &CredentialCheck, req: &Request) -> bool {
    check.verify(&header_pairs(req), b"", now_unix_ms()).is_ok()
}

/// True when `typed`, entered in the sign-in form, is the credential `check` expects: the
/// token, the API key, or the HMAC secret (proved by signing a fixed text with it).
pub(crate) fn typed_credential_passes(check: &CredentialCheck, typed: &str) -> bool {
    let now = now_unix_ms();
    let headers = match check {
        CredentialCheck::Bearer { .. } => {
            vec![(AUTHORIZATION.to_owned(), format!("Bearer {typed}"))]
        }
        CredentialCheck::ApiKey { header, .. } => vec![(header.clone(), typed.to_owned())],
        CredentialCheck::Hmac(hmac) => {
            let body = b"queuebox console sign-in";
            let signer = HmacCheck {
                secret: Secret::new(typed.to_owned()),
                ..hmac.clone()
            };
            let timestamp = now.to_string();
            let signed = hmac.timestamp.as_ref().is_some_and(|rule| rule.signed);
            let signature = signer.signature(signed.then_some(timestamp.as_str()), body);
            let mut headers = vec![(
                hmac.header.clone(),
                format!("{}{signature}", hmac.signature_prefix),
            )];
            if let Some(rule) = &hmac.timestamp {
                headers.push((rule.header.clone(), timestamp));
            }
            return check.verify(&headers, body, now).is_ok();
        }
        // Other kinds (the webhook signature schemes of sources) are not admin credentials: such
        // a caller signs its requests and sends them as headers.
        #[allow(unreachable_patterns)]
        _ => return false,
    };
    check.verify(&headers, b"", now).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_typed_token_or_key_is_checked_like_a_header() {
        let bearer = CredentialCheck::Bearer {
            token: Secret::new("t0ken".to_owned()),
        };
        assert!(typed_credential_passes(&bearer, "t0ken"));
        assert!(!typed_credential_passes(&bearer, "t0ke"));
        let key = CredentialCheck::ApiKey {
            header: "X-Admin-Key".to_owned(),
            key: Secret::new("k".to_owned()),
        };
        assert!(typed_credential_passes(&key, "k"));
        assert!(!typed_credential_passes(&key, ""));
    }

    #[test]
    fn sessions_carry_their_own_csrf_token() {
        let sessions = Sessions::default();
        let (a, csrf_a) = sessions.open();
        let (b, csrf_b) = sessions.open();
        assert_ne!(a, b);
        assert_ne!(csrf_a, csrf_b);
        assert_eq!(csrf_a.len(), 64);
        assert!(same_token(&csrf_a, &csrf_a.clone()));
        assert!(!same_token(&csrf_a, &csrf_b));
    }
}
