//! QueueBox use cases: dispatcher, ingest, relay, replay, retention, health, shutdown.
