//! URL and address refusals at construction.

use queuebox_domain::secret::Secret;
use queuebox_webhook::{
    HttpAuth, HttpDestination, HttpDestinationOptions, OAuth2Options, UrlProblem, WebhookError,
};

async fn build(options: HttpDestinationOptions) -> Result<HttpDestination, WebhookError> {
    HttpDestination::new(options).await
}

fn with_base(base: &str) -> HttpDestinationOptions {
    HttpDestinationOptions::new("d", base)
}

fn problem(result: Result<HttpDestination, WebhookError>) -> (String, UrlProblem) {
    match result {
        Err(WebhookError::InvalidUrl { field, problem, .. }) => (field.to_owned(), problem),
        Err(other) => panic!("unexpected error {other}"),
        Ok(d) => panic!("accepted {}", d.url()),
    }
}

#[tokio::test]
async fn refuses_bad_base_urls() {
    let cases = [
        ("ftp://files.example.com", UrlProblem::NotHttp),
        ("mailto:ops@example.com", UrlProblem::NotHttp),
        ("files.example.com/events", UrlProblem::NotHttp),
        ("http://", UrlProblem::NoHost),
        ("https:///events", UrlProblem::NoHost),
        ("https://user:pw@api.example.com", UrlProblem::UserInfo),
        ("https://user@api.example.com", UrlProblem::UserInfo),
        ("https://api.example.com/a/../admin", UrlProblem::DotSegment),
        ("https://api.example.com/./a", UrlProblem::DotSegment),
        ("https://api.example.com/%2e%2e/a", UrlProblem::DotSegment),
        ("https://api.example.com/?x=1", UrlProblem::QueryOrFragment),
    ];
    for (base, expected) in cases {
        assert_eq!(
            problem(build(with_base(base)).await),
            ("baseUrl".to_owned(), expected),
            "{base}"
        );
    }
}

#[tokio::test]
async fn an_error_never_prints_the_password_of_a_url() {
    let Err(error) = build(with_base("https://user:hunter2@api.example.com")).await else {
        panic!("accepted");
    };
    let text = error.to_string();
    assert!(!text.contains("hunter2"), "{text}");
    assert!(text.contains("`d`"), "{text}");
}

#[tokio::test]
async fn refuses_dot_segments_in_the_path() {
    for path in ["/a/../b", "./x", "/..", "/a/%2E/b"] {
        let mut options = with_base("https://api.example.com");
        options.path = path.to_owned();
        assert_eq!(
            problem(build(options).await),
            ("path".to_owned(), UrlProblem::DotSegment),
            "{path}"
        );
    }
}

#[tokio::test]
async fn refuses_a_bad_token_url() {
    let mut options = with_base("https://api.example.com");
    options.auth = HttpAuth::OAuth2(OAuth2Options {
        client_id: "c".to_owned(),
        client_secret: Secret::new("s"),
        token_url: "https://u:p@auth.example.com/token".to_owned(),
        scope: None,
        extra_params: Vec::new(),
    });
    assert_eq!(
        problem(build(options).await),
        ("auth.tokenUrl".to_owned(), UrlProblem::UserInfo)
    );
}

#[tokio::test]
async fn refuses_extra_params_that_replace_the_grant() {
    let mut options = with_base("https://api.example.com");
    options.auth = HttpAuth::OAuth2(OAuth2Options {
        client_id: "c".to_owned(),
        client_secret: Secret::new("s"),
        token_url: "https://auth.example.com/token".to_owned(),
        scope: None,
        extra_params: vec![("grant_type".to_owned(), "password".to_owned())],
    });
    assert!(matches!(
        build(options).await,
        Err(WebhookError::InvalidSetting { .. })
    ));
}

#[tokio::test]
async fn refuses_framing_static_headers_and_a_zero_timeout() {
    let mut options = with_base("https://api.example.com");
    options.headers = vec![("Host".to_owned(), "other".to_owned())];
    assert!(matches!(
        build(options).await,
        Err(WebhookError::InvalidSetting { .. })
    ));

    let mut options = with_base("https://api.example.com");
    options.headers = vec![("content-type".to_owned(), "text/plain".to_owned())];
    match build(options).await {
        Err(WebhookError::InvalidSetting { what, .. }) => {
            assert!(what.contains("headers.content-type"), "{what}");
            assert!(what.contains("application/json"), "{what}");
        }
        other => panic!("a static Content-Type was accepted: {:?}", other.is_ok()),
    }

    let mut options = with_base("https://api.example.com");
    options.timeout = std::time::Duration::ZERO;
    assert!(matches!(
        build(options).await,
        Err(WebhookError::InvalidSetting { .. })
    ));
}

fn blocking(base: &str) -> HttpDestinationOptions {
    let mut options = with_base(base);
    options.block_private_addresses = true;
    options
}

#[tokio::test]
async fn blocks_private_addresses_when_asked() {
    for (base, class) in [
        ("http://127.0.0.1:8080", "loopback"),
        ("http://localhost:8080", "loopback"),
        ("http://10.0.0.1", "private"),
        ("http://172.20.1.1", "private"),
        ("http://192.168.0.10", "private"),
        ("http://169.254.169.254/latest", "link-local"),
        ("http://[::1]:8080", "loopback"),
        ("http://[fd00::1]", "unique-local"),
        ("http://[fe80::1]", "link-local"),
        ("http://[::ffff:10.0.0.1]", "private"),
        ("http://0.0.0.0", "unspecified"),
    ] {
        match build(blocking(base)).await {
            Err(WebhookError::PrivateAddress {
                class: got, field, ..
            }) => {
                assert_eq!((got, field), (class, "baseUrl"), "{base}");
            }
            Err(other) => panic!("{base}: unexpected {other}"),
            Ok(_) => panic!("{base}: accepted"),
        }
    }
}

#[tokio::test]
async fn blocks_a_private_token_url() {
    let mut options = blocking("http://93.184.215.14");
    options.auth = HttpAuth::OAuth2(OAuth2Options {
        client_id: "c".to_owned(),
        client_secret: Secret::new("s"),
        token_url: "http://127.0.0.1:9/token".to_owned(),
        scope: None,
        extra_params: Vec::new(),
    });
    assert!(matches!(
        build(options).await,
        Err(WebhookError::PrivateAddress {
            field: "auth.tokenUrl",
            ..
        })
    ));
}

#[tokio::test]
async fn private_addresses_pass_when_blocking_is_off() {
    for base in [
        "http://127.0.0.1:8080",
        "http://10.0.0.1",
        "http://localhost",
    ] {
        assert!(build(with_base(base)).await.is_ok(), "{base}");
    }
}

#[tokio::test]
async fn a_public_address_and_an_unresolvable_host_pass() {
    assert!(
        build(blocking("https://93.184.215.14/events"))
            .await
            .is_ok()
    );
    // `.invalid` never resolves (RFC 6761); the check lets it through.
    assert!(
        build(blocking("https://queuebox-test.invalid/events"))
            .await
            .is_ok()
    );
}
