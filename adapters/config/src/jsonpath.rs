//! The definite-JSONPath rule of the source key paths.
//!
//! The parser lives in the domain (`queuebox_domain::jsonpath`), because the ingest pipeline
//! evaluates the same paths at receipt: one parser means a path that loads is a path that runs.

pub use queuebox_domain::jsonpath::check_definite;
