//! The URL rules of a destination, checked once at start.
//!
//! The checks read the text as written, before parsing, because a URL parser normalises exactly
//! what must be refused: it resolves `..` and `%2e%2e` segments and treats `\` as `/`, so
//! `https://api.example/a/../admin` would silently become `/admin`.

use crate::error::UrlProblem;
use reqwest::Url;

/// Checks an absolute `http`/`https` URL (`baseUrl`, `tokenUrl`) and parses it.
/// A base URL (`allow_query == false`) must not carry a query or fragment, because the
/// destination path is appended to it.
pub(crate) fn check_absolute(raw: &str, allow_query: bool) -> Result<Url, UrlProblem> {
    let (scheme, rest) = raw.split_once("://").ok_or(UrlProblem::NotHttp)?;
    if !scheme.eq_ignore_ascii_case("http") && !scheme.eq_ignore_ascii_case("https") {
        return Err(UrlProblem::NotHttp);
    }
    let authority_end = rest.find(['/', '\\', '?', '#']).unwrap_or(rest.len());
    let authority = &rest[..authority_end];
    if authority.contains('@') {
        return Err(UrlProblem::UserInfo);
    }
    if authority.is_empty() || authority.starts_with(':') {
        return Err(UrlProblem::NoHost);
    }
    let after_authority = &rest[authority_end..];
    let path_end = after_authority
        .find(['?', '#'])
        .unwrap_or(after_authority.len());
    check_segments(&after_authority[..path_end])?;
    if !allow_query && path_end < after_authority.len() {
        return Err(UrlProblem::QueryOrFragment);
    }
    let url = Url::parse(raw).map_err(|e| UrlProblem::Unparsable(e.to_string()))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(UrlProblem::NotHttp);
    }
    if url.host_str().is_none_or(str::is_empty) {
        return Err(UrlProblem::NoHost);
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(UrlProblem::UserInfo);
    }
    Ok(url)
}

/// Checks the destination `path` (it may carry a query after the path).
pub(crate) fn check_path(path: &str) -> Result<(), UrlProblem> {
    let end = path.find(['?', '#']).unwrap_or(path.len());
    check_segments(&path[..end])
}

/// `base` followed by `path`, exactly one slash between them.
pub(crate) fn join(base: &Url, path: &str) -> Result<Url, UrlProblem> {
    let base_text = base.as_str().trim_end_matches('/');
    let joined = if path.starts_with('/') {
        format!("{base_text}{path}")
    } else {
        format!("{base_text}/{path}")
    };
    Url::parse(&joined).map_err(|e| UrlProblem::Unparsable(e.to_string()))
}

/// Refuses a `.` or `..` segment, also percent-encoded, with `/` or `\` as separators.
fn check_segments(path: &str) -> Result<(), UrlProblem> {
    let dotted = path.split(['/', '\\']).any(|segment| {
        let decoded = segment.to_ascii_lowercase().replace("%2e", ".");
        decoded == "." || decoded == ".."
    });
    if dotted {
        Err(UrlProblem::DotSegment)
    } else {
        Ok(())
    }
}

/// The URL text with any user info replaced by `***`, for error messages.
pub(crate) fn mask_userinfo(raw: &str) -> String {
    let Some((scheme, rest)) = raw.split_once("://") else {
        return raw.to_owned();
    };
    let authority_end = rest.find(['/', '\\', '?', '#']).unwrap_or(rest.len());
    match rest[..authority_end].rfind('@') {
        Some(at) => format!("{scheme}://***{}", &rest[at..]),
        None => raw.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_plain_http_and_https() {
        for ok in [
            "http://example.com",
            "https://example.com/",
            "HTTPS://Example.com:8443/api/v1",
            "http://127.0.0.1:9/x",
            "http://[::1]:80/",
        ] {
            assert!(check_absolute(ok, false).is_ok(), "{ok}");
        }
        assert!(check_absolute("https://auth.example/token?tenant=a", true).is_ok());
    }

    #[test]
    fn refuses_bad_urls() {
        let cases = [
            ("ftp://example.com", UrlProblem::NotHttp),
            ("file:///etc/passwd", UrlProblem::NotHttp),
            ("example.com/path", UrlProblem::NotHttp),
            ("/relative", UrlProblem::NotHttp),
            ("http://", UrlProblem::NoHost),
            ("http:///path", UrlProblem::NoHost),
            ("http://:80/", UrlProblem::NoHost),
            ("https://user:pw@example.com/", UrlProblem::UserInfo),
            ("https://user@example.com/", UrlProblem::UserInfo),
            ("https://example.com/a/../admin", UrlProblem::DotSegment),
            ("https://example.com/./a", UrlProblem::DotSegment),
            ("https://example.com/a/%2E%2e/b", UrlProblem::DotSegment),
            ("https://example.com\\..\\b", UrlProblem::DotSegment),
            ("https://example.com/..", UrlProblem::DotSegment),
            ("https://example.com/a?x=1", UrlProblem::QueryOrFragment),
            ("https://example.com/a#f", UrlProblem::QueryOrFragment),
        ];
        for (raw, problem) in cases {
            assert_eq!(check_absolute(raw, false).err(), Some(problem), "{raw}");
        }
        assert!(matches!(
            check_absolute("http://exa mple.com/", false),
            Err(UrlProblem::Unparsable(_))
        ));
    }

    #[test]
    fn dots_inside_names_are_fine() {
        assert!(check_absolute("https://example.com/v1.2/a..b/.well-known", false).is_ok());
        assert!(check_path("/events.v2/..x").is_ok());
        assert!(check_path("/events?next=../x").is_ok());
        assert_eq!(check_path("/a/./b"), Err(UrlProblem::DotSegment));
        assert_eq!(check_path("../b"), Err(UrlProblem::DotSegment));
    }

    #[test]
    fn joins_with_one_slash() {
        let base = |raw| check_absolute(raw, false).unwrap_or_else(|e| panic!("{e}"));
        let join = |b: &Url, p| join(b, p).map(|u| u.to_string()).unwrap_or_default();
        assert_eq!(join(&base("https://h.example"), "/"), "https://h.example/");
        assert_eq!(
            join(&base("https://h.example/api"), "/events"),
            "https://h.example/api/events"
        );
        assert_eq!(
            join(&base("https://h.example/api/"), "events"),
            "https://h.example/api/events"
        );
        assert_eq!(
            join(&base("http://h:8080"), "/e?x=1"),
            "http://h:8080/e?x=1"
        );
    }

    #[test]
    fn masks_user_info() {
        assert_eq!(mask_userinfo("https://u:pw@h/x"), "https://***@h/x");
        assert_eq!(mask_userinfo("https://h/x@y"), "https://h/x@y");
        assert_eq!(mask_userinfo("nonsense"), "nonsense");
    }
}
