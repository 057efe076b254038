//! A JSONata engine written for QueueBox: safe for untrusted expressions in a long-lived service.
