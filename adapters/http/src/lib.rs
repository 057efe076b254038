//! Inbound HTTP of QueueBox (salvo): inbox routes, health, metrics, admin.
