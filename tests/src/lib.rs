//! Helpers shared by the end-to-end tests: service addresses, fresh databases, the binary as a process.
