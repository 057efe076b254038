//! The bodies of QueueBox's fuzz targets: each takes the fuzzer's bytes, feeds them to one input
//! path an attacker or a careless operator controls, and checks what must hold whatever the
//! input: no panic, and the few properties named in each target.
//!
//! - [`config`]: the configuration loader (a YAML file plus `QUEUEBOX_` variables and `${NAME}`
//!   placeholders);
//! - [`inbox`]: the inbox request path after the HTTP layer (headers, body, each credential
//!   kind, filters, extraction, a transform, the store);
//! - [`jsonpath`]: the JSONPath extractor on a JSON document;
//! - [`template`]: the template renderer (address, routing key, Kafka key and topic templates).
//!
//! `cargo +nightly fuzz run <target> --features libfuzzer` runs one under libFuzzer (see
//! `fuzz/README.md`); `tests/corpus.rs` replays every checked-in corpus file on stable Rust.

mod config;
mod inbox;
mod jsonpath;
mod split;
mod template;

pub use config::config;
pub use inbox::inbox;
pub use jsonpath::jsonpath;
pub use template::template;

/// A target body.
pub type Target = fn(&[u8]);

/// The targets by name, as `fuzz_targets/` and `corpus/` name them.
pub const TARGETS: [(&str, Target); 4] = [
    ("config", config),
    ("inbox", inbox),
    ("jsonpath", jsonpath),
    ("template", template),
];
