//! A real HTTP receiver on 127.0.0.1 that records every request and answers with a per-test policy.
//!
//! The end-to-end tests point a destination's `baseUrl` at [`Receiver::url`]. The receiver keeps
//! every request it got, in arrival order, with the status it chose for it, so a test can assert
//! what QueueBox sent (headers, body, order, repeats) and what it was told.
//!
//! The status is chosen when the request arrives, under one lock, so a seeded random policy gives
//! the same sequence of answers for the same sequence of arrivals. A delay or a hold applies after
//! the choice: a request that is held is recorded at once, which lets a test see that a publish is
//! in flight.

use crate::wait_until;
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinSet;

/// How the receiver picks the status of each request.
#[derive(Debug, Clone)]
pub enum Answer {
    /// The same status for every request.
    Status(u16),
    /// `statuses[i]` for the i-th request, then `then` for every later one.
    Sequence {
        /// The first answers, in order.
        statuses: Vec<u16>,
        /// The answer once the sequence is used up.
        then: u16,
    },
    /// `failure` with probability `rate`, `success` otherwise, from a generator seeded with `seed`.
    RandomFailures {
        /// The chance of a failure, from 0 to 1.
        rate: f64,
        /// The seed of the generator, so a run can be repeated.
        seed: u64,
        /// The status of a failed request.
        failure: u16,
        /// The status of a successful request.
        success: u16,
    },
    /// A redirect: `status` (a 3xx) with a `Location` header.
    Redirect {
        /// The 3xx status.
        status: u16,
        /// The `Location` header value.
        location: String,
    },
    /// `status` with a fixed JSON body (a token endpoint, for example).
    Json {
        /// The status.
        status: u16,
        /// The body text.
        body: String,
    },
    /// `status` with a body that repeats the request the way a careless server does: every
    /// header line, every header value on its own with no name before it, and the request body.
    Echo {
        /// The status.
        status: u16,
    },
}

/// The answer, plus how long to wait before giving it.
#[derive(Debug, Clone)]
pub struct Policy {
    answer: Answer,
    delay: Duration,
    held: bool,
}

impl Policy {
    /// Always `status`, at once.
    pub fn status(status: u16) -> Self {
        Self::answer(Answer::Status(status))
    }

    /// `statuses` in order, then `then`.
    pub fn sequence(statuses: &[u16], then: u16) -> Self {
        Self::answer(Answer::Sequence {
            statuses: statuses.to_vec(),
            then,
        })
    }

    /// 500 with probability `rate`, 200 otherwise, from a generator seeded with `seed`.
    pub fn random_failures(rate: f64, seed: u64) -> Self {
        Self::answer(Answer::RandomFailures {
            rate,
            seed,
            failure: 500,
            success: 200,
        })
    }

    /// A `302 Found` to `location`.
    pub fn redirect(location: &str) -> Self {
        Self::answer(Answer::Redirect {
            status: 302,
            location: location.to_owned(),
        })
    }

    /// `status` with the JSON text `body`.
    pub fn json(status: u16, body: &str) -> Self {
        Self::answer(Answer::Json {
            status,
            body: body.to_owned(),
        })
    }

    /// `status` with a body that echoes the request's headers and body (see [`Answer::Echo`]).
    pub fn echo(status: u16) -> Self {
        Self::answer(Answer::Echo { status })
    }

    /// Any [`Answer`], at once.
    pub fn answer(answer: Answer) -> Self {
        Self {
            answer,
            delay: Duration::ZERO,
            held: false,
        }
    }

    /// Waits `delay` before answering.
    pub fn with_delay(mut self, delay: Duration) -> Self {
        self.delay = delay;
        self
    }

    /// Holds every request until [`Receiver::release`] is called, then answers.
    pub fn held(mut self) -> Self {
        self.held = true;
        self
    }
}

/// One request as the receiver saw it.
#[derive(Debug, Clone)]
pub struct Recorded {
    /// 0 for the first request the receiver got, 1 for the next, and so on.
    pub index: usize,
    /// The method, e.g. `POST`.
    pub method: String,
    /// The path and query, e.g. `/events`.
    pub path: String,
    /// Every header in the order received, names in lower case (HTTP/1 names are case-insensitive).
    pub headers: Vec<(String, String)>,
    /// The raw body.
    pub body: Bytes,
    /// The status the receiver chose for it.
    pub status: u16,
    /// When it arrived.
    pub arrived: Instant,
}

impl Recorded {
    /// Every value of header `name` (any letter case).
    pub fn header_values(&self, name: &str) -> Vec<&str> {
        self.headers
            .iter()
            .filter(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
            .collect()
    }

    /// The single value of header `name`; panics when it appears more than once.
    pub fn header(&self, name: &str) -> Option<&str> {
        let values = self.header_values(name);
        assert!(
            values.len() <= 1,
            "header {name} appears {} times: {values:?}",
            values.len()
        );
        values.first().copied()
    }

    /// The body parsed as JSON; panics when it is not JSON.
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|error| {
            panic!(
                "body is not JSON ({error}): {}",
                String::from_utf8_lossy(&self.body)
            )
        })
    }

    /// True when the receiver answered 2xx.
    pub fn succeeded(&self) -> bool {
        (200..300).contains(&self.status)
    }
}

/// What the connection tasks share.
struct State {
    policy: Policy,
    /// Answers chosen so far (the position in a [`Answer::Sequence`]).
    answered: usize,
    /// The generator of [`Answer::RandomFailures`].
    random: SplitMix64,
    requests: Vec<Recorded>,
}

/// A running receiver. Dropping it stops it and closes every connection.
pub struct Receiver {
    addr: SocketAddr,
    state: Arc<Mutex<State>>,
    release: watch::Sender<bool>,
    server: tokio::task::JoinHandle<()>,
}

impl Receiver {
    /// Binds 127.0.0.1 on a free port and starts answering with `policy`.
    pub async fn start(policy: Policy) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind the receiver");
        let addr = listener.local_addr().expect("receiver address");
        let seed = match &policy.answer {
            Answer::RandomFailures { seed, .. } => *seed,
            _ => 0,
        };
        let state = Arc::new(Mutex::new(State {
            policy,
            answered: 0,
            random: SplitMix64(seed),
            requests: Vec::new(),
        }));
        let (release, released) = watch::channel(false);
        let server = tokio::spawn(serve(listener, Arc::clone(&state), released));
        Self {
            addr,
            state,
            release,
            server,
        }
    }

    /// `http://127.0.0.1:<port>`, for a destination's `baseUrl`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Replaces the policy for the requests that arrive from now on (a random generator restarts
    /// from the new seed, a sequence from its start).
    pub fn set_policy(&self, policy: Policy) {
        let mut state = self.lock();
        if let Answer::RandomFailures { seed, .. } = &policy.answer {
            state.random = SplitMix64(*seed);
        }
        state.answered = 0;
        state.policy = policy;
    }

    /// Lets every held request answer, and stops holding later ones.
    pub fn release(&self) {
        self.release.send_replace(true);
    }

    /// Every request so far, in arrival order.
    pub fn requests(&self) -> Vec<Recorded> {
        self.lock().requests.clone()
    }

    /// How many requests arrived so far.
    pub fn count(&self) -> usize {
        self.lock().requests.len()
    }

    /// Waits until at least `n` requests arrived, then returns all of them; panics after `deadline`.
    pub async fn wait_for(&self, n: usize, deadline: Duration) -> Vec<Recorded> {
        wait_until(
            &format!("{n} requests at the receiver"),
            deadline,
            || async {
                let requests = self.requests();
                (requests.len() >= n).then_some(requests)
            },
        )
        .await
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        lock(&self.state)
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        // The accept task owns the connection tasks, so aborting it closes every connection.
        self.server.abort();
    }
}

fn lock(state: &Mutex<State>) -> MutexGuard<'_, State> {
    // A panicking test thread may poison the lock; the records are still worth reading.
    state
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

async fn serve(listener: TcpListener, state: Arc<Mutex<State>>, released: watch::Receiver<bool>) {
    let mut connections = JoinSet::new();
    loop {
        let (stream, _) = match listener.accept().await {
            Ok(accepted) => accepted,
            // Out of file descriptors or a reset before accept: keep serving the others.
            Err(_) => {
                tokio::time::sleep(Duration::from_millis(10)).await;
                continue;
            }
        };
        while connections.try_join_next().is_some() {}
        let state = Arc::clone(&state);
        let released = released.clone();
        connections.spawn(async move {
            let service =
                service_fn(move |request| handle(request, Arc::clone(&state), released.clone()));
            // A client that goes away mid-request (a timeout, a killed process) ends the
            // connection with an error; that is part of what the tests provoke.
            let _ = http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

async fn handle(
    request: Request<Incoming>,
    state: Arc<Mutex<State>>,
    mut released: watch::Receiver<bool>,
) -> Result<Response<Full<Bytes>>, Infallible> {
    let arrived = Instant::now();
    let method = request.method().to_string();
    let path = request
        .uri()
        .path_and_query()
        .map(|p| p.to_string())
        .unwrap_or_default();
    let headers = request
        .headers()
        .iter()
        .map(|(name, value)| {
            (
                name.as_str().to_owned(),
                String::from_utf8_lossy(value.as_bytes()).into_owned(),
            )
        })
        .collect();
    let body = match request.into_body().collect().await {
        Ok(collected) => collected.to_bytes(),
        // The sender went away before the body was complete: nothing was delivered.
        Err(_) => return Ok(plain(StatusCode::BAD_REQUEST)),
    };

    let (choice, delay, held) = {
        let mut state = lock(&state);
        let choice = choose(&mut state);
        let index = state.requests.len();
        state.requests.push(Recorded {
            index,
            method,
            path,
            headers,
            body,
            status: choice.status,
            arrived,
        });
        let body = match choice.body {
            Body::Echo => Body::Text(echo(&state.requests[index])),
            other => other,
        };
        (
            Choice { body, ..choice },
            state.policy.delay,
            state.policy.held,
        )
    };

    if held {
        // Ends when release() is called; a dropped sender (the receiver is gone) ends it too.
        let _ = released.wait_for(|released| *released).await;
    }
    if !delay.is_zero() {
        tokio::time::sleep(delay).await;
    }
    let status = StatusCode::from_u16(choice.status).unwrap_or(StatusCode::OK);
    let mut response = match choice.body {
        Body::Text(text) => with_body(status, Bytes::from(text)),
        Body::Empty | Body::Echo => plain(status),
    };
    if let Some(location) = choice.location
        && let Ok(value) = location.parse()
    {
        response
            .headers_mut()
            .insert(hyper::header::LOCATION, value);
    }
    Ok(response)
}

/// The body of an answer.
enum Body {
    /// The default `{}`.
    Empty,
    /// A fixed text.
    Text(String),
    /// The request echoed back (built once the request is recorded).
    Echo,
}

/// What the receiver answers to one request.
struct Choice {
    status: u16,
    location: Option<String>,
    body: Body,
}

/// The echo of [`Answer::Echo`]: header lines, then the header values alone, then the body.
fn echo(request: &Recorded) -> String {
    let mut text = format!("you sent {} {}\n", request.method, request.path);
    for (name, value) in &request.headers {
        text.push_str(&format!("{name}: {value}\n"));
    }
    let values: Vec<&str> = request.headers.iter().map(|(_, v)| v.as_str()).collect();
    text.push_str(&format!("values | {} |\n", values.join(" | ")));
    text.push_str("body ");
    text.push_str(&String::from_utf8_lossy(&request.body));
    text
}

/// The status, `Location` and body of the next request.
fn choose(state: &mut State) -> Choice {
    let position = state.answered;
    state.answered += 1;
    let status = |status: u16| Choice {
        status,
        location: None,
        body: Body::Empty,
    };
    match &state.policy.answer {
        Answer::Status(code) => status(*code),
        Answer::Sequence { statuses, then } => status(*statuses.get(position).unwrap_or(then)),
        Answer::RandomFailures {
            rate,
            failure,
            success,
            ..
        } => {
            let (rate, failure, success) = (*rate, *failure, *success);
            if state.random.next_f64() < rate {
                status(failure)
            } else {
                status(success)
            }
        }
        Answer::Redirect {
            status: code,
            location,
        } => Choice {
            location: Some(location.clone()),
            ..status(*code)
        },
        Answer::Json { status: code, body } => Choice {
            body: Body::Text(body.clone()),
            ..status(*code)
        },
        Answer::Echo { status: code } => Choice {
            body: Body::Echo,
            ..status(*code)
        },
    }
}

fn plain(status: StatusCode) -> Response<Full<Bytes>> {
    with_body(status, Bytes::from_static(b"{}"))
}

fn with_body(status: StatusCode, body: Bytes) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(body));
    *response.status_mut() = status;
    response.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("application/json"),
    );
    response
}

/// A small seeded generator (SplitMix64): deterministic, and no dependency for it.
struct SplitMix64(u64);

impl SplitMix64 {
    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1).
    fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_generator_is_seeded_and_roughly_uniform() {
        let mut a = SplitMix64(7);
        let mut b = SplitMix64(7);
        let draws: Vec<f64> = (0..10_000).map(|_| a.next_f64()).collect();
        assert!(
            draws
                .iter()
                .all(|&x| x == b.next_f64() && (0.0..1.0).contains(&x))
        );
        let below = draws.iter().filter(|&&x| x < 0.1).count();
        assert!((800..1200).contains(&below), "{below}");
    }

    #[tokio::test]
    async fn records_requests_and_answers_a_sequence() {
        let receiver = Receiver::start(Policy::sequence(&[503, 404], 201)).await;
        let client = crate::http();
        let mut statuses = Vec::new();
        for n in 0..3 {
            let response = client
                .post(format!("{}/hook?n={n}", receiver.url()))
                .header("X-Test", "yes")
                .body(format!("{{\"n\":{n}}}"))
                .send()
                .await
                .expect("post");
            statuses.push(response.status().as_u16());
        }
        assert_eq!(statuses, vec![503, 404, 201]);
        let seen = receiver.wait_for(3, Duration::from_secs(5)).await;
        assert_eq!(seen[2].path, "/hook?n=2");
        assert_eq!(seen[2].method, "POST");
        assert_eq!(seen[2].header("x-test"), Some("yes"));
        assert_eq!(seen[2].json()["n"], 2);
        assert!(seen[2].succeeded() && !seen[0].succeeded());
    }

    #[tokio::test]
    async fn echo_and_json_answers() {
        let receiver = Receiver::start(Policy::echo(500)).await;
        let response = crate::http()
            .post(format!("{}/e", receiver.url()))
            .header("X-Secret-Thing", "v4lue")
            .body("payload-text")
            .send()
            .await
            .expect("post");
        assert_eq!(response.status().as_u16(), 500);
        let text = response.text().await.expect("body");
        assert!(text.starts_with("you sent POST /e\n"), "{text}");
        assert!(text.contains("x-secret-thing: v4lue\n"), "{text}");
        assert!(text.contains("| v4lue |"), "{text}");
        assert!(text.ends_with("body payload-text"), "{text}");

        receiver.set_policy(Policy::json(200, r#"{"ok":true}"#));
        let response = crate::http().get(receiver.url()).send().await.expect("get");
        assert_eq!(response.status().as_u16(), 200);
        assert_eq!(response.text().await.expect("body"), r#"{"ok":true}"#);
    }

    #[tokio::test]
    async fn a_held_request_is_recorded_at_once_and_answers_after_release() {
        let receiver = Receiver::start(Policy::status(200).held()).await;
        let url = receiver.url();
        let request = tokio::spawn(async move {
            crate::http()
                .post(url)
                .body("{}")
                .send()
                .await
                .map(|r| r.status().as_u16())
        });
        receiver.wait_for(1, Duration::from_secs(5)).await;
        assert!(!request.is_finished());
        receiver.release();
        assert_eq!(request.await.expect("join").expect("post"), 200);
    }
}
