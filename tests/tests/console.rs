//! The operator console in a real browser: Debian's headless Chromium driven through chromedriver
//! (WebDriver), against the real binary and PostgreSQL.
//!
//! Rows go dead at a failing receiver; the console lists them with the right counts, a filter
//! narrows them, a replay of a selection makes them `sent` once the receiver answers 200, and the
//! overview shows the new state without a reload. Hostile content (in topic, header, payload,
//! `last_error`, and a 5 MB body) renders as text and runs no script (the browser's console log is
//! read), a POST without the CSRF token or from another origin is refused, and a request without
//! the admin credentials gets 401. A screenshot of each view is written to
//! `$QB_CONSOLE_SCREENSHOTS` (default: `<tmp>/queuebox-console-screenshots`).

use queuebox_tests::database::TestDatabase;
use queuebox_tests::process::Launch;
use queuebox_tests::receiver::{Policy, Receiver};
use queuebox_tests::webdriver::Browser;
use queuebox_tests::{free_port, wait_until};
use serde_json::Value;
use sqlx::PgPool;
use std::path::PathBuf;
use std::time::Duration;
use uuid::Uuid;

const TOKEN: &str = "c0nsole-t0ken";
const START: Duration = Duration::from_secs(30);
const WAIT: Duration = Duration::from_secs(30);
const HOSTILE_TOPIC: &str = "<script>console.error('XSS-RAN-topic')</script>";
const SECRET_HEADER_VALUE: &str = "Bearer sekrit-header-value";

fn screenshots() -> PathBuf {
    let dir = std::env::var_os("QB_CONSOLE_SCREENSHOTS")
        .map(PathBuf::from)
        .unwrap_or_else(|| std::env::temp_dir().join("queuebox-console-screenshots"));
    std::fs::create_dir_all(&dir).expect("screenshot directory");
    dir
}

async fn insert(sql: &PgPool, topic: &str, key: &str) -> Uuid {
    sqlx::query_scalar(
        "INSERT INTO outbox (topic, key, payload, max_attempts) VALUES ($1, $2, '{\"n\":1}'::jsonb, 1) RETURNING id",
    )
    .bind(topic)
    .bind(key)
    .fetch_one(sql)
    .await
    .expect("insert an outbox row")
}

async fn states(sql: &PgPool, ids: &[Uuid]) -> Vec<String> {
    sqlx::query_scalar("SELECT state FROM outbox WHERE id = ANY($1) ORDER BY id")
        .bind(ids)
        .fetch_all(sql)
        .await
        .expect("read states")
}

async fn dead_count(sql: &PgPool) -> i64 {
    sqlx::query_scalar("SELECT count(*) FROM outbox WHERE state = 'dead'")
        .fetch_one(sql)
        .await
        .expect("count")
}

/// The cells of the overview's outbox-by-topic table: topic -> [destination, pending,
/// processing, dead, oldest].
async fn topic_table(browser: &Browser) -> Vec<Vec<String>> {
    let rows = browser
        .script(
            "return Array.from(document.querySelectorAll('#outbox-topics tbody tr'))\
             .map(r => Array.from(r.cells).map(c => c.textContent));",
        )
        .await;
    serde_json::from_value(rows).unwrap_or_default()
}

fn dead_of(table: &[Vec<String>], topic: &str) -> Option<String> {
    table
        .iter()
        .find(|row| row.first().map(String::as_str) == Some(topic))
        .and_then(|row| row.get(4).cloned())
}

/// A test's configuration: data and management `ports`, the console behind the token, the
/// destinations `billing` (topics matching `billing_topics`) and `audit` (the rest) at `target`,
/// and the YAML blocks of `extra`.
fn config(
    db: &TestDatabase,
    (port, management): (u16, u16),
    target: &str,
    billing_topics: &str,
    extra: &str,
) -> String {
    format!(
        "server:\n  httpPort: {port}\n  managementPort: {management}\n\
         database:\n  url: {url}\n  username: {user}\n  password: {password}\n  startupTimeoutMs: 10000\n\
         {extra}\
         admin:\n  enabled: true\n  auth:\n    token: {TOKEN}\n  console:\n    enabled: true\n\
         destinations:\n  billing:\n    type: http\n    baseUrl: {target}\n  audit:\n    type: http\n    baseUrl: {target}\n\
         routes:\n  - topicPattern: \"{billing_topics}\"\n    destination: billing\n  - topicPattern: \"**\"\n    destination: audit\n",
        url = db.jdbc_url(),
        user = db.user,
        password = db.password,
    )
}

/// Signs in with the token as the sign-in form does; the session cookie and the CSRF token the
/// dead-outbox page carries.
async fn sign_in(http: &reqwest::Client, base: &str) -> (String, String) {
    let login = http
        .post(format!("{base}/console/login"))
        .header("origin", base)
        .header("content-type", "application/x-www-form-urlencoded")
        .body(format!("credential={TOKEN}"))
        .send()
        .await
        .expect("login");
    assert_eq!(login.status().as_u16(), 303);
    let cookie = login
        .headers()
        .get("set-cookie")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .expect("a session cookie")
        .to_owned();
    let page = http
        .get(format!("{base}/console/dead/outbox"))
        .header("cookie", &cookie)
        .send()
        .await
        .expect("GET")
        .text()
        .await
        .expect("page");
    let csrf = page
        .split("name=\"csrf\" value=\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .expect("a CSRF token in the form")
        .to_owned();
    (cookie, csrf)
}

#[tokio::test(flavor = "multi_thread")]
async fn the_console_in_headless_chromium() {
    let shots = screenshots();
    let db = TestDatabase::create().await;
    let receiver = Receiver::start(Policy::status(500)).await;
    let port = free_port();
    let management = free_port();
    let yaml = config(
        &db,
        (port, management),
        &receiver.url(),
        "order.*",
        "outbox:\n  pollIntervalMs: 100\n  retryBaseDelayMs: 0\n",
    );
    let mut qb = Launch::with_config(&yaml).spawn(&[]);
    qb.wait_live(management, START).await;
    let sql = sqlx::postgres::PgPoolOptions::new()
        .max_connections(2)
        .connect(&db.url)
        .await
        .expect("connect to the test database");
    let _ = queuebox_tests::http();
    // Redirects are read, not followed: the sign-in answers 303 with the session cookie.
    let http = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .expect("HTTP client");
    let base = format!("http://127.0.0.1:{management}");

    // Ten rows go dead at the failing receiver (one attempt each).
    let mut orders = Vec::new();
    for i in 0..6 {
        orders.push(insert(&sql, "order.created", &format!("order-{i}")).await);
    }
    for i in 0..4 {
        insert(&sql, "user.updated", &format!("user-{i}")).await;
    }
    wait_until("ten dead rows", WAIT, || async {
        (dead_count(&sql).await == 10).then_some(())
    })
    .await;

    // Hostile rows, dead already: markup in topic, header, payload and last_error, a secret
    // header, and a 5 MB payload.
    let hostile: Uuid = sqlx::query_scalar(
        "INSERT INTO outbox (topic, key, payload, headers, state, last_error) VALUES ($1, 'evil', \
           jsonb_build_object('html', '<script>console.error(''XSS-RAN-payload'')</script>', \
                              'attr', '\"><img src=x onerror=\"console.error(''XSS-RAN-img'')\">'), \
           jsonb_build_object('x-evil', '\"><img src=x onerror=\"console.error(''XSS-RAN-header'')\">', \
                              'authorization', $2::text), \
           'dead', '<script>console.error(''XSS-RAN-error'')</script>') RETURNING id",
    )
    .bind(HOSTILE_TOPIC)
    .bind(SECRET_HEADER_VALUE)
    .fetch_one(&sql)
    .await
    .expect("insert the hostile row");
    let large: Uuid = sqlx::query_scalar(
        "INSERT INTO outbox (topic, key, payload, state, last_error) VALUES ('large.body', 'big', \
           jsonb_build_object('a', '<script>console.error(''XSS-RAN-large'')</script>', \
                              'body', repeat('A', 5 * 1024 * 1024)), 'dead', 'HTTP 413') RETURNING id",
    )
    .fetch_one(&sql)
    .await
    .expect("insert the large row");
    let inbox_dead: Uuid = sqlx::query_scalar(
        "INSERT INTO inbox (source, idempotency_key, payload, state, correlation_id, last_error) \
         VALUES ('stripe', 'evt_console_1', '{\"type\":\"charge\"}'::jsonb, 'dead', 'corr-console-1', \
                 '<img src=x onerror=\"console.error(''XSS-RAN-inbox'')\">') RETURNING id",
    )
    .fetch_one(&sql)
    .await
    .expect("insert a dead inbox row");

    // Without credentials: 401, on every page; with the header credentials: 200. Not on the data port.
    let answer = http
        .get(format!("{base}/console"))
        .send()
        .await
        .expect("GET");
    assert_eq!(answer.status().as_u16(), 401);
    let csp = answer
        .headers()
        .get("content-security-policy")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    assert!(
        csp.contains("script-src 'self'") && !csp.contains("unsafe-inline"),
        "{csp}"
    );
    let answer = http
        .get(format!("{base}/console/dead/outbox"))
        .send()
        .await
        .expect("GET");
    assert_eq!(answer.status().as_u16(), 401);
    let answer = http
        .get(format!("{base}/console/dead/outbox"))
        .header("authorization", "Bearer wrong")
        .send()
        .await
        .expect("GET");
    assert_eq!(answer.status().as_u16(), 401);
    let answer = http
        .get(format!("{base}/console"))
        .header("authorization", format!("Bearer {TOKEN}"))
        .send()
        .await
        .expect("GET");
    assert_eq!(answer.status().as_u16(), 200);
    let answer = http
        .get(format!("http://127.0.0.1:{port}/console"))
        .send()
        .await
        .expect("GET");
    assert_eq!(
        answer.status().as_u16(),
        404,
        "the console is on the management port only"
    );
    // The download of the 5 MB payload, whole.
    let answer = http
        .get(format!("{base}/console/outbox/{large}/payload"))
        .header("authorization", format!("Bearer {TOKEN}"))
        .send()
        .await
        .expect("GET");
    assert_eq!(answer.status().as_u16(), 200);
    assert!(answer.bytes().await.expect("body").len() > 5 * 1024 * 1024);

    // CSRF: sign in with a plain client, then POST a replay without the token and from another
    // origin; both refused and nothing moves. With both, the confirmation page comes back.
    let (cookie, csrf) = sign_in(&http, &base).await;
    let post = |origin: &str, body: String| {
        http.post(format!("{base}/console/dead/outbox/replay"))
            .header("cookie", &cookie)
            .header("origin", origin)
            .header("content-type", "application/x-www-form-urlencoded")
            .body(body)
            .send()
    };
    let answer = post(&base, "scope=matching&confirm=yes".to_owned())
        .await
        .expect("POST");
    assert_eq!(answer.status().as_u16(), 403, "no CSRF token");
    let answer = post(&base, "csrf=forged&scope=matching&confirm=yes".to_owned())
        .await
        .expect("POST");
    assert_eq!(answer.status().as_u16(), 403, "a wrong CSRF token");
    let answer = post(
        "http://evil.example",
        format!("csrf={csrf}&scope=matching&confirm=yes"),
    )
    .await
    .expect("POST");
    assert_eq!(answer.status().as_u16(), 403, "another origin");
    assert_eq!(dead_count(&sql).await, 12, "nothing moved");
    let answer = post(
        &base,
        format!("csrf={csrf}&scope=matching&topic=order.created"),
    )
    .await
    .expect("POST");
    assert_eq!(answer.status().as_u16(), 200);
    assert!(
        answer
            .text()
            .await
            .expect("page")
            .contains("id=\"confirm-count\">6<")
    );

    // The browser: sign in.
    let browser = Browser::start().await;
    browser.go(&format!("{base}/console")).await;
    browser.screenshot(&shots.join("sign-in.png")).await;
    let field = browser.find("input[name=credential]").await;
    browser.type_into(&field, "not-the-token").await;
    browser
        .click_to_load(&browser.find("form.login button").await)
        .await;
    assert!(browser.source().await.contains("not the admin credential"));
    let field = browser.find("input[name=credential]").await;
    browser.type_into(&field, TOKEN).await;
    browser
        .click_to_load(&browser.find("form.login button").await)
        .await;

    // Overview: the counts per topic and per destination.
    let table = topic_table(&browser).await;
    assert_eq!(
        dead_of(&table, "order.created").as_deref(),
        Some("6"),
        "{table:?}"
    );
    assert_eq!(
        dead_of(&table, "user.updated").as_deref(),
        Some("4"),
        "{table:?}"
    );
    assert_eq!(
        dead_of(&table, HOSTILE_TOPIC).as_deref(),
        Some("1"),
        "{table:?}"
    );
    let destinations = browser.text_of("#outbox-destinations").await;
    assert!(destinations.contains("billing 0 0 6"), "{destinations}");
    assert!(destinations.contains("audit 0 0 6"), "{destinations}");
    let failures = browser.text_of("#failures").await;
    assert!(
        failures.contains("billing"),
        "publish failures by kind: {failures}"
    );
    assert!(browser.text_of("#readiness").await.contains("database"));
    browser.screenshot(&shots.join("overview.png")).await;

    // Dead list: everything, then the topic filter.
    browser.go(&format!("{base}/console/dead/outbox")).await;
    assert_eq!(browser.all("tr.row").await.len(), 12);
    let topic = browser.find("#filter input[name=topic]").await;
    browser.type_into(&topic, "order.created").await;
    browser
        .click_to_load(&browser.find("#filter button[type=submit]").await)
        .await;
    assert!(browser.url().await.contains("topic=order.created"));
    assert_eq!(browser.all("tr.row").await.len(), 6);
    let key = browser.find("#filter input[name=key]").await;
    browser.type_into(&key, "order-2").await;
    browser
        .click_to_load(&browser.find("#filter button[type=submit]").await)
        .await;
    assert_eq!(browser.all("tr.row").await.len(), 1);
    browser
        .go(&format!("{base}/console/dead/outbox?destination=billing"))
        .await;
    assert_eq!(browser.all("tr.row").await.len(), 6);
    browser.screenshot(&shots.join("dead-outbox.png")).await;

    // Replay three of them once the receiver is back.
    receiver.set_policy(Policy::status(200));
    let boxes = browser.all("tr.row input[name=id]").await;
    let mut chosen = Vec::new();
    for element in boxes.iter().take(3) {
        browser.click(element).await;
    }
    let ids = browser
        .script("return Array.from(document.querySelectorAll('tr.row input[name=id]:checked')).map(e => e.value);")
        .await;
    for id in ids.as_array().expect("ids") {
        chosen.push(Uuid::parse_str(id.as_str().expect("id")).expect("uuid"));
    }
    chosen.sort();
    assert_eq!(chosen.len(), 3);
    browser
        .click_to_load(&browser.find("#replay-selected").await)
        .await;
    assert_eq!(browser.text_of("#confirm-count").await, "3");
    browser.screenshot(&shots.join("confirm.png")).await;
    browser.click_to_load(&browser.find("#confirm").await).await;
    assert!(browser.text_of("#moved").await.contains("Moved 3"));
    wait_until("the three replayed rows sent", WAIT, || async {
        (states(&sql, &chosen).await == ["sent", "sent", "sent"]).then_some(())
    })
    .await;
    let others: Vec<Uuid> = orders
        .iter()
        .filter(|id| !chosen.contains(id))
        .copied()
        .collect();
    assert_eq!(states(&sql, &others).await, ["dead", "dead", "dead"]);

    // The overview shows the new state, and later changes arrive without a reload.
    browser.go(&format!("{base}/console")).await;
    let table = topic_table(&browser).await;
    assert_eq!(
        dead_of(&table, "order.created").as_deref(),
        Some("3"),
        "{table:?}"
    );
    browser.script("window.qbMarker = 42; return null;").await;
    receiver.set_policy(Policy::status(500));
    insert(&sql, "late.topic", "late").await;
    wait_until(
        "the overview to refresh with late.topic dead",
        WAIT,
        || async {
            let table = topic_table(&browser).await;
            (dead_of(&table, "late.topic").as_deref() == Some("1")).then_some(())
        },
    )
    .await;
    assert_eq!(
        browser.script("return window.qbMarker;").await,
        Value::from(42),
        "no reload"
    );
    assert_ne!(browser.text_of("#refreshed").await, "page load");

    // Hostile content is text: the markup is shown, no element was made of it, no secret shown.
    browser.go(&format!("{base}/console/dead/outbox")).await;
    let list = browser.text_of("#dead").await;
    assert!(list.contains(HOSTILE_TOPIC), "{list}");
    assert!(
        list.contains("<script>console.error('XSS-RAN-error')</script>"),
        "{list}"
    );
    browser
        .go(&format!("{base}/console/outbox/{hostile}"))
        .await;
    let payload = browser.text_of("#payload").await;
    assert!(
        payload.contains("<script>console.error('XSS-RAN-payload')</script>"),
        "{payload}"
    );
    assert!(payload.contains("\"><img src=x onerror="), "{payload}");
    let headers = browser.text_of("#headers").await;
    assert!(
        headers.contains("\"><img src=x onerror=\"console.error('XSS-RAN-header')\">"),
        "{headers}"
    );
    assert!(
        !browser.source().await.contains("sekrit-header-value"),
        "a secret header is masked"
    );
    assert!(browser.text_of("#fields").await.contains(HOSTILE_TOPIC));
    let made = browser
        .script("return document.querySelectorAll('main img, main script, main iframe').length;")
        .await;
    assert_eq!(made, Value::from(0));
    browser.screenshot(&shots.join("detail-hostile.png")).await;
    browser.go(&format!("{base}/console/outbox/{large}")).await;
    assert!(
        browser
            .text_of("#truncated")
            .await
            .contains("first 65536 characters")
    );
    assert!(browser.text_of("#payload").await.contains("XSS-RAN-large"));
    assert!(
        browser.source().await.len() < 200_000,
        "the 5 MB payload is cut"
    );
    browser.find("#download").await;
    browser.screenshot(&shots.join("detail-large.png")).await;

    // Dead inbox rows: listed, replayed back to pending.
    browser.go(&format!("{base}/console/dead/inbox")).await;
    assert_eq!(browser.all("tr.row").await.len(), 1);
    browser.screenshot(&shots.join("dead-inbox.png")).await;
    browser
        .click(&browser.find("tr.row input[name=id]").await)
        .await;
    browser
        .click_to_load(&browser.find("#replay-selected").await)
        .await;
    assert_eq!(browser.text_of("#confirm-count").await, "1");
    browser.click_to_load(&browser.find("#confirm").await).await;
    assert!(browser.text_of("#moved").await.contains("Moved 1"));
    // Back to pending, so the relay took it again: no relay route exists for `stripe`, so it may be
    // dead once more, but with the relay's reason instead of the one it had.
    let (state, error): (String, Option<String>) =
        sqlx::query_as("SELECT state, last_error FROM inbox WHERE id = $1")
            .bind(inbox_dead)
            .fetch_one(&sql)
            .await
            .expect("inbox state");
    assert!(
        state != "dead" || !error.as_deref().unwrap_or("").contains("XSS-RAN-inbox"),
        "{state} {error:?}"
    );

    // Lookup by inbox idempotency key, correlation id and id.
    browser
        .go(&format!("{base}/console/lookup?by=key&q=evt_console_1"))
        .await;
    assert!(
        browser
            .text_of("table.found")
            .await
            .contains(&inbox_dead.to_string())
    );
    browser
        .go(&format!(
            "{base}/console/lookup?by=correlation&q=corr-console-1"
        ))
        .await;
    assert!(browser.text_of("table.found").await.contains("stripe"));
    browser
        .go(&format!("{base}/console/lookup?by=id&q={hostile}"))
        .await;
    assert!(
        browser
            .text_of("#payload")
            .await
            .contains("XSS-RAN-payload")
    );
    browser.screenshot(&shots.join("lookup.png")).await;

    // No hostile script ran and the policy refused nothing of the console's own.
    let log = browser.console_log().await;
    let bad: Vec<_> = log
        .iter()
        .filter(|(_, message)| {
            message.contains("XSS-RAN") || message.contains("Content Security Policy")
        })
        .collect();
    assert!(
        bad.is_empty(),
        "the browser console shows {bad:?} (all: {log:?})"
    );
    println!("screenshots in {}; browser log: {log:?}", shots.display());

    browser.quit().await;
    sql.close().await;
    qb.terminate();
    let _ = qb.wait_exit(Duration::from_secs(10)).await;
    db.drop_database().await;
}

/// One view of the timing test: a name and the path (with its query) below the management port.
struct View {
    name: &'static str,
    path: String,
}

/// The median and the slowest of `times`.
fn p50_max(times: &mut [Duration]) -> (Duration, Duration) {
    times.sort();
    (times[times.len() / 2], times[times.len() - 1])
}

/// Every view at 1M outbox and 1M inbox rows, timed through HTTP (11 requests each after one to
/// warm up). Slow to seed (one to two minutes) and only meaningful with an optimised binary on a
/// quiet machine, so run by hand:
///
/// ```text
/// cargo build --release -p queuebox
/// QB_TEST_QUEUEBOX=$CARGO_TARGET_DIR/release/queuebox \
///   cargo test -p queuebox-tests --test console -- --ignored --nocapture
/// ```
///
/// The pending rows are due in a day and the processing rows hold a lease of a day, so the running
/// dispatcher leaves the state mix as seeded; the inbox relay is off.
#[tokio::test(flavor = "multi_thread")]
#[ignore = "fills a million rows in each table (one to two minutes); run by hand with a release binary"]
async fn every_view_at_one_million_rows() {
    let db = TestDatabase::create().await;
    let receiver = Receiver::start(Policy::status(200)).await;
    let port = free_port();
    let management = free_port();
    let yaml = config(
        &db,
        (port, management),
        &receiver.url(),
        "topic.1*",
        "inbox:\n  relay:\n    enabled: false\n",
    );
    let mut qb = Launch::with_config(&yaml).spawn(&[]);
    qb.wait_live(management, START).await;
    // States by g % 997, topics, keys and sources by other moduli: every topic holds rows of
    // every state, spread over the whole table. About 940k sent, 25k pending, 5k processing, 30k
    // dead outbox rows (50 topics, 200-byte payloads); 980k processed, 8k pending (pull), 2k
    // processing, 10k dead inbox rows (5 sources). Row g was created g seconds ago.
    db.execute(
        "INSERT INTO outbox (topic, key, payload, headers, state, last_error, created_at, updated_at, \
                             scheduled_at, claimed_at, lease_expires_at) \
         SELECT 'topic.' || (g % 50), 'key-' || (g % 10000), jsonb_build_object('n', g, 'text', repeat('p', 200)), \
                '{\"content-type\":\"application/json\"}'::jsonb, \
                CASE WHEN g % 997 < 937 THEN 'sent' WHEN g % 997 < 962 THEN 'pending' \
                     WHEN g % 997 < 967 THEN 'processing' ELSE 'dead' END, \
                CASE WHEN g % 997 >= 967 THEN 'HTTP ' || (500 + g % 4) || ' from receiver' END, \
                now() - g * interval '1 second', now() - g * interval '1 second', now() + interval '1 day', \
                CASE WHEN g % 997 BETWEEN 962 AND 966 THEN now() END, \
                CASE WHEN g % 997 BETWEEN 962 AND 966 THEN now() + interval '1 day' END \
           FROM generate_series(1, 1000000) AS g",
    )
    .await;
    db.execute(
        "INSERT INTO inbox (source, idempotency_key, payload, state, consumption, correlation_id, \
                            last_error, created_at, claimed_at, lease_expires_at) \
         SELECT 'source' || (g % 5), 'evt-' || g, jsonb_build_object('n', g), \
                CASE WHEN g % 997 < 977 THEN 'processed' WHEN g % 997 < 985 THEN 'pending' \
                     WHEN g % 997 < 987 THEN 'processing' ELSE 'dead' END, \
                CASE WHEN g % 997 BETWEEN 977 AND 984 THEN 'pull' ELSE 'push' END, \
                'corr-' || g, CASE WHEN g % 997 >= 987 THEN 'no route' END, now() - g * interval '1 second', \
                CASE WHEN g % 997 BETWEEN 985 AND 986 THEN now() END, \
                CASE WHEN g % 997 BETWEEN 985 AND 986 THEN now() + interval '1 day' END \
           FROM generate_series(1, 1000000) AS g",
    )
    .await;
    db.execute("VACUUM ANALYZE outbox").await;
    db.execute("VACUUM ANALYZE inbox").await;
    let sql = db.pool().await;
    let outbox_id: Uuid = sqlx::query_scalar("SELECT id FROM outbox WHERE state = 'dead' LIMIT 1")
        .fetch_one(&sql)
        .await
        .expect("a dead outbox row");
    let inbox_id: Uuid = sqlx::query_scalar("SELECT id FROM inbox WHERE state = 'dead' LIMIT 1")
        .fetch_one(&sql)
        .await
        .expect("a dead inbox row");

    let http = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .expect("HTTP client");
    let base = format!("http://127.0.0.1:{management}");
    let get = |path: String| {
        http.get(format!("{base}{path}"))
            .header("authorization", format!("Bearer {TOKEN}"))
            .send()
    };
    // The second page's link, as the first page writes it.
    let first = get("/console/dead/outbox".to_owned())
        .await
        .expect("GET")
        .text()
        .await
        .expect("page");
    let next = first
        .split("id=\"next\" href=\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .expect("a next-page link")
        .replace("&amp;", "&");
    let day_ago: String = sqlx::query_scalar(
        "SELECT to_char((now() - interval '1 day') AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI')",
    )
    .fetch_one(&sql)
    .await
    .expect("a time a day ago");
    let views = [
        ("overview", "/console".to_owned()),
        ("overview refresh", "/console/overview.part".to_owned()),
        ("dead outbox, no filter", "/console/dead/outbox".to_owned()),
        ("dead outbox, next page", next),
        (
            "dead outbox, one topic",
            "/console/dead/outbox?topic=topic.7".to_owned(),
        ),
        (
            "dead outbox, a destination (11 topics)",
            "/console/dead/outbox?destination=billing".to_owned(),
        ),
        (
            "dead outbox, one key",
            "/console/dead/outbox?key=key-977".to_owned(),
        ),
        (
            "dead outbox, error text matching nothing",
            "/console/dead/outbox?error=no+such+failure".to_owned(),
        ),
        (
            "dead outbox, created in the last day",
            format!("/console/dead/outbox?from={day_ago}"),
        ),
        ("outbox row detail", format!("/console/outbox/{outbox_id}")),
        ("dead inbox, no filter", "/console/dead/inbox".to_owned()),
        (
            "dead inbox, one source",
            "/console/dead/inbox?source=source4".to_owned(),
        ),
        ("inbox row detail", format!("/console/inbox/{inbox_id}")),
        (
            "lookup by id",
            format!("/console/lookup?by=id&q={inbox_id}"),
        ),
        (
            "lookup by idempotency key",
            "/console/lookup?by=key&q=evt-777".to_owned(),
        ),
        (
            "lookup by correlation id",
            "/console/lookup?by=correlation&q=corr-777".to_owned(),
        ),
    ]
    .map(|(name, path)| View { name, path });

    let mut report = String::from("view | p50 ms | max ms (11 requests)\n");
    let mut slow = Vec::new();
    for view in &views {
        let mut times = Vec::new();
        for round in 0..12 {
            let start = std::time::Instant::now();
            let answer = get(view.path.clone()).await.expect("GET");
            let status = answer.status().as_u16();
            let body = answer.text().await.expect("body");
            let took = start.elapsed();
            assert_eq!(status, 200, "{}: {body}", view.name);
            if round > 0 {
                times.push(took);
            }
        }
        let (p50, max) = p50_max(&mut times);
        report.push_str(&format!(
            "{} | {:.1} | {:.1}\n",
            view.name,
            p50.as_secs_f64() * 1000.0,
            max.as_secs_f64() * 1000.0
        ));
        if p50 >= Duration::from_millis(300) {
            slow.push((view.name, p50));
        }
    }

    // The replay confirmation of "all matching" counts the rows: a POST with the session's token.
    let (cookie, csrf) = sign_in(&http, &base).await;
    let mut times = Vec::new();
    for round in 0..12 {
        let start = std::time::Instant::now();
        let answer = http
            .post(format!("{base}/console/dead/outbox/replay"))
            .header("cookie", &cookie)
            .header("origin", &base)
            .header("content-type", "application/x-www-form-urlencoded")
            .body(format!("csrf={csrf}&scope=matching&destination=billing"))
            .send()
            .await
            .expect("POST");
        let status = answer.status().as_u16();
        let body = answer.text().await.expect("body");
        let took = start.elapsed();
        assert_eq!(status, 200, "{body}");
        assert!(body.contains("id=\"confirm-count\">"), "{body}");
        if round > 0 {
            times.push(took);
        }
    }
    let (p50, max) = p50_max(&mut times);
    report.push_str(&format!(
        "replay confirmation, a destination | {:.1} | {:.1}\n",
        p50.as_secs_f64() * 1000.0,
        max.as_secs_f64() * 1000.0
    ));
    if p50 >= Duration::from_millis(300) {
        slow.push(("replay confirmation", p50));
    }
    println!("{report}");
    if let Some(path) = std::env::var_os("QB_CONSOLE_TIMES") {
        std::fs::write(path, &report).expect("write the times");
    }
    assert_eq!(
        states_mix(&sql).await,
        (25_075, 5_015, 30_090),
        "the dispatcher left the seeded states alone"
    );

    sql.close().await;
    qb.terminate();
    let _ = qb.wait_exit(Duration::from_secs(10)).await;
    db.drop_database().await;
    assert!(slow.is_empty(), "median over 300 ms: {slow:?}");
}

/// Pending, processing and dead outbox rows.
async fn states_mix(sql: &PgPool) -> (i64, i64, i64) {
    sqlx::query_as(
        "SELECT count(*) FILTER (WHERE state = 'pending'), count(*) FILTER (WHERE state = 'processing'), \
                count(*) FILTER (WHERE state = 'dead') FROM outbox",
    )
    .fetch_one(sql)
    .await
    .expect("count states")
}
