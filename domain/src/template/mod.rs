//! `{{ name }}` templates: the source topic template, the broker address templates and the routing
//! key templates.
//!
//! [`text`] parses the shared format and knows no names. The row templates of the delivery side
//! build on it: [`row`] is the outbox row a template reads, [`placeholder`] the names a row
//! template may hold, [`address`] the RabbitMQ exchange, Kafka topic and NATS subject (an unknown
//! name stops the start), [`routing_key`] the RabbitMQ routing key and Kafka record key (an unknown
//! name renders a default) and [`key_choice`] which of those templates sets a message's key.

pub mod address;
pub mod key_choice;
pub mod placeholder;
pub mod routing_key;
pub mod row;
pub mod text;

pub use text::{Segment, Template, TemplateError};
