//! A small W3C WebDriver client over HTTP, enough to drive Debian's headless Chromium through
//! `chromedriver`: open a page, find elements, click, type, read text, run a script, take a
//! screenshot and read the browser's console log.
//!
//! The binaries come from Debian's `chromium` and `chromium-driver` packages (scripts/services.sh
//! installs them and prints `QB_TEST_CHROMEDRIVER` and `QB_TEST_CHROMIUM`).

use base64::Engine as _;
use serde_json::{Value, json};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// The key of an element reference in W3C WebDriver answers.
const ELEMENT: &str = "element-6066-11e4-a52e-4f735466cecf";

/// One chromedriver process and one browser session in it.
pub struct Browser {
    driver: Child,
    http: reqwest::Client,
    session: String,
}

/// An element of the current page.
#[derive(Debug, Clone)]
pub struct Element(String);

fn binary(variable: &str, default: &str) -> String {
    let path = std::env::var(variable).unwrap_or_else(|_| default.to_owned());
    assert!(
        Path::new(&path).exists(),
        "{path} is missing: install Debian's chromium and chromium-driver (scripts/services.sh does) or set {variable}"
    );
    path
}

impl Browser {
    /// Starts chromedriver on a free port and opens a headless Chromium session that keeps every
    /// console message of the page.
    pub async fn start() -> Self {
        let driver_path = binary("QB_TEST_CHROMEDRIVER", "/usr/bin/chromedriver");
        let chromium = binary("QB_TEST_CHROMIUM", "/usr/bin/chromium");
        let port = crate::free_port();
        let driver = Command::new(driver_path)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start chromedriver");
        let http = crate::http();
        let base = format!("http://127.0.0.1:{port}");
        crate::wait_until("chromedriver to answer", Duration::from_secs(20), || {
            let http = http.clone();
            let url = format!("{base}/status");
            async move {
                let answer = http.get(url).send().await.ok()?;
                let body: Value = answer.json().await.ok()?;
                body["value"]["ready"].as_bool().filter(|ready| *ready)
            }
        })
        .await;
        let capabilities = json!({
            "capabilities": {"alwaysMatch": {
                "browserName": "chrome",
                "goog:chromeOptions": {
                    "binary": chromium,
                    "args": ["--headless=new", "--no-sandbox", "--disable-gpu",
                             "--disable-dev-shm-usage", "--window-size=1100,800"]
                },
                "goog:loggingPrefs": {"browser": "ALL"}
            }}
        });
        let answer: Value = http
            .post(format!("{base}/session"))
            .json(&capabilities)
            .send()
            .await
            .expect("new session")
            .json()
            .await
            .expect("new session answer");
        let id = answer["value"]["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("no session: {answer}"))
            .to_owned();
        Self {
            driver,
            http,
            session: format!("{base}/session/{id}"),
        }
    }

    async fn call(&self, method: reqwest::Method, path: &str, body: Option<Value>) -> Value {
        let mut request = self.http.request(method, format!("{}{path}", self.session));
        if let Some(body) = body {
            request = request.json(&body);
        }
        let answer: Value = request
            .send()
            .await
            .unwrap_or_else(|e| panic!("WebDriver {path}: {e}"))
            .json()
            .await
            .unwrap_or_else(|e| panic!("WebDriver {path} answer: {e}"));
        if answer["value"]["error"].is_string() {
            panic!("WebDriver {path}: {}", answer["value"]);
        }
        answer["value"].clone()
    }

    /// Opens `url` and waits for it to load.
    pub async fn go(&self, url: &str) {
        self.call(reqwest::Method::POST, "/url", Some(json!({ "url": url })))
            .await;
    }

    /// The current address.
    pub async fn url(&self) -> String {
        self.call(reqwest::Method::GET, "/url", None)
            .await
            .as_str()
            .unwrap_or_default()
            .to_owned()
    }

    /// The page's HTML as the browser holds it now.
    pub async fn source(&self) -> String {
        self.call(reqwest::Method::GET, "/source", None)
            .await
            .as_str()
            .unwrap_or_default()
            .to_owned()
    }

    /// Every element matching `css`.
    pub async fn all(&self, css: &str) -> Vec<Element> {
        let found = self
            .call(
                reqwest::Method::POST,
                "/elements",
                Some(json!({ "using": "css selector", "value": css })),
            )
            .await;
        found
            .as_array()
            .map(|list| {
                list.iter()
                    .filter_map(|e| e[ELEMENT].as_str().map(|id| Element(id.to_owned())))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The first element matching `css`; panics when there is none.
    pub async fn find(&self, css: &str) -> Element {
        match self.all(css).await.into_iter().next() {
            Some(element) => element,
            None => {
                let source = self.source().await;
                let head: String = source.chars().take(3000).collect();
                panic!(
                    "no element matches {css} at {}; page:\n{head}",
                    self.url().await
                )
            }
        }
    }

    /// Clicks `element` (a submit button submits and the next page loads).
    pub async fn click(&self, element: &Element) {
        self.call(
            reqwest::Method::POST,
            &format!("/element/{}/click", element.0),
            Some(json!({})),
        )
        .await;
    }

    /// Clicks `element`, which submits a form or follows a link, and waits until the next page
    /// has loaded (the old page's marker is gone and the new document is complete).
    pub async fn click_to_load(&self, element: &Element) {
        self.script("window.qbOldPage = true; return null;").await;
        self.click(element).await;
        crate::wait_until("the next page to load", Duration::from_secs(20), || async {
            let loaded = self
                .script(
                    "return window.qbOldPage === undefined && document.readyState === 'complete';",
                )
                .await;
            (loaded == Value::Bool(true)).then_some(())
        })
        .await;
    }

    /// Types `text` into `element` after clearing it.
    pub async fn type_into(&self, element: &Element, text: &str) {
        self.call(
            reqwest::Method::POST,
            &format!("/element/{}/clear", element.0),
            Some(json!({})),
        )
        .await;
        self.call(
            reqwest::Method::POST,
            &format!("/element/{}/value", element.0),
            Some(json!({ "text": text })),
        )
        .await;
    }

    /// The rendered text of `element`.
    pub async fn text(&self, element: &Element) -> String {
        self.call(
            reqwest::Method::GET,
            &format!("/element/{}/text", element.0),
            None,
        )
        .await
        .as_str()
        .unwrap_or_default()
        .to_owned()
    }

    /// The rendered text of the first element matching `css`.
    pub async fn text_of(&self, css: &str) -> String {
        let element = self.find(css).await;
        self.text(&element).await
    }

    /// Runs `script` (a function body) in the page and returns its value.
    pub async fn script(&self, script: &str) -> Value {
        self.call(
            reqwest::Method::POST,
            "/execute/sync",
            Some(json!({ "script": script, "args": [] })),
        )
        .await
    }

    /// Saves a PNG of the window to `path`.
    pub async fn screenshot(&self, path: &Path) {
        let data = self.call(reqwest::Method::GET, "/screenshot", None).await;
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(data.as_str().unwrap_or_default())
            .expect("screenshot is base64");
        std::fs::write(path, bytes).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    }

    /// The browser console messages since the last call: (level, message).
    pub async fn console_log(&self) -> Vec<(String, String)> {
        let entries = self
            .call(
                reqwest::Method::POST,
                "/se/log",
                Some(json!({ "type": "browser" })),
            )
            .await;
        entries
            .as_array()
            .map(|list| {
                list.iter()
                    .map(|e| {
                        (
                            e["level"].as_str().unwrap_or_default().to_owned(),
                            e["message"].as_str().unwrap_or_default().to_owned(),
                        )
                    })
                    .collect()
            })
            .unwrap_or_default()
    }
}

impl Browser {
    /// Ends the session (which closes Chromium), then the driver.
    pub async fn quit(self) {
        let _ = self.http.delete(&self.session).send().await;
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        // The session goes with its driver; chromedriver ends the browser it started.
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}
