//! The `queuebox` binary: command line, wiring of the compiled-in adapters, start and shutdown.

fn main() {}
